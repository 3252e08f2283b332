"""What ``commitlab verify --table`` finds of lost commits and pending instants.

Sources (Apache Hudi 0.14/1.0, ``hudi-common``, ``hudi-client-common``, ``hudi-flink``):

- **A lost commit (gap)**: an instant that is not completed (pending, or absent from the timeline)
  although the table says it completed: a later commit's write stat names it as ``prevCommit``
  (that file version was merged from its base file), snapshot rows carry it as
  ``_hoodie_commit_time`` (:mod:`runtime.lab.snapshot_audit`), a checkpoint message records it as
  committed (``ckp_meta`` ``<instant>.COMPLETED``: ``CkpMetadata.commitInstant``; message bus
  ``<ckp>.commit`` holding ``<committed>,<inflight>``: ``MessageDriver.commitCkp``), the metadata
  table names it (:mod:`runtime.lab.timeline_audit`), or the run's ``result.json`` lists it. Each is
  an error: readers lost that commit's rows, or hold rows of an instant that never completed.
  Without such evidence a deleted last ``.commit`` looks exactly like a write that failed before
  committing; that is a warning, not an error (docs/FIDELITY.md, the lost commit (gap) row).
- **Pending instants** (``.commit.requested`` / ``.inflight`` without ``.commit``) are legal before
  completed ones: a failed or concurrent write awaiting rollback. With the default failed-writes
  policy EAGER, ``BaseHoodieWriteClient.startCommit`` calls ``CleanerUtils.rollbackFailedWrites``
  first, so a single writer leaves none behind a later instant; with LAZY (multi-writer, heartbeats)
  it may. Their base files are invisible to readers: reported as info, or as a warning when a later
  instant started after them.
"""

from __future__ import annotations

from collections import defaultdict

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.hudi.formats.commit_metadata import write_stats
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
from runtime.lab.audit_findings import ERROR, INFO, SAMPLE, WARNING, Audit
from runtime.lab.table_scan import BaseFile, TableScan


def checkpoint_messages(scan: TableScan, audit: Audit) -> None:
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


def _bus_messages(scan: TableScan, audit: Audit) -> None:
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


def prev_commit_references(scan: TableScan) -> None:
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


def lost_commits(scan: TableScan, audit: Audit) -> None:
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


def pending_files(scan: TableScan, audit: Audit) -> None:
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
