"""Time the data plane's start-up and hand-off: Ray, Spark on Ray, stream -> per-task shards -> a source actor.

    .venv/bin/python benchmarks/bench_handoff.py [--records 1000000] [--writers 4] [--buckets 16]
                                                [--batch-size 4096] [--repeats 2] [--executor-cores 1]

Prints the figures (and one JSON line); asserts nothing. The first hand-off includes JVM warm-up,
so it is reported separately from the later ones.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--executor-cores",
        type=int,
        default=1,
        help="Spark task slots of the one executor; >1 oversubscribes: it still asks Ray for 1 CPU",
    )
    args = ap.parse_args()

    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    import ray

    from actors.shards import shards_to_ray
    from actors.spark import SparkConfig, start_spark, stop_spark
    from runtime.data.workload import WorkloadSpec, generate_stream, prepare_stream

    figures: dict[str, object] = {
        "records": args.records,
        "writers": args.writers,
        "buckets": args.buckets,
        "executor_cores": args.executor_cores,
    }
    t = time.monotonic()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    figures["ray_init_s"] = time.monotonic() - t

    extra = {}
    if args.executor_cores > 1:
        extra["spark.ray.raydp_spark_executor.actor.resource.cpu"] = "1"
    t = time.monotonic()
    spark = start_spark(SparkConfig(executor_cores=args.executor_cores, extra_configs=extra))
    figures["start_spark_s"] = time.monotonic() - t

    handoffs = []
    shards = []
    for _ in range(args.repeats):
        shards = []  # drop the previous run's objects first
        t = time.monotonic()
        df = prepare_stream(
            generate_stream(spark, WorkloadSpec(records=args.records)), "key", args.buckets, args.writers
        )
        shards = shards_to_ray(df, args.writers)
        handoffs.append(time.monotonic() - t)
    figures["handoff_first_s"] = handoffs[0]
    if len(handoffs) > 1:
        figures["handoff_warm_s"] = statistics.median(handoffs[1:])
    figures["shard_rows"] = [s.num_rows for s in shards]

    @ray.remote(num_cpus=0)
    class Source:
        """Stands in for the source role: reads its shard as pyarrow batches, inside Ray."""

        def read(self, shard, batch_size: int) -> tuple[int, int, float, float]:
            t0 = time.perf_counter()
            shard.table()  # the zero-copy get, timed on its own
            t1 = time.perf_counter()
            rows = batches = 0
            for b in shard.iter_batches(batch_size):
                rows += b.num_rows
                batches += 1
            return rows, batches, t1 - t0, time.perf_counter() - t0

        def read_dataset(self, shard, batch_size: int) -> tuple[int, int, float]:
            t0 = time.perf_counter()
            rows = batches = 0
            for b in shard.to_dataset().iter_batches(batch_size=batch_size, batch_format="pyarrow"):
                rows += b.num_rows
                batches += 1
            return rows, batches, time.perf_counter() - t0

    src = Source.remote()
    ray.get(src.__ray_ready__.remote(), timeout=60)
    rows, batches, get_s, total_s = ray.get(src.read.remote(shards[0], args.batch_size), timeout=300)
    figures["actor_get_shard_s"] = get_s
    figures["actor_iter_shard_s"] = total_s
    figures["actor_iter_rows_per_s"] = rows / total_s if total_s else None
    rows2, _, ds_s = ray.get(src.read_dataset.remote(shards[0], args.batch_size), timeout=300)
    figures["actor_iter_ray_data_s"] = ds_s
    figures["actor_iter_ray_data_rows_per_s"] = rows2 / ds_s if ds_s else None
    ray.kill(src)

    shards = []
    stop_spark()
    ray.shutdown()

    print(f"ray.init                                  {figures['ray_init_s']:6.2f} s")
    print(f"start_spark (1 executor x {args.executor_cores} core)          {figures['start_spark_s']:6.2f} s")
    print(f"generate+prepare+hand off {args.records:,} rows, {args.writers} writers")
    print(f"    first (JVM cold)                      {figures['handoff_first_s']:6.2f} s")
    if "handoff_warm_s" in figures:
        print(f"    warm (median of {len(handoffs) - 1})                    {figures['handoff_warm_s']:6.2f} s")
    print(f"    rows per shard                        {figures['shard_rows']}")
    print(f"one shard ({rows:,} rows) in a Ray actor, batches of {args.batch_size}:")
    print(f"    ray.get (zero-copy)                   {get_s * 1e3:8.1f} ms")
    print(
        f"    StreamShard.iter_batches ({batches} batches) {total_s * 1e3:8.1f} ms "
        f"({figures['actor_iter_rows_per_s']:,.0f} rows/s)"
    )
    print(
        f"    Ray Data iter_batches                 {ds_s * 1e3:8.1f} ms "
        f"({figures['actor_iter_ray_data_rows_per_s']:,.0f} rows/s)"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
