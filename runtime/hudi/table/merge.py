"""The copy-on-write merge of a write task's flush into a file group, as Hudi's Flink writer does it.

Sources (Hudi 0.12-0.14; ``docs/FIDELITY.md`` lists where 0.10 and 0.11 differ):

* ``FlinkWriteHelper.deduplicateRecords`` (``write.precombine``, on for a copy-on-write upsert):
  one record per key, the larger ordering (precombine) value wins and a tie goes to the later
  record (``preCombine``); the records come out in the iteration order of the ``HashMap`` that
  grouped them (:mod:`runtime.hudi.formats.java_hashmap`), keys put in arrival order.
* A file group without a base file: ``FlinkCreateHandle`` writes the records in that order.
* A file group with one (an earlier commit's, or this instant's first flush:
  ``FlinkMergeHandle``, ``FlinkMergeAndReplaceHandle``): ``HoodieMergeHandle.write`` walks the old
  file's rows in order; a row whose key comes in is replaced in place when the incoming record
  wins by the merge rule (:mod:`runtime.hudi.table.merge_rule`: by default the incoming ordering value
  is at least the stored one, a null one loses) and copied otherwise; ``close`` ->
  ``writeIncomingRecords`` then appends the keys new to the file in the order of
  ``keyToNewRecords`` (a ``HashMap`` the deduplicated records were put into).
* Meta columns: a row written from an incoming record gets the instant as commit time and
  ``instant_partitionId_n`` as sequence number (``HoodieRecord.generateSequenceId``;
  ``partitionId`` is the task's subtask index and ``n`` the rows the file writer has written so
  far, ``HoodieAvroParquetWriter.getWrittenRecordCount``: its position in the new file); a copied
  row keeps its commit time and sequence number (``rewriteRecordWithMetadata``); every row gets
  the new file's name.

The runtime's internal columns (``_offset``, ``_bucket``, ``_task``) never reach a base file.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from runtime.data.bucket import java_string_hash, java_string_hashes
from runtime.data.columns import INTERNAL_COLUMNS, OFFSET
from runtime.hudi.formats.java_hashmap import iteration_orders
from runtime.hudi.table.merge_rule import incoming_wins, numbers_win, plain_numbers
from runtime.hudi.table.table_config import META_COLUMNS, TableError

FILE_NAME = "_hoodie_file_name"
# the meta columns a merge writes before it names the file (every one but the file name)
_ROW_META = [c for c in META_COLUMNS if c != FILE_NAME]


def dedupe_latest(
    records: pa.Table, key: str, precombine: str, *, sort: bool = True, partition: str | None = None
) -> pa.Table:
    """One row per key, sorted by key (``sort=False``: in any order): the largest precombine value
    wins; ties go to the later stream offset (or the later row when there is no offset column).
    What a snapshot holds after the records (the verifier's expected state).

    ``partition``: one row per (partition, key) instead, sorted by both: the record's identity
    under a non-global index (Hudi's ``HoodieKey`` is the record key and the partition path).
    """
    if records.num_rows == 0:
        return records
    ident = [partition, key] if partition else [key]
    if len(ident) == 1 and pc.count_distinct(records.column(key), mode="all").as_py() == records.num_rows:
        # every key once (the common case for a small batch): only the order is left to do
        return records.take(pc.sort_indices(records.column(key))) if sort else records
    if OFFSET not in records.column_names:
        records = records.append_column(OFFSET, pa.array(np.arange(records.num_rows), pa.int64()))
    order = pc.sort_indices(
        records,
        sort_keys=[(c, "ascending") for c in ident] + [(precombine, "descending"), (OFFSET, "descending")],
    )
    s = records.take(order)
    first = np.zeros(s.num_rows, dtype=bool)
    first[0] = True
    for c in ident:  # a row starts a new identity when any of its columns differs from the row before
        col = s.column(c).combine_chunks()
        first[1:] |= pc.fill_null(pc.not_equal(col.slice(1), col.slice(0, s.num_rows - 1)), True).to_numpy(
            zero_copy_only=False
        )
    return s.filter(pa.array(first))


# A file version's key positions are kept for the next merge onto it (a dict lookup per incoming
# key instead of a hash join over the whole file) while the file group is small: the simulator's
# file groups are; the Ray host's large ones are joined in Arrow, without the memory of a dict.
MAX_INDEXED_ROWS = 4096
# Below this many incoming records their keys are handled as Python strings (fewer calls).
SMALL_FLUSH = 256

KeyPositions = dict[str, int]  # record key -> its row in a file version


@dataclass
class Deduplicated:
    """A flush after ``FlinkWriteHelper.deduplicateRecords``, before the grouping map's order:
    one record per key in order of each key's first arrival (the order the map saw the keys in)."""

    records: pa.Table
    hashes: npt.NDArray[np.uint32]  # String.hashCode of each key
    keys: list[str] | None  # the keys as strings, for a small flush


class _KeyHashes(dict[str, int]):
    """``String.hashCode`` of the keys seen, computed once each: a stream's keys come back flush
    after flush (an upsert stream's are mostly updates), and the hash is a Python loop per key."""

    def __missing__(self, key: str) -> int:
        if len(self) >= 1 << 20:  # bounded: a long run of fresh keys does not grow it forever
            self.clear()
        h = self[key] = java_string_hash(key)
        return h


_KEY_HASHES = _KeyHashes()


def flink_dedupe(records: pa.Table, key: str, precombine: str) -> Deduplicated:
    """One record per key, as :func:`dedupe_latest`, in order of first arrival, with the keys'
    hash codes; :func:`hashmap_orders` gives the order they leave the grouping map in."""
    n = records.num_rows
    column = _as_string(records.column(key))
    keys = column_values(column) if n <= SMALL_FLUSH else None
    distinct = len(set(keys)) == n if keys is not None else pc.count_distinct(column, mode="all").as_py() == n
    if not distinct:
        records = _latest_in_arrival_order(records, key, precombine)
        column = _as_string(records.column(key))
        keys = column_values(column) if keys is not None else None
    if keys is not None:
        hashes = np.fromiter(map(_KEY_HASHES.__getitem__, keys), dtype=np.uint32, count=len(keys))
    else:
        hashes = java_string_hashes(column)
    return Deduplicated(records, hashes, keys)


def _latest_in_arrival_order(records: pa.Table, key: str, precombine: str) -> pa.Table:
    """:func:`dedupe_latest`'s winner of each key, the keys in order of first arrival. With a
    signed-integer or float precombine field (no nulls, no NaN) in numpy: the key's dictionary
    codes are in order of first occurrence, and a sort by code, then precombine and offset
    descending, puts each key's winner first. Otherwise through :func:`dedupe_latest`."""
    pre = records.column(precombine)
    values = (
        pre.to_numpy()
        if not pre.null_count and (pa.types.is_signed_integer(pre.type) or pa.types.is_floating(pre.type))
        else None
    )
    if values is None or (values.dtype.kind == "f" and np.isnan(values).any()):
        winners = dedupe_latest(records, key, precombine, sort=False)
        first_seen = pc.unique(records.column(key))  # in order of first occurrence
        return winners.take(pc.index_in(first_seen, value_set=winners.column(key)))
    codes = pc.dictionary_encode(records.column(key)).combine_chunks().indices.to_numpy()
    n = records.num_rows
    later = records.column(OFFSET).to_numpy() if OFFSET in records.column_names else np.arange(n)
    order = np.lexsort((-later, -values, codes))  # the last key sorts first
    sorted_codes = codes[order]
    first = np.ones(n, dtype=bool)
    first[1:] = sorted_codes[1:] != sorted_codes[:-1]
    return records.take(pa.array(order[first]))


def hashmap_orders(hashes: npt.NDArray[np.uint32]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(the deduplicated records' order: the grouping map's; the order of ``keyToNewRecords``,
    filled in that order), each as positions into the records in order of first arrival."""
    return iteration_orders(hashes)


Rows = TypeVar("Rows")  # how a merge's new version is held: an Arrow table, or Python values


@dataclass
class MergeResult(Generic[Rows]):
    table: Rows  # the new file version, meta columns first
    inserts: int  # keys new to the file group
    updates: int  # keys replaced whose previous row came from an earlier instant
    rewritten: int  # keys replaced that were already written in this instant (re-flush)
    written: int  # rows carrying this instant's commit time
    key_positions: KeyPositions | None = None  # for the next merge onto this version (small ones)


def _as_string(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return col if pa.types.is_string(col.type) else pc.cast(col, pa.string())


def column_values(column: pa.ChunkedArray) -> list[Any]:
    """A column's Python values (``to_pylist``'s, several times faster through numpy's objects
    when it has no nulls: ``to_pylist`` makes a scalar of each value)."""
    if column.null_count:
        values: list[Any] = column.to_pylist()
    else:
        values = column.to_numpy(zero_copy_only=False).tolist()
    return values


def merge_file_group(
    base: pa.Table | None,
    incoming: pa.Table,
    *,
    instant: str,
    partition: str,
    file_name: str,
    key: str,
    precombine: str,
    partition_id: int,
    base_instant: str | None = None,
    base_positions: KeyPositions | None = None,
    keep_meta: bool = False,
) -> MergeResult[pa.Table]:
    """The new version of a file group: ``base`` (the current version, or None) merged with the
    flush ``incoming``, row for row as Hudi writes it (the module docstring has the rules).

    ``base_instant``, when the caller knows it, is the instant that wrote ``base``: a version from
    another instant holds no row of ``instant`` (instants only grow), so its rows are not searched
    for it. ``base_positions``: the ``key_positions`` of the merge that wrote ``base``, if kept."""
    # Few Arrow calls, each over whole columns (one take of the incoming records, at most one of
    # the new version): the simulator merges tens of thousands of small file groups, where the
    # cost is per call, not per row.
    data_cols = _data_columns(incoming)
    dd = flink_dedupe(incoming, key, precombine)
    inc = dd.records
    grouped, to_write = hashmap_orders(dd.hashes)
    n_base = 0 if base is None else base.num_rows
    if base is None or not n_base:  # FlinkCreateHandle: the records in the grouping map's order
        n = len(grouped)
        fresh = _fresh_rows(
            inc, grouped, None, np.arange(n), instant, partition, partition_id, key, data_cols, keep_meta
        )
        positions = _positions_of(dd.keys, grouped, {}, 0)
        return MergeResult(_named(fresh, file_name), n, 0, 0, n, positions)
    try:  # the old rows' columns, all there unless the incoming records brought new ones
        old = base.select(_ROW_META + data_cols)
    except KeyError:
        _require_columns(base, data_cols)
        raise
    at, base_positions = _positions_in_base(dd, base, key, base_positions)
    wins = _wins(inc, base, precombine, at)
    updated = np.flatnonzero((at >= 0) & wins)
    replaced = at[updated]  # each update's old row
    new = to_write[at[to_write] < 0]  # keyToNewRecords' order, the keys the old file lacked
    rewritten, kept_written = _rows_of_instant(base, instant, base_instant, replaced)
    rows = np.concatenate([updated, new])  # the rows written from incoming records
    positions = np.concatenate([replaced, np.arange(n_base, n_base + len(new))])
    fresh = _fresh_rows(inc, rows, old.schema, positions, instant, partition, partition_id, key, data_cols, keep_meta)
    both = _updated_in_place(pa.concat_tables([old, fresh]), n_base, replaced, len(new))
    updates = len(replaced) - rewritten
    return MergeResult(
        _named(both, file_name),
        len(new),
        updates,
        rewritten,
        len(rows) + kept_written,
        _positions_of(dd.keys, new, base_positions, n_base),
    )


# an incoming table's data columns by its column names: every flush of a run has the same ones
# (callers only read the list)
_DATA_COLUMNS: dict[tuple[str, ...], list[str]] = {}


def _data_columns(records: pa.Table) -> list[str]:
    """The columns of ``records`` a base file keeps: neither the runtime's nor Hudi's meta columns."""
    return data_columns_named(records.schema.names)  # (``column_names`` costs five times as much)


def data_columns_named(names: list[str]) -> list[str]:
    """:func:`_data_columns` of a table with these column names."""
    key = tuple(names)
    found = _DATA_COLUMNS.get(key)
    if found is None:
        if len(_DATA_COLUMNS) >= 64:
            _DATA_COLUMNS.clear()
        found = _DATA_COLUMNS[key] = [c for c in names if c not in INTERNAL_COLUMNS and c not in META_COLUMNS]
    return found


def _require_columns(base: pa.Table, data_cols: list[str]) -> None:
    missing = sorted(set(data_cols) - set(base.column_names))
    if missing:
        raise TableError(
            f"the incoming records have columns {missing} that the existing base "
            "file lacks: schema evolution is not supported"
        )


def _positions_in_base(
    dd: Deduplicated, base: pa.Table, key: str, base_positions: KeyPositions | None
) -> tuple[npt.NDArray[np.int64], KeyPositions | None]:
    """(where each deduplicated record's key sits in ``base``, -1 for a new key; the base's key
    positions, indexed now for a small flush onto a small file when the caller had none)."""
    if dd.keys is not None and base_positions is None and base.num_rows <= MAX_INDEXED_ROWS:
        base_positions = {k: i for i, k in enumerate(column_values(base.column("_hoodie_record_key")))}
    if dd.keys is not None and base_positions is not None:
        at = np.fromiter((base_positions.get(k, -1) for k in dd.keys), dtype=np.int64, count=len(dd.keys))
    else:
        at = _positions_in(dd.records.column(key), base.column(key))
    return at, base_positions


def _updated_in_place(both: pa.Table, n_base: int, replaced: npt.NDArray[np.int64], n_new: int) -> pa.Table:
    """``both`` (the old rows, then the updates, then the new keys) with each update in its old
    row's place: the old rows in place, the updated ones taken from the fresh rows."""
    n_updated = len(replaced)
    if not n_updated:
        return both
    index = np.arange(n_base + n_new, dtype=np.int64)
    index[replaced] = n_base + np.arange(n_updated)
    index[n_base:] = n_base + n_updated + np.arange(n_new)
    return both.take(pa.array(index, pa.int64()))


def _positions_of(
    keys: list[str] | None, new: npt.NDArray[np.intp] | list[int], old: KeyPositions | None, n_old: int
) -> KeyPositions | None:
    """The new version's key positions: the old ones (updates stay in place) and the new keys,
    appended from ``n_old`` on; None when not kept (a large flush or file)."""
    if keys is None or old is None or n_old + len(new) > MAX_INDEXED_ROWS:
        return None
    positions = dict(old)
    for i, row in enumerate(new if isinstance(new, list) else new.tolist(), start=n_old):
        positions[keys[row]] = i
    return positions


def _named(table: pa.Table, file_name: str) -> pa.Table:
    """``table`` with the file name column in its place among the meta columns."""
    return table.add_column(META_COLUMNS.index(FILE_NAME), FILE_NAME, _repeated(file_name, table.num_rows))


def _repeated(value: str, n: int) -> pa.Array:
    """``pa.repeat(pa.scalar(value, pa.string()), n)``, the same buffers (offsets, data, no
    validity), built from them: a string scalar costs more than the repeat, at every merge."""
    data = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


def _fresh_rows(
    records: pa.Table,
    rows: npt.NDArray[np.intp],
    schema: pa.Schema | None,
    positions: npt.NDArray[np.int64],
    instant: str,
    partition: str,
    partition_id: int,
    key: str,
    data_cols: list[str],
    keep_meta: bool = False,
) -> pa.Table:
    """``records`` at ``rows``, with this instant's meta columns (all but the file name) in
    ``schema`` (the old version's; None: strings); ``positions``: each row's place in the new
    file (its sequence number). ``keep_meta``: the records' own commit times and sequence numbers."""
    n = len(rows)
    own_meta = _ROW_META[:2] if keep_meta else []
    records = records.select(own_meta + data_cols)  # the internal columns are not taken along
    if not _all_in_order(rows, records.num_rows):
        records = records.take(pa.array(rows, pa.int64()))
    key_type = schema.field("_hoodie_record_key").type if schema is not None else pa.string()
    columns = records.columns  # own meta, then the data columns (one call, not one per name)
    data = columns[len(own_meta) :]
    keys = data[data_cols.index(key)]
    prefix = f"{instant}_{partition_id}_"
    arrays = [
        columns[0] if keep_meta else _repeated(instant, n),  # _hoodie_commit_time
        columns[1] if keep_meta else _seqnos(prefix, positions),  # _hoodie_commit_seqno
        keys if keys.type == key_type else pc.cast(keys, key_type),  # _hoodie_record_key
        _repeated(partition, n),  # _hoodie_partition_path
        *data,
    ]
    fresh = pa.Table.from_arrays(arrays, names=_ROW_META + data_cols)
    if schema is not None and not fresh.schema.equals(schema):
        fresh = fresh.cast(schema)
    return fresh


def _all_in_order(rows: npt.NDArray[np.intp], n: int) -> bool:
    """Whether ``rows`` is every one of ``n`` rows in order (nothing to take): on Python ints for
    a small flush, where numpy's calls cost more than the comparison."""
    if len(rows) != n:
        return False
    if n <= SMALL_FLUSH:
        return bool(rows.tolist() == list(range(n)))
    return n < 2 or bool((np.diff(rows) > 0).all())


def _seqnos(prefix: str, positions: npt.NDArray[np.int64]) -> pa.Array:
    """``prefix + position`` for every row (in Arrow past a small flush: two calls, not a string each)."""
    if len(positions) <= SMALL_FLUSH:  # the buffers built here: Arrow's converter from objects costs more
        data = [(prefix + str(p)).encode() for p in positions.tolist()]
        offsets = array("i", accumulate(map(len, data), initial=0))
        return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets), pa.py_buffer(b"".join(data)))
    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(positions), pa.string()), "")


def _positions_in(keys: pa.ChunkedArray, base_keys: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Where each key sits in the old file (-1: a new key), by a hash join in Arrow."""
    pos = pc.index_in(keys, value_set=base_keys)
    if pos.null_count == len(pos):
        return np.full(len(pos), -1, dtype=np.int64)
    at: npt.NDArray[np.int64] = pc.fill_null(pos, -1).to_numpy().astype(np.int64)
    return at


def _wins(inc: pa.Table, base: pa.Table, precombine: str, at: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Whether each incoming record wins over the stored one (``at``: its row, -1 for a new key,
    which always wins), by the merge rule (:mod:`runtime.hudi.table.merge_rule`)."""
    found = at >= 0
    if not found.any():
        return np.ones(len(at), dtype=bool)
    where = np.flatnonzero(found)
    wins = np.ones(len(at), dtype=bool)
    inc_pre, base_pre = inc.column(precombine), base.column(precombine)
    if plain_numbers(inc_pre, base_pre):  # numpy picks and compares the pairs: no Arrow call
        wins[where] = numbers_win(inc_pre.to_numpy()[where], base_pre.to_numpy()[at[where]])
    else:
        wins[where] = incoming_wins(inc_pre.take(pa.array(where)), base_pre.take(pa.array(at[where])))
    return wins


def _rows_of_instant(
    base: pa.Table, instant: str, base_instant: str | None, replaced: npt.NDArray[np.int64]
) -> tuple[int, int]:
    """(rewritten, kept): the base rows already carrying this instant's commit time (a re-flush
    within one instant) that an incoming record replaces, and those that stay."""
    if base_instant is None or base_instant == instant:
        of_instant = pc.equal(base.column("_hoodie_commit_time"), instant).to_numpy(zero_copy_only=False)
    else:
        of_instant = np.zeros(0, dtype=bool)
    if not of_instant.any():
        return 0, 0
    rewritten = int(of_instant[replaced].sum())
    return rewritten, int(of_instant.sum()) - rewritten


def log_records(
    incoming: pa.Table,
    *,
    instant: str,
    partition: str,
    file_id: str,
    key: str,
    precombine: str,
    partition_id: int,
    seqno: int,
    precombined: bool = False,
) -> pa.Table:
    """A merge-on-read flush as ``FlinkAppendHandle`` appends it: every record in arrival order
    (Hudi's default, ``write.precombine`` off for merge-on-read: the reader merges), or with
    ``precombined`` one per key (``FlinkWriteHelper.deduplicateRecords``) in the grouping map's
    order; with the meta fields ``HoodieAppendHandle`` gives a log record: the instant,
    ``<instant>_<task>_<n>`` sequence numbers counting on from ``seqno``, the key, the partition
    path, and the file id as ``_hoodie_file_name``. Nothing is merged with the slice."""
    data_cols = _data_columns(incoming)
    if precombined:
        dd = flink_dedupe(incoming, key, precombine)
        records, rows = dd.records, hashmap_orders(dd.hashes)[0]
    else:
        records, rows = incoming, np.arange(incoming.num_rows, dtype=np.intp)
    positions = np.arange(seqno, seqno + len(rows), dtype=np.int64)
    fresh = _fresh_rows(records, rows, None, positions, instant, partition, partition_id, key, data_cols)
    return _named(fresh, file_id)
