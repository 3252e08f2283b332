"""P4 coordination-rpc as Hudi 1.1 runs it (HUDI-9381, PR #13285) and its async variant (PR #19960):
one request per flush, 1.x event buffers checkpointed by the coordinator and recommitted after a
restart, empty bootstraps from restarted tasks, empty instants left pending, transport retries of
the async writer. Simulator runs on virtual time (storage="memory")."""

from __future__ import annotations

import pytest

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.sim import simulate

VARIANTS = ["coordination-rpc", "coordination-rpc-async"]


def _cfg(protocol: str, **kw) -> JobConfig:
    base = dict(protocol=protocol, source="generator", writers=2, checkpoints=4, records=2_000, bucket_flush_rows=200)
    base.update(kw)
    return JobConfig(**base)


def _sim(cfg: JobConfig, seed: int = 1) -> dict:
    return simulate(cfg, seed=seed, storage="memory", max_real_s=120.0)


@pytest.mark.parametrize("protocol", VARIANTS)
def test_every_flush_sends_one_instant_request(protocol):
    """flushBucket and flushRemaining each call instantToWrite -> requestInstantTime: no cache per
    checkpoint (the old model asked once per key, so far fewer requests than flushes)."""
    result = _sim(_cfg(protocol, bucket_flush_rows=20))
    assert result.status == "finished" and result.exactly_once.verified
    total = 0
    for name, dump in result.tasks.items():
        flushes, proto = dump["flushes"], dump["protocol"]
        eager = flushes["bucket"] + flushes["buffer"]
        assert eager > 0, f"{name} made no eager flush: the test needs some"
        barriers = 4  # one flushRemaining per checkpoint, however many buckets it writes
        assert proto["requests"] - proto["pending_replies"] - proto["transport_retries"] == eager + barriers, name
        total += proto["requests"]
    assert result.figures.rpcs["instant_time_request"] == total


@pytest.mark.parametrize("protocol", VARIANTS)
def test_exactly_once_after_a_task_crash(protocol):
    """A task dies after acking checkpoint 2: the job fails over; restarted tasks send empty
    bootstraps, the coordinator's restored buffers and the next checkpoints commit the rest."""
    result = _sim(_cfg(protocol, faults=[FaultSpec("task.after_checkpoint_before_commit", 2, 0)]))
    assert len(result.failovers) == 1 and "writer-0" in result.failovers[0].error
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once


@pytest.mark.parametrize("protocol", VARIANTS)
def test_exactly_once_after_a_coordinator_crash_between_commit_and_next_request(protocol):
    result = _sim(_cfg(protocol, faults=[FaultSpec("coordinator.after_commit_before_next_instant", 2)]))
    assert len(result.failovers) == 1 and "coordinator" in result.failovers[0].error
    assert result.status == "finished", result.error
    assert [c["checkpoint"] for c in result.commits] == [1, 2, 3, 4]
    assert result.exactly_once.verified, result.exactly_once


@pytest.mark.parametrize("protocol", VARIANTS)
def test_hudi_1_1_loses_a_completed_checkpoint_whose_commit_a_coordinator_crash_interrupted_19215(protocol):
    """#19215 (fixed after 1.1 by PR #19237): checkpoint 2 completes, the coordinator dies before
    writing the commit file. Its checkpointed state (taken at the trigger of 2) holds no buffer of
    key 1 (still collecting), and tasks on attempt > 0 send an empty bootstrap: the instant is
    never committed. The 0.x bootstrap (tasks re-send their statuses) recommitted it."""
    result = _sim(_cfg(protocol, faults=[FaultSpec("coordinator.before_commit_file", 2)]))
    assert result.failovers[0].restored_checkpoint == 2
    assert result.status == "finished", result.error
    assert 2 not in [c["checkpoint"] for c in result.commits]
    assert not result.exactly_once.verified


# -- unit: the coordinator side and the async writer, on the virtual-clock harness ------------------

import asyncio  # noqa: E402

from runtime.core.env import WaitTimeout  # noqa: E402
from tests.protocols.test_protocol_rules import (  # noqa: E402
    AsyncCoordinationRpcProtocol,
    CheckpointNotice,
    InstantTimeRequest,
    WriteMetadataEvent,
    rpc_world,
    rpc_writer,
    run,
    world,  # noqa: F401 - the fixture
    write_file,
)


@pytest.mark.parametrize("allow_empty_commit", ["release", "false"])
def test_notify_commits_every_buffer_below_n_whatever_tasks_reported(world, allow_empty_commit):  # noqa: F811
    """commitInstants(n): key 0 holds data from task 0 only (task 1 never sent its last batch) and
    is committed; key 1 has no write status: Hudi 1.1 commits it empty (hoodie.allow.empty.commit,
    true by default since HUDI-7819), and with the option off resets it and leaves its instant
    pending (not rolled back); key 2 >= n waits."""
    coord, _ = rpc_world(world, allow_empty_commit=allow_empty_commit)
    data = world.view("writer.data")
    drv, asker = world.hub.env("job-manager"), world.hub.env("writer-0")

    async def scenario():
        await coord.start()
        inst = {}
        for key in (0, 1, 2):
            inst[key] = (await asker.call("coordinator", "instant_time_request", InstantTimeRequest(0, key))).instant
        stat = write_file(data, inst[0], partition="p0", task=0, keys=range(3))
        await drv.call("coordinator", "write_metadata", WriteMetadataEvent(0, 1, inst[0], [stat]))
        await drv.call("coordinator", "write_metadata", WriteMetadataEvent(0, 2, inst[1], [], last_batch=True))
        await drv.call("coordinator", "write_metadata", WriteMetadataEvent(1, 2, inst[1], [], last_batch=True))
        return inst, await drv.call("coordinator", "notify_checkpoint_complete", CheckpointNotice(2))

    inst, result = run(scenario())
    timeline = world.view("check").timeline()
    if allow_empty_commit == "release":
        assert result == {"committed": True, "instants": [inst[0], inst[1]]}
        assert timeline.completed_commits() == [inst[0], inst[1]]
        assert world.view("check").read_commit_metadata(inst[1])["partitionToWriteStats"] == {}
        assert timeline.pending_commits() == [inst[2]] and coord.protocol.left_pending == []
    else:
        assert result == {"committed": True, "instants": [inst[0]]}
        assert timeline.completed_commits() == [inst[0]]
        assert timeline.pending_commits() == [inst[1], inst[2]]  # the empty one stays pending
        assert coord.protocol.left_pending == [inst[1]]
    assert coord.protocol.instants == {2: inst[2]}
    assert coord.rolled_back == []


def test_async_writer_retries_a_timed_out_request_inside_its_deadline(world):  # noqa: F811
    """PR #19960: a request lost in transport is one more poll, not a task failure (the sync
    variant fails the task at the first timeout)."""
    coord, cfg = rpc_world(world, AsyncCoordinationRpcProtocol, rpc_timeout_s=0.5, instant_wait_timeout_s=10.0)
    w, ctx = rpc_writer(world, cfg, 0, mode="async", last_checkpoint_id=1, seed=5)
    real_call, lost = ctx.env.call, {"left": 2}

    async def lossy_call(dest, method, msg=None, *, timeout=None):
        if method == "instant_time_request" and lost["left"]:  # the request is lost in transit
            lost["left"] -= 1
            await asyncio.sleep(timeout)
            raise WaitTimeout(f"writer-0 waited {timeout:.1f}s for the reply of {dest}.{method}")
        return await real_call(dest, method, msg, timeout=timeout)

    ctx.env.call = lossy_call

    async def scenario():
        await coord.start()
        return await w.instant_to_write(eager=True, has_data=True)

    instant = run(scenario())
    assert instant and w.transport_retries == 2
    assert world.hoodie_files(".commit.requested") == [f"{instant}.commit.requested"]
