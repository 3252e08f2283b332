"""A Hudi table (copy-on-write or merge-on-read; version 6, 8 or 9) as the official readers expect it.

The rules are those of ``shared/design/TABLE_FORMAT.md`` (checked against ``hudi`` 0.5.0):
``hoodie.properties``; an instant goes ``<ts>.commit.requested`` -> ``<ts>.inflight`` -> parquet base
files -> ``<ts>.commit`` (last; it publishes the commit); base files carry the five meta columns and
are named ``<fileId>_<writeToken>_<ts>.parquet``; a parquet file never appears half-written.
Versions 8 and 9 keep the timeline in ``.hoodie/timeline/``, name a completed instant's file after
its completion time too and store its metadata as Avro (:mod:`runtime.hudi.timeline.table_version`).

The table is shared by the coordinator (timeline: start, commit, roll back) and the write tasks
(base files). Every access goes through :class:`runtime.core.dfs.Dfs`, so it is counted.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import threading
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pyarrow as pa

from runtime.core.config import HOODIE_TABLE_TYPE, JobConfig
from runtime.core.dfs import Dfs, DfsNotFound, Held, KeptRows
from runtime.core.errors import UserError
from runtime.core.messages import PartitionFiles, WriteStat
from runtime.data.columns import INTERNAL_COLUMNS
from runtime.hudi.formats import avro_schema
from runtime.hudi.formats.bloom_filter import KeyFilter
from runtime.hudi.formats.log_format import LogFileName, read_blocks, rollback_block
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.formats.rollback_metadata import (
    ROLLBACK,
    LogRollback,
    PartitionRollbackStat,
    RollbackPlan,
    RollbackWork,
    encode_plan,
    partition_of,
    planned_instant,
    rollback_instants_on,
)
from runtime.hudi.formats.rollback_metadata import encode_metadata as encode_rollback_metadata
from runtime.hudi.formats.rollback_metadata import metadata_record as rollback_metadata_record
from runtime.hudi.table.markers import APPEND, DirectWriteMarkers, data_file_of, markers_on
from runtime.hudi.timeline.table_version import TableVersion, table_version

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)

COPY_ON_WRITE, MERGE_ON_READ = "COPY_ON_WRITE", "MERGE_ON_READ"
COMMIT, DELTA_COMMIT, COMPACTION = "commit", "deltacommit", "compaction"
# HoodieActiveTimeline.getCommitsTimeline: the actions whose instants write data. A pending
# compaction's action is "compaction", so it is never among them (filterPendingExcludingCompaction);
# a completed one is a "commit" (HoodieInstant.getComparableAction maps compaction to commit)
WRITE_ACTIONS = (COMMIT, DELTA_COMMIT)

HOODIE = ".hoodie"
PARTITION_METADATA = ".hoodie_partition_metadata"
AUX = ".aux"
REQUESTED, INFLIGHT, COMPLETED = "requested", "inflight", "completed"

# Hudi's bucket index config key (``HoodieIndexConfig.BUCKET_INDEX_NUM_BUCKETS``). Hudi keeps it a
# write config; this lab records it in hoodie.properties at creation (see runtime.hudi.table.layout).
BUCKETS_KEY = "hoodie.bucket.index.num.buckets"

# layout 1: <ts>.<action>[.<state>]; layout 2 names a completed instant <ts>_<completion>.<action>
# a metadata table's compaction and rollback times carry a 3-digit suffix on version 6 (20 digits)
_INSTANT_FILE = re.compile(r"^(\d{14,20})(?:_(\d{14,17}))?\.([a-z_]+)(?:\.(requested|inflight))?$")
# parquet: the data table's; hfile: the metadata table's (its cleaner groups them too), whose
# compactions on version 6 are a delta commit's time + 001 (20 digits)
_BASE_FILE = re.compile(r"^(?P<file_id>[^_]+)_(?P<token>[^_]+)_(?P<instant>\d{14,20})\.(?:parquet|hfile)$")


class TableError(UserError, RuntimeError):
    """The table is missing, malformed or belongs to another configuration; the message says
    which, and what to do."""


@dataclass(frozen=True)
class TableProps:
    table_name: str
    record_key_field: str
    partition_field: str
    precombine_field: str
    database: str = "default"
    # buckets per partition (file groups of the bucket index); 0: not stated (not recorded/checked)
    num_buckets: int = 0
    table_type: str = COPY_ON_WRITE  # hoodie.table.type
    version: int = 6  # hoodie.table.version
    # a write config, not a table property (two props of one table compare equal whatever it
    # says): whether writes leave markers (--markers)
    markers: bool = field(default=False, compare=False)
    # likewise: whether a rollback publishes rollback instants (--rollback-instants)
    rollback_instants: bool = field(default=False, compare=False)
    # likewise: Hudi's write.precombine (--write-precombine: release, true, false)
    write_precombine: str = field(default="release", compare=False)
    # likewise: whether the writer keeps the metadata table (--metadata-table; None: leave it as
    # found, for a table opened by something other than a job)
    metadata_table: bool | None = field(default=None, compare=False)
    # likewise: the writer's --clean-retain-commits, --archive-min-commits, --archive-max-commits,
    # from which the metadata table's own cleaner and archiver take theirs (metadata_services)
    service_options: tuple[str, str, str] = field(default=("release", "release", "release"), compare=False)

    @classmethod
    def for_job(cls, cfg: JobConfig) -> TableProps:
        """The table a job writes: its key fields, its bucket count, its type and version (the
        job's ``--table-version``, resolved by ``prepare_job`` from the protocol's release)."""
        if not cfg.table_version.isdigit():
            raise TableError(
                f"--table-version {cfg.table_version} is not resolved to a number: validate the job "
                "(runtime.job.prepare.prepare_job) before making its table"
            )
        return cls(
            cfg.table_name,
            cfg.key_field,
            cfg.partition_field,
            cfg.precombine_field,
            num_buckets=cfg.num_buckets,
            table_type=HOODIE_TABLE_TYPE[cfg.table_type],
            version=int(cfg.table_version),
            markers=markers_on(cfg.markers),
            rollback_instants=rollback_instants_on(cfg.rollback_instants),
            write_precombine=cfg.write_precombine,
            # unresolved (release, before prepare_job): the metadata table is left as found
            metadata_table=None if cfg.metadata_table == "release" else cfg.metadata_table == "true",
            service_options=(cfg.clean_retain_commits, cfg.archive_min_commits, cfg.archive_max_commits),
        )

    @property
    def rules(self) -> TableVersion:
        return table_version(self.version)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def precombines_flush(self) -> bool:
        """Whether a flush keeps one record per key (``write.precombine``): Hudi's Flink
        ``HoodieTableFactory.setupWriteOptions`` turns it on for a copy-on-write upsert only."""
        if self.write_precombine == "release":
            return not self.merge_on_read
        return self.write_precombine == "true"

    @property
    def write_action(self) -> str:
        """The action of a writer's instant (``CommitUtils.getCommitActionType``): a delta commit
        on merge-on-read, a commit on copy-on-write."""
        return DELTA_COMMIT if self.merge_on_read else COMMIT

    def properties(self) -> dict[str, str]:
        checksum = zlib.crc32(f"{self.database}.{self.table_name}".encode())
        buckets = {BUCKETS_KEY: str(self.num_buckets)} if self.num_buckets > 0 else {}
        return {
            "hoodie.table.name": self.table_name,
            "hoodie.table.type": self.table_type,
            "hoodie.table.version": str(self.version),
            "hoodie.timeline.layout.version": str(self.rules.timeline_layout),
            "hoodie.table.partition.fields": self.partition_field,
            "hoodie.table.recordkey.fields": self.record_key_field,
            self.rules.ordering_field_key: self.precombine_field,
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.datasource.write.hive_style_partitioning": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.timeline.timezone": "UTC",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
            "hoodie.database.name": self.database,
            "hoodie.archivelog.folder": "archived",
            **self.rules.extra_properties(),
            **buckets,
            "hoodie.table.checksum": str(checksum),  # Hudi writes it last
        }


@dataclass(frozen=True)
class Instant:
    ts: str
    action: str  # "commit", "rollback", ...
    state: str  # requested / inflight / completed
    completion: str | None = None  # a completed instant's completion time (timeline layout 2)


def write_stats(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every write stat of a commit metadata document, partition by partition."""
    return [s for v in doc.get("partitionToWriteStats", {}).values() for s in v]


@dataclass(frozen=True)
class CompletedInstant:
    """A completed instant and its commit metadata (Hudi's HoodieCommitMetadata document)."""

    instant: str
    compaction: bool
    doc: dict[str, Any]

    @property
    def stats(self) -> list[dict[str, Any]]:
        return write_stats(self.doc)


class CommitSummary(TypedDict):
    """A writers' commit: its instant, the checkpoint it committed, the rows it wrote."""

    instant: str
    checkpoint: int
    rows: int


class CompactionSummary(TypedDict):
    """A completed compaction: the file groups it compacted, the rows of their new base files,
    the log files it read and the bytes it wrote."""

    instant: str
    file_groups: int
    rows: int
    log_files_compacted: int
    bytes_written: int


def commit_summaries(done: Iterable[CompletedInstant]) -> list[CommitSummary]:
    """The writers' commits: a job's commits, whichever coordinator made them."""
    return [
        CommitSummary(
            instant=c.instant,
            checkpoint=int(c.doc.get("extraMetadata", {}).get("checkpoint.id", -1)),
            rows=sum(s["numInserts"] + s["numUpdateWrites"] for s in c.stats),
        )
        for c in done
        if not c.compaction
    ]


def compaction_summaries(done: Iterable[CompletedInstant]) -> list[CompactionSummary]:
    """The completed compactions."""
    return [
        CompactionSummary(
            instant=c.instant,
            file_groups=len(c.stats),
            rows=sum(s["numWrites"] for s in c.stats),
            log_files_compacted=sum(s.get("totalLogFilesCompacted", 0) for s in c.stats),
            bytes_written=sum(s["totalWriteBytes"] for s in c.stats),
        )
        for c in done
        if c.compaction
    ]


def files_written(done: Iterable[CompletedInstant]) -> dict[str, int]:
    """What the instants wrote, from their metadata: base files and log files, and their bytes;
    a compaction's base files are counted apart. The file versions a commit lists: a version a
    later flush of the same instant replaced is not."""
    out = dict.fromkeys(("base_files", "log_files", "bytes", "compaction_base_files", "compaction_bytes"), 0)
    for c in done:
        for s in c.stats:
            size = int(s.get("totalWriteBytes") or 0)
            if c.compaction:
                out["compaction_base_files"] += 1
                out["compaction_bytes"] += size
            elif LogFileName.parse(str(s["path"]).rsplit("/", 1)[-1]) is not None:
                out["log_files"] += 1
            else:
                out["base_files"] += 1
            out["bytes"] += size
    return out


class Timeline:
    """The instants of ``.hoodie`` as read by one listing (Hudi's active timeline).

    One instant per (time, comparable action): ``<C>.compaction.requested``, ``.inflight`` and the
    completed ``<C>.commit`` are states of one compaction (``HoodieInstant.getComparableAction``),
    whose requested file stays on the timeline with the plan after it completes."""

    def __init__(self, instants: Iterable[Instant]) -> None:
        latest: dict[tuple[str, str], Instant] = {}
        order = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}
        self.compactions: set[str] = set()  # times of every compaction, pending or completed
        self.completions: dict[str, str] = {}  # requested time -> completion time (layout 2)
        for inst in instants:
            if inst.completion is not None:
                self.completions[inst.ts] = inst.completion
            if inst.action == COMPACTION:
                self.compactions.add(inst.ts)
            key = (inst.ts, COMMIT if inst.action == COMPACTION else inst.action)
            if key not in latest or order[inst.state] > order[latest[key].state]:
                latest[key] = inst
        self.instants = sorted(latest.values(), key=lambda i: (i.ts, i.action))
        data = [i for i in self.instants if i.action in WRITE_ACTIONS or i.ts in self.compactions]
        self._committed = {i.ts for i in data if i.state == COMPLETED and i.action in WRITE_ACTIONS}
        self._first_data = data[0].ts if data else None

    def commits(self) -> list[Instant]:
        """The commits timeline: commits and delta commits, completed compactions among them."""
        return [i for i in self.instants if i.action in WRITE_ACTIONS]

    def completed_instants(self) -> list[str]:
        """Every completed instant of the commits timeline: writers' commits and compactions
        (what makes a file slice committed)."""
        return [i.ts for i in self.commits() if i.state == COMPLETED]

    def completed_commits(self) -> list[str]:
        """The writers' completed commits (delta commits on merge-on-read), compactions left out."""
        return [i.ts for i in self.commits() if i.state == COMPLETED and i.ts not in self.compactions]

    def completed_compactions(self) -> list[str]:
        return [i.ts for i in self.commits() if i.state == COMPLETED and i.ts in self.compactions]

    def pending_commits(self) -> list[str]:
        return [i.ts for i in self.commits() if i.state != COMPLETED]

    def pending_compactions(self, state: str | None = None) -> list[str]:
        """Compactions not completed (``filterPendingCompactionTimeline``), of one state if given."""
        return [i.ts for i in self.instants if i.action == COMPACTION and (state is None or i.state == state)]

    def delta_commits_since_compaction(self, *, completed_only: bool = False) -> int:
        """``CompactionUtils.getDeltaCommitsSinceLatestCompaction``: the delta commits, in any
        state, after the latest completed compaction (all of them when none completed);
        ``completed_only``: the completed ones (Hudi 1.x ``getCompletedDeltaCommitsSinceLatestCompaction``)."""
        done = self.completed_compactions()
        after = done[-1] if done else ""
        return sum(
            1
            for i in self.instants
            if i.action == DELTA_COMMIT and i.ts > after and (not completed_only or i.state == COMPLETED)
        )

    def contains_or_before_start(self, ts: str) -> bool:
        """``HoodieDefaultTimeline.containsOrBeforeTimelineStarts``: whether a file of instant
        ``ts`` is committed: a completed instant of the commits timeline, or one before the first
        data instant in any state (the archiver moved it off the timeline; it never archives past
        a pending instant)."""
        return ts in self._committed or (self._first_data is not None and ts < self._first_data)

    def last_pending(self) -> str | None:
        pending = self.pending_commits()
        return pending[-1] if pending else None

    def last_completed(self) -> str | None:
        done = self.completed_commits()
        return done[-1] if done else None

    def is_completed(self, ts: str) -> bool:
        return any(i.ts == ts and i.state == COMPLETED for i in self.commits())

    def latest_ts(self) -> str | None:
        """The latest time on the timeline, completion times included."""
        times = [*(i.ts for i in self.instants[-1:]), *self.completions.values()]
        return max(times) if times else None

    def completion_of(self, ts: str) -> str | None:
        """A completed instant's completion time (None before layout 2, or not completed)."""
        return self.completions.get(ts)


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties (the subset Hudi writes: key=value lines, # comments, \\: escapes)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip().replace("\\:", ":").replace("\\=", "=")
    return props


def format_instant(t: float) -> str:
    """Hudi instant time ``yyyyMMddHHmmssSSS`` in UTC."""
    d = _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc)
    return d.strftime("%Y%m%d%H%M%S") + f"{d.microsecond // 1000:03d}"


def bump_instant(ts: str) -> str:
    """The instant one millisecond later (keeps instants strictly increasing)."""
    d = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.timezone.utc)
    d += _dt.timedelta(milliseconds=int(ts[14:17] or 0) + 1)
    return d.strftime("%Y%m%d%H%M%S") + f"{d.microsecond // 1000:03d}"


@functools.lru_cache(maxsize=4096)
def _instant_of_file(name: str) -> Instant | None:
    """The instant a timeline file stands for (None: not an instant file). Cached: the coordinator
    lists the timeline at every instant, and the names repeat."""
    m = _INSTANT_FILE.match(name)
    if not m:
        return None
    ts, completion, action, state = m.group(1), m.group(2), m.group(3), m.group(4)
    if completion is not None and state is not None:
        return None  # only a completed instant carries its completion time
    if action == "inflight" and state is None:  # <ts>.inflight is a commit's inflight
        return Instant(ts, "commit", INFLIGHT)
    return Instant(ts, action, state or COMPLETED, completion)


@functools.lru_cache(maxsize=65536)
def file_group_id(table_name: str, partition: str, bucket: int) -> str:
    """Bucket-index file id: the bucket number in the first 8 characters (as Hudi's
    BucketIdentifier does), the rest a stable UUID, ``-0`` suffix; no ``_`` anywhere."""
    stable = uuid.uuid5(uuid.NAMESPACE_URL, f"commitlab/{table_name}/{partition}/{bucket}")
    return f"{bucket:08d}{str(stable)[8:]}-0"


def base_file_name(file_id: str, write_token: str, instant: str) -> str:
    return f"{file_id}_{write_token}_{instant}.parquet"


@functools.lru_cache(maxsize=65536)
def parse_base_file_name(name: str) -> tuple[str, str, str] | None:
    """(file_id, write_token, instant) of a base file name, or None if it is not one. Cached:
    the cleaner parses every file of a partition at every commit, and the names repeat."""
    m = _BASE_FILE.match(name)
    return (m["file_id"], m["token"], m["instant"]) if m else None


def avro_schema_json(schema: pa.Schema, table_name: str) -> str:
    """The Avro schema of the data columns (``extraMetadata.schema``) as Hudi's Spark writer converts
    them (:mod:`runtime.hudi.formats.avro_schema`); the meta and internal columns left out."""
    return avro_schema.avro_schema_json(schema, table_name, skip=META_COLUMNS + INTERNAL_COLUMNS)


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


def stat_to_json(s: WriteStat) -> dict[str, Any]:
    delta = (
        # HoodieDeltaWriteStat's own fields (a merge-on-read write)
        {"logVersion": s.log_version, "logOffset": 0, "baseFile": s.base_file, "logFiles": list(s.log_files)}
        if s.log_version
        else {}
    )
    return {
        "fileId": s.file_id,
        "path": s.path,
        "cdcStats": None,
        "prevCommit": s.prev_commit,
        "numWrites": s.num_writes,
        "numDeletes": 0,
        "numUpdateWrites": s.num_update_writes,
        "numInserts": s.num_inserts,
        "totalWriteBytes": s.total_write_bytes,
        "totalWriteErrors": 0,
        "tempPath": None,
        "partitionPath": s.partition,
        "totalLogRecords": s.log_records,
        "totalLogFilesCompacted": s.log_files_compacted,
        "totalLogSizeCompacted": s.log_size_compacted,
        "totalUpdatedRecordsCompacted": s.updated_records_compacted,
        "totalLogBlocks": 0,
        "totalCorruptLogBlock": 0,
        "totalRollbackBlocks": 0,
        "fileSizeInBytes": s.file_size,
        "minEventTime": None,
        "maxEventTime": None,
        **delta,
    }


def commit_metadata_doc(
    stats: list[WriteStat], extra: dict[str, str], *, compacted: bool = False, operation: str = "UPSERT"
) -> dict[str, Any]:
    """A commit's metadata document (Hudi's HoodieCommitMetadata), before the table version encodes it."""
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for s in stats:
        by_partition.setdefault(s.partition, []).append(stat_to_json(s))
    return {
        "partitionToWriteStats": by_partition,
        "compacted": compacted,
        "extraMetadata": extra,
        "operationType": operation,
    }


class HudiTable:
    """One Hudi table (copy-on-write or merge-on-read, version 6, 8 or 9) on a :class:`Dfs`."""

    _instant_lock = threading.Lock()

    def __init__(self, dfs: Dfs, base_path: str, props: TableProps) -> None:
        self.dfs = dfs
        self.base_path = base_path.rstrip("/")
        self.props = props
        self.hoodie = Dfs.join(self.base_path, HOODIE)
        self.version = props.rules
        # the active timeline's folder: .hoodie, or .hoodie/timeline from table version 8
        folder = self.version.timeline_folder
        self.timeline_dir = Dfs.join(self.hoodie, folder) if folder else self.hoodie
        self._last_issued: str | None = None

    def with_dfs(self, dfs: Dfs) -> HudiTable:
        """The same table seen through another role's DFS view."""
        t = HudiTable(dfs, self.base_path, self.props)
        t._last_issued = self._last_issued
        return t

    # -- creation ------------------------------------------------------------------------------

    @classmethod
    def create_or_open(cls, dfs: Dfs, base_path: str, props: TableProps) -> HudiTable:
        """Creates the table, or opens it after checking it was made with the same keys."""
        table = cls(dfs, base_path, props)
        props_path = Dfs.join(table.hoodie, "hoodie.properties")
        existing = cls.check_compatible(dfs, base_path, props)
        if not dfs.exists(props_path):
            for sub in (table.hoodie, table.timeline_dir, Dfs.join(table.hoodie, AUX), *table._archive_dirs()):
                dfs.mkdirs(sub)
            body = "#Properties saved by commitlab\n" + "".join(f"{k}={v}\n" for k, v in props.properties().items())
            dfs.write_bytes(props_path, body.encode())
        table.sync_metadata_table(existing)
        return table

    def sync_metadata_table(self, properties: dict[str, str]) -> None:
        """A writer with the metadata table off (``props.metadata_table`` False) deletes the one
        its ``properties`` declare (``HoodieTable.maybeDeleteMetadataTable``, decided by
        ``hoodie.table.metadata.partitions``); one with it on initialises it at its first commit
        (:meth:`publish`), when the instant's clock is at hand."""
        if self.props.metadata_table is not False or not properties.get("hoodie.table.metadata.partitions"):
            return
        from runtime.hudi.client.metadata_writer import MetadataTableWriter  # it builds on this module

        MetadataTableWriter(self).delete()

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
        return {e.name: i for e in entries if (i := _instant_of_file(e.name)) is not None}

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

    def completion_time(self, instant: str, now: float | None) -> str | None:
        """The completion time of ``instant`` completing now (layout 2; None before): a fresh
        instant time after the instant itself (``HoodieActiveTimeline`` takes it from the same
        generator). Without a clock, the time just after everything issued."""
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

    def commit(
        self,
        instant: str,
        stats: list[WriteStat],
        extra: dict[str, str],
        *,
        empty: bool = False,
        now: float | None = None,
    ) -> None:
        """Writes ``<instant>.commit``: the last step, which publishes the instant. An instant with
        no write stats is committed only when asked (``empty``: hoodie.allow.empty.commit, the
        Kafka Connect sink): by mistake it would publish files no stat lists. ``now``: the clock
        the completion time comes from (layout 2)."""
        if not stats and not empty:
            raise TableError(
                f"refusing to commit {instant} with no write stats: an empty commit is committed only "
                "with hoodie.allow.empty.commit (--allow-empty-commit)"
            )
        if self.props.markers:
            self._reconcile_against_markers(instant, stats)
        self.publish(instant, self.props.write_action, commit_metadata_doc(stats, extra), now)
        if self.props.markers:  # BaseHoodieWriteClient.postCommit, after the completed instant file
            self.write_markers(instant).delete_folder()

    def _reconcile_against_markers(self, instant: str, stats: list[WriteStat]) -> None:
        """``HoodieTable.finalizeWrite`` -> ``reconcileAgainstMarkers``, before the commit file: a
        data file the instant's markers name that no write stat lists (a flush whose status never
        reached the coordinator) is deleted, so the commit publishes only what it lists."""
        listed = {s.path for s in stats}
        for path in self.write_markers(instant).created_and_merged_data_paths():
            if path not in listed:
                self.dfs.delete(Dfs.join(self.base_path, path))

    def publish(self, instant: str, action: str, doc: dict[str, Any], now: float | None) -> None:
        """Writes a completed instant's file with its metadata, as the table version names and encodes it;
        with the metadata table on, its delta commit of the instant's files first (``writeTableMetadata``)."""
        if self.props.metadata_table:
            from runtime.hudi.client.metadata_writer import MetadataTableWriter, commit_changes

            MetadataTableWriter(self).update(instant, commit_changes(doc), now)
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

    def read_commit_metadata(self, instant: str, timeline: Timeline | None = None) -> dict[str, Any]:
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

    def rollback(self, instant: str, data_files: Iterable[str] = (), *, now: float | None = None) -> list[str]:
        """Rolls back an uncommitted writer's instant: its data files deleted (merge-on-read: log
        files deleted or given a ROLLBACK command block), then its inflight and requested files.

        ``data_files`` are paths relative to the base path. With markers (``props.markers``) the
        instant's markers name the rest, and the marker folder goes last (Hudi's
        ``MarkerBasedRollbackStrategy``); without, files of the instant found by listing their
        partitions (every partition when none is named) are deleted too. With rollback instants
        (``props.rollback_instants``) the rollback is published as Hudi does
        (:mod:`runtime.hudi.formats.rollback_metadata`). ``now``: the clock the rollback's instant time comes from.
        Returns what was deleted. Refuses a committed instant.
        """
        if self.is_committed(instant):
            raise TableError(f"cannot roll back {instant}: it is committed")
        work = self._rollback_work(instant, list(data_files))
        action = self.props.write_action
        inflight = f"{instant}.inflight" if action == COMMIT else f"{instant}.{action}.inflight"
        return self.run_rollback(
            RollbackPlan(instant, action, work.requests(self.base_path, self.props.markers)),
            work,
            instant_files=(inflight, f"{instant}.{action}.requested"),
            markers=self.props.markers,
            now=now,
        )

    def _rollback_work(self, instant: str, data_files: list[str]) -> RollbackWork:
        """What rolling back a writer's instant deletes and marks, found before any of it is done."""
        marked = [data_file_of(m) for m in self.write_markers(instant).all_markers()] if self.props.markers else []
        partitions = {p.rsplit("/", 1)[0] for p in [*data_files, *(f for f, _ in marked)] if "/" in p}
        data_files += [f for f, io_type in marked if io_type != APPEND]  # an APPEND marker names a slice
        if not data_files and not self.props.markers:  # nothing named: look in every partition
            partitions = set(self.partitions())
        # a log file named by a write stat is rolled back below (deleted or marked), not here
        targets = {Dfs.join(self.base_path, p) for p in data_files if LogFileName.parse(p.rsplit("/", 1)[-1]) is None}
        for part in () if self.props.markers else sorted(partitions):
            try:
                for e in self.dfs.list_dir(Dfs.join(self.base_path, part)):
                    parsed = parse_base_file_name(e.name)
                    if parsed and parsed[2] == instant:
                        targets.add(e.path)
            except DfsNotFound:
                continue
        work = RollbackWork(sorted(targets))
        if self.props.merge_on_read:
            work.log_files = self._log_rollback_work(instant, partitions)
            work.scans_logs = not self.version.logs_per_instant
        return work

    def _log_rollback_work(self, instant: str, partitions: Iterable[str]) -> list[LogRollback]:
        """Hudi 0.14/0.15's rollback of a delta commit (``MarkerBasedRollbackStrategy``,
        ``BaseRollbackHelper``): a log file of a file group the instant created (its base instant
        is the instant) is deleted; a file group it appended to gets a ROLLBACK command block
        naming the instant, in a new log version. A log file here holds one flush, so the
        instant's blocks are found by reading each log file's first block header.

        From table version 8 a log file is named after the instant that wrote it, so the
        instant's log files are deleted and nothing else is read or marked (Hudi 1.x)."""
        out: list[LogRollback] = []
        per_instant = self.version.logs_per_instant
        for part in sorted(partitions):
            try:
                entries = self.dfs.list_dir(Dfs.join(self.base_path, part))
            except DfsNotFound:
                continue
            logs = [(name, e) for e in entries if (name := LogFileName.parse(e.name)) is not None]
            versions: dict[tuple[str, str], int] = {}
            for name, _ in logs:
                key = (name.file_id, name.base_instant)
                versions[key] = max(versions.get(key, 0), name.version)
            for name, e in sorted(logs, key=lambda x: x[1].path):
                if name.base_instant == instant:
                    out.append(LogRollback(part, name, e.path, e.size))
                    continue
                if per_instant or not any(b.instant == instant for b in self._blocks(e.path)):
                    continue
                key = (name.file_id, name.base_instant)
                versions[key] += 1
                marker = LogFileName(name.file_id, name.base_instant, versions[key], name.write_token)
                out.append(LogRollback(part, name, e.path, e.size, Dfs.join(self.base_path, part, str(marker))))
        return out

    def _blocks(self, path: str) -> Iterable[Any]:
        return read_blocks(self.dfs.read_bytes(path), path)

    def run_rollback(
        self,
        plan: RollbackPlan,
        work: RollbackWork,
        *,
        instant_files: Iterable[str],
        markers: bool,
        now: float | None,
    ) -> list[str]:
        """Does a rollback's ``work`` (``BaseRollbackActionExecutor.runRollback``): with rollback
        instants ``<t>.rollback.requested`` (the plan) and ``.inflight`` first; then the data files;
        then the undone instant's ``instant_files`` (``deleteInflightAndRequestedInstant``); then
        the completed ``<t>.rollback``; the instant's marker folder last. Returns what was deleted."""
        rollback_time = self._begin_rollback(plan, now) if self.props.rollback_instants else None
        stats: dict[str, PartitionRollbackStat] = {}
        for path in work.base_files:
            self.dfs.delete(path)
            stats.setdefault(partition_of(self.base_path, path), PartitionRollbackStat()).deleted.append(path)
        deleted = list(work.base_files)
        if work.scans_logs:  # the ROLLBACK blocks' instant time
            block_time = rollback_time or bump_instant(max(plan.instant, self.timeline().latest_ts() or plan.instant))
        for log in work.log_files:
            stat = stats.setdefault(log.partition, PartitionRollbackStat())
            if not log.rollback_log:
                self.dfs.delete(log.path)
                deleted.append(log.path)
                stat.deleted.append(log.path)
                continue
            block = rollback_block(block_time, plan.instant)
            self.dfs.write_bytes(log.rollback_log, block)
            stat.rollback_log_files[log.rollback_log] = len(block)
            stat.log_files_from_failed_commit[log.path] = log.size
        for name in instant_files:
            self.dfs.delete(self.timeline_file(name))
        if self.props.metadata_table:
            self._rollback_metadata_table(plan.instant, rollback_time, stats, now)
        if rollback_time is not None:
            record = rollback_metadata_record(rollback_time, plan, stats)
            name = self.version.completed_file(rollback_time, self.completion_time(rollback_time, now), ROLLBACK)
            self.dfs.write_bytes(self.timeline_file(name), encode_rollback_metadata(record))
        if markers:
            self.write_markers(plan.instant).delete_folder()
        return deleted

    def _rollback_metadata_table(
        self, instant: str, rollback_time: str | None, stats: dict[str, PartitionRollbackStat], now: float | None
    ) -> None:
        """``HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata)``, before the completed
        rollback: the undone instant's delta commit goes, and one at the rollback's time marks
        the deleted files and lists the log files the rollback wrote."""
        from runtime.hudi.client.metadata_writer import MetadataTableWriter, deleted_and_written

        writer = MetadataTableWriter(self)
        writer.undo(instant)
        if rollback_time is not None:
            deleted = [p for s in stats.values() for p in s.deleted]
            written = {p: n for s in stats.values() for p, n in s.rollback_log_files.items()}
            writer.update(rollback_time, deleted_and_written(self.base_path, deleted, written), now)

    def _begin_rollback(self, plan: RollbackPlan, now: float | None) -> str:
        """``BaseHoodieTableServiceClient.rollback``: the rollback's instant time, a pending
        rollback of the same instant resumed under its own (its requested file kept); else a new
        one, its plan saved as ``<t>.rollback.requested``; then ``<t>.rollback.inflight``."""
        timeline = self.timeline()
        pending = {i: (ts, state) for ts, (i, state) in self.pending_rollbacks(timeline).items()}
        if plan.instant in pending:
            rollback_time, state = pending[plan.instant]
        else:
            rollback_time, state = self._next_instant_time(now, timeline), REQUESTED
            self.dfs.write_bytes(self.timeline_file(f"{rollback_time}.{ROLLBACK}.requested"), encode_plan(plan))
        if state == REQUESTED:
            self.dfs.create_empty(self.timeline_file(f"{rollback_time}.{ROLLBACK}.inflight"))
        return rollback_time

    def _next_instant_time(self, now: float | None, timeline: Timeline) -> str:
        """A new instant time from ``now``; without a clock, the time just after everything issued."""
        if now is not None:
            return self.new_instant_time(now, timeline)
        floor = max(x for x in ("0" * 17, self._last_issued, timeline.latest_ts()) if x)
        self._last_issued = bump_instant(floor)
        return self._last_issued

    def pending_rollbacks(self, timeline: Timeline) -> dict[str, tuple[str, str]]:
        """Rollback time -> (the instant its saved plan undoes, its state) of every rollback
        requested or inflight on ``timeline`` (one a crash interrupted)."""
        out = {}
        for i in timeline.instants:
            if i.action == ROLLBACK and i.state != COMPLETED:
                plan = self.dfs.read_bytes(self.timeline_file(f"{i.ts}.{ROLLBACK}.requested"))
                out[i.ts] = (planned_instant(plan), i.state)
        return out

    def failed_writes(self, timeline: Timeline) -> list[str]:
        """The instants ``rollbackFailedWrites`` rolls back: the writers' pending instants and
        those of rollbacks left pending; newest first with rollback instants (Hudi's order),
        oldest first without (this lab before them)."""
        if not self.props.rollback_instants:
            return timeline.pending_commits()
        undone = {i for i, _ in self.pending_rollbacks(timeline).values() if i}
        return sorted({*timeline.pending_commits(), *undone}, reverse=True)

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
