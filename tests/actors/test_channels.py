"""A sender's messages to a process start in the order sent, whatever order Ray starts them in."""

from __future__ import annotations

import asyncio

import pytest
from harness import run_virtual

from actors.channels import InOrder, Outbox


def test_an_outbox_numbers_each_destination_from_zero_and_a_new_incarnation_is_a_new_channel():
    box = Outbox("writer-0")
    assert [box.number("jm"), box.number("jm"), box.number("tm-1"), box.number("jm")] == [0, 1, 0, 2]
    assert box.channel.startswith("writer-0#")
    assert Outbox("writer-0").channel != box.channel  # a restarted role starts a fresh channel


async def _arrive(gate: InOrder, channel: str, order: list[int], started: list[int], stagger_s: float) -> None:
    """The messages of ``channel`` reach the gate in ``order`` (as Ray may start them); each
    handler records when it begins, then awaits (as a handler waiting on its own would)."""

    async def handler(seq: int) -> int:
        started.append(seq)
        await asyncio.sleep(0.01 * (5 - seq))  # the earlier ones finish later: order is of starts only
        return seq

    calls = []
    for seq in order:
        calls.append(asyncio.ensure_future(gate.run(channel, seq, lambda seq=seq: handler(seq))))
        await asyncio.sleep(stagger_s)
    assert sorted(await asyncio.gather(*calls)) == sorted(order)


def test_messages_that_arrive_out_of_order_start_in_the_senders_order():
    gate, started = InOrder(gap_wait_s=5.0), []
    run_virtual(_arrive(gate, "writer-0#a", [2, 0, 3, 1, 4], started, stagger_s=0.002))
    assert started == [0, 1, 2, 3, 4]
    assert gate.held == 2 and gate.gaps == 0  # 2 and 3 waited
    assert gate.waiting() == 0  # nothing is left held back


def test_channels_are_independent():
    async def both() -> tuple[list[int], list[int]]:
        gate, a, b = InOrder(gap_wait_s=5.0), [], []
        await asyncio.gather(
            _arrive(gate, "writer-0#a", [1, 0, 2], a, stagger_s=0.001),
            _arrive(gate, "writer-1#b", [0, 2, 1], b, stagger_s=0.001),
        )
        return a, b

    assert run_virtual(both()) == ([0, 1, 2], [0, 1, 2])


def test_the_handler_of_an_earlier_message_begins_before_a_later_one_is_let_through():
    """The order is of handler starts: the gate lets the next message through only once the
    previous handler's first step is queued, so even a handler that never waits is first."""

    async def scenario() -> list[str]:
        gate, log = InOrder(gap_wait_s=5.0), []

        async def handler(name: str) -> None:
            log.append(name)

        later = asyncio.ensure_future(gate.run("c", 1, lambda: handler("ack")))
        await asyncio.sleep(0)
        await gate.run("c", 0, lambda: handler("write event"))
        await later
        return log

    assert run_virtual(scenario()) == ["write event", "ack"]


def test_a_gap_is_waited_for_boundedly_then_counted_and_the_later_messages_go_on():
    async def scenario() -> tuple[list[int], InOrder]:
        gate, started = InOrder(gap_wait_s=0.05), []

        async def handler(seq: int) -> None:
            started.append(seq)

        # message 1 never arrives (its call failed in Ray): 2 waits for it, then goes on
        await gate.run("c", 0, lambda: handler(0))
        await gate.run("c", 2, lambda: handler(2))
        await gate.run("c", 3, lambda: handler(3))
        await gate.run("c", 1, lambda: handler(1))  # it came after all: late, not held
        return started, gate

    started, gate = run_virtual(scenario())
    assert started == [0, 2, 3, 1]
    assert gate.gaps == 1 and gate.held == 1


def test_a_failing_handler_does_not_stall_the_channel():
    async def scenario() -> list[str]:
        gate, log = InOrder(gap_wait_s=5.0), []

        async def fails() -> None:
            log.append("0")
            raise ValueError("no such RPC method")

        async def fine() -> None:
            log.append("1")

        later = asyncio.ensure_future(gate.run("c", 1, fine))
        with pytest.raises(ValueError):
            await gate.run("c", 0, fails)
        await later
        return log

    assert run_virtual(scenario()) == ["0", "1"]
