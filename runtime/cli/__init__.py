"""The ``commitlab`` command line: :func:`main` (the ``commitlab`` script, ``python -m runtime``)."""

from runtime.cli.main import main

__all__ = ["main"]
