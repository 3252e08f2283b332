"""Rules of P3 (timeline-server), P4 (coordination-rpc) and P5 (control-topic), without Ray.

Every test runs on a VIRTUAL clock: an asyncio event loop whose ``time()`` only moves when every
coroutine waits on a timer, and then jumps straight to the next one (``asyncio.sleep``,
``asyncio.wait_for`` and ``env.wait_for`` all use it). A one-second lock hold or a ten-second
timeout costs no real time, and the schedule is deterministic. A loop with nothing left to run
and no timer pending (a hang) raises instead of blocking, and a wall-clock guard stops a busy loop.

Roles talk through a small in-process hub: ``env.call(dest, method, msg)`` runs the destination
role's RPC method (it must be listed in its ``RPC_METHODS``) after a codec roundtrip of the request
and of the reply (as the Ray host does for registered messages), with the caller's timeout raising
``WaitTimeout`` while the handler keeps running (a Ray actor is not cancelled by a caller's
timeout). ``send`` delivers one-way in a task. Every call and send is recorded. ``env.io`` runs the
function inline after one yield. The DFS (a local directory, counted per role), the Hudi table,
the message bus, the coordinator and the control topic are the real ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import os
import random
import selectors
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pyarrow as pa
import pytest

from runtime.core import codec
from runtime.core.config import JobConfig
from runtime.core.dfs import DfsError, open_dfs
from runtime.core.env import BlockedWait, Env, WaitTimeout
from runtime.core.messages import CheckpointNotice, CheckpointTrigger, WriteMetadataEvent, WriteStat
from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer
from runtime.flink.source import SeekRequest
from runtime.hudi import dfs_message_bus as bus
from runtime.hudi.table import HudiTable, TableProps, base_file_name, file_group_id, merge_file_group
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
from runtime.protocols.timeline_server import SERVER, TimelineServer, TimelineServerProtocol, TimelineServerWriter
from runtime.writer.coordinator import Coordinator

TASKS = ["writer-0", "writer-1"]
WALL_GUARD_S = 20.0  # real seconds one test may spend before the loop gives up


# == a virtual clock ==============================================================================


class _VirtualSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Never blocks: a wait for the next timer jumps the loop's clock to it instead."""

    loop: VirtualLoop

    def select(self, timeout: float | None = None):  # type: ignore[override]
        loop = self.loop
        if time.monotonic() - loop.wall_start > WALL_GUARD_S:
            raise RuntimeError(
                f"the test ran {WALL_GUARD_S}s of real time (virtual t={loop.vt:.3f}s): "
                "a busy loop that never waits on a timer?"
            )
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise RuntimeError(
                f"hang at virtual t={loop.vt:.3f}s: every coroutine waits for "
                "something that no timer and no other coroutine will ever provide"
            )
        loop.vt += timeout
        return events


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.vt = 0.0
        self.wall_start = time.monotonic()
        selector = _VirtualSelector()
        selector.loop = self
        super().__init__(selector)

    def time(self) -> float:
        return self.vt


def run(
    coro: Coroutine[Any, Any, Any], timeout: float = 600.0, *, background_errors: list[dict[str, Any]] | None = None
) -> Any:
    """``asyncio.run`` on a virtual-time loop, bounded by ``timeout`` VIRTUAL seconds.

    A background task that died with an exception nobody retrieved fails the test, unless the
    caller collects such errors in ``background_errors``. (Recording them instead of letting
    asyncio log them also keeps the log's traceback formatting out of garbage collection.)
    """
    loop = VirtualLoop()
    errors: list[dict[str, Any]] = [] if background_errors is None else background_errors
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        asyncio.set_event_loop(loop)
        result = loop.run_until_complete(asyncio.wait_for(coro, timeout))
        gc.collect()  # finalize finished tasks while the handler is installed
        failures = [e["exception"] for e in errors if "exception" in e]
        if background_errors is None and failures:
            raise AssertionError(f"background tasks failed: {failures!r}")
        return result
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def now() -> float:
    return asyncio.get_running_loop().time()


async def wait_until(
    pred: Callable[[], Any], timeout: float = 10.0, step: float = 0.01, what: str = "the condition"
) -> None:
    deadline = now() + timeout
    while True:
        result = pred()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if now() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s (virtual)")
        await asyncio.sleep(step)


# == an in-process host ==========================================================================


def _wire(obj: Any) -> Any:
    """What crosses a host boundary: registered messages go through the codec (as on Ray)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and type(obj).__name__ in codec._REGISTRY:
        return codec.roundtrip(obj)
    return obj


class Hub:
    """Roles by name, and one FakeEnv per role, all sharing one DFS (and its counters)."""

    def __init__(self, dfs) -> None:
        self.dfs = dfs
        self.roles: dict[str, Any] = {}
        self.envs: dict[str, FakeEnv] = {}
        self.down: dict[str, BaseException] = {}  # dest -> what calling it raises
        self.deliveries: list[asyncio.Task] = []
        self.handlers: list[asyncio.Task] = []
        self.send_errors: list[str] = []

    def env(self, role: str, *, seed: int = 0) -> FakeEnv:
        env = FakeEnv(self, role, self.dfs.for_role(role), seed=seed)
        self.envs[role] = env
        return env

    def register(self, name: str, obj: Any) -> Any:
        self.roles[name] = obj
        return obj

    async def dispatch(self, sender: str, dest: str, method: str, msg: Any, timeout: float | None) -> Any:
        if dest in self.down:
            raise self.down[dest]
        role = self.roles[dest]
        assert method in role.RPC_METHODS, f"{method} is not an RPC method of {dest}"

        async def handle() -> Any:
            result = getattr(role, method)(_wire(msg))
            if inspect.isawaitable(result):
                result = await result
            return _wire(result)

        task = asyncio.ensure_future(handle())
        self.handlers.append(task)  # a handler outliving its caller's timeout stays referenced
        if timeout is None:
            return await task
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError as exc:
            raise WaitTimeout(f"{sender} waited {timeout:.1f}s for the reply of {dest}.{method}") from exc

    def post(self, sender: str, dest: str, method: str, msg: Any) -> None:
        async def deliver() -> None:
            try:
                await self.dispatch(sender, dest, method, msg, None)
            except Exception as exc:  # noqa: BLE001 - recorded, as a host records a one-way message's failure
                self.send_errors.append(f"{dest}.{method}: {type(exc).__name__}: {exc}")

        self.deliveries.append(asyncio.ensure_future(deliver()))

    async def drain(self) -> None:
        """Waits for every one-way message sent so far to be handled."""
        while any(not t.done() for t in self.deliveries):
            await asyncio.gather(*self.deliveries)
        assert not self.send_errors, self.send_errors


class FakeEnv(Env):
    def __init__(self, hub: Hub, role: str, dfs, *, seed: int = 0) -> None:
        self.hub = hub
        self.role = role
        self.dfs = dfs
        self.rng = random.Random(seed)
        self.tracer = Tracer("x")
        self.metrics = Metrics()
        self.calls: list[tuple[str, str, Any]] = []
        self.sent: list[tuple[str, str, Any, Any]] = []
        self.sleeps: list[float] = []
        self.send_probe: Callable[[], Any] | None = None  # what the world looked like at each send

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(seconds)

    async def call(self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None) -> Any:
        self.calls.append((dest, method, msg))
        self.metrics.rpc(method)
        return await self.hub.dispatch(self.role, dest, method, msg, timeout)

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        self.sent.append((dest, method, msg, self.send_probe() if self.send_probe else None))
        self.metrics.rpc(method)
        self.hub.post(self.role, dest, method, msg)

    async def io(self, fn: Callable[..., Any], *args: Any) -> Any:
        await asyncio.sleep(0)  # other coroutines may run meanwhile, as with a thread
        return fn(*args)


class WriterCtx:
    """runtime.protocols.base.WriterContext for the P3 and P4 writer sides."""

    def __init__(
        self,
        env: FakeEnv,
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

    def __init__(self, env: FakeEnv, config: JobConfig, task_id: int = 0) -> None:
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


@pytest.fixture(autouse=True)
def _fresh_bus_clients():
    bus.MessageClient.reset_singletons()
    yield
    bus.MessageClient.reset_singletons()


class World:
    def __init__(self, tmp_path) -> None:
        dfs, self.path = open_dfs(str(tmp_path / "t"), role="setup")
        self.dfs = dfs
        self.hub = Hub(dfs)
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
def world(tmp_path) -> World:
    return World(tmp_path)


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


# == P3 timeline-server ===========================================================================


def server_of(world: World, cfg: JobConfig) -> TimelineServer:
    env = world.hub.env(SERVER)
    return world.hub.register(SERVER, TimelineServer(env, cfg, world.view(SERVER)))


def test_p3_server_rescans_after_every_refresh_threshold_requests(world):
    """A lost refresh cannot block writers forever: every N requests the server rescans."""
    cfg = config(timeline_refresh_requests=5, wait_tick_s=1000.0)  # no miss scans in this test
    server = server_of(world, cfg)
    driver = bus.MessageDriver(world.dfs.for_role("coordinator"), world.path)
    ask = world.hub.env("writer-0")

    async def scenario():
        await server.start()
        assert server.describe()["scans"] == {"refresh": 0, "miss": 0, "threshold": 0, "start": 1}
        lists = world.ops(SERVER)["list"]
        driver.commit_ckp(0, "", I_A)  # written, but the refresh is lost
        seen = []
        for _ in range(4):
            seen.append(await ask.call(SERVER, "get_ckp_message", 0))
        assert seen == [None] * 4, "nothing rescans before the threshold"
        assert server.describe()["scans"]["threshold"] == 0
        assert world.ops(SERVER)["list"] == lists
        fifth = await ask.call(SERVER, "get_ckp_message", 0)  # the 5th request rescans
        assert fifth == bus.CkpMessage(0, True, "", I_A)
        assert server.describe()["scans"]["threshold"] == 1
        assert world.ops(SERVER)["list"] == lists + 2  # one bus listing, one timeline listing
        for _ in range(5):  # any RPC counts towards the threshold
            await ask.call(SERVER, "last_pending_instant", None)
        assert server.describe()["scans"]["threshold"] == 2
        assert server.describe()["requests"] == 10
        assert server.describe()["scans"]["miss"] == 0

    run(scenario())


def test_p3_misses_within_one_wait_tick_share_one_scan(world):
    cfg = config(wait_tick_s=1.0)
    server = server_of(world, cfg)
    driver = bus.MessageDriver(world.dfs.for_role("coordinator"), world.path)
    writers = [world.hub.env(f"writer-{i}") for i in range(8)]

    async def scenario():
        await server.start()
        await asyncio.sleep(1.5)  # past the start scan's tick
        before = world.ops(SERVER)
        replies = await asyncio.gather(*(w.call(SERVER, "get_ckp_message", 3) for w in writers))
        assert replies == [None] * 8
        d = server.describe()
        assert d["misses"] == 8 and d["scans"]["miss"] == 1, d
        after = world.ops(SERVER)
        assert after["list"] - before["list"] == 2 and after.get("read", 0) == before.get("read", 0)
        # still inside the tick: the message appears but the next misses do not rescan
        driver.commit_ckp(3, I_A, I_B)
        await asyncio.sleep(0.5)
        assert await writers[0].call(SERVER, "get_ckp_message", 3) is None
        assert server.describe()["scans"]["miss"] == 1
        # one tick after the scan, a miss rescans and finds it
        await asyncio.sleep(0.6)
        assert await writers[1].call(SERVER, "get_ckp_message", 3) == bus.CkpMessage(3, True, I_A, I_B)
        assert server.describe()["scans"]["miss"] == 2
        # a hit never scans
        for w in writers:
            assert (await w.call(SERVER, "get_ckp_message", 3)).inflight_instant == I_B
        assert server.describe()["scans"]["miss"] == 2

    run(scenario())


def test_p3_refresh_makes_a_new_message_and_pending_instant_visible(world):
    cfg = config(wait_tick_s=1000.0)
    server = server_of(world, cfg)
    driver = bus.MessageDriver(world.dfs.for_role("coordinator"), world.path)
    coord_table = world.view("coordinator")
    w = world.hub.env("writer-0")

    async def scenario():
        await server.start()
        coord_table.start_instant(I_A)
        driver.commit_ckp(1, I_OLD, I_A)
        driver.abort_ckp(2)
        assert await w.call(SERVER, "get_ckp_message", 1) is None  # the cache is stale
        assert await w.call(SERVER, "last_pending_instant", None) is None
        await w.call(SERVER, "refresh", None)
        assert await w.call(SERVER, "get_ckp_message", 1) == bus.CkpMessage(1, True, I_OLD, I_A)
        assert await w.call(SERVER, "get_ckp_message", 2) == bus.CkpMessage.aborted(2)
        assert await w.call(SERVER, "last_pending_instant", None) == I_A
        assert server.describe()["scans"]["refresh"] == 1
        assert server.describe()["cached_messages"] == [1, 2]

    run(scenario())


def test_p3_server_does_not_reread_message_files_it_cached(world):
    cfg = config(wait_tick_s=1000.0)
    server = server_of(world, cfg)
    driver = bus.MessageDriver(world.dfs.for_role("coordinator"), world.path)

    async def scenario():
        await server.start()
        driver.commit_ckp(0, "", I_A)
        driver.commit_ckp(1, I_A, I_B)
        await server.refresh()
        assert world.ops(SERVER).get("read", 0) == 2
        lists = world.ops(SERVER)["list"]
        await server.refresh()
        await server.refresh()
        assert world.ops(SERVER).get("read", 0) == 2, "a cached .commit was read again"
        assert world.ops(SERVER)["list"] == lists + 4  # rescans still list
        driver.commit_ckp(2, I_B, I_C)
        driver.abort_ckp(3)
        await server.refresh()
        assert world.ops(SERVER)["read"] == 3  # only the new .commit; an .aborted is never read
        assert sorted(server.messages) == [0, 1, 2, 3]
        assert server.messages[1] == bus.CkpMessage(1, True, I_A, I_B)

    run(scenario())


def test_p3_server_serves_the_rewritten_message_after_the_bus_is_recreated(world):
    cfg = config(wait_tick_s=1000.0)
    # a previous job on this table left its bus behind (MessageDriver.close keeps the files)
    old_driver = bus.MessageDriver(world.dfs.for_role("old-coordinator"), world.path)
    old_driver.commit_ckp(0, "", I_OLD)
    old_driver.close()
    server = server_of(world, cfg)
    coord = world.hub.register(
        "coordinator",
        Coordinator(world.hub.env("coordinator"), cfg, world.view("coordinator"), TimelineServerProtocol, TASKS),
    )
    jm, w = world.hub.env("job-manager"), world.hub.env("writer-0")

    async def scenario():
        await server.start()  # the job starts the protocol's roles before the coordinator
        await coord.start()  # recreates the bus
        for t in range(2):
            await jm.call("coordinator", "write_metadata", WriteMetadataEvent(t, -1, "", bootstrap=True))
        await world.hub.drain()  # message 0 written, refresh delivered
        assert world.bus_files() == ["0.commit"]
        msg = await w.call(SERVER, "get_ckp_message", 0)
        assert msg.inflight_instant == coord.instant, f"writers would write into {msg.inflight_instant}"

    run(scenario())


def ts_writer(world: World, cfg: JobConfig, *, last_checkpoint_id: int) -> tuple[TimelineServerWriter, WriterCtx]:
    env = world.hub.env("writer-0")
    ctx = WriterCtx(env, cfg, world.view("writer-0"), last_checkpoint_id=last_checkpoint_id)
    w = TimelineServerWriter(ctx)
    return w, ctx


def test_p3_writer_with_a_working_server_reads_nothing_from_the_dfs(world):
    cfg = config(wait_tick_s=0.1)
    server = server_of(world, cfg)
    coord_table = world.view("coordinator")
    driver = bus.MessageDriver(coord_table.dfs, world.path)
    coord_env = world.hub.env("coordinator")
    w, ctx = ts_writer(world, cfg, last_checkpoint_id=1)

    async def coordinator_later():
        await wait_until(lambda: ctx.blocked is not None, what="the writer blocking")
        await asyncio.sleep(0.35)
        coord_table.start_instant(I_A)
        driver.commit_ckp(0, "", I_A)
        coord_env.send(SERVER, "refresh")

    async def scenario():
        await server.start()
        await w.open()
        helper = asyncio.ensure_future(coordinator_later())
        instant = await w.instant_to_write(eager=False, has_data=True)  # barrier 1 reads message 0
        await helper
        return instant

    assert run(scenario()) == I_A
    assert ctx.blocked_log[0].waiting_on == "message bus file 0.commit or 0.aborted"
    mine = world.ops("writer-0")
    assert mine.get("read", 0) == 0 and mine.get("exists", 0) == 0 and mine.get("list", 0) == 0, mine
    assert world.ops(SERVER).get("read", 0) >= 1
    asked = [c for c in ctx.env.calls if c[1] == "get_ckp_message"]
    assert len(asked) >= 3 and all(c[0] == SERVER and c[2] == 0 for c in asked)
    assert w.fallbacks == 0 and ctx.env.metrics.counters.get("timeline_server_fallbacks", 0) == 0


def test_p3_writer_falls_back_to_the_dfs_when_the_server_raises(world):
    cfg = config()
    coord_table = world.view("coordinator")
    driver = bus.MessageDriver(coord_table.dfs, world.path)
    coord_table.start_instant(I_A)
    driver.commit_ckp(0, "", I_A)
    coord_table.start_instant(I_B)
    driver.abort_ckp(1)
    world.hub.down[SERVER] = ConnectionError("the timeline server is gone")
    w, ctx = ts_writer(world, cfg, last_checkpoint_id=1)

    async def scenario():
        await w.open()
        first = await w.instant_to_write(eager=False, has_data=True)  # message 0
        w.on_snapshot(2)
        ctx.last_checkpoint_id = 2
        second = await w.instant_to_write(eager=False, has_data=True)  # message 1: aborted
        return first, second

    assert run(scenario()) == (I_A, I_B)  # aborted -> the timeline's last pending instant
    # get_ckp_message twice, last_pending_instant once: each error falls back, and is counted
    assert w.fallbacks == 3
    assert ctx.env.metrics.counters["timeline_server_fallbacks"] == 3
    assert w.describe()["fallbacks"] == 3
    assert "ConnectionError" in w.last_fallback
    mine = world.ops("writer-0")
    assert mine.get("read", 0) >= 1 and mine.get("list", 0) >= 1  # it read the DFS itself


class HangingServer:
    RPC_METHODS = ("get_ckp_message", "last_pending_instant")

    def __init__(self) -> None:
        self.asked = 0

    async def get_ckp_message(self, ckp):
        self.asked += 1
        await asyncio.Event().wait()

    async def last_pending_instant(self, _):
        self.asked += 1
        await asyncio.Event().wait()


def test_p3_writer_falls_back_when_the_server_times_out(world):
    cfg = config(rpc_timeout_s=0.5)
    hanging = world.hub.register(SERVER, HangingServer())
    coord_table = world.view("coordinator")
    driver = bus.MessageDriver(coord_table.dfs, world.path)
    coord_table.start_instant(I_A)
    driver.commit_ckp(3, I_OLD, I_A)
    w, ctx = ts_writer(world, cfg, last_checkpoint_id=3)

    async def scenario():
        await w.open()
        t0 = now()
        instant = await w.instant_to_write(eager=True, has_data=True)  # eager after barrier 3
        return instant, now() - t0

    instant, took = run(scenario())
    assert instant == I_A
    assert hanging.asked == 1
    assert took == pytest.approx(0.5, abs=0.05)  # one RPC timeout, then the DFS
    assert w.fallbacks == 1 and ctx.env.metrics.counters["timeline_server_fallbacks"] == 1
    assert "WaitTimeout" in w.last_fallback


def test_p3_coordinator_asks_the_server_to_refresh_after_each_message(world):
    cfg = config(wait_tick_s=1000.0)  # the server learns only through refresh here
    server = server_of(world, cfg)
    cenv = world.hub.env("coordinator")
    cenv.send_probe = world.bus_files
    coord = world.hub.register(
        "coordinator", Coordinator(cenv, cfg, world.view("coordinator"), TimelineServerProtocol, TASKS)
    )
    drv = world.hub.env("job-manager")

    def refreshes():
        return [s for s in cenv.sent if (s[0], s[1]) == (SERVER, "refresh")]

    async def after(action, new_file: str) -> None:
        """``action`` writes ``new_file`` and then (not before) sends a refresh."""
        before = len(refreshes())
        await action()
        await world.hub.drain()
        sent = refreshes()[before:]
        assert sent, f"no refresh after writing {new_file}"
        assert new_file in sent[-1][3], f"refresh sent before {new_file} was written: {sent[-1][3]}"

    async def scenario():
        await server.start()
        await coord.start()

        async def bootstrap():
            for t in range(2):
                await drv.call("coordinator", "write_metadata", WriteMetadataEvent(t, -1, "", bootstrap=True))

        await after(bootstrap, "0.commit")  # on_instant_started
        first = coord.instant
        assert server.messages[0] == bus.CkpMessage(0, True, "", first)
        assert server.last_pending == first

        async def empty_round():
            for t in range(2):
                await drv.call("coordinator", "write_metadata", WriteMetadataEvent(t, 1, first, [], last_batch=True))
            result = await drv.call("coordinator", "notify_checkpoint_complete", CheckpointNotice(1))
            assert result["reason"] == "empty round"

        await after(empty_round, "1.commit")  # on_empty_round: the instant reused
        assert server.messages[1] == bus.CkpMessage(1, True, first, first)

        async def abort():
            await drv.call("coordinator", "notify_checkpoint_aborted", CheckpointNotice(2))

        await after(abort, "2.aborted")  # on_checkpoint_aborted
        assert server.messages[2] == bus.CkpMessage.aborted(2)
        scans = server.describe()["scans"]
        assert scans["refresh"] >= 3 and scans["miss"] == 0 and scans["threshold"] == 0
        assert server.describe()["requests"] == 0  # it learned everything through refresh

    run(scenario())


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
    assert coord.protocol.created == 1 and coord.protocol.instants == {0: i0}
    for ctx in (c0, c1):
        reqs = [c[2] for c in ctx.env.calls if c[1] == "instant_time_request"]
        assert reqs and all(r.checkpoint_id == 0 for r in reqs)  # barrier 1 asks for key 0


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
    assert "#19902" in str(err) and "InstantTimeRequest(ckp=0)" in str(err)
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
    assert "PENDING" in str(err) and "checkpoint 0" in str(err)
    assert took <= 2.0 + 0.5  # never sleeps more than half a capped backoff past the deadline
    assert w.pending_replies >= 4 and 0 not in w.instants


class _HalfJitter:
    """An rng whose jitter factor is exactly 1 (0.5 + 0.5)."""

    def random(self) -> float:
        return 0.5


def test_p4_async_writer_polls_until_the_deadline_not_before(world):
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


def test_p4_writer_caches_the_instant_of_a_checkpoint_key(world):
    coord, cfg = rpc_world(world)
    w, ctx = rpc_writer(world, cfg, 0, last_checkpoint_id=0)

    def requests():
        return [c[2].checkpoint_id for c in ctx.env.calls if c[1] == "instant_time_request"]

    async def scenario():
        await coord.start()
        a = await w.instant_to_write(eager=True, has_data=True)  # eager before barrier 1: key 0
        b = await w.instant_to_write(eager=True, has_data=True)  # key 0 again
        ctx.last_checkpoint_id = 1
        w.on_snapshot(1)
        c = await w.instant_to_write(eager=False, has_data=True)  # barrier 1: still key 0
        assert requests() == [0]
        d = await w.instant_to_write(eager=True, has_data=True)  # after barrier 1: key 1
        return a, b, c, d

    a, b, c, d = run(scenario())
    assert a == b == c and d > a
    assert requests() == [0, 1]
    assert w.instants == {0: a, 1: d}


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


async def topic_messages(env: FakeEnv) -> list[ControlMessage]:
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
        await p.handle(_msg(START_COMMIT, I_A, offsets={1: 0}))
        assert p.accept(rows(0, 12), 0).num_rows == 12
        kept = await p.on_write_event(WriteMetadataEvent(1, 1, I_A, [eager]))
        kept2 = await p.on_write_event(WriteMetadataEvent(1, 1, I_A, [stale_version]))
        assert kept and kept2  # reported with WRITE_STATUS, never as an operator event
        await p.handle(_msg(END_COMMIT, I_B))  # another commit's END: stale
        assert p.counts["stale"] == 1 and ctx.flushed == [] and topic.high_watermark == 0
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
        self.cfg = config(**cfg_kw)
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
