"""P1 ``operator-event`` (Hudi 0.10, before PR #3915): poll the timeline, unblock with CommitAckEvent.

Hudi 0.10 ``hudi-flink`` ``org.apache.hudi.sink.common.AbstractStreamWriteFunction``:

- ``initializeState``: ``currentInstant = lastPendingInstant()``; ``confirming = true`` ("blocks
  flushing until the coordinator starts a new instant"). ``StreamWriteFunction.flushRemaining``
  (the barrier) sets ``confirming = true`` again after its flush.
- ``lastPendingInstant()`` = ``StreamerUtil.getLastPendingInstant(metaClient)``: reload the active
  timeline (a listing of ``.hoodie`` per call, per task) and take its last pending commit.
- ``instantToWrite(hasData)``: ``instant = lastPendingInstant()``; while ``confirming``: if the
  instant is null or (equals ``currentInstant`` and the task has data), ``TimeWait.waitFor()``
  (sleep 1 s; throws "Timeout(<n>ms) while waiting for instant initialize" once the counted sleep
  exceeds ``write.commit.ack.timeout``, which ``HoodieTableSink`` sets to the checkpoint timeout)
  and poll again; else ``confirming = false``. Eager flushes pass ``hasData = true``.
- ``handleOperatorEvent(CommitAckEvent)``: ``confirming = false``. Flink runs it as a mail of the
  lowest priority, so it cannot run while the mailbox thread sits in ``instantToWrite``.
- ``StreamWriteOperatorCoordinator.sendCommitAckEvents``: after a round with no data (the instant
  is reused, so polling sees no change) and, in 0.10, after an aborted checkpoint.

The loop (:class:`ConfirmingWriter`) is the same in 0.11 to 1.0, only ``lastPendingInstant``
reads the ckp_meta directory instead of the timeline: :mod:`runtime.protocols.ckp_meta` and
:mod:`runtime.protocols.timeline_server` subclass it. If the task is already waiting inside a
flush (instant unchanged and it has data), the ack's mail can never run on the blocked mailbox
thread: the deadlock the DFS message bus was built to remove.
"""

from __future__ import annotations

import abc
from typing import Any

from runtime.core.env import Env
from runtime.core.messages import BlockedWait, CommitAckEvent
from runtime.protocols.base import CoordinatorSide, InstantWaitTimeout, Protocol, WriterContext, WriterSide


class TimeWait:
    """``org.apache.hudi.sink.utils.TimeWait``: each ``wait_for`` sleeps one interval and counts it;
    once the counted sleep exceeds the timeout it throws instead (so a timeout of T with a tick of
    1 s fails after T + 1 s of sleep: Hudi's "Timeout(601000ms)" for a 10 min checkpoint timeout)."""

    def __init__(self, env: Env, timeout_s: float, interval_s: float, action: str = "instant initialize") -> None:
        self.env = env
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.action = action
        self.waited_s = 0.0

    def expired(self) -> bool:
        return self.waited_s > self.timeout_s

    async def wait_for(self) -> None:
        await self.env.sleep(self.interval_s)
        self.waited_s += self.interval_s

    def error(self, why: str) -> InstantWaitTimeout:
        return InstantWaitTimeout(
            f"{self.env.role}: Timeout({self.waited_s * 1000:.0f}ms) while waiting for {self.action}: {why}"
        )


class ConfirmingWriter(WriterSide):
    """``AbstractStreamWriteFunction``'s ``confirming`` flag, ``instantToWrite`` and
    ``handleOperatorEvent``; subclasses say where ``lastPendingInstant`` comes from."""

    # words for the blocked-wait record: what, besides the CommitAckEvent, ends the wait
    instant_source = "a new pending instant"

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.confirming = True  # blocks flushing until the coordinator starts a new instant
        self.acks_received = 0
        self.polls = 0
        self._initial: str | None = None

    @abc.abstractmethod
    async def last_pending_instant(self) -> str | None:
        """The instant source: the timeline (0.10) or ckp_meta (0.11 to 1.0)."""

    def wait_timeout_s(self) -> float:
        """``write.commit.ack.timeout`` (= the checkpoint timeout, set by ``HoodieTableSink``)."""
        return self.ctx.config.instant_wait_timeout

    async def timeout_diagnosis(self, instant: str | None) -> str:
        """What the wait saw when it gave up (subclasses add what they can check)."""
        if instant is None:
            return "no pending instant, and no CommitAckEvent ran"
        return f"the last pending instant is still {instant} (the current one) and no CommitAckEvent ran"

    async def open(self) -> None:
        # initializeState: currentInstant = lastPendingInstant(); confirming = true
        self._initial = await self.last_pending_instant()
        self.confirming = True

    def initial_instant(self) -> str | None:
        return self._initial

    async def _poll(self) -> str | None:
        self.polls += 1
        return await self.last_pending_instant()

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        env, cfg = self.ctx.env, self.ctx.config
        instant = await self._poll()
        wait = TimeWait(env, self.wait_timeout_s(), cfg.wait_tick_s)
        blocked = False
        try:
            while self.confirming:
                if instant is None or (instant == self.ctx.current_instant and has_data):
                    if wait.expired():
                        raise wait.error(await self.timeout_diagnosis(instant))
                    if not blocked:
                        blocked = True
                        self.ctx.set_blocked(
                            BlockedWait(
                                what="instant initialize",
                                waiting_on=f"{self.instant_source} (polled every {cfg.wait_tick_s}s) "
                                "or a CommitAckEvent",
                                since=env.now(),
                                releasing_mail="CommitAckEvent",
                                checkpoint_id=self.ctx.last_checkpoint_id + 1,
                            )
                        )
                    await wait.wait_for()
                    instant = await self._poll()
                else:
                    # the pending instant changed: the last one was committed
                    self.confirming = False
        finally:
            if blocked:
                self.ctx.set_blocked(None)
        return instant

    def on_snapshot(self, checkpoint_id: int) -> None:
        self.confirming = True  # flushRemaining: wait for the next instant

    def on_operator_event(self, event: Any) -> None:
        if isinstance(event, CommitAckEvent):
            self.acks_received += 1
            self.confirming = False

    def describe(self) -> dict[str, Any]:
        return {"confirming": self.confirming, "acks_received": self.acks_received, "polls": self.polls}


class OperatorEventWriter(ConfirmingWriter):
    instant_source = "a new pending instant on the timeline"

    async def last_pending_instant(self) -> str | None:
        # StreamerUtil.getLastPendingInstant: reload the timeline, last pending commit
        return await self.ctx.env.io(self.ctx.table.last_pending_instant)

    def wait_timeout_s(self) -> float:
        # write.commit.ack.timeout has its own field here (and CLI flag) for the deadlock scenarios
        return self.ctx.config.commit_ack_timeout_s


class CommitAckSender(CoordinatorSide):
    """``sendCommitAckEvents``: one ``CommitAckEvent(ckp)`` to every write task."""

    def send_commit_acks(self, checkpoint_id: int) -> None:
        for task in self.ctx.task_names:
            self.ctx.env.send(task, "operator_event", CommitAckEvent(checkpoint_id))


class OperatorEventCoordinator(CommitAckSender):
    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        self.send_commit_acks(checkpoint_id)

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        self.send_commit_acks(checkpoint_id)


class OperatorEventProtocol(Protocol):
    name = "operator-event"
    description = "P1: writers poll the DFS timeline; CommitAckEvent operator events (Hudi 0.10)"
    writer_side = OperatorEventWriter
    coordinator_side = OperatorEventCoordinator
