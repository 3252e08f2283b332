"""Hudi's compaction plan (``HoodieCompactionPlan.avsc``, ``HoodieCompactionOperation``), as
``TimelineMetadataUtils.serializeCompactionPlan`` writes it to ``<C>.compaction.requested``: an
Avro container file of one record, version 2 (``CompactionUtils.LATEST_COMPACTION_METADATA_VERSION``:
file names, not paths). The compaction that plans and runs it is :mod:`runtime.hudi.client.compaction`."""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, field

import fastavro

from runtime.core.json_doc import JsonObject

PLAN_VERSION = 2  # CompactionUtils.LATEST_COMPACTION_METADATA_VERSION: file names, not paths

_NULLABLE_STRING = ["null", "string"]
PLAN_SCHEMA: JsonObject = {
    "namespace": "org.apache.hudi.avro.model",
    "type": "record",
    "name": "HoodieCompactionPlan",
    "fields": [
        {
            "name": "operations",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "name": "HoodieCompactionOperation",
                        "type": "record",
                        "fields": [
                            {"name": "baseInstantTime", "type": _NULLABLE_STRING},
                            {
                                "name": "deltaFilePaths",
                                "type": ["null", {"type": "array", "items": "string"}],
                                "default": None,
                            },
                            {"name": "dataFilePath", "type": _NULLABLE_STRING, "default": None},
                            {"name": "fileId", "type": _NULLABLE_STRING},
                            {"name": "partitionPath", "type": _NULLABLE_STRING, "default": None},
                            {"name": "metrics", "type": ["null", {"type": "map", "values": "double"}], "default": None},
                            {"name": "bootstrapFilePath", "type": _NULLABLE_STRING, "default": None},
                        ],
                    },
                },
            ],
            "default": None,
        },
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}
_PARSED_PLAN_SCHEMA = fastavro.parse_schema(PLAN_SCHEMA)


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact (``CompactionOperation``)."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str  # "" for a log-only file group
    log_files: tuple[str, ...]  # file names, in version order
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CompactionPlan:
    instant: str
    operations: tuple[CompactionOperation, ...]


def encode_plan(operations: Iterable[CompactionOperation]) -> bytes:
    """The ``HoodieCompactionPlan`` as an Avro container file."""
    record = {
        "operations": [
            {
                "baseInstantTime": op.base_instant,
                "deltaFilePaths": list(op.log_files),
                "dataFilePath": op.base_file or None,
                "fileId": op.file_id,
                "partitionPath": op.partition,
                "metrics": dict(op.metrics),
                "bootstrapFilePath": None,
            }
            for op in operations
        ],
        "extraMetadata": None,
        "version": PLAN_VERSION,
    }
    buf = io.BytesIO()
    fastavro.writer(buf, _PARSED_PLAN_SCHEMA, [record])
    return buf.getvalue()


def decode_plan(instant: str, data: bytes) -> CompactionPlan:
    records = list(fastavro.reader(io.BytesIO(data)))
    if len(records) != 1 or not isinstance(records[0], dict):
        raise ValueError(f"the compaction plan of {instant} holds {len(records)} records, not one")
    ops = tuple(
        CompactionOperation(
            op["partitionPath"] or "",
            op["fileId"] or "",
            op["baseInstantTime"] or "",
            op["dataFilePath"] or "",
            tuple(op["deltaFilePaths"] or ()),
            dict(op["metrics"] or {}),
        )
        for op in records[0].get("operations") or []
    )
    return CompactionPlan(instant, ops)
