"""P1 ``operator-event`` (Hudi 0.9/0.10): poll the timeline, unblock with CommitAckEvent.

Writers find the instant by listing the DFS timeline for the last pending instant. After an empty
or aborted round the coordinator reuses the instant, so polling sees no change; it sends a
``CommitAckEvent`` operator event instead, which the task runs as a lowest-priority mail. If the
task is already waiting inside a flush (instant unchanged and it has data), that mail can never run
on the blocked mailbox thread: the deadlock the DFS message bus was built to remove.
"""

from __future__ import annotations

from typing import Any

from runtime.core.env import BlockedWait
from runtime.core.messages import CommitAckEvent
from runtime.protocols.base import CoordinatorSide, InstantWaitTimeout, Protocol, WriterSide


class OperatorEventWriter(WriterSide):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.confirming = True  # blocks flushing until the coordinator starts a new instant
        self.acks_received = 0

    def initial_instant(self) -> str | None:
        # Hudi 0.10 initializeState: currentInstant = lastPendingInstant()
        return self._initial

    async def open(self) -> None:
        self._initial = await self.ctx.env.io(self.ctx.table.last_pending_instant)

    async def _poll(self) -> str | None:
        return await self.ctx.env.io(self.ctx.table.last_pending_instant)

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        env, cfg = self.ctx.env, self.ctx.config
        instant = await self._poll()
        started = env.now()
        blocked = False
        try:
            while self.confirming:
                if instant is None or (instant == self.ctx.current_instant and has_data):
                    waited = env.now() - started
                    if waited >= cfg.commit_ack_timeout_s:
                        raise InstantWaitTimeout(
                            f"{env.role}: Timeout({cfg.commit_ack_timeout_s:.1f}s) while waiting for "
                            f"instant initialize: the timeline's last pending instant is still "
                            f"{instant} and no CommitAckEvent ran"
                        )
                    if not blocked:
                        blocked = True
                        self.ctx.set_blocked(
                            BlockedWait(
                                what="instant initialize",
                                waiting_on=(
                                    "a new pending instant on the timeline (polled every "
                                    f"{cfg.wait_tick_s}s) or a CommitAckEvent"
                                ),
                                since=started,
                                releasing_mail="CommitAckEvent",
                                checkpoint_id=self.ctx.last_checkpoint_id + 1,
                            )
                        )
                    await env.sleep(cfg.wait_tick_s)
                    instant = await self._poll()
                else:
                    # the pending instant changed: the last one was committed
                    self.confirming = False
        finally:
            if blocked:
                self.ctx.set_blocked(None)
        return instant

    def on_snapshot(self, checkpoint_id: int) -> None:
        self.confirming = True

    def on_operator_event(self, event: Any) -> None:
        if isinstance(event, CommitAckEvent):
            self.acks_received += 1
            self.confirming = False

    def describe(self) -> dict[str, Any]:
        return {"confirming": self.confirming, "acks_received": self.acks_received}


class OperatorEventCoordinator(CoordinatorSide):
    async def _send_acks(self, checkpoint_id: int) -> None:
        for task in self.ctx.task_names:
            self.ctx.env.send(task, "operator_event", CommitAckEvent(checkpoint_id))

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        await self._send_acks(checkpoint_id)

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        await self._send_acks(checkpoint_id)


class OperatorEventProtocol(Protocol):
    name = "operator-event"
    description = "P1: writers poll the DFS timeline; CommitAckEvent operator events (Hudi 0.10)"
    writer_side = OperatorEventWriter
    coordinator_side = OperatorEventCoordinator
