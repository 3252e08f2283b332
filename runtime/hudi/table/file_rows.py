"""A small file version's rows as Python values, and the copy-on-write merge on them: what the
simulated disk keeps instead of an Arrow table.

The simulator merges tens of thousands of small file groups (a few hundred rows, ten new ones a
flush), where an Arrow merge costs about twenty calls whatever the rows. On rows of Python values
the same merge is one list copy and a tuple per incoming record. :func:`merge_rows` is
:func:`runtime.hudi.table.merge.merge_file_group` on such rows, the same rules (its module docstring
has them, with their sources) and the same result: ``tests/hudi`` holds the two to the same
table, row for row and type for type. It declines (returns None) whatever it does not hold, and
the caller merges in Arrow: a column type other than strings, integers, floating point and
booleans, a large flush or file, an old version whose columns are not the flush's, or a
compaction's records (which keep their own meta columns).

A version's rows hold every column but the file name, which every row of a version shares (the
merge names each row after the new file).

The size model (:attr:`FileRows.nbytes`): what the rows take in Arrow's buffers, built in one
piece without validity bitmaps: a fixed-width value its width (a boolean a byte), a string its
UTF-8 bytes and a 4-byte offset. The simulated disk reports it as the file's size (bytes written
and write amplification in a simulated run's ``result.json``); it never reaches a trace.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, Unpack

import numpy as np
import pyarrow as pa

from runtime.data.batch_memo import BatchMemo
from runtime.data.columns import OFFSET
from runtime.hudi.formats.java_hashmap import SMALL_MAP, small_orders
from runtime.hudi.table.merge import (
    _KEY_HASHES,
    FILE_NAME,
    MAX_INDEXED_ROWS,
    SMALL_FLUSH,
    KeyPositions,
    MergeResult,
    _positions_of,
    column_values,
    data_columns_named,
    flink_dedupe,
    hashmap_orders,
    merge_file_group,
)
from runtime.hudi.table.table_config import META_COLUMNS

_NAME_AT = META_COLUMNS.index(FILE_NAME)
_STRING = pa.string()
# a row's places: the meta columns but the file name, then the data columns
COMMIT_TIME, SEQNO, RECORD_KEY, PARTITION_PATH = range(4)
_DATA_AT = 4


def _held(t: pa.DataType) -> bool:
    """Whether rows hold values of ``t``: strings, booleans, integers, floating point."""
    return bool(t == _STRING or pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t))


def _width(t: pa.DataType) -> int | None:
    """A held type's fixed width in the size model (a boolean a byte); None for a string."""
    if not _held(t):
        raise TypeError(f"rows of type {t} are not held (merged in Arrow instead)")
    return None if t == _STRING else max(1, int(t.bit_width) // 8)


@dataclass(frozen=True, slots=True)
class _RowSizes:
    """The size model of a row of one schema: its fixed part, and where its strings are."""

    strings: tuple[int, ...]  # the places of the string values in a row
    fixed: int  # the widths of the fixed-width values and 4 bytes of offset a string

    @staticmethod
    def of(types: Sequence[pa.DataType]) -> _RowSizes:
        widths = [_width(t) for t in types]
        strings = tuple(i for i, w in enumerate(widths) if w is None)
        return _RowSizes(strings, sum(w for w in widths if w is not None) + 4 * len(strings))

    def of_rows(self, rows: Sequence[tuple[Any, ...]]) -> int:
        texts = [r[i] for r in rows for i in self.strings]
        try:  # one join, not a call per value
            text = len("".join(texts).encode())
        except TypeError:  # a null among them
            text = sum(len(v.encode()) for v in texts if v is not None)
        return text + self.fixed * len(rows)


@dataclass(slots=True, weakref_slot=True)
class FileRows:
    """A file version's rows: a tuple of Python values per row, in the columns of ``schema`` but
    the file name (every row's is ``file_name``), and the size model's bytes of those columns.
    Its rows never change once made (a merge copies them): a run reads, and the next run of a job
    may merge onto, the very version an earlier run made (:class:`_Merges`)."""

    schema: pa.Schema  # every column, the file name's included, the meta columns first
    rows: list[tuple[Any, ...]]
    file_name: str
    row_bytes: int
    arrow: pa.Table | None = field(default=None, compare=False, repr=False)  # to_arrow's, once built
    # the merges onto it met before, of a generation of :data:`_MERGES`
    merges: tuple[int, dict[_MergeKey, _Merged]] | None = field(default=None, compare=False, repr=False)
    # commit time -> how many rows carry it (:meth:`commit_times`'s, once built)
    times: dict[str, int] | None = field(default=None, compare=False, repr=False)

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    @property
    def nbytes(self) -> int:
        return self.row_bytes + (len(self.file_name.encode()) + 4) * len(self.rows)

    def commit_times(self) -> dict[str, int]:
        """How many rows carry each commit time (a merge's version has them from the version it
        merged onto: a merge asks how many rows its own instant wrote, and a scan of every row for
        it was a fortieth of a simulated run)."""
        if self.times is None:
            times: dict[str, int] = {}
            for row in self.rows:
                times[row[COMMIT_TIME]] = times.get(row[COMMIT_TIME], 0) + 1
            self.times = times
        return self.times

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table, built once (a reader of the simulated disk reads a version
        of an earlier run again)."""
        if self.arrow is None:
            self.arrow = self._build_arrow()
        return self.arrow

    def _build_arrow(self) -> pa.Table:
        n = len(self.rows)
        columns: list[Sequence[Any]] = list(zip(*self.rows, strict=True)) if n else [()] * (len(self.schema) - 1)
        columns.insert(_NAME_AT, (self.file_name,) * n)
        return pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, self.schema, strict=True)], schema=self.schema
        )

    @staticmethod
    def from_arrow(table: pa.Table) -> FileRows | None:
        """``table``'s rows, or None when they are not held: a column of another type, meta
        columns not first, or rows of more than one file name."""
        schema = table.schema
        if schema.names[: len(META_COLUMNS)] != list(META_COLUMNS) or not all(_held(f.type) for f in schema):
            return None
        names = set(column_values(table.column(_NAME_AT)))
        if len(names) > 1 or None in names:
            return None
        columns = [column_values(c) for i, c in enumerate(table.columns) if i != _NAME_AT]
        rows = list(zip(*columns, strict=True))
        types = [f.type for i, f in enumerate(schema) if i != _NAME_AT]
        return FileRows(schema, rows, names.pop() if names else "", _RowSizes.of(types).of_rows(rows))


@dataclass(frozen=True, slots=True)
class _Layout:
    """What a merge reads of the flush's schema and the old version's, worked out once for a pair
    of schemas (a job's flushes and versions share theirs)."""

    data_cols: list[str]
    incoming_at: list[int]  # each data column's place in the flush
    key_at: int  # the record key's place among the data columns
    precombine_at: int
    plain_precombine: bool  # a signed integer or floating ordering value (compared in Python)
    offset_at: int  # the stream offset's place in the flush, -1 if it has none
    sizes: _RowSizes
    schema: pa.Schema  # the new version's

    @staticmethod
    def of(incoming: pa.Schema, old: pa.Schema | None, key: str, precombine: str) -> _Layout | None:
        """None when the rows do not hold the merge (a type, the old version's columns)."""
        which = (key, precombine, old is None)
        last = _LAYOUTS.get(which)
        if last is not None and last[0].equals(incoming) and _same(last[1], old):
            return last[2]
        layout = _Layout._work_out(incoming, old, key, precombine)
        _LAYOUTS[which] = (incoming, old, layout)
        return layout

    @staticmethod
    def _work_out(incoming: pa.Schema, old: pa.Schema | None, key: str, precombine: str) -> _Layout | None:
        names = incoming.names
        data_cols = data_columns_named(names)
        types = [incoming.field(c).type for c in data_cols]
        if incoming.field(key).type != _STRING or not all(map(_held, types)) or precombine not in data_cols:
            return None
        pre_type = types[data_cols.index(precombine)]
        if old is None:
            schema = pa.schema([pa.field(c, _STRING) for c in META_COLUMNS] + list(map(pa.field, data_cols, types)))
        elif old.names != [*META_COLUMNS, *data_cols] or old.field(RECORD_KEY).type != _STRING:
            return None  # (the Arrow merge keeps the old version's columns of the flush's)
        elif [old.field(c).type for c in data_cols] != types:
            return None  # (the Arrow merge casts the flush's to the old version's types)
        else:
            schema = old
        return _Layout(
            data_cols,
            [names.index(c) for c in data_cols],
            data_cols.index(key),
            data_cols.index(precombine),
            pa.types.is_signed_integer(pre_type) or pa.types.is_floating(pre_type),
            names.index(OFFSET) if OFFSET in names else -1,
            _RowSizes.of([_STRING] * _DATA_AT + types),
            schema,
        )


def _same(a: pa.Schema | None, b: pa.Schema | None) -> bool:
    return a is b or (a is not None and b is not None and a.equals(b))


# the last layout worked out, by (key, precombine, whether there is no old version): (flush schema,
# old schema, layout or None); a create and a merge each keep theirs (a job's flushes do both)
_LAYOUTS: dict[tuple[str, str, bool], tuple[pa.Schema, pa.Schema | None, _Layout | None]] = {}


@dataclass(slots=True)
class _Flush:
    """A small flush as ``FlinkWriteHelper.deduplicateRecords`` leaves it, on Python values: one
    record per key (the larger ordering value, a tie to the later record), the keys in order of
    first arrival, and the data columns' values of those records, a column each."""

    keys: list[str]
    columns: list[list[Any]]

    @staticmethod
    def of(incoming: pa.Table, layout: _Layout) -> _Flush:
        """Of a small flush (``merge_rows`` merges no other). Where an ordering value decides and
        is not a plain number (a null, a NaN, a string), :func:`~runtime.hudi.table.merge.flink_dedupe`
        decides it in Arrow."""
        columns = [column_values(incoming.column(i)) for i in layout.incoming_at]
        keys: list[str] = columns[layout.key_at]
        n = len(keys)
        if len(set(keys)) == n:  # every key once: nothing to decide
            return _Flush(keys, columns)
        if not layout.plain_precombine:
            return _Flush.in_arrow(incoming, layout)
        pre = columns[layout.precombine_at]
        if any(v is None or v != v for v in pre):  # a null or a NaN
            return _Flush.in_arrow(incoming, layout)
        later = column_values(incoming.column(layout.offset_at)) if layout.offset_at >= 0 else range(n)
        winner: dict[str, int] = {}  # in order of each key's first arrival
        for i, k in enumerate(keys):
            j = winner.get(k)
            if j is None or pre[i] > pre[j] or (pre[i] == pre[j] and later[i] > later[j]):
                winner[k] = i
        rows = list(winner.values())
        return _Flush(list(winner), [[col[r] for r in rows] for col in columns])

    @staticmethod
    def in_arrow(incoming: pa.Table, layout: _Layout) -> _Flush:
        dd = flink_dedupe(incoming, layout.data_cols[layout.key_at], layout.data_cols[layout.precombine_at])
        assert dd.keys is not None  # (flink_dedupe keeps the keys of a small flush)
        return _Flush(dd.keys, [column_values(dd.records.column(c)) for c in layout.data_cols])


@dataclass(slots=True)  # (not frozen: a frozen one's fields cost a call each to set, at every flush)
class _Prepared:
    """What a merge works out of a small flush whatever it merges onto: the deduplicated flush,
    each of its records' data values, and the two hash maps' orders of its keys (the grouping
    map's, ``keyToNewRecords``')."""

    flush: _Flush
    records: list[tuple[Any, ...]]
    grouped: list[int]
    to_write: list[int]

    @staticmethod
    def of(incoming: pa.Table, layout: _Layout, key: str, precombine: str) -> _Prepared:
        """Worked out once a flush: the simulator's runs of one job flush the same file group
        parts of the same batches run after run (:mod:`runtime.data.batch_memo`); the layout
        is the flush's schema's and ``key``'s and ``precombine``'s."""
        known = _PREPARED.get(incoming, (key, precombine))
        if known is not None:
            return known
        flush = _Flush.of(incoming, layout)
        keys = flush.keys
        records = list(zip(*flush.columns, strict=True))  # each deduplicated record's data values
        hashes = [_KEY_HASHES[k] for k in keys]
        if len(keys) <= SMALL_MAP:
            grouped, to_write = small_orders(hashes)
        else:
            orders = hashmap_orders(np.array(hashes, dtype=np.uint32))
            grouped, to_write = orders[0].tolist(), orders[1].tolist()
        return _PREPARED.put(incoming, _Prepared(flush, records, grouped, to_write), (key, precombine))


_PREPARED: BatchMemo[_Prepared] = BatchMemo()


class MergeTarget(TypedDict):
    """What a merge writes and onto what: :func:`~runtime.hudi.table.merge.merge_file_group`'s keywords."""

    instant: str
    partition: str
    file_name: str
    key: str
    precombine: str
    partition_id: int
    base_instant: NotRequired[str | None]
    base_positions: NotRequired[KeyPositions | None]


_MergeKey = tuple[int, str, str, str, str, str, int, str | None]


# a merge met before: of which flush, with which base positions (the very dict), its result (a
# tuple: a merge met for the first time makes one, at every flush of a run that meets none again)
_Merged = tuple[weakref.ref[pa.Table], KeyPositions | None, MergeResult[FileRows]]


class _Merges:
    """The small merges met before, each kept on what it merged onto: a version's on the version
    (they go with it), a create's by its flush (:class:`~runtime.data.batch_memo.BatchMemo`).

    A simulator's runs of one job merge the same flushes (:class:`_Prepared`) onto the same
    versions run after run, and a merge's result is a function of the version's rows, the flush's
    and the target alone: a version is never changed, nor is a flush, and its base positions are
    the very dict the earlier merge had. A run that meets a merge again takes the version it made
    (the same rows, the same order, the same types) and the next merges onto it are met again too.
    Bounded: past :data:`MEMO_ROWS` rows of versions kept, it starts over (a new generation)."""

    def __init__(self) -> None:
        self.generation = 0
        self.rows = 0
        self.creates: BatchMemo[dict[_MergeKey, _Merged]] = BatchMemo(size=1024)

    @staticmethod
    def key(incoming: pa.Table, target: MergeTarget) -> _MergeKey:
        return (
            id(incoming),
            target["instant"],
            target["partition"],
            target["file_name"],
            target["key"],
            target["precombine"],
            target["partition_id"],
            target.get("base_instant"),
        )

    def _kept(self, base: FileRows | None, incoming: pa.Table, *, make: bool) -> dict[_MergeKey, _Merged] | None:
        if base is None:
            kept = self.creates.get(incoming)
            return self.creates.put(incoming, {}) if kept is None and make else kept
        if base.merges is None or base.merges[0] != self.generation:
            if not make:
                return None
            base.merges = (self.generation, {})
        return base.merges[1]

    def get(self, base: FileRows | None, incoming: pa.Table, target: MergeTarget) -> MergeResult[FileRows] | None:
        kept = self._kept(base, incoming, make=False)
        met = kept.get(self.key(incoming, target)) if kept is not None else None
        if met is None or met[0]() is not incoming or met[1] is not target.get("base_positions"):
            return None
        return met[2]

    def put(
        self, base: FileRows | None, incoming: pa.Table, target: MergeTarget, result: MergeResult[FileRows]
    ) -> None:
        if self.rows > MEMO_ROWS:
            self.generation, self.rows, self.creates = self.generation + 1, 0, BatchMemo(size=1024)
        kept = self._kept(base, incoming, make=True)
        assert kept is not None
        kept[self.key(incoming, target)] = (weakref.ref(incoming), target.get("base_positions"), result)
        self.rows += result.table.num_rows


MEMO_ROWS = 1 << 14  # rows of the versions the merges met before keep, at most
_MERGES = _Merges()


def merge_version(
    base: pa.Table | FileRows | None, incoming: pa.Table, *, as_rows: bool, **target: Unpack[MergeTarget]
) -> MergeResult[pa.Table] | MergeResult[FileRows]:
    """A file group's new version, ``base`` merged with the flush ``incoming``: as
    :class:`FileRows` with ``as_rows`` (a storage that keeps them: the simulated disk) where
    :func:`merge_rows` holds the merge, else in Arrow (:func:`~runtime.hudi.table.merge.merge_file_group`)."""
    if as_rows:
        rows: FileRows | None
        if isinstance(base, pa.Table):  # read back from storage, or merged in Arrow before
            rows = FileRows.from_arrow(base) if base.num_rows <= MAX_INDEXED_ROWS else None
        else:
            rows = base
        if rows is not None or base is None:
            merged = _MERGES.get(rows, incoming, target)
            if merged is None:
                merged = merge_rows(rows, incoming, **target)
                if merged is not None:
                    _MERGES.put(rows, incoming, target, merged)
            if merged is not None:
                return merged
    return merge_file_group(base.to_arrow() if isinstance(base, FileRows) else base, incoming, **target)


def merge_rows(
    base: FileRows | None, incoming: pa.Table, **target: Unpack[MergeTarget]
) -> MergeResult[FileRows] | None:
    """:func:`~runtime.hudi.table.merge.merge_file_group` on ``base``'s rows, the new version as
    :class:`FileRows`; None when these rows do not hold the merge (the module docstring says when)."""
    instant, partition, key = target["instant"], target["partition"], target["key"]
    if incoming.num_rows > SMALL_FLUSH or (base is not None and base.num_rows > MAX_INDEXED_ROWS):
        return None
    n_base = 0 if base is None else base.num_rows
    old_schema = base.schema if base is not None and n_base else None
    layout = _Layout.of(incoming.schema, old_schema, key, target["precombine"])
    if layout is None:
        return None
    prepared = _Prepared.of(incoming, layout, key, target["precombine"])
    keys, records, grouped = prepared.flush.keys, prepared.records, prepared.grouped
    prefix = f"{instant}_{target['partition_id']}_"
    if base is None or not n_base:  # FlinkCreateHandle: the records in the grouping map's order
        rows = [(instant, prefix + str(p), keys[r], partition, *records[r]) for p, r in enumerate(grouped)]
        n = len(rows)
        version = FileRows(
            layout.schema, rows, target["file_name"], layout.sizes.of_rows(rows), times={instant: n} if n else {}
        )
        return MergeResult(version, n, 0, 0, n, _positions_of(keys, grouped, {}, 0))
    return _onto(base, prepared.flush, records, prepared.to_write, layout, prefix, target)


def _onto(
    base: FileRows,
    flush: _Flush,
    records: list[tuple[Any, ...]],
    to_write: list[int],
    layout: _Layout,
    prefix: str,
    target: MergeTarget,
) -> MergeResult[FileRows]:
    """``HoodieMergeHandle``'s version: ``base``'s rows in place, each that an incoming record
    wins replaced, then the keys new to the file in ``keyToNewRecords``' order (``to_write``)."""
    instant, partition, keys = target["instant"], target["partition"], flush.keys
    base_instant, base_positions = target.get("base_instant"), target.get("base_positions")
    n_base = base.num_rows
    old = base.rows
    if base_positions is None:
        base_positions = {r[RECORD_KEY]: i for i, r in enumerate(old)}
    get = base_positions.get
    at = [get(k, -1) for k in keys]
    pre = layout.precombine_at
    inc_pre, old_pre = flush.columns[pre], _DATA_AT + pre
    updated = [
        i
        for i, a in enumerate(at)
        if a >= 0 and inc_pre[i] is not None and (o := old[a][old_pre]) is not None and inc_pre[i] >= o
    ]
    replaced = [at[i] for i in updated]
    new = [r for r in to_write if at[r] < 0]  # keyToNewRecords' order, the keys the old file lacked
    rewritten = kept_written = 0
    times = base.commit_times()
    if (base_instant is None or base_instant == instant) and times.get(instant):
        # the rows this instant wrote before (an earlier flush's): those replaced, and the rest
        rewritten = len({p for p in replaced if old[p][COMMIT_TIME] == instant})
        kept_written = times[instant] - rewritten
    placed = [*zip(replaced, updated, strict=True), *enumerate(new, start=n_base)]  # (position, record)
    fresh = [(instant, prefix + str(p), keys[r], partition, *records[r]) for p, r in placed]
    rows = old.copy()
    for p, row in zip(replaced, fresh, strict=False):  # (the new rows follow the updates)
        rows[p] = row
    rows += fresh[len(replaced) :]
    sizes = layout.sizes
    gone = [old[p] for p in replaced]
    row_bytes = base.row_bytes - sizes.of_rows(gone) + sizes.of_rows(fresh)
    return MergeResult(
        FileRows(
            layout.schema, rows, target["file_name"], row_bytes, times=_times_after(times, gone, instant, len(fresh))
        ),
        len(new),
        len(replaced) - rewritten,
        rewritten,
        len(fresh) + kept_written,
        _positions_of(keys, new, base_positions, n_base),
    )


def _times_after(times: dict[str, int], gone: list[tuple[Any, ...]], instant: str, written: int) -> dict[str, int]:
    """A version's :meth:`FileRows.commit_times` from its base's: ``gone`` rows replaced by
    ``written`` rows of ``instant``."""
    after = dict(times)
    for row in gone:
        left = after[row[COMMIT_TIME]] - 1
        if left:
            after[row[COMMIT_TIME]] = left
        else:
            del after[row[COMMIT_TIME]]
    if written:
        after[instant] = after.get(instant, 0) + written
    return after
