"""The ``commitlab`` command line: :func:`main` (the ``commitlab`` script, ``python -m runtime``)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# the commands whose job writes its record however it is stopped: a first stop while their modules
# load is left to the job (it stops in its start-up), not the end of the command
JOB_COMMANDS = frozenset({"run", "deadlock"})
CLUSTER_LOST = 4  # runtime.cli.exits.ExitCode.CLUSTER_LOST (its modules load later): a run that lost its Ray cluster


def _guarded_main(argv: list[str] | None = None) -> int:
    """The command. A stopping signal that comes while its modules load (a second or two, before
    the command's own handlers: :func:`runtime.cli.terminal.interruptible`) ends it there, with
    128 + the signal's number and a line saying nothing ran, rather than a traceback, except for a
    job's command (:data:`JOB_COMMANDS`), whose first such stop is left to the job: it stops in its
    start-up and writes its record. One that comes after, before a job's handlers, is noted
    (:func:`runtime.cli.terminal.noting_stop`). Either way a library that swallows the exception
    while it loads cannot make the stop vanish."""
    words = list(sys.argv[1:] if argv is None else argv)
    job_command = next((w for w in words if not w.startswith("-")), None) in JOB_COMMANDS
    # a signal the process was started to ignore (nohup's SIGHUP, a background job's SIGINT) stays ignored
    watched = [sig for sig in STOPPING_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN]
    before = _before_a_job if job_command else _before_the_command
    previous = {sig: signal.signal(sig, before) for sig in watched}
    try:
        from runtime.cli.command import main as command
        from runtime.cli.terminal import note_stop, noting_stop
    finally:  # the process's own handlers again: the command sets its own while it runs a job
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if _stopped_before:  # its SystemExit was swallowed by an import: the command does not start
        return 128 + _stopped_before[0]
    if _left_to_the_job:  # the job stops in its start-up, with its record
        note_stop(_left_to_the_job[0])
        _left_to_the_job.clear()
    # the process's defaults; a caller's own handler (a program that runs the command) stays
    defaults: dict[signal.Signals, Any] = {signal.SIGINT: signal.default_int_handler}
    defaults |= {signal.SIGTERM: signal.SIG_DFL, signal.SIGHUP: signal.SIG_DFL}
    noted = [sig for sig in watched if previous[sig] is defaults[sig]]
    for sig in noted:
        signal.signal(sig, noting_stop)
    try:
        return command(argv)
    finally:
        for sig in noted:
            signal.signal(sig, previous[sig])


_stopped_before: list[int] = []  # the signal that came while the command's modules loaded


_left_to_the_job: list[str] = []  # a first stop while a job command's modules loaded


def _before_a_job(signum: int, frame: Any) -> None:
    """A job command's modules load: a first stop is noted for the job; a second ends the command."""
    if _left_to_the_job:
        _before_the_command(signum, frame)
    name = signal.Signals(signum).name
    _left_to_the_job.append(name)
    print(f"{name}: the job stops as it starts and writes its record", file=sys.stderr, flush=True)


def _before_the_command(signum: int, _frame: Any) -> None:
    name = signal.Signals(signum).name
    if not _stopped_before:
        print(f"{name}: stopped before the command started (nothing ran; no result.json)", file=sys.stderr, flush=True)
    _stopped_before.append(signum)
    raise SystemExit(128 + signum)


def script(argv: list[str] | None = None) -> int:
    """The ``commitlab`` script and ``python -m runtime``: :func:`main`, and a run a signal stopped
    ends with the signal's exit code at once once its record is written and Ray and Spark are
    stopped. Ray's core worker can crash in its own teardown at interpreter exit after a stop that
    came while ``ray.init`` connected (Ray 2.52.1: SIGSEGV, exit -11, after the record was written),
    which would hide the stop's exit code; nothing of the run is left for the exit handlers then. So
    does a run that lost its Ray cluster: Ray's core worker, still trying the GCS, would end the
    process from C++ a minute after it lost it."""
    code = main(argv)
    if code in {CLUSTER_LOST, *(128 + int(sig) for sig in STOPPING_SIGNALS)} and "ray" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


main = _guarded_main

__all__ = ["main", "script"]
