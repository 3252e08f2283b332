"""Rolling back a failed write, as Hudi's rollback action does (``hudi-client-common``
``org.apache.hudi.table.action.rollback``): what a writer's instant left is found
(``MarkerBasedRollbackStrategy`` with markers, else by listing its partitions;
``BaseRollbackHelper`` for merge-on-read log files), then ``BaseRollbackActionExecutor.runRollback``
deletes it; with rollback instants the rollback is published as ``<t>.rollback``
(:mod:`runtime.hudi.formats.rollback_metadata` holds its plan and metadata documents); with the
metadata table on, its delta commit of the instant goes first (``writeTableMetadata``).
``BaseHoodieWriteClient.rollbackFailedWrites`` picks the instants (:func:`failed_writes`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runtime.core.dfs import Dfs, DfsNotFound
from runtime.hudi.client.table_metadata import TableMetadataWriter
from runtime.hudi.formats.log_format import LogFileName, read_blocks, rollback_block
from runtime.hudi.formats.rollback_metadata import (
    ROLLBACK,
    LogRollback,
    PartitionRollbackStat,
    RollbackPlan,
    RollbackWork,
    encode_plan,
    partition_of,
    planned_instant,
)
from runtime.hudi.formats.rollback_metadata import encode_metadata as encode_rollback_metadata
from runtime.hudi.formats.rollback_metadata import metadata_record as rollback_metadata_record
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.markers import APPEND, data_file_of
from runtime.hudi.table.metadata_table import deleted_and_written
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMMIT, COMPLETED, REQUESTED, bump_instant


def rollback(
    table: HudiTable,
    instant: str,
    data_files: Iterable[str] = (),
    *,
    now: float | None = None,
    metadata: TableMetadataWriter | None = None,
) -> list[str]:
    """Rolls back an uncommitted writer's instant: its data files deleted (merge-on-read: log
    files deleted or given a ROLLBACK command block), then its inflight and requested files.

    ``data_files`` are paths relative to the base path. With markers (``props.markers``) the
    instant's markers name the rest, and the marker folder goes last (Hudi's
    ``MarkerBasedRollbackStrategy``); without, files of the instant found by listing their
    partitions (every partition when none is named) are deleted too. With rollback instants
    (``props.rollback_instants``) the rollback is published as Hudi does
    (:mod:`runtime.hudi.formats.rollback_metadata`). ``now``: the clock the rollback's instant time comes from;
    ``metadata``: the metadata table's writer when it is on. Returns what was deleted. Refuses a
    committed instant.
    """
    if table.is_committed(instant):
        raise TableError(f"cannot roll back {instant}: it is committed")
    work = _rollback_work(table, instant, list(data_files))
    action = table.props.write_action
    inflight = f"{instant}.inflight" if action == COMMIT else f"{instant}.{action}.inflight"
    return run_rollback(
        table,
        RollbackPlan(instant, action, work.requests(table.base_path, table.props.markers)),
        work,
        instant_files=(inflight, f"{instant}.{action}.requested"),
        markers=table.props.markers,
        now=now,
        metadata=metadata,
    )


def _rollback_work(table: HudiTable, instant: str, data_files: list[str]) -> RollbackWork:
    """What rolling back a writer's instant deletes and marks, found before any of it is done."""
    marked = [data_file_of(m) for m in table.write_markers(instant).all_markers()] if table.props.markers else []
    partitions = {p.rsplit("/", 1)[0] for p in [*data_files, *(f for f, _ in marked)] if "/" in p}
    data_files += [f for f, io_type in marked if io_type != APPEND]  # an APPEND marker names a slice
    if not data_files and not table.props.markers:  # nothing named: look in every partition
        partitions = set(table.partitions())
    # a log file named by a write stat is rolled back below (deleted or marked), not here
    targets = {Dfs.join(table.base_path, p) for p in data_files if LogFileName.parse(p.rsplit("/", 1)[-1]) is None}
    for part in () if table.props.markers else sorted(partitions):
        try:
            for e in table.dfs.list_dir(Dfs.join(table.base_path, part)):
                parsed = parse_base_file_name(e.name)
                if parsed and parsed[2] == instant:
                    targets.add(e.path)
        except DfsNotFound:
            continue
    work = RollbackWork(sorted(targets))
    if table.props.merge_on_read:
        work.log_files = _log_rollback_work(table, instant, partitions)
        work.scans_logs = not table.version.logs_per_instant
    return work


def _log_rollback_work(table: HudiTable, instant: str, partitions: Iterable[str]) -> list[LogRollback]:
    """Hudi 0.14/0.15's rollback of a delta commit (``MarkerBasedRollbackStrategy``,
    ``BaseRollbackHelper``): a log file of a file group the instant created (its base instant
    is the instant) is deleted; a file group it appended to gets a ROLLBACK command block
    naming the instant, in a new log version. A log file here holds one flush, so the
    instant's blocks are found by reading each log file's first block header.

    From table version 8 a log file is named after the instant that wrote it, so the
    instant's log files are deleted and nothing else is read or marked (Hudi 1.x)."""
    out: list[LogRollback] = []
    per_instant = table.version.logs_per_instant
    for part in sorted(partitions):
        try:
            entries = table.dfs.list_dir(Dfs.join(table.base_path, part))
        except DfsNotFound:
            continue
        logs = [(name, e) for e in entries if (name := LogFileName.parse(e.name)) is not None]
        versions: dict[tuple[str, str], int] = {}
        for name, _ in logs:
            key = (name.file_id, name.base_instant)
            versions[key] = max(versions.get(key, 0), name.version)
        for name, e in sorted(logs, key=lambda x: x[1].path):
            if name.base_instant == instant:
                out.append(LogRollback(part, name, e.path, e.size))
                continue
            if per_instant or not any(b.instant == instant for b in _blocks(table, e.path)):
                continue
            key = (name.file_id, name.base_instant)
            versions[key] += 1
            marker = LogFileName(name.file_id, name.base_instant, versions[key], name.write_token)
            out.append(LogRollback(part, name, e.path, e.size, Dfs.join(table.base_path, part, str(marker))))
    return out


def _blocks(table: HudiTable, path: str) -> Iterable[Any]:
    return read_blocks(table.dfs.read_bytes(path), path)


def run_rollback(
    table: HudiTable,
    plan: RollbackPlan,
    work: RollbackWork,
    *,
    instant_files: Iterable[str],
    markers: bool,
    now: float | None,
    metadata: TableMetadataWriter | None,
) -> list[str]:
    """Does a rollback's ``work`` (``BaseRollbackActionExecutor.runRollback``): with rollback
    instants ``<t>.rollback.requested`` (the plan) and ``.inflight`` first; then the data files;
    then the undone instant's ``instant_files`` (``deleteInflightAndRequestedInstant``); then
    the completed ``<t>.rollback``; the instant's marker folder last. Returns what was deleted.
    ``metadata``: the metadata table's writer when it is on."""
    rollback_time = _begin_rollback(table, plan, now) if table.props.rollback_instants else None
    stats: dict[str, PartitionRollbackStat] = {}
    for path in work.base_files:
        table.dfs.delete(path)
        stats.setdefault(partition_of(table.base_path, path), PartitionRollbackStat()).deleted.append(path)
    deleted = list(work.base_files)
    if work.scans_logs:  # the ROLLBACK blocks' instant time
        block_time = rollback_time or bump_instant(max(plan.instant, table.timeline().latest_ts() or plan.instant))
    for log in work.log_files:
        stat = stats.setdefault(log.partition, PartitionRollbackStat())
        if not log.rollback_log:
            table.dfs.delete(log.path)
            deleted.append(log.path)
            stat.deleted.append(log.path)
            continue
        block = rollback_block(block_time, plan.instant)
        table.dfs.write_bytes(log.rollback_log, block)
        stat.rollback_log_files[log.rollback_log] = len(block)
        stat.log_files_from_failed_commit[log.path] = log.size
    for name in instant_files:
        table.dfs.delete(table.timeline_file(name))
    if metadata is not None:
        _rollback_metadata_table(table, metadata, plan.instant, rollback_time, stats, now)
    if rollback_time is not None:
        record = rollback_metadata_record(rollback_time, plan, stats)
        name = table.version.completed_file(rollback_time, table.completion_time(rollback_time, now), ROLLBACK)
        table.dfs.write_bytes(table.timeline_file(name), encode_rollback_metadata(record))
    if markers:
        table.write_markers(plan.instant).delete_folder()
    return deleted


def _rollback_metadata_table(
    table: HudiTable,
    writer: TableMetadataWriter,
    instant: str,
    rollback_time: str | None,
    stats: dict[str, PartitionRollbackStat],
    now: float | None,
) -> None:
    """``HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata)``, before the completed
    rollback: the undone instant's delta commit goes, and one at the rollback's time marks
    the deleted files and lists the log files the rollback wrote."""
    writer.undo(instant)
    if rollback_time is not None:
        deleted = [p for s in stats.values() for p in s.deleted]
        written = {p: n for s in stats.values() for p, n in s.rollback_log_files.items()}
        writer.update(rollback_time, deleted_and_written(table.base_path, deleted, written), now)


def _begin_rollback(table: HudiTable, plan: RollbackPlan, now: float | None) -> str:
    """``BaseHoodieTableServiceClient.rollback``: the rollback's instant time, a pending
    rollback of the same instant resumed under its own (its requested file kept); else a new
    one, its plan saved as ``<t>.rollback.requested``; then ``<t>.rollback.inflight``."""
    timeline = table.timeline()
    pending = {i: (ts, state) for ts, (i, state) in pending_rollbacks(table, timeline).items()}
    if plan.instant in pending:
        rollback_time, state = pending[plan.instant]
    else:
        rollback_time, state = table.next_instant_time(now, timeline), REQUESTED
        table.dfs.write_bytes(table.timeline_file(f"{rollback_time}.{ROLLBACK}.requested"), encode_plan(plan))
    if state == REQUESTED:
        table.dfs.create_empty(table.timeline_file(f"{rollback_time}.{ROLLBACK}.inflight"))
    return rollback_time


def pending_rollbacks(table: HudiTable, timeline: Timeline) -> dict[str, tuple[str, str]]:
    """Rollback time -> (the instant its saved plan undoes, its state) of every rollback
    requested or inflight on ``timeline`` (one a crash interrupted)."""
    out = {}
    for i in timeline.instants:
        if i.action == ROLLBACK and i.state != COMPLETED:
            plan = table.dfs.read_bytes(table.timeline_file(f"{i.ts}.{ROLLBACK}.requested"))
            out[i.ts] = (planned_instant(plan), i.state)
    return out


def failed_writes(table: HudiTable, timeline: Timeline) -> list[str]:
    """The instants ``rollbackFailedWrites`` rolls back: the writers' pending instants and
    those of rollbacks left pending; newest first with rollback instants (Hudi's order),
    oldest first without (this lab before them)."""
    if not table.props.rollback_instants:
        return timeline.pending_commits()
    undone = {i for i, _ in pending_rollbacks(table, timeline).values() if i}
    return sorted({*timeline.pending_commits(), *undone}, reverse=True)
