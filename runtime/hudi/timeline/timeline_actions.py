"""Every action of a Hudi timeline (table versions 6, 8 and 9), as a reader of a table Hudi wrote
must take it.

Sources (Apache Hudi 0.14-1.1, ``hudi-common``; each checked on the tables Hudi's Spark writer made
in hudi-rs's test data):

* ``HoodieTimeline``: the actions are ``commit``, ``deltacommit``, ``replacecommit``, ``clustering``,
  ``compaction``, ``logcompaction``, ``clean``, ``rollback``, ``savepoint``, ``restore`` and
  ``indexing`` (``VALID_ACTIONS_IN_TIMELINE``). A pending ``compaction`` completes as a ``commit``, a
  pending ``logcompaction`` as a ``deltacommit`` (``HoodieInstant.getComparableAction``), and from
  table version 8 a pending ``clustering`` as a ``replacecommit``
  (``InstantComparatorV2``/``ClusteringUtils.isClusteringInstant``); before 8 clustering is a
  ``replacecommit`` in every state.
* ``HoodieActiveTimeline.getCommitsTimeline`` / ``getWriteTimeline``: the instants whose files are
  the table's data: commit, deltacommit, replacecommit (and clustering), compaction, logcompaction.
  Clean, rollback, savepoint, restore and indexing write no data file of the table.
* ``HoodieReplaceCommitMetadata``: a replacecommit's metadata is a commit metadata (its
  ``partitionToWriteStats`` are the new files) plus ``partitionToReplaceFileIds``: partition ->
  the file ids it replaced (insert_overwrite, insert_overwrite_table, delete_partition and
  clustering). A replaced file group is out of the snapshot from the replacecommit's completion
  (``AbstractTableFileSystemView.isFileGroupReplaced``), its files remain until the cleaner removes
  them: they are neither orphans nor lost.
* ``HoodieCommitMetadata.operationType`` (``WriteOperationType``): INSERT and BULK_INSERT write
  records without looking their keys up, so a key written twice is kept twice
  (``HoodieWriteConfig.COMBINE_BEFORE_INSERT`` is off by default) and the official reader returns
  both rows; under UPSERT a key is one record.
* ``HoodieCleanMetadata`` / ``HoodieRollbackMetadata`` / ``HoodieRestoreMetadata`` /
  ``HoodieSavepointMetadata``: Avro container files (JSON before 0.7 for some); ``commitsRollback``
  names the instants a rollback undid.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import fastavro

from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc

COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING = "commit", "deltacommit", "replacecommit", "clustering"
COMPACTION, LOG_COMPACTION = "compaction", "logcompaction"
CLEAN, ROLLBACK, SAVEPOINT, RESTORE, INDEXING = "clean", "rollback", "savepoint", "restore", "indexing"
# the action a pending instant's completed file carries
COMPLETED_AS = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}
# the actions whose instants write the table's data files
DATA_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION, LOG_COMPACTION})
# the actions that keep the table's history, writing no data file
TABLE_SERVICE_ACTIONS = frozenset({CLEAN, ROLLBACK, SAVEPOINT, RESTORE, INDEXING})
# the write operations under which a key written twice is kept twice
INSERT_OPERATIONS = frozenset({"INSERT", "BULK_INSERT", "INSERT_PREPPED", "BULK_INSERT_PREPPED"})
_ORDER = {"requested": 0, "inflight": 1, "completed": 2}


@dataclass(frozen=True)
class DataInstant:
    """One data instant: its time, the action of its completed file (a pending compaction or
    clustering named as it completes), and its highest state."""

    ts: str
    action: str
    state: str


def data_instants(instants: list[Any]) -> dict[str, DataInstant]:
    """The data instants of a timeline's instants (``runtime.hudi.timeline.instant.Instant``), one per time,
    in its highest state."""
    out: dict[str, DataInstant] = {}
    for i in instants:
        if i.action not in DATA_ACTIONS:
            continue
        prev = out.get(i.ts)
        if prev is None or _ORDER[i.state] > _ORDER[prev.state]:
            out[i.ts] = DataInstant(i.ts, COMPLETED_AS.get(i.action, i.action), i.state)
    return dict(sorted(out.items()))


def replaced_file_groups(meta: CommitMetadataDoc) -> set[tuple[str, str]]:
    """(partition path, file id) of every file group a replacecommit replaced."""
    by_partition = meta.get("partitionToReplaceFileIds") or {}
    return {(p, f) for p, ids in by_partition.items() for f in ids or []}


def operation(meta: CommitMetadataDoc) -> str:
    """The write operation a commit's metadata records ("" when it records none)."""
    op = meta.get("operationType")
    return str(op).upper() if op else ""


def decode_instant_file(data: bytes) -> JsonObject:
    """Any instant file's document: an Avro container of one record (clean, rollback, restore,
    savepoint, and commit metadata from version 8) or JSON (commit metadata before 8). An empty
    file is an empty document (a requested rollback or an inflight delta commit)."""
    if not data:
        return {}
    if data[:4] == b"Obj\x01":
        records = list(fastavro.reader(io.BytesIO(data)))
        if len(records) != 1 or not isinstance(records[0], dict):
            raise ValueError(f"holds {len(records)} Avro records, not one")
        return records[0]
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("is not a JSON object")
    return doc
