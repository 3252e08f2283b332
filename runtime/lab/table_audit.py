"""What ``commitlab verify --table`` checks without the input: the table against itself.

Each check names what Hudi means by a valid table (sources: Apache Hudi 0.14/1.0, ``hudi-common``
and ``hudi-client-common``), in the module that makes it:

- one pass over the table (:mod:`runtime.lab.table_scan`): its data instants, the archived
  timeline's too, its data files and its commit metadata (a corrupt commit file is a finding);
- **table services' instants** and the **metadata table** (:mod:`runtime.lab.timeline_audit`,
  :mod:`runtime.lab.metadata_audit`): its timeline against the data timeline and its ``files``
  partition against the storage listing;
- **data files** (:mod:`runtime.lab.data_file_audit`): each write stat's file exists with its
  size and row count; base files of a completed instant its commit does not list, base files of no
  instant (orphans), and each partition folder's ``.hoodie_partition_metadata``;
- **snapshot** (:mod:`runtime.lab.snapshot_audit`): the latest completed file slice of each file
  group, each (partition path, record key) once;
- **lost commits and pending instants** (:mod:`runtime.lab.lost_commit_audit`): an instant the
  table says completed (a ``prevCommit``, a row's commit time, a checkpoint message, the metadata
  table, the run's ``result.json``) that did not is an error; pending instants' files are reported.
"""

from __future__ import annotations

from runtime.core.dfs import DfsError, open_dfs
from runtime.core.storage import check_location
from runtime.hudi.formats.commit_metadata import write_stats
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.instant import COMPLETED, HOODIE
from runtime.lab.audit_findings import ERROR, READER_CANNOT_OPEN, Audit
from runtime.lab.data_file_audit import check_commit_files, check_partition_metadata, check_unlisted_and_orphans
from runtime.lab.lost_commit_audit import checkpoint_messages, lost_commits, pending_files, prev_commit_references
from runtime.lab.metadata_audit import StoredFile, metadata_table_findings
from runtime.lab.snapshot_audit import snapshot_checks
from runtime.lab.table_scan import TableScan, scan_table
from runtime.lab.timeline_audit import metadata_table_evidence, service_instant_findings
from runtime.lab.verify import open_reader


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
    scan = scan_table(table, timeline, audit)
    for severity, kind, message, rel in service_instant_findings(table, timeline):
        audit.add(severity, kind, message, rel)
    check_commit_files(scan, audit)
    check_unlisted_and_orphans(scan, audit)
    check_partition_metadata(scan, audit)
    _metadata_table_checks(scan, audit)
    snapshot_checks(scan, audit)
    checkpoint_messages(scan, audit)
    for instant in expected_commits or []:
        if scan.states.get(instant) != COMPLETED:
            scan.evidence[instant].append("the run's result.json records it as committed")
    prev_commit_references(scan)
    metadata_table_evidence(scan.table, scan.states, scan.evidence)
    lost_commits(scan, audit)
    pending_files(scan, audit)
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


def _metadata_table_checks(scan: TableScan, audit: Audit) -> None:
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
