"""How fast the simulator runs: simulated checkpoints per real second, and deadlock seeds.

Prints and returns figures; asserts nothing about time (machines differ). Every figure comes with
its real (wall-clock) time and the process's CPU time: on a shared machine the first measures the
neighbours too, the second only the simulator. Run

    python benchmarks/bench_sim.py [--writers 16] [--checkpoints 50] [--deadlock-seeds 1000]
                                   [--explore-seeds 30] [--jobs N] [--out FILE]

Workloads (all with ``--writers`` writers):

* ``protocol``: the protocol's own cost: 10 rows per writer per round, one partition with one
  bucket per writer, so each checkpoint writes one small file group per writer;
* ``data``: the default layout (4 partitions, 2 buckets per writer each) with 200 rows per
  writer per round: the copy-on-write data plane (merging every touched file group) shows;
* each on the simulated disk (``memory``: no parquet) and with real parquet (``disk``);
* ``deadlock``: ``--deadlock-seeds`` seeds of ``commitlab explore --scenario deadlock`` on P1;
* ``explore``: every scenario x protocol, ``--explore-seeds`` seeds each (what exploration finds).

One simulation runs on one thread. With ``--jobs N`` (default: one per CPU) the checkpoint
workloads are also run N processes side by side, and the deadlock seeds and the exploration use N
worker processes, as ``commitlab explore --jobs N`` does: that is the throughput a user exploring
seeds gets. Both figures are printed and kept.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402, F401  (sets sys.path to the project root)

from runtime.core.config import JobConfig  # noqa: E402
from runtime.core.json_doc import JsonObject  # noqa: E402
from runtime.lab.status import Status  # noqa: E402
from runtime.sim.host import simulate  # noqa: E402

# real-parquet tables in memory when the machine has /dev/shm: a disk's latency is not the simulator's
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

WORKLOADS = {
    "protocol": {"rows_per_writer_round": 10, "partitions": 1, "buckets_per_writer": 1},
    "data": {"rows_per_writer_round": 200, "partitions": 4, "buckets_per_writer": 2},
}


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _cfg(protocol: str, writers: int, checkpoints: int, workload: str) -> JobConfig:
    w = WORKLOADS[workload]
    return JobConfig(
        protocol=protocol,
        source="generator",
        writers=writers,
        checkpoints=checkpoints,
        records=writers * checkpoints * w["rows_per_writer_round"],
        partitions=w["partitions"],
        buckets=writers * w["buckets_per_writer"],
    )


def _warm_up(cfg: JobConfig) -> None:
    """Imports and first-call costs are not the simulator's speed: a short run first."""
    simulate(
        cfg.replace(checkpoints=2, records=cfg.records // cfg.checkpoints * 2), seed=0, storage="memory", verify=False
    )


def _timed_run(cfg: JobConfig, seed: int, storage: str) -> JsonObject:
    """One measured run (the exactly-once check is left out: it is the verifier's time)."""
    with tempfile.TemporaryDirectory(prefix="commitlab-bench-", dir=SCRATCH) as d:
        t, c = time.perf_counter(), time.process_time()
        r = simulate(cfg, seed=seed, workdir=d if storage == "disk" else None, storage=storage, verify=False)
        real, cpu = time.perf_counter() - t, time.process_time() - c
    if r.status != Status.FINISHED:
        raise RuntimeError(f"seed {seed}: the benchmark run ended {r.status.value}: {r.error}")
    done = r.figures.checkpoints.completed
    return {
        "seed": seed,
        "real_s": round(real, 3),
        "cpu_s": round(cpu, 3),
        "virtual_s": r.sim.virtual_s,
        "checkpoints": done,
        "messages": r.sim.sim["messages"],
        "trace_events": r.sim.trace_events,
        "checkpoints_per_real_s": round(done / real, 2),
        "checkpoints_per_cpu_s": round(done / cpu, 2),
    }


def _worker_ready(_: int) -> int:
    time.sleep(0.3)  # long enough that every worker takes one: all are up before the clock starts
    return os.getpid()


def bench_checkpoints(
    *,
    protocol: str = "message-bus",
    writers: int = 16,
    checkpoints: int = 50,
    workload: str = "protocol",
    storage: str = "memory",
    seeds: int = 3,
    jobs: int = 1,
) -> JsonObject:
    """Simulated checkpoints per real (and per CPU) second for one workload.

    ``jobs`` > 1 also runs the seeds in that many worker processes side by side, as ``commitlab
    explore --jobs`` does, and reports the aggregate: every run's checkpoints over the wall-clock
    time of the batch (one simulation is single-threaded; a machine simulates one per core)."""
    cfg = _cfg(protocol, writers, checkpoints, workload)
    _warm_up(cfg)
    runs = [_timed_run(cfg, seed, storage) for seed in range(seeds)]
    doc = {
        "protocol": protocol,
        "writers": writers,
        "checkpoints": checkpoints,
        "workload": workload,
        "storage": storage,
        "records": cfg.records,
        "partitions": cfg.partitions,
        "buckets_per_partition": cfg.num_buckets,
        "runs": runs,
        "checkpoints_per_real_s_median": statistics.median(x["checkpoints_per_real_s"] for x in runs),
        "checkpoints_per_cpu_s_median": statistics.median(x["checkpoints_per_cpu_s"] for x in runs),
    }
    if jobs > 1:
        n = max(seeds, 2 * jobs)
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_warm_up, initargs=(cfg,)
        ) as pool:
            list(pool.map(_worker_ready, range(jobs)))
            t = time.perf_counter()
            par = list(pool.map(_timed_run, [cfg] * n, range(n), [storage] * n))
            wall = time.perf_counter() - t
        done = sum(x["checkpoints"] for x in par)
        doc["parallel"] = {
            "jobs": jobs,
            "runs": n,
            "checkpoints": done,
            "real_s": round(wall, 3),
            "checkpoints_per_real_s": round(done / wall, 2),
            "per_run_checkpoints_per_real_s_median": statistics.median(x["checkpoints_per_real_s"] for x in par),
        }
    return doc


def bench_deadlock_seeds(seeds: int = 1000, protocol: str = "operator-event", jobs: int = 1) -> JsonObject:
    """``seeds`` seeds of the deadlock scenario, as ``commitlab explore --jobs JOBS`` runs them
    (CPU time only without worker processes: it would be this process's alone)."""
    from runtime.sim.explore import explore

    t, c = time.perf_counter(), time.process_time()
    doc = explore("deadlock", list(range(seeds)), [protocol], jobs=jobs)
    real, cpu = time.perf_counter() - t, time.process_time() - c
    own_cpu = jobs <= 1  # with worker processes this process's CPU time measures nothing
    return {
        "scenario": "deadlock",
        "protocol": protocol,
        "seeds": seeds,
        "real_s": round(real, 2),
        "cpu_s": round(cpu, 2) if own_cpu else None,
        "real_s_per_seed": round(real / seeds, 4),
        "cpu_s_per_seed": round(cpu / seeds, 4) if own_cpu else None,
        "jobs": jobs,
        "counts": doc["counts"][protocol],
        "run_s_mean": doc["timing"]["per_run_s_mean"],
        "command": f"commitlab explore --scenario deadlock --seeds {seeds} --protocol {protocol} --jobs {jobs}",
    }


def bench_explore(seeds: int, jobs: int = 1) -> JsonObject:
    """Every scenario x every protocol, ``seeds`` seeds each: outcome counts and, per cell, the
    first seed of each outcome that is not a pass (with its replay command)."""
    from runtime.protocols import PROTOCOLS
    from runtime.sim.explore import explore
    from runtime.sim.schedule import SCENARIOS

    t, c = time.perf_counter(), time.process_time()
    cells = []
    for scenario in SCENARIOS:
        doc = explore(scenario, list(range(seeds)), list(PROTOCOLS), jobs=jobs)
        for protocol in PROTOCOLS:
            runs = [r for r in doc["runs"] if r["protocol"] == protocol]
            firsts = {}
            for r in runs:
                if r["outcome"] != "passed" and r["outcome"] not in firsts:
                    firsts[r["outcome"]] = {
                        "seed": r["seed"],
                        "invariant": r["invariant"],
                        "detail": r["detail"][:300],
                        "schedule": r["schedule"],
                        "replay": r.get("replay"),
                    }
            cells.append(
                {"scenario": scenario, "protocol": protocol, "counts": doc["counts"][protocol], "first": firsts}
            )
    return {
        "seeds_per_cell": seeds,
        "jobs": jobs,
        "real_s": round(time.perf_counter() - t, 1),
        "cpu_s": round(time.process_time() - c, 1) if jobs <= 1 else None,
        "cells": cells,
    }


def environment() -> JsonObject:
    import pyarrow

    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_sim.py")
    p.add_argument("--protocol", default="message-bus")
    p.add_argument("--writers", type=int, default=16)
    p.add_argument("--checkpoints", type=int, default=50)
    p.add_argument("--seeds", type=int, default=3, help="runs per checkpoint workload (0: skip them)")
    p.add_argument("--deadlock-seeds", type=int, default=1000, help="seeds of the deadlock scenario (0: skip)")
    p.add_argument(
        "--explore-seeds",
        type=int,
        default=0,
        help="also explore every scenario x protocol with this many seeds each (0: skip)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes for the side-by-side figures (default: one per CPU; 1: none)",
    )
    p.add_argument("--no-real-parquet", action="store_true", help="skip the real-parquet runs")
    p.add_argument("--out", default="", help="write the figures as JSON to this file")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def _checkpoints_line(c: JsonObject) -> str:
    side_by_side = (
        f"; {c['parallel']['jobs']} processes side by side: "
        f"{c['parallel']['checkpoints_per_real_s']:.1f} checkpoints per real s"
        if "parallel" in c
        else ""
    )
    return (
        f"{c['protocol']}, {c['writers']} writers, {c['checkpoints']} checkpoints, workload "
        f"{c['workload']} ({c['records']:,} records, {c['partitions']} partition(s) x "
        f"{c['buckets_per_partition']} buckets), {c['storage']}: "
        f"{c['checkpoints_per_real_s_median']:.1f} checkpoints per real s, "
        f"{c['checkpoints_per_cpu_s_median']:.1f} per CPU s{side_by_side}"
    )


def _explore_lines(e: JsonObject) -> list[str]:
    lines = [
        f"explore, {e['seeds_per_cell']} seeds per scenario x protocol, {e['jobs']} process(es): "
        f"{e['real_s']:.0f} real s"
    ]
    for cell in e["cells"]:
        counts = ", ".join(f"{k} {v}" for k, v in cell["counts"].items() if v)
        lines.append(f"  {cell['scenario']:<20} {cell['protocol']:<24} {counts}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def say(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    doc: JsonObject = {
        "benchmark": "simulator",
        "environment": environment(),
        "load_avg_1m_at_start": _load(),
        "checkpoints": [],
    }
    storages = ["memory"] if args.no_real_parquet else ["memory", "disk"]
    for workload in WORKLOADS if args.seeds else ():
        for storage in storages:
            c = bench_checkpoints(
                protocol=args.protocol,
                writers=args.writers,
                checkpoints=args.checkpoints,
                workload=workload,
                storage=storage,
                seeds=args.seeds,
                jobs=args.jobs,
            )
            doc["checkpoints"].append(c)
            say(_checkpoints_line(c))
    if args.deadlock_seeds:
        d = doc["deadlock_seeds"] = bench_deadlock_seeds(args.deadlock_seeds, jobs=args.jobs)
        say(
            f"{d['seeds']} seeds of the deadlock scenario ({d['protocol']}, {d['jobs']} process(es)): "
            f"{d['real_s']:.1f} real s ({d['run_s_mean']:.3f} s per run); {d['counts']}"
        )
    if args.explore_seeds:
        doc["explore"] = bench_explore(args.explore_seeds, jobs=args.jobs)
        for line in _explore_lines(doc["explore"]):
            say(line)
    doc["load_avg_1m_at_end"] = _load()
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)
    if args.json:
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
