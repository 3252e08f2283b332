"""Protocols against the writer count: DFS operations per checkpoint and commit-to-unblock latency.

    .venv/bin/python benchmarks/bench_scaling.py [--writers 1,2,4,8,16] [--protocols all]
                                                [--records-per-writer 5000] [--checkpoints 5]
                                                [--schedule even|quiet-round] [--out benchmarks/results/scaling]

Tests RFC-50's claim that the timeline server stops storage requests from growing with the number
of writers: every protocol of ``runtime.protocols.PROTOCOLS`` runs the same workload shape at each
writer count (``records = records-per-writer * writers``, the generator source, one Ray for the
whole script). Per point: the protocol roles' DFS operations per checkpoint
(``runtime.lab.compare.figures``: coordinator, writers and the protocol's own roles; base files and the
driver are not counted), the writers' share of them, commit-to-unblock latency p50/p99, rows/s
and the write tasks' peak RSS (sampled from outside with psutil).

``--schedule even`` (default) puts data in every round, so every protocol commits and produces
DFS counts; ``quiet-round`` is ``runtime.faults.scenarios.with_quiet_round`` (round 2 empty, its
completion late), under which operator-event (P1) deadlocks and is reported so.

Writes ``<out>.json`` (after every point, so an interrupted run keeps what it measured) and
``<out>.png``. Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)


def point_figures(result: dict[str, Any], memory: dict[str, Any], wall: float, rtt_s: float) -> dict[str, Any]:
    from runtime.lab.compare import figures

    f = figures(result, rtt_s)
    samples = f.pop("commit_to_unblock_samples", [])
    f.pop("exactly_once_detail", None)
    by_role = f.get("dfs_ops_per_checkpoint_by_role", {})
    f["dfs_ops_per_checkpoint_writers"] = round(sum(by_role.get("writer", {}).values()), 2)
    f["dfs_ops_per_checkpoint_coordinator"] = round(sum(by_role.get("coordinator", {}).values()), 2)
    f["dfs_ops_per_checkpoint_other_roles"] = round(
        f["dfs_ops_per_checkpoint_total"]
        - f["dfs_ops_per_checkpoint_writers"]
        - f["dfs_ops_per_checkpoint_coordinator"],
        2,
    )
    f["commit_to_unblock_samples_n"] = len(samples)
    f["rows_in"] = result["rows_in"]
    f["records"] = result["records"]
    f["wall_s"] = round(wall, 3)
    f["timing"] = result["timing"]
    f["task_manager_peak_rss_mean_mib"] = memory.get("task_manager_peak_rss_mean_mib")
    f["task_manager_peak_rss_max_mib"] = memory.get("task_manager_peak_rss_max_mib")
    f["task_manager_peak_private_mean_mib"] = memory.get("task_manager_peak_private_mean_mib")
    f["task_manager_first_rss_mean_mib"] = memory.get("task_manager_first_rss_mean_mib")
    return f


def main() -> int:
    from runtime.protocols import PROTOCOLS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", default="1,2,4,8,16", help="comma-separated writer counts")
    ap.add_argument("--protocols", default="", help=f"comma-separated (default all: {','.join(PROTOCOLS)})")
    ap.add_argument("--records-per-writer", type=int, default=5_000)
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument(
        "--schedule",
        choices=["even", "quiet-round"],
        default="even",
        help="even: data in every round; quiet-round: runtime.faults.scenarios.with_quiet_round (P1 deadlocks)",
    )
    ap.add_argument(
        "--bucket-flush-rows",
        type=int,
        default=-1,
        help="Hudi write.batch.size in rows; -1 (default): a quarter of a file group's rows "
        "per round, as with_quiet_round sets it, so rounds flush eagerly and writers "
        "wait for instants (with the JobConfig default of 20000 nothing flushes before "
        "the checkpoint and no commit-to-unblock latency is observed); 0: JobConfig's default",
    )
    ap.add_argument("--out", default="benchmarks/results/scaling", help="writes OUT.json and OUT.png")
    ap.add_argument("--tmp", default=None, help="scratch directory for the tables (default: a new temp dir)")
    ap.add_argument("--job-timeout", type=float, default=180.0, help="JobConfig.job_timeout_s of each run")
    ap.add_argument(
        "--rpc-timeout",
        type=float,
        default=10.0,
        help="RPC ask timeout, s (default Flink's 10 s, not time-scaled: RPC latency does not scale, and 16 "
        "writers on 2 shared cores answer slower than the scaled 0.5 s; 0: the time-scaled default)",
    )
    ap.add_argument("--sample-interval", type=float, default=0.2, help="RSS sampling period, s")
    args = ap.parse_args()

    writer_counts = [int(x) for x in args.writers.split(",") if x.strip()]
    names = [p.strip() for p in args.protocols.split(",") if p.strip()] or list(PROTOCOLS)
    unknown = sorted(set(names) - set(PROTOCOLS))
    if unknown:
        print(f"unknown protocol(s) {unknown}; choose from {', '.join(PROTOCOLS)}", file=sys.stderr)
        return 2

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from actors.job import measure_rpc_round_trip
    from runtime.core.config import JobConfig
    from runtime.faults.scenarios import with_quiet_round
    from runtime.lab.compare import one_commit_cadence

    con = common.console()
    scratch = args.tmp or tempfile.mkdtemp(prefix="commitlab-bench-scaling-")
    os.makedirs(scratch, exist_ok=True)

    def config(protocol: str, writers: int) -> JobConfig:
        cfg = JobConfig(
            source="generator",
            protocol=protocol,
            writers=writers,
            records=args.records_per_writer * writers,
            checkpoints=args.checkpoints,
            table=os.path.join(scratch, f"{protocol}-w{writers}", "table"),
            job_timeout_s=args.job_timeout,
            **({"rpc_timeout_s": args.rpc_timeout} if args.rpc_timeout > 0 else {}),
        )
        if args.schedule == "quiet-round":
            cfg = with_quiet_round(cfg)
            if args.bucket_flush_rows > 0:
                cfg = cfg.replace(bucket_flush_rows=args.bucket_flush_rows)
        elif args.bucket_flush_rows > 0:
            cfg = cfg.replace(bucket_flush_rows=args.bucket_flush_rows)
        elif args.bucket_flush_rows < 0:
            # as with_quiet_round sizes it: a quarter of a file group's rows per round, so each
            # round's first batches flush eagerly and a writer can wait for the round's instant
            per_group = max(1, cfg.records // cfg.checkpoints // (cfg.partitions * cfg.num_buckets))
            cfg = cfg.replace(bucket_flush_rows=min(cfg.bucket_flush_rows, max(1, per_group // 4)))
        # every protocol commits once a checkpoint interval, as commitlab compare has them
        return one_commit_cadence(cfg).validate(list(PROTOCOLS))

    base = config(names[0], writer_counts[0])
    con.log(f"starting Ray; {len(writer_counts) * len(names)} runs: writers {writer_counts} x {names}")
    ray_s = common.start_ray()
    rtt = measure_rpc_round_trip()
    con.log(f"ray.init {ray_s:.1f} s; one actor RPC round trip p50 {rtt['p50_s'] * 1000:.2f} ms")
    doc: dict[str, Any] = {
        "benchmark": "scaling",
        "environment": common.environment(),
        "params": {
            "writers": writer_counts,
            "protocols": names,
            "records_per_writer": args.records_per_writer,
            "checkpoints": args.checkpoints,
            "schedule": args.schedule,
            "source": "generator",
            "bucket_flush_rows": {str(w): config(names[0], w).bucket_flush_rows for w in writer_counts},
            "checkpoint_interval_s": base.checkpoint_interval_s,
            "wait_tick_s": base.wait_tick_s,
            "rpc_timeout_s": base.rpc_timeout_s,
            "time_scale": base.time_scale,
            "buckets_per_partition": "2 per writer",
            "partitions": base.partitions,
        },
        "rpc_round_trip": rtt,
        "points": {p: {} for p in names},
    }
    out = args.out
    total = len(writer_counts) * len(names)
    i = 0
    t_all = time.monotonic()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=con,
        disable=not con.is_terminal,
    ) as progress:
        bar = progress.add_task("scaling", total=total)
        for w in writer_counts:
            for name in names:
                i += 1
                progress.update(bar, description=f"{name}, {w} writers")
                cfg = config(name, w)
                t = time.monotonic()
                try:
                    result, memory, wall = common.run_job_sampled(cfg, None, interval_s=args.sample_interval)
                    row = point_figures(result, memory, wall, rtt["p50_s"])
                except Exception as exc:  # noqa: BLE001 - one failed point must not lose the others
                    row = {
                        "status": "error",
                        "error": f"{type(exc).__name__}: {exc}"[:2000],
                        "traceback": traceback.format_exc()[-4000:],
                        "wall_s": round(time.monotonic() - t, 3),
                    }
                row["load_avg_1m"] = round(os.getloadavg()[0], 2)
                doc["points"][name][str(w)] = row
                shutil.rmtree(os.path.dirname(cfg.table), ignore_errors=True)
                common.write_json(out + ".json", doc)
                progress.update(bar, completed=i)
                con.log(f"[{i}/{total}] {name:<24} {w:>2} writers: {describe(row)}")
    doc["elapsed_s"] = round(time.monotonic() - t_all, 1)
    doc["environment"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    common.write_json(out + ".json", doc)
    png = plot(doc, out + ".png")
    print_tables(con, doc)
    con.print(f"results: {out}.json, {png}  ({doc['elapsed_s']:.0f} s)")
    if not args.tmp:
        shutil.rmtree(scratch, ignore_errors=True)
    import ray

    ray.shutdown()
    return 0


def describe(row: dict[str, Any]) -> str:
    if row.get("status") == "error":
        return f"ERROR {row['error'][:200]}"
    p50 = row.get("commit_to_unblock_p50_s")
    eo = row.get("exactly_once")
    return (
        f"{row['status']}{' (DEADLOCK ' + str(row.get('deadlock_task')) + ')' if row.get('deadlock') else ''}, "
        f"{row['commits']} commits, DFS/ckp {row['dfs_ops_per_checkpoint_total']:g} "
        f"(writers {row['dfs_ops_per_checkpoint_writers']:g}), "
        f"unblock p50 {'-' if p50 is None else f'{p50 * 1000:.1f} ms'} (n={row['commit_to_unblock_samples_n']}), "
        f"{row['rows_per_s']:,.0f} rows/s, "
        f"task manager peak RSS {row.get('task_manager_peak_rss_mean_mib') or 0:.0f} MiB, "
        f"exactly-once {'-' if eo is None else ('ok' if eo else 'VIOLATED')}, {row['wall_s']:.1f} s"
    )


def _cell(row: dict[str, Any] | None, key: str, fmt: str) -> str:
    if not row:
        return ""
    if row.get("status") == "error":
        return "[red]error[/red]"
    v = row.get(key)
    mark = " [red]DL[/red]" if row.get("deadlock") else ""
    if v is None:
        return "-" + mark
    return fmt.format(v) + mark


def print_tables(con: Any, doc: dict[str, Any]) -> None:
    from rich.table import Table

    prm = doc["params"]
    names, ws = prm["protocols"], prm["writers"]
    specs = [
        (
            "DFS ops per checkpoint, protocol roles (coordinator + writers + protocol roles)",
            "dfs_ops_per_checkpoint_total",
            "{:g}",
        ),
        (
            "DFS ops per checkpoint made by the write tasks (all writers together)",
            "dfs_ops_per_checkpoint_writers",
            "{:g}",
        ),
        ("commit-to-unblock latency p50, ms", "commit_to_unblock_p50_s", "ms"),
        ("commit-to-unblock latency p99, ms", "commit_to_unblock_p99_s", "ms"),
        ("rows/s (run phase)", "rows_per_s", "{:,.0f}"),
        ("task manager peak RSS, mean, MiB", "task_manager_peak_rss_mean_mib", "{:.0f}"),
    ]
    con.print(
        f"[bold]scaling: {prm['records_per_writer']:,} records per writer, {prm['checkpoints']} checkpoints, "
        f"schedule {prm['schedule']}, generator source; one actor RPC = "
        f"{doc['rpc_round_trip']['p50_s'] * 1000:.2f} ms[/bold]"
    )
    for title, key, fmt in specs:
        t = Table(title=title, title_justify="left")
        t.add_column("writers", justify="right")
        for n in names:
            t.add_column(n, justify="right")
        for w in ws:
            cells = []
            for n in names:
                row = doc["points"].get(n, {}).get(str(w))
                if fmt == "ms":
                    r2 = dict(row or {})
                    if r2.get(key) is not None:
                        r2[key] = r2[key] * 1000
                    cells.append(_cell(r2 if row else None, key, "{:.1f}"))
                else:
                    cells.append(_cell(row, key, fmt))
            t.add_row(str(w), *cells)
        con.print(t)
    con.print(
        "DL: the run deadlocked (P1's CommitAckEvent behind a blocked mailbox); '-': no sample "
        "(no writer waited for a released instant)"
    )


def plot(doc: dict[str, Any], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prm = doc["params"]
    names, ws = prm["protocols"], prm["writers"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    markers = "osD^v<>px"
    deadlock_labelled = False
    for k, n in enumerate(names):
        pts = doc["points"].get(n, {})
        xs, dfs, lat, xs_l, dl_x, dl_y = [], [], [], [], [], []
        for w in ws:
            row = pts.get(str(w))
            if not row or row.get("status") == "error":
                continue
            xs.append(w)
            dfs.append(row["dfs_ops_per_checkpoint_total"])
            if row.get("deadlock"):
                dl_x.append(w)
                dl_y.append(row["dfs_ops_per_checkpoint_total"])
            if row.get("commit_to_unblock_p50_s") is not None:
                xs_l.append(w)
                lat.append(row["commit_to_unblock_p50_s"] * 1000)
        m = markers[k % len(markers)]
        (line,) = ax1.plot(xs, dfs, marker=m, label=n)
        if dl_x:
            ax1.scatter(
                dl_x, dl_y, marker="x", s=120, color="red", zorder=5, label=None if deadlock_labelled else "deadlocked"
            )
            deadlock_labelled = True
        if xs_l:
            ax2.plot(xs_l, lat, marker=m, label=n, color=line.get_color())
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ws, [str(w) for w in ws])
        ax.set_xlabel("writers")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_yscale("log")
    ax1.set_ylabel("DFS ops per checkpoint (protocol roles, log)")
    ax1.set_title("storage requests of the commit protocol", fontsize=10)
    ax1.legend(fontsize=8)
    rtt = (doc.get("rpc_round_trip") or {}).get("p50_s")
    if rtt:
        ax2.axhline(rtt * 1000, color="grey", linestyle="--", linewidth=1)
        ax2.text(ws[0], rtt * 1000, " one actor RPC", va="bottom", color="grey", fontsize=8)
    ax2.set_yscale("log")
    ax2.set_ylabel("commit-to-unblock p50 (ms, log)")
    ax2.set_title("how long a blocked writer waits after the instant is released", fontsize=10)
    if ax2.get_legend_handles_labels()[1]:
        ax2.legend(fontsize=8)
    else:
        ax2.text(
            0.5,
            0.5,
            "no sample: no writer waited\nfor a released instant",
            transform=ax2.transAxes,
            ha="center",
            color="grey",
        )
    env = doc["environment"]
    fig.suptitle(
        f"commitlab scaling: {prm['records_per_writer']:,} records/writer, {prm['checkpoints']} checkpoints, "
        f"schedule {prm['schedule']} ({env['date'][:10]}, {env['cpus']} cores)"
    )
    return common.save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(main())
