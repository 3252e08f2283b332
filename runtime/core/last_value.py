"""A value worked out again only when what it is worked out of changes.

A bounded search runs one configuration thousands of times; what a run works out of the
configuration alone (the job validated, the jobs' streams) is kept for the last configuration it
was asked for. The key must name everything the value depends on, by value (a configuration's
``repr`` names every field), and the value must be one no run changes (a frozen job, immutable
Arrow tables): then a hit gives what a miss would compute, and no run depends on an earlier one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

__all__ = ["LastValue"]


class LastValue(Generic[V]):
    """The value of the last key asked for; another key computes it again."""

    def __init__(self) -> None:
        self._key: Hashable | None = None
        self._value: V | None = None

    def of(self, key: Hashable, compute: Callable[[], V]) -> V:
        if self._value is None or key != self._key:
            self._value, self._key = compute(), key
        return self._value
