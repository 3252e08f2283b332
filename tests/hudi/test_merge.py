"""Tests of the copy-on-write merge (runtime.hudi.table.merge.merge_file_group / dedupe_latest).

Rules (Hudi's upsert with a precombine field): per key the larger precombine value wins; on a tie
the later record wins (later ``_offset``; an incoming record is later than the base file's row).
Rows that do not change keep their commit time and sequence number (incremental reads filter on
them) but move to the new file. Rows come in Hudi's order: the old file's rows in place (an
updated one where its old row was), then the new keys in the order of Java's HashMap; a row
written from an incoming record has its position in the file as sequence number. The runtime's
internal columns never reach a base file.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.data.bucket import java_string_hashes
from runtime.data.columns import INTERNAL_COLUMNS
from runtime.hudi.formats.java_hashmap import iteration_order
from runtime.hudi.table import merge as merge_module
from runtime.hudi.table.merge import dedupe_latest, merge_file_group
from runtime.hudi.table.table_config import META_COLUMNS, TableError

KEY, PRE = "key", "ts"
I1, I2, I3 = "20240101000000001", "20240101000000002", "20240101000000003"


def records(rows: list[tuple[str, int, str]], first_offset: int = 0) -> pa.Table:
    """(key, ts, payload) rows as the stream carries them, with the internal columns."""
    n = len(rows)
    return pa.table(
        {
            KEY: pa.array([r[0] for r in rows], pa.string()),
            "partition": pa.array(["p0"] * n, pa.string()),
            PRE: pa.array([r[1] for r in rows], pa.int64()),
            "payload": pa.array([r[2] for r in rows], pa.string()),
            "_offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
            "_bucket": pa.array([0] * n, pa.int32()),
            "_task": pa.array([0] * n, pa.int32()),
        }
    )


def merge(
    base: pa.Table | None,
    incoming: pa.Table,
    instant: str,
    file_name: str | None = None,
    partition_id: int = 0,
    base_instant: str | None = None,
):
    return merge_file_group(
        base,
        incoming,
        instant=instant,
        partition="p0",
        file_name=file_name or f"fg-0_0-0-0_{instant}.parquet",
        key=KEY,
        precombine=PRE,
        partition_id=partition_id,
        base_instant=base_instant,
    )


def rows_by_key(t: pa.Table) -> dict[str, dict[str, Any]]:
    return {r[KEY]: r for r in t.to_pylist()}


# -- dedupe_latest ---------------------------------------------------------------------------------


def test_dedupe_keeps_the_largest_precombine_per_key():
    t = records([("a", 1, "a1"), ("b", 5, "b5"), ("a", 3, "a3"), ("a", 2, "a2"), ("b", 4, "b4")])
    out = dedupe_latest(t, KEY, PRE)
    assert sorted(out.column("payload").to_pylist()) == ["a3", "b5"]


def test_dedupe_tie_goes_to_the_later_offset():
    t = records([("a", 7, "first"), ("a", 7, "second"), ("a", 6, "older")])
    assert dedupe_latest(t, KEY, PRE).column("payload").to_pylist() == ["second"]
    # offsets decide, not row order
    t = t.set_column(t.column_names.index("_offset"), "_offset", pa.array([9, 2, 5], pa.int64()))
    assert dedupe_latest(t, KEY, PRE).column("payload").to_pylist() == ["first"]


def test_dedupe_without_offset_column_tie_goes_to_the_later_row():
    t = records([("a", 7, "first"), ("a", 7, "second")]).drop_columns(["_offset"])
    assert dedupe_latest(t, KEY, PRE).column("payload").to_pylist() == ["second"]


def test_dedupe_of_empty_and_single_row():
    empty = records([])
    assert dedupe_latest(empty, KEY, PRE).num_rows == 0
    one = records([("a", 1, "x")])
    assert dedupe_latest(one, KEY, PRE).column("payload").to_pylist() == ["x"]


# -- merge_file_group ------------------------------------------------------------------------------


def test_first_write_inserts_every_key_with_meta_columns():
    r = merge(
        None,
        records([("b", 1, "b1"), ("a", 1, "a1"), ("c", 1, "c1")]),
        I1,
        file_name="fg_1-0-0_x.parquet",
        partition_id=3,
    )
    t = r.table
    assert t.column_names == list(META_COLUMNS) + [KEY, "partition", PRE, "payload"]
    assert (r.inserts, r.updates, r.rewritten, r.written) == (3, 0, 0, 3)
    rows = t.to_pylist()
    assert [x["_hoodie_record_key"] for x in rows] == hashmap_order(["b", "a", "c"]) == ["a", "b", "c"]
    assert {x["_hoodie_commit_time"] for x in rows} == {I1}
    assert [x["_hoodie_commit_seqno"] for x in rows] == [f"{I1}_3_{i}" for i in range(3)]
    assert {x["_hoodie_partition_path"] for x in rows} == {"p0"}
    assert {x["_hoodie_file_name"] for x in rows} == {"fg_1-0-0_x.parquet"}
    for c in META_COLUMNS:
        assert t.schema.field(c).type == pa.string()


def hashmap_order(keys: list[str]) -> list[str]:
    """Java's HashMap order of distinct keys put in this order (tests/hudi/test_java_hashmap.py
    checks it against a JVM)."""
    return [keys[i] for i in iteration_order(java_string_hashes(pa.array(keys, pa.string())))]


def keys_of(table: pa.Table) -> list[str]:
    return table.column("_hoodie_record_key").to_pylist()


def test_a_new_file_group_is_written_in_the_hash_maps_order_not_the_arrival_or_key_order():
    # "p" (hash 112) sits in bin 0 of 16, "a" (97) in bin 1; "q" (113) shares bin 1 after "a"
    r = merge(None, records([("q", 1, "q"), ("a", 1, "a"), ("p", 1, "p")]), I1)
    assert keys_of(r.table) == ["p", "q", "a"]
    assert r.table.column("_hoodie_commit_seqno").to_pylist() == [f"{I1}_0_{i}" for i in range(3)]


def test_an_update_stays_in_its_old_place_and_new_keys_follow_the_old_rows():
    base = merge(None, records([("q", 1, "q"), ("a", 1, "a"), ("p", 1, "p")]), I1).table  # p, q, a
    r = merge(base, records([("b", 1, "b"), ("q", 2, "q2"), ("c", 1, "c")], first_offset=10), I2, base_instant=I1)
    assert keys_of(r.table) == ["p", "q", "a"] + hashmap_order(["b", "c"])
    rows = r.table.to_pylist()
    assert rows[1]["payload"] == "q2" and rows[1]["_hoodie_commit_seqno"] == f"{I2}_0_1"  # its position
    assert [x["_hoodie_commit_seqno"] for x in rows[3:]] == [f"{I2}_0_3", f"{I2}_0_4"]
    assert [x["_hoodie_commit_seqno"] for x in (rows[0], rows[2])] == [f"{I1}_0_0", f"{I1}_0_2"]  # copied
    assert (r.inserts, r.updates, r.written) == (2, 1, 3)


def test_new_keys_follow_the_hash_maps_order_of_every_incoming_key():
    # keyToNewRecords holds the updated keys too: 13 incoming keys make it 32 bins, where "B"
    # (66: bin 2) comes before "Q" (81: bin 17); alone in 16 bins "Q" (bin 1) would come first
    old = [f"k{i}" for i in range(11)]
    base = merge(None, records([(k, 1, k) for k in old]), I1).table
    r = merge(base, records([("Q", 1, "Q")] + [(k, 2, k) for k in old] + [("B", 1, "B")], first_offset=20), I2)
    assert keys_of(r.table) == keys_of(base) + ["B", "Q"]
    assert hashmap_order(["Q", "B"]) == ["Q", "B"]


def test_internal_columns_never_reach_the_output():
    r = merge(None, records([("a", 1, "x")]), I1)
    assert not set(INTERNAL_COLUMNS) & set(r.table.column_names)
    r2 = merge(r.table, records([("a", 2, "y"), ("b", 1, "z")], first_offset=10), I2)
    assert not set(INTERNAL_COLUMNS) & set(r2.table.column_names)
    assert r2.table.column_names == r.table.column_names


def test_larger_incoming_precombine_replaces_the_base_row():
    base = merge(None, records([("a", 5, "old"), ("b", 5, "b")]), I1).table
    r = merge(base, records([("a", 6, "new")], first_offset=10), I2)
    rows = rows_by_key(r.table)
    assert rows["a"]["payload"] == "new" and rows["a"][PRE] == 6
    assert rows["a"]["_hoodie_commit_time"] == I2
    assert (r.inserts, r.updates, r.rewritten) == (0, 1, 0)


def test_a_tie_with_the_base_row_goes_to_the_incoming_record():
    base = merge(None, records([("a", 5, "old")]), I1).table
    r = merge(base, records([("a", 5, "new")], first_offset=10), I2)
    row = rows_by_key(r.table)["a"]
    assert row["payload"] == "new" and row["_hoodie_commit_time"] == I2
    assert (r.inserts, r.updates) == (0, 1)


@pytest.mark.parametrize("pre_type", [pa.int32(), pa.float64(), pa.string()])
def test_the_precombine_rule_holds_for_other_precombine_types(pre_type):
    """Integers and floats are compared in numpy, anything else in Arrow: the same rule."""

    def typed(rows, first_offset=0):
        t = records(rows, first_offset)
        col = pa.array([str(r[1]) if pre_type == pa.string() else r[1] for r in rows], pre_type)
        return t.set_column(t.column_names.index(PRE), PRE, col)

    base = merge(None, typed([("a", 5, "a-old"), ("b", 5, "b-old"), ("c", 5, "c-old")]), I1).table
    r = merge(
        base,
        typed([("a", 6, "a-new"), ("b", 4, "b-new"), ("c", 5, "c-new"), ("d", 1, "d")], first_offset=10),
        I2,
        base_instant=I1,
    )
    assert {k: v["payload"] for k, v in rows_by_key(r.table).items()} == {
        "a": "a-new",
        "b": "b-old",
        "c": "c-new",
        "d": "d",
    }
    assert (r.inserts, r.updates, r.rewritten, r.written) == (1, 2, 0, 3)


def test_an_incoming_record_without_a_precombine_value_loses_to_the_base_row():
    base = merge(None, records([("a", 5, "kept")]), I1).table
    inc = records([("a", 9, "dropped"), ("b", 1, "b")], first_offset=10)
    inc = inc.set_column(inc.column_names.index(PRE), PRE, pa.array([None, 1], pa.int64()))
    r = merge(base, inc, I2)
    assert {k: v["payload"] for k, v in rows_by_key(r.table).items()} == {"a": "kept", "b": "b"}
    assert (r.inserts, r.updates) == (1, 0)


def test_smaller_incoming_precombine_leaves_the_base_row_untouched():
    base = merge(None, records([("a", 5, "kept"), ("b", 5, "b")]), I1, partition_id=1).table
    before = rows_by_key(base)["a"]
    r = merge(base, records([("a", 4, "late-but-older")], first_offset=10), I2, file_name="fg_0-0-0_v2.parquet")
    after = rows_by_key(r.table)["a"]
    assert after["payload"] == "kept" and after[PRE] == 5
    assert after["_hoodie_commit_time"] == before["_hoodie_commit_time"] == I1
    assert after["_hoodie_commit_seqno"] == before["_hoodie_commit_seqno"]
    assert after["_hoodie_file_name"] == "fg_0-0-0_v2.parquet"
    assert (r.inserts, r.updates, r.rewritten, r.written) == (0, 0, 0, 0)
    assert r.table.num_rows == 2


def test_unchanged_rows_keep_commit_time_and_seqno_but_get_the_new_file_name():
    base = merge(None, records([("a", 1, "a"), ("b", 1, "b"), ("c", 1, "c")]), I1, partition_id=2).table
    old = rows_by_key(base)
    r = merge(
        base,
        records([("b", 2, "b2"), ("d", 1, "d")], first_offset=10),
        I2,
        file_name="new-file.parquet",
        partition_id=2,
    )
    new = rows_by_key(r.table)
    assert sorted(new) == ["a", "b", "c", "d"]
    for k in ("a", "c"):
        assert new[k]["_hoodie_commit_time"] == I1
        assert new[k]["_hoodie_commit_seqno"] == old[k]["_hoodie_commit_seqno"]
        assert new[k]["payload"] == old[k]["payload"]
    for k in ("b", "d"):
        assert new[k]["_hoodie_commit_time"] == I2
        assert new[k]["_hoodie_commit_seqno"].startswith(f"{I2}_2_")
    assert {x["_hoodie_file_name"] for x in new.values()} == {"new-file.parquet"}
    assert (r.inserts, r.updates, r.rewritten, r.written) == (1, 1, 0, 2)


def test_duplicate_keys_in_one_flush_count_once():
    r = merge(None, records([("a", 1, "x"), ("a", 3, "y"), ("a", 2, "z")]), I1)
    assert r.table.num_rows == 1
    assert rows_by_key(r.table)["a"]["payload"] == "y"
    assert (r.inserts, r.written) == (1, 1)


def test_reflush_within_the_same_instant_counts_rewritten_not_updates():
    # flush 1 of instant I2 over a base of I1: a is an update, c an insert
    base = merge(None, records([("a", 1, "a1"), ("b", 1, "b1")]), I1).table
    f1 = merge(base, records([("a", 2, "a2"), ("c", 1, "c1")], first_offset=10), I2)
    assert (f1.inserts, f1.updates, f1.rewritten, f1.written) == (1, 1, 0, 2)
    # flush 2 of the same instant: a and c were already written by I2 -> rewritten;
    # b came from I1 -> update; e new -> insert
    f2 = merge(f1.table, records([("a", 3, "a3"), ("c", 2, "c2"), ("b", 2, "b2"), ("e", 1, "e")], first_offset=20), I2)
    assert (f2.inserts, f2.updates, f2.rewritten) == (1, 1, 2)
    assert f2.written == 4  # a, b, c, e carry I2
    rows = rows_by_key(f2.table)
    assert {k: r["_hoodie_commit_time"] for k, r in rows.items()} == {k: I2 for k in "abce"}


def test_rows_of_this_instant_that_survive_a_reflush_still_count_as_written():
    f1 = merge(None, records([("a", 1, "a"), ("b", 1, "b")]), I2)
    f2 = merge(f1.table, records([("c", 1, "c")], first_offset=10), I2)
    assert (f2.inserts, f2.updates, f2.rewritten) == (1, 0, 0)
    assert f2.written == 3


def test_incoming_columns_missing_from_the_base_are_refused():
    base = merge(None, records([("a", 1, "x")]), I1).table
    inc = records([("a", 2, "y")]).append_column("extra", pa.array([1], pa.int64()))
    with pytest.raises(TableError, match=r"\['extra'\]"):
        merge(base, inc, I2)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(-3, 3)), min_size=1, max_size=30),
    pre_type=st.sampled_from([pa.int64(), pa.int32(), pa.float64(), pa.string()]),
    with_offset=st.booleans(),
)
def test_a_flush_keeps_each_keys_winner_in_order_of_first_arrival_whatever_the_precombine_type(
    rows, pre_type, with_offset
):
    t = records([(k, ts, f"v{i}") for i, (k, ts) in enumerate(rows)])
    if pre_type == pa.string():  # "-1" < "0" < ... as strings, still a total order
        t = t.set_column(t.schema.get_field_index(PRE), PRE, pc.cast(t.column(PRE), pa.string()))
    else:
        t = t.set_column(t.schema.get_field_index(PRE), PRE, t.column(PRE).cast(pre_type))
    if not with_offset:
        t = t.drop_columns(["_offset"])
    got = merge_module._latest_in_arrival_order(t, KEY, PRE).select(t.column_names)
    winners = {r[KEY]: r for r in dedupe_latest(t, KEY, PRE).select(t.column_names).to_pylist()}
    first_seen = list(dict.fromkeys(t.column(KEY).to_pylist()))
    assert got.to_pylist() == [winners[k] for k in first_seen]


# -- property: any split into flushes gives dedupe_latest of everything ----------------------------

_row = st.tuples(st.sampled_from("abcdef"), st.integers(0, 4))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_row, min_size=1, max_size=25), data=st.data())
def test_any_split_into_flushes_equals_dedupe_latest_of_all_records(rows, data):
    stream = records([(k, ts, f"v{i}") for i, (k, ts) in enumerate(rows)])
    n = stream.num_rows
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=4)))
    bounds = [0] + [c for c in cuts if c < n] + [n]
    same_instant = data.draw(st.booleans())
    instant_of_offset: dict[int, str] = {}
    table, total_inserts, last_instant = None, 0, None
    positions = None
    for j, (lo, hi) in enumerate(pairwise(bounds)):
        instant = I1 if same_instant else f"2024010100000{j:04d}"
        for off in range(lo, hi):
            instant_of_offset[off] = instant
        r = merge(table, stream.slice(lo, hi - lo), instant)
        # the write task's way (the previous merge's key positions) and Arrow's (large flushes)
        # give the same version
        kept = merge_file_group(
            table,
            stream.slice(lo, hi - lo),
            instant=instant,
            partition="p0",
            file_name=f"fg-0_0-0-0_{instant}.parquet",
            key=KEY,
            precombine=PRE,
            partition_id=0,
            base_positions=positions,
        )
        assert kept.table.equals(r.table)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(merge_module, "SMALL_FLUSH", 0)
            assert merge(table, stream.slice(lo, hi - lo), instant).table.equals(r.table)
        positions = kept.key_positions
        assert positions == {k: i for i, k in enumerate(keys_of(r.table))}
        before = [] if table is None else table.to_pylist()
        after = r.table.to_pylist()
        assert [x["_hoodie_record_key"] for x in after[: len(before)]] == [x["_hoodie_record_key"] for x in before]
        for pos, row in enumerate(after):
            if pos >= len(before) or row["payload"] != before[pos]["payload"]:  # written by this flush
                assert (row["_hoodie_commit_time"], row["_hoodie_commit_seqno"]) == (instant, f"{instant}_0_{pos}")
            else:  # copied: its meta columns as they were
                assert row["_hoodie_commit_seqno"] == before[pos]["_hoodie_commit_seqno"]
        if table is not None:  # what the write task passes: the instant of the version it merges onto
            hinted = merge(table, stream.slice(lo, hi - lo), instant, base_instant=last_instant)
            assert hinted.table.equals(r.table)
            assert (hinted.inserts, hinted.updates, hinted.rewritten, hinted.written) == (
                r.inserts,
                r.updates,
                r.rewritten,
                r.written,
            )
        total_inserts += r.inserts
        table, last_instant = r.table, instant
        assert r.written == sum(1 for x in table.to_pylist() if x["_hoodie_commit_time"] == instant)

    expected = {}
    for off, (k, ts) in enumerate(rows):  # per key: max precombine, ties the later offset
        if k not in expected or ts >= expected[k][0]:
            expected[k] = (ts, off)
    got = rows_by_key(table)
    assert set(got) == set(expected)
    for k, (ts, off) in expected.items():
        assert got[k][PRE] == ts
        assert got[k]["payload"] == f"v{off}"
        assert got[k]["_hoodie_record_key"] == k
        # the row carries the commit time of the flush that wrote the winning record
        assert got[k]["_hoodie_commit_time"] == instant_of_offset[off]
    assert total_inserts == len(expected)

    dd = rows_by_key(dedupe_latest(stream, KEY, PRE))
    assert {k: (r[PRE], r["payload"]) for k, r in dd.items()} == {k: (r[PRE], r["payload"]) for k, r in got.items()}
    assert not set(INTERNAL_COLUMNS) & set(table.column_names)


@pytest.mark.parametrize("n", [0, 1, 7, 256, 257])
def test_sequence_numbers_are_the_array_arrow_builds_from_the_strings(n):
    # the simulated disk reports a base file's size as its Arrow buffers' size: a flush's sequence
    # numbers, built from their buffers, must be the array Arrow's converter builds, buffer for buffer
    positions = np.arange(40, 40 + n, dtype=np.int64)
    got = merge_module._seqnos(f"{I1}_3_", positions)
    want = pa.array([f"{I1}_3_{p}" for p in positions.tolist()], pa.string())
    assert got.equals(want) and got.null_count == 0 and got.buffers()[0] is None
    assert got.get_total_buffer_size() == want.get_total_buffer_size()


@pytest.mark.parametrize(
    ("rows", "n", "in_order"),
    [([], 0, True), ([0], 1, True), ([0, 1, 2], 3, True), ([1, 0, 2], 3, False), ([0, 1], 3, False)]
    + [(list(range(300)), 300, True), ([*range(150), 151, 150, *range(152, 300)], 300, False)],
)
def test_a_flush_is_taken_from_only_when_its_rows_are_not_all_in_order(rows, n, in_order):
    assert merge_module._all_in_order(np.array(rows, dtype=np.intp), n) is in_order
