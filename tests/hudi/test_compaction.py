"""Compaction of a merge-on-read table: the plan on the timeline, one file group's compaction read
back by the official reader (``hudi`` 0.5.0), the slices writers append to while a compaction is
pending, its rollback, and whole jobs of every protocol compacting through the compaction faults."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.core.fault_spec import parse_faults
from runtime.core.messages import WriteStat
from runtime.hudi.client import compaction
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.table.base_files import avro_schema_json, file_group_id
from runtime.hudi.table.hudi_table import HudiTable
from runtime.lab.table_audit import audit_table
from runtime.lab.verify import read_snapshot
from runtime.protocols import PROTOCOLS
from runtime.sim import simulate
from tests.hudi.test_merge_on_read import _commit, _flush, _mor_table, _records

T1, T2, T3, C, T4 = (f"2026010100000000{i}" for i in range(1, 6))
FID = file_group_id("morlab", "p0", 0)


SCHEMA = avro_schema_json(_records([], []).schema, "morlab")


def _write(table: HudiTable, instant: str, records: pa.Table, *, commit: bool = True) -> WriteStat:
    """A delta commit of one flush into file group 0 of p0, the slice as a write task finds it."""
    table.start_instant(instant)
    stat = _flush(table, instant, records)
    if commit:
        _commit(table, instant, [stat], records)
    return stat


def _compact(table: HudiTable, instant: str) -> list[WriteStat]:
    """What the coordinator, the plan operator, a compaction task and the sink do, in one go."""
    ops = compaction.generate_plan(table, table.timeline())
    compaction.save_plan(table, instant, ops)
    plan = compaction.start_compaction(table, instant)
    stats = [
        compaction.compact_file_group(table, op, instant, table.timeline(), task_id=0)[0] for op in plan.operations
    ]
    compaction.commit_compaction(table, instant, stats, SCHEMA)
    return stats


def _rows(table_path: Path, as_of: str = "") -> list[tuple[str, int, str]]:
    if as_of:
        from hudi import HudiReadOptions, HudiTableBuilder

        batches = (
            HudiTableBuilder.from_base_uri(str(table_path)).build().read(HudiReadOptions().with_as_of_timestamp(as_of))
        )
        snap = pa.Table.from_batches(batches)
    else:
        snap = read_snapshot(str(table_path))
    return sorted(zip(*(snap.column(c).to_pylist() for c in ("key", "ts", "_hoodie_commit_time")), strict=True))


def test_a_plan_is_an_avro_container_file_of_hudis_compaction_plan(tmp_path):
    table = _mor_table(tmp_path / "t")
    _write(table, T1, _records(["a"], [1]))
    _write(table, T2, _records(["b"], [1]))
    ops = compaction.generate_plan(table, table.timeline())
    compaction.save_plan(table, C, ops)
    raw = (tmp_path / "t" / ".hoodie" / f"{C}.compaction.requested").read_bytes()
    reader = fastavro.reader(io.BytesIO(raw))
    assert reader.writer_schema["name"] == "org.apache.hudi.avro.model.HoodieCompactionPlan"
    (record,) = list(reader)
    assert record["version"] == 2
    (op,) = record["operations"]
    assert op["fileId"] == FID and op["partitionPath"] == "p0" and op["dataFilePath"] is None
    assert op["baseInstantTime"] == T1  # the log-only slice T1 started
    assert [LogFileName.parse(n).version for n in op["deltaFilePaths"]] == [1, 2]  # in version order
    assert op["metrics"]["TOTAL_LOG_FILES"] == 2.0
    assert compaction.read_plan(table, C).operations[0].log_files == tuple(op["deltaFilePaths"])
    with pytest.raises(Exception, match="empty compaction plan"):
        compaction.save_plan(table, T4, [])


def test_a_compaction_is_scheduled_after_enough_delta_commits_since_the_last_completed_one(tmp_path):
    table = _mor_table(tmp_path / "t")
    _write(table, T1, _records(["a"], [1]))
    _write(table, T2, _records(["a"], [2]))
    assert compaction.needs_compaction(table.timeline(), 2) and not compaction.needs_compaction(table.timeline(), 3)
    assert not compaction.needs_compaction(table.timeline(), 0)  # 0: compaction is off
    _compact(table, T3)
    assert table.timeline().delta_commits_since_compaction() == 0
    _write(table, C, _records(["a"], [3]))
    assert table.timeline().delta_commits_since_compaction() == 1  # after the completed compaction only


def test_compaction_merges_the_logs_into_a_base_file_and_the_reader_reads_the_same_rows(tmp_path):
    """Larger ordering value wins, a tie goes to the later log record, a stored row stays unless a
    log record's value is at least its own, a rolled-back write's block is skipped, and each row
    keeps the commit time of the delta commit that wrote it (time travel still sees T1's rows)."""
    path = tmp_path / "t"
    table = _mor_table(path)
    _write(table, T1, _records(["a", "b"], [1, 5]))
    _write(table, T2, _records(["a", "b", "c"], [3, 2, 1]))
    _write(table, T3, _records(["a", "c"], [9, 9]), commit=False)
    WriteClient(table).rollback(T3, [])
    before = _rows(path)
    assert before == [("a", 3, T2), ("b", 5, T1), ("c", 1, T2)]
    (stat,) = _compact(table, C)
    assert stat.path == f"p0/{FID}_0-0-0_{C}.parquet" and stat.num_writes == 3
    # three data blocks and the rollback block; the rolled-back T3 block is not counted
    assert stat.log_files_compacted == 4 and stat.log_records == 5
    assert _rows(path) == before
    assert _rows(path, as_of=T1) == [("a", 1, T1), ("b", 5, T1)]
    audit = audit_table(str(path))
    assert not audit.errors, audit.findings
    # a later round merges the compacted base file with new logs
    _write(table, T4, _records(["b", "d"], [5, 1]))
    assert _rows(path) == [("a", 3, T2), ("b", 5, T4), ("c", 1, T2), ("d", 1, T4)]


def test_writers_append_to_the_new_slice_of_a_pending_compaction(tmp_path):
    """A delta commit after the plan is named after the compaction's instant; the official reader
    shows it once the compaction completed (hudi-rs 0.5.0 reads no slice of a pending one)."""
    path = tmp_path / "t"
    table = _mor_table(path)
    _write(table, T1, _records(["a"], [1]))
    compaction.save_plan(table, T2, compaction.generate_plan(table, table.timeline()))
    stat = _write(table, T3, _records(["b"], [1]))
    name = LogFileName.parse(stat.path.split("/")[1])
    assert name.base_instant == T2 and name.version == 1 and stat.num_update_writes == 1
    plan = compaction.start_compaction(table, T2)
    stats = [compaction.compact_file_group(table, op, T2, table.timeline(), task_id=0)[0] for op in plan.operations]
    assert [s.num_writes for s in stats] == [1]  # the plan's slice only: T3 lives in the new slice
    compaction.commit_compaction(table, T2, stats, SCHEMA)
    assert _rows(path) == [("a", 1, T1), ("b", 1, T3)]


def test_rolling_back_an_inflight_compaction_deletes_its_base_files_and_keeps_its_plan(tmp_path):
    path = tmp_path / "t"
    table = _mor_table(path)
    _write(table, T1, _records(["a"], [1]))
    compaction.save_plan(table, T2, compaction.generate_plan(table, table.timeline()))
    plan = compaction.start_compaction(table, T2)
    compaction.compact_file_group(table, plan.operations[0], T2, table.timeline(), task_id=0)
    assert table.timeline().pending_compactions("inflight") == [T2]
    deleted = compaction.rollback_compaction(table, T2)
    assert [Path(p).name for p in deleted] == [f"{FID}_0-0-0_{T2}.parquet"]
    assert table.timeline().pending_compactions("requested") == [T2]
    assert not list((path / "p0").glob("*.parquet"))
    _compact_again = compaction.start_compaction(table, T2)
    stats = [
        compaction.compact_file_group(table, op, T2, table.timeline(), task_id=0)[0] for op in _compact_again.operations
    ]
    compaction.commit_compaction(table, T2, stats, SCHEMA)
    assert table.timeline().completed_compactions() == [T2] and _rows(path) == [("a", 1, T1)]
    with pytest.raises(Exception, match="it is committed"):
        compaction.rollback_compaction(table, T2)


def test_a_compaction_rollback_is_a_rollback_instant_and_the_compaction_runs_again(tmp_path):
    """``HoodieTable.rollbackInflightCompaction``: a ``.rollback`` naming the compaction (action
    ``compaction``) and its base file, the compaction back to requested; once it completes under
    its own time, verify finds nothing wrong."""
    path = tmp_path / "t"
    table = _mor_table(path)
    table = HudiTable(table.dfs, table.base_path, replace(table.props, rollback_instants=True))
    _write(table, T1, _records(["a"], [1]))
    compaction.save_plan(table, T2, compaction.generate_plan(table, table.timeline()))
    plan = compaction.start_compaction(table, T2)
    compaction.compact_file_group(table, plan.operations[0], T2, table.timeline(), task_id=0)
    (deleted,) = compaction.rollback_compaction(table, T2, now=1.9e9)
    (done,) = path.glob(".hoodie/*.rollback")
    rollback_time = done.name.split(".")[0]
    assert rollback_time > T2 and (path / ".hoodie" / f"{rollback_time}.rollback.requested").exists()
    (meta,) = fastavro.reader(io.BytesIO(done.read_bytes()))
    assert meta["commitsRollback"] == [T2]
    assert meta["instantsRollback"] == [{"commitTime": T2, "action": "compaction"}]
    assert meta["partitionMetadata"]["p0"]["successDeleteFiles"] == [deleted]
    assert table.timeline().pending_compactions("requested") == [T2]
    stats = [
        compaction.compact_file_group(table, op, T2, table.timeline(), task_id=0)[0]
        for op in compaction.start_compaction(table, T2).operations
    ]
    compaction.commit_compaction(table, T2, stats, SCHEMA)
    audit = audit_table(str(path))
    assert audit.ok and not [f for f in audit.findings if f.kind == "undone-instant-on-timeline"], audit.findings


FAULTS = [
    "",
    "compaction.crash_during@3",
    "compaction.commit_lost@3",
    "compaction.failed@3",
    "task.after_flush_before_event@3#0",  # a delta commit rolled back with log blocks written
]


@pytest.mark.parametrize("version", ["6", "8", "9"])
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f or "no-fault")
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_compacts_exactly_once_through_the_compaction_faults(tmp_path, protocol, fault, version):
    if protocol == "control-topic" and fault.startswith("compaction."):
        # the plan scheduled at checkpoint 2 runs at 3; Kafka Connect's commit, and its plan, come
        # before the checkpoint completes, so its plan runs at 2
        fault = fault.replace("@3", "@2")
    cfg = JobConfig(
        table_version=version,
        source="generator",
        protocol=protocol,
        writers=2,
        checkpoints=6,
        records=3_000,
        bucket_flush_rows=100,
        table_type="merge-on-read",
        compaction_delta_commits=2,
        control_topic_interval="checkpoint",
        faults=parse_faults(fault),
    )
    if protocol == "two-phase-commit" and version == "6":  # a what-if that needs completion times
        with pytest.raises(ConfigError, match="--table-version 6: writers name their instants before"):
            simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
        return
    result = simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    assert result.faults_not_fired == []
    done = result.compactions["completed"]
    assert done and result.compactions["pending"] == []
    table = tmp_path / "run" / "table"
    timeline = table / ".hoodie" / ("timeline" if version != "6" else "")
    for c in done:  # version 8+ names a completed instant after its completion time too
        assert len(list(timeline.glob(f"{c['instant']}.commit" if version == "6" else f"{c['instant']}_*.commit"))) == 1
    assert list(table.glob(f"p*/*_{done[-1]['instant']}.parquet"))
    if version != "6":  # each delta commit's log files carry its own instant
        logs = [LogFileName.parse(p.name) for p in table.glob("p*/.*.log.*")]
        delta_commits = {f.name.split(".")[0] for f in timeline.glob("*.deltacommit.requested")}
        orphans = {n.base_instant for n in logs if n} - delta_commits
        # two-phase-commit's writers name instants no one requests: a failed attempt's files of a
        # checkpoint that never completed stay unreferenced (no instant names them for a rollback)
        assert logs and (not orphans or (protocol == "two-phase-commit" and result.failovers))
    counters = result.figures.counters
    if fault.startswith("compaction."):
        assert counters.get("compactions_rolled_back", 0) >= 1 or result.failovers, counters
    if fault.startswith("compaction.failed@"):
        assert counters["compactions_failed"] == 1 and not result.failovers
