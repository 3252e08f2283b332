"""The verifier must reject tables that are not exactly-once: it is the proof every run relies on."""

from __future__ import annotations

import os
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.core.dfs import open_dfs
from runtime.core.messages import WriteStat
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table.base_files import avro_schema_json, base_file_name, file_group_id
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.merge import merge_file_group
from runtime.hudi.table.table_config import TableProps
from runtime.lab.verify import compare, expected_state, verify_commits, verify_run

KEY, PART, TS = "key", "partition", "ts"


def _write_commit(table: HudiTable, records: pa.Table, prev: dict) -> str:
    instant = table.new_instant_time(time.time(), table.timeline())
    table.start_instant(instant)
    stats = []
    for part in sorted(set(records.column(PART).to_pylist())):
        rows = records.filter(pa.compute.equal(records.column(PART), part))
        fid = file_group_id("t", part, 0)
        name = base_file_name(fid, "0-0-0", instant)
        rel = f"{part}/{name}"
        old = prev.get(fid)
        base = table.read_base_file(old[1]) if old else None
        table.ensure_partition(part, instant)
        m = merge_file_group(
            base, rows, instant=instant, partition=part, file_name=name, key=KEY, precombine=TS, partition_id=0
        )
        size = table.write_base_file(rel, m.table)
        stats.append(
            WriteStat(
                fid, rel, part, old[0] if old else "null", m.table.num_rows, m.inserts, m.updates, size, size, m.written
            )
        )
        prev[fid] = (instant, rel)
    WriteClient(table).commit(instant, stats, {"schema": avro_schema_json(records.schema, "t")})
    return instant


@pytest.fixture()
def good_table(tmp_path):
    path = str(tmp_path / "t")
    dfs, base = open_dfs(path)
    table = HudiTable.create_or_open(dfs, base, TableProps("t", KEY, PART, TS))
    r1 = pa.table(
        {
            KEY: [f"k{i}" for i in range(20)],
            PART: ["a", "b"] * 10,
            TS: list(range(20)),
            "v": [f"x{i}" for i in range(20)],
            "_offset": list(range(20)),
        }
    )
    r2 = pa.table(
        {
            KEY: [f"k{i}" for i in range(10, 30)],
            PART: ["a", "b"] * 10,
            TS: list(range(100, 120)),
            "v": [f"y{i}" for i in range(20)],
            "_offset": list(range(20, 40)),
        }
    )
    prev: dict = {}
    _write_commit(table, r1, prev)
    _write_commit(table, r2, prev)
    expected = expected_state(pa.concat_tables([r1, r2]), KEY, TS).select([KEY, PART, TS, "v"])
    return path, expected, prev


def test_a_good_table_verifies(good_table):
    path, expected, _ = good_table
    verdict = verify_run(path, expected, KEY)
    assert verdict.verified, verdict
    assert verdict.expected == verdict.actual == 30
    assert verdict.commits_checked == 2


def _latest_file(path: str, prev: dict, part: str) -> str:
    return os.path.join(path, next(rel for _, rel in prev.values() if rel.startswith(part + "/")))


def _rewrite(file: str, fn) -> None:
    t = pq.read_table(file)
    pq.write_table(fn(t), file)


def test_a_changed_value_is_mismatched(good_table):
    path, expected, prev = good_table
    f = _latest_file(path, prev, "a")
    _rewrite(
        f,
        lambda t: t.set_column(t.column_names.index("v"), "v", pa.array(["tampered"] + t.column("v").to_pylist()[1:])),
    )
    verdict = verify_run(path, expected, KEY)
    assert not verdict.verified
    assert verdict.mismatched == 1 and verdict.lost == 0
    assert len(verdict.samples["mismatched"]) == 1


def test_a_removed_row_is_lost(good_table):
    path, expected, prev = good_table
    f = _latest_file(path, prev, "b")
    _rewrite(f, lambda t: t.slice(1))
    verdict = verify_run(path, expected, KEY)
    assert not verdict.verified
    assert verdict.lost == 1
    assert verdict.samples["lost"]


def test_a_duplicated_row_is_reported_by_snapshot_and_commit_checks(good_table):
    path, expected, prev = good_table
    f = _latest_file(path, prev, "a")
    last = prev[next(iter(prev))][0]

    def duplicate_a_row_of_the_last_commit(t: pa.Table) -> pa.Table:
        i = t.column("_hoodie_commit_time").to_pylist().index(last)
        return pa.concat_tables([t, t.slice(i, 1)])

    _rewrite(f, duplicate_a_row_of_the_last_commit)
    verdict = verify_run(path, expected, KEY)
    assert not verdict.verified
    assert verdict.duplicated == 1
    assert verdict.commit_problems, "the last commit's incremental read has a row its metadata does not"


def test_an_unexpected_row_is_reported(good_table):
    path, expected, _ = good_table
    verdict = verify_run(path, expected.slice(1), KEY)
    assert not verdict.verified
    assert verdict.unexpected == 1


def test_a_second_base_file_for_a_committed_instant_fails_with_the_reader_error(good_table):
    path, expected, prev = good_table
    f = _latest_file(path, prev, "a")
    d, name = os.path.split(f)
    fid, token, rest = name.split("_")
    shutil.copy(f, os.path.join(d, f"{fid}_9-9-9_{rest}"))
    verdict = verify_run(path, expected, KEY)
    assert not verdict.verified
    assert verdict.error or verdict.duplicated or verdict.commit_problems


def test_commit_metadata_that_overstates_rows_is_caught(good_table):
    path, _, _ = good_table
    dfs, base = open_dfs(path)
    table = HudiTable.open(dfs, base)
    last = table.timeline().last_completed()
    meta_path = os.path.join(path, ".hoodie", f"{last}.commit")
    import json

    meta = json.load(open(meta_path))
    first = next(iter(meta["partitionToWriteStats"].values()))[0]
    first["numInserts"] += 3
    json.dump(meta, open(meta_path, "w"))
    checked = verify_commits(path)
    assert not checked["verified"]
    assert checked["problems"][0]["instant"] == last
    assert checked["problems"][0]["rows_by_metadata"] == checked["problems"][0]["rows_read"] + 3


def _multi_partition_records() -> pa.Table:
    """Every key under two partitions (a non-global index keeps both), with other values, and
    an update of each (partition, key) with an equal ts (the later offset wins the tie)."""
    keys = [f"k{i}" for i in range(10)]
    return pa.table(
        {
            KEY: keys * 4,
            PART: ["a"] * 10 + ["b"] * 10 + ["a"] * 10 + ["b"] * 10,
            TS: [1] * 10 + [2] * 10 + [1] * 10 + [0] * 10,
            "v": [f"a{i}" for i in range(10)]
            + [f"b{i}" for i in range(10)]
            + [f"a2-{i}" for i in range(10)]
            + [f"b-old{i}" for i in range(10)],
            "_offset": list(range(40)),
        }
    )


def test_keys_under_several_partitions_are_distinct_records(tmp_path):
    """A record is (partition path, record key) for the bucket index (Hudi's HoodieKey, non-global
    index): the same key under two partitions is neither duplicated nor mismatched."""
    path = str(tmp_path / "t")
    dfs, base = open_dfs(path)
    table = HudiTable.create_or_open(dfs, base, TableProps("t", KEY, PART, TS))
    records = _multi_partition_records()
    prev: dict = {}
    _write_commit(table, records.slice(0, 20), prev)
    _write_commit(table, records.slice(20), prev)
    expected = expected_state(records, KEY, TS, PART).select([KEY, PART, TS, "v"])
    assert expected.num_rows == 20
    assert sorted(expected.column("v").to_pylist()) == sorted(
        [f"a2-{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
    )
    verdict = verify_run(path, expected, KEY)
    assert verdict.verified, str(verdict)
    assert (verdict.actual, verdict.duplicated, verdict.mismatched) == (20, 0, 0)


def test_the_comparison_does_not_depend_on_the_readers_row_order():
    """A damaged snapshot holding one (partition, key) twice with different values: the counts
    and samples are the same whichever order the rows come in (run and verify read the same table
    in different orders)."""
    expected = pa.table({KEY: ["k1", "k2"], PART: ["a", "a"], TS: [1, 1], "v": ["x", "y"]})
    rows = {
        "_hoodie_commit_time": ["002", "001", "001"],
        "_hoodie_record_key": ["k1", "k1", "k2"],
        "_hoodie_partition_path": ["a", "a", "a"],
        "_hoodie_file_name": ["f2", "f1", "f1"],
        KEY: ["k1", "k1", "k2"],
        PART: ["a", "a", "a"],
        TS: [1, 1, 1],
        "v": ["x", "stale", "y"],
    }
    actual = pa.table(rows)
    verdicts = [compare(expected, actual.take(order), KEY, PART) for order in ([0, 1, 2], [1, 0, 2], [2, 1, 0])]
    assert verdicts[0] == verdicts[1] == verdicts[2]
    assert verdicts[0].duplicated == 1 and verdicts[0].mismatched == 0


def test_a_table_equal_to_one_compared_before_gets_the_same_verdict_as_its_own_copy():
    """A search verifies hundreds of runs ending in a few tables: an equal table gets the verdict
    of the comparison before, as a copy (a caller sets its reader), and a table differing in one
    value, or one whose floats Arrow's equality cannot tell apart (-0.0 and 0.0), is compared anew."""
    expected = pa.table({KEY: ["k1", "k2"], PART: ["a", "a"], TS: [1, 1], "v": ["x", "y"]})
    rows = {"_hoodie_record_key": ["k1", "k2"], "_hoodie_partition_path": ["a", "a"], **expected.to_pydict()}
    first = compare(expected, pa.table(rows), KEY, PART)
    first.reader = "someone's"
    first.samples["lost"].append("k0")
    again = compare(expected, pa.table(rows), KEY, PART)
    assert again.verified and again.reader is None and again.samples["lost"] == []
    again.reader = "someone else's"
    assert compare(expected, pa.table(rows), KEY, PART).reader is None
    changed = compare(expected, pa.table({**rows, "v": ["x", "z"]}), KEY, PART)
    assert not changed.verified and changed.samples["mismatched"] == ["a/k2"]
    floats = expected.append_column("f", pa.array([0.0, 1.0]))
    assert compare(floats, floats, KEY, PART).verified
    signed = floats.set_column(4, "f", pa.array([-0.0, 1.0]))
    assert signed.equals(floats)  # Arrow's equality: hence not taken from the comparison before
    assert compare(floats, signed, KEY, PART).mismatched == 1


def _typed_tables() -> tuple[pa.Table, pa.Table]:
    """Expected and actual rows of many column types, each row differing (or not) in one way a
    user's table can: a changed value, a null for a value, NaN for null, -0.0 for 0.0."""
    import datetime
    import decimal

    n = 9
    keys = [f"k{i}" for i in range(n)]
    d = decimal.Decimal
    expected = pa.table(
        {
            KEY: keys,
            PART: ["a"] * n,
            "i": pa.array([1, 2, None, 4, 5, 6, 7, 8, 9], pa.int32()),
            "f": pa.array([0.0, 1.5, None, float("nan"), 2.0, 3.0, 4.0, 5.0, 6.0], pa.float64()),
            "s": pa.array(["x", None, "z", "w", "v", "u", "t", "r", "q"]),
            "dec": pa.array(
                [d("1.10"), d("2.00"), None, d("4.25"), d("5"), d("6"), d("7"), d("8"), d("9")], pa.decimal128(10, 2)
            ),
            "ts": pa.array([datetime.datetime(2026, 1, 1, i) for i in range(n)], pa.timestamp("us")),
            "b": pa.array([True, False, None, True, True, True, True, True, True]),
        }
    )
    changed = {
        "i": pa.array([1, 2, None, 4, 50, 6, 7, 8, None], pa.int32()),  # k4 changed, k8 null
        "f": pa.array([-0.0, 1.5, float("nan"), None, 2.0, 3.0, 4.0, 5.0, 6.0], pa.float64()),  # k0 -0.0
        "s": pa.array(["x", None, "z", "w", "v", "U", "t", "r", "q"]),  # k5 changed
        "dec": pa.array(
            [d("1.10"), d("2.00"), None, d("4.25"), d("5"), d("6"), d("7.01"), d("8"), d("9")], pa.decimal128(10, 2)
        ),  # k6 changed
    }
    actual = expected
    for name, values in changed.items():
        actual = actual.set_column(actual.schema.get_field_index(name), name, values)
    return expected, actual


def test_the_value_comparison_agrees_with_the_text_comparison_on_flat_columns():
    """The comparison of flat columns gives the identities the text comparison (pandas'
    astype(str)) gives: nulls equal, NaN and null equal, -0.0 not 0.0, a changed value or a
    value turned null found, in identity order."""
    from runtime.lab.value_compare import _differing_as_text, differing
    from runtime.lab.verify import _expected_identity

    expected, actual = _typed_tables()
    others = [c for c in expected.column_names if c not in (KEY, PART)]
    ids = _expected_identity(expected, KEY, PART)
    e, a = expected.append_column("_id", ids), actual.append_column("_id", ids).take([8, 3, 0, 5, 1, 7, 2, 6, 4])
    found = differing(a, e, others)
    assert found == _differing_as_text(a, e, others)
    assert [k.split("\x1f")[1] for k in found] == ["k0", "k4", "k5", "k6", "k8"]
    verdict = compare(expected, actual, KEY, PART)
    assert verdict.mismatched == 5 and not verdict.verified
    assert verdict.samples["mismatched"] == ["a/k0", "a/k4", "a/k5", "a/k6", "a/k8"]


def test_a_changed_value_in_a_nested_interval_or_retyped_column_is_found():
    """A nested or interval column (Arrow compares neither), or one whose type the table changed,
    is compared by value, so a changed value there is found and an unchanged one is not."""
    span = pa.month_day_nano_interval()
    expected = pa.table(
        {
            KEY: ["k1", "k2"],
            "n": [{"x": 1}, {"x": 2}],
            "i": pa.array([1, 2], pa.int64()),
            "d": pa.array([pa.MonthDayNano([1, 0, 0]), pa.MonthDayNano([2, 0, 0])], span),
        }
    )
    nested = expected.set_column(1, "n", pa.array([{"x": 1}, {"x": 3}]))
    retyped = expected.set_column(2, "i", pa.array(["1", "3"]))  # stored as text: "1" is 1
    interval = expected.set_column(3, "d", pa.array([pa.MonthDayNano([1, 0, 0]), pa.MonthDayNano([2, 1, 0])], span))
    for actual in (nested, retyped, interval):
        verdict = compare(expected, actual, KEY)
        assert verdict.mismatched == 1 and verdict.samples["mismatched"] == ["k2"], verdict


def _one_column(values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return pa.table({KEY: [f"k{i}" for i in range(len(values))], "c": values})


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        (pa.array([1, 200, None], pa.uint8()), pa.array([1, 200, None], pa.int32())),
        (pa.array([1.5, float("nan"), -2.0], pa.float32()), pa.array([1.5, None, -2.0], pa.float64())),
        (pa.array(["a", "b", "a"]).dictionary_encode(), pa.array(["a", "b", "a"])),
        (pa.array(["a", None, "c"], pa.large_string()), pa.array(["a", None, "c"])),
        (
            pa.array([1, 2, 3], pa.decimal128(10, 2)),
            pa.array([1, 2, 3], pa.decimal128(12, 3)),
        ),
        (  # a struct whose int child the table widened, chunked per file
            pa.array(
                [{"x": 1, "y": "a"}, None, {"x": 0, "y": None}], pa.struct([("x", pa.int16()), ("y", pa.string())])
            ),
            pa.chunked_array(
                [
                    pa.array([{"x": 1, "y": "a"}], pa.struct([("x", pa.int32()), ("y", pa.string())])),
                    pa.array([None, {"x": 0, "y": None}], pa.struct([("x", pa.int32()), ("y", pa.string())])),
                ]
            ),
        ),
        (  # a struct field the table added (schema evolution): null in the table's rows
            pa.array([{"x": 1.0}, {"x": float("nan")}]),
            pa.array(
                [{"x": 1.0, "z": None}, {"x": None, "z": None}], pa.struct([("x", pa.float64()), ("z", pa.int64())])
            ),
        ),
        (  # a map's entries in another order (Avro's maps are unordered)
            pa.array([[("a", 1), ("b", 2)], []], pa.map_(pa.string(), pa.int64())),
            pa.array([[("b", 2), ("a", 1)], []], pa.map_(pa.string(), pa.int64())),
        ),
        (pa.array([[1, 2], None, []], pa.list_(pa.int8())), pa.array([[1, 2], None, []], pa.large_list(pa.int64()))),
    ],
    ids=[
        "uint8-int32",
        "float32-double",
        "dictionary",
        "large-string",
        "decimal-scale",
        "struct",
        "added-field",
        "map",
        "list",
    ],
)
def test_values_the_table_stores_as_another_type_verify(written, stored):
    """The input's values stored in the table's types (as Hudi's writer converts them into the
    table's schema) are the same records: verified."""
    verdict = compare(_one_column(written), _one_column(stored), KEY)
    assert verdict.verified, verdict


@pytest.mark.parametrize(
    ("written", "stored", "wrong"),
    [
        (pa.array([1, 200, 7], pa.uint8()), pa.array([1, 200, 8], pa.int32()), ["k2"]),
        (pa.array([{"x": 0.0}, {"x": 1.0}]), pa.array([{"x": -0.0}, {"x": 1.0}]), ["k0"]),
        (pa.array([{"x": 1}, {"x": 2}]), pa.array([{"x": 1, "z": 5}, {"x": 2, "z": None}]), ["k0"]),
        (pa.array([[1, 2], [3]]), pa.array([[2, 1], [3]]), ["k0"]),
        (
            pa.array([[("a", 1)], [("a", 1)]], pa.map_(pa.string(), pa.int64())),
            pa.array([[("a", 1)], [("a", 2)]], pa.map_(pa.string(), pa.int64())),
            ["k1"],
        ),
        (pa.array([{"x": 1}, None]), pa.array([{"x": 1}, {"x": None}]), ["k1"]),
        (pa.array([1.5, 2.0], pa.float32()), pa.array([1.5, 2.000001], pa.float64()), ["k1"]),
    ],
    ids=["int", "struct-negative-zero", "added-field-with-a-value", "list-order", "map-value", "null-struct", "float"],
)
def test_a_value_the_table_changed_is_mismatched_whatever_its_type(written, stored, wrong):
    verdict = compare(_one_column(written), _one_column(stored), KEY)
    assert not verdict.verified and verdict.samples["mismatched"] == wrong, verdict


def test_a_null_struct_is_null_whatever_its_children_hold():
    """Arrow lets a null struct row keep values in its children (Spark and pyarrow write either);
    the row is null on both sides, so the record verifies, in one chunk or a chunk per file."""
    kids = [pa.array([1, 2, 3], pa.int64()), pa.array(["a", "b", "c"])]
    masked = pa.StructArray.from_arrays(kids, ["x", "y"], mask=pa.array([False, True, False]))
    cleared = pa.array([{"x": 1, "y": "a"}, None, {"x": 3, "y": "c"}], masked.type)
    assert masked.field(0).to_pylist()[1] == 2  # the null row's child still holds a value
    per_file = pa.chunked_array([cleared.slice(0, 1), cleared.slice(1, 1), cleared.slice(2, 1)])
    for stored in (cleared, per_file):
        verdict = compare(_one_column(masked), _one_column(stored), KEY)
        assert verdict.verified, verdict


def test_nested_values_verify_whatever_the_readers_chunks():
    """The official reader returns a table a chunk per file; a struct's child converts to pandas
    as ints in a chunk without a null row and as floats in one with (and in the expected table,
    one chunk). The same values are the same rows however the reader chunked them. A column of
    another width (int16 read back as int32) sends the comparison down its text path."""

    def addr(cities: list[str | None], zips: list[int | None]) -> pa.StructArray:
        mask = pa.array([c is None for c in cities])  # a null row's children are null too, as Spark writes them
        return pa.StructArray.from_arrays(
            [pa.array(cities, pa.string()), pa.array(zips, pa.int64())], ["city", "zip"], mask=mask
        )

    one_chunk = pa.chunked_array([addr(["Oslo", None, "Lyon"], [1, None, 2])])
    per_file = pa.chunked_array([addr(["Oslo"], [1]), addr([None], [None]), addr(["Lyon"], [2])])
    base = {"id": ["k0", "k1", "k2"], "region": ["eu", "eu", "us"], "ts": [1, 2, 3]}
    expected = pa.table({**base, "u8": pa.array([1, 2, 3], pa.int16()), "addr": one_chunk})
    actual = pa.table({**base, "u8": pa.array([1, 2, 3], pa.int32()), "addr": per_file})
    v = compare(expected, actual, "id", "region")
    assert v.verified, v
