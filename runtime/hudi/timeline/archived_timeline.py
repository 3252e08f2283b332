"""The archived timeline: the completed instants Hudi's archiver moved off the active timeline, so
that a reader of the table does not take their files for files of no instant.

Sources (Apache Hudi 0.14-1.1, ``hudi-common``):

* Table version 8 and 9, ``LSMTimeline`` (``.hoodie/timeline/history``): the file ``_version_``
  holds the latest snapshot version N (without it, the largest ``manifest_<N>``,
  ``LSMTimeline.latestSnapshotVersion``); ``manifest_<N>`` is a ``HoodieLSMTimelineManifest`` JSON
  document, ``{"files": [{"fileName", "fileLen"}]}``, naming the valid parquet files of the
  snapshot (``<min instant>_<max instant>_<layer>.parquet``, ``ARCHIVE_FILE_PATTERN``); their
  rows are ``HoodieLSMTimelineInstant`` records (``instantTime``, ``completionTime``, ``action``,
  ``metadata``, ``plan``, ``version``), one per completed instant. Files not in the manifest are
  leftovers of a compaction of the LSM tree, not read.
* Table version 6, ``HoodieArchivedTimeline`` (``.hoodie/archived``): log files
  ``.commits_.archive.<N>_<token>`` in Hudi's log format whose Avro data blocks hold
  ``HoodieArchivedMetaEntry`` records (``commitTime``, ``actionType``, ``actionState``: only
  ``COMPLETED`` entries, or entries without a state as written before 0.9, are completed instants).

An archived timeline that does not read is an ArchivedTimelineError naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, cast

import pyarrow as pa

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc, CompletedInstant
from runtime.hudi.formats.log_format import AVRO_DATA_BLOCK, LogFormatError, avro_records, read_blocks
from runtime.hudi.timeline.instant import COMMIT, DELTA_COMMIT
from runtime.hudi.timeline.table_version import LAYOUT_2_HISTORY, TableVersion

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
ARCHIVED_DIR = "archived"
ARCHIVE_LOG_PREFIX = ".commits_.archive."  # HoodieArchivedTimeline: file id "commits", extension "archive"
COMPLETED_STATE = "COMPLETED"
LSM_COLUMNS = ["instantTime", "completionTime", "action"]


class TimelineHome(Protocol):
    """Where a table keeps its timeline (what ``HoodieTableMetaClient`` tells the archived
    timeline): a :class:`runtime.hudi.table.hudi_table.HudiTable` is one."""

    dfs: Dfs
    base_path: str
    hoodie: str
    timeline_dir: str
    version: TableVersion


class ArchivedTimelineError(ValueError):
    """An archived timeline file that does not read (``file``: its table-relative path; the
    message names it too)."""

    def __init__(self, file: str, why: str) -> None:
        super().__init__(f"{file} {why}")
        self.file = file


@dataclass(frozen=True)
class ArchivedInstant:
    ts: str
    action: str
    completion: str | None  # from table version 8


def archived_instants(table: TimelineHome) -> dict[str, ArchivedInstant]:
    """The completed instants of the table's archived timeline, by instant time."""
    if table.version.layout_2:
        return _lsm_instants(table, Dfs.join(table.timeline_dir, LAYOUT_2_HISTORY))
    return _archive_log_instants(table, Dfs.join(table.hoodie, ARCHIVED_DIR))


def _rel(table: TimelineHome, path: str) -> str:
    return path[len(table.base_path.rstrip("/")) + 1 :] if path.startswith(table.base_path) else path


def _lsm_instants(table: TimelineHome, history: str) -> dict[str, ArchivedInstant]:
    out: dict[str, ArchivedInstant] = {}
    for path in _lsm_files(table, history):
        try:
            rows = table.dfs.read_parquet(path, columns=LSM_COLUMNS).to_pylist()
        except (DfsError, pa.ArrowException, KeyError, OSError) as exc:
            raise ArchivedTimelineError(_rel(table, path), f"is not a readable archived timeline file: {exc}") from None
        for r in rows:
            if r["instantTime"]:
                out[r["instantTime"]] = ArchivedInstant(r["instantTime"], r["action"] or "", r["completionTime"])
    return out


def _lsm_files(table: TimelineHome, history: str) -> list[str]:
    """The paths of the parquet files the latest manifest of the LSM timeline names."""
    try:
        names = {e.name for e in table.dfs.list_dir(history)}
    except DfsNotFound:
        return []
    manifests = [int(n[len(MANIFEST_PREFIX) :]) for n in names if n.startswith(MANIFEST_PREFIX) and n[9:].isdigit()]
    version = max(manifests, default=-1)
    if VERSION_FILE in names:
        text = table.dfs.read_bytes(Dfs.join(history, VERSION_FILE)).decode(errors="replace").strip()
        version = int(text) if text.isdigit() else version  # Hudi falls back to the listing too
    if version < 0:
        return []
    manifest = Dfs.join(history, f"{MANIFEST_PREFIX}{version}")
    try:
        doc = json.loads(table.dfs.read_bytes(manifest))
        return [Dfs.join(history, str(f["fileName"])) for f in doc.get("files") or []]
    except (DfsError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ArchivedTimelineError(_rel(table, manifest), f"is not a readable LSM timeline manifest: {exc}") from None


def _archive_log_instants(table: TimelineHome, archived: str) -> dict[str, ArchivedInstant]:
    out: dict[str, ArchivedInstant] = {}
    for r in _archive_log_records(table, archived):
        ts, state = r.get("commitTime"), r.get("actionState")
        if ts and state in (None, COMPLETED_STATE):
            out[ts] = ArchivedInstant(ts, r.get("actionType") or "", None)
    return out


def _archive_log_records(table: TimelineHome, archived: str) -> Iterator[JsonObject]:
    """Every ``HoodieArchivedMetaEntry`` of the archive log files, file by file."""
    try:
        entries = [e for e in table.dfs.list_dir(archived) if e.name.startswith(ARCHIVE_LOG_PREFIX)]
    except DfsNotFound:
        return
    for e in sorted(entries, key=lambda e: archive_log_version(e.name)):
        rel = _rel(table, e.path)
        try:
            records = [
                r
                for block in read_blocks(table.dfs.read_bytes(e.path), rel)
                if block.block_type == AVRO_DATA_BLOCK
                for r in avro_records(block)
            ]
        except (LogFormatError, DfsError, ValueError, EOFError) as exc:
            raise ArchivedTimelineError(rel, f"is not a readable archived timeline file: {exc}") from None
        yield from records


def archive_log_version(name: str) -> tuple[int, str]:
    """An archive log file's version (``.commits_.archive.<N>_<token>``) and name, for order."""
    head = name[len(ARCHIVE_LOG_PREFIX) :].split("_", 1)[0]
    return (int(head) if head.isdigit() else 0, name)


def archived_commit_metadata(table: TimelineHome) -> list[CompletedInstant]:
    """The completed commits and compactions of the archived timeline with their commit metadata
    (version 6: the entries' ``hoodieCommitMetadata``; 8+: the rows' ``metadata`` bytes), in
    instant order: what the table's history holds beyond the active timeline."""
    out: dict[str, CompletedInstant] = {}
    if table.version.layout_2:
        history = Dfs.join(table.timeline_dir, LAYOUT_2_HISTORY)
        for path in _lsm_files(table, history):
            for r in table.dfs.read_parquet(path, columns=["instantTime", "action", "metadata"]).to_pylist():
                if r["action"] in (COMMIT, DELTA_COMMIT) and r["metadata"]:
                    doc = table.version.decode_metadata(r["metadata"], _rel(table, path))
                    out[r["instantTime"]] = CompletedInstant(r["instantTime"], bool(doc.get("compacted")), doc)
        return [out[ts] for ts in sorted(out)]
    for record in _archive_log_records(table, Dfs.join(table.hoodie, ARCHIVED_DIR)):
        meta = record.get("hoodieCommitMetadata")
        if record.get("actionState") == COMPLETED_STATE and record.get("actionType") in (COMMIT, DELTA_COMMIT) and meta:
            doc = _json_form(meta)
            out[record["commitTime"]] = CompletedInstant(record["commitTime"], bool(doc.get("compacted")), doc)
    return [out[ts] for ts in sorted(out)]


def _json_form(record: JsonObject) -> CommitMetadataDoc:
    """An archived ``HoodieCommitMetadata`` record as the commit file's JSON reads: absent fields
    dropped, the archiver's blank ``ROLLING_STAT`` entry left out."""
    doc = {k: v for k, v in record.items() if v is not None}
    stats = doc.get("partitionToWriteStats") or {}
    doc["partitionToWriteStats"] = {
        p: [{k: v for k, v in s.items() if v is not None} for s in ss] for p, ss in stats.items()
    }
    doc["extraMetadata"] = {k: v for k, v in (doc.get("extraMetadata") or {}).items() if k != "ROLLING_STAT"}
    return cast(CommitMetadataDoc, doc)
