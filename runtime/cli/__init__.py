"""The ``commitlab`` command line: :func:`main` (the ``commitlab`` script, ``python -m runtime``)."""

from __future__ import annotations

import signal
import sys
from typing import Any

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _guarded_main(argv: list[str] | None = None) -> int:
    """The command. A stopping signal that comes while its modules load (a second or two, before
    the command's own handlers: :func:`runtime.cli.terminal.interruptible`) ends it there, with
    128 + the signal's number and a line saying nothing ran, rather than a traceback."""
    previous = {sig: signal.signal(sig, _before_the_command) for sig in STOPPING_SIGNALS}
    try:
        from runtime.cli.command import main as command
    finally:  # the process's own handlers again: the command sets its own while it runs a job
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return command(argv)


def _before_the_command(signum: int, _frame: Any) -> None:
    name = signal.Signals(signum).name
    print(f"{name}: stopped before the command started (nothing ran; no result.json)", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


main = _guarded_main

__all__ = ["main"]
