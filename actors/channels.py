"""One sender's messages to one process start in the order sent, as Flink's RPC delivers them.

Flink's RPC runs on Akka (Pekko from Flink 1.18): an endpoint's messages are handled one at a time
from its actor's mailbox (``flink-rpc-akka``: ``AkkaRpcActor`` / ``PekkoRpcActor``), and Akka
delivers the messages of one sender to one receiver in the order they were sent (Akka's "message
ordering per sender-receiver pair"). So a write task's operator event
(``JobMaster.sendOperatorEventToCoordinator``) is handled before the same task's later checkpoint
acknowledgement (``JobMaster.acknowledgeCheckpoint``).

Ray keeps a submitter's order only for synchronous actors (Ray's "Actor Task Execution Order"); the
process actors are async, because a blocked mailbox must block only its own task, and Ray may start
a later call first (for instance while an earlier call's argument is still being fetched). So each
sending role numbers its messages per destination process (:class:`Outbox`), and the receiving
process starts each channel's messages in that order (:class:`InOrder`).

* A channel is one incarnation of a sending role to one process actor: a role that restarts is a
  new sender (its numbers start again), and a process that restarts is a new actor (so is its
  numbering), as a restarted Flink task or job master opens new connections.
* A message lost by a fault is never numbered, so it holds up nothing. A message delayed by a fault
  is numbered when it is sent and submitted late, so the ones sent after it wait for it (up to
  ``gap_wait_s``): one connection delivers in order, as Pekko's TCP transport does, and a late
  write-metadata event cannot be overtaken by its task's checkpoint acknowledgement.

Deliberate difference (a bound, not a behaviour): a message that never reaches the receiver's
gate (its Ray call failed before it started) is waited for at most ``gap_wait_s``; then the later
ones go on, and the gap is counted (``InOrder.gaps``) so a run can report it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from runtime.core.env import bounded

GAP_WAIT_S = 30.0
T = TypeVar("T")


class Outbox:
    """The sending side: a channel name for this incarnation, the next number per destination."""

    def __init__(self, role: str) -> None:
        self.channel = f"{role}#{uuid.uuid4().hex[:12]}"
        self._next: defaultdict[str, int] = defaultdict(int)

    def number(self, destination: str) -> int:
        """The next sequence number on the channel to ``destination`` (a process actor's id)."""
        seq = self._next[destination]
        self._next[destination] = seq + 1
        return seq


class InOrder:
    """The receiving side: a message of a channel starts only after every earlier one of it."""

    def __init__(self, gap_wait_s: float = GAP_WAIT_S) -> None:
        self.gap_wait_s = gap_wait_s
        self.held = 0  # messages that arrived before an earlier one of their channel (and waited)
        self.gaps = 0  # earlier messages given up on (see the module's docstring)
        self._next: dict[str, int] = {}
        self._waiting: dict[str, dict[int, asyncio.Future[None]]] = defaultdict(dict)

    async def run(self, channel: str, seq: int, handle: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``handle()``'s result, started as a task once its turn on ``channel`` comes. The task's
        first step is queued before the next message of the channel is let through, so handlers
        begin in the sender's order; once begun they may wait concurrently (the process hosts
        several tasks, and one task's blocked wait must not hold up another's messages)."""
        await self.turn(channel, seq)
        try:
            started = asyncio.ensure_future(handle())
        finally:
            self.passed(channel, seq)
        return await started

    async def turn(self, channel: str, seq: int) -> None:
        """Returns once message ``seq`` of ``channel`` may start (every earlier one has started,
        or was waited for ``gap_wait_s``). The caller starts it, then calls :meth:`passed`."""
        expected = self._next.get(channel, 0)
        if seq <= expected:  # its turn, or an earlier gap was given up on and it came late after all
            return
        self.held += 1
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[channel][seq] = waiter
        try:
            await bounded(waiter, self.gap_wait_s)
        except asyncio.TimeoutError:
            self.gaps += seq - self._next.get(channel, 0)
            self._next[channel] = seq
        finally:
            self._waiting[channel].pop(seq, None)

    def passed(self, channel: str, seq: int) -> None:
        """Message ``seq`` of ``channel`` has started: the next one may."""
        following = max(self._next.get(channel, 0), seq + 1)
        self._next[channel] = following
        waiter = self._waiting[channel].get(following)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def waiting(self) -> int:
        """Messages held back now, waiting for an earlier one of their channel."""
        return sum(len(w) for w in self._waiting.values())
