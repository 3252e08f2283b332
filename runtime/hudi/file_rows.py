"""A small file version's rows as Python values, and the copy-on-write merge on them: what the
simulated disk keeps instead of an Arrow table.

The simulator merges tens of thousands of small file groups (a few hundred rows, ten new ones a
flush), where an Arrow merge costs about twenty calls whatever the rows. On columns of Python
values the same merge is a list copy per column and a Python step per incoming record.
:func:`merge_rows` is :func:`runtime.hudi.merge.merge_file_group` on such rows, the same rules
(its module docstring has them, with their sources) and the same result: ``tests/hudi`` holds the
two to the same table, row for row and type for type. It declines (returns None) whatever it
does not hold, and the caller merges in Arrow: a column type other than strings, integers,
floating point and booleans, a large flush or file, a schema that differs from the old version's,
or a compaction's records (which keep their own meta columns).

The size model (:attr:`FileRows.nbytes`): what the rows take in Arrow's buffers, built in one
piece without validity bitmaps: a fixed-width value its width (a boolean a byte), a string its
UTF-8 bytes and a 4-byte offset. The simulated disk reports it as the file's size (bytes written
and write amplification in a simulated run's ``result.json``); it never reaches a trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, Unpack

import numpy as np
import pyarrow as pa

from runtime.data.columns import OFFSET
from runtime.hudi.java_hashmap import SMALL_MAP, small_orders
from runtime.hudi.merge import (
    _KEY_HASHES,
    _ROW_META,
    FILE_NAME,
    MAX_INDEXED_ROWS,
    SMALL_FLUSH,
    KeyPositions,
    MergeResult,
    _positions_of,
    data_columns_named,
    flink_dedupe,
    hashmap_orders,
    merge_file_group,
)
from runtime.hudi.table import META_COLUMNS

_NAME_AT = META_COLUMNS.index(FILE_NAME)
_NAME_FIELD = pa.field(FILE_NAME, pa.string())
_STRING = pa.string()


def _width(t: pa.DataType) -> int | None:
    """A held type's fixed width in the size model; None for a string; raises for any other."""
    if t == _STRING:
        return None
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return int(t.bit_width) // 8
    raise TypeError(t)


def _held(t: pa.DataType) -> bool:
    return bool(t == _STRING or pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t))


def _bytes(values: list[Any], width: int | None) -> int:
    if width is not None:
        return width * len(values)
    try:  # one join, not a call per value
        return len("".join(values).encode()) + 4 * len(values)
    except TypeError:  # a null among them
        return sum(len(v.encode()) for v in values if v is not None) + 4 * len(values)


def _values(column: pa.ChunkedArray) -> list[Any]:
    """A column's Python values (through numpy without nulls: ``to_pylist`` makes a scalar each)."""
    if column.null_count:
        values: list[Any] = column.to_pylist()
    else:
        values = column.to_numpy(zero_copy_only=False).tolist()
    return values


@dataclass(slots=True)
class FileRows:
    """A file version's rows: one list of Python values per column of ``schema``, and the size
    model's bytes of each column."""

    schema: pa.Schema
    columns: list[list[Any]]
    column_bytes: list[int]

    @property
    def num_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    @property
    def nbytes(self) -> int:
        return sum(self.column_bytes)

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(self.columns, self.schema, strict=True)], schema=self.schema
        )

    @staticmethod
    def from_arrow(table: pa.Table) -> FileRows | None:
        """``table``'s rows, or None when a column has a type the rows do not hold."""
        if not all(_held(f.type) for f in table.schema):
            return None
        columns = [_values(c) for c in table.columns]
        return FileRows(
            table.schema, columns, [_bytes(c, _width(f.type)) for c, f in zip(columns, table.schema, strict=True)]
        )


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
    widths: list[int | None]  # the size model's width of each column but the file name
    old_at: list[int]  # each column but the file name's place in the old version (none: empty)
    schema: pa.Schema  # the new version's

    @staticmethod
    def of(incoming: pa.Schema, old: pa.Schema | None, key: str, precombine: str) -> _Layout | None:
        """None when the rows do not hold the merge (a type, a changed schema)."""
        last = _LAYOUTS.get((key, precombine))
        if last is not None and last[0].equals(incoming) and _same(last[1], old):
            return last[2]
        layout = _Layout._work_out(incoming, old, key, precombine)
        _LAYOUTS[(key, precombine)] = (incoming, old, layout)
        return layout

    @staticmethod
    def _work_out(incoming: pa.Schema, old: pa.Schema | None, key: str, precombine: str) -> _Layout | None:
        names = incoming.names
        data_cols = data_columns_named(names)
        types = [incoming.field(c).type for c in data_cols]
        if incoming.field(key).type != _STRING or not all(map(_held, types)) or precombine not in data_cols:
            return None
        pre_type = types[data_cols.index(precombine)]
        widths: list[int | None] = [None, None, None, None]  # the row's meta columns: strings
        widths += map(_width, types)
        if old is None:
            old_at: list[int] = []
            schema = pa.schema([pa.field(c, _STRING) for c in META_COLUMNS] + list(map(pa.field, data_cols, types)))
        else:
            old_at = [old.get_field_index(c) for c in _ROW_META + data_cols]
            if -1 in old_at or old.field(_ROW_META[2]).type != _STRING:
                return None
            if [old.field(c).type for c in data_cols] != types:
                return None
            layout = [*META_COLUMNS, *data_cols]
            schema = (
                old
                if old.names == layout
                else pa.schema([old.field(c) if c != FILE_NAME else _NAME_FIELD for c in layout])
            )
        return _Layout(
            data_cols,
            [names.index(c) for c in data_cols],
            data_cols.index(key),
            data_cols.index(precombine),
            pa.types.is_signed_integer(pre_type) or pa.types.is_floating(pre_type),
            names.index(OFFSET) if OFFSET in names else -1,
            widths,
            old_at,
            schema,
        )


def _same(a: pa.Schema | None, b: pa.Schema | None) -> bool:
    return a is b or (a is not None and b is not None and a.equals(b))


# the last layout worked out, by (key, precombine): (flush schema, old schema, layout or None)
_LAYOUTS: dict[tuple[str, str], tuple[pa.Schema, pa.Schema | None, _Layout | None]] = {}


@dataclass(slots=True)
class _Flush:
    """A small flush as ``FlinkWriteHelper.deduplicateRecords`` leaves it, on Python values: one
    record per key (the larger ordering value, a tie to the later record), the keys in order of
    first arrival, and the data columns' values of those records."""

    keys: list[str]
    columns: list[list[Any]]

    @staticmethod
    def of(incoming: pa.Table, layout: _Layout) -> _Flush | None:
        """None where an ordering value decides and is not a plain number (a null, a NaN, a
        string): :func:`~runtime.hudi.merge.flink_dedupe` decides it in Arrow."""
        columns = [_values(incoming.column(i)) for i in layout.incoming_at]
        keys: list[str] = columns[layout.key_at]
        n = len(keys)
        if len(set(keys)) == n:  # every key once: nothing to decide
            return _Flush(keys, columns)
        if not layout.plain_precombine:
            return _Flush.in_arrow(incoming, layout)
        pre = columns[layout.precombine_at]
        if any(v is None or v != v for v in pre):  # a null or a NaN
            return _Flush.in_arrow(incoming, layout)
        later = _values(incoming.column(layout.offset_at)) if layout.offset_at >= 0 else range(n)
        winner: dict[str, int] = {}  # in order of each key's first arrival
        for i, k in enumerate(keys):
            j = winner.get(k)
            if j is None or pre[i] > pre[j] or (pre[i] == pre[j] and later[i] > later[j]):
                winner[k] = i
        rows = list(winner.values())
        return _Flush(list(winner), [[col[r] for r in rows] for col in columns])

    @staticmethod
    def in_arrow(incoming: pa.Table, layout: _Layout) -> _Flush | None:
        dd = flink_dedupe(incoming, layout.data_cols[layout.key_at], layout.data_cols[layout.precombine_at])
        if dd.keys is None:
            return None
        return _Flush(dd.keys, [_values(dd.records.column(c)) for c in layout.data_cols])


class MergeTarget(TypedDict):
    """What a merge writes and onto what: :func:`~runtime.hudi.merge.merge_file_group`'s keywords."""

    instant: str
    partition: str
    file_name: str
    key: str
    precombine: str
    partition_id: int
    base_instant: NotRequired[str | None]
    base_positions: NotRequired[KeyPositions | None]


def merge_version(
    base: pa.Table | FileRows | None, incoming: pa.Table, *, as_rows: bool, **target: Unpack[MergeTarget]
) -> MergeResult[pa.Table] | MergeResult[FileRows]:
    """A file group's new version, ``base`` merged with the flush ``incoming``: as
    :class:`FileRows` with ``as_rows`` (a storage that keeps them: the simulated disk) where
    :func:`merge_rows` holds the merge, else in Arrow (:func:`~runtime.hudi.merge.merge_file_group`)."""
    if as_rows:
        small = base is None or base.num_rows <= MAX_INDEXED_ROWS  # (a large one is joined in Arrow)
        rows = FileRows.from_arrow(base) if isinstance(base, pa.Table) and small else base
        if rows is not None and not isinstance(rows, pa.Table) or base is None:
            merged = merge_rows(rows, incoming, **target)
            if merged is not None:
                return merged
    return merge_file_group(base.to_arrow() if isinstance(base, FileRows) else base, incoming, **target)


def merge_rows(
    base: FileRows | None, incoming: pa.Table, **target: Unpack[MergeTarget]
) -> MergeResult[FileRows] | None:
    """:func:`~runtime.hudi.merge.merge_file_group` on ``base``'s rows, the new version as
    :class:`FileRows`; None when these rows do not hold the merge (the module docstring says when)."""
    instant, partition, key = target["instant"], target["partition"], target["key"]
    base_instant, base_positions = target.get("base_instant"), target.get("base_positions")
    if incoming.num_rows > SMALL_FLUSH or (base is not None and base.num_rows > MAX_INDEXED_ROWS):
        return None
    n_base = 0 if base is None else base.num_rows
    layout = _Layout.of(
        incoming.schema, base.schema if base is not None and n_base else None, key, target["precombine"]
    )
    if layout is None:
        return None
    flush = _Flush.of(incoming, layout)
    if flush is None:
        return None
    keys, inc = flush.keys, flush.columns
    hashes = [_KEY_HASHES[k] for k in keys]
    if len(keys) <= SMALL_MAP:
        grouped, to_write = small_orders(hashes)
    else:
        orders = hashmap_orders(np.array(hashes, dtype=np.uint32))
        grouped, to_write = orders[0].tolist(), orders[1].tolist()
    widths = layout.widths
    prefix = f"{instant}_{target['partition_id']}_"
    if base is None or not n_base:  # FlinkCreateHandle: the records in the grouping map's order
        order = grouped
        n = len(order)
        columns = [
            [instant] * n,
            [prefix + str(p) for p in range(n)],
            [keys[r] for r in order],
            [partition] * n,
            *([col[r] for r in order] for col in inc),
        ]
        rows = FileRows(layout.schema, columns, [_bytes(c, w) for c, w in zip(columns, widths, strict=True)])
        return MergeResult(_with_name(rows, target["file_name"]), n, 0, 0, n, _positions_of(keys, grouped, {}, 0))
    old = [base.columns[i] for i in layout.old_at]
    if base_positions is None:
        base_positions = {k: i for i, k in enumerate(old[2])}
    get = base_positions.get
    at = [get(k, -1) for k in keys]
    inc_pre, old_pre = inc[layout.precombine_at], old[len(_ROW_META) + layout.precombine_at]
    updated = [
        i
        for i, a in enumerate(at)
        if a >= 0 and (inc_pre[i] is not None and old_pre[a] is not None and inc_pre[i] >= old_pre[a])
    ]
    replaced = [at[i] for i in updated]
    new = [r for r in to_write if at[r] < 0]  # keyToNewRecords' order, the keys the old file lacked
    rewritten = kept_written = 0
    if base_instant is None or base_instant == instant:
        times = old[0]
        of_instant = times.count(instant)
        if of_instant:
            rewritten = sum(1 for p in replaced if times[p] == instant)
            kept_written = of_instant - rewritten
    written_rows = updated + new
    placed = replaced + list(range(n_base, n_base + len(new)))
    fresh: list[list[Any]] = [
        [instant] * len(written_rows),
        [prefix + str(p) for p in placed],
        [keys[r] for r in written_rows],
        [partition] * len(written_rows),
        *([col[r] for r in written_rows] for col in inc),
    ]
    n_updated = len(updated)
    columns, sizes = [], []
    old_bytes = [base.column_bytes[i] for i in layout.old_at]
    for col, values, width, size in zip(old, fresh, widths, old_bytes, strict=True):
        if n_updated:
            merged = col.copy()
            for p, v in zip(replaced, values, strict=False):  # (the new rows follow the updates)
                merged[p] = v
            merged.extend(values[n_updated:])
        else:
            merged = col + values
        if width is None:
            size += _bytes(values, None) - _bytes([col[p] for p in replaced], None)
        else:
            size += width * len(new)
        columns.append(merged)
        sizes.append(size)
    rows = FileRows(layout.schema, columns, sizes)
    return MergeResult(
        _with_name(rows, target["file_name"]),
        len(new),
        len(replaced) - rewritten,
        rewritten,
        len(written_rows) + kept_written,
        _positions_of(keys, new, base_positions, n_base),
    )


def _with_name(rows: FileRows, file_name: str) -> FileRows:
    """``rows`` (whose schema has the file name already) with the file name column in its place
    among the meta columns."""
    n = rows.num_rows
    rows.columns.insert(_NAME_AT, [file_name] * n)
    rows.column_bytes.insert(_NAME_AT, (len(file_name.encode()) + 4) * n)
    return rows
