"""What ``verify --table`` reads of a timeline beyond the data instants: the table services'
instants (clean, rollback, restore, savepoint, indexing) and the metadata table's own timeline.

Sources (Apache Hudi 0.14-1.1):

* ``HoodieCleanMetadata``, ``HoodieRollbackMetadata`` (``commitsRollback``: the instants it
  undid; a compaction among ``instantsRollback`` is run again, see ``_compactions_to_rerun``),
  ``HoodieRestoreMetadata`` (``instantsToRollback``: the instants a restore to a savepoint
  undid), ``HoodieSavepointMetadata``, ``HoodieIndexCommitMetadata``:
  each completed instant file is one Avro record (``TimelineMetadataUtils.deserializeAvroMetadata``);
  one that does not parse is an error naming it, as for commit metadata.
* ``HoodieBackedTableMetadataWriter`` (``.hoodie/metadata``): every data instant is applied to
  the metadata table as a delta commit of the same instant time before the data instant
  completes (``BaseHoodieWriteClient.commit`` -> ``writeTableMetadata`` then
  ``HoodieActiveTimeline.saveAsComplete``). A crash between the two leaves the data instant
  pending with the metadata table's delta commit completed, which the next writer's rollback
  undoes first (EAGER failed-writes policy), so a completed metadata-table delta commit for a
  data instant that is absent from the data timeline, or still pending while later instants
  completed, is a commit the data timeline lost: readers using the metadata table list its files,
  readers of the timeline do not.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from runtime.core.dfs import DfsError
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import METADATA_DIR, MetadataTableError, open_metadata_table
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMPLETED, HOODIE
from runtime.hudi.timeline.timeline_actions import (
    COMPACTION,
    DELTA_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    TABLE_SERVICE_ACTIONS,
    data_instants,
    decode_instant_file,
)

METADATA_TABLE = METADATA_DIR
FindingTuple = tuple[str, str, str, str]  # severity, kind, message, file


def service_instant_findings(table: HudiTable, timeline: Timeline) -> list[FindingTuple]:
    """Each completed clean, rollback, restore, savepoint and indexing instant's file parses; the
    rollbacks and restores are named with the instants they undid (info), and an instant they
    undid that is still on the timeline is a finding: Hudi deletes its files from the timeline
    before the rollback completes (``BaseRollbackActionExecutor.finishRollback``)."""
    out: list[FindingTuple] = []
    undone: dict[str, str] = {}  # undone instant -> the rollback or restore file that undid it
    for i in timeline.instants:
        if i.action not in TABLE_SERVICE_ACTIONS or i.state != COMPLETED:
            continue
        name = table.version.completed_file(i.ts, i.completion, i.action)
        rel = f"{table.timeline_rel}/{name}"
        try:
            doc = decode_instant_file(table.dfs.read_bytes(table.timeline_file(name)))
        except (ValueError, DfsError, EOFError, StopIteration) as exc:
            out.append(("error", "corrupt-instant", f"{rel} is not a valid {i.action} instant: {exc}", rel))
            continue
        # HoodieRollbackMetadata.commitsRollback; HoodieRestoreMetadata.instantsToRollback
        key = {ROLLBACK: "commitsRollback", RESTORE: "instantsToRollback"}.get(i.action, "")
        instants = [str(t) for t in doc.get(key) or []] if key else []
        if instants:
            out.append(("info", i.action, f"{i.action} {i.ts} undid instant(s) {', '.join(instants)}", rel))
            rerun = _compactions_to_rerun(doc) if i.action == ROLLBACK else set()
            undone.update(dict.fromkeys((t for t in instants if t not in rerun), rel))
        if i.action == SAVEPOINT:
            out.append(("info", SAVEPOINT, f"savepoint {i.ts}: the cleaner keeps the files of instant {i.ts}", rel))
    out += _undone_still_on_timeline(timeline, undone)
    return out


def _compactions_to_rerun(doc: dict[str, Any]) -> set[str]:
    """The compactions a rollback undid (``HoodieRollbackMetadata.instantsRollback``): Hudi's
    ``HoodieTable.rollbackInflightCompaction`` keeps each on the timeline, back to requested, to
    run again under its own time, so it is neither pending by mistake nor wrongly completed."""
    infos = doc.get("instantsRollback") or []
    return {str(x.get("commitTime")) for x in infos if isinstance(x, dict) and x.get("action") == COMPACTION}


def _undone_still_on_timeline(timeline: Timeline, undone: dict[str, str]) -> list[FindingTuple]:
    out: list[FindingTuple] = []
    for ts, state in sorted((ts, i.state) for ts, i in data_instants(timeline.instants).items() if ts in undone):
        severity = "error" if state == COMPLETED else "warning"
        out.append(
            (
                severity,
                "undone-instant-on-timeline",
                f"instant {ts} is {state} on the timeline although {undone[ts]} undid it: "
                + ("readers take its files as committed" if state == COMPLETED else "its rollback did not finish"),
                undone[ts],
            )
        )
    return out


def metadata_table_evidence(table: HudiTable, states: dict[str, str], evidence: MutableMapping[str, list[str]]) -> None:
    """Data instants the metadata table's timeline completed that the data timeline did not:
    absent from it, or pending while a later data instant completed. Adds each to ``evidence``
    (instant -> why the table says it completed)."""
    try:
        mdt_table = open_metadata_table(table)
        if mdt_table is None:
            return
        mdt_timeline = mdt_table.timeline()
    except (MetadataTableError, TableError, DfsError):
        return  # a metadata table that cannot be read is not evidence of anything
    on_timeline = {i.ts for i in table.timeline().instants}
    if not on_timeline:
        return
    first, done = min(on_timeline), sorted(ts for ts, s in states.items() if s == COMPLETED)
    for i in mdt_timeline.instants:
        if i.action != DELTA_COMMIT or i.state != COMPLETED or i.ts < first:
            continue  # the metadata table's bootstrap instants (00000000000000000...) are older
        state = states.get(i.ts)
        if state == COMPLETED:
            continue  # completed on the data table too (an archived one is no longer on the active timeline)
        later_done = bool(done) and done[-1] > i.ts
        if (i.ts not in on_timeline) or (state is not None and state != COMPLETED and later_done):
            evidence[i.ts].append(
                f"the metadata table's timeline completed it ({HOODIE}/{METADATA_TABLE}/{mdt_table.timeline_rel}/"
                f"{mdt_table.version.completed_file(i.ts, i.completion, DELTA_COMMIT)}) and lists its files"
            )
