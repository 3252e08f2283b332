"""The cleaner: old file versions deleted under ``KEEP_LATEST_COMMITS``, published as a clean instant.

Sources (Apache Hudi 0.14.0 and 1.1, ``hudi-client-common``, ``hudi-common``, ``hudi-flink``):

* ``FlinkOptions`` (0.10-1.1): ``clean.async.enabled`` true, ``clean.policy`` KEEP_LATEST_COMMITS,
  ``clean.retain_commits`` 30; ``CleanFunction`` (the ``clean_commits`` sink, which
  ``CompactionCommitSink`` extends) starts ``HoodieFlinkWriteClient.startAsyncCleaning`` at each
  checkpoint's snapshot and waits for it at the completion notification. The Kafka Connect sink
  cleans inline after each commit with ``HoodieCleanConfig``'s defaults (``hoodie.cleaner.commits.retained`` 10).
* ``CleanerUtils.getEarliestCommitToRetain``: with more completed commits (commits, delta commits,
  completed compactions: ``getCompletedCommitsTimeline``) than ``retain``, the one ``retain`` from
  the newest; never later than the earliest pending commit (the latest completed one before it).
* ``CleanPlanner.getPartitionPathsToClean`` (``hoodie.cleaner.incremental.mode`` true): after a
  clean, the partitions the commits since the last clean's earliest commit to retain wrote; before
  any, every partition.
* ``CleanPlanner.getFilesToCleanKeepingLatestCommits``: per file group, a slice is deleted when it
  is older than the earliest commit to retain, unless it is the group's latest slice or the latest
  one before the earliest commit to retain (what a query at that commit reads); on merge-on-read a
  deleted slice's log files go with its base file. ``isFileSliceNeededForPendingCompaction``: a
  slice a pending compaction reads is kept (here: the earliest commit to retain is never after
  a pending compaction, which keeps the same slices).
* ``CleanPlanActionExecutor.requestClean``: no file to delete, no clean instant; else
  ``<t>.clean.requested`` holds the ``HoodieCleanerPlan`` (``CleanPlanner.LATEST_CLEAN_PLAN_VERSION``
  2: full paths in ``filePathsToBeDeletedPerPartition``). ``CleanActionExecutor.runPendingClean``:
  ``<t>.clean.inflight`` (the plan again), the files deleted, then ``<t>.clean`` (layout 2:
  ``<t>_<completion>.clean``) with the ``HoodieCleanMetadata`` (``CleanerUtils.convertCleanMetadata``,
  version 2: file names per partition). ``BaseHoodieTableServiceClient.clean`` first finishes a
  clean a crash left requested or inflight, under its own instant time.
* Schemas: ``HoodieCleanerPlan.avsc``, ``HoodieCleanMetadata.avsc``,
  ``HoodieCleanPartitionMetadata.avsc``, ``HoodieActionInstant.avsc``; 1.x adds ``extraMetadata``
  to the plan and the metadata (written null).

Differences: the clean runs on the coordinator right after a writers' commit (Hudi's Flink job
runs it on the ``clean_commits`` task from the next checkpoint's snapshot on; either way one clean
at a time, after the commit it can see); ``timeTakenInMillis`` is 0 (the simulator's traces stay
deterministic). Only KEEP_LATEST_COMMITS is modelled (Hudi's Flink default).
"""

from __future__ import annotations

from runtime.core.dfs import DfsNotFound
from runtime.hudi.client.table_metadata import TableMetadataWriter
from runtime.hudi.formats.clean_metadata import (
    CLEAN,
    CleanPlan,
    decode_metadata,
    decode_plan,
    encode_metadata,
    encode_plan,
    metadata_record,
)
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import deleted_and_written
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMPLETED, REQUESTED


def earliest_commit_to_retain(timeline: Timeline, retain: int) -> str | None:
    """``CleanerUtils.getEarliestCommitToRetain`` (KEEP_LATEST_COMMITS), bounded by the earliest
    pending writer's instant or compaction."""
    done = timeline.completed_instants()
    if len(done) <= retain:
        return None
    earliest = done[len(done) - retain]
    pending = [*timeline.pending_commits(), *timeline.pending_compactions()]
    if pending and min(pending) < earliest:
        before = [ts for ts in done if ts < min(pending)]
        return before[-1] if before else None
    return earliest


def plan_clean(table: HudiTable, timeline: Timeline, retain: int) -> CleanPlan | None:
    """``CleanPlanner``: what a clean now deletes; None when nothing (no clean instant then)."""
    earliest = earliest_commit_to_retain(timeline, retain)
    if earliest is None:
        return None
    done = timeline.completed_instants()
    action = table.metadata_file(earliest, timeline).rsplit(".", 1)[-1]
    plan = CleanPlan(earliest, action, done[-1])
    for partition in _partitions_to_clean(table, timeline, earliest):
        superseded = [p for slices in _file_groups(table, partition, timeline).values() for p in _old(slices, earliest)]
        if superseded:
            plan.files[partition] = sorted(superseded)
    return plan if plan.files else None


def _partitions_to_clean(table: HudiTable, timeline: Timeline, earliest: str) -> list[str]:
    """Incremental mode: the partitions written since the last clean's earliest commit to retain
    (read from the commits' metadata); every partition before the first clean."""
    since = earliest_retained_by_last_clean(table, timeline)
    if since is None:
        return table.partitions()
    partitions: set[str] = set()
    for ts in timeline.completed_instants():
        if since <= ts < earliest:
            name = table.metadata_file(ts, timeline)
            doc = table.version.decode_metadata(table.dfs.read_bytes(table.timeline_file(name)), name)
            partitions.update(doc.get("partitionToWriteStats") or {})
    return sorted(partitions)


def earliest_retained_by_last_clean(table: HudiTable, timeline: Timeline) -> str | None:
    """The earliest commit to retain the latest completed clean recorded (None before any): the
    commits before it may have lost superseded file versions to the cleaner, so their files and
    their incremental reads are no longer whole (Hudi's incremental query does not read past it)."""
    cleans = [i.ts for i in timeline.instants if i.action == CLEAN and i.state == COMPLETED]
    if not cleans:
        return None
    doc = decode_metadata(table.dfs.read_bytes(table.timeline_file(_completed_name(table, timeline, cleans[-1]))))
    return str(doc.get("earliestCommitToRetain") or "") or None


def _completed_name(table: HudiTable, timeline: Timeline, ts: str) -> str:
    return table.version.completed_file(ts, timeline.completion_of(ts), CLEAN)


def _file_groups(table: HudiTable, partition: str, timeline: Timeline) -> dict[str, dict[str, list[str]]]:
    """File id -> committed slice (its base instant) -> its files' full paths, from one listing.
    A log file joins the slice of its base instant (version 6), or from version 8 the latest
    slice at or before its instant's completion; a log of no completed instant joins none."""
    try:
        entries = table.dfs.list_dir(table.partition_path(partition))
    except DfsNotFound:
        return {}
    groups: dict[str, dict[str, list[str]]] = {}
    logs: list[tuple[LogFileName, str]] = []
    for e in entries:
        parsed = parse_base_file_name(e.name)
        if parsed is not None and timeline.contains_or_before_start(parsed[2]):
            slices = groups.get(parsed[0])
            if slices is None:  # (not setdefault: it would build a dict for every file)
                slices = groups[parsed[0]] = {}
            slices.setdefault(parsed[2], []).append(e.path)
        elif (log := LogFileName.parse(e.name)) is not None:
            logs.append((log, e.path))
    for log, path in sorted(logs, key=lambda x: (x[0].base_instant, x[0].version)):
        slices = groups.setdefault(log.file_id, {})
        if not table.version.logs_per_instant:
            if timeline.contains_or_before_start(log.base_instant):
                slices.setdefault(log.base_instant, []).append(path)
            continue
        completion = timeline.completion_of(log.base_instant)
        if completion is None and timeline.contains_or_before_start(log.base_instant):
            completion = log.base_instant
        if completion is None:
            continue
        before = [k for k in slices if k <= completion]
        slices.setdefault(max(before) if before else log.base_instant, []).append(path)
    return groups


def _old(slices: dict[str, list[str]], earliest: str) -> list[str]:
    """``getFilesToCleanKeepingLatestCommits`` for one file group: the files of every slice older
    than ``earliest`` but the group's latest and the latest one before ``earliest``."""
    keys = sorted(slices, reverse=True)
    if not keys:
        return []
    kept = {keys[0], next((k for k in keys if k < earliest), "")}
    return [p for k in keys if k not in kept and k < earliest for p in slices[k]]


def clean(
    table: HudiTable,
    retain: int,
    now: float,
    timeline: Timeline,
    clean_time: str | None = None,
    metadata: TableMetadataWriter | None = None,
) -> list[str]:
    """``BaseHoodieTableServiceClient.clean`` on ``timeline`` (the table's, just listed): a
    pending clean finished first, then a new one planned and run when it has files to delete,
    at ``clean_time`` when given (the metadata table's on version 6), else a new instant time;
    ``metadata``: the metadata table's writer when it is on. Returns the clean instants completed."""
    done = [_run(table, ts, now, metadata) for ts in _pending_cleans(timeline)]
    if done:
        timeline = table.timeline()
    plan = plan_clean(table, timeline, retain)
    if plan is None:
        return done
    clean_time = clean_time or table.new_instant_time(now, timeline)
    table.dfs.write_bytes(
        table.timeline_file(f"{clean_time}.{CLEAN}.{REQUESTED}"),
        encode_plan(plan, extra_metadata=table.version.layout_2),
    )
    return [*done, _run(table, clean_time, now, metadata)]


def _pending_cleans(timeline: Timeline) -> list[str]:
    return [i.ts for i in timeline.instants if i.action == CLEAN and i.state != COMPLETED]


def _run(table: HudiTable, clean_time: str, now: float, metadata: TableMetadataWriter | None) -> str:
    """``CleanActionExecutor.runPendingClean``: inflight (the plan again), the deletes, the
    completed instant with the metadata."""
    data = table.dfs.read_bytes(table.timeline_file(f"{clean_time}.{CLEAN}.{REQUESTED}"))
    inflight = table.timeline_file(f"{clean_time}.{CLEAN}.inflight")
    if not table.dfs.exists(inflight):
        table.dfs.write_bytes(inflight, data)
    plan = decode_plan(data)
    deleted: dict[str, list[str]] = {}
    for partition, files in plan.files.items():
        for path in files:
            table.dfs.delete(path)  # a retried clean finds some gone: deleted all the same
            deleted.setdefault(partition, []).append(path)
    record = metadata_record(clean_time, plan, deleted)
    if metadata is not None:
        # CleanActionExecutor.runClean -> writeTableMetadata: the metadata table's delta commit of
        # the clean's time marks the deleted files, before the completed clean
        gone = [path for paths in deleted.values() for path in paths]
        metadata.update(clean_time, deleted_and_written(table.base_path, gone, {}), now)
    name = table.version.completed_file(clean_time, table.completion_time(clean_time, now), CLEAN)
    table.dfs.write_bytes(table.timeline_file(name), encode_metadata(record, extra_metadata=table.version.layout_2))
    return clean_time
