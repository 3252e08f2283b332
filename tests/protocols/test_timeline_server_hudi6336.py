# ruff: noqa: F811  (the world fixture is imported from test_protocol_rules)
"""P3 timeline-server as HUDI-6336 (PR #9651): InstantStateHandler and TimelineBasedCkpMetadata.

Runs on the virtual-clock harness of test_protocol_rules (real DFS, real coordinator)."""

from __future__ import annotations

import asyncio

from test_protocol_rules import TASKS, WriterCtx, config, run, wait_until, world  # noqa: F401 (fixture)

from runtime.core.messages import CheckpointNotice, CheckpointTrigger, WriteMetadataEvent
from runtime.hudi.timeline.ckp_meta import CkpMetadata
from runtime.protocols.timeline_server import (
    REMOTE_MAX_RETRY,
    SERVER,
    TimelineServer,
    TimelineServerProtocol,
    TimelineServerWriter,
)
from runtime.writer.coordinator import Coordinator

I_A, I_B = "20240101000000002", "20240101000000003"


def server_of(world, cfg) -> TimelineServer:
    return world.hub.register(SERVER, TimelineServer(world.hub.env(SERVER), cfg, world.view(SERVER)))


def writer_of(world, cfg, **kw) -> tuple[TimelineServerWriter, WriterCtx]:
    ctx = WriterCtx(world.hub.env("writer-0"), cfg, world.view("writer-0"), **kw)
    return TimelineServerWriter(ctx), ctx


def test_the_server_does_not_rescan_on_a_miss(world):
    """A writer waiting for a new instant is served the cached states until a refresh or the
    N-th request: the old server rescanned on every miss (wrong: InstantStateHandler never does)."""
    cfg = config(timeline_refresh_requests=100, wait_tick_s=0.1)
    server = server_of(world, cfg)
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    w = world.hub.env("writer-0")

    async def scenario():
        first = await w.call(SERVER, "get_all_instant_states", meta.path)
        assert first == [] and server.scans["first"] == 1
        lists = world.ops(SERVER).get("list", 0)
        meta.start_instant(I_A)  # written, but no refresh is posted
        for _ in range(20):
            assert await w.call(SERVER, "get_all_instant_states", meta.path) == []
            await asyncio.sleep(1.0)  # many wait ticks: still no rescan
        assert world.ops(SERVER).get("list", 0) == lists, "the server listed the DFS on a miss"
        assert server.scans == {"first": 1, "refresh": 0, "threshold": 0}

    run(scenario())


def test_a_posted_refresh_makes_the_new_state_visible(world):
    cfg = config()
    server = server_of(world, cfg)
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    w = world.hub.env("writer-0")

    async def scenario():
        assert await w.call(SERVER, "get_all_instant_states", meta.path) == []
        meta.start_instant(I_A)
        assert await w.call(SERVER, "refresh", meta.path) is True
        assert await w.call(SERVER, "get_all_instant_states", meta.path) == [f"{I_A}.INFLIGHT"]
        assert server.scans["refresh"] == 1 and server.request_count == 1  # reset by the refresh

    run(scenario())


def test_the_threshold_rescans_every_n_requests(world):
    cfg = config(timeline_refresh_requests=5)
    server = server_of(world, cfg)
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    w = world.hub.env("writer-0")

    async def scenario():
        await w.call(SERVER, "get_all_instant_states", meta.path)  # request 1 scans the new path
        meta.start_instant(I_A)  # the refresh is lost
        seen = [await w.call(SERVER, "get_all_instant_states", meta.path) for _ in range(3)]
        assert seen == [[], [], []] and server.scans["threshold"] == 0
        fifth = await w.call(SERVER, "get_all_instant_states", meta.path)  # requestCount reaches 5
        assert fifth == [f"{I_A}.INFLIGHT"]
        assert server.scans["threshold"] == 1 and server.request_count == 0

    run(scenario())


def test_the_writer_falls_back_to_the_dfs_on_a_server_error(world):
    cfg = config()
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    meta.start_instant(I_A)
    world.hub.down[SERVER] = ConnectionError("the timeline server is gone")
    w, ctx = writer_of(world, cfg, last_checkpoint_id=1, current_instant="20240101000000001")

    async def scenario():
        return await w.instant_to_write(eager=False, has_data=True)

    assert run(scenario()) == I_A
    asked = [c for c in ctx.env.calls if c[1] == "get_all_instant_states"]
    assert len(asked) == REMOTE_MAX_RETRY, "HttpRequestClient retries before the fallback"
    assert w.fallbacks == 1 and ctx.env.metrics.counters["timeline_server_fallbacks"] == 1
    assert "ConnectionError" in w.last_fallback
    assert world.ops("writer-0").get("list", 0) == 1  # it listed ckp_meta itself


def test_a_working_server_keeps_writers_off_the_dfs_and_the_coordinator_refreshes(world):
    cfg = config(timeline_refresh_requests=1000)
    server = server_of(world, cfg)
    coord = world.hub.register(
        "coordinator",
        Coordinator(world.hub.env("coordinator"), cfg, world.view("coordinator"), TimelineServerProtocol, TASKS),
    )
    jm = world.hub.env("job-manager")
    w, ctx = writer_of(world, cfg, last_checkpoint_id=0)

    async def scenario():
        await coord.start()  # bootstrap: recreate ckp_meta, reset the server
        await w.open()
        for t in range(2):
            await jm.call("coordinator", "write_metadata", WriteMetadataEvent(t, -1, "", bootstrap=True))
        await wait_until(lambda: coord.instant and coord.instant.isdigit(), what="the first instant")
        first = coord.instant
        got = await w.instant_to_write(eager=False, has_data=True)
        assert got == first
        # an aborted checkpoint: ABORTED written and refreshed; the instant stays pending
        await jm.call("coordinator", "checkpoint_coordinator", CheckpointTrigger(1))
        await jm.call("coordinator", "notify_checkpoint_aborted", CheckpointNotice(1))
        assert await w.last_pending_instant() == first
        return first

    run(scenario())
    mine = world.ops("writer-0")
    assert mine.get("list", 0) == 0 and mine.get("exists", 0) == 0, mine
    assert server.refreshes >= 2  # after startInstant and after abortInstant
    assert w.fallbacks == 0
