"""The write task as Hudi's StreamWriteFunction: a flush's WriteMetadataEvent is fire-and-forget
(the mailbox thread never waits for the coordinator), a lost one fails the task (Flink's
RpcTaskOperatorEventGateway), an eager flush with no instant is skipped with its data kept, and the
job manager hands events on to the coordinator in order with its checkpoint notifications."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
from harness import RecordingEnv, active

from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.messages import TaskFailure, WriteMetadataEvent
from runtime.flink.job_manager import JobManager
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.protocols.base import CoordinatorSide, Protocol, WriterSide
from runtime.writer.write_task import WriteTask

INSTANT = "20260101000000001"


class _Writer(WriterSide):
    instant: str | None = INSTANT

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        return type(self).instant


class _NoInstantWriter(_Writer):
    instant = None


class _Proto(Protocol):
    name = "test"
    writer_side = _Writer
    coordinator_side = CoordinatorSide


class _NoInstantProto(_Proto):
    writer_side = _NoInstantWriter


def _task(tmp_path: Any, protocol: type[Protocol] = _Proto, **cfg: Any) -> tuple[WriteTask, RecordingEnv]:
    dfs, path = open_dfs(str(tmp_path / "t"), role="writer-0")
    table = HudiTable.create_or_open(dfs, path, TableProps("t", "key", "partition", "ts"))
    table.start_instant(INSTANT)
    env = active().recording_env("writer-0", dfs=dfs)
    # the env delivers nothing: the tasks list their partitions themselves (no file-system view server)
    config = JobConfig(
        **{"writers": 1, "bucket_flush_rows": 2, "task_buffer_rows": 1000, "file_system_view": "direct", **cfg}
    )
    task = WriteTask(env, config, 0, table, protocol)
    task.state = "running"
    return task, env


def _batch(n: int, bucket: int = 0) -> pa.Table:
    return pa.table(
        {
            "key": [f"k{i}" for i in range(n)],
            "partition": ["p0"] * n,
            "ts": list(range(n)),
            "_bucket": pa.array([bucket] * n, pa.int32()),
        }
    )


def test_a_flush_does_not_wait_for_the_coordinator(sim, tmp_path):
    # with the remote file-system view a flush asks the embedded timeline server beside the
    # coordinator, not its executor (tests/writer/test_file_system_view.py); here the task lists
    task, env = _task(tmp_path)
    env.call_gate = asyncio.Event()  # a call would block until the end of the test: none may be made

    async def go() -> None:
        await asyncio.wait_for(task.process_batch(_batch(3)), 2.0)

    sim.run(go())
    assert env.calls == []
    assert [(d, m) for d, m, _, _ in env.events] == [("job-manager", "write_metadata")]
    event = env.events[0][2]
    assert isinstance(event, WriteMetadataEvent) and event.instant == INSTANT and not event.last_batch


def test_a_lost_event_fails_the_task(sim, tmp_path):
    task, env = _task(tmp_path)
    sim.run(task.process_batch(_batch(3)))
    on_failure = env.events[0][3]
    on_failure("the acknowledgement of job-manager.write_metadata did not come within 10.0s")
    assert task.state == "failed"
    assert task.error is not None and "operator event to the coordinator was lost" in task.error
    assert env.sent[-1][:2] == ("job-manager", "task_failed")
    assert isinstance(env.sent[-1][2], TaskFailure)


def test_an_eager_flush_with_no_instant_is_skipped_and_the_data_stays_buffered(sim, tmp_path):
    task, env = _task(tmp_path, _NoInstantProto, task_buffer_rows=2)
    sim.run(task.process_batch(_batch(3)))
    assert task.buffered_rows == 3 and task.bucket_rows == {("p0", 0): 3}
    assert task.skipped_flushes >= 1
    assert env.events == []


def test_the_job_manager_hands_events_on_in_order_with_its_notifications(sim, tmp_path):
    dfs, _ = open_dfs(str(tmp_path / "t"), role="job-manager")
    env = active().recording_env("job-manager", dfs=dfs)
    jm = JobManager(env, JobConfig(), ["writer-0"], ["source-0"])
    first = WriteMetadataEvent(0, 1, INSTANT, [])
    second = WriteMetadataEvent(0, 1, INSTANT, [], last_batch=True)
    jm.write_metadata(first)
    jm.write_metadata(second)
    assert env.sent == [("coordinator", "write_metadata", first), ("coordinator", "write_metadata", second)]
    assert "write_metadata" in JobManager.RPC_METHODS
