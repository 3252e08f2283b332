"""What ``commitlab verify --table`` checks of a table's data files against its commit metadata.

Sources (Apache Hudi 0.14/1.0, ``hudi-common``):

- **Commit metadata**: each write stat's ``path`` exists, its size is ``fileSizeInBytes`` and its
  footer's row count ``numWrites`` when recorded (``HoodieWriteStat``); a delta commit's log file
  holds that many records of its instant, and its data blocks decode (``HoodieLogFormatReader``). A
  file missing because the cleaner deleted a superseded version (written before the latest clean's
  earliest commit to retain) is not a finding. A corrupt parquet footer or log file is a finding
  naming the file.
- **Unlisted and orphan base files**: a base file of a completed instant is read whether or not
  that instant's commit metadata lists it (``AbstractTableFileSystemView`` builds file groups from
  the storage listing), so an unlisted base file of a completed instant is an error: readers see
  rows no commit accounts for. A base file whose instant is on the timeline in no state is an
  orphan, unless it is before the timeline's start (Hudi's ``isBeforeTimelineStarts`` reads such a
  file as archived and committed: a warning).
- **Partition metafile**: each partition folder holding data files has a valid
  ``.hoodie_partition_metadata`` (``HoodiePartitionMetadata``), without which readers that list
  partitions from storage do not see the partition.
"""

from __future__ import annotations

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.hudi.formats.commit_metadata import WriteStatDoc, write_stats
from runtime.hudi.formats.log_format import LogBlock, LogFileName, LogFormatError, read_blocks
from runtime.hudi.table.log_reader import DECODED_BLOCKS, ROW_BLOCKS, decode_block, row_count
from runtime.hudi.table.table_config import PARTITION_METADATA, parse_properties
from runtime.hudi.timeline.instant import COMPLETED
from runtime.lab.audit_findings import ERROR, WARNING, Audit
from runtime.lab.table_scan import TableScan


def check_commit_files(scan: TableScan, audit: Audit) -> None:
    """Each write stat's file exists, with the size and row count its stat records."""
    on_disk = {f.rel: f for f in scan.files}
    for instant, meta in sorted(scan.metadata.items()):
        for s in write_stats(meta):
            rel = s["path"]
            if rel in scan.logs or LogFileName.parse(rel.rsplit("/", 1)[-1]) is not None:
                _check_log_file(scan, audit, instant, s)
                continue
            f = on_disk.get(rel)
            if not _there_as_recorded(scan, audit, instant, s, None if f is None else f.size):
                continue
            try:
                rows = scan.table.dfs.read_parquet_metadata(Dfs.join(scan.table.base_path, rel)).num_rows
            except DfsError as exc:
                audit.add(ERROR, "corrupt-parquet", f"{rel} (of {instant}) has no readable parquet footer: {exc}", rel)
                continue
            want = s.get("numWrites")
            if isinstance(want, int) and want and want != rows:
                name = scan.names[instant]
                audit.add(ERROR, "row-count-mismatch", f"{rel} holds {rows} rows; {name} records {want}", rel)


def _there_as_recorded(scan: TableScan, audit: Audit, instant: str, stat: WriteStatDoc, size: int | None) -> bool:
    """A file a write stat lists (base or log; ``size`` on disk, None: not there) exists, unless the
    cleaner deleted it, with the size its stat records; False when it is not there to read."""
    rel, commit = stat["path"], scan.names[instant]
    if size is None:
        if not _cleaned(scan, instant, stat["fileId"]):
            audit.add(ERROR, "missing-file", f"{commit} lists {rel}, which does not exist", rel)
        return False
    want = stat.get("fileSizeInBytes") or 0
    if want and want != size:
        audit.add(ERROR, "size-mismatch", f"{rel} is {size} bytes; {commit} records {want}", rel)
    return True


def _cleaned(scan: TableScan, instant: str, file_id: str) -> bool:
    """A missing file the cleaner may have deleted: written before the latest clean's earliest
    commit to retain, in a file group with a newer committed base file (a superseded version)."""
    if not scan.cleaned_before or instant >= scan.cleaned_before:
        return False
    return any(
        f.file_id == file_id and f.instant > instant and scan.states.get(f.instant) == COMPLETED for f in scan.files
    )


def _check_log_file(scan: TableScan, audit: Audit, instant: str, stat: WriteStatDoc) -> None:
    """A delta commit's log file exists, with the size and the records its stat records (the
    records of its data blocks written at the instant)."""
    rel, commit = stat["path"], scan.names[instant]
    size = scan.logs.get(rel)
    if not _there_as_recorded(scan, audit, instant, stat, size):
        return
    try:
        blocks = list(read_blocks(scan.table.dfs.read_bytes(Dfs.join(scan.table.base_path, rel)), rel))
        rows = sum(row_count(b) for b in blocks if b.block_type in ROW_BLOCKS and b.instant == instant)
    except (DfsError, LogFormatError) as exc:
        why = str(exc).removeprefix(f"{rel}: ")  # a log format error names the file first
        audit.add(ERROR, "corrupt-log", f"{rel} (a log file of {instant}) is not a readable log file: {why}", rel)
        return
    undecodable = _undecodable_block(blocks)
    if undecodable:
        audit.add(ERROR, "corrupt-log", f"{rel} (of {instant}): {undecodable}", rel)
        return
    writes = stat.get("numWrites")
    if isinstance(writes, int) and writes != rows:
        audit.add(
            ERROR, "row-count-mismatch", f"{rel} holds {rows} records of {instant}; {commit} records {writes}", rel
        )


def _undecodable_block(blocks: list[LogBlock]) -> str:
    """Why a data block's records do not decode ('' when they all do): the framing can be intact
    while the records are not (flipped bytes inside a block)."""
    for n, block in enumerate(blocks):
        if block.block_type not in DECODED_BLOCKS:
            continue
        try:
            decode_block(block)
        except LogFormatError as exc:
            return f"data block {n} (at byte {block.offset}): {exc}"
    return ""


def check_unlisted_and_orphans(scan: TableScan, audit: Audit) -> None:
    """Base files of a completed instant its metadata does not list; base files of no instant."""
    listed = {s["path"] for meta in scan.metadata.values() for s in write_stats(meta)}
    first = min(scan.states) if scan.states else None
    for f in scan.files:
        state = scan.states.get(f.instant)
        if state == COMPLETED:
            if f.instant in scan.metadata and f.rel not in listed:
                audit.add(
                    ERROR,
                    "unlisted-file",
                    f"{f.rel} belongs to completed instant {f.instant} but its commit metadata does not list it: "
                    "readers take it as the file group's latest version",
                    f.rel,
                )
        elif state is None and first is not None and f.instant < first:
            audit.add(
                WARNING,
                "before-timeline",
                f"{f.rel}: instant {f.instant} is older than the timeline's first instant {first}; "
                "Hudi reads it as archived and committed",
                f.rel,
            )
        elif state is None:
            audit.add(
                ERROR,
                "orphan-file",
                f"{f.rel}: instant {f.instant} is on the timeline in no state (no .commit, .inflight or "
                ".commit.requested); its file is invisible to readers and no rollback will remove it",
                f.rel,
            )


def check_partition_metadata(scan: TableScan, audit: Audit) -> None:
    """Each partition folder holding data files has its partition metafile (``HoodiePartitionMetadata``:
    ``.hoodie_partition_metadata``, text properties with ``commitTime`` and ``partitionDepth``, the
    folders below the base path; or ``.hoodie_partition_metadata.parquet``/``.orc``). Readers that
    list partitions from storage (``FileSystemBackedTableMetadata.getAllPartitionPaths``, the
    metadata table off) take a folder as a partition only when it has one."""
    partitions = {f.partition for f in scan.files} | {r.rsplit("/", 1)[0] for r in scan.logs if "/" in r}
    for part in sorted(p for p in partitions if p):
        folder = Dfs.join(scan.table.base_path, part)
        rel = f"{part}/{PARTITION_METADATA}"
        if any(scan.table.dfs.exists(Dfs.join(folder, PARTITION_METADATA + ext)) for ext in (".parquet", ".orc")):
            continue
        try:
            props = parse_properties(scan.table.dfs.read_bytes(Dfs.join(folder, PARTITION_METADATA)).decode())
        except DfsNotFound:
            audit.add(
                ERROR,
                "missing-partition-metadata",
                f"partition {part} holds data files but no {PARTITION_METADATA}: readers that list partitions "
                "from storage (the metadata table off) do not see it",
                rel,
            )
            continue
        except (DfsError, UnicodeDecodeError) as exc:
            props = {"error": str(exc)}
        depth, commit = props.get("partitionDepth", ""), props.get("commitTime", "")
        if depth != str(part.count("/") + 1) or not commit.isdigit():
            audit.add(
                ERROR,
                "corrupt-partition-metadata",
                f"{rel} is not valid partition metadata (partitionDepth {depth or 'absent'}, the folder is "
                f"{part.count('/') + 1} deep; commitTime {commit or 'absent'})",
                rel,
            )
