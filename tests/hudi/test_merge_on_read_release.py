"""Merge-on-read as the modelled Hudi release runs it: a flush keeps its duplicate keys
(``write.precombine`` is off for merge-on-read), the plan operator runs a compaction one checkpoint
after the coordinator scheduled it, the ``num_commits`` trigger counts delta commits per release,
and the lab's compaction guard against pending writer instants is an option."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.hudi.client import compaction
from runtime.hudi.formats.log_format import AVRO_DATA_BLOCK, avro_records, read_blocks
from runtime.hudi.table.log_writer import append_log_file, list_partition
from runtime.hudi.table.merge import log_records
from runtime.lab.verify import read_snapshot
from runtime.sim import simulate
from tests.hudi.test_compaction import FID, SCHEMA, T1, T2, T3, C, _write
from tests.hudi.test_merge_on_read import _commit, _mor_table, _records


def _log_keys(table: Path) -> Counter[str]:
    """How often each key was written to a log data block of the table."""
    keys: Counter[str] = Counter()
    for path in table.glob("p*/.*.log.*"):
        for block in read_blocks(path.read_bytes(), str(path)):
            if block.block_type == AVRO_DATA_BLOCK:
                keys.update(r["_hoodie_record_key"] for r in avro_records(block))
    return keys


def _mor_job(**changes: object) -> JobConfig:
    base = JobConfig(
        source="generator",
        writers=2,
        checkpoints=4,
        records=2_000,
        keys=200,
        table_type="merge-on-read",
        compaction_delta_commits=0,
    )
    return base.replace(**changes)


def test_a_merge_on_read_flush_keeps_duplicate_keys_in_arrival_order():
    flush = _records(["a", "b", "a", "a"], [1, 1, 3, 2])
    where = {"instant": "1", "partition": "p0", "file_id": "f", "key": "key", "precombine": "ts"}
    rows = log_records(flush, **where, partition_id=0, seqno=1)
    assert rows.column("key").to_pylist() == ["a", "b", "a", "a"]  # Hudi's append handle: the buffer as it came
    assert rows.column("_hoodie_commit_seqno").to_pylist() == ["1_0_1", "1_0_2", "1_0_3", "1_0_4"]
    deduped = log_records(flush, **where, partition_id=0, seqno=1, precombined=True)
    assert sorted(zip(deduped.column("key").to_pylist(), deduped.column("ts").to_pylist(), strict=True)) == [
        ("a", 3),
        ("b", 1),
    ]


@pytest.mark.parametrize("precombine", ["release", "true"])
def test_merge_on_read_logs_hold_every_update_by_default_and_the_reader_still_sees_each_key_once(tmp_path, precombine):
    result = simulate(_mor_job(write_precombine=precombine), workdir=str(tmp_path / "run"), seed=3, storage="disk")
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once  # the reader merges by the precombine field
    logged = _log_keys(tmp_path / "run" / "table")
    if precombine == "release":  # write.precombine is off for merge-on-read: duplicates reach the log
        assert sum(logged.values()) == 2_000 and max(logged.values()) > 1
    else:
        assert sum(logged.values()) < 2_000


def test_write_precombine_false_on_copy_on_write_is_refused_naming_the_flag():
    with pytest.raises(ConfigError, match="--write-precombine false.*--table-type merge-on-read"):
        JobConfig(write_precombine="false").validate()


def _compaction_checkpoints(trace: Path) -> dict[str, dict[str, int]]:
    """Per compaction instant, the checkpoint whose notification scheduled it and the one whose
    notification ran it, from the run's trace."""
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    seen: dict[str, dict[str, int]] = {}
    for e in events:
        verb, _, rest = e.get("name", "").partition(" compaction ")
        if verb in ("schedule", "execute") and rest:
            seen.setdefault(rest, {}).setdefault(verb, e["args"]["checkpoint"])
    return seen


def test_the_plan_operator_runs_a_compaction_at_the_checkpoint_after_the_one_that_scheduled_it(tmp_path):
    """Flink notifies the tasks before the coordinator: the plan operator lists the timeline before
    the coordinator's commit schedules a plan, so the plan runs one checkpoint later."""
    cfg = _mor_job(checkpoints=6, records=3_000, bucket_flush_rows=100, compaction_delta_commits=2)
    trace = tmp_path / "trace.json"
    result = simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk", chrome_trace_path=str(trace))
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    during_the_run = {c: ck for c, ck in _compaction_checkpoints(trace).items() if ck["schedule"] < cfg.checkpoints}
    assert during_the_run  # the last checkpoint's plan runs at the end of input
    assert all(ck["execute"] == ck["schedule"] + 1 for ck in during_the_run.values()), during_the_run


def test_the_num_commits_trigger_counts_delta_commits_as_the_modelled_release_does(tmp_path):
    table = _mor_table(tmp_path / "t")
    _write(table, T1, _records(["a"], [1]))
    _write(table, T2, _records(["a"], [2]))
    _write(table, T3, _records(["a"], [3]), commit=False)  # a delta commit still pending
    timeline = table.timeline()
    assert compaction.needs_compaction(timeline, 3)  # 0.14 - 0.15: in any state
    assert not compaction.needs_compaction(timeline, 3, completed_only=True)  # 1.x: completed ones
    assert compaction.needs_compaction(timeline, 2, completed_only=True)
    # the protocols modelling a 1.x release (table version 8 and up) count as 1.x does
    assert compaction.counts_completed_delta_commits(9) and not compaction.counts_completed_delta_commits(6)


def test_without_the_pending_guard_a_version_6_compaction_shadows_a_delta_commit_still_writing(tmp_path):
    """Hudi issue #7969 on table version 6: a compaction scheduled while a newer delta commit is
    pending lists the old slice's logs; the delta commit's next flush still appends to that slice
    (its write handle's view predates the plan), and the compacted base file hides it. The lab's
    guard (``--compaction-pending-guard on``) schedules no compaction at that point."""
    table = _mor_table(tmp_path / "t")
    _write(table, T1, _records(["a"], [1]))
    table.start_instant(T2)  # a newer writer instant, pending
    old_slice = list_partition(table, "p0", table.timeline(), {}).slice_for(FID, T2)  # the handle's view
    assert compaction.newer_writer_pending(table.timeline())  # guard on: no plan now
    compaction.save_plan(table, C, compaction.generate_plan(table, table.timeline()))  # guard off: Hudi's Flink writer
    late = _records(["b"], [1])
    rows = log_records(
        late, instant=T2, partition="p0", file_id=FID, key="key", precombine="ts", partition_id=0, seqno=1
    )
    stat, _ = append_log_file(table, "p0", FID, old_slice, T2, rows, "0-0-0")
    _commit(table, T2, [stat], late)
    plan = compaction.start_compaction(table, C)
    stats = [compaction.compact_file_group(table, op, C, table.timeline(), task_id=0)[0] for op in plan.operations]
    compaction.commit_compaction(table, C, stats, SCHEMA)
    keys = read_snapshot(str(tmp_path / "t")).column("key").to_pylist()
    assert keys == ["a"]  # b's delta commit completed, yet the reader no longer sees it


def test_the_pending_guard_is_an_option_on_by_default():
    assert JobConfig().compaction_pending_guard == "on"
    with pytest.raises(ConfigError, match="--compaction-pending-guard must be one of on, off"):
        JobConfig(compaction_pending_guard="maybe").validate()
