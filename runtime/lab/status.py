"""How a run ended: the ``status`` of result.json, one word a user and the CLI's exit code read."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """A run's status; the values are result.json's words (a ``str`` each, so JSON and string
    comparisons see the word)."""

    FINISHED = "finished"
    DEADLOCKED = "deadlocked"
    FAILED = "failed"
    TIMED_OUT = "timed-out"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"  # the simulator's verdict: its real-time or virtual-time guard stopped the run

    def __str__(self) -> str:
        return self.value
