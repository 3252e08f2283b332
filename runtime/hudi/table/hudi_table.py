"""A Hudi table (copy-on-write or merge-on-read; version 6, 8 or 9) as the official readers expect it.

The rules are those of ``shared/design/TABLE_FORMAT.md`` (checked against ``hudi`` 0.5.0):
``hoodie.properties``; an instant goes ``<ts>.commit.requested`` -> ``<ts>.inflight`` -> parquet base
files -> ``<ts>.commit`` (last; it publishes the commit); base files carry the five meta columns and
are named ``<fileId>_<writeToken>_<ts>.parquet``; a parquet file never appears half-written.
Versions 8 and 9 keep the timeline in ``.hoodie/timeline/``, name a completed instant's file after
its completion time too and store its metadata as Avro (:mod:`runtime.hudi.timeline.table_version`).

The table is what Hudi's ``HoodieTableMetaClient`` and ``HoodieTable`` know of it: its config, its
timeline and instant times, its partitions and base files. What is done to it (commit, rollback,
clean, archive, compaction, the metadata table) is an action of the write client
(:mod:`runtime.hudi.client`), which uses it. It is shared by the coordinator (timeline) and the
write tasks (base files). Every access goes through :class:`runtime.core.dfs.Dfs`, so it is counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import pyarrow as pa

from runtime.core.dfs import Dfs, DfsNotFound, Held, KeptRows
from runtime.core.messages import PartitionFiles
from runtime.hudi.formats.bloom_filter import KeyFilter
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc, CompletedInstant, commit_metadata_doc
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.markers import DirectWriteMarkers
from runtime.hudi.table.table_config import (
    BUCKETS_KEY,
    COPY_ON_WRITE,
    META_COLUMNS,
    PARTITION_METADATA,
    TableError,
    TableProps,
    parse_properties,
)
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import (
    AUX,
    COMMIT,
    DELTA_COMMIT,
    HOODIE,
    Instant,
    bump_instant,
    format_instant,
    instant_of_file,
)
from runtime.hudi.timeline.table_version import table_version


def refuse_foreign_directory(dfs: Dfs, base_path: str) -> None:
    """Raises TableError when ``base_path`` (without ``.hoodie/hoodie.properties``) holds files: it is
    not a Hudi table, and a run must not write one among them. A missing or empty path is fine."""
    if not dfs.exists(base_path):
        return
    entries = [e for e in dfs.list_dir(base_path) if not e.name.startswith(".")]
    if entries:
        raise TableError(
            f"--table {base_path}: it holds {len(entries)} entries (e.g. {entries[0].name}) but no "
            ".hoodie/hoodie.properties, so it is not a Hudi table; fix: choose an empty or new --table path"
        )


class InstantClock:
    """The last instant time issued: Hudi's ``HoodieInstantTimeGenerator.lastInstantTime`` (0.14
    and 1.x, ``hudi-common``; ``HoodieActiveTimeline.lastInstantTime`` before), a static
    ``AtomicReference`` of the JVM, so every instant time a process creates, of the data table or of
    its metadata table, is strictly after the last one it created. A data table shares its clock
    with the metadata table it writes (:class:`runtime.hudi.client.metadata_writer.MetadataTableWriter`):
    with a clock each, the metadata table's own clean took the time of the data table's clean it
    was recording, and two of its instants had one requested time."""

    __slots__ = ("last",)

    def __init__(self, last: str | None = None) -> None:
        self.last = last

    def raise_to(self, ts: str | None) -> None:
        """Never again an instant time at or before ``ts``."""
        if ts is not None and (self.last is None or ts > self.last):
            self.last = ts


class HudiTable:
    """One Hudi table (copy-on-write or merge-on-read, version 6, 8 or 9) on a :class:`Dfs`."""

    _instant_lock = threading.Lock()

    def __init__(self, dfs: Dfs, base_path: str, props: TableProps, clock: InstantClock | None = None) -> None:
        self.dfs = dfs
        self.base_path = base_path.rstrip("/")
        self.props = props
        self.hoodie = Dfs.join(self.base_path, HOODIE)
        self.version = props.rules
        # the active timeline's folder: .hoodie, or .hoodie/timeline from table version 8
        folder = self.version.timeline_folder
        self.timeline_dir = Dfs.join(self.hoodie, folder) if folder else self.hoodie
        self.clock = clock if clock is not None else InstantClock()

    @property
    def _last_issued(self) -> str | None:
        return self.clock.last

    @_last_issued.setter
    def _last_issued(self, ts: str | None) -> None:
        self.clock.last = ts

    def with_dfs(self, dfs: Dfs) -> HudiTable:
        """The same table seen through another role's DFS view."""
        t = HudiTable(dfs, self.base_path, self.props)
        t._last_issued = self._last_issued
        return t

    # -- creation ------------------------------------------------------------------------------

    @classmethod
    def create_or_open(cls, dfs: Dfs, base_path: str, props: TableProps) -> HudiTable:
        """Creates the table, or opens it after checking it was made with the same keys."""
        return cls.create_or_open_found(dfs, base_path, props)[0]

    @classmethod
    def create_or_open_found(cls, dfs: Dfs, base_path: str, props: TableProps) -> tuple[HudiTable, dict[str, str]]:
        """:meth:`create_or_open`, and the properties the table had ({} when it was created)."""
        table = cls(dfs, base_path, props)
        props_path = Dfs.join(table.hoodie, "hoodie.properties")
        existing = cls.check_compatible(dfs, base_path, props)
        if not dfs.exists(props_path):
            for sub in (table.hoodie, table.timeline_dir, Dfs.join(table.hoodie, AUX), *table._archive_dirs()):
                dfs.mkdirs(sub)
            body = "#Properties saved by commitlab\n" + "".join(f"{k}={v}\n" for k, v in props.properties().items())
            dfs.write_bytes(props_path, body.encode())
        return table, existing

    def _archive_dirs(self) -> list[str]:
        """Layout 1's archived timeline folder; layout 2's LSM history folder."""
        if self.version.layout_2:
            return [Dfs.join(self.timeline_dir, "history")]
        return [Dfs.join(self.hoodie, "archived")]

    @classmethod
    def check_compatible(cls, dfs: Dfs, base_path: str, props: TableProps) -> dict[str, str]:
        """Read-only: raises TableError if ``base_path`` holds a table with other keys or a
        directory that is not a Hudi table; a missing path is fine (it will be created). Returns
        the table's properties ({} when there is no table yet)."""
        table = cls(dfs, base_path, props)
        props_path = Dfs.join(table.hoodie, "hoodie.properties")
        if dfs.exists(props_path):
            existing = parse_properties(dfs.read_bytes(props_path).decode())
            table._check_compatible(existing)
            return existing
        refuse_foreign_directory(dfs, base_path)
        return {}

    @classmethod
    def open(cls, dfs: Dfs, base_path: str) -> HudiTable:
        """Opens an existing table of any origin (reads its key fields from hoodie.properties)."""
        props_path = Dfs.join(base_path.rstrip("/"), HOODIE, "hoodie.properties")
        try:
            p = parse_properties(dfs.read_bytes(props_path).decode())
        except DfsNotFound as exc:
            raise TableError(f"{base_path} is not a Hudi table: {props_path} is missing") from exc
        try:
            version = table_version(p.get("hoodie.table.version", "6"))
        except ValueError as exc:
            raise TableError(f"{base_path}: {exc}") from None
        return cls(
            dfs,
            base_path,
            TableProps(
                table_name=p.get("hoodie.table.name", ""),
                record_key_field=p.get("hoodie.table.recordkey.fields", ""),
                partition_field=p.get("hoodie.table.partition.fields", ""),
                precombine_field=p.get(version.ordering_field_key, p.get("hoodie.table.precombine.field", "")),
                database=p.get("hoodie.database.name", "default"),
                num_buckets=int(p[BUCKETS_KEY]) if p.get(BUCKETS_KEY, "").isdigit() else 0,
                table_type=p.get("hoodie.table.type", COPY_ON_WRITE).upper(),
                version=version.number,
            ),
        )

    def _check_compatible(self, existing: dict[str, str]) -> None:
        want = self.props.properties()
        if existing.get("hoodie.table.version", "6") != str(self.props.version):
            raise TableError(
                f"the table at {self.base_path} is version {existing.get('hoodie.table.version', '6')} but this "
                f"job writes version {self.props.version}: pass the table's --table-version, or write to a new --table"
            )
        for key in (
            "hoodie.table.type",
            "hoodie.table.recordkey.fields",
            "hoodie.table.partition.fields",
            self.version.ordering_field_key,
        ):
            if existing.get(key) != want[key]:
                raise TableError(
                    f"the table at {self.base_path} has {key}={existing.get(key)!r} but this job "
                    f"uses {want[key]!r}: write to a new --table, or use the table's settings"
                )
        if self.props.num_buckets > 0 and existing.get(BUCKETS_KEY) != want[BUCKETS_KEY]:
            raise TableError(
                f"the table at {self.base_path} has {BUCKETS_KEY}={existing.get(BUCKETS_KEY)!r} but this job "
                f"uses {want[BUCKETS_KEY]!r} buckets per partition: a key would land in two file groups of one "
                "partition. Use the table's bucket count, or write to a new --table"
            )

    # -- timeline ------------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        """One listing of the active timeline (``.hoodie``, or ``.hoodie/timeline`` from version 8)."""
        return Timeline(self.timeline_files().values())

    def timeline_files(self) -> dict[str, Instant]:
        """Every instant file of the active timeline (one listing): file name -> the instant in
        the state that file records (Hudi's raw active timeline, every state of an instant)."""
        try:
            entries = self.dfs.list_dir(self.timeline_dir)
        except DfsNotFound as exc:
            raise TableError(f"{self.timeline_dir} is missing: the table was deleted or moved") from exc
        return {e.name: i for e in entries if (i := instant_of_file(e.name)) is not None}

    def timeline_file(self, name: str) -> str:
        return Dfs.join(self.timeline_dir, name)

    @property
    def timeline_rel(self) -> str:
        """The timeline folder relative to the base path, for messages."""
        return "/".join(x for x in (HOODIE, self.version.timeline_folder) if x)

    def last_pending_instant(self) -> str | None:
        return self.timeline().last_pending()

    def is_committed(self, instant: str) -> bool:
        """Whether a writer's instant completed (its ``.commit`` or ``.deltacommit`` exists; from
        version 8 its name holds the completion time, so the timeline is listed)."""
        if self.version.layout_2:
            return self.timeline().is_completed(instant)
        return self.dfs.exists(self.timeline_file(self.commit_file(instant)))

    def new_instant_time(self, now: float, timeline: Timeline | None = None) -> str:
        """A fresh instant, strictly after every instant on the timeline and every one issued."""
        ts = format_instant(now)
        floor = max([x for x in ((timeline.latest_ts() if timeline else None), self._last_issued) if x], default=None)
        if floor is not None and ts <= floor:
            ts = bump_instant(floor)
        self._last_issued = ts
        return ts

    def after_timeline(self, timeline: Timeline) -> None:
        """The next time this table issues (an instant or a completion) comes after every time on
        ``timeline``: another writer's, read under the table lock (Hudi's ``TimeGenerator`` hands
        out times under the lock and waits out the clock skew, so two writers never share one)."""
        latest = timeline.latest_ts()
        if latest is not None and latest > (self._last_issued or ""):
            self._last_issued = latest

    def completion_time(self, instant: str, now: float | None) -> str | None:
        """The completion time of ``instant`` completing now (layout 2; None before): a fresh
        instant time after the instant and every time this table issued or saw
        (:meth:`after_timeline`: under a multi-writer mode's lock, the other writers' times), as
        Hudi 1.x's ``ActiveTimelineV2.createCompleteFileInMetaPath`` takes it from the
        ``TimeGenerator`` that makes instant times. Without a clock, the time just after
        everything issued."""
        if not self.version.layout_2:
            return None
        if now is None:
            floor = max(x for x in (instant, self._last_issued, self.timeline().latest_ts()) if x)
            self._last_issued = bump_instant(floor)
            return self._last_issued
        floor_ts = max(x for x in (instant, self._last_issued) if x)
        ts = format_instant(now)
        self._last_issued = ts if ts > floor_ts else bump_instant(floor_ts)
        return self._last_issued

    def start_instant(self, instant: str) -> None:
        """requested -> inflight (Hudi's startCommitWithTime + transitionRequestedToInflight). A
        delta commit's inflight file is empty, as Hudi's Flink coordinator leaves it."""
        action = self.props.write_action
        self.dfs.create_empty(self.timeline_file(f"{instant}.{action}.requested"))
        if action == DELTA_COMMIT:
            self.dfs.create_empty(self.timeline_file(f"{instant}.{DELTA_COMMIT}.inflight"))
            return
        empty = self.version.encode_metadata(commit_metadata_doc([], {}))
        self.dfs.write_bytes(self.timeline_file(f"{instant}.inflight"), empty)

    def save_as_complete(self, instant: str, action: str, doc: CommitMetadataDoc, now: float | None) -> None:
        """Writes a completed instant's file with its metadata, as the table version names and
        encodes it (``HoodieActiveTimeline.saveAsComplete``)."""
        name = self.version.completed_file(instant, self.completion_time(instant, now), action)
        self.dfs.write_bytes(self.timeline_file(name), self.version.encode_metadata(doc))

    def write_markers(self, instant: str) -> DirectWriteMarkers:
        """The markers of ``instant`` (:mod:`runtime.hudi.table.markers`)."""
        return DirectWriteMarkers(self.dfs, self.base_path, instant)

    def commit_file(self, instant: str, timeline: Timeline | None = None) -> str:
        """The completed instant's file name in the timeline folder (a writer's instant); from
        version 8 its completion time comes from ``timeline`` (listed when not given)."""
        completion = None
        if self.version.layout_2:
            completion = (timeline or self.timeline()).completion_of(instant)
            if completion is None:
                raise TableError(f"{instant} is not a completed instant of {self.timeline_dir}")
        return self.version.completed_file(instant, completion, self.props.write_action)

    def read_commit_metadata(self, instant: str, timeline: Timeline | None = None) -> CommitMetadataDoc:
        """The commit file's document (Hudi's HoodieCommitMetadata, as written above)."""
        name = self.commit_file(instant, timeline)
        return self.version.decode_metadata(self.dfs.read_bytes(self.timeline_file(name)), name)

    def metadata_file(self, instant: str, timeline: Timeline) -> str:
        """The file in the timeline folder of a completed instant: a compaction's ``.commit``, else
        the writers' action's."""
        if instant in timeline.compactions:
            return self.version.completed_file(instant, timeline.completion_of(instant), COMMIT)
        return self.commit_file(instant, timeline)

    def completed_metadata(self, timeline: Timeline, skip: Iterable[str] = ()) -> list[CompletedInstant]:
        """Every completed instant of ``timeline`` (except those in ``skip``) with its commit
        metadata, each file read once: what a job's record is made of."""
        skipped = set(skip)
        out = []
        for instant in timeline.completed_instants():
            if instant in skipped:
                continue
            name = self.metadata_file(instant, timeline)
            doc = self.version.decode_metadata(self.dfs.read_bytes(self.timeline_file(name)), name)
            out.append(CompletedInstant(instant, instant in timeline.compactions, doc))
        return out

    def next_instant_time(self, now: float | None, timeline: Timeline) -> str:
        """A new instant time from ``now``; without a clock, the time just after everything issued."""
        if now is not None:
            return self.new_instant_time(now, timeline)
        floor = max(x for x in ("0" * 17, self._last_issued, timeline.latest_ts()) if x)
        self._last_issued = bump_instant(floor)
        return self._last_issued

    # -- base files ----------------------------------------------------------------------------

    def partitions(self) -> list[str]:
        """The table's partition paths: every folder under the base path that is not hidden, and a
        nested one (``2024/01``) under a folder that holds no partition metadata. A walk of the tree,
        one listing per folder, as Hudi's ``FSUtils.getAllFoldersWithPartitionMetaFile`` (what
        ``FileSystemBackedTableMetadata.getAllPartitionPaths`` uses without the metadata table)
        finds the folders that hold ``.hoodie_partition_metadata``."""
        found, todo = [], [""]
        while todo:
            prefix = todo.pop()
            try:
                entries = self.dfs.list_dir(Dfs.join(self.base_path, prefix) if prefix else self.base_path)
            except DfsNotFound:
                continue
            if prefix and any(e.name == PARTITION_METADATA for e in entries):
                found.append(prefix)
                continue
            dirs = [f"{prefix}/{e.name}" if prefix else e.name for e in entries if e.is_dir and e.name[0] != "."]
            if prefix and not dirs:
                found.append(prefix)  # a folder without metadata or sub-folders: a partition as before
            todo += dirs
        return sorted(found)

    def partition_path(self, partition: str) -> str:
        return Dfs.join(self.base_path, partition)

    def partition_files(self, partition: str) -> PartitionFiles:
        """One listing of a partition: its files' names and sizes (none when it does not exist)."""
        try:
            entries = self.dfs.list_dir(self.partition_path(partition))
        except DfsNotFound:
            return PartitionFiles([], [])
        return PartitionFiles.listed(entries)

    def committed_base_files(
        self, partition: str, timeline: Timeline, files: PartitionFiles | None = None
    ) -> dict[str, tuple[str, str]]:
        """file_id -> (instant, relative path) of the latest committed version in a partition;
        ``files``: the partition's files as a file-system view holds them, else one listing."""
        out: dict[str, tuple[str, str]] = {}
        for name in (self.partition_files(partition) if files is None else files).names:
            parsed = parse_base_file_name(name)
            if not parsed or not timeline.contains_or_before_start(parsed[2]):
                continue
            fid, _, inst = parsed
            if fid not in out or inst > out[fid][0]:
                out[fid] = (inst, f"{partition}/{name}")
        return out

    def ensure_partition(self, partition: str, instant: str) -> None:
        """Creates the partition folder and its ``.hoodie_partition_metadata`` once."""
        meta = Dfs.join(self.partition_path(partition), PARTITION_METADATA)
        if not self.dfs.exists(meta):
            self.dfs.mkdirs(self.partition_path(partition))
            depth = len(partition.split("/"))  # HoodiePartitionMetadata: the folders below the base path
            self.dfs.write_bytes(meta, f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n".encode())

    def read_base_file(self, rel_path: str, held: Held | None = None) -> pa.Table | Held:
        """The base file's rows; ``held``: the rows as the caller wrote them (the read is made
        and counted, the bytes are not decoded again)."""
        path = Dfs.join(self.base_path, rel_path)
        return self.dfs.read_parquet(path) if held is None else self.dfs.read_parquet_held(path, held)

    def write_base_file(
        self,
        rel_path: str,
        data: pa.Table | KeptRows,
        options: ParquetWriteOptions | None = None,
        key_filter: KeyFilter | None = None,
    ) -> int:
        """Writes ``data`` as a base file; ``key_filter``: its keys' bloom filter and range, when
        the writer has them (else worked out from ``data``)."""
        path = Dfs.join(self.base_path, rel_path)
        if not self.dfs.encodes_parquet:
            # it keeps the table: no dictionary to decide (a distinct count per column), no footer
            return self.dfs.write_parquet(path, data)
        options = options or ParquetWriteOptions()
        data = options.without_footer(data if isinstance(data, pa.Table) else data.to_arrow())
        # distinct in every row of a file group: its sequence numbers and its keys
        distinct = ("_hoodie_commit_seqno", "_hoodie_record_key", self.props.record_key_field)
        args = options.write_table_args(data, distinct)
        args["key_value_metadata"] = options.footer(
            data, self.props.table_name, self.props.record_key_field, META_COLUMNS, key_filter
        )
        return self.dfs.write_parquet(path, data, **args)
