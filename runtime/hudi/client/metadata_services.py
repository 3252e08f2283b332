"""The metadata table's own table services: before each of its delta commits, its cleaner, its
compaction and its archiver run on ``.hoodie/metadata``, so that its timeline and its file slices
stay bounded however long the run.

Sources (Apache Hudi 0.14 and 1.1, ``hudi-client-common`` ``org.apache.hudi.metadata``):

* ``FlinkHoodieBackedTableMetadataWriter.commitInternal`` (1.x; 0.14 from ``update`` the same
  way): ``performTableServices`` before the delta commit is written.
* ``HoodieBackedTableMetadataWriter.performTableServices``: nothing before a delta commit
  completed; then ``cleanIfNecessary``, the compaction (``compactIfNecessary``,
  :meth:`MetadataTableWriter.compact`), then ``writeClient.archive()``, in that order.
* ``cleanIfNecessary``: no clean while fewer than 3 completed instants follow the latest completed
  compaction (a reader may still be reading the slice it replaced); otherwise a clean
  (:mod:`runtime.hudi.client.cleaner`) at a new instant time (1.x ``executeClean`` ->
  ``writeClient.clean()``), on version 6 at the latest completed delta commit's time + ``002``
  (``HoodieTableMetadataUtil.createCleanTimestamp``).
* ``HoodieMetadataWriteUtils.createMetadataWriteConfig``: the policy is the data table's
  (KEEP_LATEST_COMMITS, Flink's ``clean.policy``), retaining
  ``max(DEFAULT_METADATA_CLEANER_COMMITS_RETAINED (20), the data table's retained commits * 1.2)``
  commits; archiving keeps the data table's ``hoodie.keep.min.commits`` + 1 to ``max`` + 1; auto
  clean and auto archive off (the writer triggers both); direct markers, no rollback by markers.
* ``TimelineArchiverV1/V2.getCommitInstantsToArchive``: a metadata table archives nothing from
  the data table's earliest commit on the active timeline, nor from its earliest pending instant
  (``TimelineUtils.getEarliestInstantForMetadataArchival``), besides the merge-on-read and cleaner
  bounds every table has (:mod:`runtime.hudi.client.archiver`).

The data table's options are Hudi's own keys: ``--clean-retain-commits``
(``clean.retain_commits``), ``--archive-min-commits`` / ``--archive-max-commits``
(``archive.min_commits`` / ``max_commits``). Hudi's write config keeps their numbers when the data
table's cleaning or archiving is off, so ``off`` and ``release`` take the Flink writer's defaults
(30, 40, 50): the metadata table retains 36 commits and keeps 41 to 51.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from runtime.hudi.client import archiver, cleaner
from runtime.hudi.client.table_services import FLINK_DEFAULTS, OFF, RELEASE
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMPLETED, DELTA_COMMIT

DEFAULT_METADATA_CLEANER_COMMITS_RETAINED = 20  # HoodieMetadataConfig
CLEAN_AFTER_COMPACTION = 3  # cleanIfNecessary: completed instants after the latest compaction
CLEAN_TIMESTAMP_SUFFIX = "002"  # HoodieTableMetadataUtil.createCleanTimestamp (version 6)


@dataclass(frozen=True)
class MetadataTableServices:
    """The metadata table's cleaner (retained commits) and archiver (min and max commits kept)."""

    clean_retain_commits: int
    archive_min_commits: int
    archive_max_commits: int

    @classmethod
    def for_data_table(cls, props: TableProps) -> MetadataTableServices:
        """``createMetadataWriteConfig`` from the data writer's options (``props.service_options``)."""
        flink = FLINK_DEFAULTS
        defaults = (flink.clean_retain_commits, flink.archive_min_commits, flink.archive_max_commits)
        retain, lo, hi = (
            default if value in (RELEASE, OFF) else int(value)
            for value, default in zip(props.service_options, defaults, strict=True)
        )
        return cls(max(DEFAULT_METADATA_CLEANER_COMMITS_RETAINED, int(retain * 1.2)), lo + 1, hi + 1)


class MetadataWriterServices(Protocol):
    """What the services ask of the metadata table's writer
    (:class:`runtime.hudi.client.metadata_writer.MetadataTableWriter`): its table, the data table,
    and its compaction."""

    mdt: HudiTable
    table: HudiTable

    def compaction_due(self, instant: str, timeline: Timeline) -> bool: ...

    def compact(self, instant: str, timeline: Timeline, now: float | None) -> str: ...


def perform_table_services(writer: MetadataWriterServices, instant: str, timeline: Timeline, now: float | None) -> None:
    """``performTableServices`` before the delta commit of ``instant``: clean, compact, archive,
    from the metadata ``timeline`` the writer just listed (``requiresTimelineRefresh`` false)."""
    mdt = writer.mdt
    deltas = [i.ts for i in timeline.instants if i.action == DELTA_COMMIT and i.state == COMPLETED]
    if not deltas:
        return
    services = MetadataTableServices.for_data_table(writer.table.props)
    clock = time.time() if now is None else now
    if _clean_due(timeline):
        clean_time = None if mdt.version.layout_2 else deltas[-1] + CLEAN_TIMESTAMP_SUFFIX
        if clean_time is None or not any(i.ts == clean_time for i in timeline.instants):
            if cleaner.clean(mdt, services.clean_retain_commits, clock, timeline, clean_time):
                timeline = mdt.timeline()
    if writer.compaction_due(instant, timeline):
        writer.compact(instant, timeline, now)
    _archive(writer, services)


def _archive(writer: MetadataWriterServices, services: MetadataTableServices) -> None:
    """``writeClient.archive()``; the data table's timeline is read only when commits are past max
    (``getCommitInstantsToArchive`` returns at once otherwise)."""
    files = writer.mdt.timeline_files()
    past_max = len(Timeline(files.values()).completed_instants()) > services.archive_max_commits
    policy = archiver.ArchivePolicy(
        services.archive_min_commits,
        services.archive_max_commits,
        services.clean_retain_commits,
        keep_from=data_table_bound(writer.table.timeline()) if past_max else None,
    )
    archiver.archive(writer.mdt, policy, files)


def _clean_due(timeline: Timeline) -> bool:
    """``cleanIfNecessary``: at least 3 completed instants after the latest completed compaction."""
    compactions = timeline.completed_compactions()
    if not compactions:
        return True
    after = [i for i in timeline.instants if i.state == COMPLETED and i.ts > compactions[-1]]
    return len(after) >= CLEAN_AFTER_COMPACTION


def data_table_bound(data: Timeline) -> str | None:
    """``getEarliestInstantForMetadataArchival``: the earlier of the data table's earliest commit
    on its active timeline and its earliest pending instant (None: neither)."""
    commits = [i.ts for i in data.commits()]
    pending = [i.ts for i in data.instants if i.state != COMPLETED]
    candidates = commits[:1] + pending[:1]
    return min(candidates) if candidates else None
