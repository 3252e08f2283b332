"""Writing the metadata table's ``files`` partition: what Hudi's writer commits to
``.hoodie/metadata`` around every data commit, so that readers list the table through it
(:mod:`runtime.hudi.table.metadata_table` reads it back, ``commitlab verify`` audits it).

Sources (Apache Hudi 0.14-1.1, ``hudi-client-common`` ``org.apache.hudi.metadata``):

* ``HoodieBackedTableMetadataWriter.initializeFromFilesystem`` (called when the write client is
  built: for Flink, ``StreamWriteOperatorCoordinator.start`` -> ``initMetadataTable``): a table
  without a metadata table gets one, bootstrapped from a listing of its partitions
  (``listAllPartitionsFromFilesystem``; a file counts when the instant its name carries completed),
  committed as the delta commit ``SOLO_COMMIT_TIMESTAMP`` + suffix: ``00000000000000010``
  (``HoodieBackedTableMetadataWriterTableVersionSix.createIndexInitTimestamp``, table version 6)
  or ``00000000000000000`` (1.x, versions 8 and 9; as the hudi-rs test tables show). Its records
  go to the file group's base HFile (``files-0000-0_<token>_<instant>.hfile``); the group's first
  log file holds an empty delete block (``initializeFileGroups``). The data table's
  ``hoodie.properties`` then lists ``hoodie.table.metadata.partitions=files``
  (``HoodieTableConfig.setMetadataPartitionState``).
* ``HoodieBackedTableMetadataWriter.update(HoodieCommitMetadata)`` from
  ``BaseHoodieWriteClient.commit`` -> ``writeTableMetadata``, before the data instant's completed
  file (for Flink the coordinator's ``commitInstant`` -> ``HoodieFlinkWriteClient.commit``): one
  delta commit of the same instant time on the metadata table's own timeline, whose records
  (``HoodieTableMetadataUtil.convertMetadataToFilesPartitionRecords``) are one per touched
  partition (key: its path, ``.`` without partitions) naming its new files with their
  ``fileSizeInBytes``, and ``__all_partitions__`` naming the touched partitions; written as a
  ``HoodieHFileDataBlock`` in a log file of ``files-0000-0`` (from table version 8 one named after
  the instant; on version 6 the next log version of the slice: local and object stores do not
  append). A delta commit the metadata table already holds for the instant (an attempt that
  failed before the data commit completed) is undone first (``processAndCommit``).
* ``update(HoodieRollbackMetadata)``: a data rollback's delta commit, at the rollback's instant time,
  marks the files it deleted ``isDeleted`` and lists the log files it wrote; a delta commit of the
  undone instant is rolled back in the metadata table.
* ``update(HoodieCleanMetadata)`` from ``CleanActionExecutor.runClean`` -> ``writeTableMetadata``,
  before the completed clean: a delta commit at the clean's time marks the files it deleted
  (:mod:`runtime.hudi.client.cleaner`); the archiver keeps what is newer than this table's latest
  compaction (:mod:`runtime.hudi.client.archiver`).
* ``HoodieBackedTableMetadataWriter.performTableServices`` before each delta commit
  (:mod:`runtime.hudi.client.metadata_services`): the metadata table's own clean, then
  ``compactIfNecessary`` (every ``metadata.compaction.delta_commits`` delta commits,
  ``FlinkOptions.METADATA_COMPACTION_DELTA_COMMITS``, 10, the file group is compacted into a new
  base HFile: :func:`compact`), then its archiving.
* ``HoodieMetadataWriteUtils.createMetadataWriteConfig``: ``MarkerType.DIRECT`` markers
  (:mod:`runtime.hudi.table.markers`) under ``.hoodie/metadata/.hoodie/.temp/<instant>``: the bootstrap's
  base file (``HoodieCreateHandle``, CREATE), a delta commit's log file (``HoodieAppendHandle``:
  from version 8 ``createLogMarkerIfNotExists``, ``<log file>.marker.CREATE``; on 6 the slice's
  base file name with APPEND), a compaction's base file (``HoodieMergeHandle``, MERGE); each commit
  reconciles against them and ``postCommit`` deletes the folder; an undone delta commit's folder
  goes with it (``BaseRollbackActionExecutor.runRollback``).
* ``HoodieTable.maybeDeleteMetadataTable``: a writer with the metadata table off deletes it and
  drops the property, so no reader lists through a table no one maintains.

Differences (each for a reason): the metadata table's own delta commits carry no heartbeat (Hudi's
EAGER single writer starts none); an undone metadata delta commit's log file is deleted (Hudi 1.x
does too; on version 6 Hudi appends a rollback command block) and no rollback instant is written on
the metadata timeline; an attempt's leftover delta commit is undone before the table services run
(Flink's ``commitInternal`` runs them first; either way before the new delta commit); only the
``files`` partition is written (Hudi 1.1's Flink writer enables no other by default).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import cast

import fastavro

from runtime.core.dfs import Dfs, DfsNotFound
from runtime.core.messages import WriteStat
from runtime.hudi.client.compaction import (
    commit_compaction,
    needs_compaction,
    save_plan,
    start_compaction,
)
from runtime.hudi.client.metadata_services import perform_table_services
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc, commit_metadata_doc
from runtime.hudi.formats.compaction_plan import CompactionOperation
from runtime.hudi.formats.hfile import SCHEMA_KEY, write_hfile
from runtime.hudi.formats.log_format import (
    DELETE_BLOCK,
    HFILE_DATA_BLOCK,
    INSTANT_TIME,
    SCHEMA,
    LogFileName,
    encode_block,
    read_blocks,
)
from runtime.hudi.formats.metadata_record import FILE_LIST, PARTITION_LIST, SCHEMA_JSON, FileInfoDoc, MetadataRecordDoc
from runtime.hudi.formats.metadata_record import SCHEMA as RECORD_SCHEMA
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.markers import APPEND, CREATE, MERGE
from runtime.hudi.table.metadata_table import (
    ALL_PARTITIONS,
    EMPTY_DELETE_CONTENT,
    FILES_PARTITION,
    NON_PARTITIONED,
    FileChanges,
    metadata_table_path,
    read_files_partition,
)
from runtime.hudi.table.table_config import MERGE_ON_READ, PARTITION_METADATA, TableProps, parse_properties
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMPLETED, DELTA_COMMIT, INFLIGHT, REQUESTED, format_instant

FILE_ID = "files-0000-0"  # HoodieTableMetadataUtil.getFileIDForFileGroup(FILES, 0)
WRITE_TOKEN = "0-0-0"
METADATA_PARTITIONS_KEY = "hoodie.table.metadata.partitions"
DEFAULT_COMPACTION_DELTA_COMMITS = 10  # FlinkOptions.METADATA_COMPACTION_DELTA_COMMITS
_PARSED = fastavro.parse_schema(RECORD_SCHEMA)
_FIELDS = [f["name"] for f in RECORD_SCHEMA["fields"]]


def bootstrap_instant(table: HudiTable) -> str:
    """The metadata table's initialising delta commit of the files partition."""
    return "00000000000000000" if table.version.layout_2 else "00000000000000010"


def metadata_table_props(data: TableProps) -> TableProps:
    return TableProps(
        table_name=f"{data.table_name}_metadata",
        record_key_field="key",
        partition_field="",
        precombine_field="",
        database=data.database,
        table_type=MERGE_ON_READ,
        version=data.version,
    )


def _properties(mdt: TableProps) -> dict[str, str]:
    """The metadata table's ``hoodie.properties`` (``HoodieBackedTableMetadataWriter.initializeMetaClient``;
    as the hudi-rs test tables' metadata tables hold them)."""
    rules = mdt.rules
    out = {
        "hoodie.table.name": mdt.table_name,
        "hoodie.table.type": MERGE_ON_READ,
        "hoodie.table.version": str(mdt.version),
        "hoodie.timeline.layout.version": str(rules.timeline_layout),
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.populate.meta.fields": "false",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.archivelog.folder": "history" if rules.layout_2 else "archived",
    }
    if rules.layout_2:
        out |= {
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.table.initial.version": str(mdt.version),
            "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
            "hoodie.record.merge.mode": "CUSTOM",
            "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        }
    else:
        out["hoodie.table.keygenerator.class"] = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
    return out | {"hoodie.table.checksum": mdt.properties()["hoodie.table.checksum"]}


def _record(key_type: int, files: dict[str, tuple[int, bool]]) -> MetadataRecordDoc:
    record = cast(MetadataRecordDoc, dict.fromkeys(_FIELDS))  # every other field None
    listed = {n: FileInfoDoc(size=size, isDeleted=deleted) for n, (size, deleted) in sorted(files.items())}
    record.update(MetadataRecordDoc(key="", type=key_type, filesystemMetadata=listed))  # key: in the row key
    return record


def files_records(changes: FileChanges) -> list[tuple[bytes, bytes]]:
    """The (row key, Avro value) cells of a delta commit of the files partition: one record per
    partition, and the partition list."""
    records = [(ALL_PARTITIONS, _record(PARTITION_LIST, {(p or NON_PARTITIONED): (0, False) for p in changes}))]
    records += [(p or NON_PARTITIONED, _record(FILE_LIST, files)) for p, files in changes.items()]
    cells = []
    for key, record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, _PARSED, record)
        cells.append((key.encode(), buf.getvalue()))
    return sorted(cells)


class MetadataTableWriter:
    """The files partition of one data table's metadata table, seen through the data table's DFS."""

    def __init__(self, table: HudiTable, compaction_delta_commits: int = DEFAULT_COMPACTION_DELTA_COMMITS) -> None:
        self.table = table
        # one process, one instant clock (HoodieInstantTimeGenerator): the metadata table's own
        # clean and compaction times come after every instant time the data table issued
        self.mdt = HudiTable(table.dfs, metadata_table_path(table), metadata_table_props(table.props), table.clock)
        self.files_dir = Dfs.join(self.mdt.base_path, FILES_PARTITION)
        self.compaction_delta_commits = compaction_delta_commits

    def exists(self) -> bool:
        return self.table.dfs.exists(Dfs.join(self.mdt.hoodie, "hoodie.properties"))

    # -- initialising and deleting -------------------------------------------------------------

    def initialise(self, now: float | None) -> None:
        """Bootstraps the metadata table from a listing of the data table's files."""
        dfs, mdt = self.table.dfs, self.mdt
        for sub in (mdt.hoodie, mdt.timeline_dir, *mdt._archive_dirs(), self.files_dir):
            dfs.mkdirs(sub)
        body = "".join(f"{k}={v}\n" for k, v in _properties(mdt.props).items())
        dfs.write_bytes(Dfs.join(mdt.hoodie, "hoodie.properties"), ("#Properties saved by commitlab\n" + body).encode())
        instant = bootstrap_instant(self.table)
        # its completion time comes after the data table's latest instant (the one committing)
        mdt.clock.raise_to(self.table.timeline().latest_ts() or format_instant(time.time() if now is None else now))
        mdt.start_instant(instant)
        dfs.write_bytes(
            Dfs.join(self.files_dir, PARTITION_METADATA),
            f"#partition metadata\ncommitTime={instant}\npartitionDepth=1\n".encode(),
        )
        base_name = f"{FILE_ID}_{WRITE_TOKEN}_{instant}.hfile"
        mdt.write_markers(instant).create_if_not_exists(FILES_PARTITION, base_name, CREATE)  # HoodieCreateHandle
        base = write_hfile(files_records(self._listing()), {SCHEMA_KEY: SCHEMA_JSON.encode()})
        dfs.write_bytes(Dfs.join(self.files_dir, base_name), base)
        log_name = str(LogFileName(FILE_ID, instant, 1, WRITE_TOKEN))
        log = encode_block(DELETE_BLOCK, {INSTANT_TIME: instant}, EMPTY_DELETE_CONTENT)
        dfs.write_bytes(Dfs.join(self.files_dir, log_name), log)
        stat = _stat(base_name, len(base), instant, 0)
        self._commit(
            instant, stat, lambda: mdt.save_as_complete(instant, DELTA_COMMIT, _doc(stat, "BULK_INSERT_PREPPED"), now)
        )
        self._set_partitions_property(FILES_PARTITION)

    def _listing(self) -> FileChanges:
        """Every base and log file of the data table whose instant completed, with its size."""
        completed = set(self.table.timeline().completed_instants())
        out: FileChanges = {}
        for partition in self.table.partitions():
            files = out.setdefault(partition, {})
            try:
                entries = self.table.dfs.list_dir(self.table.partition_path(partition))
            except DfsNotFound:
                continue
            for e in entries:
                base = parse_base_file_name(e.name)
                log = LogFileName.parse(e.name)
                instant = base[2] if base else (log.base_instant if log else "")
                if instant in completed:
                    files[e.name] = (e.size, False)
        return out

    def delete(self) -> None:
        """``HoodieTable.maybeDeleteMetadataTable``: the metadata table and the property go."""
        try:
            self.table.dfs.delete(self.mdt.base_path, recursive=True)
        except DfsNotFound:
            pass  # declared but gone: the property still goes
        self._set_partitions_property("")

    def _set_partitions_property(self, value: str) -> None:
        path = Dfs.join(self.table.hoodie, "hoodie.properties")
        text = self.table.dfs.read_bytes(path).decode()
        if parse_properties(text).get(METADATA_PARTITIONS_KEY, "") == value:
            return
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"{METADATA_PARTITIONS_KEY}=")]
        if value:
            lines.append(f"{METADATA_PARTITIONS_KEY}={value}")
        self.table.dfs.write_bytes(path, ("\n".join(lines) + "\n").encode())

    # -- delta commits -------------------------------------------------------------------------

    def update(self, instant: str, changes: FileChanges, now: float | None) -> None:
        """One delta commit of ``instant`` applying ``changes`` (the metadata table initialised
        first when it has none), after the metadata table's own table services (its clean, a
        compaction when due, its archiving); its timeline reloaded between, as ``commitInternal``."""
        if not self.exists():
            self.initialise(now)
        timeline = self.mdt.timeline()
        if any(i.ts == instant for i in timeline.instants):
            self.undo(instant, timeline)
            timeline = self.mdt.timeline()
        perform_table_services(self, instant, timeline, now)
        timeline = self.mdt.timeline()
        # completion times after everything on the metadata timeline: a log completing at or
        # before the last compaction's time would fall out of its file slice
        self.mdt.clock.raise_to(timeline.latest_ts())
        self.mdt.start_instant(instant)
        name = self._next_log(instant, timeline)
        self._mark_log(instant, name)
        content = write_hfile(files_records(changes), {SCHEMA_KEY: SCHEMA_JSON.encode()})
        block = encode_block(HFILE_DATA_BLOCK, {SCHEMA: SCHEMA_JSON, INSTANT_TIME: instant}, content)
        self.table.dfs.write_bytes(Dfs.join(self.files_dir, str(name)), block)
        stat = _stat(str(name), len(block), name.base_instant, name.version)
        self._commit(
            instant, stat, lambda: self.mdt.save_as_complete(instant, DELTA_COMMIT, _doc(stat, "UPSERT_PREPPED"), now)
        )

    # -- markers -------------------------------------------------------------------------------

    def _mark_log(self, instant: str, name: LogFileName) -> None:
        """``HoodieAppendHandle``'s marker of the delta commit's log file: from version 8 the log
        file's own (``createLogMarkerIfNotExists``, CREATE), on 6 the slice's base file's APPEND."""
        if self.mdt.version.logs_per_instant:
            marked, io_type = str(name), CREATE
        else:
            marked, io_type = f"{FILE_ID}_{WRITE_TOKEN}_{name.base_instant}.hfile", APPEND
        self.mdt.write_markers(instant).create_if_not_exists(FILES_PARTITION, marked, io_type)

    def _commit(self, instant: str, stat: WriteStat, publish: Callable[[], None]) -> None:
        """``BaseHoodieWriteClient.commit`` on the metadata table: ``reconcileAgainstMarkers``
        (a CREATE or MERGE marker's file that no stat lists is deleted), the completed instant,
        then ``postCommit``'s deletion of the marker folder."""
        markers = self.mdt.write_markers(instant)
        for path in markers.created_and_merged_data_paths():
            if path != stat.path:
                self.table.dfs.delete(Dfs.join(self.mdt.base_path, path))
        publish()
        markers.delete_folder()

    # -- compaction ----------------------------------------------------------------------------

    def compaction_due(self, instant: str, timeline: Timeline) -> bool:
        """``compactIfNecessary``: ``metadata.compaction.delta_commits`` delta commits since the
        last compaction, none pending, and no data instant before ``instant`` pending
        (``validateCompactionScheduling``: a base file must hold every instant before it)."""
        if not needs_compaction(timeline, self.compaction_delta_commits) or timeline.pending_compactions():
            return False
        return not any(ts < instant for ts in self.table.timeline().pending_commits())

    def compact(self, instant: str, timeline: Timeline, now: float | None) -> str:
        """The files partition merged into a new base HFile: the plan (``<c>.compaction.requested``),
        inflight, the base file, then ``<c>.commit``. The instant is the latest delta commit's
        plus ``001`` on version 6 (``createCompactionTimestamp``), a new instant time from 8."""
        mdt = self.mdt
        latest = max((i.ts for i in timeline.instants if i.action == DELTA_COMMIT), default=instant)
        c = mdt.next_instant_time(now, timeline) if mdt.version.layout_2 else f"{latest}001"
        base_instant = _latest_base_instant(timeline, bootstrap_instant(self.table))
        view = read_files_partition(mdt)
        logs = sorted(
            (n for n in self._logs() if _in_slice(mdt.version.logs_per_instant, n, base_instant)),
            key=lambda n: (n.base_instant, n.version),
        )
        base_file = f"{FILE_ID}_{WRITE_TOKEN}_{base_instant}.hfile"
        op = CompactionOperation(FILES_PARTITION, FILE_ID, base_instant, base_file, tuple(map(str, logs)))
        save_plan(mdt, c, [op])
        start_compaction(mdt, c)
        changes = {p: {n: (size, False) for n, size in files.items()} for p, files in view.partitions.items()}
        cells = files_records(changes)
        info = {SCHEMA_KEY: SCHEMA_JSON.encode(), b"minRecordKey": cells[0][0], b"maxRecordKey": cells[-1][0]}
        name = f"{FILE_ID}_{WRITE_TOKEN}_{c}.hfile"
        # HoodieMergeHandle's marker of the new base file
        mdt.write_markers(c).create_if_not_exists(FILES_PARTITION, name, MERGE)
        data = write_hfile(cells, info)
        self.table.dfs.write_bytes(Dfs.join(self.files_dir, name), data)
        stat = _stat(name, len(data), base_instant, 0)
        self._commit(c, stat, lambda: commit_compaction(mdt, c, [stat], SCHEMA_JSON, now))
        return c

    def _next_log(self, instant: str, timeline: Timeline) -> LogFileName:
        if self.mdt.version.logs_per_instant:
            return LogFileName(FILE_ID, instant, 1, WRITE_TOKEN)
        base = _latest_base_instant(timeline, bootstrap_instant(self.table))
        versions = [n.version for n in self._logs() if n.base_instant == base]
        return LogFileName(FILE_ID, base, max(versions, default=0) + 1, WRITE_TOKEN)

    def _logs(self) -> list[LogFileName]:
        try:
            entries = self.table.dfs.list_dir(self.files_dir)
        except DfsNotFound:
            return []
        return [n for e in entries if (n := LogFileName.parse(e.name)) is not None]

    def undo(self, instant: str, timeline: Timeline | None = None) -> None:
        """Removes the metadata table's delta commit of ``instant``, if it has one: its log file,
        then its instant files (the completed one first)."""
        if timeline is None:
            if not self.exists():
                return
            timeline = self.mdt.timeline()
        states = [i for i in timeline.instants if i.ts == instant]
        if not states:
            return
        for log in self._logs():
            path = Dfs.join(self.files_dir, str(log))
            if log.base_instant == instant and self.mdt.version.logs_per_instant:
                self.table.dfs.delete(path)
            elif not self.mdt.version.logs_per_instant and log.version > 1:
                if any(b.instant == instant for b in read_blocks(self.table.dfs.read_bytes(path), str(log))):
                    self.table.dfs.delete(path)
        (latest,) = states  # one instant per time: its latest state
        # a pending one has no completion time, so no completed file to name (layout 2 needs it)
        done = []
        if latest.state == COMPLETED:
            done = [self.mdt.version.completed_file(instant, latest.completion, DELTA_COMMIT)]
        pending = [f"{instant}.{DELTA_COMMIT}.{INFLIGHT}", f"{instant}.{DELTA_COMMIT}.{REQUESTED}"]
        for name in done + pending:
            try:
                self.table.dfs.delete(self.mdt.timeline_file(name))
            except DfsNotFound:
                pass  # a state the attempt never reached
        self.mdt.write_markers(instant).delete_folder()  # BaseRollbackActionExecutor.runRollback


def _in_slice(per_instant: bool, log: LogFileName, base_instant: str) -> bool:
    """Whether a log file is in the slice a compaction at ``base_instant``'s successor merges."""
    return log.base_instant > base_instant if per_instant else log.base_instant == base_instant


def _latest_base_instant(timeline: Timeline, bootstrap: str) -> str:
    """The metadata table's latest base instant: its last completed compaction, else its bootstrap."""
    done = timeline.completed_compactions()
    return done[-1] if done else bootstrap


def _doc(stat: WriteStat, operation: str) -> CommitMetadataDoc:
    return commit_metadata_doc([stat], {}, operation=operation)


def _stat(name: str, size: int, base_instant: str, log_version: int) -> WriteStat:
    return WriteStat(
        file_id=FILE_ID,
        path=f"{FILES_PARTITION}/{name}",
        partition=FILES_PARTITION,
        prev_commit=base_instant,
        num_writes=0,
        num_inserts=0,
        num_update_writes=0,
        total_write_bytes=size,
        file_size=size,
        log_version=log_version,
        log_files=[name] if log_version else [],
    )


def metadata_writer(table: HudiTable) -> MetadataTableWriter | None:
    """``HoodieTable.getMetadataWriter``: the metadata table's writer when the table keeps one."""
    return MetadataTableWriter(table) if table.props.metadata_table else None
