"""The ``commitlab`` command line: :func:`main` (the ``commitlab`` script, ``python -m runtime``)."""

from __future__ import annotations

import os
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
        from runtime.cli.terminal import noting_sigint
    finally:  # the process's own handlers again: the command sets its own while it runs a job
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if previous[signal.SIGINT] is not signal.default_int_handler:  # a caller's own handler stays
        return command(argv)
    signal.signal(signal.SIGINT, noting_sigint)  # still a KeyboardInterrupt, and noted
    try:
        return command(argv)
    finally:
        signal.signal(signal.SIGINT, previous[signal.SIGINT])


def _before_the_command(signum: int, _frame: Any) -> None:
    name = signal.Signals(signum).name
    print(f"{name}: stopped before the command started (nothing ran; no result.json)", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def script(argv: list[str] | None = None) -> int:
    """The ``commitlab`` script and ``python -m runtime``: :func:`main`, and a run a signal stopped
    ends with the signal's exit code at once once its record is written and Ray and Spark are
    stopped. Ray's core worker can crash in its own teardown at interpreter exit after a stop that
    came while ``ray.init`` connected (Ray 2.52.1: SIGSEGV, exit -11, after the record was written),
    which would hide the stop's exit code; nothing of the run is left for the exit handlers then."""
    code = main(argv)
    if code in {128 + int(sig) for sig in STOPPING_SIGNALS} and "ray" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


main = _guarded_main

__all__ = ["main", "script"]
