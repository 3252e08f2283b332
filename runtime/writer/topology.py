"""Where ``runtime/cli.py``'s ``cmd_run`` imports ``validate_job`` from until it calls
:func:`runtime.job.prepare.prepare_job`; remove this module then, with its ``ignore_imports``
line in pyproject.toml."""

from runtime.job.prepare import validate_job

__all__ = ["validate_job"]
