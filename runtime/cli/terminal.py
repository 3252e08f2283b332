"""The terminal a command runs in: its console, its signals, and where Ray's and Spark's own
output goes."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rich.console import Console


@contextlib.contextmanager
def interruptible(console: Console) -> Iterator[threading.Event]:
    """SIGTERM is Ctrl-C. The first one asks the running job to stop (it stops at the watchdog's
    next poll and still writes its record); a second one interrupts at once."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        console.print(f"[yellow]{signal.Signals(signum).name}: stopping the job and writing its record[/yellow]")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
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
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        if self._stream.closed:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
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
