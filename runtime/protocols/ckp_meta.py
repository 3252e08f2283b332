"""P2b ``ckp-meta`` (CkpMetadata, Hudi 0.11 to 1.0): P1's wait loop reading ``.aux/ckp_meta``.

Hudi 0.11 to 1.0, ``hudi-flink``:

- ``AbstractStreamWriteFunction.lastPendingInstant()`` = ``ckpMetadata.lastPendingInstant()``
  (:mod:`runtime.hudi.timeline.ckp_meta`: one listing of the ckp_meta directory per call, per task) instead
  of the timeline; ``instantToWrite``, ``confirming`` and ``handleOperatorEvent(CommitAckEvent)``
  are P1's (:class:`~runtime.protocols.operator_event.ConfirmingWriter`).
- ``StreamWriteOperatorCoordinator``: ``start`` -> ``CkpMetadata.bootstrap`` (delete and recreate
  the directory); ``startInstant`` -> ``ckpMetadata.startInstant`` (after the timeline's
  requested -> inflight); ``doCommit`` -> ``ckpMetadata.commitInstant`` (the recommit at bootstrap
  too); ``commitInstant`` with no write status -> ``sendCommitAckEvents(ckp)`` (still sent after
  an empty round: the instant is reused, so the directory does not change);
  ``notifyCheckpointAborted(ckp)`` -> ``ckpMetadata.abortInstant(instant)`` only when ``ckp`` is
  the checkpoint the coordinator last checkpointed and an instant was started, and no ack.
- The ckp_meta directory removed under the job (#8060, #8120): a missing directory reads as no
  message, so writers wait in ``instantToWrite`` with no pending instant until the timeout, and the
  job fails over; the restarted coordinator's ``bootstrap`` recreates it (HUDI-6030, PR #8374).
"""

from __future__ import annotations

from typing import Any

from runtime.hudi.timeline.ckp_meta import CkpMetadata, ckp_meta_path
from runtime.protocols.base import CoordinatorContext, Protocol, WriterContext
from runtime.protocols.operator_event import CommitAckSender, ConfirmingWriter


class CkpMetaWriter(ConfirmingWriter):
    instant_source = "a new INFLIGHT instant in ckp_meta"

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.ckp_meta = CkpMetadata(ctx.table.dfs, ctx.table.base_path)

    async def last_pending_instant(self) -> str | None:
        return await self.ctx.env.io(self.ckp_meta.last_pending_instant)

    async def timeout_diagnosis(self, instant: str | None) -> str:
        why = await super().timeout_diagnosis(instant)
        if not await self.ctx.env.io(self.ckp_meta.exists):
            why += f"; the ckp_meta directory {self.ckp_meta.path} is missing: was it deleted? (Hudi #8060)"
        return why


class CkpMetaCoordinator(CommitAckSender):
    def __init__(self, ctx: CoordinatorContext) -> None:
        super().__init__(ctx)
        self.ckp_meta = CkpMetadata(ctx.table.dfs, ctx.table.base_path)
        self.checkpoint_id = -1  # the checkpoint last coordinated (checkpointCoordinator)
        self.instant_started = False
        self.aborts_written = 0
        self.aborts_ignored = 0

    async def open(self) -> None:
        await self.ctx.env.io(self.ckp_meta.bootstrap)

    async def on_instant_started(self, checkpoint_id: int, committed: str, new_instant: str) -> None:
        if committed:
            await self.ctx.env.io(self.ckp_meta.commit_instant, committed)
        await self.ctx.env.io(self.ckp_meta.start_instant, new_instant)
        self.instant_started = True

    async def on_checkpoint_trigger(self, checkpoint_id: int) -> None:
        self.checkpoint_id = checkpoint_id

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        self.send_commit_acks(checkpoint_id)

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        if checkpoint_id != self.checkpoint_id or not self.instant_started:
            self.aborts_ignored += 1
            return
        await self.ctx.env.io(self.ckp_meta.abort_instant, instant)
        self.aborts_written += 1

    async def delete_dfs_messages(self) -> str | None:
        await self.ctx.env.io(self.ckp_meta.delete_all)
        return self.ckp_meta.path

    def describe(self) -> dict[str, Any]:
        return {
            "ckp_meta_retained": list(self.ckp_meta.instant_cache),
            "aborts_written": self.aborts_written,
            "aborts_ignored": self.aborts_ignored,
        }


class CkpMetaProtocol(Protocol):
    name = "ckp-meta"
    messages_on_dfs = True
    # hoodie.allow.empty.commit: false for the Flink writer of 0.14-0.15 (OptionsResolver
    # .allowCommitOnEmptyBatch, HUDI-6127); 1.0 took the config's own default, true (HUDI-7819)
    empty_commit_default = False
    description = "P2b: writers poll .hoodie/.aux/ckp_meta; CommitAckEvent after empty rounds (Hudi 0.11-1.0)"
    writer_side = CkpMetaWriter
    coordinator_side = CkpMetaCoordinator

    @classmethod
    def dfs_message_dirs(cls, base_path: str) -> tuple[str, ...]:
        return (ckp_meta_path(base_path),)
