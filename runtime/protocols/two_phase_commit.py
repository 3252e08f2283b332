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
  ``k-1``, eagerly or at barrier ``k``) goes to instant ``base + k ms``, where ``base`` is one
  millisecond after the latest time on the timeline (instant or completion) when the job started.
  It asks no one for an instant. Its committable (the write statuses of ``k``) goes into its
  checkpointed state at the barrier and to the committer as one ``WriteMetadataEvent``, confirmed
  delivered before the checkpoint ack (``prepareSnapshotPreBarrier``: ahead of the barrier). A
  task restored from checkpoint ``r`` takes the base back from its state (``instant - r ms``,
  through ``WriterContext.restored``).
- **committer** (``CommitterOperator``, here in the coordinator): it collects the committables
  per checkpoint; when checkpoint ``k`` completes it commits every pending checkpoint up to ``k``,
  ascending, and its own checkpoint holds the pending ones; a restore recommits those of the
  restored state. As Iceberg's ``IcebergCommitter``, a checkpoint at or below the job's max
  committed checkpoint id (the newest commit whose metadata names the job, looked up once) counts
  as committed already. The job is ``--job-id`` (Flink's job id, fixed across runs by the
  Kubernetes operator), else the base of the names, so by default every job start is a new job.
  One check Iceberg has not: an instant the timeline already holds is not committed again (its
  name says exactly whether it was), which keeps #16011's shape (a restored checkpoint committed
  again under a changed job id) from committing twice. #10892 (restore from an older checkpoint)
  and #18098 (restart without state) lose data here as in Iceberg when the job id is kept.

Why the names cannot collide: the job id is after every time the table held when the job started,
and ``k`` counts checkpoints, so a job's instants ascend and follow every earlier job's. Instants
that others name from the clock (compaction plans) are taken after a commit, when ``job + k ms``
is long in the past (a checkpoint lasts far more than 1 ms), and ``new_instant_time`` keeps them
after everything on the timeline. A restore keeps the job's names unless the timeline holds the
name after the restored checkpoint (a rewind to an older checkpoint): then the job names anew. On
table version 8/9 the table code gives every commit its completion time, and file slices follow
completion times, so a delta commit named before a compaction plan but completed after it lands
in the plan's new slice.

Differences from Iceberg (by necessity of Hudi's layout): a Hudi file carries its instant in its
name, so the committer publishes one instant per pending checkpoint (in one notification) rather
than one snapshot for all; each instant's commit metadata records ``flink.job-id`` and
``flink.max-committed-checkpoint-id`` (the checkpoint it commits); no ``flink.operator-id`` (one
sink per job). A committable of an attempt that failed after its checkpoint never completed is left as files of
an instant the timeline never holds: invisible to readers, garbage for a cleaner.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, cast
from typing import Protocol as TypingProtocol

from runtime.core import codec, roles
from runtime.core.config import ConfigError, JobConfig, flag_of
from runtime.core.messages import WriteMetadataEvent, WriteStat
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.instant import bump_instant
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


def job_id_after(times: list[str]) -> str:
    """A new job's id: one millisecond after the latest time of the table's timeline, instant and
    completion times alike (the epoch for a table without instants), so every instant of the job
    follows every earlier one and completes after it. Every task opening at the start of a job
    sees the same timeline: nothing of the job commits before they all have opened."""
    return bump_instant(max(times, default=EPOCH_INSTANT))


def max_committed_checkpoint_id(table: HudiTable, job: str) -> int:
    """``SinkUtil.getMaxCommittedCheckpointId``: the checkpoint id the newest commit of ``job``
    recorded, walking the writers' commits back from the latest (-1: the job never committed)."""
    timeline = table.timeline()
    for instant in reversed(timeline.completed_commits()):
        extra = table.read_commit_metadata(instant, timeline).get("extraMetadata", {})
        if extra.get(JOB_ID_KEY) == job and extra.get(MAX_COMMITTED_KEY, "").isdigit():
            return int(extra[MAX_COMMITTED_KEY])
    return -1


# -- the writer side ------------------------------------------------------------------------------


class TwoPhaseCommitWriter(WriterSide):
    """``PrecommittingSinkWriter``: names its instant itself and never waits for an instant. Its
    committable goes out once, at the barrier, with every write status of the checkpoint, and is
    delivered before the task acknowledges the checkpoint: Sink V2 emits it downstream in
    ``prepareSnapshotPreBarrier``, ahead of the barrier in the same channel, so no checkpoint
    completes without it (a lost one fails the task at the RPC timeout instead)."""

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.job_id = ""  # the base of its instants' names: the job's start, see the module doc
        self.instants_named = 0
        self.rewound = False
        self.held: list[WriteStat] = []  # the eager flushes' statuses of the checkpoint in progress

    async def on_write_event(self, event: WriteMetadataEvent) -> bool:
        """``prepareCommit``: eager flushes' statuses wait for the barrier; the barrier's
        committable carries them all, sent as a call so that its delivery is confirmed."""
        if not event.last_batch:
            self.held += event.write_stats
            return True
        committable = replace(event, write_stats=[*self.held, *event.write_stats])
        self.held = []
        await self.ctx.env.call(roles.JOB_MANAGER, "write_metadata", committable, timeout=self.ctx.config.rpc_timeout_s)
        return True

    async def open(self) -> None:
        restored = self.ctx.restored
        timeline = await self.ctx.env.io(self.ctx.table.timeline)
        if restored is not None and restored.instant and restored.checkpoint_id > 0:
            base = _shift(restored.instant, -restored.checkpoint_id)  # the job's names, restored
            # a rewind (restored from a checkpoint older than the table's commits): the names after
            # it are taken, so the job names its instants anew
            self.rewound = timeline.is_completed(instant_of(base, restored.checkpoint_id + 1))
            if not self.rewound:
                self.job_id = base
                return
        self.job_id = job_id_after([t for t in (timeline.latest_ts(),) if t])

    def checkpoint_of_flush(self, eager: bool) -> int:
        """The checkpoint a flush's data belongs to: the next barrier's (the task's
        ``last_checkpoint_id`` already holds the barrier's id during the barrier flush)."""
        return self.ctx.last_checkpoint_id + 1 if eager else self.ctx.last_checkpoint_id

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        self.instants_named += 1
        return instant_of(self.job_id, max(self.checkpoint_of_flush(eager), 1))

    def describe(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "instants_named": self.instants_named, "rewound": self.rewound}


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
    """``CommitterOperator`` + ``CommittableCollector``, committing as Iceberg's ``IcebergCommitter``."""

    eager_instants = False  # no instant is started for writers: they name their own
    buffers_events = True  # the committables are this side's (and its checkpoint's)

    def __init__(self, ctx: CoordinatorContext) -> None:
        super().__init__(ctx)
        self.cctx = cast(CommitterContext, ctx)
        self.job_id = ""  # the job's naming base, learnt from the committables
        self.pending: dict[int, dict[int, WriteMetadataEvent]] = {}  # checkpoint -> task -> committable
        self.last_completed = 0
        self.max_committed: dict[str, int] = {}  # flink.job-id -> its max committed checkpoint id
        self.committed: list[int] = []
        self.recommitted: list[str] = []
        self.already_committed: list[int] = []  # checkpoints skipped as <= the job's max committed id
        self.skipped_committed: list[str] = []  # instants the timeline already held
        self.dropped_void = 0

    def flink_job_id(self, instant: str, checkpoint_id: int) -> str:
        """The job a committable belongs to: ``--job-id``, or the base of its instant's name."""
        return self.ctx.config.job_id or _shift(instant, -checkpoint_id)

    async def on_write_metadata(self, event: Any) -> None:
        if not event.instant:
            return  # a fresh task's empty bootstrap
        key = max(event.checkpoint_id, 1)  # data before the first barrier belongs to checkpoint 1
        if event.bootstrap:  # a restored task re-sends its state's committable
            if event.write_stats:
                self._add(key, event)
            return
        self.job_id = _shift(event.instant, -key)
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
        """``IcebergCommitter.commit``: every pending checkpoint up to ``checkpoint_id``, ascending,
        those at or below the job's max committed checkpoint id marked already committed."""
        self.last_completed = max(self.last_completed, checkpoint_id)
        committed = await self._commit_up_to(checkpoint_id)
        if not committed:
            self.cctx.empty_rounds.append(checkpoint_id)
        return {"committed": bool(committed), "instants": committed}

    async def _commit_up_to(self, checkpoint_id: int) -> list[str]:
        committed = []
        for key in sorted(k for k in self.pending if k <= checkpoint_id):
            instant = await self._commit(key)
            if instant is not None:
                committed.append(instant)
        return committed

    async def _max_committed(self, job: str) -> int:
        """``SinkUtil.getMaxCommittedCheckpointId``: the newest commit of ``job`` on the timeline,
        walking back from the latest (-1: none); then kept up to date by this committer."""
        if job not in self.max_committed:
            self.max_committed[job] = await self.ctx.env.io(max_committed_checkpoint_id, self.ctx.table, job)
        return self.max_committed[job]

    async def _commit(self, key: int) -> str | None:
        """Commits checkpoint ``key``'s committables as its instant; returns it, or None when there
        was nothing to commit or it counts as committed already (``signalAlreadyCommitted``)."""
        slots = self.pending.pop(key)
        events = [e for e in slots.values() if e.write_stats]
        if not events:
            return None
        instant = events[0].instant
        job = self.flink_job_id(instant, key)
        if key <= await self._max_committed(job):
            self.already_committed.append(key)  # its files stay unreferenced: #10892 / #18098
            return None
        if await self.ctx.env.io(self.ctx.table.is_committed, instant):
            self.skipped_committed.append(instant)  # Hudi cannot commit an instant twice
            return None
        await self.ctx.env.io(self.ctx.table.start_instant, instant)  # requested -> inflight, then commit
        self.cctx.events.extend(events)
        try:
            rec = await self.cctx.commit_instant(instant, key, {JOB_ID_KEY: job, MAX_COMMITTED_KEY: str(key)})
        except BaseException:
            self.pending[key] = slots  # committed again by the next completion, or after a restore
            raise
        finally:
            self.cctx.events[:] = [e for e in self.cctx.events if e.instant != instant]
        if rec is None:
            return None
        self.max_committed[job] = key
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
        # the table's time generator starts after every time on the timeline (Hudi 1.x's
        # TimeGenerator is monotonic across writers), so this job's completion times follow the
        # earlier jobs' even when its instants were named by one of them (a restore)
        timeline = await self.ctx.env.io(self.ctx.table.timeline)
        await self.ctx.env.io(self.ctx.table.new_instant_time, self.ctx.env.wall_time(), timeline)
        self.recommitted += await self._commit_up_to(self.cctx.resume_checkpoint_id)
        for pending in (await self.ctx.env.io(self.ctx.table.timeline)).pending_commits():
            if pending not in {e.instant for slots in self.pending.values() for e in slots.values()}:
                await self.ctx.env.io(self.ctx.client.rollback, pending, [])

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
            "already_committed": self.already_committed,
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
    what_if = True
    release_table_version = 9  # a what-if on Hudi 1.1's table: file slices by completion time
    metadata_table_default = True  # Hudi 1.1's writer keeps the metadata table

    @classmethod
    def check_config(cls, config: JobConfig) -> None:
        """Table version 6 slices a merge-on-read file group by instant time, so a compaction
        named from the clock orders itself after delta commits the writers named before it and
        wrote after it (the lab lost rows so): refused; Hudi 1.x's completion times make it sound."""
        if config.concurrency_mode != "single-writer":
            raise ConfigError(
                f"--protocol {cls.name} with {flag_of('concurrency_mode')} {config.concurrency_mode}: its writers "
                "name their instants from their checkpoints, not through the write client's startCommit, so no "
                "instant gets the heartbeat a multi-writer mode needs (its commit would abort on an expired "
                f"heartbeat); use {flag_of('concurrency_mode')} single-writer with this protocol"
            )
        if config.compacts and config.table_version == "6":
            raise ConfigError(
                f"--protocol {cls.name} with --table-type merge-on-read and --table-version 6: writers name "
                "their instants before a compaction is scheduled, and version 6 orders file slices by instant "
                f"time; use --table-version 8 or 9 (completion times), {flag_of('compaction_delta_commits')} 0, "
                "or --table-type copy-on-write"
            )
