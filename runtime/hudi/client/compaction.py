"""Compaction of a merge-on-read table (version 6): its plan, one file group's compaction, its
commit and its rollback, as Hudi 0.13 - 0.15 run them for the Flink writer.

Sources (apache/hudi 0.15):

* Scheduling. ``ScheduleCompactionActionExecutor.needCompact`` with the ``num_commits`` trigger
  (``compaction.trigger.strategy``): compact once ``compaction.delta_commits`` delta commits, in any
  state, follow the latest completed compaction
  (``CompactionUtils.getDeltaCommitsSinceLatestCompaction``; every delta commit when none
  completed); Hudi 1.x counts completed delta commits only
  (``CompactionUtils.getCompletedDeltaCommitsSinceLatestCompaction``): a protocol modelling a 1.x
  release counts as 1.x does. The instant is a new instant time.
* The plan. ``BaseHoodieCompactionPlanGenerator.generateCompactionPlan``: per partition, the latest
  file slice of every file group that is in no pending compaction and has log files; one
  ``CompactionOperation`` each (base instant, base file, log files in version order, metrics). A
  plan with no operation is not saved. ``TimelineMetadataUtils.serializeCompactionPlan`` stores the
  ``HoodieCompactionPlan`` (``HoodieCompactionOperation.avsc``; plan version 2:
  ``CompactionUtils.LATEST_COMPACTION_METADATA_VERSION``, file names without their folder) in an
  Avro container file as ``<C>.compaction.requested``; ``transitionCompactionRequestedToInflight``
  writes an empty ``<C>.compaction.inflight``.
* One file group. ``HoodieCompactor.compact``: ``maxInstantTime`` is the latest completed commit,
  delta commit or rollback; ``HoodieMergedLogRecordScanner`` reads the slice's log blocks in order
  and skips a block of an instant that did not complete or is later than ``maxInstantTime``
  (``AbstractHoodieLogRecordReader.scanInternal``); records of one key combine by ordering value,
  the later one winning a tie (``EventTimeAvroPayload.preCombine``). ``HoodieMergeHandle`` (or
  ``HoodieCreateHandle`` for a log-only group) writes ``<fileId>_<token>_<C>.parquet``: a stored row
  stays unless a log record's ordering value is at least its own; compaction preserves the log
  records' commit time and sequence number (``hoodie.compaction.preserve.commit.metadata``, on by
  default since 0.11), so incremental and time-travel reads still see the delta commit that wrote
  a row.
* The commit. ``CompactHelpers.createCompactionMetadata``: ``HoodieCommitMetadata(compacted=true)``,
  the new base files' write stats, the schema, operation ``COMPACT``;
  ``transitionCompactionInflightToComplete`` writes ``<C>.commit`` (``.compaction.requested`` and
  ``.inflight`` stay: they are one instant with it).
* Rollback. ``CompactionUtil.rollbackCompaction`` -> ``HoodieTable.rollbackInflightCompaction``:
  the inflight compaction's files are deleted and the instant goes back to requested (its plan
  kept), to be executed again.

  The rollback is a rollback instant of its own (:mod:`runtime.hudi.formats.rollback_metadata`, ``--rollback-instants``)
  naming the compaction, whose requested file stays.

Differences: the scanner's rollback command blocks need no handling of their own, as every instant they name is
also not completed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from runtime.core.dfs import Dfs, DfsNotFound
from runtime.core.messages import WriteStat
from runtime.hudi.client.rollback import run_rollback
from runtime.hudi.client.table_metadata import TableMetadataWriter, publish
from runtime.hudi.formats.avro_schema import arrow_type
from runtime.hudi.formats.bloom_filter import KeyFilter
from runtime.hudi.formats.commit_metadata import commit_metadata_doc
from runtime.hudi.formats.compaction_plan import CompactionOperation, CompactionPlan, decode_plan, encode_plan
from runtime.hudi.formats.log_format import (
    AVRO_DATA_BLOCK,
    SCHEMA,
    LogFormatError,
    avro_table,
    read_blocks,
)
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.formats.rollback_metadata import RollbackPlan, RollbackWork
from runtime.hudi.table.base_files import base_file_name, parse_base_file_name
from runtime.hudi.table.held_log_blocks import HELD_LOG_FILES
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_writer import list_partition
from runtime.hudi.table.merge import merge_file_group
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMMIT, COMPACTION, INFLIGHT, REQUESTED

COMPACT = "COMPACT"  # WriteOperationType of a compaction's commit


# -- scheduling ---------------------------------------------------------------------------------


def needs_compaction(timeline: Timeline, delta_commits: int, *, completed_only: bool = False) -> bool:
    """The ``num_commits`` trigger: ``delta_commits`` or more since the latest completed compaction,
    in any state (Hudi 0.14 - 0.15) or ``completed_only`` (Hudi 1.x)."""
    count = timeline.delta_commits_since_compaction(completed_only=completed_only)
    return delta_commits > 0 and count >= delta_commits


def counts_completed_delta_commits(release_table_version: int) -> bool:
    """Whether the ``num_commits`` trigger of the Hudi release that writes ``release_table_version``
    counts completed delta commits only (1.0 on, table version 8 and up)."""
    return release_table_version >= 8


def newer_writer_pending(timeline: Timeline) -> bool:
    """Whether a writer's instant newer than the last completed one is pending: the lab's guard
    (``--compaction-pending-guard on``) schedules no compaction then. On table version 6 such a
    delta commit may still append to a file group's old slice after the plan listed its logs, and
    the compacted base file shadows that slice (Hudi issue #7969); Hudi's Flink writer has no guard."""
    last = timeline.last_completed() or ""
    return any(p > last for p in timeline.pending_commits())


def generate_plan(table: HudiTable, timeline: Timeline) -> list[CompactionOperation]:
    """The operations of a new plan: the latest slice with log files of every file group that no
    pending compaction holds, partition by partition."""
    pending = compacting_file_groups(table, timeline)
    ops = []
    for partition in table.partitions():
        held = pending.get(partition, {})
        listing = list_partition(table, partition, timeline, held)
        sizes = listing.sizes
        for fid in sorted(listing.slices):
            s = listing.slices[fid]
            if fid in held or not s.log_files:
                continue
            log_size = float(sum(sizes.get(n, 0) for n in s.log_files))
            metrics = {
                "TOTAL_LOG_FILES": float(len(s.log_files)),
                "TOTAL_LOG_FILES_SIZE": log_size,
                "TOTAL_IO_READ_MB": (log_size + sizes.get(s.base_file, 0)) / 2**20,
            }
            ops.append(CompactionOperation(partition, fid, s.base_instant, s.base_file, s.log_files, metrics))
    return ops


def _entries(table: HudiTable, partition: str) -> list[Any]:
    try:
        return table.dfs.list_dir(table.partition_path(partition))
    except DfsNotFound:
        return []


def requested_file(table: HudiTable, instant: str) -> str:
    return table.timeline_file(f"{instant}.{COMPACTION}.{REQUESTED}")


def inflight_file(table: HudiTable, instant: str) -> str:
    return table.timeline_file(f"{instant}.{COMPACTION}.{INFLIGHT}")


def save_plan(table: HudiTable, instant: str, operations: list[CompactionOperation]) -> None:
    """``<instant>.compaction.requested`` with the plan (the caller holds the table lock)."""
    if not operations:
        raise TableError(f"refusing to save the empty compaction plan of {instant}: Hudi saves none")
    table.dfs.write_bytes(requested_file(table, instant), encode_plan(operations))


def read_plan(table: HudiTable, instant: str) -> CompactionPlan:
    try:
        data = table.dfs.read_bytes(requested_file(table, instant))
    except DfsNotFound as exc:
        raise TableError(f"compaction {instant} has no plan: {requested_file(table, instant)} is missing") from exc
    try:
        return decode_plan(instant, data)
    except ValueError as exc:
        raise TableError(str(exc)) from None


def compacting_file_groups(table: HudiTable, timeline: Timeline) -> dict[str, dict[str, str]]:
    """partition -> file id -> the pending compaction holding it (``getPendingCompactionOperations``)."""
    out: dict[str, dict[str, str]] = {}
    for instant in timeline.pending_compactions():
        for op in read_plan(table, instant).operations:
            out.setdefault(op.partition, {})[op.file_id] = instant
    return out


def start_compaction(table: HudiTable, instant: str) -> CompactionPlan:
    """requested -> inflight; the plan to execute."""
    plan = read_plan(table, instant)
    table.dfs.create_empty(inflight_file(table, instant))
    return plan


# -- one file group -----------------------------------------------------------------------------


def arrow_schema(record_schema_json: str) -> pa.Schema:
    fields = json.loads(record_schema_json)["fields"]
    try:
        return pa.schema([pa.field(f["name"], arrow_type(f["type"])) for f in fields])
    except ValueError as exc:
        raise TableError(f"a log block's schema has a field compaction does not read: {exc}") from None


@dataclass(frozen=True)
class LogRead:
    """What the scanner read of a slice's log files."""

    records: pa.Table | None  # the records of the blocks that count, in log order (None: no record)
    bytes_read: int  # the log files' size


def read_log_records(table: HudiTable, partition: str, log_files: Iterable[str], timeline: Timeline) -> LogRead:
    """The records of the log files' blocks that count: a block counts when its instant completed
    (and so is not later than ``maxInstantTime``, the latest completed one)."""
    completed = set(timeline.completed_commits())
    tables, size = [], 0
    for name in log_files:
        path = Dfs.join(table.base_path, partition, name)
        data = table.dfs.read_bytes(path)
        size += len(data)
        for block in read_blocks(data, path):
            # command blocks name instants that are not completed, whose blocks are skipped anyway
            if block.block_type == AVRO_DATA_BLOCK and block.instant in completed:
                schema = arrow_schema(block.header[SCHEMA])
                # the records of a log file this process wrote (one block): not decoded again
                held = HELD_LOG_FILES.take(path, data, schema) if block.offset == 0 else None
                rows = held if held is not None else avro_table(block, schema)
                if rows.num_rows:
                    tables.append(rows)
    if not tables:
        return LogRead(None, size)
    try:
        return LogRead(pa.concat_tables(tables, promote_options="none"), size)
    except pa.ArrowInvalid as exc:
        raise LogFormatError(f"the log blocks of {partition} disagree on their schema: {exc}") from exc


@dataclass(frozen=True)
class CompactedBase:
    """A base file a compaction wrote, as the compaction task may keep it for the file group's
    next compaction: the rows (as the file decodes; None: not kept) and the keys' filter."""

    rel_path: str
    rows: pa.Table | None
    key_filter: KeyFilter | None


def compact_file_group(
    table: HudiTable,
    op: CompactionOperation,
    instant: str,
    timeline: Timeline,
    *,
    task_id: int,
    options: ParquetWriteOptions | None = None,
    held: CompactedBase | None = None,
) -> tuple[WriteStat, CompactedBase]:
    """Merges the slice's base file with its log records into ``<fileId>_<token>_<instant>.parquet``
    (the module docstring has the rules); the base file's write stat, and the file written.
    ``held``: what the task kept of a base file it wrote; when it is the slice's base file, the
    file is still read (counted, opened: a missing one fails) but not decoded, and its keys'
    filter is extended."""
    logs = read_log_records(table, op.partition, op.log_files, timeline)
    base_rel = f"{op.partition}/{op.base_file}" if op.base_file else ""
    prior = held if held is not None and base_rel and held.rel_path == base_rel else None
    base = table.read_base_file(base_rel, prior.rows if prior is not None else None) if base_rel else None
    incoming = logs.records if logs.records is not None else base.slice(0, 0) if base is not None else None
    if incoming is None:
        raise TableError(f"compaction {instant}: file group {op.file_id} has neither a base file nor log records")
    name = base_file_name(op.file_id, f"{task_id}-0-0", instant)
    rel = f"{op.partition}/{name}"
    merged = merge_file_group(
        base,
        incoming,
        instant=instant,
        partition=op.partition,
        file_name=name,
        key=table.props.record_key_field,
        precombine=table.props.precombine_field,
        partition_id=task_id,
        keep_meta=True,
    )
    options = options or ParquetWriteOptions()
    key_filter = None
    if table.dfs.encodes_parquet:  # (the simulated disk writes no footer)
        key_filter = options.merged_key_filter(merged.table, base, prior.key_filter if prior is not None else None)
    size = table.write_base_file(rel, merged.table, options, key_filter)
    stat = WriteStat(
        op.file_id,
        rel,
        op.partition,
        op.base_instant,
        merged.table.num_rows,
        merged.inserts,
        merged.updates,
        size,
        size,
        0,
        log_records=0 if logs.records is None else logs.records.num_rows,
        log_files_compacted=len(op.log_files),
        log_size_compacted=logs.bytes_read,
        updated_records_compacted=merged.updates,
    )
    return stat, CompactedBase(rel, merged.table, key_filter)


# -- commit and rollback ------------------------------------------------------------------------


def commit_compaction(
    table: HudiTable,
    instant: str,
    stats: list[WriteStat],
    schema_json: str,
    now: float | None = None,
    metadata: TableMetadataWriter | None = None,
) -> None:
    """``<instant>.commit`` (from version 8 ``<instant>_<completion>.commit``): the compaction's
    metadata; the last step, which publishes its base files (with the metadata table's delta commit
    first when ``metadata``, its writer, is given)."""
    doc = commit_metadata_doc(stats, {"schema": schema_json}, compacted=True, operation=COMPACT)
    publish(table, instant, COMMIT, doc, now, metadata)


def rollback_compaction(
    table: HudiTable, instant: str, now: float | None = None, metadata: TableMetadataWriter | None = None
) -> list[str]:
    """An inflight compaction back to requested (``HoodieTable.rollbackInflightCompaction``): its
    base files deleted (by listing the plan's partitions) by a rollback that keeps the instant's
    files (with rollback instants, published as ``<t>.rollback``), then its inflight file. Returns
    the deleted base files. Refuses a completed one. ``now``: the clock of the rollback's time."""
    timeline = table.timeline()
    if instant in timeline.completed_compactions():
        raise TableError(f"cannot roll back compaction {instant}: it is committed")
    targets = []
    for partition in sorted({op.partition for op in read_plan(table, instant).operations}):
        for e in _entries(table, partition):
            parsed = parse_base_file_name(e.name)
            if parsed is not None and parsed[2] == instant:
                targets.append(e.path)
    work = RollbackWork(targets)
    plan = RollbackPlan(instant, COMPACTION, work.requests(table.base_path, markers=False))
    deleted = run_rollback(table, plan, work, instant_files=(), markers=False, now=now, metadata=metadata)
    table.dfs.delete(inflight_file(table, instant))  # revertInstantFromInflightToRequested
    return deleted
