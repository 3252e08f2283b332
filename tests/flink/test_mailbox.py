"""Tests of runtime.flink.mailbox: the asyncio model of Flink's task mailbox.

Every wait is bounded (asyncio.wait_for) so a broken mailbox fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import harness
import pytest

from runtime.core.messages import MailInfo
from runtime.flink.mailbox import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    OPERATOR_PRIORITY,
    Controller,
    Mail,
    MailboxClosedError,
    MailboxExecutor,
    MailboxProcessor,
    MailboxState,
    MailboxStateError,
    Suspension,
    TaskMailbox,
    is_in_mailbox_thread,
)

SHORT = 0.05  # long enough for a woken coroutine to run, short enough to keep the file fast
BLOCKED = 0.3  # "never completes": the deadlock detection window


def run(coro: Coroutine[Any, Any, Any], timeout: float = 2.0) -> Any:
    """Runs a test coroutine in the shared test environment (tests/harness.py): on virtual time,
    so the waits below cost no real time, bounded by ``timeout`` virtual seconds and by a
    real-time guard, so a regression cannot hang the suite."""
    with harness.opened() as sim:
        return sim.run(coro, timeout)


def mail(kind: str, priority: int = MIN_PRIORITY, action: Callable[[], Any] | None = None) -> Mail:
    return Mail(action or (lambda: None), priority, kind, f"{kind}!")


def kinds(mb: TaskMailbox) -> list[str]:
    return [m.kind for m in mb.snapshot()]


async def wait_until(cond: Callable[[], bool], timeout: float = 1.0) -> None:
    """Polls ``cond`` on the event loop; fails the test if it never becomes true."""

    async def _poll() -> None:
        while not cond():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(_poll(), timeout)


async def cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class FakeClock:
    """Deterministic clock so waited_s / durations can be asserted exactly."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------------- TaskMailbox


def test_put_is_fifo_and_put_first_goes_to_front() -> None:
    mb = TaskMailbox()
    for k in ("a", "b", "c"):
        mb.put(mail(k))
    mb.put_first(mail("x"))
    assert kinds(mb) == ["x", "a", "b", "c"]
    assert [m.position for m in mb.snapshot()] == [0, 1, 2, 3]
    seqs = {m.kind: m.seq for m in mb.snapshot()}
    assert seqs["a"] < seqs["b"] < seqs["c"] < seqs["x"]  # seq is put order, not queue order
    taken = [mb.try_take(MIN_PRIORITY).kind for _ in range(4)]  # type: ignore[union-attr]
    assert taken == ["x", "a", "b", "c"]
    assert mb.try_take(MIN_PRIORITY) is None and len(mb) == 0


def test_take_returns_oldest_qualifying_and_skips_lower() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        mb.put(mail("low1", MIN_PRIORITY))
        mb.put(mail("op1", OPERATOR_PRIORITY))
        mb.put(mail("low2", MIN_PRIORITY))
        mb.put(mail("max", MAX_PRIORITY))
        mb.put(mail("op2", OPERATOR_PRIORITY))
        got = [(await mb.take(OPERATOR_PRIORITY)).kind for _ in range(3)]
        assert got == ["op1", "max", "op2"]
        assert kinds(mb) == ["low1", "low2"]  # skipped mails stay, in order
        assert mb.try_take(OPERATOR_PRIORITY) is None
        assert not mb.has_mail(OPERATOR_PRIORITY) and mb.has_mail(MIN_PRIORITY)
        assert mb.try_take(MIN_PRIORITY).kind == "low1"  # type: ignore[union-attr]
        assert len(mb) == 1

    run(body())


def test_take_blocks_until_a_qualifying_mail_is_put() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        taker = asyncio.create_task(mb.take(OPERATOR_PRIORITY))
        await asyncio.sleep(SHORT)
        assert not taker.done()
        mb.put(mail("event", MIN_PRIORITY))  # does not qualify: the taker keeps waiting
        await asyncio.sleep(SHORT)
        assert not taker.done()
        mb.put(mail("op", OPERATOR_PRIORITY))
        got = await asyncio.wait_for(taker, 1.0)
        assert got.kind == "op"
        assert kinds(mb) == ["event"]

    run(body())


def test_cancelled_take_loses_no_mail() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(mb.take(MIN_PRIORITY), SHORT)
        mb.put(mail("a"))
        assert kinds(mb) == ["a"]
        assert (await asyncio.wait_for(mb.take(MIN_PRIORITY), 1.0)).kind == "a"

    run(body())


def test_quiesce_rejects_puts_but_still_drains() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        mb.put(mail("a"))
        mb.put(mail("b"))
        mb.quiesce()
        assert mb.state is MailboxState.QUIESCED
        with pytest.raises(MailboxClosedError, match="QUIESCED"):
            mb.put(mail("c"))
        with pytest.raises(MailboxClosedError, match="QUIESCED"):
            mb.put_first(mail("c"))
        assert (await asyncio.wait_for(mb.take(MIN_PRIORITY), 1.0)).kind == "a"
        assert mb.try_take(MIN_PRIORITY).kind == "b"  # type: ignore[union-attr]
        assert mb.try_take(MIN_PRIORITY) is None

    run(body())


def test_close_returns_remaining_and_rejects_everything() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        mb.put(mail("a"))
        mb.put(mail("b"))
        assert [m.kind for m in mb.close()] == ["a", "b"]
        assert mb.state is MailboxState.CLOSED and len(mb) == 0
        with pytest.raises(MailboxClosedError, match="CLOSED"):
            await asyncio.wait_for(mb.take(MIN_PRIORITY), 1.0)
        with pytest.raises(MailboxClosedError):
            mb.try_take(MIN_PRIORITY)
        with pytest.raises(MailboxClosedError, match="CLOSED"):
            mb.put(mail("c"))
        assert mb.close() == []

    run(body())


def test_close_wakes_a_blocked_taker_with_closed_error() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        taker = asyncio.create_task(mb.take(MIN_PRIORITY))
        await asyncio.sleep(SHORT)
        assert not taker.done()
        mb.close()
        with pytest.raises(MailboxClosedError):
            await asyncio.wait_for(taker, 1.0)

    run(body())


def test_put_threadsafe_from_another_os_thread_wakes_taker() -> None:
    async def body() -> None:
        mb = TaskMailbox()
        loop = asyncio.get_running_loop()
        taker = asyncio.create_task(mb.take(MIN_PRIORITY))
        results: list[Any] = []
        t = threading.Thread(target=lambda: results.append(mb.put_threadsafe(mail("rpc"), loop)))
        t.start()
        t.join(1.0)
        assert (await asyncio.wait_for(taker, 1.0)).kind == "rpc"
        await asyncio.wait_for(asyncio.wrap_future(results[0]), 1.0)
        mb.close()
        bad = mb.put_threadsafe(mail("late"), loop)
        with pytest.raises(MailboxClosedError):
            await asyncio.wait_for(asyncio.wrap_future(bad), 1.0)

    run(body())


def test_snapshot_and_find_report_queue_with_waited_time() -> None:
    clock = FakeClock()
    mb = TaskMailbox(clock=clock)
    mb.put(Mail(lambda: None, MIN_PRIORITY, "CommitAckEvent", "CommitAckEvent(ckp=2)"))
    clock.now += 1.5
    mb.put(Mail(lambda: None, MAX_PRIORITY, "notifyCheckpointComplete", "ckp 2 complete"))
    clock.now += 0.5
    snap = mb.snapshot()
    assert snap == [
        MailInfo(0, snap[0].seq, "CommitAckEvent", "CommitAckEvent(ckp=2)", MIN_PRIORITY, 2.0),
        MailInfo(1, snap[1].seq, "notifyCheckpointComplete", "ckp 2 complete", MAX_PRIORITY, 0.5),
    ]
    assert snap[0].seq < snap[1].seq
    assert mb.find("CommitAckEvent") == 0
    assert mb.find("notifyCheckpointComplete") == 1
    assert mb.find("resume") is None
    assert Mail(lambda: None, kind="k").description == "k"  # description defaults to kind


def test_mail_run_awaits_async_actions_and_returns_result() -> None:
    async def body() -> None:
        async def act() -> int:
            await asyncio.sleep(0)
            return 7

        assert await Mail(act).run() == 7
        assert await Mail(lambda: 3).run() == 3

    run(body())


# ------------------------------------------------------------------------- MailboxProcessor loop


def test_loop_runs_pending_mails_before_each_step_and_ends_after_completion() -> None:
    """Order pins: pending mails first, mails put by a step run before the next step, a mail put
    while a batch runs waits for the next batch (FLINK-14304), one step per iteration, and after
    all_actions_completed the pending mails still run."""
    log: list[str] = []

    async def body() -> None:
        proc: MailboxProcessor

        async def step(ctl: Controller) -> None:
            n = proc.default_action_steps
            log.append(f"step{n}")
            main = proc.get_main_executor()
            if n == 1:

                def m3() -> None:
                    log.append("m3")
                    main.execute(lambda: log.append("m4"), "m4")  # put while draining

                main.execute(m3, "m3")
            if n == 3:
                ctl.all_actions_completed()
                main.execute(lambda: log.append("m5"), "m5")

        proc = MailboxProcessor(step)
        proc.get_main_executor().execute(lambda: log.append("m1"), "m1")
        proc.get_main_executor().execute(lambda: log.append("m2"), "m2")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert proc.default_action_steps == 3
        assert proc.mails_run == 5
        assert not proc.is_running and proc.current is None and len(proc.mailbox) == 0

    run(body())
    assert log == ["m1", "m2", "step1", "m3", "step2", "m4", "step3", "m5"]


def test_all_actions_completed_from_another_coroutine_ends_the_loop() -> None:
    async def body() -> None:
        steps: list[int] = []

        async def step(ctl: Controller) -> None:
            steps.append(1)
            await asyncio.sleep(0.005)

        proc = MailboxProcessor(step)
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: len(steps) >= 3)
        proc.all_actions_completed()
        await asyncio.wait_for(loop_task, 1.0)
        n = len(steps)
        await asyncio.sleep(SHORT)
        assert len(steps) == n  # no step after the loop ended
        # A finished loop stays finished: running it again only drains the mails.
        ran: list[str] = []
        proc.get_main_executor().execute(lambda: ran.append("late"), "late")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert ran == ["late"] and len(steps) == n

    run(body())


@pytest.mark.parametrize("where", ["mail", "default action"])
def test_exception_propagates_out_of_the_loop(where: str) -> None:
    async def body() -> None:
        async def step(ctl: Controller) -> None:
            if where == "default action":
                raise ValueError("boom in step")

        def bad_mail() -> None:
            raise ValueError("boom in mail")

        ends: list[tuple[str, BaseException | None]] = []
        proc = MailboxProcessor(step, on_mail_end=lambda info, err: ends.append((info.what, err)))
        if where == "mail":
            proc.get_main_executor().execute(bad_mail, "bad")
            proc.get_main_executor().execute(lambda: None, "after")
        with pytest.raises(ValueError, match="boom"):
            await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert ends[-1][0] == where and isinstance(ends[-1][1], ValueError)
        assert not proc.is_running and proc.current is None
        assert proc.mailbox.state is MailboxState.OPEN  # failing does not quiesce/close
        if where == "mail":
            assert kinds(proc.mailbox) == ["after"]
            assert proc.default_action_steps == 0

    run(body())


def test_suspend_from_a_mail_stops_after_that_mail_and_keeps_the_rest() -> None:
    async def body() -> None:
        steps: list[int] = []
        proc = MailboxProcessor(lambda ctl: steps.append(1))
        main = proc.get_main_executor()
        main.execute(proc.suspend, "stop")
        main.execute(lambda: None, "later")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert steps == [] and kinds(proc.mailbox) == ["later"]
        # Running again continues (Flink: suspended = !mailboxLoopRunning).
        main.execute(proc.all_actions_completed, "done")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert len(proc.mailbox) == 0

    run(body())


def test_loop_cannot_run_twice_at_once() -> None:
    async def body() -> None:
        proc = MailboxProcessor(lambda ctl: asyncio.sleep(0.01))
        t = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_running)
        with pytest.raises(MailboxStateError):
            await proc.run_mailbox_loop()
        proc.suspend()
        await asyncio.wait_for(t, 1.0)

    run(body())


# ------------------------------------------------------------------------ suspension / resume


def test_suspended_default_action_blocks_in_take_runs_mails_and_resumes_via_resume_mail() -> None:
    async def body() -> None:
        log: list[str] = []
        run_kinds: list[str] = []
        holder: dict[str, Suspension] = {}

        async def step(ctl: Controller) -> None:
            log.append(f"step{proc.default_action_steps}")
            if proc.default_action_steps == 1:
                holder["s"] = ctl.suspend_default_action("waiting for instant")
            else:
                ctl.all_actions_completed()

        proc = MailboxProcessor(step, on_mail_start=lambda info: run_kinds.append(info.kind))
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_waiting_for_mail)
        assert not proc.is_default_action_available()
        assert proc.current is None  # waiting for mail, not running anything
        assert proc.describe()["suspension_reason"] == "waiting for instant"

        for k in ("a", "b"):
            proc.get_main_executor().execute(lambda k=k: log.append(k), k)
            await wait_until(lambda k=k: log[-1] == k)
            await wait_until(lambda: proc.is_waiting_for_mail)
        assert log == ["step1", "a", "b"]  # mails ran, the default action did not
        assert proc.default_action_steps == 1

        assert not is_in_mailbox_thread(proc)
        holder["s"].resume()
        assert proc.mailbox.find("resume") == 0  # put first, at MAX_PRIORITY
        assert proc.mailbox.snapshot()[0].priority == MAX_PRIORITY
        holder["s"].resume()  # idempotent: no second resume mail
        assert kinds(proc.mailbox) == ["resume"]
        await asyncio.wait_for(loop_task, 1.0)
        assert log == ["step1", "a", "b", "step2"]
        assert run_kinds == ["defaultAction", "a", "b", "resume", "defaultAction"]
        assert holder["s"].is_resumed and proc.is_default_action_available()

    run(body())


def test_resume_from_inside_a_mail_is_direct() -> None:
    async def body() -> None:
        run_kinds: list[str] = []
        seen_inside: list[bool] = []
        holder: dict[str, Suspension] = {}

        async def step(ctl: Controller) -> None:
            if proc.default_action_steps == 1:
                holder["s"] = ctl.suspend_default_action()
            else:
                ctl.all_actions_completed()

        def wake() -> None:
            seen_inside.append(is_in_mailbox_thread(proc))
            holder["s"].resume()
            assert proc.is_default_action_available()  # resumed synchronously
            assert proc.mailbox.find("resume") is None

        proc = MailboxProcessor(step, on_mail_start=lambda info: run_kinds.append(info.kind))
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_waiting_for_mail)
        proc.get_main_executor().execute(wake, "wake")
        await asyncio.wait_for(loop_task, 1.0)
        assert seen_inside == [True]
        assert run_kinds == ["defaultAction", "wake", "defaultAction"]

    run(body())


def test_suspend_from_another_coroutine_wakes_a_loop_blocked_in_take() -> None:
    async def body() -> None:
        async def step(ctl: Controller) -> None:
            ctl.suspend_default_action()

        proc = MailboxProcessor(step)
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_waiting_for_mail)
        proc.suspend()
        await asyncio.wait_for(loop_task, 1.0)
        assert len(proc.mailbox) == 0  # no stray control mail left behind
        assert proc.default_action_steps == 1

    run(body())


def test_all_actions_completed_from_another_coroutine_wakes_a_loop_blocked_in_take() -> None:
    async def body() -> None:
        async def step(ctl: Controller) -> None:
            ctl.suspend_default_action()

        proc = MailboxProcessor(step)
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_waiting_for_mail)
        proc.all_actions_completed()
        await asyncio.wait_for(loop_task, 1.0)
        assert len(proc.mailbox) == 0 and proc.default_action_steps == 1

    run(body())


def test_completion_while_suspended_still_runs_the_pending_mails() -> None:
    """all_actions_completed from a mail run while the default action is suspended: the mails
    put after it still run before the loop ends, and the default action does not run again."""

    async def body() -> None:
        log: list[str] = []

        async def step(ctl: Controller) -> None:
            log.append("step")
            ctl.suspend_default_action()

        def finish() -> None:
            log.append("finish")
            proc.all_actions_completed()
            proc.get_main_executor().execute(lambda: log.append("tail"), "tail")

        proc = MailboxProcessor(step)
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_waiting_for_mail)
        proc.get_main_executor().execute(finish, "finish")
        await asyncio.wait_for(loop_task, 1.0)
        assert log == ["step", "finish", "tail"]

    run(body())


def test_resume_mail_overtakes_queued_mails() -> None:
    """resume from outside is put FIRST: it runs before mails already queued, and the default
    action runs before them too (the blocking phase ends as soon as it is resumed)."""

    async def body() -> None:
        log: list[str] = []
        gate = asyncio.Event()
        holder: dict[str, Suspension] = {}

        async def step(ctl: Controller) -> None:
            log.append(f"step{proc.default_action_steps}")
            if proc.default_action_steps == 1:
                holder["s"] = ctl.suspend_default_action()
            else:
                ctl.all_actions_completed()

        async def slow() -> None:
            log.append("slow")
            await gate.wait()

        proc = MailboxProcessor(
            step, on_mail_start=lambda info: log.append(info.kind) if info.kind == "resume" else None
        )
        main = proc.get_main_executor()
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.is_waiting_for_mail)
        main.execute(slow, "slow")
        await wait_until(lambda: log[-1:] == ["slow"])
        main.execute(lambda: log.append("x"), "x")
        holder["s"].resume()  # the loop is busy in "slow", not in take
        assert kinds(proc.mailbox) == ["resume", "x"]
        gate.set()
        await asyncio.wait_for(loop_task, 1.0)
        assert log == ["step1", "slow", "resume", "step2", "x"]

    run(body())


def test_suspend_default_action_rules() -> None:
    async def body() -> None:
        errors: list[str] = []

        async def step(ctl: Controller) -> None:
            ctl.suspend_default_action()
            with pytest.raises(MailboxStateError, match="already"):
                ctl.suspend_default_action()
            errors.append("checked")
            ctl.all_actions_completed()

        proc = MailboxProcessor(step)
        with pytest.raises(MailboxStateError, match="mailbox thread"):
            proc.controller.suspend_default_action()  # not on the mailbox thread
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert errors == ["checked"]

    run(body())


def test_task_spawned_from_a_mail_is_not_the_mailbox_thread() -> None:
    async def body() -> None:
        seen: dict[str, bool] = {}

        async def spawned() -> None:
            seen["child"] = is_in_mailbox_thread()

        async def m() -> None:
            seen["mail"] = is_in_mailbox_thread()
            await asyncio.create_task(spawned())

        proc = MailboxProcessor(lambda ctl: ctl.all_actions_completed())
        proc.get_main_executor().execute(m, "m")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert seen == {"mail": True, "child": False}
        assert not is_in_mailbox_thread()

    run(body())


# -------------------------------------------------------------------------- executors / yield


def test_operator_yield_never_runs_an_operator_event() -> None:
    async def body() -> None:
        proc = MailboxProcessor(lambda ctl: None)
        main = proc.get_main_executor()
        op = proc.get_mailbox_executor(OPERATOR_PRIORITY)
        assert (main.priority, op.priority) == (MIN_PRIORITY, OPERATOR_PRIORITY)
        assert proc.get_mailbox_executor(OPERATOR_PRIORITY) is op
        acked: list[int] = []
        main.execute(lambda: acked.append(2), "CommitAckEvent", "CommitAckEvent(ckp=2)")

        assert await op.try_yield() is False
        assert acked == [] and proc.mailbox.find("CommitAckEvent") == 0
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(op.yield_(), SHORT)  # blocks: the event does not qualify
        assert acked == [] and kinds(proc.mailbox) == ["CommitAckEvent"]

        notified: list[str] = []
        proc.get_mailbox_executor(MAX_PRIORITY).execute(lambda: notified.append("ckp2"), "notifyCheckpointComplete")
        await asyncio.wait_for(op.yield_(), 1.0)  # a MAX_PRIORITY mail qualifies
        assert notified == ["ckp2"] and acked == []
        assert kinds(proc.mailbox) == ["CommitAckEvent"]

        assert await main.try_yield() is True  # only the main executor runs the event
        assert acked == [2] and len(proc.mailbox) == 0
        assert await main.try_yield() is False

    run(body())


def test_yield_inside_the_loop_at_min_priority_unblocks_operator_priority_does_not() -> None:
    """The contrast behind the deadlock: waiting via the main executor's yield runs the event;
    waiting via an operator executor's yield cannot."""

    async def scenario(priority: int) -> bool:
        acked = asyncio.Event()
        stack_seen: list[list[str]] = []

        async def step(ctl: Controller) -> None:
            ex = proc.get_mailbox_executor(priority)
            while not acked.is_set():
                await ex.yield_()
            stack_seen.append([i.what for i in proc.stack])
            ctl.all_actions_completed()

        def ack() -> None:
            stack_seen.append([i.what for i in proc.stack])
            acked.set()

        proc = MailboxProcessor(step)
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.current is not None)
        proc.get_main_executor().execute(ack, "CommitAckEvent")
        try:
            await asyncio.wait_for(asyncio.shield(loop_task), BLOCKED)
        except asyncio.TimeoutError:
            assert proc.mailbox.find("CommitAckEvent") == 0
            await cancel(loop_task)
            return False
        # The event ran nested inside the default action's yield.
        assert stack_seen == [["default action", "mail"], ["default action"]]
        return True

    assert run(scenario(MIN_PRIORITY)) is True
    assert run(scenario(OPERATOR_PRIORITY)) is False


def test_submit_delivers_result_and_error_to_the_future_not_the_loop() -> None:
    async def body() -> None:
        proc = MailboxProcessor(lambda ctl: ctl.all_actions_completed())
        main = proc.get_main_executor()
        ok = main.submit(lambda: 42, "ok")

        def boom() -> None:
            raise KeyError("x")

        bad = main.submit(boom, "bad")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)  # does not raise
        assert await ok == 42
        with pytest.raises(KeyError):
            await bad

    run(body())


def test_execute_on_a_closed_mailbox_raises() -> None:
    mb = TaskMailbox()
    ex = MailboxExecutor(mb, MIN_PRIORITY)
    mb.close()
    with pytest.raises(MailboxClosedError):
        ex.execute(lambda: None, "late")


# ----------------------------------------------------------------------- the blocking property


def test_blocking_default_action_deadlocks_on_its_own_mailbox() -> None:
    """The task awaits an event only a queued mail would set: it never completes, the releasing
    mail stays at position 0, `current` names the default action, and other coroutines keep
    running (they can still put mails and read the snapshot)."""
    clock = FakeClock()

    async def body() -> None:
        ack = asyncio.Event()

        async def step(ctl: Controller) -> None:
            await ack.wait()  # blocks the mailbox thread
            ctl.all_actions_completed()

        proc = MailboxProcessor(step, TaskMailbox(clock=clock))
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: proc.current is not None)
        proc.get_main_executor().execute(ack.set, "CommitAckEvent", "CommitAckEvent(ckp=2)")

        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(loop_task), BLOCKED)
        assert not loop_task.done() and not ack.is_set()

        cur = proc.current
        assert cur is not None
        assert cur.what == "default action" and cur.kind == "defaultAction"
        assert cur.seq is None and cur.started_at == 100.0
        assert "step" in cur.description  # the default action's name

        # Other coroutines are alive: they can put mails and introspect.
        proc.get_mailbox_executor(MAX_PRIORITY).execute(lambda: None, "notifyCheckpointComplete")
        clock.now += 3.0
        snap = proc.mailbox.snapshot()
        assert [(m.position, m.kind) for m in snap] == [(0, "CommitAckEvent"), (1, "notifyCheckpointComplete")]
        assert snap[0].description == "CommitAckEvent(ckp=2)"
        assert snap[0].waited_s == 3.0
        assert proc.mailbox.find("CommitAckEvent") == 0
        assert proc.describe()["current"].what == "default action"
        assert proc.mails_run == 0

        # Breaking the cycle from outside lets the step finish and the mails run.
        ack.set()
        await asyncio.wait_for(loop_task, 1.0)
        assert len(proc.mailbox) == 0 and proc.mails_run == 2

    run(body())


def test_awaiting_mail_blocks_later_mails_and_current_names_it() -> None:
    async def body() -> None:
        gate = asyncio.Event()
        ran: list[str] = []

        async def slow() -> None:
            ran.append("slow")
            await gate.wait()

        proc = MailboxProcessor(lambda ctl: ctl.all_actions_completed())
        main = proc.get_main_executor()
        slow_mail = main.execute(slow, "slow", "slow mail")
        main.execute(lambda: ran.append("next"), "next")
        loop_task = asyncio.create_task(proc.run_mailbox_loop())
        await wait_until(lambda: ran == ["slow"])
        await asyncio.sleep(SHORT)
        assert ran == ["slow"]  # the next mail waits for the blocked one
        cur = proc.current
        assert cur is not None and cur.what == "mail" and cur.kind == "slow"
        assert cur.description == "slow mail" and cur.seq == slow_mail.seq
        assert kinds(proc.mailbox) == ["next"]
        gate.set()
        await asyncio.wait_for(loop_task, 1.0)
        assert ran == ["slow", "next"] and proc.current is None

    run(body())


def test_hooks_record_every_mail_and_step_with_durations() -> None:
    clock = FakeClock()

    async def body() -> None:
        starts: list[dict[str, Any]] = []
        ends: list[tuple[dict[str, Any], BaseException | None]] = []

        async def step(ctl: Controller) -> None:
            clock.now += 0.25
            ctl.all_actions_completed()

        def m() -> None:
            clock.now += 1.0

        proc = MailboxProcessor(
            step,
            TaskMailbox(clock=clock),
            on_mail_start=lambda info: starts.append(dataclasses.replace(info)),
            on_mail_end=lambda info, err: ends.append((info, err)),
        )
        proc.get_main_executor().execute(m, "CommitAckEvent", "CommitAckEvent(ckp=1)")
        await asyncio.wait_for(proc.run_mailbox_loop(), 1.0)
        assert [(s.what, s.kind) for s in starts] == [
            ("mail", "CommitAckEvent"),
            ("default action", "defaultAction"),
        ]
        assert starts[0].description == "CommitAckEvent(ckp=1)" and starts[0].seq == 0
        assert starts[0].started_at == 100.0 and starts[1].started_at == 101.0
        assert [(e.what, e.ended_at - e.started_at, err) for e, err in ends] == [
            ("mail", 1.0, None),
            ("default action", 0.25, None),
        ]

    run(body())
