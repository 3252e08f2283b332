"""The terminal a command runs in: its console, its signals, and where Ray's and Spark's own
output goes."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from runtime.job.stop import StartUpStopped, StopRequest

# one stop delivered twice is one stop: timeout(1) signals the command, then its process group
# (the command again); a second signal this soon after the first is that one, not a second Ctrl-C
SAME_STOP_S = 1.0
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopNow(KeyboardInterrupt):
    """A second stopping signal: the command ends at once, with the exit code of the first."""

    def __init__(self, first: str) -> None:
        super().__init__(first)
        self.exit_code = exit_code_of(first)


def ignored(sig: signal.Signals) -> bool:
    """Whether the process ignores ``sig`` (it was started so: ``nohup``, a background job)."""
    return signal.getsignal(sig) is signal.SIG_IGN


def exit_code_of(signal_name: str) -> int:
    """As a shell reports a command a signal ended: 128 + the signal's number (SIGINT 130,
    SIGTERM 143, SIGHUP 129)."""
    return 128 + int(signal.Signals[signal_name]) if signal_name else 130


# a stopping signal after the command's modules loaded and before a job's own handlers (the
# options read, the table prepared: :func:`noting_stop`); :func:`interruptible` stops the job with it
_noted: list[str] = []


class StoppedBeforeTheJob(KeyboardInterrupt):
    """A stopping signal before a job's handlers: the command ends, with the signal's exit code."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.exit_code = exit_code_of(name)


# set once a command that runs a job has read its arguments: a first stop from then on is left to
# the job, which stops in its start-up and writes its record (:func:`defer_stops_to_the_job`)
_deferred: list[bool] = []


def defer_stops_to_the_job() -> None:
    """A command that starts a job calls this first: a stopping signal from now until the job's own
    handlers (:func:`interruptible`, a second or two of option checks) is noted and not raised, so
    the job stops in its start-up and still writes its record (``interrupted``, nothing committed)
    instead of the command ending with no record. A second signal meanwhile ends it at once."""
    _deferred.append(True)


def note_stop(name: str) -> None:
    """A stop that came while the command's modules loaded, left to the job (:func:`interruptible`
    stops it in its start-up); a signal from now on is a second one."""
    _noted.append(name)


def noting_stop(signum: int, _frame: Any) -> None:
    """SIGINT, SIGTERM or SIGHUP before a job's handlers: the signal is noted, so that a library that
    catches every exception while it loads cannot make the stop vanish (the run would go on and
    finish): the job it starts stops at once, in its start-up. Before a job's command has read its
    arguments (or for a command without a job, or for a second signal) the command ends there too
    (a KeyboardInterrupt with the signal's exit code)."""
    name = signal.Signals(signum).name
    first = not _noted
    _noted.append(name)
    if _deferred and first:
        print(f"{name}: the job stops as it starts and writes its record", file=sys.stderr, flush=True)
        return
    raise StoppedBeforeTheJob(name)


@contextlib.contextmanager
def interruptible(console: Console) -> Iterator[StopRequest]:
    """SIGINT (Ctrl-C), SIGTERM (a container's or a service manager's stop) and SIGHUP (the
    terminal closed) ask the running job to stop: it stops at the watchdog's next poll and still
    writes its record. A second signal (later than :data:`SAME_STOP_S`) ends the command at once
    (:class:`StopNow`), saying whether the record was written, unless all that is left is ending
    the command's processes (``stop.ending``), which it lets finish; any further one is ignored."""
    stop = StopRequest()

    def on_signal(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGTERM:
            # a SIGTERM that met absl's failure handler (Ray's core worker installs it as ray.init
            # connects) comes here with a 3 s alarm armed that aborts the process: disarmed
            signal.alarm(0)
        if stop.request(name):
            console.print(
                f"[yellow]{name}: stopping the job and writing its record (a second signal stops at once)[/yellow]"
            )
            if stop.abortable:  # a start-up step that writes nothing ends here
                raise StartUpStopped(name)
            return
        if stop.at_once or time.monotonic() - stop.at < SAME_STOP_S:
            return
        stop.at_once = True
        if stop.ending:  # nothing left but ending the processes: cutting that short would leave them
            console.print(f"[yellow]second signal: {stop.record_state()}; ending the run's processes[/yellow]")
            return
        raise StopNow(stop.signal)

    # a signal the command was started to ignore stays ignored: nohup's SIGHUP, SIGINT in a
    # shell script's background job (as Python itself leaves an ignored SIGINT ignored)
    previous = {sig: signal.signal(sig, on_signal) for sig in STOPPING_SIGNALS if not ignored(sig)}
    _deferred.clear()  # the job's own handlers from here
    if _noted:  # a stop that came before: deferred to the job, or its KeyboardInterrupt swallowed
        stop.request(_noted[0])
        _noted.clear()
        console.print(f"[yellow]{stop.signal} before the job started: stopping it and writing its record[/yellow]")
    try:
        yield stop
    except KeyboardInterrupt as exc:
        if not stop.at_once:
            raise
        # Ray raises a KeyboardInterrupt of its own when the handler ran inside one of its calls
        console.print(f"[yellow]second signal: stopped at once; {stop.record_state()}[/yellow]", highlight=False)
        raise StopNow(stop.signal) from exc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def engines_to_log(path: str | None) -> Iterator[None]:
    """Ray's and Spark's own output (the JVM's log lines, Ray's worker warnings, Python warnings)
    goes to ``path`` instead of the terminal, at the file-descriptor level, so processes Ray and
    Spark start inherit it too; the console keeps its own copy of the terminal (:func:`terminal`).
    ``None`` (``--verbose``) leaves everything where it is."""
    if path is None:
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    streams = sys.stdout, sys.stderr
    with open(path, "a", buffering=1) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        sys.stdout = sys.stderr = log
        try:
            yield
        finally:
            log.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sys.stdout, sys.stderr = streams


class TerminalStream(io.TextIOBase):
    """The console's own copy of standard output. A reader that goes away (``commitlab verify |
    head``) ends the output, not the command: the rest goes to the null device, so the command
    finishes (a run still writes its record) and no ``BrokenPipeError`` reaches the user."""

    def __init__(self, fd: int, encoding: str) -> None:
        self._stream = os.fdopen(fd, "w", buffering=1, encoding=encoding)
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:  # the reader went away (EPIPE), or the terminal closed (EIO, after SIGHUP)
            self._discard()
            return len(text)

    def flush(self) -> None:
        if self._stream.closed:
            return
        try:
            self._stream.flush()
        except OSError:
            self._discard()

    def _discard(self) -> None:
        """Points the descriptor at the null device, so the buffered rest is dropped quietly."""
        self.reader_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding

    def close(self) -> None:
        self.flush()
        self._stream.close()
        super().close()


def terminal() -> Any:
    """What the console writes to: a copy of standard output's descriptor, so that
    :func:`engines_to_log` can move descriptor 1 without moving the console; standard output
    itself when it has no descriptor (a captured stream)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stdout
    return TerminalStream(os.dup(fd), getattr(sys.stdout, "encoding", None) or "utf-8")


def console_width(out: Any) -> int | None:
    """A terminal's own width; elsewhere (a pipe, a CI log) ``COLUMNS`` when it is set, else 150
    columns, so tables are wide rather than folded."""
    if out.isatty() or os.environ.get("COLUMNS", "").strip().isdigit():
        return None  # rich reads the terminal's size, or COLUMNS
    return 150


def engine_log(args: argparse.Namespace, out: str) -> str | None:
    return None if getattr(args, "verbose", False) else os.path.join(out, "logs", "ray-and-spark.log")
