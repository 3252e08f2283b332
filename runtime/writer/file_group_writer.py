"""How a write task writes one file group's flush, per table type: Hudi's write handles.

Hudi's write function buffers and flushes (:mod:`runtime.writer.write_task`); the write handle a
flush goes through decides how the file group is written (``FlinkWriteHandleFactory``):

* Copy-on-write (Apache Hudi 0.10.0 - 0.14, ``HoodieCreateHandle`` / ``FlinkCreateHandle`` for a
  file group without a base file, ``HoodieMergeHandle`` / ``FlinkMergeHandle`` for one with):
  a new base file version, the flush merged onto the latest one (:mod:`runtime.hudi.table.merge`).
* Merge-on-read (Apache Hudi 0.13 - 0.15, ``HoodieAppendHandle`` / ``FlinkAppendHandle``): the
  flush as the next log file of the file group's latest slice (:mod:`runtime.hudi.table.log_writer`).

Each writer keeps what it learnt of the table between flushes (the file versions it wrote, the
slices and listings) and forgets what was not committed when a commit is abandoned and rolled back.
That is the file-system view only while it is the table's one writer: under a multi-writer mode
another job commits to the same file groups, so a copy-on-write writer lists each partition's
committed base files again at its first touch in every instant and merges onto another writer's
newer version (Hudi 1.1: ``HoodieFlinkWriteClient.upsert`` -> ``getTableAndInitCtx`` builds the
instant's table, whose view ``HoodieMergeHandle`` asks for the file group's latest base file; the
merge-on-read writer lists its slices per instant already).
With ``per_handle`` (``--meta-client release``) each flush also reads what Hudi's write handle
reads: the table's meta client, the partition metadata, the files' statuses
(:mod:`runtime.hudi.table.meta_client`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import pyarrow as pa

from runtime.core.dfs import Dfs
from runtime.core.messages import PartitionFiles, WriteStat
from runtime.hudi.client.compaction import compacting_file_groups
from runtime.hudi.formats.bloom_filter import KeyFilter
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table import meta_client
from runtime.hudi.table.base_files import base_file_name, file_group_id
from runtime.hudi.table.file_rows import FileRows, merge_version
from runtime.hudi.table.file_system_view import timeline_key
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_writer import LogSlice, PartitionLogs, append_log_file, list_partition, rolled_over
from runtime.hudi.table.markers import APPEND, CREATE, MERGE
from runtime.hudi.table.merge import KeyPositions, log_records
from runtime.hudi.timeline.active_timeline import Timeline


class FileGroupWriter(ABC):
    """Writes a task's flushes into file groups of ``table`` (blocking: run it through ``env.io``)."""

    def __init__(self, table: HudiTable, task_id: int, *, key: str, precombine: str, per_handle: bool = False) -> None:
        self.table = table
        self.task_id = task_id
        self.key = key
        self.precombine = precombine
        self.per_handle = per_handle
        self._tables = meta_client.WriteClientTables(table) if per_handle else None
        self._partitions_ready: set[str] = set()

    def write(
        self, partition: str, bucket: int, instant: str, records: pa.Table, files: PartitionFiles | None = None
    ) -> WriteStat:
        """Writes ``records`` into the bucket's file group for ``instant``; its write stat.
        ``files``: the partition's files from the timeline server's view (else the writer lists
        the partition when it needs its slices)."""
        fid = self.file_group(partition, bucket)
        if self._tables is not None:  # HoodieFlinkWriteClient.upsert: the table built anew for this handle
            self._tables.before_handle(instant, views_slices=self._views_slices(partition, fid, files))
        if partition not in self._partitions_ready:
            self.table.ensure_partition(partition, instant)
            if not self.per_handle:  # HoodiePartitionMetadata.trySave checks at every handle
                self._partitions_ready.add(partition)
        return self._write(partition, fid, instant, records, files)

    def asks_view(self, partition: str, bucket: int) -> bool:
        """Whether a flush of the bucket looks a file slice up in the file-system view (a
        partition's first touch, a merge or an append handle), without reading the storage."""
        return self._asks_view(partition, self.file_group(partition, bucket))

    @abstractmethod
    def _asks_view(self, partition: str, fid: str) -> bool: ...

    def view_timeline(self, partition: str, bucket: int, instant: str) -> str:
        """Reads the timeline the flush will learn the partition's slices with, when it will (the
        read the write makes anyway, made first): its key for the view's request, else ""."""
        timeline = self._slices_timeline(partition, self.file_group(partition, bucket), instant)
        return timeline_key(timeline) if timeline is not None else ""

    def file_group(self, partition: str, bucket: int) -> str:
        """The bucket's file group id in ``partition``."""
        return file_group_id(self.table.props.table_name, partition, bucket)

    @abstractmethod
    def _slices_timeline(self, partition: str, fid: str, instant: str) -> Timeline | None: ...

    def _views_slices(self, partition: str, fid: str, files: PartitionFiles | None) -> bool:
        """Whether this flush's handle looks up the file group's latest slice."""
        return True

    def _mark(self, partition: str, instant: str, data_file_name: str, io_type: str) -> None:
        """The write handle's marker, before its data file (``createMarkerFile``; :mod:`runtime.hudi.table.markers`)."""
        if self.table.props.markers:
            self.table.write_markers(instant).create_if_not_exists(partition, data_file_name, io_type)

    def _mark_log(self, partition: str, fid: str, slice_: LogSlice, instant: str, token: str) -> None:
        """An append's marker: the slice's base file name, APPEND (version 6); from version 8 the
        log file's own name, CREATE."""
        if self.table.version.logs_per_instant:
            log = LogFileName(fid, slice_.base_instant, slice_.next_version, token)
            self._mark(partition, instant, str(log), CREATE)
        else:
            self._mark(partition, instant, base_file_name(fid, token, slice_.base_instant), APPEND)

    @abstractmethod
    def _write(
        self, partition: str, fid: str, instant: str, records: pa.Table, files: PartitionFiles | None
    ) -> WriteStat: ...

    @abstractmethod
    def remembers_writes(self) -> bool:
        """Whether it holds anything it wrote (nothing to forget otherwise)."""

    @abstractmethod
    def forget_uncommitted(self, timeline: Timeline) -> int:
        """Forgets what it wrote into instants that never committed (``timeline``: the table's,
        after the rollback); returns how many file groups it forgot."""


def file_group_writer(
    table: HudiTable, task_id: int, parquet: ParquetWriteOptions, *, per_handle: bool = False, shared: bool = False
) -> FileGroupWriter:
    """The writer of the table's type, with the table's record key and ordering (precombine)
    fields; ``per_handle``: each flush reads what Hudi's write handle reads (``--meta-client``);
    ``shared``: another writer may commit to the table (a multi-writer mode)."""
    key, precombine = table.props.record_key_field, table.props.precombine_field
    if table.props.merge_on_read:
        return MergeOnReadWriter(table, task_id, key=key, precombine=precombine, per_handle=per_handle)
    return CopyOnWriteWriter(
        table, task_id, key=key, precombine=precombine, parquet=parquet, per_handle=per_handle, shared=shared
    )


KEEP_FILTER_FROM_KEYS = 4096  # keys of a version whose footer filter the next merge extends
# the rows of its latest versions a writer holds, at most: the next merge onto one reads its file
# (counted, opened) without decoding it again; a version past the budget is decoded as before
HELD_ROWS_BYTES = 128 << 20


def filter_to_keep(key_filter: KeyFilter | None) -> KeyFilter | None:
    """The filter a writer keeps for the next merge onto the file: a large file's only (a small
    file's keys are cheap to hash again, and a filter is a third of a MB)."""
    return key_filter if key_filter is not None and key_filter.count >= KEEP_FILTER_FROM_KEYS else None


class HeldRows:
    """The rows a writer holds of the base files it wrote, within :data:`HELD_ROWS_BYTES`."""

    def __init__(self, parquet: ParquetWriteOptions) -> None:
        self.parquet = parquet
        self.bytes = 0

    def hold(self, rows: pa.Table) -> pa.Table | None:
        """``rows`` as the file written decodes (one chunk a column, no footer), or None past the budget."""
        held = self.parquet.without_footer(rows).combine_chunks()
        if self.bytes + held.nbytes > HELD_ROWS_BYTES:
            return None
        self.bytes += held.nbytes
        return held

    def let_go(self, rows: pa.Table | None) -> None:
        if rows is not None:
            self.bytes -= rows.nbytes


@dataclass
class FileVersion:
    instant: str
    rel_path: str
    stat: WriteStat
    key_positions: KeyPositions | None = None  # what the merge that wrote it kept (small file groups)
    key_filter: KeyFilter | None = None  # its footer's bloom filter and key range, to extend
    # the rows written: as the file decodes (held within HELD_ROWS_BYTES), or as the simulated disk keeps them
    rows: pa.Table | FileRows | None = None


class CopyOnWriteWriter(FileGroupWriter):
    """A new base file version per flush: ``HoodieCreateHandle`` or ``HoodieMergeHandle``."""

    def __init__(
        self,
        table: HudiTable,
        task_id: int,
        *,
        key: str,
        precombine: str,
        parquet: ParquetWriteOptions,
        per_handle: bool = False,
        shared: bool = False,
    ) -> None:
        super().__init__(table, task_id, key=key, precombine=precombine, per_handle=per_handle)
        self.parquet = parquet
        self.versions: dict[tuple[str, str], FileVersion] = {}  # (partition, file_id) -> latest
        self._listed_partitions: set[str] = set()
        # another writer may commit to the table (a multi-writer mode): each instant reads the
        # committed base files anew, as Hudi's merge handle asks the file-system view per instant
        self.shared = shared
        self._instant = ""
        self._first_touch_timeline: Timeline | None = None  # read ahead of the view's request
        self._held = HeldRows(parquet)  # the versions' rows

    def _write(
        self, partition: str, fid: str, instant: str, records: pa.Table, files: PartitionFiles | None
    ) -> WriteStat:
        self._see_instant(instant)
        prev = self._latest_version(partition, fid, files)
        table = self.table
        base = table.read_base_file(prev.rel_path, prev.rows) if prev is not None else None
        name = base_file_name(fid, f"{self.task_id}-0-0", instant)
        rel = f"{partition}/{name}"
        merged = merge_version(
            base,
            records,
            as_rows=not table.dfs.encodes_parquet,
            instant=instant,
            partition=partition,
            file_name=name,
            key=self.key,
            precombine=self.precombine,
            partition_id=self.task_id,
            base_instant=prev.instant if prev is not None and base is not None else None,
            base_positions=prev.key_positions if prev is not None and base is not None else None,
        )
        self._mark(partition, instant, name, MERGE if base is not None else CREATE)
        if self.per_handle:
            self._handle_checks(partition, prev.rel_path if prev is not None and base is not None else None, rel)
        key_filter = self._key_filter(prev, base, merged.table)
        size = table.write_base_file(rel, merged.table, self.parquet, key_filter)
        if self.per_handle:
            meta_client.written_file_status(table, rel)
        if prev is not None and prev.instant == instant:  # the same instant writes this file group again
            prev_commit = prev.stat.prev_commit
            inserts = prev.stat.num_inserts + merged.inserts
            updates = prev.stat.num_update_writes + merged.updates
        else:
            prev_commit = prev.instant if prev is not None else "null"
            inserts, updates = merged.inserts, merged.updates
        stat = WriteStat(
            fid, rel, partition, prev_commit, merged.table.num_rows, inserts, updates, size, size, merged.written
        )
        version = FileVersion(instant, rel, stat, merged.key_positions, filter_to_keep(key_filter))
        self._hold_rows(self.versions.get((partition, fid)), version, merged.table)
        self.versions[(partition, fid)] = version
        return stat

    def _hold_rows(self, prev: FileVersion | None, version: FileVersion, rows: pa.Table | FileRows) -> None:
        """Keeps the rows of the version written for the next merge onto it (the previous
        version's are let go): within the budget on a storage that encodes parquet; as they are
        on the simulated disk, which keeps them itself."""
        self._let_go(prev)
        if not self.table.dfs.encodes_parquet:
            version.rows = rows
        else:
            assert isinstance(rows, pa.Table)  # (merged in Arrow: rows are the simulated disk's)
            version.rows = self._held.hold(rows)

    def _key_filter(
        self, prev: FileVersion | None, base: pa.Table | FileRows | None, merged: pa.Table | FileRows
    ) -> KeyFilter | None:
        """The new file's bloom filter and key range: the old file's extended by the keys the merge
        appended when it kept the old keys in their order (no delete), else worked out anew."""
        if not self.table.dfs.encodes_parquet:
            return None  # (the simulated disk writes no footer)
        assert isinstance(merged, pa.Table) and not isinstance(base, FileRows)  # merged in Arrow
        return self.parquet.merged_key_filter(merged, base, prev.key_filter if prev is not None else None)

    def _let_go(self, version: FileVersion | None) -> None:
        if version is not None:
            if isinstance(version.rows, pa.Table) and self.table.dfs.encodes_parquet:
                self._held.let_go(version.rows)
            version.rows = None

    def _see_instant(self, instant: str) -> None:
        """A shared table's new instant lists each partition's committed base files again at its
        first touch (``HoodieMergeHandle`` looks its base file up in the view of the instant's
        table, ``HoodieFlinkWriteClient.getTableAndInitCtx``); one writer's own cache is that view."""
        if self.shared and instant != self._instant:
            self._listed_partitions.clear()
            self._instant = instant

    def _asks_view(self, partition: str, fid: str) -> bool:
        """The bucket index's first load of the partition, or a merge handle's base file."""
        return (partition, fid) in self.versions or partition not in self._listed_partitions

    def _slices_timeline(self, partition: str, fid: str, instant: str) -> Timeline | None:
        self._see_instant(instant)
        if partition in self._listed_partitions or (not self.shared and (partition, fid) in self.versions):
            return None
        self._first_touch_timeline = self.table.timeline()
        return self._first_touch_timeline

    def _views_slices(self, partition: str, fid: str, files: PartitionFiles | None) -> bool:
        """A merge handle looks up the base file; a create handle (no version yet) does not."""
        return self._latest_version(partition, fid, files) is not None

    def _handle_checks(self, partition: str, old_rel: str | None, rel: str) -> None:
        """The merge handle's reads of the old file, or the create handle's checks."""
        if old_rel is not None:
            meta_client.merge_handle_checks(self.table, old_rel, rel)
        else:
            meta_client.create_handle_checks(self.table, partition, rel)

    def _latest_version(self, partition: str, fid: str, files: PartitionFiles | None) -> FileVersion | None:
        """The file group's latest version: this task's, or the latest committed one."""
        prev = self.versions.get((partition, fid))
        if (prev is None or self.shared) and partition not in self._listed_partitions:
            # first touch of this partition (of this instant, on a shared table): its committed base files
            timeline, self._first_touch_timeline = self._first_touch_timeline or self.table.timeline(), None
            committed = self.table.committed_base_files(partition, timeline, files)
            if self.shared:
                self._adopt_committed(partition, committed)
            for other_fid, (inst, rel) in committed.items():
                self.versions.setdefault(
                    (partition, other_fid),
                    FileVersion(inst, rel, WriteStat(other_fid, rel, partition, inst, 0, 0, 0, 0, 0)),
                )
            self._listed_partitions.add(partition)
            prev = self.versions.get((partition, fid))
        return prev

    def _adopt_committed(self, partition: str, committed: dict[str, tuple[str, str]]) -> None:
        """Forgets a remembered version another writer's commit has superseded (a later instant's
        base file of the file group), so the merge reads that one; this writer's own versions,
        committed or pending, stay."""
        for key in [k for k in self.versions if k[0] == partition]:
            version, latest = self.versions[key], committed.get(key[1])
            if latest is not None and latest[0] > version.instant and latest[1] != version.rel_path:
                self._let_go(self.versions.pop(key))

    def remembers_writes(self) -> bool:
        return bool(self.versions)

    def forget_uncommitted(self, timeline: Timeline) -> int:
        """The next flush of a forgotten file group merges onto its committed base file instead
        of a deleted one."""
        stale = [k for k, v in self.versions.items() if not timeline.is_completed(v.instant)]
        for key in stale:
            self._let_go(self.versions.pop(key))
            self._listed_partitions.discard(key[0])  # list its committed base files again
        return len(stale)


class MergeOnReadWriter(FileGroupWriter):
    """A log file per flush, appended to the file group's latest slice: ``HoodieAppendHandle``."""

    def __init__(self, table: HudiTable, task_id: int, *, key: str, precombine: str, per_handle: bool = False) -> None:
        super().__init__(table, task_id, key=key, precombine=precombine, per_handle=per_handle)
        # (partition, file_id) -> the slice as this task last wrote it; each partition's listing,
        # taken at its first touch in an instant (a compaction scheduled since the last instant
        # moves file groups to new slices: Hudi's file-system view is refreshed per instant); the
        # timeline and the pending compactions' file groups (partition -> file id -> compaction),
        # read once per instant
        self.slices: dict[tuple[str, str], LogSlice] = {}
        self._log_listings: dict[str, PartitionLogs] = {}
        self._log_instant = ""
        self._log_view: tuple[Timeline, dict[str, dict[str, str]]] = (Timeline([]), {})
        self._log_seqno = 1  # a log record's sequence number counts on across flushes, as Hudi's

    def _asks_view(self, partition: str, fid: str) -> bool:
        """Every append handle looks up the file group's latest slice."""
        return True

    def _see_instant(self, instant: str) -> None:
        """A new instant sees the table anew: one timeline listing."""
        if instant == self._log_instant:
            return
        table = self.table
        self.slices.clear()
        self._log_listings.clear()
        timeline = table.timeline()
        # version 8+ names a log after its instant: no pending compaction's slice to find
        held = {} if table.version.logs_per_instant else compacting_file_groups(table, timeline)
        self._log_view = (timeline, held)
        self._log_instant = instant

    def _slices_timeline(self, partition: str, fid: str, instant: str) -> Timeline | None:
        self._see_instant(instant)
        return self._log_view[0] if partition not in self._log_listings else None

    def _write(
        self, partition: str, fid: str, instant: str, records: pa.Table, files: PartitionFiles | None
    ) -> WriteStat:
        table = self.table
        self._see_instant(instant)
        listing = self._log_listings.get(partition)
        if listing is None:  # first touch of this partition: its file slices, from one listing
            timeline, held = self._log_view
            listing = list_partition(table, partition, timeline, held.get(partition, {}), files)
            self._log_listings[partition] = listing
        slice_ = self.slices.get((partition, fid)) or listing.slice_for(fid, instant)
        if files is not None:  # the server's view may be behind the files this task wrote
            slice_ = rolled_over(table, partition, fid, slice_, f"{self.task_id}-0-0")
        rows = log_records(
            records,
            instant=instant,
            partition=partition,
            file_id=fid,
            key=self.key,
            precombine=self.precombine,
            partition_id=self.task_id,
            seqno=self._log_seqno,
            precombined=table.props.precombines_flush,
        )
        self._log_seqno += rows.num_rows
        self._mark_log(partition, fid, slice_, instant, f"{self.task_id}-0-0")
        if self.per_handle:
            self._append_checks(partition, fid, slice_, status_made=files is not None)
        stat, self.slices[(partition, fid)] = append_log_file(
            table, partition, fid, slice_, instant, rows, f"{self.task_id}-0-0"
        )
        if self.per_handle:
            meta_client.written_file_status(table, stat.path)
        return stat

    def _append_checks(self, partition: str, fid: str, slice_: LogSlice, *, status_made: bool) -> None:
        """``HoodieLogFormatWriter.getOutputStream``: the log file's status (``status_made``: the
        remote view's roll-over check made it), and ``HoodieLogFile.rollOver``'s listing of the
        partition when the slice has one already."""
        if not status_made:
            log = LogFileName(fid, slice_.base_instant, max(slice_.next_version - 1, 1), f"{self.task_id}-0-0")
            meta_client.file_status(self.table.dfs, Dfs.join(self.table.partition_path(partition), str(log)))
        if slice_.log_files:
            self.table.dfs.list_dir(self.table.partition_path(partition))

    def remembers_writes(self) -> bool:
        return bool(self.slices)

    def forget_uncommitted(self, timeline: Timeline) -> int:
        """The rollback deleted log files and wrote rollback blocks into new log versions, so
        every slice is listed again (versions must not collide), whatever ``timeline`` says."""
        forgotten = len(self.slices)
        self.slices.clear()
        self._log_listings.clear()
        self._log_instant = ""  # the next flush lists the timeline again
        return forgotten
