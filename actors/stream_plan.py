"""Where a job's stream comes from: the built-in generator, or Spark on Ray (RayDP).

A plan gives each source actor its shard (by reference: the data sits in Ray's object store and
never passes through the driver), the table's key fields, the Avro schema for commit metadata,
and the expected final state the run is verified against.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import ray
from numpy.typing import NDArray

from runtime.core.config import JobConfig
from runtime.data import generator
from runtime.data.columns import OFFSET, PAYLOAD
from runtime.data.input_format import CheckedInput
from runtime.flink.source import InMemoryShard
from runtime.hudi.table import TableProps, avro_schema_json
from runtime.lab.results import Timing
from runtime.lab.verify import expected_state

PhaseHook = Callable[[str], None] | None  # told when a phase of the start-up begins


@dataclass(frozen=True)
class SourceShard:
    """What one source actor reads, by reference: its rounds put in Ray's object store (the
    generator), or its Spark shard and the stream offsets where each round starts."""

    rounds: list[Any] = field(default_factory=list)  # object refs, one per round
    spark_shard: Any = None
    bounds: list[int] = field(default_factory=list)

    def open(self) -> StreamShardRounds | InMemoryShard:
        """The source's ``Shard``, inside its actor."""
        if self.spark_shard is not None:
            return StreamShardRounds(self.spark_shard, self.bounds)
        return InMemoryShard(self.rounds)


@dataclass
class StreamPlan:
    config: JobConfig  # with ``records`` set to the input's size
    props: TableProps
    shards: list[SourceShard]  # per task: what its source actor reads
    expected: pa.Table
    schema_json: str
    timings: Timing = field(default_factory=lambda: Timing())
    stream: pa.Table | None = None  # the generator's stream, kept to check a failed run's commits


def plan_generator(cfg: JobConfig, on_phase: PhaseHook = None) -> StreamPlan:
    if on_phase:
        on_phase(f"generating the stream: {cfg.records:,} records")
    t0 = time.time()
    stream = generator.generate(cfg)
    shards = generator.shards_by_round(cfg, stream)
    props = TableProps.for_job(cfg)
    expected = expected_state(stream, cfg.key_field, cfg.precombine_field, cfg.partition_field).select(
        [generator.KEY_FIELD, generator.PARTITION_FIELD, generator.PRECOMBINE_FIELD, PAYLOAD]
    )
    args = [SourceShard(rounds=[ray.put(t) for t in shards[i]]) for i in range(cfg.writers)]
    return StreamPlan(
        cfg,
        props,
        args,
        expected,
        avro_schema_json(stream.schema, cfg.table_name),
        Timing(prepare_s=round(time.time() - t0, 3)),
        stream=stream,
    )


def plan_spark(cfg: JobConfig, on_phase: PhaseHook = None, checked: CheckedInput | None = None) -> StreamPlan:
    """Generates the workload (or reads ``--input``) in Spark, assigns buckets, hands one shard
    per task to Ray. Bad input fails here, before any instant exists."""
    phase = on_phase or (lambda _what: None)
    from pyspark.sql.pandas.types import to_arrow_schema

    from actors.shards import shards_to_ray
    from actors.spark import SparkConfig, start_spark
    from runtime.data import workload as wl

    t0 = time.time()
    phase("starting Spark on Ray (RayDP)")
    spark = start_spark(
        SparkConfig(
            executors=cfg.spark_executors,
            executor_cores=cfg.spark_executor_cores,
            executor_memory=cfg.spark_executor_memory,
        )
    )
    t_spark = time.time()
    phase(f"reading {cfg.input_path} in Spark" if cfg.input_path else f"generating {cfg.records:,} records in Spark")
    df = spark_stream(spark, cfg, checked)
    df = df.cache()
    phase(f"bucketing the stream and handing {cfg.writers} shards to Ray")
    prepared = wl.prepare_stream(df, cfg.key_field, cfg.num_buckets, cfg.writers)
    shards = shards_to_ray(prepared, cfg.writers)
    records = sum(s.num_rows for s in shards)
    cfg = cfg.replace(records=records)
    t_handoff = time.time()
    phase("computing the expected state in Spark")
    expected = pa.Table.from_batches(
        wl.expected_state(df, cfg.key_field, cfg.precombine_field, cfg.partition_field)._collect_as_arrow()
    )
    df.unpersist()
    schema = to_arrow_schema(df.schema)
    bounds = cfg.round_bounds()
    props = TableProps.for_job(cfg)
    args = [SourceShard(spark_shard=shards[i], bounds=bounds) for i in range(cfg.writers)]
    return StreamPlan(
        cfg,
        props,
        args,
        expected,
        avro_schema_json(schema, cfg.table_name),
        Timing(
            spark_start_s=round(t_spark - t0, 3),
            prepare_s=round(t_handoff - t_spark, 3),
            expected_s=round(time.time() - t_handoff, 3),
        ),
    )


def spark_stream(spark: Any, cfg: JobConfig, checked: CheckedInput | None = None) -> Any:
    """The user's ``--input``, checked before anything is written (``checked``: its check made
    before Spark started), or the generated workload."""
    from runtime.data import workload as wl

    if cfg.input_path:
        return wl.read_input(
            spark,
            cfg.input_path,
            cfg.key_field,
            cfg.partition_field,
            cfg.precombine_field,
            cfg.input_format or None,
            checked=checked,
        )
    spec = wl.WorkloadSpec(
        records=cfg.records,
        keys=cfg.keys or None,
        update_ratio=cfg.update_ratio if cfg.update_ratio >= 0 else None,
        skew="zipf" if cfg.skew == "zipf" else "uniform",  # validated by JobConfig
        zipf_s=cfg.zipf_s,
        partitions=cfg.partitions,
        payload_bytes=cfg.payload_bytes,
        seed=cfg.seed,
    )
    return spec.generate(spark)


def plan_stream(cfg: JobConfig, on_phase: PhaseHook = None, checked: CheckedInput | None = None) -> StreamPlan:
    return plan_spark(cfg, on_phase, checked) if cfg.source == "spark" else plan_generator(cfg, on_phase)


class StreamShardRounds:
    """A Spark shard read round by round inside a source actor (the Source's ``Shard``)."""

    def __init__(self, shard: Any, bounds: list[int]) -> None:
        self.shard = shard
        self.bounds = bounds
        self._table: pa.Table | None = None
        self._offsets: NDArray[np.int64] | None = None

    async def batches(self, round_no: int, batch_rows: int) -> AsyncIterator[pa.Table]:
        import asyncio

        if self._table is None or self._offsets is None:
            loaded: pa.Table = await asyncio.to_thread(self.shard.table)
            self._table = loaded
            self._offsets = loaded.column(OFFSET).to_numpy() if loaded.num_rows else np.array([], dtype=np.int64)
        table: pa.Table = self._table
        offsets = self._offsets
        lo = int(offsets.searchsorted(self.bounds[round_no - 1], side="left"))
        hi = int(offsets.searchsorted(self.bounds[round_no], side="left"))
        for off in range(lo, hi, batch_rows):
            yield table.slice(off, min(batch_rows, hi - off))
