"""Flink's mailbox loop since FLINK-14304 (Flink 1.10+): each drain runs only the mails present
when it starts, so a mail that re-queues itself cannot starve the default action; and
MailboxProcessor.close cancels the futures of the mails it drops (Mail.tryCancel)."""

from __future__ import annotations

import asyncio

from harness import run_virtual

from runtime.flink.mailbox import Controller, Mail, MailboxProcessor, TaskMailbox


def test_a_mail_that_requeues_itself_does_not_starve_the_default_action() -> None:
    steps: list[int] = []
    runs: list[int] = []

    async def body() -> None:
        proc: MailboxProcessor

        async def again() -> None:
            runs.append(1)
            proc.get_main_executor().execute(again, "again")  # re-queues itself every time
            await asyncio.sleep(0)  # (so a starved loop still lets the test's timeout fire)

        async def step(ctl: Controller) -> None:
            steps.append(proc.default_action_steps)
            if len(steps) == 3:
                ctl.all_actions_completed()

        proc = MailboxProcessor(step)
        proc.get_main_executor().execute(again, "again")
        await asyncio.wait_for(proc.run_mailbox_loop(), 2.0)

    run_virtual(body())
    assert steps == [1, 2, 3]
    assert len(runs) == 4  # one run per batch: before each step, and the drain after completion


def test_a_batch_holds_the_mails_present_when_it_was_created() -> None:
    box = TaskMailbox()
    box.put(Mail(lambda: None, kind="a"))
    assert box.create_batch()
    box.put(Mail(lambda: None, kind="b"))
    first = box.try_take_from_batch()
    assert first is not None and first.kind == "a"
    assert box.try_take_from_batch() is None  # b arrived after the batch was made
    assert [m.kind for m in box.snapshot()] == ["b"]
    later = box.try_take(0)
    assert later is not None and later.kind == "b"


def test_close_cancels_the_futures_of_the_mails_it_drops() -> None:
    async def body() -> tuple[asyncio.Future[object], list[Mail]]:
        proc = MailboxProcessor(lambda ctl: None)
        fut = proc.get_main_executor().submit(lambda: 42, "never runs")
        dropped = proc.close()
        return fut, dropped

    fut, dropped = run_virtual(body())
    assert [m.kind for m in dropped] == ["never runs"]
    assert fut.cancelled()


def test_close_drops_batched_mails_too_and_a_second_close_drops_nothing() -> None:
    box = TaskMailbox()
    box.put(Mail(lambda: None, kind="a"))
    box.create_batch()
    box.put(Mail(lambda: None, kind="b"))
    assert [m.kind for m in box.close()] == ["a", "b"]
    assert box.close() == []
