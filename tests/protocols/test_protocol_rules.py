"""Rules of P4 (coordination-rpc) and P5 (control-topic), without Ray (P3: test_timeline_server_hudi6336.py).

Every test runs in the shared test environment (tests/harness.py): the simulator's event loop
on virtual time (a one-second lock hold or a ten-second timeout costs no real time, the schedule
is deterministic, a hang raises instead of blocking, a real-time guard stops a busy loop) and its
network: ``env.call(dest, method, msg)`` reaches the destination role's RPC method (listed in its
``RPC_METHODS``) with the request and the reply encoded as on Ray, after a seeded sub-millisecond
delay; a caller's timeout raises ``WaitTimeout`` while the handler keeps running (a Ray actor is
not cancelled by a caller's timeout). Every call and send is recorded by the env. The DFS (a local
directory, counted per role), the Hudi table, the message bus, the coordinator and the control
topic are the real ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from harness import Sim, TestEnv, local_dfs, now, opened, run, wait_until

from runtime.core import codec
from runtime.core.config import JobConfig
from runtime.core.dfs import Dfs, DfsError
from runtime.core.env import WaitTimeout
from runtime.core.messages import (
    BlockedWait,
    CheckpointNotice,
    CheckpointTrigger,
    SeekRequest,
    WriteMetadataEvent,
    WriteStat,
)
from runtime.hudi.table.base_files import base_file_name, file_group_id
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.merge import merge_file_group
from runtime.hudi.table.table_config import TableProps
from runtime.hudi.timeline import dfs_message_bus as bus
from runtime.kafka.topic import (
    ACK_COMMIT,
    END_COMMIT,
    START_COMMIT,
    WRITE_STATUS,
    ControlMessage,
    ControlTopic,
    FetchRequest,
    publish,
)
from runtime.protocols.base import InstantWaitTimeout
from runtime.protocols.control_topic import (
    OFFSETS_KEY,
    ControlTopicParticipant,
    ControlTopicProtocol,
    format_offsets,
    parse_offsets,
)
from runtime.protocols.coordination_rpc import (
    OK,
    PENDING,
    AsyncCoordinationRpcProtocol,
    AsyncCoordinationRpcWriter,
    CoordinationRpcProtocol,
    CoordinationRpcWriter,
    InstantTimeReply,
    InstantTimeRequest,
)
from runtime.writer.coordinator import Coordinator

TASKS = ["writer-0", "writer-1"]


class WriterCtx:
    """runtime.protocols.base.WriterContext for the P3 and P4 writer sides."""

    def __init__(
        self,
        env: TestEnv,
        config: JobConfig,
        table: HudiTable,
        *,
        task_id: int = 0,
        last_checkpoint_id: int = -1,
        current_instant: str | None = None,
    ) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.task_id = task_id
        self.last_checkpoint_id = last_checkpoint_id
        self.current_instant = current_instant
        self.blocked: BlockedWait | None = None
        self.blocked_log: list[BlockedWait | None] = []

    def set_blocked(self, wait: BlockedWait | None) -> None:
        self.blocked_log.append(wait)
        self.blocked = wait


class ParticipantCtx:
    """What ControlTopicParticipant uses of its write task."""

    def __init__(self, env: TestEnv, config: JobConfig, task_id: int = 0) -> None:
        self.env = env
        self.config = config
        self.task_id = task_id
        self.state = "running"
        self.buckets: dict[Any, Any] = {}
        self.current_instant: str | None = None
        self.discards = 0
        self.flushed: list[str] = []
        self.flush_stats: list[WriteStat] = []
        self.mails: list[tuple[str, str, Any]] = []
        self.forgets = 0

    async def forget_uncommitted_versions(self) -> int:
        self.forgets += 1
        return 0

    def discard_buffers(self) -> int:
        self.discards += 1
        rows = sum(self.buckets.values())
        self.buckets.clear()
        return rows

    async def flush_all(self, instant: str) -> list[WriteStat]:
        self.flushed.append(instant)
        self.buckets.clear()
        return list(self.flush_stats)

    def put_mail(self, action, kind: str, description: str) -> None:
        self.mails.append((kind, description, action))


# -- fixtures and small helpers ------------------------------------------------------------------


class World:
    """The shared test environment (``hub``: roles, envs and messages on virtual time) on a table
    in a local directory (the tests look at its files)."""

    def __init__(self, hub: Sim, dfs: Dfs, path: str) -> None:
        self.path = path
        self.dfs = dfs
        self.hub = hub
        self.table = HudiTable.create_or_open(dfs, self.path, TableProps("t", "key", "partition", "ts"))
        self.bus_path = bus.message_bus_path(self.path)
        self.hoodie = os.path.join(self.path, ".hoodie")

    def view(self, role: str) -> HudiTable:
        """The table seen through ``role``'s DFS (its operations count for that role)."""
        return self.table.with_dfs(self.dfs.for_role(role))

    def ops(self, role: str) -> dict[str, int]:
        return dict(self.dfs.counters.snapshot().get(role, {}))

    def hoodie_files(self, suffix: str) -> list[str]:
        return sorted(n for n in os.listdir(self.hoodie) if n.endswith(suffix))

    def bus_files(self) -> list[str]:
        return sorted(os.listdir(self.bus_path)) if os.path.isdir(self.bus_path) else []


@pytest.fixture
def world(tmp_path) -> Iterator[World]:
    dfs, path = local_dfs(tmp_path / "t")
    with opened(dfs) as hub:
        yield World(hub, dfs, path)


def config(**kw: Any) -> JobConfig:
    base = dict(
        wait_tick_s=0.1,
        rpc_timeout_s=2.0,
        instant_wait_timeout_s=5.0,
        checkpoint_timeout_s=10.0,
        timeline_refresh_requests=100,
        write_status_timeout_s=1.0,
    )
    base.update(kw)
    return JobConfig(**base)


def write_file(
    table: HudiTable, instant: str, *, partition: str = "p0", bucket: int = 0, task: int = 0, keys: range = range(3)
) -> WriteStat:
    """A real base file of ``instant`` and its write stat (what a flush reports)."""
    records = pa.table(
        {"key": [f"k{k}" for k in keys], "partition": [partition] * len(keys), "ts": [1] * len(keys), "v": list(keys)}
    )
    fid = file_group_id(table.props.table_name, partition, bucket)
    name = base_file_name(fid, f"{task}-0-0", instant)
    merged = merge_file_group(
        None,
        records,
        instant=instant,
        partition=partition,
        file_name=name,
        key="key",
        precombine="ts",
        partition_id=task,
    )
    table.ensure_partition(partition, instant)
    size = table.write_base_file(f"{partition}/{name}", merged.table)
    return WriteStat(
        fid,
        f"{partition}/{name}",
        partition,
        "null",
        merged.table.num_rows,
        merged.inserts,
        0,
        size,
        size,
        merged.written,
    )


I_OLD, I_A, I_B, I_C = "20240101000000001", "20240101000000002", "20240101000000003", "20240101000000004"


# == P4 coordination-rpc =========================================================================


def rpc_world(world: World, protocol=CoordinationRpcProtocol, **cfg_kw: Any) -> tuple[Coordinator, JobConfig]:
    cfg = config(**cfg_kw)
    coord = Coordinator(world.hub.env("coordinator"), cfg, world.view("coordinator"), protocol, TASKS)
    world.hub.register("coordinator", coord)
    return coord, cfg


def rpc_writer(
    world: World, cfg: JobConfig, task_id: int = 0, *, mode: str = "sync", last_checkpoint_id: int = -1, seed: int = 0
):
    env = world.hub.env(f"writer-{task_id}", seed=seed)
    ctx = WriterCtx(env, cfg, world.view(f"writer-{task_id}"), task_id=task_id, last_checkpoint_id=last_checkpoint_id)
    cls = CoordinationRpcWriter if mode == "sync" else AsyncCoordinationRpcWriter
    return cls(ctx), ctx


async def hold_table_lock(coord: Coordinator, seconds: float) -> asyncio.Task:
    """A cleaning action holding the table lock (#19902); returns once the lock is held."""
    held = asyncio.Event()

    async def holder():
        async with coord.table_lock:
            held.set()
            await asyncio.sleep(seconds)

    task = asyncio.ensure_future(holder())
    await held.wait()
    return task


@pytest.mark.parametrize("protocol", [CoordinationRpcProtocol, AsyncCoordinationRpcProtocol])
def test_p4_one_checkpoint_id_one_instant_even_for_concurrent_requests(world, protocol):
    coord, cfg = rpc_world(world, protocol)
    mode = "sync" if protocol is CoordinationRpcProtocol else "async"
    w0, c0 = rpc_writer(world, cfg, 0, mode=mode, last_checkpoint_id=1)
    w1, c1 = rpc_writer(world, cfg, 1, mode=mode, last_checkpoint_id=1)

    async def scenario():
        await coord.start()
        lock = await hold_table_lock(coord, 0.3)  # both requests arrive while it is being created
        got = await asyncio.gather(
            w0.instant_to_write(eager=False, has_data=True), w1.instant_to_write(eager=False, has_data=False)
        )
        await lock
        return got

    i0, i1 = run(scenario())
    assert i0 == i1
    assert world.hoodie_files(".commit.requested") == [f"{i0}.commit.requested"]
    assert world.hoodie_files(".inflight") == [f"{i0}.inflight"]
    assert coord.protocol.created == 1 and coord.protocol.instants == {-1: i0}
    for ctx in (c0, c1):
        reqs = [c[2] for c in ctx.env.calls if c[1] == "instant_time_request"]
        # barrier 1 asks for the task's checkpointId, still -1 (AbstractStreamWriteFunction)
        assert reqs and all(r.checkpoint_id == -1 for r in reqs)


def test_p4_different_checkpoints_get_different_increasing_instants(world):
    coord, cfg = rpc_world(world)
    asker = world.hub.env("writer-0")

    async def scenario():
        await coord.start()
        replies = []
        for key in (0, 1, 2):
            replies.append(await asker.call("coordinator", "instant_time_request", InstantTimeRequest(0, key)))
        again = await asker.call("coordinator", "instant_time_request", InstantTimeRequest(1, 1))
        return replies, again

    replies, again = run(scenario())
    assert all(isinstance(r, InstantTimeReply) and r.status == OK for r in replies)
    instants = [r.instant for r in replies]
    assert [r.checkpoint_id for r in replies] == [0, 1, 2]
    assert instants == sorted(instants) and len(set(instants)) == 3
    assert again.instant == instants[1]
    assert world.hoodie_files(".commit.requested") == [f"{i}.commit.requested" for i in instants]


def test_p4_async_replies_pending_then_ok_with_the_same_instant(world):
    coord, _ = rpc_world(world, AsyncCoordinationRpcProtocol)
    asker = world.hub.env("writer-0")

    async def scenario():
        await coord.start()
        first = await asker.call("coordinator", "instant_time_request", InstantTimeRequest(0, 4))
        assert (first.status, first.instant) == (PENDING, "")
        second = await asker.call("coordinator", "instant_time_request", InstantTimeRequest(1, 4))
        await wait_until(lambda: 4 in coord.protocol.instants, what="the background creation")
        third = await asker.call("coordinator", "instant_time_request", InstantTimeRequest(1, 4))
        fourth = await asker.call("coordinator", "instant_time_request", InstantTimeRequest(0, 4))
        return second, third, fourth

    second, third, fourth = run(scenario())
    assert second.status in (PENDING, OK)
    assert third.status == OK and third.instant and fourth == third
    assert coord.protocol.created == 1
    assert world.hoodie_files(".commit.requested") == [f"{third.instant}.commit.requested"]


def test_p4_checkpoint_complete_commits_the_backlog_in_ascending_order(world):
    commit_writes: list[str] = []

    def hook(role, op, path):
        if op == "write" and path.endswith(".commit"):
            commit_writes.append(os.path.basename(path)[: -len(".commit")])

    world.dfs.fault_hook = hook  # roles derived from now on inherit it
    coord, cfg = rpc_world(world)
    data = world.view("writer.data")
    drv = world.hub.env("job-manager")
    asker = world.hub.env("writer-0")

    async def scenario():
        await coord.start()
        instants = {}
        for key in (0, 1, 2):
            instants[key] = (
                await asker.call("coordinator", "instant_time_request", InstantTimeRequest(0, key))
            ).instant
        for key, inst in instants.items():
            for t in range(2):
                stat = write_file(data, inst, partition=f"p{t}", task=t, keys=range(key * 10, key * 10 + 3))
                await drv.call(
                    "coordinator", "write_metadata", WriteMetadataEvent(t, key + 1, inst, [stat], last_batch=True)
                )
        await drv.call("coordinator", "notify_checkpoint_aborted", CheckpointNotice(1))
        assert coord.table.timeline().completed_commits() == [], "an abort commits nothing"
        assert commit_writes == []
        result = await drv.call("coordinator", "notify_checkpoint_complete", CheckpointNotice(2))
        return instants, result

    instants, result = run(scenario())
    assert result == {"committed": True, "instants": [instants[0], instants[1]]}
    assert commit_writes == [instants[0], instants[1]]  # ascending: key 0, then key 1
    timeline = world.view("check").timeline()
    assert timeline.completed_commits() == [instants[0], instants[1]]
    assert timeline.pending_commits() == [instants[2]]  # key 2 >= 2 waits for notify(3)
    assert coord.protocol.instants == {2: instants[2]}
    assert [c.instant for c in coord.commits] == [instants[0], instants[1]]
    assert all(c.rows == 6 and c.files == 2 for c in coord.commits)
    meta = world.view("check").read_commit_metadata(instants[1])
    assert meta["extraMetadata"]["checkpoint.id"] == "2"
    assert sorted(meta["partitionToWriteStats"]) == ["p0", "p1"]


def test_p4_sync_request_under_a_long_table_lock_fails_the_task_19902(world):
    coord, cfg = rpc_world(world, rpc_timeout_s=1.0)
    w, ctx = rpc_writer(world, cfg, 0, last_checkpoint_id=1)
    late, _ = rpc_writer(world, cfg, 1, last_checkpoint_id=1)

    async def scenario():
        await coord.start()
        lock = await hold_table_lock(coord, 3.0)
        t0 = now()
        with pytest.raises(InstantWaitTimeout) as err:
            await w.instant_to_write(eager=False, has_data=True)
        failed_after = now() - t0
        assert world.hoodie_files(".commit.requested") == []  # still waiting for the lock
        await lock
        retry = await late.instant_to_write(eager=False, has_data=True)
        return err.value, failed_after, retry

    err, failed_after, retry = run(scenario())
    assert "#19902" in str(err) and "InstantTimeRequest(ckp=-1)" in str(err)
    assert isinstance(err.__cause__, WaitTimeout)
    assert failed_after == pytest.approx(1.0, abs=0.01)  # the RPC timeout, not the lock hold
    assert ctx.blocked_log[0].what == "instant request" and ctx.blocked_log[-1] is None
    # the request's creation went on once the lock was free, once
    assert coord.protocol.created == 1
    assert world.hoodie_files(".commit.requested") == [f"{retry}.commit.requested"]


def test_p4_async_request_under_the_same_lock_polls_with_backoff_and_gets_the_instant(world):
    coord, cfg = rpc_world(world, AsyncCoordinationRpcProtocol, rpc_timeout_s=1.0, instant_wait_timeout_s=30.0)
    w, ctx = rpc_writer(world, cfg, 0, mode="async", last_checkpoint_id=1, seed=7)
    hold = 4.0

    async def scenario():
        await coord.start()
        lock = await hold_table_lock(coord, hold)
        t0 = now()
        instant = await w.instant_to_write(eager=False, has_data=True)
        took = now() - t0
        await lock
        return instant, took

    instant, took = run(scenario())
    assert world.hoodie_files(".commit.requested") == [f"{instant}.commit.requested"]
    assert hold <= took <= hold + 1.5  # answered at the first poll after the lock was freed
    sleeps = ctx.env.sleeps
    assert 0.025 <= sleeps[0] <= 0.075  # starts near 50 ms
    for i, s in enumerate(sleeps):
        base = min(0.05 * 2**i, 1.0)  # doubling, capped at 1 s
        assert 0.5 * base - 1e-9 <= s <= 1.5 * base + 1e-9, (i, s, sleeps)
    assert max(sleeps) <= 1.5 and len(sleeps) >= 6  # reached the cap
    assert w.pending_replies == len(sleeps) and w.requests == len(sleeps) + 1
    assert coord.protocol.created == 1


def test_p4_async_raises_instant_wait_timeout_when_the_deadline_passes_while_pending(world):
    coord, cfg = rpc_world(world, AsyncCoordinationRpcProtocol, instant_wait_timeout_s=2.0)
    w, ctx = rpc_writer(world, cfg, 0, mode="async", last_checkpoint_id=1, seed=3)

    async def scenario():
        await coord.start()
        await hold_table_lock(coord, 100.0)
        t0 = now()
        with pytest.raises(InstantWaitTimeout) as err:
            await w.instant_to_write(eager=False, has_data=True)
        return err.value, now() - t0

    err, took = run(scenario())
    assert "PENDING" in str(err) and "checkpoint -1" in str(err)
    assert took <= 2.0 + 0.5  # never sleeps more than half a capped backoff past the deadline
    assert w.pending_replies >= 4 and -1 not in w.instants


class _HalfJitter:
    """An rng whose jitter factor is exactly 1 (0.5 + 0.5)."""

    def random(self) -> float:
        return 0.5


@pytest.fixture
def instant_world(tmp_path) -> Iterator[World]:
    """A world whose messages take no time: the poll timing below is the backoff's alone."""
    from runtime.sim.network import Delay

    dfs, path = local_dfs(tmp_path / "t")
    with opened(dfs, delay=Delay.fixed(0.0)) as hub:
        yield World(hub, dfs, path)


def test_p4_async_writer_polls_until_the_deadline_not_before(instant_world):
    world = instant_world
    coord, cfg = rpc_world(world, AsyncCoordinationRpcProtocol, instant_wait_timeout_s=1.0)
    w, ctx = rpc_writer(world, cfg, 0, mode="async", last_checkpoint_id=1)
    ctx.env.rng = _HalfJitter()  # sleeps exactly 0.05, 0.1, 0.2, 0.4 ...

    async def scenario():
        await coord.start()
        await hold_table_lock(coord, 0.8)  # released before the 1.0 s deadline
        return await w.instant_to_write(eager=False, has_data=True)

    instant = run(scenario())
    assert instant and world.hoodie_files(".commit.requested") == [f"{instant}.commit.requested"]


def test_p4_async_a_failed_instant_creation_is_retried_or_reported(world):
    faults = {"left": 1}

    def hook(role, op, path):
        if role == "coordinator" and op == "create" and path.endswith(".commit.requested") and faults["left"]:
            faults["left"] -= 1
            raise DfsError(f"create({path}) failed: injected transient fault")

    world.dfs.fault_hook = hook
    coord, cfg = rpc_world(world, AsyncCoordinationRpcProtocol, instant_wait_timeout_s=3.0)
    w, _ = rpc_writer(world, cfg, 0, mode="async", last_checkpoint_id=1)

    async def scenario():
        await coord.start()
        try:
            return await w.instant_to_write(eager=False, has_data=True)
        except Exception as exc:  # noqa: BLE001 - either outcome is judged below
            return exc

    background: list[dict[str, Any]] = []
    outcome = run(scenario(), background_errors=background)
    for task in list(coord.protocol.creating.values()):
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the loop is gone, nothing left to log it
    assert faults["left"] == 0
    if isinstance(outcome, BaseException):
        assert "injected transient fault" in str(outcome), f"the cause was lost: {outcome!r}"
    else:
        assert world.hoodie_files(".commit.requested") == [f"{outcome}.commit.requested"]


def test_p4_writer_asks_at_every_flush_with_the_last_checkpoint_id(world):
    """Hudi 1.1 keeps no cache: flushBucket and flushRemaining each call instantToWrite ->
    requestInstantTime(checkpointId). (This test asserted a per-key cache before.)"""
    coord, cfg = rpc_world(world)
    w, ctx = rpc_writer(world, cfg, 0, last_checkpoint_id=-1)

    def requests():
        return [c[2].checkpoint_id for c in ctx.env.calls if c[1] == "instant_time_request"]

    async def scenario():
        await coord.start()
        a = await w.instant_to_write(eager=True, has_data=True)  # eager before barrier 1: key -1
        b = await w.instant_to_write(eager=True, has_data=True)  # key -1 again, asked again
        ctx.last_checkpoint_id = 1
        w.on_snapshot(1)
        c = await w.instant_to_write(eager=False, has_data=True)  # barrier 1: still key -1
        assert requests() == [-1, -1, -1]
        d = await w.instant_to_write(eager=True, has_data=True)  # after barrier 1: key 1
        return a, b, c, d

    a, b, c, d = run(scenario())
    assert a == b == c and d > a
    assert requests() == [-1, -1, -1, 1]
    assert w.instants == {-1: a, 1: d} and coord.protocol.created == 2


# == P5 control-topic ============================================================================


def test_p5_offsets_format_and_parse_roundtrip():
    offsets = {10: 3, 0: 5, 1: 0, 2: 123456789}
    text = format_offsets(offsets)
    assert text == "0=5,1=0,2=123456789,10=3"  # by partition, numerically
    assert parse_offsets(text) == offsets
    assert format_offsets({}) == "" and parse_offsets("") == {} and parse_offsets(None) == {}
    assert parse_offsets(format_offsets({7: 0})) == {7: 0}


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"key": [f"k{i}" for i in range(start, start + n)], "_offset": list(range(start, start + n))})


def participant(world: World, task_id: int = 0, **cfg_kw: Any) -> tuple[ControlTopicParticipant, ParticipantCtx]:
    ctx = ParticipantCtx(world.hub.env(f"writer-{task_id}"), config(**cfg_kw), task_id)
    world.hub.roles.setdefault(f"source-{task_id}", SourceStub())
    return ControlTopicParticipant(ctx), ctx


def seeks(ctx: ParticipantCtx) -> list[tuple[str, Any]]:
    return [(s[0], s[2]) for s in ctx.env.sent if s[1] == "seek"]


class SourceStub:
    RPC_METHODS = ("seek",)

    def __init__(self) -> None:
        self.seeks: list[int] = []

    def seek(self, req: SeekRequest) -> None:
        self.seeks.append(req.offset)


def test_p5_participant_offset_rules(world):
    p, ctx = participant(world, task_id=1)
    source = world.hub.roles["source-1"]
    run(_offset_rules(world, p, ctx, source))


async def _offset_rules(world, p, ctx, source):
    out = p.accept(rows(0, 10), 0)
    assert out.num_rows == 10 and p.expected == 10
    # a gap: dropped, and the source seeks back to the expected offset
    assert p.accept(rows(15, 5), 15) is None
    assert p.expected == 10
    assert seeks(ctx) == [("source-1", SeekRequest(10))]
    assert p.counts["gap_batches"] == 1 and p.counts["seek_back"] == 1
    # a replay overlapping what was taken: only the new rows
    out = p.accept(rows(5, 10), 5)
    assert out.column("_offset").to_pylist() == list(range(10, 15)) and p.expected == 15
    assert p.counts["skipped_rows"] == 5
    # entirely below: nothing
    assert p.accept(rows(3, 7), 3) is None and p.expected == 15
    assert p.counts["skipped_rows"] == 12
    # unknown positions pass through and do not move the offset
    assert p.accept(rows(0, 4), -1).num_rows == 4 and p.expected == 15
    assert len(seeks(ctx)) == 1  # only the gap asked for a seek
    await world.hub.drain()
    assert source.seeks == [10]


def _msg(kind: str, commit_time: str, **kw: Any) -> ControlMessage:
    return codec.roundtrip(ControlMessage(kind, commit_time, "coordinator", **kw))


async def topic_messages(env: TestEnv) -> list[ControlMessage]:
    reply = await env.call("control-topic", "fetch", FetchRequest("test-reader", 0, 10_000))
    return [r.message for r in reply.records]


def test_p5_start_commit_seeks_to_the_coordinators_offset_and_opens_the_commit(world):
    p, ctx = participant(world)

    async def scenario():
        assert not p.may_flush_eagerly()  # outside a commit: keep buffering
        p.accept(rows(0, 8), 0)
        ctx.buckets = {("p0", 0): 8}
        # the coordinator committed only up to 3 (a commit was abandoned): consume again from there
        await p.handle(_msg(START_COMMIT, I_A, offsets={0: 3, 1: 40}))
        assert ctx.discards == 1 and ctx.buckets == {}
        assert p.expected == p.write_from == 3
        assert seeks(ctx) == [("source-0", SeekRequest(3))]
        assert p.commit_time == ctx.current_instant == I_A
        assert p.may_flush_eagerly()
        assert await p.instant_to_write(eager=True, has_data=True) == I_A
        # the same START again (a duplicate) changes nothing
        await p.handle(_msg(START_COMMIT, I_A, offsets={0: 0}))
        assert ctx.discards == 1 and p.expected == 3 and len(seeks(ctx)) == 1

    run(scenario())


def test_p5_start_commit_at_the_participants_own_offset_keeps_the_buffer(world):
    p, ctx = participant(world)

    async def scenario():
        p.accept(rows(0, 5), 0)
        ctx.buckets = {("p0", 0): 5}
        await p.handle(_msg(START_COMMIT, I_A, offsets={0: 0}))  # == write_from
        await p.handle(_msg(START_COMMIT, I_B, offsets={}))  # no offset for this partition
        assert ctx.discards == 0 and ctx.buckets == {("p0", 0): 5} and p.expected == 5
        assert seeks(ctx) == []

    run(scenario())


def test_p5_end_commit_flushes_and_reports_write_status_then_ack_advances(world):
    topic = world.hub.register("control-topic", ControlTopic(world.hub.env("control-topic")))
    p, ctx = participant(world, task_id=1)
    data = world.view("writer.data")
    eager = write_file(data, I_A, bucket=0, task=1, keys=range(0, 3))
    stale_version = write_file(data, I_A, bucket=1, task=1, keys=range(3, 5))
    final = dataclasses.replace(stale_version, num_writes=4)
    ctx.flush_stats = [final]

    async def scenario():
        # an END while in no commit (its START was missed): stale, no WRITE_STATUS (an END of
        # another commit *during* one ends it: see test_control_topic_connect.py)
        await p.handle(_msg(END_COMMIT, I_B))
        assert p.counts["stale"] == 1 and ctx.flushed == [] and topic.high_watermark == 0
        await p.handle(_msg(START_COMMIT, I_A, offsets={1: 0}))
        assert p.accept(rows(0, 12), 0).num_rows == 12
        kept = await p.on_write_event(WriteMetadataEvent(1, 1, I_A, [eager]))
        kept2 = await p.on_write_event(WriteMetadataEvent(1, 1, I_A, [stale_version]))
        assert kept and kept2  # reported with WRITE_STATUS, never as an operator event
        await p.handle(_msg(END_COMMIT, I_A))
        assert ctx.flushed == [I_A]
        (status,) = await topic_messages(ctx.env)
        assert (status.kind, status.commit_time, status.partition, status.sender) == (WRITE_STATUS, I_A, 1, "writer-1")
        assert status.last_offset == 11
        # per file group the latest version: the END flush supersedes the eager one
        assert {s.file_id: s for s in status.write_stats} == {eager.file_id: eager, final.file_id: final}
        assert p.commit_time is None and not p.may_flush_eagerly()
        assert p.write_from == p.expected == 12
        assert p.committed_offset == 0
        await p.handle(_msg(ACK_COMMIT, I_B))  # not ours
        assert p.committed_offset == 0 and p.counts["stale"] == 2
        await p.handle(_msg(ACK_COMMIT, I_A))
        assert p.committed_offset == 12 and p.counts["ack"] == 1

    run(scenario())


def test_p5_participant_agent_hands_control_messages_to_the_mailbox(world):
    world.hub.register("control-topic", ControlTopic(world.hub.env("control-topic")))
    p, ctx = participant(world)
    coord_env = world.hub.env("coordinator")

    async def scenario():
        # what was published before the participant opened belongs to commits before it (a
        # restarted participant resumes from the topic's end): skipped
        await publish(coord_env, ControlMessage(START_COMMIT, "stale", "coordinator", offsets={0: 0}))
        await p.open()
        await publish(coord_env, ControlMessage(START_COMMIT, I_A, "coordinator", offsets={0: 0}))
        await publish(coord_env, ControlMessage(WRITE_STATUS, I_A, "writer-1", partition=1))
        await publish(coord_env, ControlMessage(END_COMMIT, I_A, "coordinator"))
        await wait_until(lambda: len(ctx.mails) >= 2, what="two mails")
        await asyncio.sleep(1.0)
        ctx.state = "finished"
        assert [m[0] for m in ctx.mails] == ["control:START_COMMIT", "control:END_COMMIT"]
        assert p.commit_time is None  # only the mailbox thread runs them
        await ctx.mails[0][2]()
        assert p.commit_time == I_A

    run(scenario())


class CoordinatorRig:
    def __init__(self, world: World, **cfg_kw: Any) -> None:
        self.world = world
        # these tests end each commit with a checkpoint trigger (the "checkpoint" interval); the
        # wall-clock interval, Hudi's, is tested in test_control_topic_connect.py
        self.cfg = config(**{"control_topic_interval": "checkpoint", **cfg_kw})
        self.topic = world.hub.register("control-topic", ControlTopic(world.hub.env("control-topic")))
        self.coord = self.make_coordinator("coordinator")
        self.jm = world.hub.env("job-manager")
        self.writers = [world.hub.env(n) for n in TASKS]
        self.data = world.view("writer.data")

    def make_coordinator(self, role: str) -> Coordinator:
        coord = Coordinator(self.world.hub.env(role), self.cfg, self.world.view(role), ControlTopicProtocol, TASKS)
        self.world.hub.register("coordinator", coord)
        return coord

    async def bootstrap(self) -> None:
        for t in range(len(TASKS)):
            await self.jm.call("coordinator", "write_metadata", WriteMetadataEvent(t, -1, "", bootstrap=True))

    async def messages(self, kind: str | None = None) -> list[ControlMessage]:
        msgs = await topic_messages(self.jm)
        return [m for m in msgs if kind is None or m.kind == kind]

    async def wait_for(self, kind: str, n: int) -> list[ControlMessage]:
        async def enough():
            return len(await self.messages(kind)) >= n

        await wait_until(enough, timeout=10.0, what=f"{n} x {kind}")
        return await self.messages(kind)

    async def status(self, task: int, instant: str, last_offset: int, stats: list[WriteStat]) -> None:
        await publish(
            self.writers[task],
            ControlMessage(
                WRITE_STATUS, instant, TASKS[task], partition=task, write_stats=stats, last_offset=last_offset
            ),
        )


def test_p5_coordinator_full_cycle_commits_with_offsets_and_acks(world):
    rig = CoordinatorRig(world)
    n0, n1 = 12, 7

    async def scenario():
        await rig.coord.start()
        assert rig.coord.protocol.committed_offsets == {}
        await rig.bootstrap()
        (start,) = await rig.wait_for(START_COMMIT, 1)
        inst = start.commit_time
        assert start.offsets == {} and start.sender == "coordinator"
        assert world.view("check").timeline().pending_commits() == [inst]
        await asyncio.sleep(0.5)
        assert await rig.messages(END_COMMIT) == []  # END only after the commit interval
        await rig.jm.call("coordinator", "checkpoint_coordinator", CheckpointTrigger(1))
        (end,) = await rig.wait_for(END_COMMIT, 1)
        assert end.commit_time == inst
        s0 = write_file(rig.data, inst, partition="p0", task=0, keys=range(0, 4))
        s1 = write_file(rig.data, inst, partition="p1", task=1, keys=range(4, 6))
        await rig.status(0, inst, n0 - 1, [s0])
        assert await rig.messages(ACK_COMMIT) == []  # one partition is still missing
        await rig.status(1, inst, n1 - 1, [s1])
        (ack,) = await rig.wait_for(ACK_COMMIT, 1)
        starts = await rig.wait_for(START_COMMIT, 2)
        return inst, ack, starts

    inst, ack, starts = run(scenario())
    assert ack.commit_time == inst
    check = world.view("check")
    assert check.timeline().completed_commits() == [inst]
    meta = check.read_commit_metadata(inst)
    assert meta["extraMetadata"][OFFSETS_KEY] == f"0={n0},1={n1}"
    assert meta["extraMetadata"]["checkpoint.id"] == "1"
    assert sorted(meta["partitionToWriteStats"]) == ["p0", "p1"]
    assert rig.coord.protocol.committed_offsets == {0: n0, 1: n1}
    assert rig.coord.protocol.commits == 1 and rig.coord.protocol.error is None
    nxt = starts[1]
    assert nxt.commit_time > inst and nxt.offsets == {0: n0, 1: n1}
    order = [m.kind for m in run_messages(world)]
    assert order[:6] == [START_COMMIT, END_COMMIT, WRITE_STATUS, WRITE_STATUS, ACK_COMMIT, START_COMMIT]


def run_messages(world: World) -> list[ControlMessage]:
    return [r.message for r in world.hub.roles["control-topic"]._log]


def test_p5_stale_status_is_dropped_and_a_missing_status_abandons_the_commit(world):
    rig = CoordinatorRig(world, write_status_timeout_s=1.0)

    async def scenario():
        await rig.coord.start()
        await rig.bootstrap()
        (start1,) = await rig.wait_for(START_COMMIT, 1)
        i1 = start1.commit_time
        await rig.jm.call("coordinator", "checkpoint_coordinator", CheckpointTrigger(1))
        await rig.wait_for(END_COMMIT, 1)
        await rig.status(0, i1, 9, [write_file(rig.data, i1, partition="p0", task=0)])
        await rig.status(1, i1, 4, [write_file(rig.data, i1, partition="p1", task=1)])
        await rig.wait_for(ACK_COMMIT, 1)
        start2 = (await rig.wait_for(START_COMMIT, 2))[1]
        i2 = start2.commit_time
        assert start2.offsets == {0: 10, 1: 5}
        await rig.jm.call("coordinator", "checkpoint_coordinator", CheckpointTrigger(2))
        await rig.wait_for(END_COMMIT, 2)
        t_end = now()
        # partition 1 repeats its status of the previous commit (stale); partition 0 reports i2
        await rig.status(1, i1, 4, [write_file(rig.data, i1, partition="p1", task=1)])
        await rig.status(0, i2, 30, [write_file(rig.data, i2, partition="p0", task=0, keys=range(10, 20))])
        await wait_until(lambda: rig.coord.protocol.abandoned, timeout=5.0, what="the abandon")
        abandoned_after = now() - t_end
        start3 = (await rig.wait_for(START_COMMIT, 3))[2]
        return i1, i2, start3, abandoned_after

    i1, i2, start3, abandoned_after = run(scenario())
    proto = rig.coord.protocol
    assert proto.stale_dropped == 1
    assert proto.abandoned == [i2]
    assert 1.0 <= abandoned_after <= 1.0 + 0.6  # the write-status timeout
    assert not os.path.exists(os.path.join(world.hoodie, f"{i2}.commit"))
    assert not os.path.exists(os.path.join(world.hoodie, f"{i2}.commit.requested"))
    assert not os.path.exists(os.path.join(world.hoodie, f"{i2}.inflight"))
    timeline = world.view("check").timeline()
    assert timeline.completed_commits() == [i1] and i2 not in timeline.pending_commits()
    assert [m.commit_time for m in run_messages(world) if m.kind == ACK_COMMIT] == [i1]
    # the next commit starts from the last committed offsets: the abandoned rows are consumed again
    assert start3.commit_time > i2 and start3.offsets == {0: 10, 1: 5}
    assert proto.committed_offsets == {0: 10, 1: 5}


def test_p5_restarted_coordinator_recovers_offsets_from_the_last_commit(world):
    rig = CoordinatorRig(world)

    async def scenario():
        await rig.coord.start()
        assert rig.coord.protocol._recover_offsets() == {}  # empty table
        await rig.bootstrap()
        (start,) = await rig.wait_for(START_COMMIT, 1)
        inst = start.commit_time
        await rig.jm.call("coordinator", "checkpoint_coordinator", CheckpointTrigger(1))
        await rig.wait_for(END_COMMIT, 1)
        await rig.status(0, inst, 99, [write_file(rig.data, inst, partition="p0", task=0)])
        await rig.status(1, inst, 41, [write_file(rig.data, inst, partition="p1", task=1)])
        await rig.wait_for(ACK_COMMIT, 1)
        await rig.wait_for(START_COMMIT, 2)
        rig.coord.protocol._loop.cancel()  # the coordinator dies
        starts_before = len(await rig.messages(START_COMMIT))
        restarted = rig.make_coordinator("coordinator-2")
        await restarted.start()
        recovered = dict(restarted.protocol.committed_offsets)
        direct = restarted.protocol._recover_offsets()
        rig.coord = restarted
        await rig.bootstrap()
        first = (await rig.wait_for(START_COMMIT, starts_before + 1))[-1]
        restarted.protocol._loop.cancel()
        return recovered, direct, first

    recovered, direct, first = run(scenario())
    assert recovered == direct == {0: 100, 1: 42}
    assert first.offsets == {0: 100, 1: 42}
