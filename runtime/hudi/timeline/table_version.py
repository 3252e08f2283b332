"""Hudi table versions 6, 8 and 9: where the timeline lives, how its files are named and encoded,
what ``hoodie.properties`` says, and how merge-on-read log files are named and rolled back.

Sources (each checked against a table the release's Spark writer made, in hudi-rs's test data:
``sample_table/cow/v8_simplekeygen_nonhivestyle``, ``quickstart_trips_table/mor/avro/v8_trips_8i3u1d``,
``sample_table/mor/avro/v9_nonpartitioned_rollback``; and read back by ``hudi`` 0.5.0):

* ``HoodieTableVersion`` (Hudi 1.1): 6 is Hudi 0.14-0.15 with timeline layout 1; 8 is Hudi 1.0 and
  9 Hudi 1.1, both with timeline layout 2 (``TimelineLayoutVersion.LAYOUT_VERSION_2``).
* Layout 2 (``InstantFileNameGeneratorV2``, ``HoodieTableConfig.TIMELINE_PATH`` = ``timeline``,
  ``TIMELINE_HISTORY_PATH`` = ``history``): the active timeline is ``.hoodie/timeline/``; a
  completed instant's file is ``<requested>_<completion>.<action>`` (its completion time, from the
  same instant-time generator, is in the name); requested and inflight files keep layout 1's names.
  The LSM archived timeline is ``.hoodie/timeline/history/`` (written by :mod:`runtime.hudi.client.archiver`).
* Layout 2 writes commit metadata as an Avro container file of ``HoodieCommitMetadata``
  (``TimelineMetadataUtils.serializeCommitMetadata``, ``CommitMetadataSerDeV2``) where layout 1
  writes JSON; the schema below is the one those files embed (``HoodieCommitMetadata.avsc``,
  ``HoodieWriteStat`` with ``HoodieDeltaWriteStat``'s fields).
* ``HoodieAppendHandle.populateWriteStatAndFetchFileSlice`` / ``init`` (Hudi 1.x): from table
  version 8 a delta commit's log files carry the delta commit's own instant
  (``.<fileId>_<instant>.log.<version>_<token>``), the write stat's ``prevCommit`` is that instant
  and its ``baseFile`` empty; a log file belongs to the file slice with the largest base instant at
  or before the log's completion time (``HoodieFileGroup.addLogFile``, ``CompletionTimeQueryView``).
* ``RollbackUtils.getRollbackRequestToAppendForVersionSix`` (Hudi 1.x): rollback command blocks
  are for tables below version 8; from 8 a rolled-back delta commit's log files are deleted, as
  they hold only its records.
* ``HoodieTableConfig`` (1.1): version 9 names the ordering field ``hoodie.table.ordering.fields``
  (``hoodie.table.precombine.field`` before) and adds ``hoodie.table.format=native``; 8 and 9
  state ``hoodie.record.merge.mode=EVENT_TIME_ORDERING`` (the merge the precombine field implies).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, cast

import fastavro

from runtime.core.json_doc import JsonObject, dumps_indented
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc, WriteStatDoc

LAYOUT_1_TIMELINE = ""  # the timeline is .hoodie itself
LAYOUT_2_TIMELINE = "timeline"
LAYOUT_2_HISTORY = "history"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"


def _nullable(t: Any) -> JsonObject:
    return {"type": ["null", t], "default": None}


_STAT_FIELDS: list[tuple[str, Any]] = [
    ("fileId", "string"),
    ("path", "string"),
    ("prevCommit", "string"),
    ("numWrites", "long"),
    ("numDeletes", "long"),
    ("numUpdateWrites", "long"),
    ("totalWriteBytes", "long"),
    ("totalWriteErrors", "long"),
    ("partitionPath", "string"),
    ("totalLogRecords", "long"),
    ("totalLogFiles", "long"),
    ("totalUpdatedRecordsCompacted", "long"),
    ("numInserts", "long"),
    ("totalLogBlocks", "long"),
    ("totalCorruptLogBlock", "long"),
    ("totalRollbackBlocks", "long"),
    ("fileSizeInBytes", "long"),
    ("logVersion", "int"),
    ("logOffset", "long"),
    ("baseFile", "string"),
    ("logFiles", {"type": "array", "items": "string"}),
    ("cdcStats", {"type": "map", "values": "long"}),
    ("prevBaseFile", "string"),
    ("minEventTime", "long"),
    ("maxEventTime", "long"),
    (
        "runtimeStats",
        {
            "type": "record",
            "name": "HoodieRuntimeStats",
            "fields": [
                {"name": n, **_nullable("long")} for n in ("totalScanTime", "totalCreateTime", "totalUpsertTime")
            ],
        },
    ),
    ("totalLogFilesCompacted", "long"),
    ("totalLogReadTimeMs", "long"),
    ("totalLogSizeCompacted", "long"),
    ("tempPath", "string"),
    ("numUpdates", "long"),
]

COMMIT_METADATA_SCHEMA: JsonObject = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {
            "name": "partitionToWriteStats",
            **_nullable(
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieWriteStat",
                            "fields": [{"name": n, **_nullable(t)} for n, t in _STAT_FIELDS],
                        },
                    },
                }
            ),
        },
        {"name": "compacted", **_nullable("boolean")},
        {"name": "extraMetadata", **_nullable({"type": "map", "values": "string"})},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "operationType", **_nullable("string")},
    ],
}
_PARSED_SCHEMA = fastavro.parse_schema(COMMIT_METADATA_SCHEMA)
_STAT_NAMES = {n for n, _ in _STAT_FIELDS}


@dataclass(frozen=True)
class TableVersion:
    """One table version's rules; :data:`TABLE_VERSIONS` holds those this lab writes."""

    number: int
    release: str  # the Hudi release that writes it by default
    timeline_layout: int

    @property
    def layout_2(self) -> bool:
        return self.timeline_layout == 2

    @property
    def timeline_folder(self) -> str:
        """The active timeline's folder under ``.hoodie`` ("" for ``.hoodie`` itself)."""
        return LAYOUT_2_TIMELINE if self.layout_2 else LAYOUT_1_TIMELINE

    @property
    def logs_per_instant(self) -> bool:
        """Whether a log file carries the instant that wrote it (8+), not its slice's base instant."""
        return self.number >= 8

    @property
    def ordering_field_key(self) -> str:
        return ORDERING_FIELDS if self.number >= 9 else PRECOMBINE_FIELD

    def completed_file(self, instant: str, completion: str | None, action: str) -> str:
        """A completed instant's timeline file name."""
        if self.layout_2:
            if not completion:
                raise ValueError(
                    f"{instant}.{action}: a completed instant of table version {self.number} needs its completion time"
                )
            return f"{instant}_{completion}.{action}"
        return f"{instant}.{action}"

    def encode_metadata(self, doc: CommitMetadataDoc) -> bytes:
        """Commit metadata as the version stores it: JSON (layout 1) or one Avro record (layout 2)."""
        if not self.layout_2:
            return dumps_indented(doc).encode()
        buf = io.BytesIO()
        fastavro.writer(buf, _PARSED_SCHEMA, [commit_metadata_record(doc)])
        return buf.getvalue()

    def decode_metadata(self, data: bytes, name: str = "commit metadata") -> CommitMetadataDoc:
        """The metadata document, whatever the layout wrote (a JSON file of another writer included)."""
        if data[:4] == b"Obj\x01":
            records = list(fastavro.reader(io.BytesIO(data)))
            if len(records) != 1 or not isinstance(records[0], dict):
                raise ValueError(f"{name} holds {len(records)} Avro records, not one")
            return _without_nulls(records[0])
        doc: CommitMetadataDoc = json.loads(data)
        return doc

    def extra_properties(self) -> dict[str, str]:
        """``hoodie.properties`` entries of this version beyond version 6's."""
        if not self.layout_2:
            return {}
        return {
            "hoodie.timeline.path": LAYOUT_2_TIMELINE,
            "hoodie.timeline.history.path": LAYOUT_2_HISTORY,
            "hoodie.table.initial.version": str(self.number),
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            **({"hoodie.table.format": "native"} if self.number >= 9 else {}),
        }


def commit_metadata_record(doc: CommitMetadataDoc) -> JsonObject:
    """A commit metadata document as a ``HoodieCommitMetadata`` Avro record (its write stats cut
    to the record's fields)."""
    return {**doc, "partitionToWriteStats": _avro_stats(doc.get("partitionToWriteStats") or {})}


def _avro_stats(by_partition: dict[str, list[WriteStatDoc]]) -> dict[str, list[JsonObject]]:
    """Write stats cut to the Avro record's fields (the JSON form may carry others)."""
    return {p: [{k: v for k, v in s.items() if k in _STAT_NAMES} for s in stats] for p, stats in by_partition.items()}


def _without_nulls(record: JsonObject) -> CommitMetadataDoc:
    """The Avro record as the JSON form reads: absent optional fields dropped."""
    out = {k: v for k, v in record.items() if v is not None}
    stats = out.get("partitionToWriteStats") or {}
    out["partitionToWriteStats"] = {
        p: [{k: v for k, v in s.items() if v is not None} for s in ss] for p, ss in stats.items()
    }
    out.setdefault("extraMetadata", {})
    return cast(CommitMetadataDoc, out)


TABLE_VERSIONS: dict[int, TableVersion] = {
    6: TableVersion(6, "0.14-0.15", 1),
    8: TableVersion(8, "1.0", 2),
    9: TableVersion(9, "1.1", 2),
}


def table_version(number: int | str) -> TableVersion:
    """The rules of version ``number``; ValueError naming the versions written otherwise."""
    try:
        return TABLE_VERSIONS[int(number)]
    except (KeyError, ValueError):
        written = ", ".join(map(str, TABLE_VERSIONS))
        raise ValueError(
            f"table version {number} is not one this lab writes or the official reader (hudi 0.5.0) reads: "
            f"use {written}"
        ) from None
