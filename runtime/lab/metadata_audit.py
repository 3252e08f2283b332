"""What ``verify --table`` checks of the metadata table (``.hoodie/metadata``) against the data table:
their timelines, and the ``files`` partition against the storage listing.

Sources (Apache Hudi 0.14-1.1):

* ``HoodieBackedTableMetadataWriter.update`` (called from ``BaseHoodieWriteClient.commit`` via
  ``writeTableMetadata`` before the data instant completes): every data instant is applied to the
  metadata table as a delta commit of the same instant time (from table version 8 the requested
  time), so a completed data instant without a completed metadata delta commit is one whose files
  readers using the metadata table (``hoodie.metadata.enable``, the default) do not see. Instants
  before the metadata table was initialised (its bootstrap delta commits ``00000000000000000``..,
  ``HoodieTableMetadataUtil.createIndexInitTimestamp``, list the files written until then) and
  instants the metadata table archived (``HoodieTimelineArchiver`` keeps every metadata instant at
  or after the data table's earliest active one) are not checked, as Hudi does not need them.
  The other direction (a completed metadata delta commit for a data instant the data timeline
  lost) is :func:`runtime.lab.timeline_audit.metadata_table_evidence`.
* ``HoodieTableMetadata.getAllFilesInPartition`` (``FILES`` partition,
  :mod:`runtime.hudi.table.metadata_table`): what a reader lists instead of the storage. A file it lists
  that storage does not hold fails the reader (``FileNotFoundException``); a base or log file of a
  completed instant it does not list is invisible to those readers, though a storage listing reads
  it. Files of pending or rolled-back instants are unlisted by design (a note). A listed size is
  what readers take as the file's length (``HoodieMetadataFileInfo.size``): a base file of another
  size on storage, or a log file shorter than listed, is an error; a log file longer than listed
  was appended by an instant the metadata table has not applied yet (a note). The files are
  compared only when ``hoodie.table.metadata.partitions`` has ``files`` (the readers use it then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runtime.core.dfs import Dfs, DfsError
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import (
    FILES_PARTITION,
    MetadataTableError,
    open_metadata_table,
    read_files_partition,
)
from runtime.hudi.table.table_config import parse_properties
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMPLETED, HOODIE
from runtime.hudi.timeline.timeline_actions import DELTA_COMMIT, decode_instant_file

FindingTuple = tuple[str, str, str, str]  # severity, kind, message, file
MDT = f"{HOODIE}/metadata"
BOOTSTRAP_PREFIX = "00000000000000"  # the metadata table's initialising instants
SAMPLE = 10


@dataclass(frozen=True)
class StoredFile:
    """A base or log file on storage: the instant that wrote it ("" when its name does not say)
    and its size."""

    instant: str
    size: int
    is_log: bool = False


def metadata_table_findings(
    table: HudiTable,
    timeline: Timeline,
    states: Mapping[str, str],
    data_files: Mapping[str, StoredFile],
    committed_logs: Iterable[str],
) -> list[FindingTuple]:
    """The metadata table against the data table. ``states``: data instant -> its highest state;
    ``data_files``: every base and log file on storage, by table-relative path;
    ``committed_logs``: the log files a completed instant's metadata lists."""
    enabled = _enabled_partitions(table)
    try:
        mdt = open_metadata_table(table)
        if mdt is None:
            return _absent(enabled)
        view = read_files_partition(mdt)
    except MetadataTableError as exc:
        return [("error", "metadata-table-unreadable", str(exc), f"{MDT}/{HOODIE}/hoodie.properties")]
    out: list[FindingTuple] = [("error", "corrupt-metadata-table", why, rel) for rel, why in view.problems]
    out += _unparsed_instants(mdt, view.timeline)
    out += [("info", "metadata-table-unread-block", why, rel) for rel, why in view.notes]
    out += _instants_missing(f"{MDT}/{mdt.timeline_rel}", timeline, states, view.timeline)
    if FILES_PARTITION in enabled and not view.problems:
        out += _files_against_storage(view.files(), states, data_files, set(committed_logs))
    return out


def _absent(enabled: set[str]) -> list[FindingTuple]:
    """No metadata table: an error when ``hoodie.properties`` says it has partitions (Hudi's
    readers then open it, ``HoodieTableConfig.isMetadataTableAvailable``, and fail)."""
    if not enabled:
        return []
    why = (
        f"{HOODIE}/hoodie.properties lists metadata table partitions ({', '.join(sorted(enabled))}) "
        f"but {MDT}/{HOODIE}/hoodie.properties is missing: readers using the metadata table fail to open it"
    )
    return [("error", "metadata-table-missing", why, f"{MDT}/{HOODIE}/hoodie.properties")]


def _unparsed_instants(mdt: HudiTable, timeline: Timeline) -> list[FindingTuple]:
    """The metadata table's completed instant files that do not parse (as the data table's:
    ``HoodieCommitMetadata``, an Avro record from version 8, JSON before)."""
    out: list[FindingTuple] = []
    for i in timeline.instants:
        if i.state != COMPLETED:
            continue
        name = mdt.version.completed_file(i.ts, i.completion, i.action)
        rel = f"{MDT}/{mdt.timeline_rel}/{name}"
        try:
            decode_instant_file(mdt.dfs.read_bytes(mdt.timeline_file(name)))
        except Exception as exc:  # noqa: BLE001 - damaged bytes make the Avro and JSON readers raise many types
            out.append(("error", "corrupt-metadata-table", f"{rel} is not a valid {i.action} instant: {exc}", rel))
    return out


def _enabled_partitions(table: HudiTable) -> set[str]:
    """``hoodie.table.metadata.partitions``: the metadata partitions readers use."""
    try:
        props = parse_properties(table.dfs.read_bytes(Dfs.join(table.hoodie, "hoodie.properties")).decode())
    except DfsError:
        return set()
    return {p.strip() for p in props.get("hoodie.table.metadata.partitions", "").split(",") if p.strip()}


def _instants_missing(
    mdt_timeline_rel: str, timeline: Timeline, states: Mapping[str, str], mdt_timeline: Timeline
) -> list[FindingTuple]:
    """Completed data instants the metadata table did not complete a delta commit for
    (``mdt_timeline_rel``: the metadata table's timeline folder, table-relative)."""
    mdt_states = {i.ts: i.state for i in mdt_timeline.instants if i.action == DELTA_COMMIT}
    bootstraps = [i for i in mdt_timeline.instants if i.ts.startswith(BOOTSTRAP_PREFIX) and i.state == COMPLETED]
    # the bootstrap listed every file of the instants that completed before it did
    initialised = max((i.completion or "" for i in bootstraps), default="")
    applied = sorted(ts for ts in mdt_states if not ts.startswith(BOOTSTRAP_PREFIX))
    out: list[FindingTuple] = []
    for ts, state in sorted(states.items()):
        if state != COMPLETED or mdt_states.get(ts) == COMPLETED:
            continue
        completion = timeline.completion_of(ts)
        if (completion and initialised and completion < initialised) or (not applied or ts < applied[0]):
            continue  # before the metadata table was initialised, or archived from its timeline
        where = f"pending ({mdt_states[ts]})" if ts in mdt_states else "absent"
        out.append(
            (
                "error",
                "metadata-table-missing-instant",
                f"data instant {ts} completed but its delta commit on the metadata table's timeline is {where}: "
                "readers that list files through the metadata table (Hudi's default) do not see its files",
                f"{mdt_timeline_rel}/{ts}.{DELTA_COMMIT}",
            )
        )
    return out


def _files_against_storage(
    listed: Mapping[str, int], states: Mapping[str, str], data_files: Mapping[str, StoredFile], committed_logs: set[str]
) -> list[FindingTuple]:
    out: list[FindingTuple] = []
    for rel in sorted(set(listed) - set(data_files)):
        out.append(
            (
                "error",
                "metadata-lists-missing-file",
                f"the metadata table's files partition lists {rel}, which is not on storage: "
                "readers using the metadata table fail to open it",
                rel,
            )
        )
    unlisted = sorted(set(data_files) - set(listed))
    committed = [r for r in unlisted if states.get(data_files[r].instant) == COMPLETED or r in committed_logs]
    for rel in committed:
        out.append(
            (
                "error",
                "metadata-missing-file",
                f"{rel} belongs to completed instant {data_files[rel].instant or '?'} but the metadata table's files "
                "partition does not list it: readers using the metadata table do not see it",
                rel,
            )
        )
    others = [r for r in unlisted if r not in committed]
    if others:
        out.append(
            (
                "info",
                "metadata-unlisted-pending-file",
                f"{len(others)} file(s) of pending or rolled-back instants are on storage and, as Hudi intends, "
                f"not in the metadata table: {', '.join(others[:SAMPLE])}",
                others[0],
            )
        )
    return out + _sizes_against_storage(listed, data_files)


def _sizes_against_storage(listed: Mapping[str, int], data_files: Mapping[str, StoredFile]) -> list[FindingTuple]:
    out: list[FindingTuple] = []
    for rel in sorted(set(listed) & set(data_files)):
        want, stored = listed[rel], data_files[rel]
        if want == stored.size:
            continue
        if stored.is_log and stored.size > want:
            why = "appended to by an instant the metadata table has not applied"
            out.append(
                (
                    "info",
                    "metadata-log-grown",
                    f"{rel} is {stored.size} bytes, the metadata table lists {want}: {why}",
                    rel,
                )
            )
            continue
        out.append(
            (
                "error",
                "metadata-size-mismatch",
                f"{rel} is {stored.size} bytes on storage; the metadata table's files partition lists {want}, "
                "the length readers using it read",
                rel,
            )
        )
    return out
