"""A merge-on-read flush: one log file appended to a file group's latest file slice.

Hudi's Flink merge-on-read writer (0.13 - 0.15, table version 6) writes every flush of a bucket
through a ``FlinkAppendHandle`` (``FlinkWriteHandleFactory`` -> ``DeltaCommitWriteHandleFactory``),
inserts into a new file group too: a file group starts with log files only (no base file), and
base files come from compaction alone.

* ``HoodieAppendHandle.init``: the handle writes to the latest file slice of the file group
  (``getLatestFileSlice``: the slice of the latest committed base file, or of the committed delta
  commit that created a log-only group); a file group without one starts a slice whose base
  instant is the writing instant. A file group in a pending compaction's plan has a new, empty
  slice at the compaction's instant (``AbstractTableFileSystemView.buildFileGroups`` ->
  ``addNewFileSliceAtInstant``), so logs written after the plan are named after it.
* ``HoodieWriteHandle.createLogWriter`` / ``HoodieLogFormatWriter``: the log writer opens the
  slice's latest log file and, on storage without append (``StorageSchemes``: local files and
  object stores), rolls over to the next log version: so every flush is a log file of its own,
  ``.<fileId>_<baseInstant>.log.<version>_<writeToken>``, holding one Avro data block.
* ``HoodieAppendHandle.updateWriteStat``: the write stat (``HoodieDeltaWriteStat``) names the log
  file (``path``, ``logVersion``, ``logOffset`` 0 for a new file), the slice's base file ("" when
  it has none) and its log files; ``prevCommit`` is the slice's base instant; a record of a file
  group that exists is counted an update (its location is ``U``), of a new one an insert.

From table version 8 (Hudi 1.x, :mod:`runtime.hudi.timeline.table_version`) a flush's log file is named
after the writing instant, ``.<fileId>_<instant>.log.<version>_<writeToken>``, whatever slice it
joins; the stat's ``prevCommit`` is the instant, ``baseFile`` empty and ``logFiles`` that file
alone (``HoodieAppendHandle.populateWriteStatAndFetchFileSlice``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa

from runtime.core.dfs import Dfs
from runtime.core.messages import PartitionFiles, WriteStat
from runtime.hudi.formats.log_format import LogFileName, avro_data_block, record_schema
from runtime.hudi.table.base_files import avro_schema_json, parse_base_file_name
from runtime.hudi.table.held_log_blocks import HELD_LOG_FILES
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.active_timeline import Timeline


@dataclass(frozen=True)
class LogSlice:
    """The latest file slice of a file group, as the append handle sees it."""

    base_instant: str
    base_file: str  # "" for a log-only file group
    log_files: tuple[str, ...]
    next_version: int  # the next log file's version (files of this slice and base instant)
    exists: bool = True  # False: the file group has no committed slice yet (its records are inserts)


@dataclass(frozen=True)
class PartitionLogs:
    """One listing of a partition: the committed file slices and every log file's name."""

    slices: dict[str, LogSlice]  # file id -> latest committed slice
    names: dict[str, list[LogFileName]]  # file id -> every log file, committed or not
    sizes: dict[str, int] = field(default_factory=dict)  # file name -> bytes, of every entry listed
    per_instant: bool = False  # table version 8+: a log file is named after the instant writing it

    def slice_for(self, file_id: str, instant: str) -> LogSlice:
        """The file group's latest committed slice, or the first one ``instant`` starts (its log
        versions still count files a failed attempt of the same instant left)."""
        committed = self.slices.get(file_id)
        if self.per_instant:  # version 8+: the instant's own log files, whatever the slice
            return LogSlice(instant, "", (), _next_version(self.names.get(file_id, []), instant), committed is not None)
        if committed is not None:
            return committed
        return LogSlice(instant, "", (), _next_version(self.names.get(file_id, []), instant), exists=False)


def list_partition(
    table: HudiTable,
    partition: str,
    timeline: Timeline,
    compacting: dict[str, str] | None = None,
    files: PartitionFiles | None = None,
) -> PartitionLogs:
    """The file slices of ``partition`` from one listing.

    Version 6: a slice's base instant is its latest committed base file's, else the latest
    committed instant that started a log-only slice; a file group in a pending compaction
    (``compacting``: file id -> the compaction's instant) has its new slice at the compaction
    instant instead. From version 8 a committed log file belongs to the slice with the largest base
    instant at or before its completion time (:func:`_slices_by_completion`). Log versions count
    every log file present, committed or not, so a new log file never takes an existing name.
    ``files``: the partition's files as a file-system view holds them, else one listing."""
    listed = table.partition_files(partition) if files is None else files
    if not listed.names:
        return PartitionLogs({}, {})
    compacting = compacting or {}
    committed = timeline.contains_or_before_start  # an archived instant's files are committed
    bases: dict[str, dict[str, str]] = {}  # file id -> committed base instant -> file name
    logs: dict[str, list[LogFileName]] = {}
    for name in listed.names:
        parsed = parse_base_file_name(name)
        if parsed is not None:
            fid, _, inst = parsed
            if committed(inst):
                bases.setdefault(fid, {})[inst] = name
            continue
        log = LogFileName.parse(name)
        if log is not None:
            logs.setdefault(log.file_id, []).append(log)
    sizes = listed.sizes_by_name()
    if table.version.logs_per_instant:
        by_completion = _slices_by_completion(bases, logs, timeline, compacting)
        return PartitionLogs(by_completion, logs, sizes, per_instant=True)
    slices: dict[str, LogSlice] = {}
    for fid in set(bases) | set(logs) | set(compacting):
        names = logs.get(fid, [])
        if fid in compacting:
            base_instant, base_file = compacting[fid], ""
        elif fid in bases:
            base_instant = max(bases[fid])
            base_file = bases[fid][base_instant]
        else:
            started = [n.base_instant for n in names if committed(n.base_instant)]
            if not started:
                continue  # only uncommitted log files: no committed slice
            base_instant, base_file = max(started), ""
        own = sorted((n for n in names if n.base_instant == base_instant), key=lambda n: n.version)
        slices[fid] = LogSlice(base_instant, base_file, tuple(str(n) for n in own), _next_version(names, base_instant))
    return PartitionLogs(slices, logs, sizes)


def _slices_by_completion(
    bases: dict[str, dict[str, str]], logs: dict[str, list[LogFileName]], timeline: Timeline, compacting: dict[str, str]
) -> dict[str, LogSlice]:
    """Each file group's latest slice, version 8+ (Hudi 1.x ``HoodieFileGroup.addLogFile``): the
    slices are keyed by base instant (a committed base file's, or a pending compaction's); a log
    file of a completed instant joins the slice with the largest key at or before its completion
    time; in a group without such a slice the first log file starts one at its own instant."""
    slices: dict[str, LogSlice] = {}
    for fid in set(bases) | set(logs) | set(compacting):
        keys = set(bases.get(fid, {}))
        if fid in compacting:
            keys.add(compacting[fid])
        members: dict[str, list[LogFileName]] = {}
        for log in sorted(logs.get(fid, []), key=lambda n: (n.base_instant, n.version)):
            completion = timeline.completion_of(log.base_instant)
            if completion is None and timeline.contains_or_before_start(log.base_instant):
                completion = log.base_instant  # archived: completed before the active timeline starts
            if completion is None:
                continue  # not committed: in no slice
            before = [k for k in keys if k <= completion]
            if not before:
                keys.add(log.base_instant)
                before = [log.base_instant]
            members.setdefault(max(before), []).append(log)
        if not keys:
            continue
        latest = max(keys)
        own = tuple(str(n) for n in members.get(latest, []))
        slices[fid] = LogSlice(latest, bases.get(fid, {}).get(latest, ""), own, 0)
    return slices


def _next_version(names: list[LogFileName], base_instant: str) -> int:
    return max((n.version for n in names if n.base_instant == base_instant), default=0) + 1


def rolled_over(table: HudiTable, partition: str, file_id: str, slice_: LogSlice, write_token: str) -> LogSlice:
    """``HoodieLogFormatWriter.getOutputStream``: when the slice's next log file exists already (a
    file-system view that was behind the storage), ``HoodieLogFile.rollOver`` past every version of
    the slice the partition holds (one listing)."""
    name = LogFileName(file_id, slice_.base_instant, slice_.next_version, write_token)
    if not table.dfs.exists(Dfs.join(table.partition_path(partition), str(name))):
        return slice_
    names = [LogFileName.parse(name) for name in table.partition_files(partition).names]
    own = [n for n in names if n is not None and n.file_id == file_id]
    return replace(slice_, next_version=_next_version(own, slice_.base_instant))


def append_log_file(
    table: HudiTable,
    partition: str,
    file_id: str,
    slice_: LogSlice,
    instant: str,
    records: pa.Table,
    write_token: str,
) -> tuple[WriteStat, LogSlice]:
    """Writes ``records`` (the meta columns in place) as the slice's next log file; the write
    stat and the slice with that file."""
    name = LogFileName(file_id, slice_.base_instant, slice_.next_version, write_token)
    rel = f"{partition}/{name}"
    schema = record_schema(avro_schema_json(records.schema, table.props.table_name))
    block = avro_data_block(instant, schema, records)
    path = Dfs.join(table.base_path, rel)
    table.dfs.write_bytes(path, block)
    if table.dfs.encodes_parquet:  # a real storage (the simulator's runs share one process)
        HELD_LOG_FILES.hold(path, block, records)
    size = len(block)
    # version 8+: each flush's stat names its own log file only (a new append handle per flush)
    logs = (str(name),) if table.version.logs_per_instant else (*slice_.log_files, str(name))
    rows = records.num_rows
    inserts, updates = (0, rows) if slice_.exists else (rows, 0)
    stat = WriteStat(
        file_id,
        rel,
        partition,
        slice_.base_instant,
        rows,
        inserts,
        updates,
        size,
        size,
        rows,
        log_version=name.version,
        base_file=slice_.base_file,
        log_files=list(logs),
    )
    kept = slice_.log_files if table.version.logs_per_instant else logs
    return stat, replace(slice_, log_files=kept, next_version=slice_.next_version + 1)
