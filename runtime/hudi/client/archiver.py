"""The archiver: completed instants moved off the active timeline, so that it stays bounded.

Sources (Apache Hudi 0.14.0 and 1.1; what :mod:`runtime.hudi.timeline.archived_timeline` reads back):

* ``FlinkOptions`` (0.10-1.1): ``archive.min_commits`` 40, ``archive.max_commits`` 50; the Kafka
  Connect sink: ``HoodieArchivalConfig`` ``hoodie.keep.min.commits`` 20, ``hoodie.keep.max.commits``
  30. ``HoodieWriteConfig.Builder.validate``: max must exceed min, and min the cleaner's retained
  commits. ``BaseHoodieWriteClient.autoArchiveOnCommit`` (``hoodie.archive.automatic`` true): the
  coordinator archives in the commit's post-commit step, after the clean.
* ``HoodieTimelineArchiver.getCommitInstantsToArchive`` (0.14): with more completed commits
  (commits, delta commits, completed compactions) than max, the oldest ones, leaving min; never
  the latest completed commit before the oldest pending writer's instant or compaction, nor
  anything after it; on merge-on-read nothing from the latest completed compaction on, so the
  compaction trigger still counts the delta commits since it
  (``CompactionUtils.getOldestInstantToRetainForCompaction``; with no compaction completed, no
  delta commit); nothing from the earliest commit the cleaner retains on (``CleanerUtils.getEarliestCommitToRetain``).
  ``getCleanInstantsToArchive``: clean and rollback instants each, past max, down to min.
  ``getInstantsToArchive``: every file of an archived instant (requested, inflight, completed).
* Table version 6, ``HoodieTimelineArchiver.archive`` / ``writeToFile``: one ``HoodieArchivedMetaEntry``
  per instant file (``MetadataConversionUtils.createMetaWrapper``: ``commitTime``, ``actionType``,
  ``actionState``, and the completed commit's metadata (its ``ROLLING_STAT`` entry blanked), a
  clean's plan or metadata, a rollback's metadata), in one Avro data block (header: the schema)
  of a new log file ``.hoodie/archived/.commits_.archive.<N>_1-0-1`` (a storage without append
  rolls over to the next version).
* Table version 8+, ``LSMTimelineWriter.write`` (1.x): one ``HoodieLSMTimelineInstant`` row per
  completed instant (its completion time, completed action, metadata and plan bytes) in a parquet
  file ``<min>_<max>_0.parquet`` under ``.hoodie/timeline/history``, then ``manifest_<N+1>``
  naming every valid file and ``_version_`` saying N+1.
* ``deleteArchivedInstants``: the archived instants' pending files first, then the completed ones
  oldest first.

Differences: ``HoodieArchivedMetaEntry``'s fields for what this lab never archives (savepoints,
replace commits, compaction plans) are left out of the written schema (Hudi's reader gives them
their null defaults); the LSM tree is never compacted (Hudi merges ten layer-0 files into one
layer-1 file). A metadata table's own archiving (:mod:`runtime.hudi.client.metadata_services`) is this
one with its bounds and the data table's earliest active commit (``ArchivePolicy.keep_from``).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from io import BytesIO
from typing import TypedDict

import fastavro
import pyarrow as pa

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.core.json_doc import JsonObject, dumps_indented
from runtime.hudi.client import cleaner
from runtime.hudi.formats import clean_metadata
from runtime.hudi.formats.log_format import AVRO_BLOCK_VERSION, AVRO_DATA_BLOCK, SCHEMA, encode_block
from runtime.hudi.formats.rollback_metadata import ROLLBACK, ROLLBACK_METADATA_SCHEMA, one_avro_record
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import MetadataTableError, open_metadata_table
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.archived_timeline import (
    ARCHIVE_LOG_PREFIX,
    ARCHIVED_DIR,
    MANIFEST_PREFIX,
    VERSION_FILE,
    archive_log_version,
)
from runtime.hudi.timeline.instant import COMMIT, COMPLETED, DELTA_COMMIT, Instant
from runtime.hudi.timeline.table_version import COMMIT_METADATA_SCHEMA, LAYOUT_2_HISTORY, commit_metadata_record

ARCHIVE_WRITE_TOKEN = "1-0-1"  # FSUtils.makeWriteToken's unknown token: the archiver's log writer
ROLLING_STAT = "ROLLING_STAT"  # HoodieRollingStatMetadata.ROLLING_STAT_METADATA_KEY
_ENTRY_SCHEMA: JsonObject = {
    "type": "record",
    "name": "HoodieArchivedMetaEntry",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "hoodieCommitMetadata", "type": ["null", COMMIT_METADATA_SCHEMA], "default": None},
        {"name": "hoodieCleanMetadata", "type": ["null", clean_metadata.CLEAN_METADATA_SCHEMA[False]], "default": None},
        {"name": "hoodieRollbackMetadata", "type": ["null", ROLLBACK_METADATA_SCHEMA], "default": None},
        {"name": "commitTime", "type": ["null", "string"], "default": None},
        {"name": "actionType", "type": ["null", "string"], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "hoodieCleanerPlan", "type": ["null", clean_metadata.CLEANER_PLAN_SCHEMA[False]], "default": None},
        {"name": "actionState", "type": ["null", "string"], "default": None},
    ],
}
ARCHIVED_META_ENTRY_SCHEMA = _ENTRY_SCHEMA
_PARSED_ENTRY = fastavro.parse_schema(_ENTRY_SCHEMA)
_LSM_SCHEMA = pa.schema(
    [
        ("instantTime", pa.string()),
        ("completionTime", pa.string()),
        ("action", pa.string()),
        ("metadata", pa.binary()),
        ("plan", pa.binary()),
        ("version", pa.int32()),
    ]
)


class ArchivedMetaEntryDoc(TypedDict, total=False):
    """A ``HoodieArchivedMetaEntry`` (version 6's archive log): the instant, its state, and the
    metadata its file held, under the field of its action."""

    commitTime: str
    actionType: str
    actionState: str
    version: int
    hoodieCommitMetadata: JsonObject
    hoodieCleanMetadata: JsonObject
    hoodieCleanerPlan: JsonObject
    hoodieRollbackMetadata: JsonObject


class LsmTimelineRow(TypedDict):
    """A row of the LSM timeline's parquet files (``HoodieLSMTimelineInstant``, version 8+)."""

    instantTime: str
    completionTime: str | None
    action: str
    metadata: bytes
    plan: bytes | None
    version: int


class ManifestFile(TypedDict):
    """A file of the LSM timeline's manifest (``HoodieLSMTimelineManifest.LSMFileEntry``)."""

    fileName: str
    fileLen: int


@dataclass(frozen=True)
class ArchivePolicy:
    """``hoodie.keep.min.commits`` / ``max``, the cleaner's retained commits (0: no cleaner), and
    the earliest instant kept with everything after it whatever the rest allows (a metadata
    table's: :func:`runtime.hudi.client.metadata_services.data_table_bound`)."""

    min_commits: int
    max_commits: int
    clean_retain_commits: int = 0
    keep_from: str | None = None


def instants_to_archive(table: HudiTable, timeline: Timeline, policy: ArchivePolicy) -> set[str]:
    """The times of the instants the archiver moves now (``getInstantsToArchive``)."""
    out: set[str] = set()
    for action in (clean_metadata.CLEAN, ROLLBACK):
        done = [i.ts for i in timeline.instants if i.action == action and i.state == COMPLETED]
        if len(done) > policy.max_commits:
            out.update(done[: len(done) - policy.min_commits])
    done = timeline.completed_instants()
    if len(done) <= policy.max_commits:
        return out
    bound = _retained_from(table, timeline, policy)
    candidates = [ts for ts in done if bound is None or ts < bound]
    out.update(candidates[: len(done) - policy.min_commits])
    return out


def _retained_from(table: HudiTable, timeline: Timeline, policy: ArchivePolicy) -> str | None:
    """The earliest completed commit the archiver keeps with everything after it (None: no bound)."""
    done = timeline.completed_instants()
    bounds: list[str] = []
    pending = [*timeline.pending_commits(), *timeline.pending_compactions()]
    if pending:
        before = [ts for ts in done if ts < min(pending)]
        bounds.append(before[-1] if before else min(pending))
    if table.props.merge_on_read:
        compactions = timeline.completed_compactions()
        deltas = [i.ts for i in timeline.instants if i.action == DELTA_COMMIT]
        bounds.extend(compactions[-1:] or deltas[:1])
    if policy.clean_retain_commits:
        earliest = cleaner.earliest_commit_to_retain(timeline, policy.clean_retain_commits)
        bounds.append(earliest or done[0])
    if table.props.metadata_table:
        bounds.append(_metadata_compaction_bound(table) or done[0])
    if policy.keep_from is not None:
        bounds.append(policy.keep_from)
    return min(bounds) if bounds else None


def _metadata_compaction_bound(table: HudiTable) -> str | None:
    """``HoodieTimelineArchiver``: with a metadata table, nothing newer than its latest compaction
    is archived, and nothing at all before its first ("Not archiving as there is no compaction yet
    on the metadata table")."""
    try:
        mdt = open_metadata_table(table)
        compactions = mdt.timeline().completed_compactions() if mdt is not None else []
    except (MetadataTableError, TableError, DfsError):
        return None
    return compactions[-1] if compactions else None


def archive(table: HudiTable, policy: ArchivePolicy, files: dict[str, Instant]) -> list[str]:
    """``HoodieTimelineArchiver.archiveIfRequired`` on the timeline's ``files`` (just listed,
    :meth:`HudiTable.timeline_files`): writes the instants to archive in the table version's
    archived timeline, then deletes their files. Returns their times."""
    timeline = Timeline(files.values())
    times = instants_to_archive(table, timeline, policy)
    if not times:
        return []
    chosen = sorted(((name, i) for name, i in files.items() if i.ts in times), key=lambda x: _order(x[1]))
    if table.version.layout_2:
        _write_lsm(table, timeline, chosen)
    else:
        _write_archive_log(table, chosen)
    pending = [name for name, i in chosen if i.state != COMPLETED]
    completed = [name for name, i in chosen if i.state == COMPLETED]
    for name in [*pending, *completed]:
        table.dfs.delete(table.timeline_file(name))
    return sorted(times)


def _order(i: Instant) -> tuple[str, int]:
    return i.ts, {"requested": 0, "inflight": 1}.get(i.state, 2)


def _archive_entry(table: HudiTable, name: str, i: Instant) -> ArchivedMetaEntryDoc:
    """``MetadataConversionUtils.createMetaWrapper`` for one instant file."""
    entry = ArchivedMetaEntryDoc(commitTime=i.ts, actionType=i.action, actionState=i.state.upper(), version=1)
    data = table.dfs.read_bytes(table.timeline_file(name))
    if i.action == clean_metadata.CLEAN:
        if i.state == COMPLETED:
            entry["hoodieCleanMetadata"] = one_avro_record(data)
        else:
            entry["hoodieCleanerPlan"] = one_avro_record(data)
    elif i.action == ROLLBACK and i.state == COMPLETED:
        entry["hoodieRollbackMetadata"] = one_avro_record(data)
    elif i.action in (COMMIT, DELTA_COMMIT) and data:
        doc = table.version.decode_metadata(data, name)
        record = commit_metadata_record(doc)
        record["extraMetadata"] = {**(doc.get("extraMetadata") or {}), ROLLING_STAT: ""}
        entry["hoodieCommitMetadata"] = record
    return entry


def _write_archive_log(table: HudiTable, chosen: list[tuple[str, Instant]]) -> None:
    """Version 6: one Avro data block of the entries in the archive log's next version."""
    folder = Dfs.join(table.hoodie, ARCHIVED_DIR)
    try:
        names = [e.name for e in table.dfs.list_dir(folder)]
    except DfsNotFound:
        names = []
    latest = max((archive_log_version(n)[0] for n in names if n.startswith(ARCHIVE_LOG_PREFIX)), default=0)
    path = Dfs.join(folder, f"{ARCHIVE_LOG_PREFIX}{latest + 1}_{ARCHIVE_WRITE_TOKEN}")
    entries = [_archive_entry(table, name, i) for name, i in chosen]
    table.dfs.write_bytes(path, archive_block(entries))


def archive_block(entries: list[ArchivedMetaEntryDoc]) -> bytes:
    """``HoodieAvroDataBlock`` of ``HoodieArchivedMetaEntry`` records: the schema in the header,
    the content the data block version, the count, then each record's length and encoding."""
    body = [struct.pack(">ii", AVRO_BLOCK_VERSION, len(entries))]
    for entry in entries:
        buf = BytesIO()
        fastavro.schemaless_writer(buf, _PARSED_ENTRY, entry)
        body += [struct.pack(">i", buf.tell()), buf.getvalue()]
    header = {SCHEMA: json.dumps(_ENTRY_SCHEMA, separators=(",", ":"))}
    return encode_block(AVRO_DATA_BLOCK, header, b"".join(body))


def _write_lsm(table: HudiTable, timeline: Timeline, chosen: list[tuple[str, Instant]]) -> None:
    """Version 8+: a layer-0 parquet file of the completed instants, a new manifest, the version."""
    history = Dfs.join(table.timeline_dir, LAYOUT_2_HISTORY)
    requested = {i.ts: name for name, i in chosen if i.state == "requested"}
    rows: list[LsmTimelineRow] = []
    for name, i in chosen:
        if i.state != COMPLETED:
            continue
        plan = table.dfs.read_bytes(table.timeline_file(requested[i.ts])) if i.ts in requested else b""
        action = COMMIT if i.ts in timeline.compactions else i.action
        metadata = table.dfs.read_bytes(table.timeline_file(name))
        row = LsmTimelineRow(
            instantTime=i.ts,
            completionTime=i.completion,
            action=action,
            metadata=metadata,
            plan=plan or None,
            version=1,
        )
        rows.append(row)
    if not rows:
        return
    file_name = f"{rows[0]['instantTime']}_{rows[-1]['instantTime']}_0.parquet"
    size = table.dfs.write_parquet(Dfs.join(history, file_name), pa.Table.from_pylist(rows, schema=_LSM_SCHEMA))
    version, files = _latest_manifest(table, history)
    files.append(ManifestFile(fileName=file_name, fileLen=size))
    manifest = dumps_indented({"files": files}).encode()
    table.dfs.write_bytes(Dfs.join(history, f"{MANIFEST_PREFIX}{version + 1}"), manifest)
    table.dfs.write_bytes(Dfs.join(history, VERSION_FILE), str(version + 1).encode())


def _latest_manifest(table: HudiTable, history: str) -> tuple[int, list[ManifestFile]]:
    """``LSMTimeline.latestSnapshotVersion`` and its manifest's files (0 and none before any)."""
    try:
        text = table.dfs.read_bytes(Dfs.join(history, VERSION_FILE)).decode().strip()
    except DfsNotFound:
        return 0, []
    version = int(text) if text.isdigit() else 0
    if version == 0:
        return 0, []
    doc = json.loads(table.dfs.read_bytes(Dfs.join(history, f"{MANIFEST_PREFIX}{version}")))
    return version, list(doc.get("files") or [])
