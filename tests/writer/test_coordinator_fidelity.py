"""The coordinator as Hudi 0.10/0.11's StreamWriteOperatorCoordinator: commits whatever events it
received when a checkpoint completes, resets its buffers after an empty checkpoint, fails the job
on an event for an instant newer than its own, and declares (does not graft) its RPC surface."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from harness import RecordingEnv, active

from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.env import rpc_handler
from runtime.core.messages import CheckpointNotice, TaskFailure, WriteMetadataEvent, WriteStat
from runtime.hudi.table.base_files import base_file_name, file_group_id
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.merge import merge_file_group
from runtime.hudi.table.table_config import TableProps
from runtime.protocols import PROTOCOLS
from runtime.writer.coordinator import Coordinator

TASKS = ["writer-0", "writer-1"]


def _stat(table: HudiTable, instant: str, task: int) -> WriteStat:
    records = pa.table({"key": [f"k{task}"], "partition": ["p0"], "ts": [1]})
    fid = file_group_id(table.props.table_name, "p0", task)
    name = base_file_name(fid, f"{task}-0-0", instant)
    merged = merge_file_group(
        None, records, instant=instant, partition="p0", file_name=name, key="key", precombine="ts", partition_id=task
    )
    table.ensure_partition("p0", instant)
    size = table.write_base_file(f"p0/{name}", merged.table)
    return WriteStat(fid, f"p0/{name}", "p0", "null", 1, 1, 0, size, size, 1)


def _coordinator(tmp_path: Any, protocol: str = "operator-event", **cfg: Any) -> tuple[Coordinator, RecordingEnv]:
    dfs, path = open_dfs(str(tmp_path / "t"), role="coordinator")
    table = HudiTable.create_or_open(dfs, path, TableProps("t", "key", "partition", "ts"))
    env = active().recording_env("coordinator", dfs=dfs)
    return Coordinator(env, JobConfig(writers=2, **cfg), table, PROTOCOLS[protocol], TASKS), env


async def _bootstrapped(coord: Coordinator) -> str:
    await coord.start()
    for t in range(len(TASKS)):
        await coord.write_metadata(WriteMetadataEvent(t, -1, "", bootstrap=True))
    assert coord.instant
    return coord.instant


def test_commits_whatever_events_it_received(sim, tmp_path):
    """Only task 0 reported (an eager flush, no last batch): Hudi 0.x commits it anyway."""
    coord, _ = _coordinator(tmp_path)

    async def go() -> dict[str, Any]:
        instant = await _bootstrapped(coord)
        await coord.write_metadata(WriteMetadataEvent(0, 1, instant, [_stat(coord.table, instant, 0)]))
        return await coord.notify_checkpoint_complete(CheckpointNotice(1))

    result = sim.run(go())
    assert result["committed"] is True
    assert [c.rows for c in coord.commits] == [1]
    assert coord.events == []


def test_an_empty_checkpoint_clears_the_buffers_and_reuses_the_instant(sim, tmp_path):
    """One task's last batch without data, the other's missing: reset and reuse (Hudi), not
    'waiting for every task's last batch' with the buffer kept."""
    coord, env = _coordinator(tmp_path)

    async def go() -> tuple[str, dict[str, Any]]:
        instant = await _bootstrapped(coord)
        await coord.write_metadata(WriteMetadataEvent(0, 1, instant, [], last_batch=True))
        return instant, await coord.notify_checkpoint_complete(CheckpointNotice(1))

    instant, result = sim.run(go())
    assert result == {"committed": False, "reason": "empty round", "instant": instant}
    assert coord.events == []
    assert coord.empty_rounds == [1]
    # operator-event's coordinator side sends a CommitAckEvent to every task (sendCommitAckEvents)
    assert [(d, m) for d, m, _ in env.sent] == [(t, "operator_event") for t in TASKS]


def test_with_allow_empty_commit_an_empty_checkpoint_commits_an_empty_instant_and_sends_no_ack(sim, tmp_path):
    """Hudi 0.14+ ``commitInstant`` with hoodie.allow.empty.commit (HUDI-6127; the default from
    1.0, HUDI-7819): the round without data is committed empty and a new instant starts, so no
    CommitAckEvent is needed (and none is sent)."""
    coord, env = _coordinator(tmp_path, "ckp-meta", allow_empty_commit="true")

    async def go() -> tuple[str, dict[str, Any]]:
        instant = await _bootstrapped(coord)
        await coord.write_metadata(WriteMetadataEvent(0, 1, instant, [], last_batch=True))
        return instant, await coord.notify_checkpoint_complete(CheckpointNotice(1))

    instant, result = sim.run(go())
    assert result == {"committed": True, "instant": instant}
    assert coord.table.timeline().completed_commits() == [instant]
    assert coord.table.read_commit_metadata(instant)["partitionToWriteStats"] == {}
    assert coord.instant != instant and coord.empty_rounds == []
    assert [m for _, m, _ in env.sent] == []  # no CommitAckEvent


def test_no_event_at_all_commits_nothing_and_sends_nothing(sim, tmp_path):
    coord, env = _coordinator(tmp_path)

    async def go() -> dict[str, Any]:
        await _bootstrapped(coord)
        return await coord.notify_checkpoint_complete(CheckpointNotice(1))

    result = sim.run(go())
    assert result["committed"] is False and coord.empty_rounds == [] and env.sent == []


def test_an_event_for_a_newer_instant_fails_the_job(sim, tmp_path):
    coord, env = _coordinator(tmp_path)

    async def go() -> str:
        instant = await _bootstrapped(coord)
        await coord.write_metadata(WriteMetadataEvent(1, 1, "99991231235959999", []))
        return instant

    sim.run(go())
    expected = "Receive an unexpected event for instant 99991231235959999 from task 1"
    assert coord.error == expected
    assert coord.events == []
    assert env.sent == [("job-manager", "task_failed", TaskFailure("coordinator", expected, -1))]


def test_an_event_of_an_older_instant_is_accepted_as_hudi_does(sim, tmp_path):
    coord, _ = _coordinator(tmp_path)

    async def go() -> None:
        await _bootstrapped(coord)
        await coord.write_metadata(WriteMetadataEvent(0, 1, "20000101000000000", []))

    sim.run(go())
    assert coord.error is None and len(coord.events) == 1


def test_the_rpc_surface_is_declared_not_grafted(sim, tmp_path):
    coord, _ = _coordinator(tmp_path, "coordination-rpc")
    assert "instant_time_request" not in vars(coord)  # no method set on the instance
    assert not hasattr(coord, "instant_time_request")
    assert coord.RPC_METHODS == Coordinator.OWN_RPC_METHODS + ("instant_time_request",)
    handler = rpc_handler(coord, "instant_time_request")
    assert handler.__self__ is coord.protocol
    assert rpc_handler(coord, "write_metadata").__self__ is coord
    with pytest.raises(ValueError, match="no RPC method 'describe'"):
        rpc_handler(coord, "describe")


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_a_coordinator_whose_start_never_ran_still_describes_itself(sim, tmp_path, protocol):
    """A run can end between a coordinator's placement and its start (a failover's restart that a
    search cuts, a time limit): the run's record is still collected from its description
    (``commitlab check --protocol message-bus`` ended in an AttributeError traceback there)."""
    coord, _ = _coordinator(tmp_path, protocol)
    view = coord.describe()
    if protocol == "message-bus":
        assert view.protocol == {"bus_recreated": 0}
