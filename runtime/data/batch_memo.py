"""What the write path worked out of an Arrow table, remembered by the table's identity.

A simulator's runs of one job emit the same rounds' tables run after run (the host keeps a job's
shards), and what a source, a write task or a merge works out of a batch (its bytes, its split
into file groups, a flush's deduplicated keys and their hash map orders) depends on the batch's
rows alone. An Arrow table is immutable, so what was worked out of it holds while it lives: an
entry is keyed by the table's ``id`` and holds a weak reference to it (a dead table's id may be
reused), and the entry goes when the table does; a value must not hold the table itself (the
entry would keep it alive). A hit gives what a miss would work out again, so no run depends on
an earlier one; the values are shared, and no caller changes them.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

import pyarrow as pa

T = TypeVar("T")


class BatchMemo(Generic[T]):
    """Values worked out of tables, by the table's identity and ``what`` (the other inputs, e.g.
    a column name); bounded: it starts over when it holds ``size`` entries."""

    def __init__(self, size: int = 8192) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[weakref.ref[pa.Table], T]] = {}
        self._size = size

    def get(self, table: pa.Table, what: Hashable = None) -> T | None:
        """The value remembered for this very table and ``what``, or None."""
        known = self._entries.get((id(table), what))
        return known[1] if known is not None and known[0]() is table else None

    def put(self, table: pa.Table, value: T, what: Hashable = None) -> T:
        """Remembers ``value`` for ``table`` and ``what`` while the table lives; returns it."""
        entries = self._entries
        if len(entries) >= self._size:
            entries.clear()
        key = (id(table), what)

        def forget(_: weakref.ref[pa.Table]) -> None:  # (the table is gone: its id may be reused)
            entries.pop(key, None)

        entries[key] = (weakref.ref(table, forget), value)
        return value
