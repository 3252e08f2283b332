"""Hudi's three concurrency modes on the same two jobs and streams, under the simulator.

    .venv/bin/python benchmarks/compare_modes.py [--scenario concurrent|job-restart-overlap]
        [--overlap none|file-groups|keys] [--seeds 3] [--out FILE]

Each mode runs the same two jobs (``--jobs 2``: each its own job manager, coordinator, write
tasks and stream) on a new merge-on-read table (non-blocking needs one), for every seed, and the
table prints per mode: commits, write conflicts (failovers a ``HoodieWriteConflictException``
caused), other failovers, instants rolled back, rows the write tasks took in beyond the streams
(retried: what the sources replayed after failovers), the writers' blocked time, the DFS operations
of the heartbeats and of the lock, and the verdicts. Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402,F401  (sets sys.path to the project root)

from runtime.core.config import JobConfig  # noqa: E402
from runtime.core.job_options import CONCURRENCY_MODES  # noqa: E402
from runtime.core.jobs_spec import OVERLAPS, JobsSpec  # noqa: E402
from runtime.faults.scenarios import job_restart_overlap  # noqa: E402
from runtime.lab.jobs_result import JobsResult, conflict_failovers  # noqa: E402
from runtime.sim.multi_job import simulate_jobs  # noqa: E402

SCENARIOS = ("concurrent", "job-restart-overlap")


def _component_ops(result: JobsResult, component: str) -> int:
    return sum(
        sum(ops.values())
        for job in result.jobs
        for parts in job.figures.dfs_ops_by_component.values()
        for part, ops in parts.items()
        if part == component
    )


def figures(result: JobsResult) -> dict[str, object]:
    jobs = result.jobs
    conflicts = sum(conflict_failovers(j) for j in jobs)
    stream_rows = sum(j.records for j in jobs)
    return {
        "commits": sum(len(j.commits) for j in jobs),
        "conflicts": conflicts,
        "other_failovers": sum(len(j.failovers) for j in jobs) - conflicts,
        "rolled_back": sum(len(j.rolled_back) for j in jobs),
        "retried_rows": max(0, sum(j.figures.rows_in for j in jobs) - stream_rows),
        "blocked_s": round(sum(sum(j.figures.writer_blocked_s.values()) for j in jobs), 3),
        "heartbeat_ops": _component_ops(result, "heartbeat"),
        "lock_ops": _component_ops(result, "lock"),
        "status": result.status.value,
        "verdict": result.verdict_line(),
    }


def run(mode: str, scenario: str, overlap: str, seed: int, workdir: str, compaction: int) -> dict[str, object]:
    base = JobConfig(
        protocol="coordination-rpc",
        writers=1,
        checkpoints=3,
        records=1200,
        table_type="merge-on-read",
        concurrency_mode=mode,
        compaction_delta_commits=compaction,
    )
    if scenario == "job-restart-overlap":
        cfg, spec = job_restart_overlap(base)
        spec = JobsSpec(jobs=spec.jobs, overlap=overlap, start_s=spec.start_s, overrides=spec.overrides)
    else:
        cfg, spec = base, JobsSpec(jobs=2, overlap=overlap)
    return figures(simulate_jobs(cfg, spec, seed=seed, workdir=workdir))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=SCENARIOS, default="concurrent")
    p.add_argument("--overlap", choices=OVERLAPS, default="none")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument(
        "--compaction-delta-commits",
        type=int,
        default=JobConfig().compaction_delta_commits,
        help="as commitlab's option (0: no compaction; default: the release's)",
    )
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    args = p.parse_args()
    rows: dict[str, list[dict[str, object]]] = {}
    for mode in CONCURRENCY_MODES:
        for seed in range(args.seeds):
            with tempfile.TemporaryDirectory(prefix="commitlab-modes-") as tmp:
                rows.setdefault(mode, []).append(
                    run(mode, args.scenario, args.overlap, seed, tmp, args.compaction_delta_commits)
                )
    cols = ("commits", "conflicts", "other_failovers", "rolled_back", "retried_rows", "blocked_s")
    cols += ("heartbeat_ops", "lock_ops")
    print(
        f"scenario {args.scenario}, overlap {args.overlap}, compaction delta commits "
        f"{args.compaction_delta_commits}, seeds 0..{args.seeds - 1}, totals over the seeds"
    )
    print("| mode | " + " | ".join(cols) + " | verified |")
    print("|" + " --- |" * (len(cols) + 2))
    for mode, runs in rows.items():
        totals = [round(sum(float(str(r[c])) for r in runs), 3) for c in cols]
        shown = [str(int(t)) if float(t).is_integer() else str(t) for t in totals]
        verified = sum(1 for r in runs if str(r["verdict"]).startswith("exactly-once"))
        print(f"| {mode} | " + " | ".join(shown) + f" | {verified} of {len(runs)} |")
    for mode, runs in rows.items():
        for seed, r in enumerate(runs):
            print(f"  {mode} seed {seed}: {r['verdict']}")
    if args.out:
        with open(args.out, "w") as f:
            doc = {"scenario": args.scenario, "overlap": args.overlap, "compaction": args.compaction_delta_commits}
            json.dump({**doc, "runs": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
