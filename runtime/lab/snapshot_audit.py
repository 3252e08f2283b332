"""What ``commitlab verify --table`` checks of a table's snapshot: each record identity once, and
every row's commit time a completed instant.

Sources (Apache Hudi 0.14/1.0, ``hudi-common``): the snapshot is the latest file slice of each file
group whose base instant is completed (``HoodieFileGroup.isFileSliceCommitted``:
``timeline.containsOrBeforeTimelineStarts``), less the file groups a completed replacecommit
replaced; a merge-on-read snapshot merges log files, so it is the official reader's. A record's
identity is (partition path, record key) (``HoodieKey``; the bucket index is not global,
``HoodieBucketIndex.isGlobal``): one identity twice in the snapshot, in one file group or across
two, is a duplicate, except where an INSERT or BULK_INSERT instant wrote the rows (Hudi keeps both
then). A table without meta fields (``hoodie.populate.meta.fields`` false) keys its rows by
``hoodie.table.recordkey.fields`` (several joined as ``ComplexKeyGenerator`` writes them). A row
whose ``_hoodie_commit_time`` is no completed instant is evidence of a lost commit
(:mod:`runtime.lab.lost_commit_audit`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.dfs import Dfs, DfsError
from runtime.hudi.timeline.instant import COMPLETED
from runtime.hudi.timeline.timeline_actions import INSERT_OPERATIONS, operation, replaced_file_groups
from runtime.lab.audit_findings import ERROR, INFO, SAMPLE, Audit
from runtime.lab.table_scan import BaseFile, TableScan
from runtime.lab.verify import VerifyError, read_snapshot

IDENTITY_COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_commit_time"]
SEQNO = "_hoodie_commit_seqno"  # one per record write: two rows with one seqno are copies of one write


def _latest_slices(scan: TableScan) -> list[BaseFile]:
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


def snapshot_checks(scan: TableScan, audit: Audit) -> None:
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


def _reader_snapshot_checks(scan: TableScan, audit: Audit) -> None:
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


def _record_key_fields(scan: TableScan) -> list[str]:
    """``hoodie.table.recordkey.fields``: the columns a table without meta fields keys rows by."""
    return [f.strip() for f in scan.table.props.record_key_field.split(",") if f.strip()]


def _partition_fields(scan: TableScan) -> list[str]:
    """``hoodie.table.partition.fields`` (a custom key generator's ``field:TYPE`` read as the field)."""
    return [f.split(":", 1)[0].strip() for f in scan.table.props.partition_field.split(",") if f.strip()]


def _identity_of_data(scan: TableScan, rows: pa.Table, partition: Any, instant: str) -> pa.Table:
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


def _snapshot_rows(scan: TableScan, audit: Audit, snap: pa.Table) -> None:
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
