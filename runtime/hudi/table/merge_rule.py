"""The merge rule: which version of a record a table keeps when a new one comes in.

One rule is applied twice, and both places use this module: by the writer, to an incoming
record against the stored one (:func:`runtime.hudi.table.merge.merge_file_group`, the copy-on-write
merge and the compaction), and by the checker, to a run's stream against the table as it was
before the run (:func:`runtime.lab.verify.expected_state`, the committed prefix). Within one
batch every release keeps the record with the larger ordering (precombine) value
(``HoodieRecordPayload.preCombine``, ``FlinkWriteHelper.deduplicateRecords``); the releases
differ in the merge with the stored record:

* Hudi 0.10 ``hudi-flink`` ``FlinkOptions.PAYLOAD_CLASS_NAME`` (``write.payload.class``)
  defaults to ``OverwriteWithLatestAvroPayload``, whose ``combineAndGetUpdateValue`` returns the
  incoming record whatever its ordering value: *commit-time ordering*.
* Later ``hudi-flink`` releases take the ordering value into account: ``HoodieTableFactory``
  (``sanityCheck``) replaces a default payload class by ``EventTimeAvroPayload`` when the table
  has a precombine field, and Hudi 1.1's ``FlinkOptions.PAYLOAD_CLASS_NAME`` (``payload.class``,
  fallback key ``write.payload.class``) defaults to ``EventTimeAvroPayload``, whose
  ``combineAndGetUpdateValue`` keeps the stored record when its ordering value is larger.
  Hudi 1.x states it as ``hoodie.record.merge.mode=EVENT_TIME_ORDERING`` (``RecordMergeMode``;
  ``COMMIT_TIME_ORDERING`` is the other mode), ordered by ``hoodie.table.ordering.fields``.

The lab's writer applies :data:`MODELLED` (event-time ordering, ties to the incoming record, a
null incoming value loses) for every protocol, those of the 0.10 era included: under
commit-time ordering a table's state depends on where the writer's flushes cut the stream (a
record of a later flush replaces the stored one even when older), which no checker can
re-derive from the stream; ``docs/FIDELITY.md`` names the difference.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


class MergeRule(enum.Enum):
    """Hudi 1.x's ``RecordMergeMode`` names, used for every release."""

    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"  # the larger ordering value wins; ties to the incoming
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"  # the incoming record wins (OverwriteWithLatestAvroPayload)


# the rule the lab's writer and checker apply (the module docstring says why for the 0.10 protocols)
MODELLED = MergeRule.EVENT_TIME_ORDERING


def incoming_wins(
    incoming: pa.ChunkedArray | pa.Array, stored: pa.ChunkedArray | pa.Array, rule: MergeRule = MODELLED
) -> npt.NDArray[np.bool_]:
    """Whether each incoming record replaces the stored one beside it (same length). Event-time
    ordering: its ordering value is at least the stored one's (``EventTimeAvroPayload`` /
    ``DefaultHoodieRecordPayload.combineAndGetUpdateValue``; a null incoming value loses)."""
    if rule is MergeRule.COMMIT_TIME_ORDERING:
        return np.ones(len(incoming), dtype=bool)
    if plain_numbers(incoming, stored):  # numpy compares plain numbers in fewer calls
        return numbers_win(incoming.to_numpy(), stored.to_numpy())
    ge = pc.fill_null(pc.greater_equal(incoming, stored), False)
    return np.asarray(ge.to_numpy(zero_copy_only=False), dtype=bool)


def plain_numbers(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> bool:
    """Two columns of one integer or floating type, without nulls (numpy compares them as they are)."""
    return (
        a.type == b.type
        and (pa.types.is_integer(a.type) or pa.types.is_floating(a.type))
        and not a.null_count
        and not b.null_count
    )


def numbers_win(
    incoming: npt.NDArray[Any], stored: npt.NDArray[Any], rule: MergeRule = MODELLED
) -> npt.NDArray[np.bool_]:
    """:func:`incoming_wins` of two columns of :func:`plain_numbers`, as numpy arrays."""
    if rule is MergeRule.COMMIT_TIME_ORDERING:
        return np.ones(len(incoming), dtype=bool)
    wins: npt.NDArray[np.bool_] = np.asarray(incoming >= stored)
    return wins
