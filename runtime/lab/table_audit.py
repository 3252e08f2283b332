"""What ``commitlab verify --table`` checks without the input: the table against itself.

Each check names what Hudi means by a valid table (sources: Apache Hudi 0.14/1.0, ``hudi-common``
and ``hudi-client-common``):

- **Snapshot**: the latest file slice of each file group whose base instant is completed
  (``HoodieFileGroup.isFileSliceCommitted``: ``timeline.containsOrBeforeTimelineStarts``). A base
  file of a completed instant is read whether or not that instant's commit metadata lists it
  (``AbstractTableFileSystemView`` builds file groups from the storage listing), so an unlisted
  base file of a completed instant is an error: readers see rows no commit accounts for.
- **Record identity**: (partition path, record key) (``HoodieKey``; the bucket index is not global,
  ``HoodieBucketIndex.isGlobal``): one identity twice in the snapshot, in one file group or across
  two, is a duplicate.
- **Pending instants** (``.commit.requested`` / ``.inflight`` without ``.commit``) are legal before
  completed ones: a failed or concurrent write awaiting rollback. With the default failed-writes
  policy EAGER, ``BaseHoodieWriteClient.startCommit`` calls ``CleanerUtils.rollbackFailedWrites``
  first, so a single writer leaves none behind a later instant; with LAZY (multi-writer, heartbeats)
  it may. Their base files are invisible to readers: reported as info, or as a warning when a later
  instant started after them.
- **A lost commit (gap)**: an instant that is not completed (pending, or absent from the timeline)
  although the table says it completed: a later commit's write stat names it as ``prevCommit``
  (that file version was merged from its base file), snapshot rows carry it as
  ``_hoodie_commit_time``, a checkpoint message records it as committed (``ckp_meta``
  ``<instant>.COMPLETED``: ``CkpMetadata.commitInstant``; message bus ``<ckp>.commit`` holding
  ``<committed>,<inflight>``: ``MessageDriver.commitCkp``), or the run's ``result.json`` lists it.
  Each is an error: readers lost that commit's rows, or hold rows of an instant that never
  completed. Without such evidence a deleted last ``.commit`` looks exactly like a write that
  failed before committing; that is a warning, not an error (see docs/fidelity/checker.md).
- **Orphan base file**: a base file whose instant is on the timeline in no state and not before the
  timeline's start (Hudi's ``isBeforeTimelineStarts`` would read such a file as archived and
  committed: a warning).
- **Partition metafile**: each partition folder holding data files has a valid
  ``.hoodie_partition_metadata`` (``HoodiePartitionMetadata``), without which readers that list
  partitions from storage do not see the partition.
- **Metadata table** (:mod:`runtime.lab.metadata_audit`): its timeline against the data timeline
  and its ``files`` partition against the storage listing; the **archived timeline**
  (:mod:`runtime.hudi.timeline.archived_timeline`) makes archived instants' files committed.
- **Commit metadata**: every commit file parses (``HoodieCommitMetadata.fromBytes``); each write
  stat's ``path`` exists, its size is ``fileSizeInBytes`` and its footer's row count ``numWrites``
  when recorded. A corrupt commit file or parquet footer is a finding naming the file.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.dfs import Dfs, DfsError, DfsNotFound, open_dfs
from runtime.core.storage import check_location
from runtime.hudi.client.cleaner import earliest_retained_by_last_clean
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc, WriteStatDoc, write_stats
from runtime.hudi.formats.log_format import LogBlock, LogFileName, LogFormatError, read_blocks
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_reader import DECODED_BLOCKS, ROW_BLOCKS, decode_block, row_count
from runtime.hudi.table.table_config import PARTITION_METADATA, TableError, parse_properties
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.archived_timeline import ArchivedTimelineError, archived_instants
from runtime.hudi.timeline.ckp_meta import CKP_META, CkpMessage, CkpMetaError, State
from runtime.hudi.timeline.dfs_message_bus import (
    ABORTED_CKP_INSTANT,
    COMMIT_SUFFIX,
    INITIAL_CKP_ID,
    MessageBusError,
    message_bus_path,
)
from runtime.hudi.timeline.dfs_message_bus import CkpMessage as BusMessage
from runtime.hudi.timeline.instant import AUX, COMPLETED, HOODIE
from runtime.hudi.timeline.timeline_actions import (
    DATA_ACTIONS,
    INSERT_OPERATIONS,
    data_instants,
    operation,
    replaced_file_groups,
)
from runtime.lab.metadata_audit import StoredFile, metadata_table_findings
from runtime.lab.timeline_audit import metadata_table_evidence, service_instant_findings
from runtime.lab.verify import VerifyError, open_reader, populates_meta_fields, read_snapshot

ERROR, WARNING, INFO = "error", "warning", "info"
IDENTITY_COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_commit_time"]
SEQNO = "_hoodie_commit_seqno"  # one per record write: two rows with one seqno are copies of one write
READER_CANNOT_OPEN = "reader-cannot-open"
SAMPLE = 10
MAX_PARTITION_DEPTH = 8


@dataclass(frozen=True)
class Finding:
    severity: str  # error / warning / info
    kind: str
    message: str
    file: str = ""  # table-relative path of the file concerned


@dataclass
class BaseFile:
    partition: str
    name: str
    file_id: str
    instant: str
    size: int

    @property
    def rel(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name


@dataclass
class Audit:
    """Everything :func:`audit_table` found, with the figures a reader wants first."""

    table: str
    findings: list[Finding] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    snapshot_rows: int = 0
    file_groups: int = 0

    def add(self, severity: str, kind: str, message: str, file: str = "") -> None:
        self.findings.append(Finding(severity, kind, message, file))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def is_table(self) -> bool:
        """Whether the path opened as a Hudi table (else no other check can run)."""
        return not any(f.kind == "not-a-table" for f in self.findings)

    @property
    def reader_opens(self) -> bool:
        """Whether the official reader opened the table (else no read of it can be checked)."""
        return self.is_table and not any(f.kind == READER_CANNOT_OPEN for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "ok": self.ok,
            "completed": len(self.completed),
            "pending": self.pending,
            "snapshot_rows": self.snapshot_rows,
            "file_groups": self.file_groups,
            "findings": [f.__dict__ for f in self.findings],
        }


@dataclass
class _Scan:
    """What one pass over the table found, shared by the checks."""

    table: HudiTable
    timeline: Timeline
    states: dict[str, str]  # data instant -> its highest state on the timeline
    metadata: dict[str, CommitMetadataDoc]  # completed instant -> parsed commit metadata
    files: list[BaseFile]
    logs: dict[str, int]  # merge-on-read: log file (relative path) -> size
    meta_fields: bool = True  # hoodie.populate.meta.fields: rows carry the _hoodie_* columns
    names: dict[str, str] = field(default_factory=dict)  # completed instant -> its timeline file
    archived: set[str] = field(default_factory=set)  # completed data instants of the archived timeline
    # the latest clean's earliest commit to retain: files of commits before it may be cleaned
    cleaned_before: str = ""
    # instant -> why the table says it completed (only for instants that did not)
    evidence: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))


def audit_table(table_uri: str, expected_commits: list[str] | None = None) -> Audit:
    """Checks a table against itself (and against ``expected_commits``, the instants a run
    recorded as committed, when known). Never raises for a damaged table: each problem is a
    finding."""
    audit = Audit(table_uri)
    try:
        dfs, base = open_dfs(table_uri, role="verifier")
        check_location(dfs.fs, table_uri)  # an object store it cannot reach: StorageError, exit 2
        table = HudiTable.open(dfs, base)
        timeline = table.timeline()
    except (TableError, DfsError) as exc:
        audit.add(ERROR, "not-a-table", str(exc), f"{HOODIE}/hoodie.properties")
        return audit
    except UnicodeDecodeError as exc:
        audit.add(ERROR, "not-a-table", f"{HOODIE}/hoodie.properties is not text: {exc}", f"{HOODIE}/hoodie.properties")
        return audit
    _reader_opens(table_uri, audit)
    instants = data_instants(timeline.instants)
    states = {ts: i.state for ts, i in instants.items()}
    audit.completed = [ts for ts, s in states.items() if s == COMPLETED]
    audit.pending = [ts for ts, s in states.items() if s != COMPLETED]
    archived = _archived_data_instants(table, states, audit)
    states.update(dict.fromkeys(archived, COMPLETED))  # Hudi reads their files as committed
    files, logs = _list_data_files(table, audit)
    names = {
        ts: table.version.completed_file(ts, timeline.completion_of(ts), i.action)
        for ts, i in instants.items()
        if i.state == COMPLETED
    }
    metadata = _read_metadata(table, names, audit)
    scan = _Scan(table, timeline, states, metadata, files, logs, populates_meta_fields(table), names, archived)
    scan.cleaned_before = _earliest_retained(table, timeline, audit)
    for severity, kind, message, rel in service_instant_findings(table, timeline):
        audit.add(severity, kind, message, rel)
    _check_commit_files(scan, audit)
    _check_unlisted_and_orphans(scan, audit)
    _check_partition_metadata(scan, audit)
    _metadata_table_checks(scan, audit)
    _snapshot_checks(scan, audit)
    _checkpoint_messages(scan, audit)
    for instant in expected_commits or []:
        if states.get(instant) != COMPLETED:
            scan.evidence[instant].append("the run's result.json records it as committed")
    _prev_commit_references(scan)
    metadata_table_evidence(scan.table, scan.states, scan.evidence)
    _lost_commits(scan, audit)
    _pending_files(scan, audit)
    return audit


def _reader_opens(table_uri: str, audit: Audit) -> None:
    """The official reader opens the table (it validates ``hoodie.properties`` when it does)."""
    try:
        open_reader(table_uri)
    except Exception as exc:  # noqa: BLE001 - the reader raises its own error types
        audit.add(
            ERROR,
            READER_CANNOT_OPEN,
            f"the official reader (hudi) cannot open the table: {exc}",
            f"{HOODIE}/hoodie.properties",
        )


def _archived_data_instants(table: HudiTable, active: dict[str, str], audit: Audit) -> set[str]:
    """The completed data instants of the archived timeline not on the active one
    (:mod:`runtime.hudi.timeline.archived_timeline`); one that does not read is an error naming its file."""
    try:
        found = archived_instants(table)
    except ArchivedTimelineError as exc:
        audit.add(ERROR, "corrupt-archived-timeline", str(exc), exc.file)
        return set()
    except DfsError as exc:
        audit.add(ERROR, "corrupt-archived-timeline", f"the archived timeline cannot be read: {exc}")
        return set()
    archived = {ts for ts, i in found.items() if i.action in DATA_ACTIONS and ts not in active}
    if archived:
        audit.add(
            INFO,
            "archived-instants",
            f"{len(archived)} completed data instant(s) read from the archived timeline "
            f"({min(archived)} .. {max(archived)}): their files are committed",
        )
    return archived


def _read_metadata(table: HudiTable, names: dict[str, str], audit: Audit) -> dict[str, CommitMetadataDoc]:
    """Each completed data instant's commit metadata (``names``: instant -> its timeline file; a
    compaction's ``.commit``, a replacecommit's too); a file that does not parse is an error."""
    out: dict[str, CommitMetadataDoc] = {}
    for instant, name in names.items():
        rel = f"{table.timeline_rel}/{name}"
        try:
            # JSON before table version 8, an Avro record from 8 (a JSON file is read either way)
            meta = table.version.decode_metadata(table.dfs.read_bytes(table.timeline_file(name)), rel)
            stats = meta["partitionToWriteStats"] if isinstance(meta, dict) else None
            if not isinstance(stats, dict) or not all(isinstance(v, list) for v in stats.values()):
                raise ValueError("partitionToWriteStats is not a map of partition -> list of write stats")
            for v in stats.values():
                for s in v:
                    if not isinstance(s, dict) or not isinstance(s.get("path"), str):
                        raise ValueError(f"a write stat without a path: {str(s)[:80]}")
        except (ValueError, KeyError, DfsError, EOFError, StopIteration) as exc:
            audit.add(ERROR, "corrupt-commit", f"{rel} is not valid commit metadata: {exc}", rel)
            continue
        out[instant] = meta
    return out


def _list_data_files(table: HudiTable, audit: Audit) -> tuple[list[BaseFile], dict[str, int]]:
    """Every base file and log file under the table, partitions found by walking the directories."""
    files: list[BaseFile] = []
    logs: dict[str, int] = {}
    todo = [("", table.base_path, 0)]
    while todo:
        part, path, depth = todo.pop()
        try:
            entries = table.dfs.list_dir(path)
        except DfsError as exc:
            audit.add(ERROR, "unreadable-directory", f"cannot list {part or '/'}: {exc}", part)
            continue
        for e in sorted(entries, key=lambda e: e.name):
            if LogFileName.parse(e.name) is not None:
                logs[f"{part}/{e.name}" if part else e.name] = e.size
                continue
            if e.name.startswith("."):
                continue
            if e.is_dir and depth < MAX_PARTITION_DEPTH:
                todo.append((f"{part}/{e.name}" if part else e.name, e.path, depth + 1))
                continue
            parsed = parse_base_file_name(e.name)
            if parsed:
                files.append(BaseFile(part, e.name, parsed[0], parsed[2], e.size))
            elif e.name.endswith(".parquet") and not e.is_dir:
                rel = f"{part}/{e.name}" if part else e.name
                audit.add(
                    ERROR,
                    "stray-file",
                    f"{rel} is not named as a Hudi base file (<fileId>_<writeToken>_<instant>.parquet): readers list "
                    "every .parquet file of a partition as a base file and fail on it (hudi-rs: 'Failed to parse file "
                    "name'); move it out of the table",
                    rel,
                )
    return files, logs


def _check_commit_files(scan: _Scan, audit: Audit) -> None:
    """Each write stat's file exists, with the size and row count its stat records."""
    on_disk = {f.rel: f for f in scan.files}
    for instant, meta in sorted(scan.metadata.items()):
        for s in write_stats(meta):
            rel = s["path"]
            if rel in scan.logs or LogFileName.parse(rel.rsplit("/", 1)[-1]) is not None:
                _check_log_file(scan, audit, instant, s)
                continue
            f = on_disk.get(rel)
            if f is None and _cleaned(scan, instant, s["fileId"]):
                continue
            if f is None:
                audit.add(ERROR, "missing-file", f"{scan.names[instant]} lists {rel}, which does not exist", rel)
                continue
            size = s.get("fileSizeInBytes") or 0
            if size and size != f.size:
                audit.add(ERROR, "size-mismatch", f"{rel} is {f.size} bytes; {scan.names[instant]} records {size}", rel)
            try:
                rows = scan.table.dfs.read_parquet_metadata(Dfs.join(scan.table.base_path, rel)).num_rows
            except DfsError as exc:
                audit.add(ERROR, "corrupt-parquet", f"{rel} (of {instant}) has no readable parquet footer: {exc}", rel)
                continue
            want = s.get("numWrites")
            if isinstance(want, int) and want and want != rows:
                name = scan.names[instant]
                audit.add(ERROR, "row-count-mismatch", f"{rel} holds {rows} rows; {name} records {want}", rel)


def _earliest_retained(table: HudiTable, timeline: Timeline, audit: Audit) -> str:
    """The latest completed clean's earliest commit to retain ("" before any, or unreadable: then
    an error naming the clean)."""
    try:
        return earliest_retained_by_last_clean(table, timeline) or ""
    except (DfsError, ValueError, EOFError) as exc:
        audit.add(ERROR, "corrupt-clean", f"the latest clean instant's metadata does not read: {exc}")
        return ""


def _cleaned(scan: _Scan, instant: str, file_id: str) -> bool:
    """A missing file the cleaner may have deleted: written before the latest clean's earliest
    commit to retain, in a file group with a newer committed base file (a superseded version)."""
    if not scan.cleaned_before or instant >= scan.cleaned_before:
        return False
    return any(
        f.file_id == file_id and f.instant > instant and scan.states.get(f.instant) == COMPLETED for f in scan.files
    )


def _check_log_file(scan: _Scan, audit: Audit, instant: str, stat: WriteStatDoc) -> None:
    """A delta commit's log file exists, with the size and the records its stat records (the
    records of its data blocks written at the instant)."""
    rel, commit = stat["path"], scan.names[instant]
    size = scan.logs.get(rel)
    if size is None and _cleaned(scan, instant, stat["fileId"]):
        return
    if size is None:
        audit.add(ERROR, "missing-file", f"{commit} lists {rel}, which does not exist", rel)
        return
    want = stat.get("fileSizeInBytes") or 0
    if want and want != size:
        audit.add(ERROR, "size-mismatch", f"{rel} is {size} bytes; {commit} records {want}", rel)
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


def _check_unlisted_and_orphans(scan: _Scan, audit: Audit) -> None:
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


def _check_partition_metadata(scan: _Scan, audit: Audit) -> None:
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


def _metadata_table_checks(scan: _Scan, audit: Audit) -> None:
    """The metadata table against the data timeline and the storage listing
    (:mod:`runtime.lab.metadata_audit`)."""
    per_instant = scan.table.version.logs_per_instant  # from 8 a log file's name carries its instant
    data_files = {f.rel: StoredFile(f.instant, f.size) for f in scan.files}
    for rel, size in scan.logs.items():
        name = LogFileName.parse(rel.rsplit("/", 1)[-1])
        data_files[rel] = StoredFile(name.base_instant if name is not None and per_instant else "", size, is_log=True)
    committed_logs = {s["path"] for meta in scan.metadata.values() for s in write_stats(meta) if s["path"] in scan.logs}
    active = {ts: state for ts, state in scan.states.items() if ts not in scan.archived}  # Hudi skips archived
    for severity, kind, message, rel in metadata_table_findings(
        scan.table, scan.timeline, active, data_files, committed_logs
    ):
        audit.add(severity, kind, message, rel)


def _latest_slices(scan: _Scan) -> list[BaseFile]:
    """The latest completed base file of each file group not replaced by a completed
    replacecommit (the snapshot's files)."""
    replaced = {g for meta in scan.metadata.values() for g in replaced_file_groups(meta)}
    latest: dict[tuple[str, str], BaseFile] = {}
    for f in scan.files:
        if scan.states.get(f.instant) != COMPLETED or (f.partition, f.file_id) in replaced:
            continue
        k = (f.partition, f.file_id)
        if k not in latest or f.instant > latest[k].instant:
            latest[k] = f
    return [latest[k] for k in sorted(latest)]


def _snapshot_checks(scan: _Scan, audit: Audit) -> None:
    """Unique (partition path, record key) in the snapshot, and rows whose commit time is no
    completed instant (evidence of a lost commit). A merge-on-read snapshot merges log files: it
    is the official reader's."""
    if scan.table.props.merge_on_read:
        _reader_snapshot_checks(scan, audit)
        return
    slices = _latest_slices(scan)
    audit.file_groups = len(slices)
    cols = [*IDENTITY_COLUMNS, SEQNO] if scan.meta_fields else _record_key_fields(scan)
    parts: list[pa.Table] = []
    for f in slices:
        try:
            # every column is decoded, as a reader of the snapshot does: damage inside any data page
            # is found here, not only in the key columns
            t = scan.table.dfs.read_parquet(Dfs.join(scan.table.base_path, f.rel)).select(cols)
        except (DfsError, pa.ArrowException, KeyError) as exc:
            if not any(x.file == f.rel and x.kind == "corrupt-parquet" for x in audit.findings):
                audit.add(ERROR, "corrupt-parquet", f"{f.rel} cannot be read: {exc}", f.rel)
            continue
        if not scan.meta_fields:  # the partition path is the file's folder, the commit its instant
            t = _identity_of_data(scan, t, pa.repeat(pa.scalar(f.partition), t.num_rows), f.instant)
        parts.append(t.append_column("_file_group", pa.repeat(pa.scalar(f.file_id), t.num_rows)))
    if not parts:
        return
    _snapshot_rows(scan, audit, pa.concat_tables(parts, promote_options="default"))


def _reader_snapshot_checks(scan: _Scan, audit: Audit) -> None:
    try:
        snap = read_snapshot(scan.table.base_path)
    except VerifyError as exc:
        audit.add(ERROR, "unreadable-snapshot", f"{exc}{_damaged_files(audit)}", scan.table.base_path)
        return
    if not snap.num_rows:
        return
    if not scan.meta_fields:  # no file name per row: file groups are not told apart
        missing = [c for c in [*_record_key_fields(scan), *_partition_fields(scan)] if c not in snap.column_names]
        if missing:
            audit.add(ERROR, "unreadable-snapshot", f"the snapshot lacks the key or partition field(s) {missing}")
            return
        parts = [pc.cast(snap.column(c), pa.string()) for c in _partition_fields(scan)]
        where = pc.binary_join_element_wise(*parts, "/") if parts else pa.repeat(pa.scalar(""), snap.num_rows)
        snap = _identity_of_data(scan, snap, where, "")
        _snapshot_rows(scan, audit, snap.append_column("_file_group", pa.repeat(pa.scalar("?"), snap.num_rows)))
        return
    # a log record's _hoodie_file_name is its file id; a base file row's, the file's name
    groups = pc.list_element(pc.split_pattern(snap.column("_hoodie_file_name"), "_", max_splits=1), 0)
    audit.file_groups = pc.count_distinct(groups).as_py()
    snap = snap.select([*IDENTITY_COLUMNS, SEQNO])
    _snapshot_rows(scan, audit, snap.append_column("_file_group", groups))


def _record_key_fields(scan: _Scan) -> list[str]:
    """``hoodie.table.recordkey.fields``: the columns a table without meta fields keys rows by."""
    return [f.strip() for f in scan.table.props.record_key_field.split(",") if f.strip()]


def _partition_fields(scan: _Scan) -> list[str]:
    """``hoodie.table.partition.fields`` (a custom key generator's ``field:TYPE`` read as the field)."""
    return [f.split(":", 1)[0].strip() for f in scan.table.props.partition_field.split(",") if f.strip()]


def _identity_of_data(scan: _Scan, rows: pa.Table, partition: Any, instant: str) -> pa.Table:
    """A table without meta fields' rows as the identity columns: the record key from the key
    fields (``field:value`` joined by ``,`` for several, as ``ComplexKeyGenerator`` writes it),
    the partition path and commit time given ("" when unknown)."""
    fields = _record_key_fields(scan)
    if len(fields) == 1:
        key = pc.cast(rows.column(fields[0]), pa.string())
    else:
        named = [pc.binary_join_element_wise(pa.scalar(f), pc.cast(rows.column(f), pa.string()), ":") for f in fields]
        key = pc.binary_join_element_wise(*named, ",")
    n = rows.num_rows
    return pa.table(
        {
            "_hoodie_record_key": key,
            "_hoodie_partition_path": partition,
            "_hoodie_commit_time": pa.repeat(pa.scalar(instant), n),
        }
    )


def _damaged_files(audit: Audit) -> str:
    """The files this audit's own reading found damaged, for a reader failure that names none."""
    named = sorted({f.file for f in audit.errors if f.file})
    if not named:
        return "; verify's own reading found no damaged file"
    return f"; verify's own reading finds damaged: {', '.join(named[:SAMPLE])}"


def _snapshot_rows(scan: _Scan, audit: Audit, snap: pa.Table) -> None:
    audit.snapshot_rows = snap.num_rows
    if SEQNO in snap.column_names:
        write = pc.binary_join_element_wise(snap.column("_hoodie_commit_time"), snap.column(SEQNO), "/")
    else:  # no meta fields: rows cannot be told to be copies of one write
        write = pc.cast(pa.array(range(snap.num_rows)), pa.string())
    snap = snap.append_column("_write", write)
    inserts = {ts for ts, meta in scan.metadata.items() if operation(meta) in INSERT_OPERATIONS}
    _duplicates(snap, audit, inserts)
    times = pc.value_counts(snap.column("_hoodie_commit_time").combine_chunks()).to_pylist()
    for c in times:
        ts = c["values"]
        if ts and scan.states.get(ts) != COMPLETED:
            scan.evidence[ts].append(f"{c['counts']} snapshot row(s) carry it as _hoodie_commit_time")


def _duplicates(snap: pa.Table, audit: Audit, inserts: set[str]) -> None:
    """Keys more than once in the snapshot: an error, or a note where an INSERT or BULK_INSERT
    instant wrote one of the rows, each row its own write (``inserts``: those instants; a row of
    unknown commit time counts as one when the table has any), as Hudi keeps both rows then. Two
    rows of one write (commit time and seqno) are a copied file, an error whatever the operation."""
    grouped = snap.group_by(["_hoodie_partition_path", "_hoodie_record_key"]).aggregate(
        [
            ("_file_group", "count"),
            ("_file_group", "count_distinct"),
            ("_file_group", "distinct"),
            ("_hoodie_commit_time", "distinct"),
            ("_write", "count_distinct"),
        ]
    )
    dup = grouped.filter(pc.greater(grouped.column("_file_group_count"), 1))
    if not dup.num_rows:
        return
    allowed = inserts | ({""} if inserts else set())

    def inserted(r: dict[str, Any]) -> bool:
        return (
            bool(allowed & set(r["_hoodie_commit_time_distinct"]))
            and r["_write_count_distinct"] == r["_file_group_count"]
        )

    by_insert = [r for r in dup.to_pylist() if inserted(r)]
    if by_insert:
        _report_duplicates(
            audit,
            INFO,
            by_insert,
            "written by INSERT/BULK_INSERT, which keeps a key written twice "
            "twice (the official reader returns both rows too)",
        )
    others = [r for r in dup.to_pylist() if not inserted(r)]
    if others:
        _report_duplicates(audit, ERROR, others, "")


def _report_duplicates(audit: Audit, severity: str, found: list[dict[str, Any]], why: str) -> None:
    rows = sorted(found, key=lambda r: (r["_hoodie_partition_path"], r["_hoodie_record_key"]))
    extra = sum(r["_file_group_count"] - 1 for r in rows)
    across = sum(1 for r in rows if r["_file_group_count_distinct"] > 1)
    sample = ", ".join(
        f"{r['_hoodie_partition_path']}/{r['_hoodie_record_key']} (file groups {', '.join(r['_file_group_distinct'])})"
        for r in rows[:SAMPLE]
    )
    audit.add(
        severity,
        "duplicate-key",
        f"{len(rows)} (partition path, record key) pair(s) appear more than once in the snapshot "
        f"({extra} extra row(s); {across} across two or more file groups of one partition)"
        + (f", {why}" if why else "")
        + f": {sample}",
    )


def _checkpoint_messages(scan: _Scan, audit: Audit) -> None:
    """ckp_meta COMPLETED files and message-bus commit messages name committed instants."""
    aux = Dfs.join(scan.table.hoodie, AUX)
    try:
        dirs = [e for e in scan.table.dfs.list_dir(aux) if e.is_dir and e.name.startswith(CKP_META)]
    except DfsNotFound:
        dirs = []
    for d in dirs:
        for e in scan.table.dfs.list_dir(d.path):
            try:
                msg = CkpMessage.parse(e.name)
            except CkpMetaError as exc:
                audit.add(WARNING, "bad-checkpoint-message", str(exc), f"{HOODIE}/{AUX}/{d.name}/{e.name}")
                continue
            if msg.state is State.COMPLETED and scan.states.get(msg.instant) != COMPLETED:
                scan.evidence[msg.instant].append(f"checkpoint message {HOODIE}/{AUX}/{d.name}/{e.name} says committed")
    _bus_messages(scan, audit)


def _bus_messages(scan: _Scan, audit: Audit) -> None:
    path = message_bus_path(scan.table.base_path)
    try:
        entries = scan.table.dfs.list_dir(path)
    except DfsNotFound:
        return
    for e in entries:
        ckp = e.name[: -len(COMMIT_SUFFIX)]
        if not e.name.endswith(COMMIT_SUFFIX) or not ckp.isdigit() or int(ckp) == INITIAL_CKP_ID:
            continue  # message 0 carries whatever instant the coordinator held at its (re)start
        rel = f"{HOODIE}/{AUX}/message_bus/{e.name}"
        try:
            msg = BusMessage.from_bytes(int(ckp), scan.table.dfs.read_bytes(e.path), path=rel)
        except (MessageBusError, DfsError) as exc:
            audit.add(WARNING, "bad-checkpoint-message", str(exc), rel)
            continue
        committed = msg.commit_instant
        # an empty round's message repeats the reused instant in both fields: nothing committed
        if committed and committed != ABORTED_CKP_INSTANT and committed != msg.inflight_instant:
            if scan.states.get(committed) != COMPLETED:
                scan.evidence[committed].append(f"checkpoint message {rel} says checkpoint {ckp} committed it")


def _prev_commit_references(scan: _Scan) -> None:
    """Later commits whose write stats name an instant that did not complete as ``prevCommit``."""
    refs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for instant, meta in sorted(scan.metadata.items()):
        for s in write_stats(meta):
            prev = s.get("prevCommit")
            if isinstance(prev, str) and prev not in ("", "null") and scan.states.get(prev) != COMPLETED:
                refs[(prev, instant)].append(s["path"])
    for (prev, instant), paths in sorted(refs.items()):
        scan.evidence[prev].append(
            f"{instant}.commit merged {len(paths)} file version(s) from its files (prevCommit), e.g. {paths[0]}"
        )


def _lost_commits(scan: _Scan, audit: Audit) -> None:
    files_of: dict[str, list[BaseFile]] = defaultdict(list)
    for f in scan.files:
        files_of[f.instant].append(f)
    for instant in sorted(scan.evidence):
        state = scan.states.get(instant)
        where = f"pending ({state})" if state else "absent from the timeline"
        kept = files_of.get(instant, [])
        reasons = sorted(set(scan.evidence[instant]))
        kind = "checkpoint-message-without-commit" if all("checkpoint message" in r for r in reasons) else "lost-commit"
        audit.add(
            ERROR,
            kind,
            f"instant {instant} is {where} but the table says it completed: {'; '.join(reasons[:SAMPLE])}"
            + (f"; its {len(kept)} base file(s) are invisible to readers" if kept else ""),
            f"{scan.table.timeline_rel}/{instant}.commit",
        )


def _pending_files(scan: _Scan, audit: Audit) -> None:
    """Base files of pending instants with no evidence of completion: legal, reported."""
    latest = max(scan.states) if scan.states else None
    counts: dict[str, int] = defaultdict(int)
    for f in scan.files:
        if f.instant in scan.states and scan.states[f.instant] != COMPLETED and f.instant not in scan.evidence:
            counts[f.instant] += 1
    for instant, n in sorted(counts.items()):
        later = latest is not None and latest > instant
        audit.add(
            WARNING if later else INFO,
            "pending-files",
            f"instant {instant} is pending ({scan.states[instant]}) with {n} base file(s) readers do not see: "
            + (
                "a later instant started after it, which a single writer with Hudi's default EAGER failed-writes "
                "policy does not do (it rolls pending writes back first): a failed write left behind, or a "
                "commit file that was lost"
                if later
                else "a write in progress, or a failed one awaiting rollback"
            ),
            f"{scan.table.timeline_rel}/{instant}.inflight",
        )
