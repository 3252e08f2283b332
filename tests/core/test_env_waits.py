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
