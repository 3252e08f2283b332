"""The prepared stream's hand-off from Spark to Ray: one shard per write task in Ray's object store.

Here, not in ``runtime.data``, because only the Ray host imports Ray: the data plane prepares a
partitioned DataFrame (``runtime.data.workload.prepare_stream``) and this module turns each of its
partitions into one Arrow block a source actor reads zero-copy.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from runtime.data.columns import OFFSET, TASK
from runtime.data.workload import DEFAULT_GET_TIMEOUT_S, DEFAULT_SPARK_TIMEOUT_S, _run_bounded

if TYPE_CHECKING:
    import ray
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


@dataclass
class StreamShard:
    """One write task's part of the stream, in Ray's object store: Arrow tables in ``_offset`` order.

    Picklable (it holds ObjectRefs, not data): pass it to a source actor, which reads it with
    :meth:`iter_batches` straight from the local object store (zero-copy), never via the driver.
    The objects live as long as some process holds the shard (the driver that made it, or an
    actor it was passed to).
    """

    task: int
    num_rows: int
    first_offset: int | None
    last_offset: int | None
    refs: list[Any] = field(default_factory=list)  # list[ray.ObjectRef[pa.Table]]

    def table(self, timeout_s: float = DEFAULT_GET_TIMEOUT_S) -> pa.Table:
        """The whole shard as one Arrow table (zero-copy when it is one block, the usual case)."""
        import ray

        try:
            tables = ray.get(self.refs, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError as e:
            raise TimeoutError(
                f"shard of task {self.task}: its {len(self.refs)} block(s) were not available within {timeout_s:g} s"
            ) from e
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables(tables)

    def iter_batches(
        self,
        batch_size: int = 4096,
        start_offset: int | None = None,
        stop_offset: int | None = None,
        timeout_s: float = DEFAULT_GET_TIMEOUT_S,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of exactly ``batch_size`` rows (the last may be shorter), in ``_offset``
        order, of the rows with ``start_offset <= _offset < stop_offset`` (stream offsets, not
        row numbers: a restart resumes from a checkpointed offset, a round is an offset range)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        table = self.table(timeout_s)
        start, stop = 0, table.num_rows
        if (start_offset is not None or stop_offset is not None) and table.num_rows:
            offsets = table.column(OFFSET).to_numpy()
            if start_offset is not None:
                start = int(offsets.searchsorted(start_offset, side="left"))
            if stop_offset is not None:
                stop = int(offsets.searchsorted(stop_offset, side="left"))
        for lo in range(start, stop, batch_size):
            part = table.slice(lo, min(batch_size, stop - lo))
            batches = part.combine_chunks().to_batches()
            if batches:
                yield batches[0]

    def to_dataset(self) -> ray.data.Dataset:
        """The shard as a (materialized, single-block) Ray Dataset, for Ray Data consumers."""
        import ray

        dataset: ray.data.Dataset = ray.data.from_arrow_refs(list(self.refs))
        return dataset


# (rows, smallest task, largest task, first offset, last offset, offsets strictly increasing)
BlockSummary = tuple[int, int | None, int | None, int | None, int | None, bool]


def _summarize_block(table: pa.Table) -> BlockSummary:
    """(rows, min task, max task, first offset, last offset, offsets strictly increasing)."""
    import numpy as np
    import pyarrow.compute as pc

    n = table.num_rows
    if n == 0:
        return 0, None, None, None, None, True
    mm = pc.min_max(table.column(TASK))
    offsets = table.column(OFFSET).to_numpy()
    ordered = bool(np.all(offsets[1:] > offsets[:-1]))
    return n, mm["min"].as_py(), mm["max"].as_py(), int(offsets[0]), int(offsets[-1]), ordered


def _checked_shards(refs: list[Any], summaries: list[BlockSummary]) -> list[StreamShard]:
    """One shard per block, after checking block t holds only task t's rows in ``_offset`` order."""
    shards = []
    for t, (ref, (n, tmin, tmax, first, last, ordered)) in enumerate(zip(refs, summaries, strict=True)):
        if n and not (tmin == tmax == t and ordered):
            raise RuntimeError(
                f"block {t} holds tasks {tmin}..{tmax} (ordered={ordered}), expected only task {t} in "
                "_offset order: pass the DataFrame returned by prepare_stream unchanged (if you did, "
                "Spark's hash partitioning no longer matches route_values())"
            )
        shards.append(StreamShard(task=t, num_rows=n, first_offset=first, last_offset=last, refs=[ref]))
    return shards


def shards_to_ray(
    df: DataFrame, writers: int, *, release_spark_cache: bool = True, timeout_s: float = DEFAULT_SPARK_TIMEOUT_S
) -> list[StreamShard]:
    """Hand the prepared stream to Ray: one :class:`StreamShard` per write task, ``shards[t].task == t``.

    How: ``raydp.spark.spark_dataframe_to_ray_dataset`` (what ``ray.data.from_spark`` calls) turns
    each Spark partition into one Arrow block in the object store, in partition order;
    :func:`prepare_stream` made partition t = task t, so block t *is* shard t, with no Ray-side
    split or copy. A tiny Ray task per block checks that claim (only task t, ``_offset``
    strictly increasing) and counts rows. Chosen over ``from_spark`` + Ray-side ``filter`` per
    task (``writers`` passes over the data) and over one ``from_spark`` per task filter (``writers``
    Spark jobs and conversions).

    ``release_spark_cache`` unpersists the Arrow copy RayDP keeps in the Spark executors once
    the blocks are in the object store (it only serves lineage reconstruction after a node loss).
    """
    import ray
    from raydp.spark import dataset as raydp_dataset

    if not {TASK, OFFSET} <= set(df.columns):
        raise ValueError(
            f"shards_to_ray needs {TASK!r} and {OFFSET!r}: pass the DataFrame returned "
            f"by prepare_stream (columns: {df.columns})"
        )
    # RayDP 1.6.5 reads the internal DataFrame.sql_ctx, which warns on every call.
    warnings.filterwarnings("ignore", message="DataFrame.sql_ctx is an internal property")
    t0 = time.monotonic()
    ds = _run_bounded(
        df.sparkSession, "hand the stream to Ray", timeout_s, lambda: raydp_dataset.from_spark_recoverable(df)
    )
    try:
        refs = ds.to_arrow_refs()
        if len(refs) != writers:
            raise ValueError(
                f"the DataFrame has {len(refs)} partitions but writers={writers}: pass the "
                "DataFrame returned by prepare_stream(..., writers) unchanged"
            )
        summarize = ray.remote(num_cpus=0)(_summarize_block)
        try:
            summaries = ray.get([summarize.remote(r) for r in refs], timeout=timeout_s)
        except ray.exceptions.GetTimeoutError as e:
            raise TimeoutError(
                f"the {writers} blocks of the stream were not in Ray's object store "
                f"within {timeout_s:g} s (RayDP fetch tasks)"
            ) from e
    finally:
        if release_spark_cache:
            raydp_dataset.release_spark_recoverable(df)
    shards = _checked_shards(refs, summaries)
    log.info(
        "shards_to_ray: %d rows in %d shards in %.2f s", sum(s.num_rows for s in shards), writers, time.monotonic() - t0
    )
    return shards
