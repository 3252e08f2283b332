"""Write tasks on one machine, up to 256: memory per task manager and per task, start-up, commits.

    [PYTHONPATH=<checkout>] .venv/bin/python benchmarks/bench_writers.py [--writers 1,4,16,64,256]
                                                 [--protocol message-bus] [--slots 0]
                                                 [--records-per-writer 200] [--checkpoints 3]
                                                 [--out benchmarks/results/writers] [--plot docs/writers.png]

Each point runs the generator source with ``writers`` write tasks and as many sources, in task
managers of ``--slots`` slots each (0: the job's default, two task managers per CPU), on a local
Ray started once, then verifies the table with the official reader. ``--slots 0,1`` measures the
default beside one task manager per write task (the layout of one process per slot) in one run.
Per point:

- memory: the USS (unique set size: what killing the process would free) each process reports
  about itself at the end of the run (``result.json`` ``placement.processes``), per task manager
  and summed over them, divided by the writer count (per task, a task being a write task and its
  source), and between consecutive points the USS each additional task costs; peak RSS and peak
  private memory (RSS minus shared pages) of every task manager sampled from outside every
  ``--sample-interval`` s (``_common.ActorMemorySampler``);
- start-up: ``actors_up_s`` (driver, from the job's start after the stream plan: every process up and
  every role started; the processes are created before the plan, so a slow plan hides their start)
  and the time to the first completed checkpoint (the driver's progress poll, 0.5 s resolution);
- rows/s, commit-to-unblock latency p50/p99 (a writer waiting for a released instant);
- DFS operations per checkpoint of the protocol roles (coordinator, writers, job manager; base
  files and the driver excluded), in total and the writers' share, and RPCs per checkpoint.

Writes ``<out>.json`` (after every point) and the plot. Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

from runtime.lab.status import Status  # noqa: E402

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

MiB = 1024 * 1024


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 1) if xs else None


def process_memory(result: JobResult) -> dict[str, Any]:
    """USS of the task managers (each, summed, per task) and of the job manager's side."""
    placement = result.ray.placement if result.ray else {}
    procs = placement.get("processes", {})
    tm = {n: p["uss_bytes"] / MiB for n, p in procs.items() if n.startswith("taskmanager-") and p.get("uss_bytes")}
    other = {
        n: p["uss_bytes"] / MiB for n, p in procs.items() if not n.startswith("taskmanager-") and p.get("uss_bytes")
    }
    writers = max(1, result.writers)
    return {
        "processes": len(procs),
        "task_managers": len([n for n in procs if n.startswith("taskmanager-")]),
        "slots_per_task_manager": placement.get("slots_per_task_manager"),
        "task_manager_uss_mean_mib": _mean(list(tm.values())),
        "task_manager_uss_max_mib": round(max(tm.values()), 1) if tm else None,
        "task_managers_uss_total_mib": round(sum(tm.values()), 1) if tm else None,
        "uss_per_task_mib": round(sum(tm.values()) / writers, 2) if tm else None,
        "other_processes_uss_mib": {n: round(v, 1) for n, v in sorted(other.items())},
    }


def point_figures(
    result: JobResult, memory: dict[str, Any], wall: float, first_ckp_s: float | None, rtt_s: float
) -> dict[str, Any]:
    from runtime.lab.compare import figures

    f = figures(result, rtt_s)
    by_role = f.pop("dfs_ops_per_checkpoint_by_role", {})
    return {
        **{
            k: f.get(k)
            for k in (
                "status",
                "exactly_once",
                "commits",
                "checkpoints_completed",
                "checkpoints_aborted",
                "rows_per_s",
                "commit_to_unblock_p50_s",
                "commit_to_unblock_p99_s",
                "dfs_ops_per_checkpoint_total",
                "rpcs_per_checkpoint",
                "error",
            )
        },
        "dfs_ops_per_checkpoint_writers": round(sum(by_role.get("writer", {}).values()), 2),
        "dfs_ops_per_checkpoint_coordinator": round(sum(by_role.get("coordinator", {}).values()), 2),
        "failovers": [fo.error for fo in result.failovers],
        "rows_in": result.figures.rows_in,
        "records": result.records,
        "wall_s": round(wall, 2),
        "timing": result.timing,
        "actors_up_s": result.timing.get("actors_up_s"),
        "first_checkpoint_s": round(first_ckp_s, 2) if first_ckp_s is not None else None,
        **process_memory(result),
        **{k: v for k, v in memory.items() if k.startswith("task_manager_")},
    }


def marginal_uss(points: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Between consecutive points of one layout: the USS each additional task costs."""
    ok = sorted(
        (int(w), r)
        for w, r in points.items()
        if r.get("status") == Status.FINISHED and r.get("task_managers_uss_total_mib")
    )
    out = []
    for (wa, ra), (wb, rb) in zip(ok, ok[1:], strict=False):
        out.append(
            {
                "from": wa,
                "to": wb,
                "task_managers": [ra["task_managers"], rb["task_managers"]],
                "uss_per_additional_task_mib": round(
                    (rb["task_managers_uss_total_mib"] - ra["task_managers_uss_total_mib"]) / (wb - wa), 2
                ),
            }
        )
    return out


def _first_checkpoint_clock(first: dict[str, float], t0: float) -> Callable[[dict[str, Any]], None]:
    """A progress callback that stores in first["t"] the seconds from t0 to the first completed checkpoint."""

    def on_progress(p: dict[str, Any]) -> None:
        if p.get("completed", 0) >= 1 and "t" not in first:
            first["t"] = time.monotonic() - t0

    return on_progress


def layout_name(slots: int) -> str:
    return "default" if slots == 0 else f"{slots} slot(s) per task manager"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", default="1,4,16,64,256", help="comma-separated writer counts")
    ap.add_argument("--protocol", default="message-bus")
    ap.add_argument(
        "--slots",
        default="0",
        help="comma-separated slots per task manager, one layout each (0: the default, two task managers per CPU)",
    )
    ap.add_argument(
        "--max-writers-one-slot",
        type=int,
        default=32,
        help="the layout of one slot per task manager stops here (a process per task: 256 would not fit)",
    )
    ap.add_argument("--records-per-writer", type=int, default=200)
    ap.add_argument("--checkpoints", type=int, default=3)
    ap.add_argument("--checkpoint-interval", type=float, default=0.5)
    ap.add_argument("--out", default="benchmarks/results/writers", help="writes OUT.json")
    ap.add_argument("--plot", default="docs/writers.png")
    ap.add_argument("--job-timeout", type=float, default=900.0, help="JobConfig.job_timeout_s of each run")
    ap.add_argument("--sample-interval", type=float, default=0.5, help="RSS sampling period, s")
    args = ap.parse_args()
    writer_counts = [int(x) for x in args.writers.split(",") if x.strip()]
    layouts = [int(x) for x in args.slots.split(",") if x.strip()]

    from actors.rpc_round_trip import measure_rpc_round_trip
    from runtime.core.config import JobConfig
    from runtime.protocols import PROTOCOLS

    con = common.console()
    scratch = tempfile.mkdtemp(prefix="commitlab-bench-writers-")

    def config(writers: int, slots: int) -> JobConfig:
        cfg = JobConfig(
            source="generator",
            protocol=args.protocol,
            writers=writers,
            slots_per_task_manager=slots,
            records=args.records_per_writer * writers,
            checkpoints=args.checkpoints,
            checkpoint_interval_s=args.checkpoint_interval,
            # hundreds of tasks on 2 cores: calls and polls are slower than usual
            rpc_timeout_s=60.0,
            checkpoint_timeout_s=300.0,
            deadlock_threshold_s=60.0,
            table=os.path.join(scratch, f"w{writers}-s{slots}", "table"),
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
    base = config(writer_counts[0], layouts[0])
    doc: dict[str, Any] = {
        "benchmark": "writers",
        "environment": common.environment(),
        "params": {
            "writers": writer_counts,
            "slots": layouts,
            "protocol": args.protocol,
            "source": "generator",
            "records_per_writer": args.records_per_writer,
            "checkpoints": args.checkpoints,
            "checkpoint_interval_s": args.checkpoint_interval,
            "partitions": base.partitions,
            "buckets_per_partition": "2 per writer",
            "sample_interval_s": args.sample_interval,
        },
        "rpc_round_trip": rtt,
        "layouts": {},
    }
    t_all = time.monotonic()
    for slots in layouts:
        entry: dict[str, Any] = {"slots_per_task_manager": slots, "points": {}}
        doc["layouts"][layout_name(slots)] = entry
        for w in writer_counts:
            if slots == 1 and w > args.max_writers_one_slot:
                continue
            cfg = config(w, slots)
            con.log(f"{w} writers, {layout_name(slots)}: {cfg.records:,} records")
            row = run_point(cfg, args.sample_interval, rtt["p50_s"])
            entry["points"][str(w)] = row
            entry["marginal_uss"] = marginal_uss(entry["points"])
            shutil.rmtree(os.path.dirname(cfg.table), ignore_errors=True)
            common.write_json(args.out + ".json", doc)
            con.log(describe(w, row))
    doc["elapsed_s"] = round(time.monotonic() - t_all, 1)
    common.write_json(args.out + ".json", doc)
    print_tables(con, doc)
    os.makedirs(os.path.dirname(args.plot) or ".", exist_ok=True)
    png = plot(doc, args.plot)
    con.print(f"results: {args.out}.json, {png}  ({doc['elapsed_s']:.0f} s)")
    shutil.rmtree(scratch, ignore_errors=True)
    import ray

    ray.shutdown()
    return 0


def run_point(cfg: Any, sample_interval: float, rtt_s: float) -> dict[str, Any]:
    first: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        result, memory, wall = common.run_job_sampled(
            cfg,
            None,
            interval_s=sample_interval,
            on_progress=_first_checkpoint_clock(first, t0),
            sample_kinds=("taskmanager-",),
        )
        # on_progress counts from JobRun.run()'s start; the first checkpoint is reported from
        # the job's own start (after the stream plan), like actors_up_s
        setup = result.timing.get("setup_s") or 0.0
        first_s = first["t"] - setup if "t" in first else None
        row = point_figures(result, memory, wall, first_s, rtt_s)
    except Exception as exc:  # noqa: BLE001 - one failed point must not lose the others
        row = common.error_row(exc, t0)
    row["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return row


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:.0f}"


def describe(w: int, row: dict[str, Any]) -> str:
    if row.get("status") == "error":
        return f"{w:>3} writers: ERROR {row['error'][:200]}"
    return (
        f"{w:>3} writers: {row['status']}, exactly-once {row['exactly_once']}, "
        f"{row['task_managers']} task manager(s) x {row['slots_per_task_manager']} slot(s), "
        f"actors up {row['actors_up_s']} s, first checkpoint {row['first_checkpoint_s']} s, "
        f"USS per task manager {row['task_manager_uss_mean_mib']} MiB, per task {row['uss_per_task_mib']} MiB, "
        f"commit-to-unblock p50/p99 {_ms(row['commit_to_unblock_p50_s'])}/{_ms(row['commit_to_unblock_p99_s'])} ms, "
        f"DFS ops/ckp {row['dfs_ops_per_checkpoint_total']} (writers {row['dfs_ops_per_checkpoint_writers']})"
    )


def print_tables(con: Any, doc: dict[str, Any]) -> None:
    from rich.table import Table

    for name, entry in doc["layouts"].items():
        t = Table(title=f"{doc['params']['protocol']}, {name}", title_justify="left")
        cols = (
            "writers",
            "TMs x slots",
            "status",
            "actors up s",
            "1st ckp s",
            "USS/TM MiB",
            "USS/task MiB",
            "unblock p50/p99 ms",
            "DFS ops/ckp (writers)",
            "RPCs/ckp",
        )
        for c in cols:
            t.add_column(c, justify="right")
        for w, r in sorted(entry["points"].items(), key=lambda kv: int(kv[0])):
            if r.get("status") == "error":
                t.add_row(w, "-", "error", *["-"] * (len(cols) - 3))
                continue
            t.add_row(
                w,
                f"{r['task_managers']} x {r['slots_per_task_manager']}",
                f"{r['status']}{'' if r['exactly_once'] else ' (not exactly-once)'}",
                f"{r['actors_up_s']}",
                f"{r['first_checkpoint_s']}",
                f"{r['task_manager_uss_mean_mib']}",
                f"{r['uss_per_task_mib']}",
                f"{_ms(r['commit_to_unblock_p50_s'])} / {_ms(r['commit_to_unblock_p99_s'])}",
                f"{r['dfs_ops_per_checkpoint_total']} ({r['dfs_ops_per_checkpoint_writers']})",
                f"{r['rpcs_per_checkpoint']}",
            )
        con.print(t)
        for m in entry.get("marginal_uss", []):
            tms = " -> ".join(str(n) for n in m["task_managers"])
            con.print(
                f"  {m['from']} -> {m['to']} writers ({tms} task managers): "
                f"{m['uss_per_additional_task_mib']} MiB USS per additional task"
            )


def plot(doc: dict[str, Any], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    panels = [
        ("seconds", "start-up: every process up and every role started", lambda r: r["actors_up_s"]),
        ("MiB", "USS per task (task managers' USS / writers)", lambda r: r["uss_per_task_mib"]),
        ("ms", "commit-to-unblock p50 (a waiting writer)", lambda r: (r["commit_to_unblock_p50_s"] or 0) * 1000),
        ("DFS ops per checkpoint", "storage requests (protocol roles)", lambda r: r["dfs_ops_per_checkpoint_total"]),
    ]
    all_ws: set[int] = set()
    for name, entry in doc["layouts"].items():
        pts = {int(w): r for w, r in entry["points"].items() if r.get("status") not in ("error", None)}
        ws = sorted(pts)
        all_ws.update(ws)
        for ax, (_label, _title, get) in zip(axes, panels, strict=True):
            ax.plot(ws, [get(pts[w]) for w in ws], marker="o", label=name)
    for ax, (label, title, _get) in zip(axes, panels, strict=True):
        ax.set_xscale("log", base=2)
        ws = sorted(all_ws)
        ax.set_xticks(ws, [str(w) for w in ws])
        if label.startswith("DFS"):
            ax.set_yscale("log")
        ax.set_xlabel("writers")
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    env = doc["environment"]
    prm = doc["params"]
    fig.suptitle(
        f"commitlab write tasks in task managers on one machine ({env['cpus']} cores, {env['memory_gib']} GiB): "
        f"{prm['protocol']}, {prm['records_per_writer']:,} records/writer, {prm['checkpoints']} checkpoints",
        fontsize=10,
    )
    return common.save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(main())
