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
from runtime.hudi.java_hashmap import SMALL_MAP, small_order
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


@dataclass(slots=True)
class _Flush:
    """A small flush as ``FlinkWriteHelper.deduplicateRecords`` leaves it, on Python values: one
    record per key (the larger ordering value, a tie to the later record), the keys in order of
    first arrival, and the data columns' values of those records."""

    keys: list[str]
    columns: list[list[Any]]

    @staticmethod
    def of(
        incoming: pa.Table, data_cols: list[str], key: str, precombine: str, types: list[pa.DataType]
    ) -> _Flush | None:
        """None where an ordering value decides and is not a plain number (a null, a NaN, a
        string): :func:`~runtime.hudi.merge.flink_dedupe` decides it in Arrow."""
        columns = [_values(incoming.column(c)) for c in data_cols]
        keys: list[str] = columns[data_cols.index(key)]
        n = len(keys)
        if len(set(keys)) == n:  # every key once: nothing to decide
            return _Flush(keys, columns)
        pre_type = types[data_cols.index(precombine)]
        if not (pa.types.is_signed_integer(pre_type) or pa.types.is_floating(pre_type)):
            return _Flush.in_arrow(incoming, data_cols, key, precombine)
        pre = columns[data_cols.index(precombine)]
        if any(v is None or v != v for v in pre):  # a null or a NaN
            return _Flush.in_arrow(incoming, data_cols, key, precombine)
        later = _values(incoming.column(OFFSET)) if OFFSET in incoming.schema.names else range(n)
        winner: dict[str, int] = {}  # in order of each key's first arrival
        for i, k in enumerate(keys):
            j = winner.get(k)
            if j is None or pre[i] > pre[j] or (pre[i] == pre[j] and later[i] > later[j]):
                winner[k] = i
        rows = list(winner.values())
        return _Flush(list(winner), [[col[r] for r in rows] for col in columns])

    @staticmethod
    def in_arrow(incoming: pa.Table, data_cols: list[str], key: str, precombine: str) -> _Flush | None:
        dd = flink_dedupe(incoming, key, precombine)
        if dd.keys is None:
            return None
        return _Flush(dd.keys, [_values(dd.records.column(c)) for c in data_cols])


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
    in_schema = incoming.schema
    data_cols = data_columns_named(in_schema.names)
    types = [in_schema.field(c).type for c in data_cols]
    if in_schema.field(key).type != _STRING or not all(map(_held, types)):
        return None
    n_base = 0 if base is None else base.num_rows
    if base is not None and n_base:
        old_at = [base.schema.get_field_index(c) for c in _ROW_META + data_cols]
        if -1 in old_at or n_base > MAX_INDEXED_ROWS:
            return None
        old_schema = base.schema
        if old_schema.field(_ROW_META[2]).type != _STRING or [old_schema.field(c).type for c in data_cols] != types:
            return None
    if incoming.num_rows > SMALL_FLUSH:
        return None
    flush = _Flush.of(incoming, data_cols, key, target["precombine"], types)
    if flush is None:
        return None
    keys, inc = flush.keys, flush.columns
    grouped = small_order([_KEY_HASHES[k] for k in keys]) if len(keys) <= SMALL_MAP else None
    if grouped is None:  # a crowded bin: the general order (both maps' may differ)
        orders = hashmap_orders(np.fromiter((_KEY_HASHES[k] for k in keys), dtype=np.uint32, count=len(keys)))
        grouped, to_write = orders[0].tolist(), orders[1].tolist()
    else:
        to_write = grouped
    widths: list[int | None] = [None, None, None, None]  # the row's meta columns: strings
    widths += map(_width, types)
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
        schema = pa.schema([pa.field(c, _STRING) for c in META_COLUMNS] + list(map(pa.field, data_cols, types)))
        rows = FileRows(schema, columns, [_bytes(c, w) for c, w in zip(columns, widths, strict=True)])
        return MergeResult(_with_name(rows, target["file_name"]), n, 0, 0, n, _positions_of(keys, grouped, {}, 0))
    old = [base.columns[i] for i in old_at]
    if base_positions is None:
        base_positions = {k: i for i, k in enumerate(old[2])}
    get = base_positions.get
    at = [get(k, -1) for k in keys]
    pre = data_cols.index(target["precombine"])
    inc_pre, old_pre = inc[pre], old[len(_ROW_META) + pre]
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
    old_bytes = [base.column_bytes[i] for i in old_at]
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
    if old_schema.names == [*META_COLUMNS, *data_cols]:  # the version's own layout: its schema
        schema = old_schema
    else:
        schema = pa.schema(
            [old_schema.field(c) if c != FILE_NAME else _NAME_FIELD for c in [*META_COLUMNS, *data_cols]]
        )
    rows = FileRows(schema, columns, sizes)
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
