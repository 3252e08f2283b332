"""Write markers (runtime.hudi.table.markers) as a write task and its coordinator leave them: a marker per
data file before the file, with Hudi 0.14's DFS calls; none left once the instant commits; a crash
between the data files and the commit leaves markers the rollback deletes the files by, and then
removes; ``--markers none`` writes none."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import Dfs, open_dfs
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.base_files import avro_schema_json
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.writer.file_group_writer import file_group_writer

T1, T2 = "20260101000000001", "20260101000000002"


def _records(keys: list[str], ts: int, partition: str = "p0") -> pa.Table:
    return pa.table(
        {
            "key": keys,
            "partition": [partition] * len(keys),
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "value": [f"{k}@{ts}" for k in keys],
        }
    )


def _table(path: Path, table_type: str = "COPY_ON_WRITE", *, markers: bool = True, version: int = 6) -> HudiTable:
    dfs, base = open_dfs(str(path))
    props = TableProps("t", "key", "partition", "ts", num_buckets=2, table_type=table_type, version=version)
    return HudiTable.create_or_open(dfs, base, TableProps(**{**props.__dict__, "markers": markers}))


def _markers(table: HudiTable, instant: str) -> list[str]:
    return table.write_markers(instant).all_markers()


def _commit(table: HudiTable, instant: str, stats: list) -> None:
    WriteClient(table).commit(instant, stats, {"schema": avro_schema_json(_records([], 0).schema, "t")})


def _temp(table: HudiTable) -> Path:
    return Path(table.base_path) / ".hoodie" / ".temp"


def test_a_flush_leaves_a_create_then_a_merge_marker_named_after_its_base_file(tmp_path):
    table = _table(tmp_path / "cow")
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    table.start_instant(T1)
    created = writer.write("p0", 0, T1, _records(["a"], 1))
    again = writer.write("p0", 0, T1, _records(["b"], 1))  # the same instant's rewrite: a merge
    name = created.path.rsplit("/", 1)[-1]
    assert again.path == created.path
    assert _markers(table, T1) == [f"p0/{name}.marker.CREATE", f"p0/{name}.marker.MERGE"]
    _commit(table, T1, [again])
    table.start_instant(T2)
    merged = writer.write("p0", 0, T2, _records(["c"], 2))
    assert _markers(table, T2) == [f"{merged.path}.marker.MERGE"]


def test_a_marker_is_created_as_hudis_direct_markers_create_it_before_the_data_file(tmp_path):
    table = _table(tmp_path / "cow")
    calls: list[tuple[str, str]] = []
    table.dfs.fault_hook = lambda role, op, path: calls.append((op, path))
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    writer.write("p0", 0, T1, _records(["a"], 1))
    writer.write("p0", 0, T1, _records(["b"], 1))
    writer.write("p0", 1, T1, _records(["c"], 1))
    folder = f"{table.base_path}/.hoodie/.temp/{T1}/p0"
    marker_calls = [(op, path.removeprefix(folder)) for op, path in calls if "/.temp/" in path]
    ops = [op for op, _ in marker_calls]
    # createIfNotExists: the folder (made once), the marker, then the marker's creation
    assert ops == ["exists", "mkdir", "exists", "create"] + ["exists", "exists", "create"] * 2
    first_data = next(i for i, (op, path) in enumerate(calls) if op == "write" and path.endswith(".parquet"))
    assert calls[first_data - 1][0] == "create" and "/.temp/" in calls[first_data - 1][1]


def test_a_committed_instant_leaves_no_marker_folder(tmp_path):
    table = _table(tmp_path / "cow")
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    table.start_instant(T1)
    stats = [writer.write("p0", 0, T1, _records(["a"], 1)), writer.write("p1", 1, T1, _records(["b"], 1, "p1"))]
    assert (_temp(table) / T1 / "p1").is_dir()
    _commit(table, T1, stats)
    assert not (_temp(table) / T1).exists()
    rows = pa.Table.from_batches(HudiTableBuilder.from_base_uri(table.base_path).build().read())
    assert sorted(rows.column("key").to_pylist()) == ["a", "b"]  # the official reader reads it


def test_a_crash_before_the_commit_leaves_markers_the_rollback_deletes_by_and_removes(tmp_path):
    table = _table(tmp_path / "cow")
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    table.start_instant(T1)
    _commit(table, T1, [writer.write("p0", 0, T1, _records(["a"], 1))])
    table.start_instant(T2)
    dead = [writer.write("p0", 0, T2, _records(["a"], 2)), writer.write("p1", 1, T2, _records(["b"], 2, "p1"))]
    # the job dies here: the data files and their markers are on the DFS, no commit file
    assert len(_markers(table, T2)) == 2
    listed: list[str] = []
    table.dfs.fault_hook = lambda role, op, path: listed.append(path) if op == "list" else None

    deleted = WriteClient(table).rollback(T2)  # nothing named: the markers name the files

    assert sorted(deleted) == sorted(Dfs.join(table.base_path, s.path) for s in dead)
    assert not (_temp(table) / T2).exists()
    assert all("/.temp/" in path for path in listed)  # no partition listed: the markers said it all
    rows = pa.Table.from_batches(HudiTableBuilder.from_base_uri(table.base_path).build().read())
    assert rows.column("value").to_pylist() == ["a@1"]


def test_without_markers_a_write_leaves_none_and_a_rollback_lists_the_partitions(tmp_path):
    table = _table(tmp_path / "cow", markers=False)
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    table.start_instant(T1)
    dead = writer.write("p0", 0, T1, _records(["a"], 1))
    assert not _temp(table).exists()
    assert WriteClient(table).rollback(T1) == [Dfs.join(table.base_path, dead.path)]


@pytest.mark.parametrize(("version", "suffix"), [(6, "APPEND"), (8, "CREATE")])
def test_a_merge_on_read_flush_leaves_an_append_marker_or_from_version_8_a_log_marker(tmp_path, version, suffix):
    table = _table(tmp_path / "mor", "MERGE_ON_READ", version=version)
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    table.start_instant(T1)
    stat = writer.write("p0", 0, T1, _records(["a"], 1))
    (marker,) = _markers(table, T1)
    fid = stat.file_id
    # 0.14: the slice's base file name (HUDI-1517); 1.x: the log file's own name
    named = f"p0/{fid}_0-0-0_{T1}.parquet" if version == 6 else stat.path
    assert marker == f"{named}.marker.{suffix}"
    WriteClient(table).rollback(T1)
    assert not (Path(table.base_path) / stat.path).exists()
    assert not (_temp(table) / T1).exists()


def test_the_markers_option_takes_release_direct_or_none():
    assert TableProps.for_job(JobConfig(table_version="6")).markers  # release: direct
    assert not TableProps.for_job(JobConfig(table_version="6", markers="none")).markers
    with pytest.raises(ConfigError, match="--markers must be one of release, direct, none"):
        JobConfig(markers="timeline-server").validate()


def test_the_commit_deletes_a_marked_data_file_no_write_stat_lists(tmp_path):
    table = _table(tmp_path / "cow")
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    table.start_instant(T1)
    kept = writer.write("p0", 0, T1, _records(["a"], 1))
    lost = writer.write("p1", 1, T1, _records(["b"], 1, "p1"))  # its status never reached the coordinator
    _commit(table, T1, [kept])  # reconcileAgainstMarkers, before the commit file
    assert (Path(table.base_path) / kept.path).exists()
    assert not (Path(table.base_path) / lost.path).exists()
    rows = pa.Table.from_batches(HudiTableBuilder.from_base_uri(table.base_path).build().read())
    assert rows.column("key").to_pylist() == ["a"]
