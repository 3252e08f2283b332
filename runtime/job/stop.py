"""A request to stop a running job, and how far its record got.

The command line turns a signal into a :class:`StopRequest` (``runtime.cli.terminal``): the job
sees it at the watchdog's next poll and is cancelled (Flink's cancel: no checkpoint completes after
it), and the host writes the record. A second signal ends the command at once; what it then says
depends on the record's state, which the host keeps here: not written yet, written without its
committed-prefix check, or complete.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class StartUpStopped(KeyboardInterrupt):
    """A stop that came while the run was starting Ray's processes or Spark (:meth:`StopRequest.start_up`):
    the start-up ends there, before any role starts; a KeyboardInterrupt, so that no ``except
    Exception`` of Ray or Spark swallows it."""


class StopRequest(threading.Event):
    """Set by the first stopping signal; ``signal`` names it (SIGINT, SIGTERM, SIGHUP), ``at`` is
    when it came (monotonic seconds). The host reports the record: :meth:`record_written`."""

    def __init__(self) -> None:
        super().__init__()
        self.signal = ""
        self.at = 0.0
        self.record = ""  # the path of result.json once written
        self.record_complete = False  # False while what the run committed is still being checked
        self.abortable = False  # in a start-up step a stop may end at once (start_up)
        self.at_once = False  # a second signal ends the command at once
        self.ending = False  # the record is made: what is left is ending the command's processes

    def request(self, signal: str) -> bool:
        """The first request sets it (True); a later one changes nothing (False)."""
        if self.is_set():
            return False
        self.signal, self.at = signal, time.monotonic()
        self.set()
        return True

    @contextlib.contextmanager
    def start_up(self) -> Iterator[None]:
        """A start-up step that writes nothing to the table (Ray's processes, the stream, Spark's
        start): a stop ends it at once (:class:`StartUpStopped`, raised by the signal's handler),
        rather than after it, which may wait a minute on a Ray the same signal ended."""
        if self.is_set():
            raise StartUpStopped(self.signal)
        self.abortable = True
        try:
            yield
        finally:
            self.abortable = False

    def stopped_start_up(self, exc: KeyboardInterrupt) -> bool:
        """Whether ``exc`` is this stop ending a start-up step (:class:`StartUpStopped`, or the plain
        KeyboardInterrupt Ray raises in its place when the handler ran inside one of its calls),
        not a second signal's end at once."""
        return (
            self.is_set() and not self.at_once and (isinstance(exc, StartUpStopped) or type(exc) is KeyboardInterrupt)
        )

    def record_written(self, path: str, *, complete: bool) -> None:
        self.record, self.record_complete = path, complete

    def record_state(self) -> str:
        """In words, for the line a second signal prints."""
        if not self.record:
            return "result.json was not written: the run was stopped before its record was gathered"
        if not self.record_complete:
            return f"{self.record} was written; what the run committed was not checked (stopped during the check)"
        return f"{self.record} was written, complete"
