"""How fast the simulator runs: simulated checkpoints per real second, and one deadlock seed.

Prints and returns figures; asserts nothing about time (machines differ). Run
``python -m runtime.sim.bench [--writers 16] [--checkpoints 20] [--seeds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from runtime.config import JobConfig
from runtime.scenarios import deadlock_config
from runtime.sim.host import simulate

# tables in memory when the machine has /dev/shm: the data plane writes many small parquet files
# and a disk's latency would be measured instead of the simulator
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def bench_checkpoints(*, protocol: str = "message-bus", writers: int = 16, checkpoints: int = 20,
                      rows_per_writer_round: int = 200, seeds: int = 3) -> dict[str, Any]:
    """Simulated checkpoints per real second for one workload (verification excluded: it is the
    official reader's time, not the simulator's)."""
    records = writers * checkpoints * rows_per_writer_round
    cfg = JobConfig(protocol=protocol, source="generator", writers=writers, checkpoints=checkpoints,
                    records=records)
    runs = []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory(prefix="commitlab-bench-", dir=SCRATCH) as d:
            t = time.perf_counter()
            r = simulate(cfg, seed=seed, workdir=d, verify=False)
            real = time.perf_counter() - t
        if r["status"] != "finished":
            raise RuntimeError(f"seed {seed}: the benchmark run ended {r['status']}: {r['error']}")
        done = r["checkpoints"]["completed"]
        runs.append({"seed": seed, "real_s": round(real, 3), "virtual_s": r["virtual_s"],
                     "checkpoints": done, "messages": r["sim"]["messages"],
                     "trace_events": r["trace_events"],
                     "checkpoints_per_real_s": round(done / real, 2),
                     "messages_per_real_s": round(r["sim"]["messages"] / real, 1)})
    return {"protocol": protocol, "writers": writers, "checkpoints": checkpoints, "records": records,
            "runs": runs,
            "checkpoints_per_real_s_median": statistics.median(x["checkpoints_per_real_s"] for x in runs),
            "virtual_over_real_median": round(statistics.median(x["virtual_s"] / x["real_s"] for x in runs), 3)}


def bench_deadlock_seed(*, protocol: str = "operator-event", seed: int = 0, writers: int = 2) -> dict[str, Any]:
    """Real time of one seed of the deadlock scenario (to the watchdog's verdict)."""
    cfg = deadlock_config(JobConfig(protocol=protocol, source="generator", writers=writers))
    with tempfile.TemporaryDirectory(prefix="commitlab-bench-", dir=SCRATCH) as d:
        t = time.perf_counter()
        r = simulate(cfg, seed=seed, workdir=d, verify=False)
        real = time.perf_counter() - t
    return {"protocol": protocol, "seed": seed, "writers": writers, "status": r["status"],
            "virtual_s": r["virtual_s"], "real_s": round(real, 3),
            "commits": [c["checkpoint"] for c in r["commits"]]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.sim.bench")
    p.add_argument("--protocol", default="message-bus")
    p.add_argument("--writers", type=int, default=16)
    p.add_argument("--checkpoints", type=int, default=20)
    p.add_argument("--rows", type=int, default=200, help="rows per writer per round")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    doc = {"checkpoints": bench_checkpoints(protocol=args.protocol, writers=args.writers,
                                            checkpoints=args.checkpoints, rows_per_writer_round=args.rows,
                                            seeds=args.seeds),
           "deadlock_seed": [bench_deadlock_seed(seed=s) for s in range(args.seeds)]}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    c = doc["checkpoints"]
    print(f"{c['protocol']}, {c['writers']} writers, {c['checkpoints']} checkpoints, {c['records']:,} records:")
    for r in c["runs"]:
        print(f"  seed {r['seed']}: {r['checkpoints']} checkpoints in {r['real_s']:.2f} real s "
              f"({r['virtual_s']:.2f} virtual s): {r['checkpoints_per_real_s']:.1f} checkpoints/s, "
              f"{r['messages_per_real_s']:,.0f} messages/s")
    print(f"  median: {c['checkpoints_per_real_s_median']:.1f} simulated checkpoints per real second; "
          f"virtual/real {c['virtual_over_real_median']:.2f}")
    for d in doc["deadlock_seed"]:
        print(f"deadlock scenario ({d['protocol']}, {d['writers']} writers), seed {d['seed']}: {d['status']} "
              f"at {d['virtual_s']:.2f} virtual s in {d['real_s']:.2f} real s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
