"""Write conflicts under optimistic concurrency control: the check a commit makes under the lock.

What is modelled (Hudi 0.14 - 1.1, ``hudi-client/hudi-client-common``):

* ``client/utils/TransactionUtils.resolveWriteConflictIfAny``: only under
  OPTIMISTIC_CONCURRENCY_CONTROL (``supportsOptimisticConcurrencyControl``; non-blocking checks
  nothing here): every candidate instant is read as a ``ConcurrentOperation`` and, when the
  strategy says it conflicts, ``resolveConflict`` either keeps this commit or throws.
* ``client/transaction/SimpleConcurrentFileWritesConflictResolutionStrategy`` (the Flink writer's
  default, ``OptionsResolver.getConflictResolutionStrategy``):
  ``getCandidateInstants`` — the completed instants of the commits timeline after the last
  successful instant when this one started (``lastCompletedTxnOwnerInstant``, taken by
  ``preWrite``/``preTxn`` when the instant starts; none: every completed instant,
  ``INIT_INSTANT_TS``), and the pending compactions (and clusterings) requested after this
  instant; ``hasConflict`` — the sets of (partition, fileId) the two operations mutate
  (``ConcurrentOperation.getMutatedPartitionAndFileIds``) intersect; ``resolveConflict`` — a
  compaction requested before this instant is no conflict (it is merged around), anything else
  throws ``HoodieWriteConflictException(new ConcurrentModificationException("Cannot resolve
  conflicts for overlapping writes"))``: :class:`WriteConflict`.
* What follows in Hudi's Flink writer: ``BaseHoodieWriteClient.commitStats`` lets the exception out
  and leaves the instant inflight; ``StreamWriteOperatorCoordinator.doCommit`` runs on the
  coordinator's ``NonThrownExecutor``, whose exception hook calls ``context.failJob``: the job fails
  over and restarts from its last completed checkpoint, whose write statuses the restored tasks
  send again and the new coordinator recommits (``initInstant``) — the check runs again on the
  recommit, with no last successful instant recorded by that coordinator.

Early conflict detection (``hoodie.write.concurrency.early.conflict.detection.enable``, markers
checked while writing) is a Spark writer's option; Hudi's Flink writer does not enable it and it
is not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runtime.core.messages import WriteStat
from runtime.hudi.client import compaction
from runtime.hudi.formats.commit_metadata import write_stats
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline

INIT_INSTANT_TS = "00000000000000"  # HoodieTimeline.INIT_INSTANT_TS: no last successful instant


class WriteConflict(TableError):
    """``HoodieWriteConflictException``: another writer's instant mutated a file group this one did."""

    def __init__(self, instant: str, other: str, file_groups: Iterable[tuple[str, str]]) -> None:
        self.instant, self.other = instant, other
        self.file_groups = sorted(file_groups)
        shown = ", ".join(f"{p or '(non-partitioned)'}/{f}" for p, f in self.file_groups[:4])
        more = f" and {len(self.file_groups) - 4} more" if len(self.file_groups) > 4 else ""
        super().__init__(
            f"Cannot resolve conflicts for overlapping writes: {instant} and {other} (completed since {instant} "
            f"started) both wrote file groups {shown}{more} (HoodieWriteConflictException, "
            "SimpleConcurrentFileWritesConflictResolutionStrategy)"
        )


@dataclass(frozen=True)
class ConcurrentOperation:
    """``ConcurrentOperation``: an instant, whether it is a compaction, the file groups it mutates."""

    instant: str
    compaction: bool
    file_groups: frozenset[tuple[str, str]]  # (partition path, file id)

    @classmethod
    def of_stats(cls, instant: str, stats: Iterable[WriteStat]) -> ConcurrentOperation:
        """The operation a writer is committing, from its write stats."""
        return cls(instant, False, frozenset((s.partition, s.file_id) for s in stats))

    @classmethod
    def of_instant(cls, table: HudiTable, timeline: Timeline, instant: str) -> ConcurrentOperation:
        """Another instant: a completed one from its commit metadata, a pending compaction from its plan."""
        if instant in timeline.compactions and not timeline.is_completed(instant):
            plan = compaction.read_plan(table, instant)
            return cls(instant, True, frozenset((op.partition, op.file_id) for op in plan.operations))
        name = table.metadata_file(instant, timeline)
        doc = table.version.decode_metadata(table.dfs.read_bytes(table.timeline_file(name)), name)
        groups = frozenset((s.get("partitionPath", ""), s.get("fileId", "")) for s in write_stats(doc))
        return cls(instant, instant in timeline.compactions, groups)


def candidate_instants(timeline: Timeline, instant: str, last_completed: str | None) -> list[str]:
    """``getCandidateInstants``: completed instants after ``last_completed`` (every one when None),
    then compactions pending and requested after ``instant``; ``instant`` itself never."""
    after = last_completed or INIT_INSTANT_TS
    done = [i for i in timeline.completed_instants() if i > after and i != instant]
    pending = [c for c in timeline.pending_compactions() if c > instant]
    return done + pending


def has_conflict(this: ConcurrentOperation, other: ConcurrentOperation) -> frozenset[tuple[str, str]]:
    """``hasConflict``: the file groups both mutate (empty: no conflict)."""
    return this.file_groups & other.file_groups


def resolve_conflict(this: ConcurrentOperation, other: ConcurrentOperation, overlap: Iterable[tuple[str, str]]) -> None:
    """``resolveConflict``: a compaction requested before this instant is merged around; else :class:`WriteConflict`."""
    if other.compaction and other.instant < this.instant:
        return
    raise WriteConflict(this.instant, other.instant, overlap)


def resolve_write_conflict_if_any(
    table: HudiTable, timeline: Timeline, this: ConcurrentOperation, last_completed: str | None
) -> list[str]:
    """``TransactionUtils.resolveWriteConflictIfAny`` on ``timeline`` (listed under the lock): raises
    :class:`WriteConflict` on the first conflict it cannot resolve; returns the candidates checked."""
    candidates = candidate_instants(timeline, this.instant, last_completed)
    for other_instant in candidates:
        other = ConcurrentOperation.of_instant(table, timeline, other_instant)
        overlap = has_conflict(this, other)
        if overlap:
            resolve_conflict(this, other, overlap)
    return candidates
