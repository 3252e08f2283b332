"""A protocol of your own, in one file: copy this file, rename the class and its ``name``, run it.

    commitlab simulate --protocol path/to/my_protocol.py
    commitlab compare  --protocols message-bus,path/to/my_protocol.py
    commitlab explore  --scenario deadlock --protocol path/to/my_protocol.py:PollTimelineProtocol

The design is the simplest one Hudi shipped, P1 ``operator-event`` (Hudi 0.10 ``hudi-flink``,
``AbstractStreamWriteFunction.instantToWrite`` and ``StreamWriteOperatorCoordinator
.sendCommitAckEvents``; the lab's faithful model is ``runtime/protocols/operator_event.py``),
written here against the protocol API alone (docs/PROTOCOL_API.md):

- writer side: after (re)start and after each barrier the task is *confirming*: before it flushes
  it polls the timeline for the last pending instant, and waits while there is none, or while it is
  the instant it wrote last (and it has data), one tick at a time, bounded by
  ``--commit-ack-timeout``; a ``CommitAckEvent`` from the coordinator also ends the wait.
- coordinator side: the shared coordinator starts an instant at bootstrap and after each commit
  (``eager_instants``); this side only sends a ``CommitAckEvent`` to every task when a round was
  empty or a checkpoint aborted, since the instant is then reused and polling sees no change.

It inherits P1's known failure: the ack runs as a mail on the mailbox thread the waiting flush
holds, so after an empty round a task with data waits until its timeout (the ``deadlock``
scenario). Changing that is what your own protocol is for.
"""

from __future__ import annotations

from typing import Any

from runtime.core.messages import BlockedWait, CommitAckEvent
from runtime.protocols.base import CoordinatorSide, InstantWaitTimeout, Protocol, WriterContext, WriterSide


class PollTimelineWriter(WriterSide):
    """Runs on the write task's mailbox thread: ``instant_to_write`` may block it (bounded)."""

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.confirming = True
        self.acks = 0
        self._initial: str | None = None

    async def open(self) -> None:
        self._initial = await self.ctx.env.io(self.ctx.table.last_pending_instant)
        self.confirming = True

    def initial_instant(self) -> str | None:
        return self._initial

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        env, cfg = self.ctx.env, self.ctx.config
        instant = await env.io(self.ctx.table.last_pending_instant)
        waited = 0.0
        try:
            while self.confirming and (instant is None or (instant == self.ctx.current_instant and has_data)):
                if waited > cfg.commit_ack_timeout_s:  # every wait is bounded
                    raise InstantWaitTimeout(
                        f"{env.role}: waited {waited:g}s for a new pending instant or a CommitAckEvent "
                        f"(last pending: {instant}); --commit-ack-timeout sets the bound"
                    )
                if waited == 0.0:  # what the report shows as this task's blocked time
                    self.ctx.set_blocked(
                        BlockedWait(
                            what="instant initialize",
                            waiting_on="a new pending instant on the timeline or a CommitAckEvent",
                            since=env.now(),
                            releasing_mail="CommitAckEvent",
                            checkpoint_id=self.ctx.last_checkpoint_id + 1,
                        )
                    )
                await env.sleep(cfg.wait_tick_s)
                waited += cfg.wait_tick_s
                instant = await env.io(self.ctx.table.last_pending_instant)
            self.confirming = False
        finally:
            if waited:
                self.ctx.set_blocked(None)
        return instant

    def on_snapshot(self, checkpoint_id: int) -> None:
        self.confirming = True  # the next flush belongs to the next instant

    def on_operator_event(self, event: Any) -> None:
        if isinstance(event, CommitAckEvent):
            self.acks += 1
            self.confirming = False

    def describe(self) -> dict[str, Any]:
        return {"confirming": self.confirming, "acks_received": self.acks}


class PollTimelineCoordinator(CoordinatorSide):
    """Runs inside the job's coordinator: it sees the rounds and may message every task."""

    def _ack_all(self, checkpoint_id: int) -> None:
        for task in self.ctx.task_names:
            self.ctx.env.send(task, "operator_event", CommitAckEvent(checkpoint_id))

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        self._ack_all(checkpoint_id)

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        self._ack_all(checkpoint_id)


class PollTimelineProtocol(Protocol):
    name = "my-poll-timeline"  # what results, tables and the report call it: make it your own
    description = "template: writers poll the timeline; CommitAckEvent after an empty or aborted round"
    writer_side = PollTimelineWriter
    coordinator_side = PollTimelineCoordinator
    release_table_version = 6  # the table version --table-version release writes
