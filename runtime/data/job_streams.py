"""Each job's stream when several jobs write one table (:mod:`runtime.core.jobs_spec`).

Job ``j`` (0-based) of ``n`` runs the built-in generator with the data seed ``seed + j`` (its
own values), then its records are made its own as the overlap asks: ``none`` prefixes keys and
partitions with the job's name (distinct file groups), ``file-groups`` prefixes the keys only
(same partitions and buckets, so the same file groups), ``keys`` keeps both and makes every
ordering value ``ts * n + j`` so no two jobs tie under the merge rule. Every payload starts with
the job's name, so a row the table holds names the job that wrote it. The bucket and the write
task of every record are those of its final key (the bucket index hashes the key).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.config import JobConfig
from runtime.core.jobs_spec import job_name
from runtime.data import generator
from runtime.data.bucket import bucket_ids
from runtime.data.columns import BUCKET, KEY, PARTITION, PAYLOAD, TASK, TS

JOB_COLUMN = "_job"  # the expected state's column naming the job whose record it is (never written)


def job_config(cfg: JobConfig, index: int, overrides: dict[str, Any] | None = None) -> JobConfig:
    """Job ``index``'s configuration: the command's, with its own Flink job id and data seed, and
    what ``overrides`` changes (a scenario's)."""
    name = job_name(index)
    return cfg.replace(job_id=name, checkpoint_store=name, seed=cfg.seed + index, **(overrides or {}))


def job_of_payload(payload: str) -> str | None:
    """The job whose row this payload is (None: not a job stream's)."""
    head, sep, _ = payload.partition(":")
    return head if sep and head.startswith("job-") else None


def job_stream(cfg: JobConfig, index: int, jobs: int, overlap: str) -> pa.Table:
    """Job ``index``'s stream (``cfg`` is already :func:`job_config`'s)."""
    stream = generator.generate(cfg)
    name = job_name(index)
    keys, parts, ts = stream.column(KEY), stream.column(PARTITION), stream.column(TS)
    if overlap in ("none", "file-groups"):
        keys = pc.binary_join_element_wise(pa.scalar(name), keys, "-")
    if overlap == "none":
        parts = pc.binary_join_element_wise(pa.scalar(name), parts, "-")
    if overlap == "keys":
        ts = pc.add(pc.multiply(ts, jobs), index)
    payload = pc.binary_join_element_wise(pa.scalar(name), stream.column(PAYLOAD), ":")
    key_list = keys.to_pylist()
    buckets = bucket_ids(key_list, cfg.num_buckets)
    out = stream
    for col, values in (
        (KEY, keys),
        (PARTITION, parts),
        (TS, ts),
        (PAYLOAD, payload),
        (BUCKET, pa.array(buckets, pa.int32())),
        (TASK, pa.array(buckets % cfg.writers, pa.int32())),
    ):
        out = out.set_column(out.schema.get_field_index(col), col, values)
    return out


def shards(cfg: JobConfig, stream: pa.Table) -> list[list[pa.Table]]:
    """``[task][round-1]``: the generator's rounds of this job's stream."""
    return generator.shards_by_round(cfg, stream)
