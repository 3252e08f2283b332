"""Merge-on-read tables (``--table-type merge-on-read``): log files and delta commits that the
official reader (``hudi`` 0.5.0) merges, for every protocol, rolled back as Hudi 0.14/0.15 rolls
back a delta commit, and never taking a compaction instant for a writer's."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.fault_spec import parse_faults
from runtime.core.messages import WriteStat
from runtime.hudi.client.compaction import compacting_file_groups
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.log_format import (
    AVRO_DATA_BLOCK,
    COMMAND_BLOCK,
    INSTANT_TIME,
    TARGET_INSTANT_TIME,
    LogFileName,
    LogFormatError,
    avro_data_block,
    avro_records,
    read_blocks,
    record_schema,
    rollback_block,
)
from runtime.hudi.table.base_files import avro_schema_json, file_group_id
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_writer import append_log_file, list_partition
from runtime.hudi.table.merge import log_records
from runtime.hudi.table.table_config import TableProps
from runtime.lab.table_audit import audit_table
from runtime.lab.verify import read_snapshot
from runtime.protocols import PROTOCOLS
from runtime.sim import simulate

T1, T2, T3 = "20260101000000001", "20260101000000002", "20260101000000003"


def _records(keys: list[str], ts: list[int], partition: str = "p0") -> pa.Table:
    return pa.table(
        {
            "key": keys,
            "partition": [partition] * len(keys),
            "ts": pa.array(ts, pa.int64()),
            "value": [f"v-{k}-{t}" for k, t in zip(keys, ts, strict=True)],
        }
    )


def _mor_table(path: Path) -> HudiTable:
    dfs, base = open_dfs(str(path))
    props = TableProps("morlab", "key", "partition", "ts", num_buckets=1, table_type="MERGE_ON_READ")
    return HudiTable.create_or_open(dfs, base, props)


def _flush(table: HudiTable, instant: str, records: pa.Table, task: int = 0) -> WriteStat:
    """One write task's flush of file group 0 of p0, as the write task makes it (into the new
    slice of a pending compaction that holds the file group)."""
    fid = file_group_id(table.props.table_name, "p0", 0)
    table.ensure_partition("p0", instant)
    timeline = table.timeline()
    held = compacting_file_groups(table, timeline).get("p0", {})
    slice_ = list_partition(table, "p0", timeline, held).slice_for(fid, instant)
    rows = log_records(
        records, instant=instant, partition="p0", file_id=fid, key="key", precombine="ts", partition_id=task, seqno=1
    )
    stat, _ = append_log_file(table, "p0", fid, slice_, instant, rows, f"{task}-0-0")
    return stat


def _commit(table: HudiTable, instant: str, stats: list[WriteStat], schema_of: pa.Table) -> None:
    WriteClient(table).commit(instant, stats, {"schema": avro_schema_json(schema_of.schema, table.props.table_name)})


# -- the log format --------------------------------------------------------------------------


def test_a_rollback_block_is_framed_as_hudi_frames_it():
    """105 bytes: the size of the one-rollback-block log file Hudi wrote in hudi-rs's test data
    (``valid_log_rollback/...log.2_1-0-1``): magic, lengths, header of three entries, no content,
    an empty footer, the reverse pointer."""
    block = rollback_block(T2, T1)
    assert len(block) == 105
    assert block[:6] == b"#HUDI#"
    assert int.from_bytes(block[6:14], "big") == 105 - 14  # what follows the length field
    assert int.from_bytes(block[-8:], "big") == 105 - 8  # the block without its reverse pointer
    (parsed,) = read_blocks(block)
    assert parsed.block_type == COMMAND_BLOCK and parsed.content == b""
    assert parsed.header[INSTANT_TIME] == T2 and parsed.header[TARGET_INSTANT_TIME] == T1


def test_an_avro_data_block_round_trips_with_its_meta_fields_first():
    records = _records(["a", "b"], [1, 2])
    schema = record_schema(avro_schema_json(records.schema, "morlab"))
    assert [f["name"] for f in schema["fields"][:5]] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    ]
    rows = log_records(
        records, instant=T1, partition="p0", file_id="fid-0", key="key", precombine="ts", partition_id=3, seqno=7
    )
    (block,) = read_blocks(avro_data_block(T1, schema, rows))
    assert block.block_type == AVRO_DATA_BLOCK and block.instant == T1
    got = sorted(avro_records(block), key=lambda r: r["key"])
    assert [(r["key"], r["ts"], r["_hoodie_file_name"]) for r in got] == [("a", 1, "fid-0"), ("b", 2, "fid-0")]
    assert sorted(r["_hoodie_commit_seqno"] for r in got) == [f"{T1}_3_7", f"{T1}_3_8"]


def test_a_block_whose_lengths_do_not_add_up_is_refused_naming_where():
    block = rollback_block(T2, T1)
    with pytest.raises(LogFormatError, match="corrupt"):
        list(read_blocks(block[:-8] + (1).to_bytes(8, "big"), "x.log"))
    with pytest.raises(LogFormatError, match="no log block magic at byte 105"):
        list(read_blocks(block + b"junk", "x.log"))


def test_log_file_names_are_hudis():
    name = LogFileName("00000000-aaaa-0", T1, 3, "1-0-0")
    assert str(name) == f".00000000-aaaa-0_{T1}.log.3_1-0-0"
    assert LogFileName.parse(str(name)) == name
    assert LogFileName.parse(f"00000000-aaaa-0_1-0-0_{T1}.parquet") is None


# -- the table: slices, delta commits, the official reader ----------------------------------------


def test_flushes_append_log_files_to_the_slice_and_the_reader_merges_them(tmp_path):
    table = _mor_table(tmp_path / "t")
    table.start_instant(T1)
    first = _flush(table, T1, _records(["a", "b"], [1, 1]))
    _commit(table, T1, [first], _records(["a"], [1]))
    assert first.prev_commit == T1 and first.num_inserts == 2 and first.base_file == ""
    table.start_instant(T2)
    # a is updated (a larger ordering value wins), b's update is older and loses, c is new
    second = _flush(table, T2, _records(["a", "b", "c"], [5, 0, 1]))
    _commit(table, T2, [second], _records(["a"], [1]))
    assert second.prev_commit == T1  # the slice's base instant: the delta commit that started it
    assert second.num_update_writes == 3 and second.log_version == 2
    assert second.log_files == [first.path.split("/")[1], second.path.split("/")[1]]
    assert sorted(p.name for p in (tmp_path / "t" / "p0").glob(".*.log.*")) == sorted(second.log_files)
    meta = json.loads((tmp_path / "t" / ".hoodie" / f"{T2}.deltacommit").read_text())
    (stat,) = meta["partitionToWriteStats"]["p0"]
    assert stat["logVersion"] == 2 and stat["baseFile"] == "" and stat["prevCommit"] == T1
    snap = read_snapshot(str(tmp_path / "t")).sort_by("key")
    assert snap.column("key").to_pylist() == ["a", "b", "c"]
    assert snap.column("ts").to_pylist() == [5, 1, 1]
    assert audit_table(str(tmp_path / "t")).ok, audit_table(str(tmp_path / "t")).errors


def test_rolling_back_a_delta_commit_deletes_the_file_groups_it_started_and_marks_the_others(tmp_path):
    table = _mor_table(tmp_path / "t")
    table.start_instant(T1)
    _commit(table, T1, [_flush(table, T1, _records(["a"], [1]))], _records(["a"], [1]))
    table.start_instant(T2)
    appended = _flush(table, T2, _records(["a", "z"], [9, 9]))
    started = table.timeline().last_pending()
    assert started == T2
    WriteClient(table).rollback(T2, [appended.path])
    p0 = tmp_path / "t" / "p0"
    # the file group existed: its log file stays, and a new log version holds a ROLLBACK block
    assert (p0 / appended.path.split("/")[1]).exists()
    blocks = [b for f in sorted(p0.glob(".*.log.*")) for b in read_blocks(f.read_bytes())]
    marks = [b for b in blocks if b.block_type == COMMAND_BLOCK]
    assert [m.header[TARGET_INSTANT_TIME] for m in marks] == [T2]
    assert not (tmp_path / "t" / ".hoodie" / f"{T2}.deltacommit.inflight").exists()
    snap = read_snapshot(str(tmp_path / "t"))
    assert snap.column("ts").to_pylist() == [1]  # the rolled-back update is not read
    # a delta commit that started a file group: its log file goes
    other = _mor_table(tmp_path / "u")
    other.start_instant(T1)
    fresh = _flush(other, T1, _records(["a"], [1]))
    assert WriteClient(other).rollback(T1, [fresh.path]) == [str(tmp_path / "u" / fresh.path)]


def _refused_on_version_6(protocol: str, version: str, cfg: JobConfig, tmp_path) -> bool:
    """two-phase-commit (a what-if) names its instants before a compaction is scheduled, which
    version 6's instant-time file slices cannot order (it lost rows here): the run is refused."""
    if protocol != "two-phase-commit" or version != "6":
        return False
    with pytest.raises(ConfigError, match="--table-version 6: writers name their instants before"):
        simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
    return True


def _cfg(**kw) -> JobConfig:
    base = dict(
        source="generator",
        writers=2,
        checkpoints=3,
        records=2_000,
        bucket_flush_rows=400,
        table_type="merge-on-read",
        control_topic_interval="checkpoint",
    )
    base.update(kw)
    return JobConfig(**base)


def test_the_simulated_disk_refuses_a_merge_on_read_table_before_it_starts():
    with pytest.raises(ConfigError, match="--table-type merge-on-read runs on the real disk only"):
        simulate(_cfg(), seed=5, storage="memory")


def _timeline_dir(table: Path, version: str) -> Path:
    """The active timeline: ``.hoodie``, or ``.hoodie/timeline`` from table version 8."""
    return table / ".hoodie" / ("" if version == "6" else "timeline")


def _completed(timeline: Path, instant: str, action: str) -> list[Path]:
    """A completed instant's file: ``<instant>.<action>``, from version 8 ``<instant>_<completion>.<action>``."""
    return [*timeline.glob(f"{instant}.{action}"), *timeline.glob(f"{instant}_*.{action}")]


@pytest.mark.parametrize("version", ["6", "8", "9"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_commits_delta_commits_exactly_once(tmp_path, protocol, version):
    cfg = _cfg(protocol=protocol, table_version=version)
    if _refused_on_version_6(protocol, version, cfg, tmp_path):
        return
    result = simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
    assert result.status == "finished", result.error
    eo = result.exactly_once
    assert eo.verified and eo.expected == eo.actual == 1_000, eo
    timeline = _timeline_dir(tmp_path / "run" / "table", version)
    instants = [c["instant"] for c in result.commits]
    assert all(len(_completed(timeline, i, "deltacommit")) == 1 for i in instants)
    assert not list(timeline.glob("*.commit"))  # no compaction yet: no commit action at all
    assert list((tmp_path / "run" / "table").glob("p*/.*.log.*")) and not list(
        (tmp_path / "run" / "table").glob("p*/*.parquet")
    )


@pytest.mark.parametrize("version", ["6", "9"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_a_compaction_instant_is_never_taken_for_a_writers_instant(tmp_path, protocol, version):
    """Compaction writes the timeline too: with a compaction scheduled after every delta commit
    (``compaction.delta_commits`` 1), each one is the newest pending instant between its
    scheduling and the next instant's start, a window the coordinator's slowed DFS (the
    ``dfs.latency`` fault) widens and the writers' eager flushes (20-row buckets) look into.
    Every protocol's writes still go into its own delta commits: no commit and no log block
    carries a compaction's instant, every log block's instant is a completed delta commit or was
    rolled back, the compactions complete as commits, and the table verifies exactly-once through
    the official reader. (With the compaction let into the pending commits, operator-event's
    writers take it for their instant here.)"""
    table = tmp_path / "run" / "table"
    cfg = _cfg(
        protocol=protocol,
        checkpoints=4,
        compaction_delta_commits=1,
        bucket_flush_rows=20,
        faults=parse_faults("dfs.latency@2=0.5"),
        table_version=version,
    )
    if _refused_on_version_6(protocol, version, cfg, tmp_path):
        return
    result = simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    timeline = _timeline_dir(table, version)
    compactions = {p.name.split(".")[0] for p in timeline.glob("*.compaction.requested")}
    assert compactions and all(len(_completed(timeline, c, "commit")) == 1 for c in compactions)
    written = {c["instant"] for c in result.commits}
    assert written and not written & compactions
    rolled_back = set(result.rolled_back)
    blocks = [b.instant for f in table.glob("p*/.*.log.*") for b in read_blocks(f.read_bytes())]
    assert blocks and not set(blocks) & compactions
    assert set(blocks) <= written | rolled_back, (set(blocks) - written - rolled_back, written)


def test_the_last_pending_instant_excludes_a_pending_compaction(tmp_path):
    """Hudi's ``getCommitsTimeline().filterPendingExcludingCompaction().lastInstant()``: between a
    delta commit's completion and the next one's start (when Hudi's coordinator schedules a
    compaction), the only pending instant is the compaction, and it is not a writer's."""
    table = _mor_table(tmp_path / "t")
    table.start_instant(T1)
    _commit(table, T1, [_flush(table, T1, _records(["a"], [1]))], _records(["a"], [1]))
    (tmp_path / "t" / ".hoodie" / f"{T2}.compaction.requested").write_bytes(b"")
    assert table.last_pending_instant() is None
    assert table.timeline().pending_commits() == [] and table.timeline().completed_commits() == [T1]
    table.start_instant(T3)
    assert table.last_pending_instant() == T3
    assert table.timeline().latest_ts() == T3  # a new instant is still after the compaction's
