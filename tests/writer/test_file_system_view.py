"""Where a write task learns its file slices (runtime.hudi.table.file_system_view, ``--file-system-view``):
Hudi's Flink tasks ask the coordinator's embedded timeline server (``RemoteHoodieTableFileSystemView``)
and list no partition; the server lists a partition when first asked after each commit
(``syncIfLocalViewBehind``). ``direct``: every task lists the partitions it writes, the lab before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.config import JobConfig
from runtime.core.messages import FileSliceRequest, PartitionFiles
from runtime.hudi.table.file_system_view import VIEW_STORAGE_PROPERTIES, EmbeddedViewServer
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.lab.results import JobResult
from runtime.lab.verify import read_snapshot
from runtime.protocols import PROTOCOLS
from runtime.sim import simulate

WRITERS, CHECKPOINTS, PARTITIONS = 2, 4, 4
T1, T2 = "20260101000000001", "20260101000000002"


def _run(tmp_path: Path, view: str, table_type: str = "copy-on-write", protocol: str = "ckp-meta") -> JobResult:
    cfg = JobConfig(
        source="generator",
        protocol=protocol,
        table_type=table_type,
        writers=WRITERS,
        checkpoints=CHECKPOINTS,
        records=2_000,
        partitions=PARTITIONS,
        control_topic_interval="checkpoint",
        file_system_view=view,
    )
    result = simulate(cfg, workdir=str(tmp_path / view), seed=5, storage="disk")
    assert result.status == "finished", result.error
    return result


def _ops(result: JobResult, role: str, component: str) -> dict[str, int]:
    return dict(result.figures.dfs_ops_by_component.get(role, {}).get(component, {}))


@pytest.mark.parametrize("table_type", ["copy-on-write", "merge-on-read"])
def test_remote_write_tasks_list_no_partition_and_the_server_lists_each_once_a_commit(tmp_path, table_type):
    """Hudi 0.14.0's trace (2 writers, 4 partitions, 4 checkpoints): the timeline server lists each
    partition once per checkpoint (16), creates the 4 missing ones at first, reloads the timeline
    per commit; the write tasks' partition listings are only the log roll-over's (merge-on-read)."""
    remote, direct = _run(tmp_path, "remote", table_type), _run(tmp_path, "direct", table_type)
    server = _ops(remote, "timeline-server", "data")
    assert server == {"list": PARTITIONS * CHECKPOINTS, "stat": PARTITIONS, "mkdir": PARTITIONS}
    assert _ops(remote, "timeline-server", "timeline")["list"] == CHECKPOINTS
    assert _ops(direct, "timeline-server", "data") == {}
    # each task listed each partition itself (copy-on-write: once; merge-on-read: once an instant)
    direct_lists = WRITERS * PARTITIONS * (1 if table_type == "copy-on-write" else CHECKPOINTS)
    saved = _ops(direct, "writer.data", "data").get("list", 0) - _ops(remote, "writer.data", "data").get("list", 0)
    assert saved == direct_lists
    if table_type == "copy-on-write":
        assert "list" not in _ops(remote, "writer.data", "data")
    assert remote.figures.rpcs["latest_file_slices"] > 0
    assert "latest_file_slices" not in direct.figures.rpcs
    for result in (remote, direct):  # the same rows, read back by the official reader
        assert result.exactly_once.verified, result.exactly_once
        assert len(read_snapshot(str(tmp_path / result.config["file_system_view"] / "table"))) > 0


def test_the_coordinator_saves_the_view_storage_properties_and_each_task_reads_them(tmp_path):
    remote, direct = _run(tmp_path, "remote"), _run(tmp_path, "direct")
    assert (tmp_path / "remote" / "table" / ".hoodie" / VIEW_STORAGE_PROPERTIES).is_file()
    assert not (tmp_path / "direct" / "table" / ".hoodie" / VIEW_STORAGE_PROPERTIES).exists()
    assert _ops(remote, "coordinator", "aux") == {"delete": 1, "write": 1}
    assert _ops(remote, "writer.data", "aux")["read"] == WRITERS
    assert "read" not in _ops(direct, "writer.data", "aux")


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_release_is_remote_for_the_flink_writer_and_direct_for_the_connect_sink(tmp_path, protocol):
    result = _run(tmp_path, "release", protocol=protocol)
    asked = result.figures.rpcs.get("latest_file_slices", 0)
    assert (asked == 0) == (protocol == "control-topic"), result.figures.rpcs
    assert result.exactly_once.verified, result.exactly_once


@pytest.mark.parametrize("table_type", ["copy-on-write", "merge-on-read"])
def test_a_failed_view_request_is_answered_by_the_local_view_and_fails_no_task(tmp_path, monkeypatch, table_type):
    """PriorityBasedFileSystemView: the remote view's error routes the request to the local view
    (the task lists the partition itself) for that write; the next write asks the server again."""
    real = EmbeddedViewServer.latest_file_slices
    failed: list[str] = []

    def every_third_fails(self: EmbeddedViewServer, request: FileSliceRequest) -> PartitionFiles:
        if self.requests % 3 == 2:
            self.requests += 1
            failed.append(request.partition)
            raise OSError("the timeline server could not list the partition")
        return real(self, request)

    monkeypatch.setattr(EmbeddedViewServer, "latest_file_slices", every_third_fails)
    result = _run(tmp_path, "remote", table_type)
    assert failed and result.failovers == []
    assert result.figures.counters["file_system_view_fallbacks"] == len(failed)
    assert result.figures.rpcs["latest_file_slices"] > len(failed)  # the server is asked again
    assert "list" in _ops(result, "writer.data", "data")  # the local view's listings
    assert result.exactly_once.verified, result.exactly_once


def _server(tmp_path: Path) -> tuple[HudiTable, EmbeddedViewServer]:
    from runtime.core.dfs import open_dfs

    dfs, base = open_dfs(str(tmp_path / "t"), role="timeline-server")
    table = HudiTable.create_or_open(dfs, base, TableProps("t", "key", "partition", "ts", 2))
    return table, EmbeddedViewServer(table)


def _lists(table: HudiTable) -> Any:
    return table.dfs.counters.by_component().get("timeline-server", {}).get("data", {}).get("list", 0)


def test_the_server_lists_a_partition_once_until_a_newer_instant_asks(tmp_path):
    table, server = _server(tmp_path)
    table.dfs.mkdirs(table.partition_path("p0"))
    table.dfs.write_bytes(table.partition_path("p0") + "/f1_0-0-0_" + T1 + ".parquet", b"x")
    first = server.latest_file_slices(FileSliceRequest("p0", T1))
    assert first.names == [f"f1_0-0-0_{T1}.parquet"]
    server.latest_file_slices(FileSliceRequest("p0", T1))
    assert _lists(table) == 1  # the same instant: the view as it was
    table.dfs.write_bytes(table.partition_path("p0") + "/f2_0-0-0_" + T2 + ".parquet", b"x")
    again = server.latest_file_slices(FileSliceRequest("p0", T2))
    assert _lists(table) == 2 and len(again.names) == 2 and server.syncs == 1
    server.latest_file_slices(FileSliceRequest("p0", T1))  # an older client: no sync back
    assert _lists(table) == 2


def test_a_look_up_is_answered_with_its_file_groups_slice_and_a_first_touch_with_the_partition(tmp_path):
    """getLatestFileSlice / getLatestBaseFile answer one file group; getAllFileGroups (a task's
    first touch of a partition) every one, from the same listing."""
    table, server = _server(tmp_path)
    part = table.partition_path("p0")
    table.dfs.mkdirs(part)
    names = [f"f1_0-0-0_{T1}.parquet", f".f1_{T1}.log.1_0-0-0", f"f2_0-0-0_{T1}.parquet", ".hoodie_partition_metadata"]
    for name in names:
        table.dfs.write_bytes(f"{part}/{name}", b"x")
    whole = server.latest_file_slices(FileSliceRequest("p0", T1))
    assert sorted(whole.names) == sorted(names)
    one = server.latest_file_slices(FileSliceRequest("p0", T1, file_id="f1"))
    assert sorted(one.names) == sorted(names[:2]) and one.sizes == [1, 1]
    assert server.latest_file_slices(FileSliceRequest("p0", T1, file_id="f9")).names == []
    assert _lists(table) == 1


def test_an_append_after_a_view_behind_the_storage_rolls_over_the_log_file_it_would_overwrite(tmp_path):
    """A restarted task's view may predate the log file its last attempt wrote: the append finds
    that name taken and rolls over past it (HoodieLogFormatWriter.getOutputStream -> rollOver)."""
    import pyarrow as pa

    from runtime.core.dfs import open_dfs
    from runtime.hudi.formats.parquet_format import ParquetWriteOptions
    from runtime.writer.file_group_writer import file_group_writer

    dfs, base = open_dfs(str(tmp_path / "mor"), role="writer.data")
    props = TableProps("t", "key", "partition", "ts", 2, table_type="MERGE_ON_READ")
    table = HudiTable.create_or_open(dfs, base, props)
    table.start_instant(T1)
    rows = pa.table({"key": ["a"], "partition": ["p0"], "ts": pa.array([1], pa.int64()), "value": ["a"]})
    empty_view = PartitionFiles([], [])
    first = file_group_writer(table, 0, ParquetWriteOptions()).write("p0", 0, T1, rows, files=empty_view)
    again = file_group_writer(table, 0, ParquetWriteOptions()).write("p0", 0, T1, rows, files=empty_view)
    assert first.path != again.path
    assert {first.path, again.path} <= {f"p0/{name}" for name in table.partition_files("p0").names}
