"""Hudi's clean documents (``hudi-common`` Avro models, ``TimelineMetadataUtils``): the
``HoodieCleanerPlan`` of ``<t>.clean.requested`` and ``.inflight`` and the ``HoodieCleanMetadata``
of the completed ``<t>.clean``, with the schemas Hudi 0.14 (table version 6) and 1.x (8, 9: with
``extraMetadata``) embed. The cleaner that plans and runs a clean is
:mod:`runtime.hudi.client.cleaner`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict, cast

import fastavro

from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.rollback_metadata import (
    AVRO_NAMESPACE,
    AVRO_STRING,
    avro_container,
    nullable,
    one_avro_record,
)

CLEAN = "clean"
COMPLETED_STATE = "COMPLETED"  # HoodieInstant.State.COMPLETED, as the plan names its instant
KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
CLEAN_PLAN_VERSION = 2  # CleanPlanner.LATEST_CLEAN_PLAN_VERSION
CLEAN_METADATA_VERSION = 2  # CleanerUtils.CLEAN_METADATA_VERSION_2
_STRING_MAP: JsonObject = {"type": "map", "values": AVRO_STRING, "avro.java.string": "String"}
_EXTRA_METADATA: JsonObject = {"name": "extraMetadata", **nullable(_STRING_MAP)}


def _plan_schema(extra_metadata: bool) -> JsonObject:
    action_instant = {
        "type": "record",
        "name": "HoodieActionInstant",
        "fields": [{"name": n, "type": AVRO_STRING} for n in ("timestamp", "action", "state")],
    }
    file_info = {
        "type": "record",
        "name": "HoodieCleanFileInfo",
        "fields": [
            {"name": "filePath", **nullable(AVRO_STRING)},
            {"name": "isBootstrapBaseFile", **nullable("boolean")},
        ],
    }
    per_partition = {"type": "map", "values": {"type": "array", "items": file_info}, "avro.java.string": "String"}
    deprecated = {"type": "map", "values": {"type": "array", "items": AVRO_STRING}, "avro.java.string": "String"}
    fields = [
        {"name": "earliestInstantToRetain", **nullable(action_instant)},
        {"name": "lastCompletedCommitTimestamp", "type": AVRO_STRING, "default": ""},
        {"name": "policy", "type": AVRO_STRING},
        {"name": "filesToBeDeletedPerPartition", **nullable(deprecated)},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "filePathsToBeDeletedPerPartition", **nullable(per_partition)},
        {"name": "partitionsToBeDeleted", **nullable({"type": "array", "items": AVRO_STRING})},
    ]
    return {
        "type": "record",
        "name": "HoodieCleanerPlan",
        "namespace": AVRO_NAMESPACE,
        "fields": fields + ([_EXTRA_METADATA] if extra_metadata else []),
    }


def _metadata_schema(extra_metadata: bool) -> JsonObject:
    strings = {"type": "array", "items": AVRO_STRING}
    partition = {
        "type": "record",
        "name": "HoodieCleanPartitionMetadata",
        "fields": [
            {"name": "partitionPath", "type": AVRO_STRING},
            {"name": "policy", "type": AVRO_STRING},
            {"name": "deletePathPatterns", "type": strings},
            {"name": "successDeleteFiles", "type": strings},
            {"name": "failedDeleteFiles", "type": strings},
            {"name": "isPartitionDeleted", **nullable("boolean")},
        ],
    }
    fields = [
        {"name": "startCleanTime", "type": AVRO_STRING},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": AVRO_STRING},
        {"name": "lastCompletedCommitTimestamp", "type": AVRO_STRING, "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": partition, "avro.java.string": "String"}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "bootstrapPartitionMetadata",
            **nullable({"type": "map", "values": "HoodieCleanPartitionMetadata", "avro.java.string": "String"}),
        },
    ]
    return {
        "type": "record",
        "name": "HoodieCleanMetadata",
        "namespace": AVRO_NAMESPACE,
        "fields": fields + ([_EXTRA_METADATA] if extra_metadata else []),
    }


# Hudi 0.14 (table version 6) and 1.x (8, 9: with extraMetadata)
CLEANER_PLAN_SCHEMA = {v: _plan_schema(v) for v in (False, True)}
CLEAN_METADATA_SCHEMA = {v: _metadata_schema(v) for v in (False, True)}
_PARSED_PLAN = {v: fastavro.parse_schema(s) for v, s in CLEANER_PLAN_SCHEMA.items()}
_PARSED_METADATA = {v: fastavro.parse_schema(s) for v, s in CLEAN_METADATA_SCHEMA.items()}


@dataclass
class CleanPlan:
    """A ``HoodieCleanerPlan``: the earliest commit kept (its time and action), the latest
    completed commit when planned, and per partition the full paths of the files to delete."""

    earliest_to_retain: str
    earliest_action: str
    last_completed: str
    files: dict[str, list[str]] = field(default_factory=dict)


def encode_plan(plan: CleanPlan, *, extra_metadata: bool) -> bytes:
    """``<t>.clean.requested`` and ``.inflight``: ``TimelineMetadataUtils.serializeCleanerPlan``."""
    record = {
        "earliestInstantToRetain": {
            "timestamp": plan.earliest_to_retain,
            "action": plan.earliest_action,
            "state": COMPLETED_STATE,
        },
        "lastCompletedCommitTimestamp": plan.last_completed,
        "policy": KEEP_LATEST_COMMITS,
        "filesToBeDeletedPerPartition": {},
        "version": CLEAN_PLAN_VERSION,
        "filePathsToBeDeletedPerPartition": {
            p: [{"filePath": f, "isBootstrapBaseFile": False} for f in files] for p, files in sorted(plan.files.items())
        },
        "partitionsToBeDeleted": [],
    }
    return avro_container(_PARSED_PLAN[extra_metadata], record)


def decode_plan(data: bytes) -> CleanPlan:
    record = one_avro_record(data)
    earliest = record.get("earliestInstantToRetain") or {}
    files = {
        p: [str(f.get("filePath") or "") for f in infos]
        for p, infos in (record.get("filePathsToBeDeletedPerPartition") or {}).items()
    }
    return CleanPlan(
        str(earliest.get("timestamp") or ""),
        str(earliest.get("action") or ""),
        str(record.get("lastCompletedCommitTimestamp") or ""),
        files,
    )


class CleanPartitionMetadataDoc(TypedDict):
    """A ``HoodieCleanPartitionMetadata``: a partition's files planned, deleted and not deleted."""

    partitionPath: str
    policy: str
    deletePathPatterns: list[str]
    successDeleteFiles: list[str]
    failedDeleteFiles: list[str]
    isPartitionDeleted: bool


class CleanMetadataDoc(TypedDict, total=False):
    """A ``HoodieCleanMetadata`` (``<t>.clean``); read back, absent optional fields may be None."""

    startCleanTime: str
    timeTakenInMillis: int
    totalFilesDeleted: int
    earliestCommitToRetain: str
    lastCompletedCommitTimestamp: str
    partitionMetadata: dict[str, CleanPartitionMetadataDoc]
    version: int
    bootstrapPartitionMetadata: dict[str, CleanPartitionMetadataDoc]
    extraMetadata: dict[str, str] | None


def metadata_record(clean_time: str, plan: CleanPlan, deleted: dict[str, list[str]]) -> CleanMetadataDoc:
    """``CleanerUtils.convertCleanMetadata``: per partition the names of the files deleted."""
    partitions: dict[str, CleanPartitionMetadataDoc] = {}
    for partition, files in sorted(plan.files.items()):
        names = [f.rsplit("/", 1)[-1] for f in files]
        done = {f.rsplit("/", 1)[-1] for f in deleted.get(partition, [])}
        partitions[partition] = CleanPartitionMetadataDoc(
            partitionPath=partition,
            policy=KEEP_LATEST_COMMITS,
            deletePathPatterns=names,
            successDeleteFiles=[n for n in names if n in done],
            failedDeleteFiles=[n for n in names if n not in done],
            isPartitionDeleted=False,
        )
    return CleanMetadataDoc(
        startCleanTime=clean_time,
        timeTakenInMillis=0,
        totalFilesDeleted=sum(len(p["successDeleteFiles"]) for p in partitions.values()),
        earliestCommitToRetain=plan.earliest_to_retain,
        lastCompletedCommitTimestamp=plan.last_completed,
        partitionMetadata=partitions,
        version=CLEAN_METADATA_VERSION,
        bootstrapPartitionMetadata={},
    )


def encode_metadata(record: CleanMetadataDoc, *, extra_metadata: bool) -> bytes:
    """``<t>.clean``: ``TimelineMetadataUtils.serializeCleanMetadata``."""
    return avro_container(_PARSED_METADATA[extra_metadata], record)


def decode_metadata(data: bytes) -> CleanMetadataDoc:
    return cast(CleanMetadataDoc, one_avro_record(data))
