"""The verdicts of the last few comparisons of a table's snapshot with its expected state, by value.

A bounded search verifies every run that finishes, hundreds or thousands of them, and most end
in one of a few tables: the same rows, the same commit times and file names (a one-writer
message-bus check at bound 2 verifies 142 runs holding 8 distinct tables). A comparison
(:func:`runtime.lab.verify.compare`) is a pure function of the two tables' values, the key and
the partition field, so a table equal to one compared before gets that comparison's verdict, a
copy of it: a verdict per run as before, with the same figures and samples.

Equal means Arrow's ``Table.equals``: the same schema and the same values in the same order,
which is the comparison's whole input. Arrow's equality is exact for every type but floats, where
``-0.0`` equals ``0.0`` and the comparison tells them apart (by their bits), so a table holding a
float is compared again every time. Only small tables are kept (a search's, not a user's table of
millions of rows compared once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pyarrow as pa

from runtime.lab.value_compare import holds_float
from runtime.lab.verdicts import ExactlyOnce

__all__ = ["RecentComparisons"]

KEPT = 16  # comparisons kept, the latest first (a miss looks at each: a few microseconds apiece)
MAX_BYTES = 1 << 20  # only tables this small are kept (a check's: tens of kB; at most 32 MB held)


class RecentComparisons:
    """The last :data:`KEPT` comparisons of small float-free tables and their verdicts."""

    def __init__(self) -> None:
        self._kept: list[tuple[pa.Table, pa.Table, str, str | None, ExactlyOnce]] = []

    def verdict(
        self,
        expected: pa.Table,
        actual: pa.Table,
        key: str,
        partition: str | None,
        compare: Callable[[], ExactlyOnce],
    ) -> ExactlyOnce:
        """``compare()``'s verdict on these values, computed or a copy of an equal comparison's."""
        if not _keepable(expected) or not _keepable(actual):
            return compare()
        for n, (e, a, k, p, found) in enumerate(self._kept):
            if k == key and p == partition and (e is expected or e.equals(expected)) and a.equals(actual):
                if n:
                    self._kept.insert(0, self._kept.pop(n))
                return _copy(found)
        verdict = compare()
        self._kept.insert(0, (expected, actual, key, partition, _copy(verdict)))
        del self._kept[KEPT:]
        return verdict


def _copy(verdict: ExactlyOnce) -> ExactlyOnce:
    """A verdict nobody else holds (callers set its ``reader``; its samples are lists)."""
    problems = verdict.commit_problems
    return dataclasses.replace(
        verdict,
        samples={kind: list(ids) for kind, ids in verdict.samples.items()},
        commit_problems=None if problems is None else list(problems),
    )


def _keepable(table: pa.Table) -> bool:
    return table.nbytes <= MAX_BYTES and not any(holds_float(f.type) for f in table.schema)
