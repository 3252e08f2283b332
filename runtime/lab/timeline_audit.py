"""What ``verify --table`` reads of a timeline beyond the data instants: the table services'
instants (clean, rollback, restore, savepoint, indexing) and the metadata table's own timeline.

Sources (Apache Hudi 0.14-1.1):

* ``HoodieCleanMetadata``, ``HoodieRollbackMetadata`` (``commitsRollback``: the instants it
  undid), ``HoodieRestoreMetadata``, ``HoodieSavepointMetadata``, ``HoodieIndexCommitMetadata``:
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

from runtime.core.dfs import Dfs, DfsError
from runtime.hudi.table import COMPLETED, HOODIE, HudiTable, TableError, Timeline
from runtime.hudi.timeline_actions import DELTA_COMMIT, ROLLBACK, TABLE_SERVICE_ACTIONS, decode_instant_file

METADATA_TABLE = "metadata"
FindingTuple = tuple[str, str, str, str]  # severity, kind, message, file


def service_instant_findings(table: HudiTable, timeline: Timeline) -> list[FindingTuple]:
    """Each completed clean, rollback, restore, savepoint and indexing instant's file parses; the
    rollbacks are named with the instants they undid (info)."""
    out: list[FindingTuple] = []
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
        undone = doc.get("commitsRollback") if i.action == ROLLBACK else None
        if undone:
            out.append(("info", "rollback", f"rollback {i.ts} undid instant(s) {', '.join(map(str, undone))}", rel))
    return out


def metadata_table_evidence(table: HudiTable, states: dict[str, str], evidence: MutableMapping[str, list[str]]) -> None:
    """Data instants the metadata table's timeline completed that the data timeline did not:
    absent from it, or pending while a later data instant completed. Adds each to ``evidence``
    (instant -> why the table says it completed)."""
    mdt = Dfs.join(table.hoodie, METADATA_TABLE)
    try:
        if not table.dfs.exists(Dfs.join(mdt, HOODIE, "hoodie.properties")):
            return
        mdt_table = HudiTable.open(table.dfs, mdt)
        mdt_timeline = mdt_table.timeline()
    except (TableError, DfsError):
        return  # a metadata table that cannot be read is not evidence of anything
    on_timeline = {i.ts for i in table.timeline().instants}
    if not on_timeline:
        return
    first, done = min(on_timeline), sorted(ts for ts, s in states.items() if s == COMPLETED)
    for i in mdt_timeline.instants:
        if i.action != DELTA_COMMIT or i.state != COMPLETED or i.ts < first:
            continue  # the metadata table's bootstrap instants (00000000000000000...) are older
        state = states.get(i.ts)
        later_done = bool(done) and done[-1] > i.ts
        if (i.ts not in on_timeline) or (state is not None and state != COMPLETED and later_done):
            evidence[i.ts].append(
                f"the metadata table's timeline completed it ({HOODIE}/{METADATA_TABLE}/{mdt_table.timeline_rel}/"
                f"{mdt_table.version.completed_file(i.ts, i.completion, DELTA_COMMIT)}) and lists its files"
            )
