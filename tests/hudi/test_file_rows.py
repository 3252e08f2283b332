"""The copy-on-write merge on Python values (runtime.hudi.table.file_rows), which the simulated disk
keeps: it must give the Arrow merge's version row for row and type for type (a simulated table is
read back and verified through it), decline what it does not hold, and keep its size model's
books as a version is merged onto flush after flush."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.hudi.table.file_rows import FileRows, merge_rows, merge_version
from runtime.hudi.table.merge import merge_file_group
from runtime.hudi.table.table_config import META_COLUMNS, TableError
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore

KEY, PRE = "key", "ts"
INSTANTS = ["20240101000000001", "20240101000000002", "20240101000000003"]


def flush(rows: list[tuple[str, int | None, str, float, bool]], first_offset: int, pre_type: pa.DataType) -> pa.Table:
    n = len(rows)
    return pa.table(
        {
            KEY: pa.array([r[0] for r in rows], pa.string()),
            PRE: pa.array([r[1] for r in rows], pre_type),
            "payload": pa.array([r[2] for r in rows], pa.string()),
            "score": pa.array([r[3] for r in rows], pa.float32()),
            "flag": pa.array([r[4] for r in rows], pa.bool_()),
            "_offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
            "_bucket": pa.array([0] * n, pa.int32()),
            "_task": pa.array([0] * n, pa.int32()),
        }
    )


TARGET = dict(partition="p", file_name="f.parquet", key=KEY, precombine=PRE, partition_id=0)


def created(rows: list[tuple[str, int | None, str, float, bool]]) -> FileRows:
    """The first version of a file group from a flush of ``rows``, merged as rows."""
    merged = merge_rows(None, flush(rows, 0, pa.int64()), instant=INSTANTS[0], **TARGET)
    assert merged is not None
    return merged.table


ROW = st.tuples(
    st.sampled_from([f"k{i}" for i in range(12)] + ["ключ", "é"]),  # few keys: updates and duplicates
    st.one_of(st.none(), st.integers(-3, 3)),
    st.text(max_size=4),
    st.floats(allow_nan=True, width=32),
    st.booleans(),
)


def both(base_arrow, base_rows, incoming, instant, base_instant, positions, partition_id=3):
    kw = dict(
        instant=instant,
        partition="p/1",
        file_name=f"fg-{instant}.parquet",
        key=KEY,
        precombine=PRE,
        partition_id=partition_id,
        base_instant=base_instant,
    )
    arrow = merge_file_group(base_arrow, incoming, base_positions=positions, **kw)
    rows = merge_rows(base_rows, incoming, base_positions=positions, **kw)
    return arrow, rows


@settings(max_examples=150, deadline=None)
@given(
    flushes=st.lists(st.lists(ROW, min_size=1, max_size=9), min_size=1, max_size=5),
    instants=st.lists(st.sampled_from(INSTANTS), min_size=5, max_size=5),
    pre_type=st.sampled_from([pa.int64(), pa.int32(), pa.float64(), pa.string()]),
    keep_positions=st.booleans(),
    nulls=st.booleans(),  # without: duplicated keys are decided in Python, not handed to Arrow
)
def test_the_row_merge_gives_the_arrow_merge_s_version_flush_after_flush(
    flushes, instants, pre_type, keep_positions, nulls
):
    instants = sorted(instants)  # instants only grow; a repeated one is a re-flush
    base_arrow: pa.Table | None = None
    base_rows: FileRows | None = None
    positions = None
    prev_instant = None
    offset = 0
    for rows, instant in zip(flushes, instants, strict=False):
        if not nulls:
            rows = [(k, 0 if p is None else p, s, f, b) for k, p, s, f, b in rows]
        if pa.types.is_string(pre_type):
            rows = [(k, None if p is None else str(p), s, f, b) for k, p, s, f, b in rows]
        incoming = flush(rows, offset, pre_type)
        offset += len(rows)
        arrow, merged = both(base_arrow, base_rows, incoming, instant, prev_instant, positions)
        assert merged is not None
        table = merged.table.to_arrow()
        assert table.schema == arrow.table.schema
        assert repr(table.to_pylist()) == repr(arrow.table.to_pylist())  # (a NaN equals itself here)
        counts = (merged.inserts, merged.updates, merged.rewritten, merged.written, merged.key_positions)
        assert counts == (arrow.inserts, arrow.updates, arrow.rewritten, arrow.written, arrow.key_positions)
        # the size model's books, kept merge by merge, are the model's of the rows from scratch
        fresh = FileRows.from_arrow(table)
        assert fresh is not None and merged.table.nbytes == fresh.nbytes
        # and so are the rows' commit times, counted merge by merge (what a re-flush's counts read)
        assert merged.table.commit_times() == fresh.commit_times()
        base_arrow, base_rows, prev_instant = arrow.table, merged.table, instant
        positions = merged.key_positions if keep_positions else None


def test_a_duplicated_key_keeps_its_largest_ordering_value_and_the_later_record_of_a_tie():
    rows = [("a", 1, "first", 0.5, True), ("b", 5, "b", 0.5, True), ("a", 3, "largest", 0.5, True)]
    rows += [("a", 2, "smaller", 0.5, True), ("b", 5, "b later", 0.5, True)]
    got = {r[KEY]: r["payload"] for r in created(rows).to_arrow().to_pylist()}
    assert got == {"a": "largest", "b": "b later"}


def test_the_size_model_counts_utf8_bytes_and_offsets():
    meta = {c: ["ab-01", "ab-02", "ab-03"] for c in META_COLUMNS}  # 5 strings of 5 bytes a row
    meta["_hoodie_file_name"] = ["f.parquet"] * 3  # 9 bytes, the same in every row
    table = pa.table({**meta, "s": ["ab", "ключ", None], "i": pa.array([1, 2, 3], pa.int32())})
    rows = FileRows.from_arrow(table)
    assert rows is not None
    assert rows.nbytes == 4 * 3 * (5 + 4) + 3 * (9 + 4) + (2 + 8 + 3 * 4) + 3 * 4


def test_rows_of_another_layout_are_not_held():
    assert FileRows.from_arrow(pa.table({"s": ["a"]})) is None  # no meta columns
    meta = {c: ["x", "y"] for c in META_COLUMNS}
    assert FileRows.from_arrow(pa.table(meta)) is None  # two file names


def nested_flush() -> pa.Table:
    return pa.table(
        {
            KEY: ["a", "b"],
            PRE: pa.array([1, 2], pa.int64()),
            "amount": pa.array([decimal.Decimal("1.10"), decimal.Decimal("2.20")], pa.decimal128(10, 2)),
            "tags": pa.array([["x"], []], pa.list_(pa.string())),
        }
    )


def test_a_type_the_rows_do_not_hold_is_merged_in_arrow():
    incoming = nested_flush()
    kw = dict(instant=INSTANTS[0], **TARGET)
    assert merge_rows(None, incoming, **kw) is None
    merged = merge_version(None, incoming, as_rows=True, **kw)
    assert isinstance(merged.table, pa.Table)
    assert merged.table.equals(merge_file_group(None, incoming, **kw).table)
    assert FileRows.from_arrow(merged.table) is None


def test_a_large_flush_is_merged_in_arrow_and_the_next_small_one_in_rows_again():
    big = flush([(f"k{i}", i, "x", 0.5, True) for i in range(300)], 0, pa.int64())
    kw = TARGET
    first = merge_version(None, big, as_rows=True, instant=INSTANTS[0], **kw)
    assert isinstance(first.table, pa.Table)  # past the small flush: Arrow's hash join
    small = flush([("k1", 9, "y", 1.5, False), ("new", 1, "z", 2.5, True)], 300, pa.int64())
    second = merge_version(first.table, small, as_rows=True, instant=INSTANTS[1], base_instant=INSTANTS[0], **kw)
    assert isinstance(second.table, FileRows)
    expected = merge_file_group(first.table, small, instant=INSTANTS[1], base_instant=INSTANTS[0], **kw)
    assert second.table.to_arrow().equals(expected.table)


def test_a_schema_the_old_version_lacks_is_refused_as_the_arrow_merge_refuses_it():
    kw = TARGET
    one = flush([("a", 1, "x", 0.5, True)], 0, pa.int64())
    first = merge_version(None, one, as_rows=True, instant=INSTANTS[0], **kw)
    wider = flush([("a", 2, "y", 0.5, True)], 1, pa.int64()).append_column("extra", pa.array([1]))
    with pytest.raises(TableError, match="schema evolution"):
        merge_version(first.table, wider, as_rows=True, instant=INSTANTS[1], **kw)


def test_the_simulated_disk_keeps_rows_reports_their_size_and_reads_them_back_as_a_table():
    dfs = MemoryDfs(MemoryStore())
    dfs.mkdirs("/t/p")
    rows = created([("a", 1, "x", 0.5, True), ("b", 2, "y", 1.5, False)])
    assert dfs.write_parquet("/t/p/f.parquet", rows) == rows.nbytes
    assert dfs.read_parquet("/t/p/f.parquet").equals(rows.to_arrow())
    assert dfs.read_parquet("/t/p/f.parquet", columns=[KEY]).column_names == [KEY]


def test_a_column_the_flush_lacks_leaves_the_version_as_it_leaves_the_arrow_merge_s():
    kw = TARGET
    wide = flush([("a", 1, "x", 0.5, True)], 0, pa.int64()).append_column("old", pa.array([7]))
    first = merge_file_group(None, wide, instant=INSTANTS[0], **kw)
    narrow = flush([("a", 2, "y", 0.5, True), ("b", 1, "z", 1.5, False)], 1, pa.int64())
    both_kw = dict(instant=INSTANTS[1], base_instant=INSTANTS[0], **kw)
    rows = merge_version(first.table, narrow, as_rows=True, **both_kw)
    assert isinstance(rows.table, pa.Table)  # merged in Arrow
    expected = merge_file_group(first.table, narrow, **both_kw).table
    assert "old" not in expected.column_names
    assert rows.table.equals(expected)


def test_a_flush_merged_again_onto_another_version_is_merged_as_a_fresh_one():
    # a simulator's runs of one job flush the same batch again (what the merge works out of the
    # flush is remembered): onto another version, the result is a fresh flush's, row for row
    rows = [("k1", 5, "a", 1.0, True), ("k2", 1, "b", 2.0, False), ("k1", 7, "c", 3.0, True)]
    incoming = flush(rows, 10, pa.int64())
    onto = [created([("k2", 3, "x", 0.5, False)]), created([("k3", 0, "y", 0.5, True)]), None]
    for base in onto:
        kw = dict(TARGET, instant=INSTANTS[1], base_instant=INSTANTS[0] if base is not None else None)
        again = merge_rows(base, incoming, **kw)
        fresh = merge_rows(base, flush(rows, 10, pa.int64()), **kw)
        assert again is not None and fresh is not None
        assert again.table.rows == fresh.table.rows and again.table.row_bytes == fresh.table.row_bytes
        assert (again.inserts, again.updates, again.written) == (fresh.inserts, fresh.updates, fresh.written)


def test_a_merge_met_again_gives_the_version_it_made_and_no_other():
    # a simulator's runs of one job merge the same flushes onto the same versions again: the
    # version made before is taken (rows, counters and key positions); another target or another
    # base is merged afresh, as a fresh flush would be
    one = flush([("k1", 5, "a", 1.0, True), ("k2", 1, "b", 2.0, False)], 0, pa.int64())
    two = flush([("k2", 4, "c", 3.0, True), ("k3", 2, "d", 4.0, False)], 2, pa.int64())

    def run(instants: list[str]) -> list:
        first = merge_version(None, one, as_rows=True, instant=instants[0], **TARGET)
        second = merge_version(
            first.table,
            two,
            as_rows=True,
            instant=instants[1],
            base_instant=instants[0],
            base_positions=first.key_positions,
            **TARGET,
        )
        return [first, second]

    a, b = run(INSTANTS[:2]), run(INSTANTS[:2])
    assert a[0] is b[0] and a[1] is b[1]
    other = run(INSTANTS[1:3])
    assert other[1].table.rows[0][0] == INSTANTS[1] and other[1].table.rows[1][0] == INSTANTS[2]
    fresh = merge_rows(
        created([("k1", 5, "a", 1.0, True), ("k2", 1, "b", 2.0, False)]),
        flush([("k2", 4, "c", 3.0, True), ("k3", 2, "d", 4.0, False)], 2, pa.int64()),
        instant=INSTANTS[1],
        base_instant=INSTANTS[0],
        **TARGET,
    )
    assert fresh is not None and fresh.table.rows == a[1].table.rows and fresh.key_positions == a[1].key_positions
    assert a[1].table.to_arrow() is a[1].table.to_arrow()  # built once
    assert a[1].table.to_arrow().equals(fresh.table.to_arrow())
