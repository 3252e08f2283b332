"""What Hudi 0.14's Flink writer reads around each write (runtime.hudi.table.meta_client), as a write
task's flush and the coordinator make those calls under ``--meta-client release``: a meta client
per write handle (``hoodie.properties`` read, the timeline listed, the latest commit read), the
handles' file checks, the coordinator's tables per commit and per instant; ``shared`` makes none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from harness import active

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.messages import CheckpointNotice, WriteMetadataEvent, WriteStat
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.base_files import avro_schema_json
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.protocols import PROTOCOLS
from runtime.writer.coordinator import Coordinator
from runtime.writer.file_group_writer import FileGroupWriter, file_group_writer

T1, T2 = "20260101000000001", "20260101000000002"
STATUS = ("exists", "stat")  # both are a Hadoop getFileStatus


def _records(keys: list[str], ts: int) -> pa.Table:
    n = len(keys)
    return pa.table({"key": keys, "partition": ["p0"] * n, "ts": pa.array([ts] * n, pa.int64()), "value": keys})


def _table(path: Path, table_type: str = "COPY_ON_WRITE") -> HudiTable:
    dfs, base = open_dfs(str(path), role="writer.data")
    return HudiTable.create_or_open(dfs, base, TableProps("t", "key", "partition", "ts", 2, table_type=table_type))


def _writer(table: HudiTable, *, per_handle: bool) -> FileGroupWriter:
    return file_group_writer(table, 0, ParquetWriteOptions(), per_handle=per_handle)


def _committed_first_instant(table: HudiTable, writer: FileGroupWriter) -> None:
    table.start_instant(T1)
    stat = writer.write("p0", 0, T1, _records(["a"], 1))
    WriteClient(table).commit(T1, [stat], {"schema": avro_schema_json(_records([], 0).schema, "t")})
    table.start_instant(T2)
    table.dfs.counters.reset()


def _calls(table: HudiTable) -> dict[str, dict[str, int]]:
    """{component: {status|open|list|...: count}} of the writer's calls since the reset."""
    parts = table.dfs.counters.by_component().get("writer.data", {})
    out: dict[str, dict[str, int]] = {}
    for component, ops in parts.items():
        for op, n in ops.items():
            key = "status" if op in STATUS else "open" if op == "read" else op
            out.setdefault(component, {})[key] = out.get(component, {}).get(key, 0) + n
    return out


def test_a_merge_flush_makes_the_calls_of_hudis_merge_handle(tmp_path):
    """Per merge handle, Hudi 0.14 (the conformance trace): two meta clients (a status of
    .hoodie and an open of hoodie.properties each, one timeline listing), the latest commit's
    metadata, a bootstrap index look-up; 7 statuses and 2 opens of data files, one write."""
    table = _table(tmp_path / "cow")
    writer = _writer(table, per_handle=True)
    _committed_first_instant(table, writer)
    writer.write("p0", 0, T2, _records(["a", "b"], 2))
    calls = _calls(table)
    assert calls["timeline"] == {"status": 2, "open": 3, "list": 1}
    assert calls["aux"] == {"status": 1}
    assert calls["data"] == {"status": 7, "open": 2, "write": 1}


def test_a_create_flush_checks_its_paths_and_looks_up_no_bootstrap_index(tmp_path):
    table = _table(tmp_path / "cow")
    writer = _writer(table, per_handle=True)
    _committed_first_instant(table, writer)
    writer.write("p0", 1, T2, _records(["c"], 2))  # a file group without a base file: a create handle
    calls = _calls(table)
    assert "aux" not in calls
    # trySave, makeNewPath (the folder, the file), setupWriteStatus
    assert calls["data"] == {"status": 4, "write": 1}


def test_an_append_rolls_over_to_a_new_log_file_with_a_listing(tmp_path):
    """Merge-on-read: the log file's status, the partition listed to roll over to the next
    version (the slice has a log file), the written log's size, the partition metadata check."""
    table = _table(tmp_path / "mor", "MERGE_ON_READ")
    writer = _writer(table, per_handle=True)
    _committed_first_instant(table, writer)
    writer.write("p0", 0, T2, _records(["a"], 2))
    calls = _calls(table)
    assert calls["aux"] == {"status": 1}
    # the lab's own listing of the partition for the new instant, and rollOver's
    assert calls["data"]["list"] == 2
    assert calls["data"]["status"] == 3


def test_shared_reads_the_table_once_an_instant(tmp_path):
    table = _table(tmp_path / "cow")
    writer = _writer(table, per_handle=False)
    _committed_first_instant(table, writer)
    writer.write("p0", 0, T2, _records(["a", "b"], 2))
    calls = _calls(table)
    assert "timeline" not in calls and "aux" not in calls
    assert calls["data"] == {"open": 1, "write": 1}


def _coordinator(tmp_path: Any, meta_client: str) -> Coordinator:
    dfs, path = open_dfs(str(tmp_path / "t"), role="coordinator")
    table = HudiTable.create_or_open(dfs, path, TableProps("t", "key", "partition", "ts"))
    env = active().recording_env("coordinator", dfs=dfs)
    config = JobConfig(writers=1, meta_client=meta_client)
    return Coordinator(env, config, table, PROTOCOLS["operator-event"], ["writer-0"])


def _properties_reads(coord: Coordinator) -> int:
    parts = coord.table.dfs.counters.by_component().get("coordinator", {})
    return parts.get("timeline", {}).get("read", 0)


@pytest.mark.parametrize(("meta_client", "reads"), [("release", 6), ("shared", 0)])
def test_the_coordinator_reloads_the_table_per_commit_and_instant(sim, tmp_path, meta_client, reads):
    """release: 3 meta clients at the commit, 3 at the next instant's start (Hudi 0.14's
    coordinator, 6 hoodie.properties reads a checkpoint); shared: none."""
    coord = _coordinator(tmp_path, meta_client)
    table = _table(tmp_path / "t")

    async def go() -> None:
        await coord.start()
        await coord.write_metadata(WriteMetadataEvent(0, -1, "", bootstrap=True))
        instant = coord.instant
        assert instant
        stat: WriteStat = _writer(table, per_handle=False).write("p0", 0, instant, _records(["a"], 1))
        await coord.write_metadata(WriteMetadataEvent(0, 1, instant, [stat], last_batch=True))
        coord.table.dfs.counters.reset()
        assert (await coord.notify_checkpoint_complete(CheckpointNotice(1)))["committed"] is True

    sim.run(go())
    assert _properties_reads(coord) == reads


def test_the_meta_client_option_takes_release_or_shared():
    with pytest.raises(ConfigError, match="--meta-client must be one of release, shared"):
        JobConfig(meta_client="per-task").validate()


def test_a_probe_is_counted_and_a_missing_path_is_no_error(tmp_path):
    """The checks' answers are unused: on the storage a probe is made and counted; the simulated
    disk only counts it."""
    from runtime.sim.memory_dfs import MemoryDfs, MemoryStore

    dfs, base = open_dfs(str(tmp_path))
    (tmp_path / "f").write_bytes(b"x" * 10)
    for op in ("stat", "read", "list"):
        dfs.probe(op, f"{base}/f" if op != "list" else base)
        dfs.probe(op, f"{base}/missing")
    memory = MemoryDfs(MemoryStore())
    memory.probe("list", "/nowhere")
    assert dfs.counters.snapshot() == {"driver": {"stat": 2, "read": 2, "list": 2}}
    assert memory.counters.snapshot() == {"driver": {"list": 1}}
