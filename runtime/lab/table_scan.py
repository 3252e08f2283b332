"""One pass over a table for ``commitlab verify --table``: its data instants and their states, its
data files, and its commit metadata, which every check reads (:class:`TableScan`).

Sources (Apache Hudi 0.14/1.0, ``hudi-common``): a base file's file id and instant from its name
(``<fileId>_<writeToken>_<instant>.parquet``, :mod:`runtime.hudi.table.base_files`); partitions
found by walking the folders below the base path, as readers without the metadata table list
them; the completed data instants of the **archived timeline**
(:mod:`runtime.hudi.timeline.archived_timeline`) make their files committed; every commit file
parses (``HoodieCommitMetadata.fromBytes``), a corrupt one being a finding naming the file; the
latest clean's earliest commit to retain (the clean metadata's ``earliestCommitToRetain``) tells a
file the cleaner deleted from a lost one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from runtime.core.dfs import DfsError
from runtime.hudi.client.cleaner import earliest_retained_by_last_clean
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.archived_timeline import ArchivedTimelineError, archived_instants
from runtime.hudi.timeline.instant import COMPLETED
from runtime.hudi.timeline.timeline_actions import DATA_ACTIONS, data_instants
from runtime.lab.audit_findings import ERROR, INFO, Audit
from runtime.lab.verify import populates_meta_fields

MAX_PARTITION_DEPTH = 8


@dataclass
class BaseFile:
    """A base file on storage: its partition (folder), name, file id, instant and size."""

    partition: str
    name: str
    file_id: str
    instant: str
    size: int

    @property
    def rel(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name


@dataclass
class TableScan:
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


def scan_table(table: HudiTable, timeline: Timeline, audit: Audit) -> TableScan:
    """The table's data instants (the archived timeline's completed ones read as committed, as
    Hudi reads their files), data files and commit metadata; sets the audit's completed and
    pending instants, and adds a finding for whatever does not read."""
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
    scan = TableScan(table, timeline, states, metadata, files, logs, populates_meta_fields(table), names, archived)
    scan.cleaned_before = _earliest_retained(table, timeline, audit)
    return scan


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


def _earliest_retained(table: HudiTable, timeline: Timeline, audit: Audit) -> str:
    """The latest completed clean's earliest commit to retain ("" before any, or unreadable: then
    an error naming the clean)."""
    try:
        return earliest_retained_by_last_clean(table, timeline) or ""
    except (DfsError, ValueError, EOFError) as exc:
        audit.add(ERROR, "corrupt-clean", f"the latest clean instant's metadata does not read: {exc}")
        return ""
