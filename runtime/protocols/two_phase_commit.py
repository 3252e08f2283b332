"""``two-phase-commit``: a what-if, not a Hudi release. Flink's two-phase-committing sink, as
Iceberg's and Paimon's Flink sinks commit, on a Hudi table; written against the protocol API
alone (docs/PROTOCOL_API.md, whose worked example it is).

Sources it follows:

- Apache Flink (1.15+) Sink V2: ``TwoPhaseCommittingSink`` / ``SupportsCommitter``,
  ``PrecommittingSinkWriter.prepareCommit`` (the writer turns what it wrote before the barrier
  into a *committable*), ``Committer.commit(Collection<CommitRequest>)``, ``CommitterOperator``
  with its ``CommittableCollector`` (committables kept per checkpoint in checkpointed state,
  committed on ``notifyCheckpointComplete``, recommitted after a restore).
- Apache Iceberg ``flink/.../sink/IcebergFilesCommitter`` (``snapshotState`` keeps the pending
  files per checkpoint, ``notifyCheckpointComplete`` -> ``commitUpToCheckpoint`` commits every
  checkpoint up to the completed one, the snapshot summary records ``flink.job-id``,
  ``flink.operator-id`` and ``flink.max-committed-checkpoint-id``; ``initializeState`` on restore
  reads ``getMaxCommittedCheckpointId(table, restoredFlinkJobId, operatorId)`` and commits the
  restored checkpoints newer than it) and, in the Sink V2 version, ``IcebergCommitter.commit``
  (``SinkUtil.getMaxCommittedCheckpointId``, ``signalAlreadyCommitted`` for the older ones).

How it runs here:

- **writer** (``PrecommittingSinkWriter``): the data of checkpoint ``k`` (written after barrier
  ``k-1``, eagerly or at barrier ``k``) goes to instant ``job + k ms``, where ``job`` is the job's
  id: one millisecond after the latest instant name on the timeline when the task first opened.
  It asks no one and never blocks. Its committable (the write statuses of ``k``) goes into its
  checkpointed state at the barrier and to the committer as the task's ``WriteMetadataEvent``s. A
  task restored from checkpoint ``r`` takes the job id back from its state (``instant - r ms``).
- **committer** (``CommitterOperator``, here in the coordinator): it collects the committables
  per checkpoint; when checkpoint ``k`` completes it commits every pending checkpoint up to ``k``,
  ascending, and its own checkpoint holds the pending ones. On restore it recommits each
  committable of the restored state whose instant the timeline does not hold and skips those it
  does (the instant names it, so the check is exact).

Why the names cannot collide: the job id is after every instant name the table held when the job
started, and ``k`` counts checkpoints, so a job's instants ascend and follow every earlier job's.
Instants that others name from the clock (compaction plans) are taken after a commit, when
``job + k ms`` is long in the past (a checkpoint lasts far more than 1 ms), and ``new_instant_time``
keeps them after everything on the timeline. On table version 8/9 the table code gives every
commit its completion time, and file slices follow completion times, so a delta commit named
before a compaction plan but completed after it lands in the plan's new slice.

Differences from Iceberg (by necessity of Hudi's layout): a Hudi file carries its instant in its
name, so the committer publishes one instant per pending checkpoint (in one notification) rather
than one snapshot for all; each instant's commit metadata records ``flink.job-id`` and
``flink.max-committed-checkpoint-id`` (the checkpoint it commits). Iceberg skips by the max
committed checkpoint id of the job; here the instant's name answers "was it committed" exactly.
A committable of an attempt that failed after its checkpoint never completed is left as files of
an instant the timeline never holds: invisible to readers, garbage for a cleaner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast
from typing import Protocol as TypingProtocol

from runtime.core import codec
from runtime.core.messages import WriteMetadataEvent
from runtime.hudi.table import bump_instant
from runtime.protocols.base import CoordinatorContext, CoordinatorSide, Protocol, WriterContext, WriterSide

JOB_ID_KEY = "flink.job-id"  # Iceberg's snapshot summary keys (IcebergFilesCommitter)
MAX_COMMITTED_KEY = "flink.max-committed-checkpoint-id"
EPOCH_INSTANT = "19700101000000000"


def instant_of(job_id: str, checkpoint_id: int) -> str:
    """The instant of ``checkpoint_id`` in job ``job_id``: ``job_id`` plus that many ms."""
    return _shift(job_id, checkpoint_id)


def _shift(instant: str, ms: int) -> str:
    import datetime as _dt

    d = _dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.timezone.utc)
    d += _dt.timedelta(milliseconds=int(instant[14:17] or 0) + ms)
    return d.strftime("%Y%m%d%H%M%S") + f"{d.microsecond // 1000:03d}"


def job_id_after(names: list[str]) -> str:
    """A new job's id: one millisecond after the latest instant name of the table (the epoch for
    a table without instants), so every instant of the job follows every earlier one. Every task
    opening at the start of a job sees the same names: nothing commits before they all have."""
    return bump_instant(max(names, default=EPOCH_INSTANT))


# -- the writer side ------------------------------------------------------------------------------


class TwoPhaseCommitWriter(WriterSide):
    """``PrecommittingSinkWriter``: names its instant itself; never waits."""

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.job_id = ""
        self.instants_named = 0

    async def open(self) -> None:
        restored = self.ctx.restored
        if restored is not None and restored.instant and restored.checkpoint_id > 0:
            self.job_id = _shift(restored.instant, -restored.checkpoint_id)  # the job's own id, restored
            return
        timeline = await self.ctx.env.io(self.ctx.table.timeline)
        self.job_id = job_id_after([i.ts for i in timeline.instants])

    def checkpoint_of_flush(self, eager: bool) -> int:
        """The checkpoint a flush's data belongs to: the next barrier's (the task's
        ``last_checkpoint_id`` already holds the barrier's id during the barrier flush)."""
        return self.ctx.last_checkpoint_id + 1 if eager else self.ctx.last_checkpoint_id

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        self.instants_named += 1
        return instant_of(self.job_id, max(self.checkpoint_of_flush(eager), 1))

    def describe(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "instants_named": self.instants_named}


# -- the committer (in the coordinator) -------------------------------------------------------------


class _CommitRecord(TypingProtocol):
    instant: str


class CommitterContext(CoordinatorContext, TypingProtocol):
    """What the committer uses of the coordinator (runtime.writer.coordinator.Coordinator)."""

    events: list[WriteMetadataEvent]
    empty_rounds: list[int]
    resume_checkpoint_id: int

    async def commit_instant(
        self, instant: str, checkpoint_id: int, extra: dict[str, str] | None = None, *, empty: bool = False
    ) -> _CommitRecord | None: ...


@codec.message
@dataclass
class PendingCommittables:
    """The committer's checkpointed state: committables not yet committed, per checkpoint."""

    job_id: str
    checkpoints: dict[int, list[WriteMetadataEvent]] = field(default_factory=dict)


class TwoPhaseCommitCommitter(CoordinatorSide):
    """``CommitterOperator`` + ``CommittableCollector``, committing as ``IcebergFilesCommitter``."""

    eager_instants = False  # no instant is started for writers: they name their own
    buffers_events = True  # the committables are this side's (and its checkpoint's)

    def __init__(self, ctx: CoordinatorContext) -> None:
        super().__init__(ctx)
        self.cctx = cast(CommitterContext, ctx)
        self.job_id = ""
        self.pending: dict[int, dict[int, WriteMetadataEvent]] = {}  # checkpoint -> task -> committable
        self.last_completed = 0
        self.committed: list[int] = []
        self.recommitted: list[str] = []
        self.skipped_committed: list[str] = []
        self.dropped_void = 0

    async def on_write_metadata(self, event: Any) -> None:
        if not event.instant:
            return  # a fresh task's empty bootstrap
        key = max(event.checkpoint_id, 1)  # data before the first barrier belongs to checkpoint 1
        self.job_id = self.job_id or _shift(event.instant, -key)
        if event.bootstrap:  # a restored task re-sends its state's committable
            if event.write_stats:
                self._add(key, event)
            return
        if key <= self.cctx.resume_checkpoint_id:
            self.dropped_void += 1  # a late event of an attempt that failed: its data is replayed
            return
        self._add(key, event)

    def _add(self, key: int, event: WriteMetadataEvent) -> None:
        slots = self.pending.setdefault(key, {})
        prev = slots.get(event.task_id)
        if prev is not None and prev.instant == event.instant and not event.bootstrap:
            event = WriteMetadataEvent(
                event.task_id, key, event.instant, [*prev.write_stats, *event.write_stats], event.last_batch
            )
        slots[event.task_id] = event

    async def on_checkpoint_complete(self, checkpoint_id: int) -> dict[str, Any]:
        """``commitUpToCheckpoint``: every pending checkpoint up to ``checkpoint_id``, ascending."""
        self.last_completed = max(self.last_completed, checkpoint_id)
        committed = []
        for key in sorted(k for k in self.pending if k <= checkpoint_id):
            instant = await self._commit(key)
            if instant is not None:
                committed.append(instant)
        if not committed:
            self.cctx.empty_rounds.append(checkpoint_id)
        return {"committed": bool(committed), "instants": committed}

    async def _commit(self, key: int) -> str | None:
        """Commits checkpoint ``key``'s committables as its instant; one the timeline already
        holds is skipped (``signalAlreadyCommitted``)."""
        slots = self.pending.pop(key)
        events = [e for e in slots.values() if e.write_stats]
        if not events:
            return None
        instant = events[0].instant
        if await self.ctx.env.io(self.ctx.table.is_committed, instant):
            self.skipped_committed.append(instant)
            return None
        await self.ctx.env.io(self.ctx.table.start_instant, instant)  # requested -> inflight, then commit
        self.cctx.events.extend(events)
        try:
            extra = {JOB_ID_KEY: self.job_id, MAX_COMMITTED_KEY: str(key)}
            rec = await self.cctx.commit_instant(instant, key, extra)
        except BaseException:
            self.pending[key] = slots  # committed again by the next completion, or after a restore
            raise
        finally:
            self.cctx.events[:] = [e for e in self.cctx.events if e.instant != instant]
        if rec is None:
            return None
        self.committed.append(key)
        return instant

    def snapshot_state(self, checkpoint_id: int) -> bytes:
        """The committer's state: every committable not committed yet (checkpoints before this one)."""
        keys = sorted(k for k in self.pending if k < checkpoint_id)
        state = PendingCommittables(self.job_id, {k: list(self.pending[k].values()) for k in keys})
        return codec.encode(state)

    async def restore_state(self, state: bytes) -> None:
        restored = codec.decode(state, PendingCommittables)
        self.job_id = self.job_id or restored.job_id
        for key, events in restored.checkpoints.items():
            for event in events:
                self._add(int(key), event)

    async def on_all_bootstrapped(self) -> None:
        """After a restore: recommit what the restored state holds that the timeline does not,
        then roll back instants an attempt started and never completed (their data is replayed)."""
        for key in sorted(k for k in self.pending if k <= self.cctx.resume_checkpoint_id):
            instant = await self._commit(key)
            if instant is not None:
                self.recommitted.append(instant)
        for pending in (await self.ctx.env.io(self.ctx.table.timeline)).pending_commits():
            if pending not in {e.instant for slots in self.pending.values() for e in slots.values()}:
                await self.ctx.env.io(self.ctx.table.rollback, pending, [])

    async def on_tasks_reset(self) -> None:
        """Region failover: what the tasks wrote after the last completed checkpoint is replayed
        under new checkpoint ids; their restored states re-send the last completed one's."""
        for key in [k for k in self.pending if k > self.last_completed]:
            del self.pending[key]

    def describe(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "pending": sorted(self.pending),
            "committed": self.committed[-10:],
            "recommitted": self.recommitted,
            "skipped_committed": self.skipped_committed,
            "dropped_void": self.dropped_void,
        }


class TwoPhaseCommitProtocol(Protocol):
    name = "two-phase-commit"
    description = (
        "what-if, not a Hudi release: writers name their instant (job id + checkpoint), a committer "
        "commits per checkpoint (Flink Sink V2, Iceberg's IcebergFilesCommitter)"
    )
    writer_side = TwoPhaseCommitWriter
    coordinator_side = TwoPhaseCommitCommitter
    release_table_version = 9  # a what-if on Hudi 1.1's table: file slices by completion time
