"""Table versions 8 and 9 (Hudi 1.0, 1.1) next to 6: the timeline folder, completion times in the
file names, Avro commit metadata, ``hoodie.properties``, log files named after their instant and
rolled back by deletion; every protocol's run read back by the official reader (``hudi`` 0.5.0)."""

from __future__ import annotations

import io
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hudi import HudiQueryType, HudiReadOptions

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import open_dfs
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.log_format import LogFileName, read_blocks
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.layout import resolve_layout
from runtime.hudi.table.table_config import TableError, TableProps, parse_properties
from runtime.hudi.timeline.table_version import COMMIT_METADATA_SCHEMA, table_version
from runtime.job.prepare import validate_job
from runtime.lab.table_audit import audit_table
from runtime.lab.verify import read_snapshot
from runtime.protocols import PROTOCOLS
from runtime.sim import simulate
from tests.hudi.test_merge_on_read import T1, T2, T3, _commit, _flush, _records
from tests.hudi.test_table import NAME, ROWS1, ROWS2, commit, read_all, reader


def _table(tmp_path: Path, version: int, table_type: str = "COPY_ON_WRITE") -> HudiTable:
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    props = TableProps(NAME, "key", "partition", "ts", num_buckets=1, table_type=table_type, version=version)
    return HudiTable.create_or_open(dfs, path, props)


def _props(table: HudiTable) -> dict[str, str]:
    return parse_properties(Path(table.hoodie, "hoodie.properties").read_text())


@pytest.mark.parametrize("version", [8, 9])
def test_the_timeline_lives_in_its_folder_and_names_completion_times(tmp_path, version):
    table = _table(tmp_path, version)
    commit(table, T1, ROWS1, 1)
    timeline = Path(table.hoodie, "timeline")
    names = sorted(p.name for p in timeline.iterdir())
    (done,) = [n for n in names if n.endswith(".commit")]
    requested, completion = done.removesuffix(".commit").split("_")
    assert requested == T1 and completion > T1  # a later instant time from the same generator
    assert {f"{T1}.commit.requested", f"{T1}.inflight", "history"} <= set(names)
    assert not [p for p in Path(table.hoodie).iterdir() if p.name.startswith(T1)]  # nothing left in .hoodie
    assert table.timeline().completed_commits() == [T1] and table.timeline().completion_of(T1) == completion


@pytest.mark.parametrize("version", [8, 9])
def test_commit_metadata_is_one_avro_record_of_hudis_schema(tmp_path, version):
    table = _table(tmp_path, version)
    stats = commit(table, T1, ROWS1, 7)
    name = table.commit_file(T1)
    with open(Path(table.timeline_dir, name), "rb") as f:
        avro = fastavro.reader(f)
        (record,) = list(avro)
        assert avro.writer_schema["name"].endswith("HoodieCommitMetadata")
    assert record["extraMetadata"]["checkpoint.id"] == "7" and record["operationType"] == "UPSERT"
    written = {s["fileId"]: s["numInserts"] for ss in record["partitionToWriteStats"].values() for s in ss}
    assert written == {s.file_id: s.num_inserts for s in stats}
    # the document reads back as the JSON form does (what the lab's own checks use)
    assert table.read_commit_metadata(T1)["partitionToWriteStats"].keys() == record["partitionToWriteStats"].keys()


def test_the_commit_metadata_schema_has_hudis_field_order():
    """The write stat's fields in ``HoodieWriteStat.avsc``'s order (Hudi 1.x): a reader resolves
    by name, but the order is what a Java-written file embeds."""
    stat = COMMIT_METADATA_SCHEMA["fields"][0]["type"][1]["values"]["items"]
    names = [f["name"] for f in stat["fields"]]
    assert names[:9] == ["fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites",
                         "totalWriteBytes", "totalWriteErrors", "partitionPath"]  # fmt: skip
    assert names[17:21] == ["logVersion", "logOffset", "baseFile", "logFiles"]
    assert [f["name"] for f in COMMIT_METADATA_SCHEMA["fields"]] == [
        "partitionToWriteStats", "compacted", "extraMetadata", "version", "operationType"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("version", "ordering_key", "absent"),
    [
        (6, "hoodie.table.precombine.field", "hoodie.timeline.path"),
        (8, "hoodie.table.precombine.field", "hoodie.table.ordering.fields"),
        (9, "hoodie.table.ordering.fields", "hoodie.table.precombine.field"),
    ],
)
def test_hoodie_properties_are_each_versions(tmp_path, version, ordering_key, absent):
    props = _props(_table(tmp_path, version))
    assert props["hoodie.table.version"] == str(version)
    assert props["hoodie.timeline.layout.version"] == ("1" if version == 6 else "2")
    assert props[ordering_key] == "ts" and absent not in props
    if version >= 8:
        assert props["hoodie.timeline.path"] == "timeline" and props["hoodie.timeline.history.path"] == "history"
        assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert ("hoodie.table.format" in props) == (version == 9)


@pytest.mark.parametrize("version", [8, 9])
def test_the_reader_reads_snapshot_time_travel_and_completion_time_increments(tmp_path, version):
    table = _table(tmp_path, version)
    commit(table, T1, ROWS1, 1)
    commit(table, T2, ROWS2, 2)
    snap = read_all(table)
    assert snap.num_rows == 7 and {r["_hoodie_record_key"]: r["ts"] for r in snap.to_pylist()}["k3"] == 1
    assert read_all(table, HudiReadOptions().with_as_of_timestamp(T1)).num_rows == 5
    # Hudi 1.x reads increments between completion times: (completion of T1, completion of T2]
    c1, c2 = table.timeline().completion_of(T1), table.timeline().completion_of(T2)
    assert c1 is not None and c2 is not None
    inc = HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(c1).with_end_timestamp(c2)
    rows = pa.Table.from_batches(reader(table).read(inc))
    assert set(rows.column("_hoodie_commit_time").to_pylist()) == {T2}


def test_a_merge_on_read_flush_names_its_log_file_after_its_instant(tmp_path):
    table = _table(tmp_path, 9, "MERGE_ON_READ")
    table.start_instant(T1)
    first = _flush(table, T1, _records(["a", "b"], [1, 1]))
    _commit(table, T1, [first], _records(["a"], [1]))
    table.start_instant(T2)
    second = _flush(table, T2, _records(["a", "c"], [5, 1]))
    _commit(table, T2, [second], _records(["a"], [1]))
    assert LogFileName.parse(second.path.split("/")[1]) == LogFileName(second.file_id, T2, 1, "0-0-0")
    # HoodieAppendHandle 1.x: prevCommit is the instant, no base file, the stat names its own file
    assert second.prev_commit == T2 and second.base_file == "" and second.log_files == [second.path.split("/")[1]]
    assert second.num_update_writes == 2  # the file group existed
    snap = read_snapshot(table.base_path).sort_by("key")
    assert snap.column("key").to_pylist() == ["a", "b", "c"] and snap.column("ts").to_pylist() == [5, 1, 1]
    assert audit_table(table.base_path).ok, audit_table(table.base_path).errors


def test_rolling_back_a_version_9_delta_commit_deletes_its_log_files_and_marks_nothing(tmp_path):
    table = _table(tmp_path, 9, "MERGE_ON_READ")
    table.start_instant(T1)
    _commit(table, T1, [_flush(table, T1, _records(["a"], [1]))], _records(["a"], [1]))
    table.start_instant(T2)
    failed = _flush(table, T2, _records(["a", "b"], [9, 9]))
    before = sorted(p.name for p in Path(table.base_path, "p0").glob(".*.log.*"))
    deleted = WriteClient(table).rollback(T2, [failed.path])
    after = sorted(p.name for p in Path(table.base_path, "p0").glob(".*.log.*"))
    assert [Path(d).name for d in deleted] == [failed.path.split("/")[1]]
    assert after == [n for n in before if n != failed.path.split("/")[1]]
    assert all(b.instant == T1 for n in after for b in read_blocks(Path(table.base_path, "p0", n).read_bytes()))
    assert not list(Path(table.timeline_dir).glob(f"{T2}.*"))
    table.start_instant(T3)
    assert read_snapshot(table.base_path).column("ts").to_pylist() == [1]


def test_a_table_of_a_version_not_written_is_refused_naming_the_versions(tmp_path):
    table = _table(tmp_path, 6)
    props = Path(table.hoodie, "hoodie.properties")
    props.write_text(props.read_text().replace("hoodie.table.version=6", "hoodie.table.version=7"))
    with pytest.raises(TableError, match="table version 7 is not one .* use 6, 8, 9"):
        HudiTable.open(*open_dfs(table.base_path))
    cfg = validate_job(JobConfig(source="generator", table=table.base_path, table_name=NAME))
    with pytest.raises(ConfigError, match="hoodie.table.version=7; this lab writes versions 6, 8, 9"):
        resolve_layout(cfg)


def test_an_existing_table_is_never_upgraded_to_the_protocols_version(tmp_path):
    """coordination-rpc models Hudi 1.1 (version 9); a version 6 table keeps its version: the run
    is refused before it starts, naming the flag that fits the table."""
    table = _table(tmp_path, 6)
    commit(table, T1, ROWS1, 1)
    before = sorted(p.name for p in Path(table.hoodie).iterdir())
    cfg = validate_job(
        JobConfig(
            source="generator",
            protocol="coordination-rpc",
            table=table.base_path,
            table_name=NAME,
            buckets=1,
            writers=1,
        )
    )
    assert cfg.table_version == "9"
    with pytest.raises(
        ConfigError, match="--table-version: this run writes version 9.*hoodie.table.version=6.*--table-version 6"
    ):
        resolve_layout(cfg)
    assert sorted(p.name for p in Path(table.hoodie).iterdir()) == before
    assert resolve_layout(cfg.replace(table_version="6")).table_version == "6"


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_release_resolves_to_the_version_each_protocols_hudi_writes(protocol):
    cfg = validate_job(JobConfig(source="generator", protocol=protocol))
    # two-phase-commit is a what-if on Hudi 1.1's table (file slices by completion time)
    assert cfg.table_version == ("9" if protocol.startswith(("coordination-rpc", "two-phase-commit")) else "6")
    assert table_version(cfg.table_version).release == ("1.1" if cfg.table_version == "9" else "0.14-0.15")


@pytest.mark.parametrize("version", ["8", "9"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_writes_a_copy_on_write_table_of_each_version_exactly_once(tmp_path, protocol, version):
    cfg = JobConfig(
        source="generator",
        protocol=protocol,
        writers=2,
        checkpoints=4,
        records=2_000,
        bucket_flush_rows=300,
        control_topic_interval="checkpoint",
        table_version=version,
    )
    result = simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
    assert result.status == "finished", result.error
    eo = result.exactly_once
    assert eo.verified and eo.commits_checked == len(result.commits) >= 3, eo
    table = tmp_path / "run" / "table"
    props = parse_properties((table / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.version"] == version
    for c in result.commits:
        (done,) = (table / ".hoodie" / "timeline").glob(f"{c['instant']}_*.commit")
        (record,) = fastavro.reader(io.BytesIO(done.read_bytes()))  # one Avro record
        assert record["extraMetadata"]["checkpoint.id"] == str(c["checkpoint"])


def test_the_simulated_disk_writes_version_9_too(tmp_path):
    cfg = JobConfig(source="generator", protocol="coordination-rpc", writers=2, checkpoints=3, records=600)
    result = simulate(cfg, seed=3, storage="memory")
    assert result.status == "finished", result.error
    assert result.config["table_version"] == "9"  # release, resolved for Hudi 1.1
    assert result.exactly_once.verified and len(result.commits) == 3, result.exactly_once
