"""Write tasks on one machine, up to 32: memory per write task, start-up time, throughput, commits.

    [PYTHONPATH=<checkout>] .venv/bin/python benchmarks/bench_writers.py [--writers 1,4,16,32] [--protocol message-bus]
                                                 [--records-per-writer 2000] [--checkpoints 5]
                                                 [--out benchmarks/results/writers] [--plot docs/writers.png]

Each point runs the generator source with ``writers`` write tasks and as many sources (2 x writers
+ 2 role actors, one process each) on a local Ray started once, then verifies the table with the
official reader. Per point:

- memory per write task: peak RSS and peak private memory (RSS minus shared pages) sampled from
  outside every ``--sample-interval`` s (``_common.ActorMemorySampler``), and the USS (unique set
  size: what killing the process would free) each write task reports about itself at the end of
  the run (``result.json`` ``placement.roles``);
- start-up: ``actors_up_s`` (driver: every role actor created and started) and the time to the
  first completed checkpoint (seen by the driver's progress poll, 0.5 s resolution);
- rows/s, commit-to-unblock latency p50/p99 (a writer waiting for a released instant) and run
  time per commit;
- DFS operations per checkpoint of the protocol roles (coordinator, writers, job manager; base
  files and the driver excluded), in total and the writers' share.

Writes ``<out>.json`` (after every point) and the plot. Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

MiB = 1024 * 1024


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 1) if xs else None


def point_figures(
    result: dict[str, Any], memory: dict[str, Any], wall: float, first_ckp_s: float | None, rtt_s: float
) -> dict[str, Any]:
    from runtime.lab.compare import figures

    f = figures(result, rtt_s)
    f.pop("commit_to_unblock_samples", None)
    f.pop("exactly_once_detail", None)
    by_role = f.pop("dfs_ops_per_checkpoint_by_role", {})
    roles = result.get("placement", {}).get("roles", {})
    uss = [r["uss_bytes"] / MiB for n, r in roles.items() if n.startswith("writer-") and r.get("uss_bytes")]
    rss_end = [r["rss_bytes"] / MiB for n, r in roles.items() if n.startswith("writer-") and r.get("rss_bytes")]
    src_uss = [r["uss_bytes"] / MiB for n, r in roles.items() if n.startswith("source-") and r.get("uss_bytes")]
    commits = max(1, len(result["commits"]))
    return {
        **{
            k: f[k]
            for k in (
                "status",
                "exactly_once",
                "commits",
                "checkpoints_completed",
                "checkpoints_aborted",
                "rows_per_s",
                "commit_to_unblock_p50_s",
                "commit_to_unblock_p99_s",
                "dfs_ops_per_checkpoint",
                "dfs_ops_per_checkpoint_total",
                "rpcs_per_checkpoint",
                "error",
            )
        },
        "dfs_ops_per_checkpoint_writers": round(sum(by_role.get("writer", {}).values()), 2),
        "dfs_ops_per_checkpoint_coordinator": round(sum(by_role.get("coordinator", {}).values()), 2),
        "run_s_per_commit": round(result["timing"]["run_s"] / commits, 3),
        "failovers": [f.get("error") for f in result.get("failovers", [])],
        "rows_in": result["rows_in"],
        "records": result["records"],
        "wall_s": round(wall, 2),
        "timing": result["timing"],
        "actors_up_s": result["timing"].get("actors_up_s"),
        "first_checkpoint_s": round(first_ckp_s, 2) if first_ckp_s is not None else None,
        "role_actors": len(roles),
        "writer_uss_mean_mib": _mean(uss),
        "writer_uss_max_mib": round(max(uss), 1) if uss else None,
        "writer_rss_end_mean_mib": _mean(rss_end),
        "source_uss_mean_mib": _mean(src_uss),
        "writer_peak_rss_mean_mib": memory.get("writer_peak_rss_mean_mib"),
        "writer_peak_rss_max_mib": memory.get("writer_peak_rss_max_mib"),
        "writer_peak_private_mean_mib": memory.get("writer_peak_private_mean_mib"),
        "writer_first_rss_mean_mib": memory.get("writer_first_rss_mean_mib"),
    }


def _first_checkpoint_clock(first: dict[str, float], t0: float) -> Callable[[dict[str, Any]], None]:
    """A progress callback that stores in first["t"] the seconds from t0 to the first completed checkpoint."""

    def on_progress(p: dict[str, Any]) -> None:
        if p.get("completed", 0) >= 1 and "t" not in first:
            first["t"] = time.monotonic() - t0

    return on_progress


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", default="1,4,16,32", help="comma-separated writer counts")
    ap.add_argument("--protocol", default="message-bus")
    ap.add_argument("--records-per-writer", type=int, default=2_000)
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument("--checkpoint-interval", type=float, default=0.5)
    ap.add_argument("--out", default="benchmarks/results/writers", help="writes OUT.json")
    ap.add_argument("--plot", default="docs/writers.png")
    ap.add_argument("--job-timeout", type=float, default=400.0, help="JobConfig.job_timeout_s of each run")
    ap.add_argument("--sample-interval", type=float, default=0.5, help="RSS sampling period, s")
    args = ap.parse_args()
    writer_counts = [int(x) for x in args.writers.split(",") if x.strip()]

    from actors.job import measure_rpc_round_trip
    from runtime.core.config import JobConfig
    from runtime.protocols import PROTOCOLS

    con = common.console()
    scratch = tempfile.mkdtemp(prefix="commitlab-bench-writers-")

    def config(writers: int) -> JobConfig:
        cfg = JobConfig(
            source="generator",
            protocol=args.protocol,
            writers=writers,
            records=args.records_per_writer * writers,
            checkpoints=args.checkpoints,
            checkpoint_interval_s=args.checkpoint_interval,
            # 66 actor processes on 2 cores: calls and polls are slower than usual
            rpc_timeout_s=60.0,
            checkpoint_timeout_s=120.0,
            deadlock_threshold_s=30.0,
            table=os.path.join(scratch, f"w{writers}", "table"),
            job_timeout_s=args.job_timeout,
        )
        # half a file group's rows per round: each round flushes once before its barrier, so a
        # writer waits for the round's instant and commit-to-unblock latency is observed (with
        # the default of 20000 rows nothing flushes early and no writer ever waits)
        per_group = max(1, cfg.records // cfg.checkpoints // (cfg.partitions * cfg.num_buckets))
        return cfg.replace(bucket_flush_rows=max(1, per_group // 2)).validate(list(PROTOCOLS))

    ray_s = common.start_ray()
    rtt = measure_rpc_round_trip()
    con.log(f"ray.init {ray_s:.1f} s; actor RPC round trip p50 {rtt['p50_s'] * 1000:.2f} ms")
    base = config(writer_counts[0])
    doc: dict[str, Any] = {
        "benchmark": "writers",
        "environment": {k: v for k, v in common.environment().items() if k != "project"},  # no machine paths
        "params": {
            "writers": writer_counts,
            "protocol": args.protocol,
            "source": "generator",
            "records_per_writer": args.records_per_writer,
            "checkpoints": args.checkpoints,
            "checkpoint_interval_s": args.checkpoint_interval,
            "partitions": base.partitions,
            "buckets_per_partition": "2 per writer",
            "bucket_flush_rows": base.bucket_flush_rows,
            "sample_interval_s": args.sample_interval,
        },
        "rpc_round_trip": rtt,
        "points": {},
    }
    t_all = time.monotonic()
    for w in writer_counts:
        cfg = config(w)
        con.log(f"{w} writers: {cfg.records:,} records, {2 * w + 2} role actors")
        first: dict[str, float] = {}
        t0 = time.monotonic()
        on_progress = _first_checkpoint_clock(first, t0)

        try:
            result, memory, wall = common.run_job_sampled(
                cfg, None, interval_s=args.sample_interval, on_progress=on_progress, sample_kinds=("writer-",)
            )
            # on_progress counts from JobRun.run()'s start; the first checkpoint is reported from
            # the job's own start (after the stream plan), like actors_up_s
            setup = result["timing"].get("setup_s", 0.0)
            first_s = first["t"] - setup if "t" in first else None
            row = point_figures(result, memory, wall, first_s, rtt["p50_s"])
        except Exception as exc:  # noqa: BLE001 - one failed point must not lose the others
            row = {
                "status": "error",
                "error": f"{type(exc).__name__}: {exc}"[:2000],
                "traceback": traceback.format_exc()[-4000:],
                "wall_s": round(time.monotonic() - t0, 2),
            }
        row["load_avg_1m"] = round(os.getloadavg()[0], 2)
        doc["points"][str(w)] = row
        shutil.rmtree(os.path.dirname(cfg.table), ignore_errors=True)
        common.write_json(args.out + ".json", doc)
        con.log(describe(w, row))
    doc["elapsed_s"] = round(time.monotonic() - t_all, 1)
    common.write_json(args.out + ".json", doc)
    os.makedirs(os.path.dirname(args.plot) or ".", exist_ok=True)
    png = plot(doc, args.plot)
    con.print(f"results: {args.out}.json, {png}  ({doc['elapsed_s']:.0f} s)")
    shutil.rmtree(scratch, ignore_errors=True)
    import ray

    ray.shutdown()
    return 0


def describe(w: int, row: dict[str, Any]) -> str:
    if row.get("status") == "error":
        return f"{w:>2} writers: ERROR {row['error'][:200]}"
    return (
        f"{w:>2} writers: {row['status']}, exactly-once {row['exactly_once']}, "
        f"{row['rows_per_s']:,.0f} rows/s, actors up {row['actors_up_s']} s, first checkpoint "
        f"{row['first_checkpoint_s']} s, writer USS {row['writer_uss_mean_mib']} MiB "
        f"(peak RSS {row['writer_peak_rss_mean_mib']} MiB, private {row['writer_peak_private_mean_mib']} MiB), "
        f"commit-to-unblock p50 {row['commit_to_unblock_p50_s']} s, "
        f"DFS ops/ckp {row['dfs_ops_per_checkpoint_total']} (writers {row['dfs_ops_per_checkpoint_writers']})"
    )


def plot(doc: dict[str, Any], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = {int(w): r for w, r in doc["points"].items() if r.get("status") != "error"}
    ws = sorted(pts)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    series = [
        ("rows/s", [pts[w]["rows_per_s"] for w in ws], None),
        ("commit-to-unblock p50 (ms)", [(pts[w]["commit_to_unblock_p50_s"] or 0) * 1000 for w in ws], None),
        (
            "DFS ops per checkpoint",
            [pts[w]["dfs_ops_per_checkpoint_total"] for w in ws],
            ("writers' share", [pts[w]["dfs_ops_per_checkpoint_writers"] for w in ws]),
        ),
        (
            "seconds",
            [pts[w]["actors_up_s"] or 0 for w in ws],
            ("first checkpoint", [pts[w]["first_checkpoint_s"] or 0 for w in ws]),
        ),
    ]
    titles = [
        "throughput",
        "commit latency seen by a waiting writer",
        "storage requests (protocol roles)",
        "start-up: actors up / first checkpoint",
    ]
    for ax, (label, ys, extra), title in zip(axes, series, titles, strict=True):
        ax.plot(
            ws,
            ys,
            marker="o",
            label="total" if extra and "DFS" in label else ("actors up" if label == "seconds" else label),
        )
        if extra:
            ax.plot(ws, extra[1], marker="s", label=extra[0])
            ax.legend(fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ws, [str(w) for w in ws])
        ax.set_xlabel("writers")
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    mem = [pts[w]["writer_uss_mean_mib"] for w in ws]
    env = doc["environment"]
    prm = doc["params"]
    fig.suptitle(
        f"commitlab write tasks on one machine ({env['cpus']} cores): {prm['protocol']}, "
        f"{prm['records_per_writer']:,} records/writer, {prm['checkpoints']} checkpoints; "
        f"USS per write task {', '.join(f'{w}: {m} MiB' for w, m in zip(ws, mem, strict=True))}",
        fontsize=10,
    )
    return common.save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(main())
