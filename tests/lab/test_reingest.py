"""A run on a table that already holds records is checked against that table merged with the
run's stream (the merge rule of runtime.hudi.table.merge_rule), not against its stream alone."""

from __future__ import annotations

import pyarrow as pa

from runtime.core.config import JobConfig
from runtime.lab.verify import compare, expected_state
from runtime.sim import simulate
from runtime.sim.memory_dfs import MemoryStore


def _cfg(**kw) -> JobConfig:
    base = dict(source="generator", writers=2, checkpoints=3, records=2_000, bucket_flush_rows=400, buckets=6)
    base.update(kw)
    return JobConfig(**base)


def _table(keys: list[str], ts: list[int], payload: list[str]) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "_hoodie_record_key": keys,
            "_hoodie_partition_path": ["p"] * n,
            "key": keys,
            "partition": ["p"] * n,
            "ts": pa.array(ts, pa.int64()),
            "payload": payload,
        }
    )


def test_a_second_ingest_keeps_the_newer_version_by_the_ordering_field_whichever_file_came_first():
    before = _table(["a", "b", "c"], [10, 10, 10], ["a1", "b1", "c1"])
    stream = _table(["b", "c", "d"], [20, 5, 1], ["b2", "c2", "d2"]).drop_columns(
        ["_hoodie_record_key", "_hoodie_partition_path"]
    )
    state = expected_state(stream, "key", "ts", "partition", before)
    rows = {r["key"]: r["payload"] for r in state.to_pylist()}
    assert rows == {"a": "a1", "b": "b2", "c": "c1", "d": "d2"}  # c: the stored record is newer
    # the other order: file B first, then file A
    b_first = _table(["b", "c", "d"], [20, 5, 1], ["b2", "c2", "d2"])
    a_after = _table(["a", "b", "c"], [10, 10, 10], ["a1", "b1", "c1"]).drop_columns(
        ["_hoodie_record_key", "_hoodie_partition_path"]
    )
    rows = {r["key"]: r["payload"] for r in expected_state(a_after, "key", "ts", "partition", b_first).to_pylist()}
    assert rows == {"a": "a1", "b": "b2", "c": "c1", "d": "d2"}  # the same table whichever file came first


def test_a_second_generator_run_with_other_writers_verifies_and_records_the_table_before():
    store = MemoryStore()
    first = simulate(_cfg(), seed=5, storage="memory", store=store)
    assert first.exactly_once.verified and first.table_before.rows == 0
    second = simulate(_cfg(seed=7, writers=3), seed=5, storage="memory", store=store)
    assert second.exactly_once.verified, second.exactly_once.to_json()
    assert second.table_before.rows == first.exactly_once.actual
    assert second.table_before.as_of == first.commits[-1]["instant"]
    assert second.to_json()["table_before"]["merge_rule"] == "EVENT_TIME_ORDERING"


def test_a_rerun_after_a_crash_verifies():
    store = MemoryStore()
    crashed = simulate(_cfg(), seed=5, storage="memory", store=store, max_virtual_s=0.35)  # after 2 of 3
    assert crashed.status != "finished" and crashed.commits
    rerun = simulate(_cfg(), seed=5, storage="memory", store=store)
    assert rerun.exactly_once.verified, rerun.exactly_once.to_json()


def test_a_run_of_another_protocol_on_the_same_table_verifies():
    store = MemoryStore()
    simulate(_cfg(protocol="operator-event"), seed=5, storage="memory", store=store)
    other = simulate(
        _cfg(protocol="coordination-rpc", seed=9, table_version="6"), seed=5, storage="memory", store=store
    )
    assert other.exactly_once.verified, other.exactly_once.to_json()


def test_a_wrong_table_after_a_second_ingest_is_still_violated():
    before = _table(["a", "b"], [10, 10], ["a1", "b1"])
    stream = _table(["b"], [20], ["b2"]).drop_columns(["_hoodie_record_key", "_hoodie_partition_path"])
    expected = expected_state(stream, "key", "ts", "partition", before)
    stale = _table(["a", "b"], [10, 10], ["a1", "b1"])  # b kept its older version
    deleted = _table(["b"], [20], ["b2"])  # a lost
    assert compare(expected, stale, "key", "partition").mismatched == 1
    assert compare(expected, deleted, "key", "partition").lost == 1


def _two_runs_on_disk(tmp_path, second: JobConfig):
    """A first run, then ``second`` on the same table, on disk (the official reader reads it);
    each run's result.json under its own directory."""
    from runtime.lab.run_output import write_result

    first = simulate(_cfg(), seed=5, workdir=str(tmp_path), storage="disk")
    write_result(str(tmp_path / "out1"), first)
    again = simulate(second, seed=5, workdir=str(tmp_path), storage="disk", existing_table=True)
    write_result(str(tmp_path / "out2"), again)
    return first, again


def test_verify_result_of_a_second_ingest_reads_the_table_before_by_time_travel(tmp_path):
    from runtime.cli import main

    first, again = _two_runs_on_disk(tmp_path, _cfg(seed=7, writers=3))
    assert again.exactly_once.verified, again.exactly_once.to_json()
    assert again.table_before.as_of == first.commits[-1]["instant"]
    assert main(["verify", "--result", str(tmp_path / "out2")]) == 0
    assert main(["verify", "--result", str(tmp_path / "out1")]) == 1  # the table moved on since run 1


def test_verify_result_of_a_spark_run_recomputes_its_stream_instead_of_refusing(tmp_path, monkeypatch):
    import json

    from runtime.cli import jobs, main
    from runtime.lab.verify import generator_state

    _, again = _two_runs_on_disk(tmp_path, _cfg(seed=7))
    doc = json.loads((tmp_path / "out2" / "result.json").read_text())
    doc["source"] = doc["config"]["source"] = "spark"  # as the README's main job records it
    (tmp_path / "out2" / "result.json").write_text(json.dumps(doc))
    seen = []
    monkeypatch.setattr(jobs, "_spark_state", lambda cfg, table: seen.append(cfg.source) or generator_state(cfg))
    assert main(["verify", "--result", str(tmp_path / "out2")]) == 0
    assert seen == ["spark"]


def test_a_run_on_a_table_the_reader_cannot_read_is_refused_before_it_writes(tmp_path):
    import glob
    import os
    import shutil

    import pytest

    from runtime.hudi.table.table_config import TableError

    simulate(_cfg(), seed=5, workdir=str(tmp_path), storage="disk")
    part = next(p for p in glob.glob(f"{tmp_path}/table/*") if os.path.isdir(p) and not p.endswith(".hoodie"))
    shutil.copy(glob.glob(f"{part}/*.parquet")[0], f"{part}/stray-file.parquet")
    commits = sorted(os.listdir(f"{tmp_path}/table/.hoodie"))
    with pytest.raises(TableError, match="stray-file.parquet.*write to a new --table"):
        simulate(_cfg(seed=7), seed=5, workdir=str(tmp_path), storage="disk", existing_table=True)
    assert sorted(os.listdir(f"{tmp_path}/table/.hoodie")) == commits  # nothing written
