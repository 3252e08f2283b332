"""A batch of records split into the file groups (buckets) a write task buffers them in.

Hudi's ``StreamWriteFunction.bufferRecord`` (Apache Hudi 0.10.0 - 0.11.1) puts each record into the
bucket of its partition path and file id, in arrival order; here a whole batch is split at once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.data.batch_memo import BatchMemo
from runtime.data.columns import BUCKET

_SMALL_BATCH = 64

# ((partition, bucket), its records), None for the records of a batch that is one file group
FileGroupParts = tuple[tuple[tuple[str, int], pa.Table | None], ...]

# the splits of batches met before: a simulator's runs of one job emit its rounds' tables again, run
# after run, and a batch splits the same way every time
_SPLITS: BatchMemo[FileGroupParts] = BatchMemo()


def split_by_file_group(records: pa.Table, partition_field: str) -> list[tuple[tuple[str, int], pa.Table]]:
    """Groups a batch by (partition, bucket), keeping stream order within each group."""
    parts = _SPLITS.get(records, partition_field)
    if parts is None:
        parts = _SPLITS.put(records, _split(records, partition_field), partition_field)
    return [(key, records if part is None else part) for key, part in parts]


def _split(records: pa.Table, partition_field: str) -> FileGroupParts:
    if records.num_rows == 0:
        return ()
    partitions = records.column(partition_field)
    if partitions.type != pa.string():
        partitions = pc.cast(partitions, pa.string())
    buckets = records.column(BUCKET).to_numpy().astype(np.int64)
    if len(buckets) <= _SMALL_BATCH:  # bounds on Python ints: numpy's two reductions cost more here
        listed = buckets.tolist()
        low, high = min(listed), max(listed)
    else:
        low, high = int(buckets.min()), int(buckets.max())
    if low == high and not partitions.null_count:
        names = set(partitions.to_numpy(zero_copy_only=False).tolist())  # (cheaper than an Arrow kernel)
        if len(names) == 1:  # the whole batch is one file group (no copy needed)
            return (((names.pop(), low), None),)
    encoded = pc.dictionary_encode(partitions).combine_chunks()
    part_idx = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    code = part_idx * (high + 1) + buckets
    order = np.argsort(code, kind="stable")
    cuts = np.flatnonzero(np.diff(code[order])) + 1
    grouped = records.take(pa.array(order, pa.int64()))  # one take; each group is a slice of it
    names = encoded.dictionary.to_pylist()
    out: list[tuple[tuple[str, int], pa.Table | None]] = []
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)], strict=True):
        first = int(order[lo])
        out.append(((names[part_idx[first]], int(buckets[first])), grouped.slice(lo, hi - lo)))
    return tuple(out)
