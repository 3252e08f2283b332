"""The bounded wait every role and host uses (``runtime.core.env.bounded``).

The first two tests pin CPython's own asyncio loop (``asyncio.run``): what they show is a
property of the standard library. The others run in the shared test environment, on virtual time.
"""

from __future__ import annotations

import asyncio
import sys

import harness
import pytest

from runtime.core.env import bounded, wait_ended


async def _cancel_as_the_reply_lands(wait) -> str:
    """A caller waits on a reply; the reply lands and the caller is cancelled in the same loop
    iteration (a coordinator stopping its commit loop just as a publish returns)."""
    reply = asyncio.get_running_loop().create_future()
    caller = asyncio.ensure_future(wait(reply, 10.0))
    await asyncio.sleep(0)  # the caller now waits on the reply
    reply.set_result("appended")
    caller.cancel()
    try:
        await caller
    except asyncio.CancelledError:
        return "cancelled"
    return "ran on"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
def test_a_cancellation_that_meets_a_reply_is_not_lost():
    assert asyncio.run(_cancel_as_the_reply_lands(bounded)) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 rewrote wait_for on asyncio.timeout")
def test_wait_for_loses_it_which_is_why_the_hosts_do_not_use_it():
    """The CPython 3.11 behaviour a control-topic job hung on: wait_for returns the reply and the
    cancelled caller runs on. If this starts failing, wait_for was fixed; bounded still holds."""
    assert asyncio.run(_cancel_as_the_reply_lands(asyncio.wait_for)) == "ran on"


def test_a_bounded_wait_gives_up(sim):
    async def main() -> None:
        await bounded(asyncio.Event().wait(), 0.01)

    with pytest.raises(asyncio.TimeoutError):
        harness.run(main())


def test_waiting_for_a_task_to_end_is_bounded_and_takes_its_error():
    async def main() -> tuple[bool, bool, bool]:
        async def fails() -> None:
            raise RuntimeError("the loop's own error, already reported")

        endless = asyncio.ensure_future(asyncio.Event().wait())
        failing = asyncio.ensure_future(fails())
        gave_up = await wait_ended(endless, 0.01)
        ended = await wait_ended(failing, 1.0)
        still_running = not endless.done()  # giving up does not cancel what it waited for
        endless.cancel()
        return gave_up, ended, still_running

    unhandled: list[dict] = []
    with harness.opened() as sim:
        # the run collects, after the end, what the loop reported: an error never retrieved is
        # reported when its task is collected
        assert sim.run(main(), background_errors=unhandled) == (False, True, True)
    assert unhandled == []


async def _timeout_bounded(aw, timeout):
    """The standard library's bounded wait, the reference ``bounded`` keeps step for step."""
    async with asyncio.timeout(timeout):
        return await aw


async def _scenario(wait, name: str) -> tuple[str, str, int]:
    """(what the caller got, how it ended, the task's pending cancellations after)."""
    loop = asyncio.get_running_loop()

    async def swallows_cancel() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    async def caller() -> tuple[str, int]:
        me = asyncio.current_task()
        assert me is not None
        try:
            if name == "done":
                got = await wait(asyncio.sleep(0.001, "value"), 5.0)
            elif name == "expires":
                got = await wait(asyncio.Event().wait(), 0.001)
            elif name == "now":
                got = await wait(asyncio.Event().wait(), 0.0)
            elif name == "swallowed":
                got = await wait(swallows_cancel(), 0.001)
            else:  # nested: the outer bound fires first
                got = await wait(wait(asyncio.Event().wait(), 5.0), 0.001)
            return f"returned {got}", me.cancelling()
        except TimeoutError as exc:
            return f"TimeoutError from {type(exc.__cause__).__name__}", me.cancelling()

    task = loop.create_task(caller())
    await asyncio.sleep(0)
    try:
        got, cancelling = await task
        return got, "ended", cancelling
    except asyncio.CancelledError:
        return "", "cancelled", task.cancelling()


@pytest.mark.parametrize("name", ["done", "expires", "now", "swallowed", "nested"])
def test_a_bounded_wait_ends_as_the_standard_librarys_timeout_does(name):
    assert asyncio.run(_scenario(bounded, name)) == asyncio.run(_scenario(_timeout_bounded, name))


def test_a_bounded_wait_cancelled_from_outside_is_cancelled_not_timed_out():
    async def main(wait) -> tuple[str, int]:
        task = asyncio.ensure_future(wait(asyncio.Event().wait(), 5.0))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled", task.cancelling()
        return "ran on", task.cancelling()

    assert asyncio.run(main(bounded)) == asyncio.run(main(_timeout_bounded)) == ("cancelled", 1)
