"""The built-in upsert stream (``--source generator``): deterministic for a seed, vectorized.

Record ``i`` of the stream (``_offset = i``) carries ``key``, ``partition``, ``ts`` (the
precombine field) and ``payload``. The first ``keys`` records insert each key once; later records
update a pseudo-random key. ``ts`` is the offset plus a small pseudo-random jitter, so an update
usually, but not always, carries a larger ``ts`` than the version before it: the precombine rule
is exercised, not assumed. A key always lives in the same partition.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from runtime.core.config import JobConfig
from runtime.data.bucket import bucket_ids, bucket_of  # noqa: F401 - bucket_of: the rule, re-exported
from runtime.data.columns import BUCKET, KEY, OFFSET, PARTITION, PAYLOAD, TASK, TS

KEY_FIELD, PARTITION_FIELD, PRECOMBINE_FIELD = KEY, PARTITION, TS
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _M64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M64
        return z ^ (z >> np.uint64(31))


def generate(cfg: JobConfig, start: int = 0, stop: int | None = None) -> pa.Table:
    """Records ``[start, stop)`` of the stream, with ``_offset``, ``_bucket`` and ``_task``."""
    stop = cfg.records if stop is None else stop
    offsets = np.arange(start, stop, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = _splitmix64(offsets.astype(np.uint64) ^ (np.uint64(cfg.seed) * np.uint64(0x5851F42D4C957F2D)))
    n_keys = cfg.num_keys
    key_ids = np.where(offsets < n_keys, offsets, (h % np.uint64(n_keys)).astype(np.int64))
    # (f-strings, not numpy's char functions: those are several times slower)
    key_list = [f"key-{k:09d}" for k in key_ids.tolist()]
    part_ids = (key_ids * 2654435761) % cfg.partitions
    part_names = [f"p{i:02d}" for i in range(cfg.partitions)]
    ts = offsets + ((h >> np.uint64(40)) % np.uint64(64)).astype(np.int64)
    width = cfg.payload_bytes
    payload = [f"v{o}".ljust(width, "x") for o in offsets.tolist()]
    n_buckets = cfg.num_buckets
    buckets = bucket_ids(key_list, n_buckets)
    return pa.table(
        {
            KEY_FIELD: pa.array(key_list, pa.string()),
            PARTITION_FIELD: pa.array([part_names[i] for i in part_ids.tolist()], pa.string()),
            PRECOMBINE_FIELD: pa.array(ts, pa.int64()),
            PAYLOAD: pa.array(payload, pa.string()),
            OFFSET: pa.array(offsets, pa.int64()),
            BUCKET: pa.array(buckets, pa.int32()),
            TASK: pa.array(buckets % cfg.writers, pa.int32()),
        }
    )


def workload_key(cfg: JobConfig) -> tuple[object, ...]:
    """What :func:`generate` and :func:`shards_by_round` read of ``cfg``: two configurations with
    the same key give the same stream and shards (a simulator running many seeds of one job
    makes them once)."""
    return (
        cfg.records,
        cfg.seed,
        cfg.num_keys,
        cfg.partitions,
        cfg.payload_bytes,
        cfg.num_buckets,
        cfg.writers,
        cfg.checkpoints,
        tuple(cfg.round_bounds()),
    )


def shards_by_round(cfg: JobConfig, stream: pa.Table) -> list[list[pa.Table]]:
    """``[task][round-1]`` -> that task's records of that round, in offset order."""
    bounds = cfg.round_bounds()
    tasks = stream.column(TASK).to_numpy()
    out: list[list[pa.Table]] = [[] for _ in range(cfg.writers)]
    for r in range(cfg.checkpoints):
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        part = stream.slice(lo, hi - lo)
        t = tasks[lo:hi]
        for task in range(cfg.writers):
            out[task].append(part.filter(pa.array(t == task)))
    return out
