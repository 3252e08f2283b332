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
from dataclasses import dataclass

import pyarrow as pa

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.hudi.log_format import AVRO_DATA_BLOCK, LogFormatError, avro_records, read_blocks
from runtime.hudi.table import HudiTable
from runtime.hudi.table_version import LAYOUT_2_HISTORY

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
ARCHIVED_DIR = "archived"
COMPLETED_STATE = "COMPLETED"
LSM_COLUMNS = ["instantTime", "completionTime", "action"]


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


def archived_instants(table: HudiTable) -> dict[str, ArchivedInstant]:
    """The completed instants of the table's archived timeline, by instant time."""
    if table.version.layout_2:
        return _lsm_instants(table, Dfs.join(table.timeline_dir, LAYOUT_2_HISTORY))
    return _archive_log_instants(table, Dfs.join(table.hoodie, ARCHIVED_DIR))


def _rel(table: HudiTable, path: str) -> str:
    return path[len(table.base_path.rstrip("/")) + 1 :] if path.startswith(table.base_path) else path


def _lsm_instants(table: HudiTable, history: str) -> dict[str, ArchivedInstant]:
    try:
        names = {e.name for e in table.dfs.list_dir(history)}
    except DfsNotFound:
        return {}
    manifests = [int(n[len(MANIFEST_PREFIX) :]) for n in names if n.startswith(MANIFEST_PREFIX) and n[9:].isdigit()]
    version = max(manifests, default=-1)
    if VERSION_FILE in names:
        text = table.dfs.read_bytes(Dfs.join(history, VERSION_FILE)).decode(errors="replace").strip()
        version = int(text) if text.isdigit() else version  # Hudi falls back to the listing too
    if version < 0:
        return {}
    manifest = Dfs.join(history, f"{MANIFEST_PREFIX}{version}")
    try:
        doc = json.loads(table.dfs.read_bytes(manifest))
        files = [str(f["fileName"]) for f in doc.get("files") or []]
    except (DfsError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ArchivedTimelineError(_rel(table, manifest), f"is not a readable LSM timeline manifest: {exc}") from None
    out: dict[str, ArchivedInstant] = {}
    for name in files:
        path = Dfs.join(history, name)
        try:
            rows = table.dfs.read_parquet(path, columns=LSM_COLUMNS).to_pylist()
        except (DfsError, pa.ArrowException, KeyError, OSError) as exc:
            why = f"(named by {_rel(table, manifest)}) is not a readable archived timeline file: {exc}"
            raise ArchivedTimelineError(_rel(table, path), why) from None
        for r in rows:
            if r["instantTime"]:
                out[r["instantTime"]] = ArchivedInstant(r["instantTime"], r["action"] or "", r["completionTime"])
    return out


def _archive_log_instants(table: HudiTable, archived: str) -> dict[str, ArchivedInstant]:
    try:
        entries = [e for e in table.dfs.list_dir(archived) if e.name.startswith(".commits_.archive")]
    except DfsNotFound:
        return {}
    out: dict[str, ArchivedInstant] = {}
    for e in sorted(entries, key=lambda e: e.name):
        rel = _rel(table, e.path)
        try:
            for block in read_blocks(table.dfs.read_bytes(e.path), rel):
                if block.block_type != AVRO_DATA_BLOCK:
                    continue
                for r in avro_records(block):
                    ts, state = r.get("commitTime"), r.get("actionState")
                    if ts and state in (None, COMPLETED_STATE):
                        out[ts] = ArchivedInstant(ts, r.get("actionType") or "", None)
        except (LogFormatError, DfsError, ValueError, EOFError) as exc:
            raise ArchivedTimelineError(rel, f"is not a readable archived timeline file: {exc}") from None
    return out
