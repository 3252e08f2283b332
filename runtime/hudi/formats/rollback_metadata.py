"""Rollback instants: the plan a rollback saves before it deletes anything, and the metadata its
completed instant publishes.

Sources (Apache Hudi 0.14.0, ``hudi-flink1.17-bundle-0.14.0``, and 1.1; the encodings checked
against the rollbacks of hudi-rs's test tables ``v6_nonpartitioned_rollback`` and
``v9_nonpartitioned_rollback``, written by Hudi's Spark writer):

* ``BaseHoodieTableServiceClient.rollbackFailedWrites`` (EAGER policy, from
  ``BaseHoodieWriteClient.startCommit`` at the Flink coordinator's ``startInstant``): the pending
  writers' instants, and the instants of rollbacks left pending, newest first; ``rollback``: a
  pending rollback of the instant is resumed with its own instant time, else a new instant time
  (``createNewInstantTime``) and ``HoodieTable.scheduleRollback``.
* ``BaseRollbackPlanActionExecutor.requestRollback``: ``<t>.rollback.requested`` holds the
  ``HoodieRollbackPlan`` (``instantToRollback``, ``RollbackRequests``); ``MarkerBasedRollbackStrategy``
  makes a request per CREATE/MERGE marker (the data file to delete, no file id) and per APPEND
  marker (``getRollbackRequestForAppend``: the file slice's latest log file, its size stubbed -1;
  the log file itself when the instant created the file group); ``ListingBasedRollbackStrategy``
  a request per partition with the files it lists.
* ``BaseRollbackActionExecutor.runRollback``: ``<t>.rollback.inflight`` (empty), the plan executed
  (``BaseRollbackHelper``: files deleted, command blocks appended), then ``finishRollback``: the
  rolled-back instant's inflight then requested files deleted (``deleteInflightAndRequestedInstant``),
  then ``<t>.rollback`` (layout 2: ``<t>_<completion>.rollback``) with the ``HoodieRollbackMetadata``
  (``TimelineMetadataUtils.convertRollbackMetadata``: ``startRollbackTime`` is the rollback's
  instant time, ``commitsRollback`` and ``instantsRollback`` the instant undone, per partition the
  files deleted and the log files given command blocks); the marker folder is deleted last.
* ``HoodieTable.rollbackInflightCompaction`` (``CompactionUtil.rollbackCompaction``): the same
  rollback of the compaction instant, which keeps its instant files (``deleteInstants`` false),
  then ``revertInstantFromInflightToRequested``: the compaction runs again under its own time.
* ``TimelineMetadataUtils.serializeRollbackPlan``/``serializeRollbackMetadata``: an Avro container
  file of one record (``HoodieRollbackPlan.avsc``, ``HoodieRollbackMetadata.avsc``,
  ``HoodieRollbackPartitionMetadata.avsc``, ``HoodieInstantInfo.avsc``, ``HoodieRollbackRequest.avsc``).

Differences: ``timeTakenInMillis`` is 0 (the lab's DFS calls of one step take no measured time,
and the simulator's traces stay deterministic); no metadata table is written.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import fastavro

from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.log_format import LogFileName

ROLLBACK = "rollback"
# --rollback-instants: release writes Hudi's rollback instants; none deletes without them
ROLLBACK_INSTANTS_CHOICES = ("release", "none")
AVRO_NAMESPACE = "org.apache.hudi.avro.model"
AVRO_STRING: JsonObject = {"type": "string", "avro.java.string": "String"}
_LONG_MAP: JsonObject = {"type": "map", "values": "long", "avro.java.string": "String"}


def rollback_instants_on(option: str) -> bool:
    """Whether a job with ``--rollback-instants option`` writes rollback instants."""
    return option != "none"


def nullable(t: Any) -> JsonObject:
    """An Avro field type that may be null, null by default (the instant files' schemas)."""
    return {"type": ["null", t], "default": None}


_INSTANT_INFO: JsonObject = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": AVRO_NAMESPACE,
    "fields": [{"name": "commitTime", "type": AVRO_STRING}, {"name": "action", "type": AVRO_STRING}],
}
_VERSION: JsonObject = {"name": "version", "type": ["int", "null"], "default": 1}

ROLLBACK_PLAN_SCHEMA: JsonObject = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": AVRO_NAMESPACE,
    "fields": [
        {"name": "instantToRollback", "doc": "Hoodie instant that needs to be rolled back", **nullable(_INSTANT_INFO)},
        {
            "name": "RollbackRequests",
            **nullable(
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieRollbackRequest",
                        "fields": [
                            {"name": "partitionPath", "type": AVRO_STRING},
                            {"name": "fileId", **nullable(AVRO_STRING)},
                            {"name": "latestBaseInstant", **nullable(AVRO_STRING)},
                            {
                                "name": "filesToBeDeleted",
                                "type": {"type": "array", "items": AVRO_STRING, "default": []},
                                "default": [],
                            },
                            {"name": "logBlocksToBeDeleted", **nullable(_LONG_MAP)},
                        ],
                    },
                }
            ),
        },
        _VERSION,
    ],
}

ROLLBACK_METADATA_SCHEMA: JsonObject = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": AVRO_NAMESPACE,
    "fields": [
        {"name": "startRollbackTime", "type": AVRO_STRING},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": AVRO_STRING}},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "avro.java.string": "String",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": AVRO_STRING},
                        {"name": "successDeleteFiles", "type": {"type": "array", "items": AVRO_STRING}},
                        {"name": "failedDeleteFiles", "type": {"type": "array", "items": AVRO_STRING}},
                        {"name": "rollbackLogFiles", **nullable(_LONG_MAP)},
                        {"name": "logFilesFromFailedCommit", **nullable(_LONG_MAP)},
                    ],
                },
            },
        },
        _VERSION,
        {
            "name": "instantsRollback",
            "type": {"type": "array", "items": _INSTANT_INFO, "default": []},
            "default": [],
        },
    ],
}
_PLAN = fastavro.parse_schema(ROLLBACK_PLAN_SCHEMA)
_METADATA = fastavro.parse_schema(ROLLBACK_METADATA_SCHEMA)


@dataclass
class RollbackRequest:
    """One ``HoodieRollbackRequest``: data files to delete, or a file slice whose log blocks of the
    instant get a ROLLBACK command block (``log_blocks``: log file path -> size, -1 when unknown)."""

    partition: str
    files_to_delete: list[str] = field(default_factory=list)
    file_id: str = ""
    latest_base_instant: str = ""
    log_blocks: dict[str, int] = field(default_factory=dict)


@dataclass
class RollbackPlan:
    """A ``HoodieRollbackPlan``: the instant undone (its time and action) and the requests."""

    instant: str
    action: str
    requests: list[RollbackRequest]


@dataclass
class PartitionRollbackStat:
    """A ``HoodieRollbackPartitionMetadata``: what the rollback did in one partition."""

    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    rollback_log_files: dict[str, int] = field(default_factory=dict)  # new log file -> its size
    log_files_from_failed_commit: dict[str, int] = field(default_factory=dict)


def partition_of(base_path: str, path: str) -> str:
    """The partition path of a data file's full path under ``base_path``."""
    rel = path[len(base_path) + 1 :] if path.startswith(base_path + "/") else path
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


@dataclass(frozen=True)
class LogRollback:
    """A log file of the undone instant: deleted (``rollback_log`` empty), or its file slice
    given a ROLLBACK command block in the new log file ``rollback_log`` (full paths)."""

    partition: str
    name: LogFileName
    path: str
    size: int
    rollback_log: str = ""


@dataclass
class RollbackWork:
    """What a rollback does, found before it does any of it: the base files it deletes (full
    paths), then its log files; ``scans_logs``: merge-on-read below version 8, where log files
    were read for the instant's blocks."""

    base_files: list[str]
    log_files: list[LogRollback] = field(default_factory=list)
    scans_logs: bool = False

    def requests(self, base_path: str, markers: bool) -> list[RollbackRequest]:
        """The plan's requests: with markers one per data file (``MarkerBasedRollbackStrategy``),
        without one per partition (``ListingBasedRollbackStrategy``); a log file deleted, or its
        slice's blocks (the log's size; -1 with markers, which do not carry it)."""
        by_partition: dict[str, list[str]] = {}
        for path in self.base_files:
            by_partition.setdefault(partition_of(base_path, path), []).append(path)
        if markers:
            out = [RollbackRequest(p, [f]) for p, files in by_partition.items() for f in files]
        else:
            out = [RollbackRequest(p, files) for p, files in by_partition.items()]
        for log in self.log_files:
            if not log.rollback_log:
                out.append(RollbackRequest(log.partition, [log.path]))
                continue
            size = -1 if markers else log.size
            out.append(RollbackRequest(log.partition, [], log.name.file_id, log.name.base_instant, {log.path: size}))
        return out


def avro_container(schema: Any, record: Mapping[str, Any]) -> bytes:
    """An Avro container file of one record: how ``TimelineMetadataUtils`` serializes every
    table service's plan and metadata."""
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [record])
    return buf.getvalue()


def one_avro_record(data: bytes) -> JsonObject:
    """The one record of an instant file's Avro container."""
    records = list(fastavro.reader(io.BytesIO(data)))
    if len(records) != 1 or not isinstance(records[0], dict):
        raise ValueError(f"an instant file holds {len(records)} Avro records, not one")
    return records[0]


def encode_plan(plan: RollbackPlan) -> bytes:
    """``<t>.rollback.requested``: the plan as Hudi's ``serializeRollbackPlan`` writes it."""
    requests = [
        {
            "partitionPath": r.partition,
            "fileId": r.file_id,
            "latestBaseInstant": r.latest_base_instant,
            "filesToBeDeleted": list(r.files_to_delete),
            "logBlocksToBeDeleted": dict(r.log_blocks),
        }
        for r in plan.requests
    ]
    record = {
        "instantToRollback": {"commitTime": plan.instant, "action": plan.action},
        "RollbackRequests": requests,
        "version": 1,
    }
    return avro_container(_PLAN, record)


def planned_instant(data: bytes) -> str:
    """The instant a saved plan (``<t>.rollback.requested``) rolls back ("" when it names none)."""
    info = one_avro_record(data).get("instantToRollback") or {}
    return str(info.get("commitTime") or "")


class RollbackPartitionMetadataDoc(TypedDict):
    """A ``HoodieRollbackPartitionMetadata``: a partition's files deleted, log files given a
    ROLLBACK block (with their sizes), and the failed commit's log files they roll back."""

    partitionPath: str
    successDeleteFiles: list[str]
    failedDeleteFiles: list[str]
    rollbackLogFiles: dict[str, int]
    logFilesFromFailedCommit: dict[str, int]


class InstantInfoDoc(TypedDict):
    """A ``HoodieInstantInfo``: an instant's time and action."""

    commitTime: str
    action: str


class RollbackMetadataDoc(TypedDict, total=False):
    """A ``HoodieRollbackMetadata`` (``<t>.rollback``)."""

    startRollbackTime: str
    timeTakenInMillis: int
    totalFilesDeleted: int
    commitsRollback: list[str]
    partitionMetadata: dict[str, RollbackPartitionMetadataDoc]
    version: int
    instantsRollback: list[InstantInfoDoc]


def metadata_record(
    rollback_time: str, plan: RollbackPlan, stats: dict[str, PartitionRollbackStat]
) -> RollbackMetadataDoc:
    """``TimelineMetadataUtils.convertRollbackMetadata``: the completed rollback's metadata."""
    partitions = {
        p: RollbackPartitionMetadataDoc(
            partitionPath=p,
            successDeleteFiles=s.deleted,
            failedDeleteFiles=s.failed,
            rollbackLogFiles=s.rollback_log_files,
            logFilesFromFailedCommit=s.log_files_from_failed_commit,
        )
        for p, s in sorted(stats.items())
    }
    return RollbackMetadataDoc(
        startRollbackTime=rollback_time,
        timeTakenInMillis=0,
        totalFilesDeleted=sum(len(s.deleted) for s in stats.values()),
        commitsRollback=[plan.instant],
        partitionMetadata=partitions,
        version=1,
        instantsRollback=[InstantInfoDoc(commitTime=plan.instant, action=plan.action)],
    )


def encode_metadata(record: RollbackMetadataDoc) -> bytes:
    """``<t>.rollback``: the metadata as Hudi's ``serializeRollbackMetadata`` writes it."""
    return avro_container(_METADATA, record)


def decode_metadata(data: bytes) -> RollbackMetadataDoc:
    return cast(RollbackMetadataDoc, one_avro_record(data))
