"""Protocols against the writer count, on Ray and in the simulator: RFC-50's question at scale.

    .venv/bin/python benchmarks/bench_scaling.py [--hosts ray,sim] [--writers 1,4,16,64,256]
        [--sim-writers 1,4,16,64,256,1024] [--protocols all] [--records-per-writer 1000]
        [--checkpoints 5] [--schedule even|quiet-round] [--out benchmarks/results/scaling]

Tests RFC-50's claim that the timeline server stops storage requests from growing with the number
of writers: every protocol of ``runtime.protocols.PROTOCOLS`` runs the same workload shape at each
writer count (``records = records-per-writer * writers``, the generator source), on Ray (one Ray
for the whole script; write tasks in task managers, as ``commitlab run`` places them) and in the
deterministic simulator (``runtime.sim.host.simulate``, seed ``--seed``, the simulated disk:
no parquet, exactly-once checked by the project's snapshot reader). Per point:

- the protocol roles' DFS operations per checkpoint (``runtime.lab.compare.figures``: coordinator,
  writers and the protocol's own roles; base files and the driver are not counted), by role and
  by operation;
- the timeline server's instant-state requests (GETs) and its directory scans (listings) per
  checkpoint (P3 only);
- control RPCs per checkpoint (the input hand-off ``push_input`` is data, not counted);
- commit-to-unblock latency p50/p99: from the coordinator's instant being visible to a waiting
  writer's unblock (on Ray in real seconds; in the simulator in virtual seconds of the same
  scaled durations);
- rows/s and, on Ray, the task managers' peak RSS (sampled from outside with psutil).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

HOSTS = ("ray", "sim")
LINESTYLE = {"ray": "-", "sim": "--"}


def point_figures(result: JobResult, memory: dict[str, Any], wall: float, rtt_s: float | None) -> dict[str, Any]:
    """One point's row: ``runtime.lab.compare.figures`` plus the role split, the timeline
    server's requests and scans, and the memory sampled from outside."""
    from runtime.lab.compare import figures

    f = figures(result, rtt_s)
    samples = f.pop("commit_to_unblock_samples", [])
    f.pop("exactly_once_detail", None)
    ckp = result.figures.checkpoints
    n_ckp = max(1, ckp.completed + ckp.aborted)
    by_role = f.get("dfs_ops_per_checkpoint_by_role", {})
    f["dfs_ops_per_checkpoint_writers"] = round(sum(by_role.get("writer", {}).values()), 2)
    f["dfs_ops_per_checkpoint_coordinator"] = round(sum(by_role.get("coordinator", {}).values()), 2)
    f["dfs_ops_per_checkpoint_other_roles"] = round(
        f["dfs_ops_per_checkpoint_total"]
        - f["dfs_ops_per_checkpoint_writers"]
        - f["dfs_ops_per_checkpoint_coordinator"],
        2,
    )
    server = by_role.get("timeline-server")
    rpcs = result.figures.rpcs
    # P3: writers' GETs /instantstate/all, the coordinator's refresh POSTs, the server's listings
    f["timeline_server_requests_per_checkpoint"] = (
        round(rpcs.get("get_all_instant_states", 0) / n_ckp, 2) if server is not None else None
    )
    f["timeline_server_refreshes_per_checkpoint"] = (
        round(rpcs.get("refresh", 0) / n_ckp, 2) if server is not None else None
    )
    f["timeline_server_scans_per_checkpoint"] = server.get("list", 0.0) if server is not None else None
    f["commit_to_unblock_samples_n"] = len(samples)
    f["rows_in"] = result.figures.rows_in
    f["records"] = result.records
    f["wall_s"] = round(wall, 3)
    f["timing"] = result.timing
    for key in (
        "task_manager_peak_rss_mean_mib",
        "task_manager_peak_rss_max_mib",
        "task_manager_peak_private_mean_mib",
        "task_manager_first_rss_mean_mib",
    ):
        f[key] = memory.get(key)
    if result.simulation is not None:
        f["virtual_s"] = result.simulation.virtual_s
        f["trace_sha256"] = result.simulation.trace_sha256
    return f


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", default="ray,sim", help="comma-separated: ray, sim")
    ap.add_argument("--writers", default="1,4,16,64,256", help="writer counts on Ray, comma-separated")
    ap.add_argument("--sim-writers", default="1,4,16,64,256,1024", help="writer counts in the simulator")
    ap.add_argument("--protocols", default="", help="comma-separated (default: every protocol)")
    ap.add_argument("--records-per-writer", type=int, default=1_000)
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0, help="the simulator's schedule seed")
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
        help="Hudi write.batch.size in rows; -1 (default): half of a file group's rows per round, so "
        "each round's first batch flushes eagerly and a writer waits for the round's instant (with "
        "the JobConfig default of 20000 nothing flushes before the checkpoint and no "
        "commit-to-unblock latency is observed); 0: JobConfig's default",
    )
    ap.add_argument("--out", default="benchmarks/results/scaling", help="writes OUT.json and OUT.png")
    ap.add_argument("--tmp", default=None, help="scratch directory for the tables (default: a new temp dir)")
    ap.add_argument("--job-timeout", type=float, default=600.0, help="JobConfig.job_timeout_s of each run")
    ap.add_argument(
        "--rpc-timeout",
        type=float,
        default=30.0,
        help="RPC ask timeout, s (not time-scaled: RPC latency does not scale, and 256 writers on 2 "
        "shared cores answer slower than the scaled 0.5 s; 0: the time-scaled default)",
    )
    ap.add_argument("--sample-interval", type=float, default=0.5, help="RSS sampling period on Ray, s")
    return ap.parse_args()


def counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> int:
    from runtime.protocols import PROTOCOLS

    args = parse_args()
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    names = [p.strip() for p in args.protocols.split(",") if p.strip()] or list(PROTOCOLS)
    problems = [f"unknown host {h!r}; choose from {', '.join(HOSTS)} (--hosts)" for h in hosts if h not in HOSTS]
    problems += [
        f"unknown protocol {n!r}; choose from {', '.join(PROTOCOLS)} (--protocols)" for n in names if n not in PROTOCOLS
    ]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    sizes = {"ray": counts(args.writers), "sim": counts(args.sim_writers)}
    con = common.console()
    scratch = args.tmp or tempfile.mkdtemp(prefix="commitlab-bench-scaling-")
    os.makedirs(scratch, exist_ok=True)
    base = job_config(args, names[0], sizes[hosts[0]][0], scratch)
    doc: dict[str, Any] = {
        "benchmark": "scaling",
        "environment": common.environment(),
        "params": {
            "hosts": hosts,
            "writers": {h: sizes[h] for h in hosts},
            "protocols": names,
            "records_per_writer": args.records_per_writer,
            "checkpoints": args.checkpoints,
            "schedule": args.schedule,
            "source": "generator",
            "sim_seed": args.seed,
            "sim_storage": "memory",
            "bucket_flush_rows": {
                str(w): job_config(args, names[0], w, scratch).bucket_flush_rows for h in hosts for w in sizes[h]
            },
            "checkpoint_interval_s": base.checkpoint_interval_s,
            "wait_tick_s": base.wait_tick_s,
            "rpc_timeout_s": base.rpc_timeout_s,
            "time_scale": base.time_scale,
            "buckets_per_partition": "2 per writer",
            "partitions": base.partitions,
        },
        "rpc_round_trip": None,
        "points": {h: {p: {} for p in names} for h in hosts},
    }
    t_all = time.monotonic()
    runs = [(h, w, n) for h in hosts for w in sizes[h] for n in names]
    con.log(f"{len(runs)} runs: {', '.join(f'{h} writers {sizes[h]}' for h in hosts)} x {names}")
    run_points(con, args, doc, runs, scratch)
    doc["elapsed_s"] = round(time.monotonic() - t_all, 1)
    doc["environment"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    common.write_json(args.out + ".json", doc)
    png = plot(doc, args.out + ".png")
    print_tables(con, doc)
    con.print(f"results: {args.out}.json, {png}  ({doc['elapsed_s']:.0f} s)")
    if not args.tmp:
        shutil.rmtree(scratch, ignore_errors=True)
    if "ray" in hosts:
        import ray

        ray.shutdown()
    return 0


def job_config(args: argparse.Namespace, protocol: str, writers: int, scratch: str) -> Any:
    from runtime.core.config import JobConfig
    from runtime.faults.scenarios import with_quiet_round
    from runtime.lab.compare import one_commit_cadence
    from runtime.protocols import PROTOCOLS

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
    elif args.bucket_flush_rows < 0 and args.schedule == "even":
        # half of a file group's rows per round: each round's first batch flushes eagerly and a
        # writer can wait for the round's instant, in as few base-file writes as that takes
        per_group = max(1, cfg.records // cfg.checkpoints // (cfg.partitions * cfg.num_buckets))
        cfg = cfg.replace(bucket_flush_rows=min(cfg.bucket_flush_rows, max(1, per_group // 2)))
    # every protocol commits once a checkpoint interval, as commitlab compare has them
    return one_commit_cadence(cfg).validate(list(PROTOCOLS))


def run_points(
    con: Any, args: argparse.Namespace, doc: dict[str, Any], runs: list[tuple[str, int, str]], scratch: str
) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    rtt_s: float | None = None
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=con,
        disable=not con.is_terminal,
    ) as progress:
        bar = progress.add_task("scaling", total=len(runs))
        for i, (host, w, name) in enumerate(runs, 1):
            if host == "ray" and rtt_s is None:
                from actors.rpc_round_trip import measure_rpc_round_trip

                ray_s = common.start_ray()
                doc["rpc_round_trip"] = rtt = measure_rpc_round_trip()
                rtt_s = rtt["p50_s"]
                con.log(f"ray.init {ray_s:.1f} s; one actor RPC round trip p50 {rtt_s * 1000:.2f} ms")
            progress.update(bar, description=f"{host}: {name}, {w} writers")
            cfg = job_config(args, name, w, scratch)
            t = time.monotonic()
            try:
                row = run_ray_point(cfg, args, rtt_s) if host == "ray" else run_sim_point(cfg, args.seed)
            except Exception as exc:  # noqa: BLE001 - one failed point must not lose the others
                row = common.error_row(exc, t)
            row["load_avg_1m"] = round(os.getloadavg()[0], 2)
            doc["points"][host][name][str(w)] = row
            shutil.rmtree(os.path.dirname(cfg.table), ignore_errors=True)
            common.write_json(args.out + ".json", doc)
            progress.update(bar, completed=i)
            con.log(f"[{i}/{len(runs)}] {host} {name:<22} {w:>4} writers: {describe(row)}")


def run_ray_point(cfg: Any, args: argparse.Namespace, rtt_s: float | None) -> dict[str, Any]:
    result, memory, wall = common.run_job_sampled(cfg, None, interval_s=args.sample_interval)
    return point_figures(result, memory, wall, rtt_s)


def run_sim_point(cfg: Any, seed: int) -> dict[str, Any]:
    from runtime.sim.host import simulate

    t = time.monotonic()
    result = simulate(cfg, seed=seed, storage="memory", verify=True)
    return point_figures(result, {}, time.monotonic() - t, None)


def describe(row: dict[str, Any]) -> str:
    if row.get("status") == "error":
        return f"ERROR {row['error'][:200]}"
    p50, p99 = row.get("commit_to_unblock_p50_s"), row.get("commit_to_unblock_p99_s")
    eo = row.get("exactly_once")
    ts = row.get("timeline_server_requests_per_checkpoint")
    rss = row.get("task_manager_peak_rss_mean_mib")
    return (
        f"{row['status']}{' (DEADLOCK ' + str(row.get('deadlock_task')) + ')' if row.get('deadlock') else ''}, "
        f"{row['commits']} commits, DFS/ckp {row['dfs_ops_per_checkpoint_total']:g} "
        f"(writers {row['dfs_ops_per_checkpoint_writers']:g}), RPCs/ckp {row['rpcs_per_checkpoint']:g}"
        + ("" if ts is None else f", server GETs/ckp {ts:g} scans/ckp {row['timeline_server_scans_per_checkpoint']:g}")
        + f", unblock p50/p99 {_ms(p50)}/{_ms(p99)} ms (n={row['commit_to_unblock_samples_n']}), "
        f"{row['rows_per_s']:,.0f} rows/s"
        + ("" if rss is None else f", task manager peak RSS {rss:.0f} MiB")
        + f", exactly-once {'-' if eo is None else ('ok' if eo else 'VIOLATED')}, {row['wall_s']:.1f} s"
    )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _cell(row: dict[str, Any] | None, key: str, fmt: str) -> str:
    if not row:
        return ""
    if row.get("status") == "error":
        return "[red]error[/red]"
    v = row.get(key)
    mark = " [red]DL[/red]" if row.get("deadlock") else ""
    if row.get("exactly_once") is False:
        mark += " [red]EO![/red]"
    if v is None:
        return "-" + mark
    if fmt == "ms":
        return f"{v * 1000:.1f}" + mark
    return fmt.format(v) + mark


TABLES = (
    (
        "DFS ops per checkpoint, protocol roles (coordinator + writers + protocol roles)",
        "dfs_ops_per_checkpoint_total",
        "{:g}",
    ),
    ("DFS ops per checkpoint made by the write tasks (all writers together)", "dfs_ops_per_checkpoint_writers", "{:g}"),
    ("control RPCs per checkpoint", "rpcs_per_checkpoint", "{:g}"),
    ("commit-to-unblock latency p50, ms", "commit_to_unblock_p50_s", "ms"),
    ("commit-to-unblock latency p99, ms", "commit_to_unblock_p99_s", "ms"),
    ("rows/s (run phase)", "rows_per_s", "{:,.0f}"),
)


def print_tables(con: Any, doc: dict[str, Any]) -> None:
    from rich.table import Table

    prm = doc["params"]
    names = prm["protocols"]
    rtt = doc.get("rpc_round_trip")
    con.print(
        f"[bold]scaling: {prm['records_per_writer']:,} records per writer, {prm['checkpoints']} checkpoints, "
        f"schedule {prm['schedule']}, generator source"
        + (f"; one actor RPC on Ray = {rtt['p50_s'] * 1000:.2f} ms" if rtt else "")
        + "[/bold]"
    )
    for host in prm["hosts"]:
        ws = prm["writers"][host]
        points = doc["points"][host]
        specs = list(TABLES)
        if host == "ray":
            specs.append(("task manager peak RSS, mean, MiB", "task_manager_peak_rss_mean_mib", "{:.0f}"))
        for title, key, fmt in specs:
            t = Table(title=f"{host}: {title}", title_justify="left")
            t.add_column("writers", justify="right")
            for n in names:
                t.add_column(n, justify="right")
            for w in ws:
                t.add_row(str(w), *[_cell(points.get(n, {}).get(str(w)), key, fmt) for n in names])
            con.print(t)
        server = [
            n
            for n in names
            if any(r.get("timeline_server_requests_per_checkpoint") is not None for r in points.get(n, {}).values())
        ]
        for n in server:
            t = Table(title=f"{host}: {n}: the server's requests and scans per checkpoint", title_justify="left")
            for col in ("writers", "GETs (writers)", "refresh POSTs", "scans (listings)", "writers' DFS ops"):
                t.add_column(col, justify="right")
            for w in ws:
                row = points[n].get(str(w))
                if row and row.get("status") != "error":
                    t.add_row(
                        str(w),
                        *[
                            _cell(row, k, "{:g}")
                            for k in (
                                "timeline_server_requests_per_checkpoint",
                                "timeline_server_refreshes_per_checkpoint",
                                "timeline_server_scans_per_checkpoint",
                                "dfs_ops_per_checkpoint_writers",
                            )
                        ],
                    )
            con.print(t)
        con.print(_component_table(host, doc))
    con.print(
        "DL: the run deadlocked (P1's CommitAckEvent behind a blocked mailbox); EO!: exactly-once "
        "violated; '-': no sample (no writer waited for a released instant). The simulator's latencies "
        "are in virtual time (the same scaled durations, no CPU contention)."
    )


def _component_table(host: str, doc: dict[str, Any]) -> Any:
    """Every role's DFS operations per checkpoint by part of the table (data files, timeline,
    metadata table, markers, checkpoint messages, clean, rollback, archive, ...), per protocol and
    writer count: where a commit's cost goes as the writers grow."""
    from rich.table import Table

    points = doc["points"][host]
    rows = [
        (n, w, points[n][str(w)])
        for n in doc["params"]["protocols"]
        for w in doc["params"]["writers"][host]
        if points.get(n, {}).get(str(w), {}).get("dfs_ops_per_checkpoint_by_component")
    ]
    parts = sorted({c for _, _, r in rows for c in r["dfs_ops_per_checkpoint_by_component"]})
    t = Table(title=f"{host}: DFS ops per checkpoint by part of the table (every role)", title_justify="left")
    for col in ("protocol", "writers", *parts):
        t.add_column(col, justify="left" if col == "protocol" else "right")
    for n, w, r in rows:
        got = r["dfs_ops_per_checkpoint_by_component"]
        t.add_row(n, str(w), *[f"{got.get(c, 0):.3g}" for c in parts])
    return t


def _series(points: dict[str, Any], ws: list[int], key: str, scale: float = 1.0) -> tuple[list[int], list[float]]:
    """The points of ``key`` that a log axis can draw (measured, and above zero)."""
    xs, ys = [], []
    for w in ws:
        row = points.get(str(w))
        if row and row.get("status") != "error" and (row.get(key) or 0) > 0:
            xs.append(w)
            ys.append(row[key] * scale)
    return xs, ys


def plot(doc: dict[str, Any], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prm = doc["params"]
    names, hosts = prm["protocols"], prm["hosts"]
    all_ws = sorted({w for h in hosts for w in prm["writers"][h]})
    fig, axes = plt.subplots(2, 3, figsize=(18, 10))
    panels = [
        (axes[0][0], "dfs_ops_per_checkpoint_total", 1.0, "DFS ops per checkpoint (protocol roles)"),
        (axes[0][1], "dfs_ops_per_checkpoint_writers", 1.0, "DFS ops per checkpoint made by the writers"),
        (axes[1][0], "rpcs_per_checkpoint", 1.0, "control RPCs per checkpoint"),
        (axes[1][1], "commit_to_unblock_p50_s", 1000.0, "commit-to-unblock p50, ms"),
        (axes[1][2], "commit_to_unblock_p99_s", 1000.0, "commit-to-unblock p99, ms"),
    ]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^v<>px"
    for ax, key, scale, title in panels:
        for k, n in enumerate(names):
            for host in hosts:
                xs, ys = _series(doc["points"][host].get(n, {}), prm["writers"][host], key, scale)
                if xs:
                    ax.plot(
                        xs,
                        ys,
                        LINESTYLE[host],
                        marker=markers[k % len(markers)],
                        color=colors[k % len(colors)],
                        label=f"{n} ({host})",
                        markersize=4,
                    )
        ax.set_title(title, fontsize=10)
    _server_panel(axes[0][2], doc)
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_ws, [str(w) for w in all_ws])
        ax.set_xlabel("writers")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=2)
    env = doc["environment"]
    fig.suptitle(
        f"commitlab scaling: {prm['records_per_writer']:,} records/writer, {prm['checkpoints']} checkpoints, "
        f"schedule {prm['schedule']}; solid: Ray, dashed: simulator (virtual time) "
        f"({env['date'][:10]}, {env['cpus']} cores)"
    )
    return common.save_figure(fig, path)


def _server_panel(ax: Any, doc: dict[str, Any]) -> None:
    """P3's own figures: the writers' GETs to the server, its scans, and the writers' DFS ops."""
    prm = doc["params"]
    drawn = False
    for host in prm["hosts"]:
        for pts in doc["points"][host].values():
            for key, label, color in (
                ("timeline_server_requests_per_checkpoint", "GETs to the server", "tab:blue"),
                ("timeline_server_scans_per_checkpoint", "server scans (listings)", "tab:red"),
                ("dfs_ops_per_checkpoint_writers", "writers' DFS ops", "tab:green"),
            ):
                if not any(r.get("timeline_server_requests_per_checkpoint") is not None for r in pts.values()):
                    continue
                xs, ys = _series(pts, prm["writers"][host], key)
                if xs:
                    ax.plot(xs, ys, LINESTYLE[host], marker="o", color=color, label=f"{label} ({host})", markersize=4)
                    drawn = True
    ax.set_title("timeline server (P3): requests and scans per checkpoint", fontsize=10)
    if drawn:
        ax.legend(fontsize=7)


if __name__ == "__main__":
    sys.exit(main())
