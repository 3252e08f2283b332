"""The metadata table's ``files`` partition as a reader of the metadata table sees it: partition ->
file name -> size, merged from its latest base HFile and the HFile data blocks of its log files.

Sources (Apache Hudi 0.14-1.1):

* ``HoodieTableMetadataUtil`` / ``MetadataPartitionType.FILES``: the metadata table is a
  merge-on-read table under ``.hoodie/metadata``; its ``files`` partition holds one record per data
  partition (key: the partition path, ``.`` for a table without partitions,
  ``HoodieTableMetadata.NON_PARTITIONED_NAME``) and one listing all partitions (key
  ``__all_partitions__``). Base files are HFiles (:mod:`runtime.hudi.formats.hfile`), log blocks
  ``HoodieHFileDataBlock`` (``HFILE_DATA_BLOCK``), whose content is an HFile whose values are the
  records' Avro binary encoding with the block header's SCHEMA (a base HFile keeps its schema in its
  file info).
* ``HoodieMetadata.avsc``: ``HoodieMetadataRecord`` {key, type (1: partition list, 2: file list),
  filesystemMetadata: map of name -> ``HoodieMetadataFileInfo`` {size, isDeleted}, ...}.
* ``HoodieMetadataPayload.combineFileSystemMetadata``: a later record's entries are merged into the
  earlier ones: a deleted entry removes the file, otherwise the larger size is kept (log files
  only grow).
* ``HoodieMergedLogRecordScanner`` / ``BaseHoodieLogRecordReader``: only blocks of instants the
  metadata table's own timeline completed are read; a rollback command block's target instant is
  skipped. The file slice is the latest completed base file and the log files of its slice: before
  table version 8 those named with its instant (``FSUtils.makeLogFileName``); from 8 those whose
  delta commit completed after the base instant (``HoodieFileGroup.getBaseInstantTime`` with the
  ``CompletionTimeQueryView``: a delta commit requested before a compaction and completed after it
  belongs to the compacted slice).

Not read: a non-empty delete block of the ``files`` partition (its ``HoodieDeleteRecordList``
ordering values are a union of wrapper types); it is reported so a reader knows the view may
keep a key Hudi deleted (the ``files`` partition deletes partitions by ``isDeleted`` entries,
so Hudi writes none in practice).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from runtime.core.dfs import Dfs, DfsError
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc
from runtime.hudi.formats.log_format import (
    COMMAND_BLOCK,
    COMMAND_BLOCK_TYPE,
    DELETE_BLOCK,
    HFILE_DATA_BLOCK,
    ROLLBACK_BLOCK,
    SCHEMA,
    TARGET_INSTANT_TIME,
    LogBlock,
    LogFileName,
    LogFormatError,
    read_blocks,
)
from runtime.hudi.formats.metadata_record import MetadataRecordDoc
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_reader import hfile_records
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMPLETED, HOODIE

METADATA_DIR = "metadata"
FILES_PARTITION = "files"
ALL_PARTITIONS = "__all_partitions__"
NON_PARTITIONED = "."
EMPTY_DELETE_CONTENT = struct.pack(">ii", 3, 1) + b"\0"  # version 3, one byte: an empty Avro array
_HFILE_SUFFIX = ".hfile"

# record key (a partition, or the partition list) -> file name -> size, as the records merge
Listing = dict[str, dict[str, int]]
# partition -> file name -> (size, deleted)
FileChanges = dict[str, dict[str, tuple[int, bool]]]


class MetadataTableError(ValueError):
    """The metadata table cannot be opened (no table, or an unreadable timeline)."""


@dataclass
class FilesView:
    """The merged ``files`` partition, and what of it could not be read."""

    timeline: Timeline  # the metadata table's own
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)  # "" = non-partitioned
    problems: list[tuple[str, str]] = field(default_factory=list)  # (table-relative file, why)
    notes: list[tuple[str, str]] = field(default_factory=list)

    def files(self) -> dict[str, int]:
        """Every file the metadata table lists, as a table-relative path, with its size."""
        return {f"{p}/{n}" if p else n: size for p, names in self.partitions.items() for n, size in names.items()}


def metadata_table_path(table: HudiTable) -> str:
    return Dfs.join(table.hoodie, METADATA_DIR)


def open_metadata_table(table: HudiTable) -> HudiTable | None:
    """The metadata table of ``table``, None when it has none; MetadataTableError when it has one
    that cannot be opened."""
    path = metadata_table_path(table)
    try:
        if not table.dfs.exists(Dfs.join(path, HOODIE, "hoodie.properties")):
            return None
        return HudiTable.open(table.dfs, path)
    except (TableError, DfsError, UnicodeDecodeError) as exc:
        raise MetadataTableError(f"the metadata table ({HOODIE}/{METADATA_DIR}) cannot be opened: {exc}") from None


def read_files_partition(mdt: HudiTable) -> FilesView:
    """The ``files`` partition merged as Hudi's metadata reader merges it."""
    try:
        timeline = mdt.timeline()
    except (TableError, DfsError) as exc:
        raise MetadataTableError(f"the metadata table's timeline cannot be read: {exc}") from None
    view = FilesView(timeline=timeline)
    done = {i.ts for i in timeline.instants if i.state == COMPLETED}
    rel_dir = f"{HOODIE}/{METADATA_DIR}/{FILES_PARTITION}"
    try:
        entries = mdt.dfs.list_dir(Dfs.join(mdt.base_path, FILES_PARTITION))
    except DfsError:
        return view  # the files partition is not initialised yet
    bases = sorted(
        (e.name.rsplit("_", 1)[1][: -len(_HFILE_SUFFIX)], e) for e in entries if e.name.endswith(_HFILE_SUFFIX)
    )
    bases = [(ts, e) for ts, e in bases if ts in done]
    records: Listing = {}
    base_ts = ""
    if bases:
        base_ts, base = bases[-1]
        _merge_hfile(view, records, mdt.dfs.read_bytes(base.path), "", f"{rel_dir}/{base.name}")
    blocks: list[tuple[str, int, int, LogBlock, str]] = []
    for e in entries:
        name = LogFileName.parse(e.name)
        if name is None or not _in_slice(mdt, timeline, name, base_ts):
            continue
        rel = f"{rel_dir}/{e.name}"
        try:
            for n, b in enumerate(read_blocks(mdt.dfs.read_bytes(e.path), rel)):
                blocks.append((b.instant, name.version, n, b, rel))
        except (LogFormatError, DfsError) as exc:
            view.problems.append((rel, str(exc).removeprefix(f"{rel}: ")))
    rolled_back = {
        b.header.get(TARGET_INSTANT_TIME, "")
        for _, _, _, b, _ in blocks
        if b.block_type == COMMAND_BLOCK and b.header.get(COMMAND_BLOCK_TYPE) == ROLLBACK_BLOCK and b.instant in done
    }
    for instant, _, _, block, rel in sorted(blocks, key=lambda t: t[:3]):
        if instant not in done or instant in rolled_back:
            continue
        _apply_block(view, records, block, rel)
    _to_partitions(view, records)
    return view


def _in_slice(mdt: HudiTable, timeline: Timeline, name: LogFileName, base_ts: str) -> bool:
    """Whether a log file belongs to the file slice of the base instant ``base_ts`` ("" when no
    base file completed: every log file does)."""
    if not base_ts:
        return True
    if not mdt.version.logs_per_instant:
        return name.base_instant == base_ts
    completion = timeline.completion_of(name.base_instant)
    return completion is not None and completion > base_ts


def _apply_block(view: FilesView, records: Listing, block: LogBlock, rel: str) -> None:
    if block.block_type == HFILE_DATA_BLOCK:
        _merge_hfile(
            view, records, block.content, block.header.get(SCHEMA, ""), f"{rel} (block at byte {block.offset})"
        )
    elif block.block_type == DELETE_BLOCK and block.content != EMPTY_DELETE_CONTENT:
        view.notes.append((rel, f"a delete block at byte {block.offset} is not read: keys it deletes stay listed"))


def _merge_hfile(view: FilesView, records: Listing, data: bytes, schema: str, where: str) -> None:
    """Merges the records of one HFile (a base file, or a log block's content) into ``records``."""
    try:
        cells = hfile_records(data, schema)
    except LogFormatError as exc:
        view.problems.append((where.split(" (", 1)[0], f"{where}: {exc}"))
        return
    for key, record in cells:
        _combine(records, key.decode(errors="replace"), cast(MetadataRecordDoc, record))


def _combine(records: Listing, key: str, record: MetadataRecordDoc) -> None:
    """``HoodieMetadataPayload.combineFileSystemMetadata``."""
    listed = records.setdefault(key, {})
    for name, info in (record.get("filesystemMetadata") or {}).items():
        if info.get("isDeleted"):
            listed.pop(name, None)
            continue
        listed[name] = max(int(info.get("size") or 0), listed.get(name, 0))


def _to_partitions(view: FilesView, records: Listing) -> None:
    partitions = records.get(ALL_PARTITIONS, {})
    for key in partitions:
        view.partitions["" if key == NON_PARTITIONED else key] = dict(records.get(key, {}))


def commit_changes(doc: CommitMetadataDoc) -> FileChanges:
    """The files a commit's metadata (``partitionToWriteStats``) adds, with their sizes."""
    out: FileChanges = {}
    for partition, stats in (doc.get("partitionToWriteStats") or {}).items():
        files = out.setdefault(partition, {})
        for s in stats:
            name = str(s.get("path") or "").rsplit("/", 1)[-1]
            if name:
                size = int(s.get("fileSizeInBytes") or 0)
                files[name] = (max(size, files.get(name, (0, False))[0]), False)
    return out


def deleted_and_written(base_path: str, deleted: Iterable[str], written: dict[str, int]) -> FileChanges:
    """A rollback's or a clean's files: those it deleted (``isDeleted``) and the log files it wrote."""
    out: FileChanges = {}
    entries = [(path, (0, True)) for path in deleted] + [(path, (size, False)) for path, size in written.items()]
    for path, entry in entries:
        rel = path[len(base_path) + 1 :] if path.startswith(base_path + "/") else path
        partition, _, name = rel.rpartition("/")
        out.setdefault(partition, {})[name] = entry
    return out
