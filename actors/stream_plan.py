"""Where a job's stream comes from: the built-in generator, or Spark on Ray (RayDP).

A plan gives each source actor its shard (by reference: the data sits in Ray's object store and
never passes through the driver), the table's key fields, the Avro schema for commit metadata,
and the expected final state the run is verified against.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import ray

from actors.source_shard import SourceShard
from runtime.core.config import JobConfig
from runtime.data import generator
from runtime.data.columns import PAYLOAD
from runtime.data.input_format import CheckedInput
from runtime.hudi.table.base_files import avro_schema_json
from runtime.hudi.table.table_config import TableProps
from runtime.lab.results import Timing
from runtime.lab.verify import expected_state

PhaseHook = Callable[[str], None] | None  # told when a phase of the start-up begins


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
    return plan_of_stream(cfg, stream, generator.shards_by_round(cfg, stream), t0)


def plan_of_stream(cfg: JobConfig, stream: pa.Table, shards: list[list[pa.Table]], t0: float) -> StreamPlan:
    """The plan of a stream made in this process (the generator's, or one job's of several,
    :mod:`runtime.data.job_streams`): ``shards[task][round-1]`` go to Ray's object store."""
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
