"""Data plane: rows/s of a commitlab run (Spark source) against Spark and pyarrow writing the same rows.

    .venv/bin/python benchmarks/bench_dataplane.py [--records 1000000] [--writers 4] [--checkpoints 10]
                                                  [--out benchmarks/results/dataplane]

One process, one Ray, one Spark session:

1. Spark generates the workload commitlab would generate (same ``WorkloadSpec``, same seed) and
   prepares it (``prepare_stream``: bucket, task, routing), cached; then
   (a) ``df.write.parquet`` of that prepared DataFrame, timed;
   (b) the same rows handed to Ray (``shards_to_ray``, the hand-off commitlab uses), assembled into
       one Arrow table and written by ``pq.write_table`` from memory, timed.
2. ``commitlab`` with ``source="spark"``, ``protocol="message-bus"`` on the same workload (its own
   prepare and hand-off, then the streaming write into a Hudi copy-on-write table, then
   exactly-once verification), while a background thread samples the RSS of every role actor's
   process with psutil (nothing is added to the runtime).

Reports rows/s of each and the ratios, the run's timing breakdown and peak RSS per write task;
writes ``<out>.json`` and ``<out>.png``. Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)


def dir_bytes(path: str) -> tuple[int, int]:
    """(bytes, files) of the parquet files under ``path``."""
    total = files = 0
    for root, _, names in os.walk(path):
        for n in names:
            if n.endswith(".parquet"):
                total += os.path.getsize(os.path.join(root, n))
                files += 1
    return total, files


def hudi_snapshot_bytes(table: str) -> tuple[int, int]:
    """(bytes, files) of the latest version of each file group (``<fileId>_<token>_<instant>.parquet``)."""
    latest: dict[tuple[str, str], tuple[str, int]] = {}
    for root, dirs, names in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for n in names:
            parts = n[: -len(".parquet")].split("_") if n.endswith(".parquet") else []
            if len(parts) != 3:
                continue
            key, instant = (root, parts[0]), parts[2]
            if key not in latest or instant > latest[key][0]:
                latest[key] = (instant, os.path.getsize(os.path.join(root, n)))
    return sum(v[1] for v in latest.values()), len(latest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--checkpoints", type=int, default=10)
    ap.add_argument("--out", default="benchmarks/results/dataplane", help="writes OUT.json and OUT.png")
    ap.add_argument("--tmp", default=None, help="scratch directory for the tables (default: a new temp dir)")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the written tables")
    ap.add_argument("--step-timeout", type=float, default=600.0, help="bound on each Spark/pyarrow step, s")
    ap.add_argument("--job-timeout", type=float, default=600.0, help="JobConfig.job_timeout_s of the run")
    ap.add_argument("--sample-interval", type=float, default=0.1, help="RSS sampling period, s")
    args = ap.parse_args()

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    con = common.console()
    scratch = args.tmp or tempfile.mkdtemp(prefix="commitlab-bench-dataplane-")
    os.makedirs(scratch, exist_ok=True)

    from runtime.core.config import JobConfig

    cfg = JobConfig(
        source="spark",
        protocol="message-bus",
        records=args.records,
        writers=args.writers,
        checkpoints=args.checkpoints,
        table=os.path.join(scratch, "hudi-table"),
        job_timeout_s=args.job_timeout,
    )
    cfg.validate()
    doc: dict[str, Any] = {
        "benchmark": "dataplane",
        "params": {
            "records": args.records,
            "writers": args.writers,
            "checkpoints": args.checkpoints,
            "protocol": cfg.protocol,
            "source": cfg.source,
            "buckets_per_partition": cfg.num_buckets,
            "partitions": cfg.partitions,
            "payload_bytes": cfg.payload_bytes,
            "bucket_flush_rows": cfg.bucket_flush_rows,
            "checkpoint_interval_s": cfg.checkpoint_interval_s,
            "spark_executors": cfg.spark_executors,
            "spark_executor_cores": cfg.spark_executor_cores,
        },
    }

    steps = [
        "ray.init",
        "start Spark on Ray",
        "Spark: generate + prepare (cached)",
        "Spark: df.write.parquet",
        "hand-off to Ray + one Arrow table",
        "pyarrow: pq.write_table",
        "commitlab run (message-bus, Spark source)",
        "write JSON and plot",
    ]

    def step(i: int, msg: str) -> None:
        con.log(f"[{i + 1}/{len(steps)}] {msg}")

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=con,
        disable=not con.is_terminal,
    ) as progress:
        bar = progress.add_task(steps[0], total=len(steps))

        def advance(i: int) -> None:
            progress.update(bar, completed=i, description=steps[i] if i < len(steps) else "done")

        # 1. Ray, 2. Spark: once each for the whole script
        step(0, steps[0])
        ray_s = common.start_ray()
        doc["environment"] = common.environment()
        advance(1)
        step(1, steps[1])
        from actors.shards import shards_to_ray
        from actors.spark import SparkConfig, start_spark, stop_spark
        from runtime.data import workload as wl

        t = time.monotonic()
        spark = start_spark(
            SparkConfig(
                executors=cfg.spark_executors,
                executor_cores=cfg.spark_executor_cores,
                executor_memory=cfg.spark_executor_memory,
            )
        )
        spark_start_s = time.monotonic() - t
        doc["startup"] = {"ray_init_s": round(ray_s, 3), "spark_start_s": round(spark_start_s, 3)}
        con.log(f"    ray.init {ray_s:.1f} s, Spark on Ray {spark_start_s:.1f} s")
        advance(2)

        try:
            # 3. the prepared DataFrame, as plan_spark builds it, cached and materialized
            step(2, steps[2])
            spec = wl.WorkloadSpec(
                records=cfg.records,
                keys=cfg.keys or None,
                update_ratio=cfg.update_ratio if cfg.update_ratio >= 0 else None,
                skew=cfg.skew,
                zipf_s=cfg.zipf_s,
                partitions=cfg.partitions,
                payload_bytes=cfg.payload_bytes,
                seed=cfg.seed,
            )
            t = time.monotonic()
            prepared = wl.prepare_stream(spec.generate(spark), cfg.key_field, cfg.num_buckets, cfg.writers).cache()
            n_spark = wl._run_bounded(spark, "materialize the prepared stream", args.step_timeout, prepared.count)
            materialize_s = time.monotonic() - t
            con.log(f"    {n_spark:,} rows prepared and cached in {materialize_s:.1f} s")
            advance(3)

            # (a) Spark writes the prepared rows straight to parquet
            step(3, steps[3])
            spark_dir = os.path.join(scratch, "spark-parquet")
            t = time.monotonic()
            wl._run_bounded(
                spark,
                "df.write.parquet",
                args.step_timeout,
                lambda: prepared.write.mode("overwrite").parquet(spark_dir),
            )
            spark_write_s = time.monotonic() - t
            spark_bytes, spark_files = dir_bytes(spark_dir)
            doc["spark"] = {
                "rows": n_spark,
                "materialize_s": round(materialize_s, 3),
                "write_s": round(spark_write_s, 3),
                "rows_per_s": round(n_spark / spark_write_s, 1),
                "rows_per_s_end_to_end": round(n_spark / (materialize_s + spark_write_s), 1),
                "bytes": spark_bytes,
                "files": spark_files,
            }
            con.log(
                f"    df.write.parquet: {spark_write_s:.2f} s, {n_spark / spark_write_s:,.0f} rows/s, "
                f"{spark_files} files, {spark_bytes / common.MiB:.1f} MiB"
            )
            advance(4)

            # (b) the same rows in Ray's object store, then one Arrow table written by pyarrow
            step(4, steps[4])
            import pyarrow as pa
            import pyarrow.parquet as pq

            t = time.monotonic()
            shards = shards_to_ray(prepared, cfg.writers, timeout_s=args.step_timeout)
            handoff_s = time.monotonic() - t
            t = time.monotonic()
            table = pa.concat_tables([s.table() for s in shards if s.num_rows])
            assemble_s = time.monotonic() - t
            advance(5)
            step(5, steps[5])
            pa_path = os.path.join(scratch, "pyarrow.parquet")
            t = time.monotonic()
            common.bounded(functools.partial(pq.write_table, table, pa_path), args.step_timeout, "pq.write_table")
            pa_write_s = time.monotonic() - t
            doc["pyarrow"] = {
                "rows": table.num_rows,
                "handoff_s": round(handoff_s, 3),
                "assemble_s": round(assemble_s, 3),
                "write_s": round(pa_write_s, 3),
                "rows_per_s": round(table.num_rows / pa_write_s, 1),
                "table_bytes_in_memory": table.nbytes,
                "bytes": os.path.getsize(pa_path),
                "columns": table.column_names,
            }
            con.log(
                f"    hand-off {handoff_s:.2f} s; pq.write_table: {pa_write_s:.2f} s, "
                f"{table.num_rows / pa_write_s:,.0f} rows/s, {os.path.getsize(pa_path) / common.MiB:.1f} MiB"
            )
            del table, shards
            prepared.unpersist()
            advance(6)

            # 2. the commitlab run, writer processes sampled from outside
            step(6, steps[6])
            run_bar = progress.add_task("  checkpoints", total=cfg.checkpoints)

            seen = {"completed": -1}

            def on_progress(p: dict[str, Any]) -> None:
                if p:
                    progress.update(run_bar, completed=p.get("completed", 0))
                    if not con.is_terminal and p.get("completed") != seen["completed"]:
                        seen["completed"] = p.get("completed")
                        con.log(f"    {p.get('completed')}/{p.get('total')} checkpoints completed")

            result, memory, wall = common.run_job_sampled(
                cfg, os.path.join(scratch, "commitlab-out"), interval_s=args.sample_interval, on_progress=on_progress
            )
            progress.update(run_bar, completed=result["checkpoints"]["completed"])
            doc["commitlab"] = commitlab_figures(result, wall, scratch)
            doc["memory"] = memory
            c = doc["commitlab"]
            con.log(
                f"    {c['status']}, exactly-once {'verified' if c['verified'] else 'NOT verified'}: "
                f"{c['rows_per_s_run']:,.0f} rows/s in the run phase"
            )
            advance(7)
        finally:
            stop_spark()

        # ratios
        s, p, c = doc["spark"], doc["pyarrow"], doc["commitlab"]
        doc["ratios"] = {
            "commitlab_run_over_spark_write": round(c["rows_per_s_run"] / s["rows_per_s"], 4),
            "commitlab_run_over_pyarrow_write": round(c["rows_per_s_run"] / p["rows_per_s"], 4),
            "commitlab_end_to_end_over_spark_end_to_end": round(
                c["rows_per_s_end_to_end"] / s["rows_per_s_end_to_end"], 4
            ),
        }
        doc["environment"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
        step(7, steps[7])
        out = args.out
        common.write_json(out + ".json", doc)
        png = plot(doc, out + ".png")
        advance(8)

    print_report(con, doc)
    con.print(f"results: {out}.json, {png}")
    if not args.keep_tmp and not args.tmp:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        con.print(f"tables kept under {scratch}")
    import ray

    ray.shutdown()
    return 0


def commitlab_figures(result: dict[str, Any], wall: float, scratch: str) -> dict[str, Any]:
    tm = result["timing"]
    spark_start = tm.get("spark_start_s", 0.0)
    prepare = tm.get("prepare_s", 0.0)
    expected = tm.get("expected_s", 0.0)
    actors_start = tm["setup_s"] - spark_start - prepare - expected
    collect = tm["total_s"] - tm["setup_s"] - tm["run_s"]
    verify = wall - tm["total_s"]
    e2e = prepare + actors_start + tm["run_s"]
    eo = result.get("exactly_once") or {}
    table_bytes, table_files = dir_bytes(os.path.join(scratch, "hudi-table"))
    snap_bytes, snap_files = hudi_snapshot_bytes(os.path.join(scratch, "hudi-table"))
    data_ops = result["dfs_ops"].get("writer.data", {})
    return {
        "status": result["status"],
        "error": result.get("error"),
        "verified": eo.get("verified"),
        "rows_in": result["rows_in"],
        "records": result["records"],
        "commits": len(result["commits"]),
        "checkpoints_completed": result["checkpoints"]["completed"],
        "rows_per_s_run": result["rows_per_s"],
        "rows_per_s_end_to_end": round(result["records"] / e2e, 1) if e2e > 0 else None,
        "breakdown_s": {
            "spark_start (in the run; warm session)": round(spark_start, 3),
            "prepare + hand-off (Spark -> Ray)": round(prepare, 3),
            "expected state (Spark, for verification)": round(expected, 3),
            "actor start": round(actors_start, 3),
            "run (stream -> Hudi commits)": round(tm["run_s"], 3),
            "collect counters": round(collect, 3),
            "verification + teardown": round(verify, 3),
            "total wall": round(wall, 3),
        },
        "timing": tm,
        "writer_blocked_s": result.get("writer_blocked_s"),
        "commit_to_unblock_s": result.get("commit_to_unblock_s"),
        "dfs_ops_per_checkpoint": result.get("dfs_ops_per_checkpoint"),
        "base_file_writes": data_ops.get("write", 0),
        "base_file_reads": data_ops.get("read", 0),
        # copy-on-write keeps every version of a file group: all versions = bytes written
        "table_bytes_all_versions": table_bytes,
        "table_base_files_all_versions": table_files,
        "table_bytes_latest_snapshot": snap_bytes,
        "table_file_groups": snap_files,
        "write_amplification_bytes": round(table_bytes / snap_bytes, 2) if snap_bytes else None,
    }


def print_report(con: Any, doc: dict[str, Any]) -> None:
    from rich.table import Table

    s, p, c, r = doc["spark"], doc["pyarrow"], doc["commitlab"], doc["ratios"]
    prm = doc["params"]
    t = Table(
        title=f"data plane: {prm['records']:,} records, {prm['writers']} writers, {prm['checkpoints']} checkpoints",
        title_justify="left",
    )
    for col in ("writer", "rows", "seconds", "rows/s", "commitlab run / this", "output MiB"):
        t.add_column(col, justify="left" if col == "writer" else "right")
    t.add_row(
        "commitlab run phase (message-bus, Hudi COW)",
        f"{c['rows_in']:,}",
        f"{c['timing']['run_s']:.2f}",
        f"{c['rows_per_s_run']:,.0f}",
        "1",
        f"{c['table_bytes_latest_snapshot'] / common.MiB:.1f} "
        f"({c['table_bytes_all_versions'] / common.MiB:.0f} written)",
    )
    t.add_row(
        "Spark df.write.parquet (cached, prepared)",
        f"{s['rows']:,}",
        f"{s['write_s']:.2f}",
        f"{s['rows_per_s']:,.0f}",
        f"{r['commitlab_run_over_spark_write']:.3f}",
        f"{s['bytes'] / common.MiB:.1f}",
    )
    t.add_row(
        "pyarrow pq.write_table (one table in memory)",
        f"{p['rows']:,}",
        f"{p['write_s']:.2f}",
        f"{p['rows_per_s']:,.0f}",
        f"{r['commitlab_run_over_pyarrow_write']:.3f}",
        f"{p['bytes'] / common.MiB:.1f}",
    )
    t.add_row(
        "commitlab end to end (prepare+start+run)",
        f"{c['records']:,}",
        f"{c['records'] / c['rows_per_s_end_to_end']:.2f}",
        f"{c['rows_per_s_end_to_end']:,.0f}",
        "",
        "",
    )
    t.add_row(
        "Spark end to end (generate+prepare+write)",
        f"{s['rows']:,}",
        f"{s['materialize_s'] + s['write_s']:.2f}",
        f"{s['rows_per_s_end_to_end']:,.0f}",
        f"e2e/e2e {r['commitlab_end_to_end_over_spark_end_to_end']:.3f}",
        "",
    )
    con.print(t)

    b = Table(
        title=f"commitlab run: {c['status']}, {c['commits']} commits, exactly-once "
        f"{'verified' if c['verified'] else 'NOT verified'}; {c['base_file_writes']} base-file "
        f"writes, {c['table_file_groups']} file groups; bytes written / latest snapshot "
        f"{c['write_amplification_bytes']}",
        title_justify="left",
    )
    b.add_column("phase")
    b.add_column("seconds", justify="right")
    for k, v in c["breakdown_s"].items():
        b.add_row(k, f"{v:.2f}")
    b.add_row(
        "(this script) ray.init / Spark start",
        f"{doc['startup']['ray_init_s']:.2f} / {doc['startup']['spark_start_s']:.2f}",
    )
    con.print(b)

    m = doc["memory"]
    mt = Table(
        title=f"peak RSS per role process (psutil every {m['interval_s']} s, {m['samples']} samples)",
        title_justify="left",
    )
    for col in ("process", "first RSS MiB", "peak RSS MiB", "peak RSS-shared MiB"):
        mt.add_column(col, justify="left" if col == "process" else "right")
    for name, v in m["peak_rss_mib"].items():
        if name.startswith(("taskmanager-", "coordinator", "job-manager")):
            mt.add_row(
                name, f"{m['first_rss_mib'].get(name, 0):.0f}", f"{v:.0f}", f"{m['peak_private_mib'].get(name, 0):.0f}"
            )
    if "task_manager_peak_rss_mean_mib" in m:
        mt.add_row(
            "[bold]task managers: mean / max[/bold]",
            f"{m.get('task_manager_first_rss_mean_mib', 0):.0f}",
            f"{m['task_manager_peak_rss_mean_mib']:.0f} / {m['task_manager_peak_rss_max_mib']:.0f}",
            f"{m['task_manager_peak_private_mean_mib']:.0f}",
        )
    con.print(mt)
    bd = c["breakdown_s"]
    before_write = bd["prepare + hand-off (Spark -> Ray)"] + bd["expected state (Spark, for verification)"]
    con.print(
        f"[bold]ratios[/bold]: commitlab run phase / Spark df.write.parquet = "
        f"{r['commitlab_run_over_spark_write']:.3f}; / pyarrow pq.write_table = "
        f"{r['commitlab_run_over_pyarrow_write']:.3f}; end to end / Spark end to end = "
        f"{r['commitlab_end_to_end_over_spark_end_to_end']:.3f}. Before the first write: prepare + "
        f"hand-off {bd['prepare + hand-off (Spark -> Ray)']:.1f} s, with the expected state "
        f"{before_write:.1f} s"
    )


def plot(doc: dict[str, Any], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, p, c, r = doc["spark"], doc["pyarrow"], doc["commitlab"], doc["ratios"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1.3, 1]})
    names = ["commitlab\nrun phase", "commitlab\nend to end", "Spark\ndf.write.parquet", "pyarrow\npq.write_table"]
    vals = [c["rows_per_s_run"], c["rows_per_s_end_to_end"], s["rows_per_s"], p["rows_per_s"]]
    colors = ["tab:blue", "lightsteelblue", "tab:orange", "tab:green"]
    bars = ax1.bar(names, vals, color=colors)
    ax1.set_yscale("log")
    ax1.set_ylabel("rows/s (log)")
    notes = [
        "",
        "",
        f"commitlab/Spark\n= {r['commitlab_run_over_spark_write']:.3f}",
        f"commitlab/pyarrow\n= {r['commitlab_run_over_pyarrow_write']:.3f}",
    ]
    for b, v, note in zip(bars, vals, notes, strict=True):
        ax1.text(
            b.get_x() + b.get_width() / 2,
            v * 1.08,
            f"{v:,.0f}" + (f"\n{note}" if note else ""),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax1.set_ylim(min(vals) / 3, max(vals) * 12)
    prm = doc["params"]
    ax1.set_title(f"{prm['records']:,} rows, {prm['writers']} writers, {prm['checkpoints']} checkpoints", fontsize=10)

    m = doc["memory"]
    w = m.get("task_manager_peak_rss_mib", {})
    names2 = list(w)
    first = [m["first_rss_mib"].get(n, 0) for n in names2]
    peak = [w[n] for n in names2]
    priv = [m["peak_private_mib"].get(n, 0) for n in names2]
    x = range(len(names2))
    ax2.bar([i - 0.27 for i in x], first, width=0.27, label="first sample (idle worker)", color="lightgrey")
    ax2.bar(list(x), peak, width=0.27, label="peak RSS", color="tab:blue")
    ax2.bar([i + 0.27 for i in x], priv, width=0.27, label="peak RSS - shared", color="tab:purple")
    ax2.set_xticks(list(x), names2)
    ax2.set_ylabel("MiB")
    if peak:
        ax2.axhline(m["task_manager_peak_rss_mean_mib"], color="tab:blue", linestyle="--", linewidth=1)
        ax2.text(
            len(names2) - 0.5,
            m["task_manager_peak_rss_mean_mib"],
            f"mean peak {m['task_manager_peak_rss_mean_mib']:.0f}",
            ha="right",
            va="bottom",
            fontsize=8,
            color="tab:blue",
        )
    if peak:
        ax2.set_ylim(0, max(peak) * 1.35)
    ax2.legend(fontsize=8, loc="upper left", ncol=2)
    ax2.set_title("write-task process memory (psutil, from outside)", fontsize=10)
    fig.suptitle(f"commitlab data plane ({doc['environment']['date'][:10]}, {doc['environment']['cpus']} cores)")
    return common.save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(main())
