"""Tests of the writer sides of P1 (operator-event) and P2 (message-bus).

The writer runs in the shared test environment (tests/harness.py): the simulator's env on
virtual time (``sleep`` costs no real time; other asyncio tasks run meanwhile), ``io`` inline,
every ``call``, ``send`` and ``sleep`` recorded. The DFS is the simulator's in-memory one; the
table and the message bus are real. Everything that would "happen meanwhile" (the coordinator
starting an instant, writing a bus message, an operator event's mail running) is done from
another asyncio task once the writer has reported that it is blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import harness
import pytest
from harness import Inbox, Sim, TestEnv, active, memory_dfs

from runtime.core.config import JobConfig
from runtime.core.dfs import Dfs
from runtime.core.messages import BlockedWait, CheckpointNotice, CommitAckEvent
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.hudi.timeline.dfs_message_bus import MessageDriver, message_bus_path
from runtime.protocols import PROTOCOLS
from runtime.protocols.base import InstantWaitTimeout
from runtime.protocols.message_bus import MessageBusWriter
from runtime.protocols.operator_event import OperatorEventCoordinator, OperatorEventWriter

I1, I2, I3 = "20240101000000001", "20240101000000002", "20240101000000003"
TICK = 0.01


def task_env(dfs: Dfs | None, role: str = "writer-0") -> TestEnv:
    """``role``'s env in the test's shared environment, on ``dfs`` (None: the environment's own)."""
    return active().env(role, dfs=dfs)


class Ctx:
    """The attributes of runtime.protocols.base.WriterContext."""

    def __init__(
        self,
        env: TestEnv,
        config: JobConfig,
        table: HudiTable,
        *,
        task_id: int = 0,
        current_instant: str | None = None,
        last_checkpoint_id: int = -1,
    ) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.task_id = task_id
        self.current_instant = current_instant
        self.last_checkpoint_id = last_checkpoint_id
        self.blocked_calls: list[BlockedWait | None] = []
        self.blocked: BlockedWait | None = None

    def set_blocked(self, wait: BlockedWait | None) -> None:
        self.blocked_calls.append(wait)
        self.blocked = wait


def run(coro: Coroutine[Any, Any, Any], timeout: float = 5.0) -> Any:
    """Runs ``coro`` in the test's environment, bounded by ``timeout`` virtual seconds (and by
    the environment's real-time guard), so a broken wait fails the test instead of hanging it."""
    return harness.run(coro, timeout)


async def when_blocked(ctx: Ctx, action: Callable[[], Any]) -> None:
    """Runs ``action`` once the writer has reported that it blocks."""
    while ctx.blocked is None:
        await asyncio.sleep(0)
    await asyncio.sleep(0)  # let it take one more tick
    result = action()
    if isinstance(result, Awaitable):
        await result


async def concurrently(writer_call: Awaitable[Any], other: Awaitable[Any]) -> Any:
    helper = asyncio.ensure_future(other)
    try:
        return await writer_call
    finally:
        if not helper.done():
            helper.cancel()
        else:
            helper.result()  # re-raise a failure of the helper


@pytest.fixture(autouse=True)
def world() -> Iterator[Sim]:
    """The test's environment; the two write tasks' inboxes collect what a coordinator sends."""
    with harness.opened() as sim:
        for name in ("writer-0", "writer-1"):
            sim.register(name, Inbox("operator_event"))
        yield sim


@pytest.fixture
def tables():
    """(coordinator's table, writer's view of it): same files and counters, two roles."""
    dfs, path = memory_dfs("coordinator")
    coord = HudiTable.create_or_open(dfs, path, TableProps("t", "key", "partition", "ts"))
    return coord, coord.with_dfs(dfs.for_role("writer"))


def make_ctx(writer_table: HudiTable, **cfg: Any) -> Ctx:
    config = JobConfig(
        wait_tick_s=TICK,
        commit_ack_timeout_s=cfg.pop("commit_ack_timeout_s", 2.0),
        instant_wait_timeout_s=cfg.pop("instant_wait_timeout_s", 2.0),
        checkpoint_timeout_s=5.0,
    )
    return Ctx(task_env(writer_table.dfs), config, writer_table, **cfg)


def test_protocol_registry_names_the_writer_sides():
    assert PROTOCOLS["operator-event"].writer_side is OperatorEventWriter
    assert PROTOCOLS["message-bus"].writer_side is MessageBusWriter


# == P1 operator-event ===========================================================================


def p1(writer_table: HudiTable, **kw: Any) -> tuple[OperatorEventWriter, Ctx]:
    ctx = make_ctx(writer_table, **kw)
    w = OperatorEventWriter(ctx)
    run(w.open())
    return w, ctx


def test_p1_initial_instant_is_the_last_pending_one(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, _ = p1(wt)
    assert w.initial_instant() == I1


def test_p1_returns_a_new_pending_instant_without_waiting(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=None)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert ctx.blocked_calls == [] and ctx.env.sleeps == []
    # next round: the coordinator committed I1 and started I2, the task is still on I1
    w.on_snapshot(1)
    ctx.current_instant, ctx.last_checkpoint_id = I1, 1
    coord.start_instant(I2)
    WriteClient(coord).commit(I1, [_stat()], {})
    assert run(w.instant_to_write(eager=False, has_data=True)) == I2
    assert ctx.blocked_calls == []


def test_p1_same_instant_without_data_does_not_wait(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1)
    assert run(w.instant_to_write(eager=False, has_data=False)) == I1
    assert ctx.blocked_calls == []


def test_p1_after_confirming_eager_flushes_of_the_round_do_not_wait(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=None)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    ctx.current_instant = I1
    # same instant, has data, but the round is confirmed: no wait
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert ctx.blocked_calls == []


def test_p1_waits_on_the_same_instant_with_data_until_a_new_instant_starts(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1, last_checkpoint_id=2)

    async def scenario():
        return await concurrently(
            w.instant_to_write(eager=False, has_data=True), when_blocked(ctx, lambda: coord.start_instant(I2))
        )

    assert run(scenario()) == I2
    wait = ctx.blocked_calls[0]
    assert isinstance(wait, BlockedWait)
    assert wait.releasing_mail == "CommitAckEvent"
    assert wait.what == "instant initialize"
    assert "CommitAckEvent" in wait.waiting_on and "timeline" in wait.waiting_on
    assert wait.checkpoint_id == 3
    assert ctx.blocked_calls[-1] is None and len(ctx.blocked_calls) == 2  # set once, cleared once
    assert ctx.env.sleeps and set(ctx.env.sleeps) == {TICK}
    assert not w.confirming


def test_p1_waits_until_a_commit_ack_event_runs_and_reuses_the_instant(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1, last_checkpoint_id=2)

    async def scenario():
        return await concurrently(
            w.instant_to_write(eager=True, has_data=True),
            when_blocked(ctx, lambda: w.on_operator_event(CommitAckEvent(2))),
        )

    assert run(scenario()) == I1  # the reused instant
    assert w.acks_received == 1
    assert ctx.blocked_calls[0].releasing_mail == "CommitAckEvent"
    assert ctx.blocked_calls[-1] is None


def test_p1_an_ack_that_ran_before_the_flush_lets_it_through(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1)
    w.on_operator_event(CommitAckEvent(1))
    assert run(w.instant_to_write(eager=False, has_data=True)) == I1
    assert ctx.blocked_calls == []


def test_p1_other_operator_events_do_not_unblock(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1)
    w.on_operator_event(CheckpointNotice(1))
    assert w.confirming and w.acks_received == 0


def test_p1_times_out_after_commit_ack_timeout(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1, commit_ack_timeout_s=0.3)
    with pytest.raises(InstantWaitTimeout) as exc:
        run(w.instant_to_write(eager=False, has_data=True))
    assert 0.3 <= ctx.env.now() < 0.3 + 2 * TICK
    text = str(exc.value)
    assert "writer-0" in text and "Timeout(300ms)" in text and "instant initialize" in text  # Hudi's wording
    assert I1 in text and "CommitAckEvent" in text
    assert ctx.blocked_calls[-1] is None  # the blocked marker is cleared on failure too


def test_p1_times_out_when_there_is_no_pending_instant(tables):
    _, wt = tables
    w, ctx = p1(wt, current_instant=None, commit_ack_timeout_s=0.2)
    with pytest.raises(InstantWaitTimeout, match="no pending instant"):
        run(w.instant_to_write(eager=True, has_data=True))
    assert ctx.env.now() >= 0.2


def test_p1_polls_the_timeline_every_tick(tables):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p1(wt, current_instant=I1, commit_ack_timeout_s=0.1)
    before = wt.dfs.counters.snapshot().get("writer", {}).get("list", 0)
    with pytest.raises(InstantWaitTimeout):
        run(w.instant_to_write(eager=False, has_data=True))
    polls = wt.dfs.counters.snapshot()["writer"]["list"] - before
    assert polls == len(ctx.env.sleeps) + 1  # one listing up front, one per tick


def test_p1_coordinator_sends_one_ack_per_task_on_empty_round_and_abort():
    class CCtx:
        def __init__(self):
            self.env = task_env(None, role="coordinator")
            self.task_names = ["writer-0", "writer-1"]

    c = OperatorEventCoordinator(CCtx())
    run(c.on_empty_round(3, I1))
    run(c.on_checkpoint_aborted(4, I1))
    assert c.ctx.env.sent == [
        ("writer-0", "operator_event", CommitAckEvent(3)),
        ("writer-1", "operator_event", CommitAckEvent(3)),
        ("writer-0", "operator_event", CommitAckEvent(4)),
        ("writer-1", "operator_event", CommitAckEvent(4)),
    ]


# == P2 message-bus ==============================================================================


def p2(writer_table: HudiTable, **kw: Any) -> tuple[MessageBusWriter, Ctx]:
    fix = kw.pop("p2_fix_aborted_reread", False)
    ctx = make_ctx(writer_table, **kw)
    ctx.config = ctx.config.replace(p2_fix_aborted_reread=fix)
    w = MessageBusWriter(ctx)
    run(w.open())
    if ctx.last_checkpoint_id >= 0:
        # the task took that snapshot since it opened (a (re)started task's checkpointId is -1)
        w.on_snapshot(ctx.last_checkpoint_id)
    return w, ctx


@pytest.fixture
def driver(tables):
    coord, _ = tables
    return MessageDriver(coord.dfs, coord.base_path)


@pytest.mark.parametrize(
    "ckp,eager,expected",
    [
        (-1, True, 0),
        (-1, False, 0),
        (0, True, 0),
        (0, False, 0),
        (1, True, 1),
        (1, False, 0),
        (5, True, 5),
        (5, False, 4),
    ],
)
def test_p2_prev_ckp(tables, ckp, eager, expected):
    _, wt = tables
    w, ctx = p2(wt, last_checkpoint_id=ckp)
    assert w.prev_ckp(eager) == expected


def test_p2_reads_the_inflight_instant_of_the_message(tables, driver):
    coord, wt = tables
    coord.start_instant(I3)  # the timeline is NOT what P2 reads
    driver.commit_ckp(0, "", I1)
    driver.commit_ckp(3, I1, I2)
    w, ctx = p2(wt, last_checkpoint_id=-1)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1  # message 0
    w.on_snapshot(4)
    ctx.last_checkpoint_id = 4
    assert run(w.instant_to_write(eager=False, has_data=True)) == I2  # snapshot of 4: message 3
    assert ctx.blocked_calls == []
    assert w.aborts_seen == 0 and w.silent_cancels == 0


def test_p2_eager_flush_reads_the_message_of_the_last_checkpoint(tables, driver):
    _, wt = tables
    driver.commit_ckp(3, I1, I2)
    w, ctx = p2(wt, last_checkpoint_id=3)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I2


def test_p2_waits_until_the_message_appears(tables, driver):
    _, wt = tables
    w, ctx = p2(wt, last_checkpoint_id=2)

    async def scenario():
        return await concurrently(
            w.instant_to_write(eager=True, has_data=True), when_blocked(ctx, lambda: driver.commit_ckp(2, I1, I2))
        )

    assert run(scenario()) == I2
    wait = ctx.blocked_calls[0]
    assert wait.releasing_mail is None  # no mail of its own mailbox can end it: no deadlock
    assert wait.what == "instant initialize"
    assert "2.commit" in wait.waiting_on and "2.aborted" in wait.waiting_on
    assert wait.checkpoint_id == 2
    assert ctx.blocked_calls[-1] is None and len(ctx.blocked_calls) == 2
    assert ctx.env.sleeps and set(ctx.env.sleeps) == {TICK}


def test_p2_aborted_message_reuses_the_last_pending_instant(tables, driver):
    coord, wt = tables
    coord.start_instant(I1)
    driver.commit_ckp(0, "", I1)
    driver.abort_ckp(2)
    w, ctx = p2(wt, last_checkpoint_id=2)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert w.aborts_seen == 1
    assert ctx.blocked_calls == []
    # PR #3915 re-reads the message for a later eager flush of the same round: the literal
    # "aborted" (the --p2-fix-aborted-reread variant keeps I1)
    assert run(w.instant_to_write(eager=True, has_data=True)) == "aborted"


def test_p2_aborted_message_arriving_while_waiting(tables, driver):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p2(wt, last_checkpoint_id=3)

    async def scenario():
        return await concurrently(
            w.instant_to_write(eager=False, has_data=True), when_blocked(ctx, lambda: driver.abort_ckp(2))
        )

    assert run(scenario()) == I1
    assert w.aborts_seen == 1


def test_p2_timeout_after_ckp_0_assumes_a_silent_cancel(tables, driver):
    coord, wt = tables
    coord.start_instant(I1)
    w, ctx = p2(wt, last_checkpoint_id=2, instant_wait_timeout_s=0.2)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert 0.2 <= ctx.env.now() < 0.2 + 2 * TICK
    assert w.silent_cancels == 1
    assert not w.confirming
    assert ctx.blocked_calls[-1] is None


def test_p2_instant_wait_timeout_defaults_to_the_checkpoint_timeout(tables, driver):
    coord, wt = tables
    coord.start_instant(I1)
    ctx = Ctx(
        task_env(wt.dfs),
        JobConfig(wait_tick_s=0.05, instant_wait_timeout_s=0.0, checkpoint_timeout_s=0.5),
        wt,
        last_checkpoint_id=1,
    )
    w = MessageBusWriter(ctx)
    run(w.open())
    w.on_snapshot(1)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert 0.5 <= ctx.env.now() < 0.6


def test_p2_timeout_at_ckp_0_raises(tables, driver):
    _, wt = tables
    w, ctx = p2(wt, last_checkpoint_id=0, instant_wait_timeout_s=0.2)
    with pytest.raises(InstantWaitTimeout) as exc:
        run(w.instant_to_write(eager=True, has_data=True))
    text = str(exc.value)
    assert "Timeout(0.2s)" in text and "instant initialize" in text
    assert "message 0 never appeared" in text and message_bus_path(wt.base_path) in text
    assert "#8060" not in text  # the directory is there: no such diagnosis
    assert ctx.env.now() >= 0.2
    assert ctx.blocked_calls[-1] is None


def test_p2_deleted_bus_at_ckp_0_is_diagnosed(tables, driver):
    # Hudi #8060: the bus directory removed while the job runs; the writer must say so
    coord, wt = tables
    coord.dfs.delete(message_bus_path(coord.base_path), recursive=True)
    w, ctx = p2(wt, last_checkpoint_id=-1, instant_wait_timeout_s=0.2)
    with pytest.raises(InstantWaitTimeout) as exc:
        run(w.instant_to_write(eager=False, has_data=True))
    text = str(exc.value)
    assert "message bus directory is missing" in text and "#8060" in text
    assert "message 0 never appeared" in text


def test_p2_round_instant_is_kept_without_reading_until_on_snapshot(tables, driver):
    """The --p2-fix-aborted-reread variant (PR #3915 re-reads the message on every call)."""
    _, wt = tables
    driver.commit_ckp(0, "", I1)
    w, ctx = p2(wt, last_checkpoint_id=0, p2_fix_aborted_reread=True)
    assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert not w.confirming

    # the bus changes or even disappears: the round's instant is already known
    driver.commit_ckp(0, "", I3)
    wt.dfs.delete(message_bus_path(wt.base_path), recursive=True)
    reads_before = wt.dfs.counters.snapshot()["writer"]
    io_before = ctx.env.io_calls
    for _ in range(3):
        assert run(w.instant_to_write(eager=True, has_data=True)) == I1
    assert wt.dfs.counters.snapshot()["writer"] == reads_before  # no DFS operation at all
    assert ctx.env.io_calls == io_before
    assert ctx.blocked_calls == [] and ctx.env.sleeps == []

    # after the barrier the next flush confirms again: it reads message 1
    driver2 = MessageDriver(wt.dfs, wt.base_path)
    driver2.commit_ckp(1, I1, I2)
    w.on_snapshot(1)
    assert w.confirming
    ctx.last_checkpoint_id = 1
    assert run(w.instant_to_write(eager=True, has_data=True)) == I2


def test_p2_a_writer_reads_a_message_once_then_from_its_client_cache(tables, driver):
    """MessageClient.getSingleton: one client per path in a process; each write task is its own
    process, so two tasks hold two clients."""
    _, wt = tables
    driver.commit_ckp(0, "", I1)
    w0, ctx0 = p2(wt, last_checkpoint_id=0)
    w1, ctx1 = p2(wt, last_checkpoint_id=0, task_id=1)
    assert w0.client is not w1.client
    assert w0.clients.get(wt.dfs, wt.base_path) is w0.client
    assert run(w0.instant_to_write(eager=True, has_data=True)) == I1
    reads = wt.dfs.counters.snapshot()["writer"].get("read", 0)
    assert run(w0.instant_to_write(eager=True, has_data=True)) == I1
    assert wt.dfs.counters.snapshot()["writer"].get("read", 0) == reads  # served by the cache


def test_p2_describe_reports_counters(tables, driver):
    coord, wt = tables
    coord.start_instant(I1)
    driver.abort_ckp(1)
    w, _ = p2(wt, last_checkpoint_id=1)
    run(w.instant_to_write(eager=True, has_data=True))
    assert w.describe() == {
        "confirming": False,
        "checkpoint_id": 1,
        "silent_cancels": 0,
        "aborts_seen": 1,
        "aborted_handed_out": 0,
        "read_errors": 0,
    }


def _stat():
    from runtime.core.messages import WriteStat

    return WriteStat("f-0", "p/f-0_0-0-0_1.parquet", "p", "null", 1, 1, 0, 1, 1, 1)
