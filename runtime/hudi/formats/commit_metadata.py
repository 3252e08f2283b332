"""Hudi's commit metadata (``HoodieCommitMetadata``, ``HoodieWriteStat`` and
``HoodieDeltaWriteStat``): the document a completed instant's file holds, built from the writers'
write stats, and what a job's record reads from it (its commits, compactions and files written).
The table version encodes it (:mod:`runtime.hudi.timeline.table_version`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from runtime.core.messages import WriteStat
from runtime.hudi.formats.log_format import LogFileName


class WriteStatDoc(TypedDict, total=False):
    """A ``HoodieWriteStat`` as the JSON form writes it, with ``HoodieDeltaWriteStat``'s fields on
    a merge-on-read write (``logVersion`` on); another writer's may leave fields out."""

    fileId: str
    path: str
    cdcStats: dict[str, int] | None
    prevCommit: str
    numWrites: int
    numDeletes: int
    numUpdateWrites: int
    numInserts: int
    totalWriteBytes: int
    totalWriteErrors: int
    tempPath: str | None
    partitionPath: str
    totalLogRecords: int
    totalLogFilesCompacted: int
    totalLogSizeCompacted: int
    totalUpdatedRecordsCompacted: int
    totalLogBlocks: int
    totalCorruptLogBlock: int
    totalRollbackBlocks: int
    fileSizeInBytes: int
    minEventTime: int | None
    maxEventTime: int | None
    logVersion: int
    logOffset: int
    baseFile: str
    logFiles: list[str]


class CommitMetadataDoc(TypedDict, total=False):
    """A ``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata`` adds the replaced file groups)."""

    partitionToWriteStats: dict[str, list[WriteStatDoc]]
    compacted: bool
    extraMetadata: dict[str, str]
    operationType: str
    partitionToReplaceFileIds: dict[str, list[str]]


def write_stats(doc: CommitMetadataDoc) -> list[WriteStatDoc]:
    """Every write stat of a commit metadata document, partition by partition."""
    return [s for v in doc.get("partitionToWriteStats", {}).values() for s in v]


@dataclass(frozen=True)
class CompletedInstant:
    """A completed instant and its commit metadata (Hudi's HoodieCommitMetadata document)."""

    instant: str
    compaction: bool
    doc: CommitMetadataDoc

    @property
    def stats(self) -> list[WriteStatDoc]:
        return write_stats(self.doc)


class CommitSummary(TypedDict):
    """A writers' commit: its instant, the checkpoint it committed, the rows it wrote."""

    instant: str
    checkpoint: int
    rows: int


class CompactionSummary(TypedDict):
    """A completed compaction: the file groups it compacted, the rows of their new base files,
    the log files it read and the bytes it wrote."""

    instant: str
    file_groups: int
    rows: int
    log_files_compacted: int
    bytes_written: int


def commit_summaries(done: Iterable[CompletedInstant]) -> list[CommitSummary]:
    """The writers' commits: a job's commits, whichever coordinator made them."""
    return [
        CommitSummary(
            instant=c.instant,
            checkpoint=int(c.doc.get("extraMetadata", {}).get("checkpoint.id", -1)),
            rows=sum(s["numInserts"] + s["numUpdateWrites"] for s in c.stats),
        )
        for c in done
        if not c.compaction
    ]


def compaction_summaries(done: Iterable[CompletedInstant]) -> list[CompactionSummary]:
    """The completed compactions."""
    return [
        CompactionSummary(
            instant=c.instant,
            file_groups=len(c.stats),
            rows=sum(s["numWrites"] for s in c.stats),
            log_files_compacted=sum(s.get("totalLogFilesCompacted", 0) for s in c.stats),
            bytes_written=sum(s["totalWriteBytes"] for s in c.stats),
        )
        for c in done
        if c.compaction
    ]


def files_written(done: Iterable[CompletedInstant]) -> dict[str, int]:
    """What the instants wrote, from their metadata: base files and log files, and their bytes;
    a compaction's base files are counted apart. The file versions a commit lists: a version a
    later flush of the same instant replaced is not."""
    out = dict.fromkeys(("base_files", "log_files", "bytes", "compaction_base_files", "compaction_bytes"), 0)
    for c in done:
        for s in c.stats:
            size = int(s.get("totalWriteBytes") or 0)
            if c.compaction:
                out["compaction_base_files"] += 1
                out["compaction_bytes"] += size
            elif LogFileName.parse(str(s["path"]).rsplit("/", 1)[-1]) is not None:
                out["log_files"] += 1
            else:
                out["base_files"] += 1
            out["bytes"] += size
    return out


def stat_to_json(s: WriteStat) -> WriteStatDoc:
    doc = WriteStatDoc(
        fileId=s.file_id,
        path=s.path,
        cdcStats=None,
        prevCommit=s.prev_commit,
        numWrites=s.num_writes,
        numDeletes=0,
        numUpdateWrites=s.num_update_writes,
        numInserts=s.num_inserts,
        totalWriteBytes=s.total_write_bytes,
        totalWriteErrors=0,
        tempPath=None,
        partitionPath=s.partition,
        totalLogRecords=s.log_records,
        totalLogFilesCompacted=s.log_files_compacted,
        totalLogSizeCompacted=s.log_size_compacted,
        totalUpdatedRecordsCompacted=s.updated_records_compacted,
        totalLogBlocks=0,
        totalCorruptLogBlock=0,
        totalRollbackBlocks=0,
        fileSizeInBytes=s.file_size,
        minEventTime=None,
        maxEventTime=None,
    )
    if s.log_version:  # HoodieDeltaWriteStat's own fields (a merge-on-read write), last
        doc.update(
            {"logVersion": s.log_version, "logOffset": 0, "baseFile": s.base_file, "logFiles": list(s.log_files)}
        )
    return doc


def commit_metadata_doc(
    stats: list[WriteStat], extra: dict[str, str], *, compacted: bool = False, operation: str = "UPSERT"
) -> CommitMetadataDoc:
    """A commit's metadata document (Hudi's HoodieCommitMetadata), before the table version encodes it."""
    by_partition: dict[str, list[WriteStatDoc]] = {}
    for s in stats:
        by_partition.setdefault(s.partition, []).append(stat_to_json(s))
    return CommitMetadataDoc(
        partitionToWriteStats=by_partition, compacted=compacted, extraMetadata=extra, operationType=operation
    )
