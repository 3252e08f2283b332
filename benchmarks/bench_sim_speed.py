"""The simulator's speed against a baseline commit, side by side in one session, and proof that
the faster one simulates the same thing (the same trace bytes for the same seed).

    [PYTHONPATH=<checkout>] .venv/bin/python benchmarks/bench_sim_speed.py --baseline REV
                                                 [--writers 16] [--checkpoints 50] [--rounds 5]
                                                 [--seeds 3] [--equivalence-seeds 3]
                                                 [--same-work] [--set OPTION=VALUE ...]
                                                 [--out benchmarks/results/sim_speed.json]

``REV`` is checked out in a temporary git worktree (or ``--baseline-path DIR`` names a checkout).
Each round runs the workload once in a fresh process of each checkout, the two in alternating
order, so both see the same machine and the same neighbours; the figure is simulated checkpoints
per real second (and per CPU second) of one process, the median over rounds, and the ratio of the
medians. ``--set`` gives the timed workload an option in each checkout that has
it (``file_system_view=direct``: the work of a checkout from before the file-system view), and says
so in its output. ``--same-work`` sets the options that turn off what the job has modelled since
``d78e5fe`` (``SAME_WORK_AS_D78E5FE``), so both checkouts simulate the same job; the output gives
each checkout's work per checkpoint (DFS operations, messages, trace events) either way. The
workload is ``benchmarks/bench_sim.py``'s ``protocol`` workload (10 rows per
writer per round, one bucket per writer, the simulated disk) with message-bus.

Equivalence: every scenario of ``commitlab explore`` x every protocol x ``--equivalence-seeds``
seeds, and the timed workload's seeds, run untimed in both checkouts; the trace hashes must be
equal one for one (the script says which differ). Traces are compared without the args the
timeline picture reads (``runtime.core.trace_events.READER_ARG_KEYS``, added to events this round
and nothing else), so a baseline from before them compares too. Measures and prints; asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

ROOT = Path(__file__).resolve().parents[1]

# Runs in a child process with PYTHONPATH set to one checkout; uses only APIs both have.
TIMED = r"""
import json, sys, time
from runtime.core.config import JobConfig
from runtime.sim.host import simulate
protocol, writers, checkpoints, seeds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cfg = JobConfig(protocol=protocol, source="generator", writers=writers, checkpoints=checkpoints,
                records=writers * checkpoints * 10, partitions=1, buckets=writers)
# --set: options this checkout has (a checkout without one runs its own behaviour)
extra = {k: v for k, v in json.loads(sys.argv[5]).items() if hasattr(cfg, k)}
cfg = cfg.replace(**extra)
simulate(cfg.replace(checkpoints=2, records=writers * 20), seed=0, storage="memory", verify=False)  # warm-up
runs = []
for seed in range(seeds):
    t, c = time.perf_counter(), time.process_time()
    r = simulate(cfg, seed=seed, storage="memory", verify=False)
    real, cpu = time.perf_counter() - t, time.process_time() - c
    r = r if isinstance(r, dict) else r.to_json()  # a dict from an older checkout, the record from this one
    runs.append({"seed": seed, "real_s": real, "cpu_s": cpu, "status": r["status"],
                 "checkpoints": r["checkpoints"]["completed"], "trace_sha256": r["trace_sha256"],
                 "dfs_ops": sum(sum(ops.values()) for ops in r.get("dfs_ops", {}).values()),
                 "messages": (r.get("sim") or {}).get("messages"), "trace_events": r.get("trace_events")})
print(json.dumps(runs))
"""

# Runs in a child process of either checkout, untimed: the trace hashes of every scenario x protocol
# and of the timed workload's seeds. A checkout whose trace events carry the args the timeline
# picture reads (runtime.core.trace_events.READER_ARG_KEYS) hashes its traces without those keys,
# so two checkouts compare on everything else, byte for byte.
EQUIVALENCE = r"""
import json, sys
import runtime.sim.host as host
from runtime.core.config import JobConfig
from runtime.protocols import PROTOCOLS
from runtime.sim.explore import run_seed
from runtime.sim.schedule import SCENARIOS
try:
    from runtime.core.trace_events import READER_ARG_KEYS
except ImportError:  # a checkout from before the reader args
    READER_ARG_KEYS = ()
if READER_ARG_KEYS:
    from runtime.sim.recorder import _FIELD_ENCODER, trace_sha256

    def without_reader_args(ev):
        if ev[1] not in ("X", "i", "s", "f") or ev[8] is None:
            return ev
        args = json.loads(ev[8])
        if not any(k in args for k in READER_ARG_KEYS):
            return ev
        kept = {k: v for k, v in args.items() if k not in READER_ARG_KEYS}
        return (*ev[:8], _FIELD_ENCODER.encode(kept) if kept else None, *ev[9:])

    host.trace_sha256 = lambda events: trace_sha256(without_reader_args(e) for e in events)
seeds, protocol, writers, checkpoints, timed_seeds = (sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]))
seeds = int(seeds)
out = {}
for scenario in SCENARIOS:
    for p in PROTOCOLS:
        for seed in range(seeds):
            r = run_seed(scenario, seed, p)
            out[f"{scenario}/{p}/{seed}"] = r["trace_sha256"]
cfg = JobConfig(protocol=protocol, source="generator", writers=writers, checkpoints=checkpoints,
                records=writers * checkpoints * 10, partitions=1, buckets=writers)
extra = {k: v for k, v in json.loads(sys.argv[6]).items() if hasattr(cfg, k)}
cfg = cfg.replace(**extra)
for seed in range(timed_seeds):
    r = host.simulate(cfg, seed=seed, storage="memory", verify=False)
    r = r if isinstance(r, dict) else r.to_json()
    out[f"timed/{seed}"] = r["trace_sha256"]
print(json.dumps(out))
"""


def child(checkout: str, code: str, *args: object, timeout_s: float = 1800.0) -> Any:
    env = {**os.environ, "PYTHONPATH": checkout}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *map(str, args)],
            env=env,
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"the run in {checkout} did not finish within {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        raise RuntimeError(f"the run in {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe_rev(checkout: str) -> str:
    done = subprocess.run(
        ["git", "-C", checkout, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
    )
    dirty = subprocess.run(
        ["git", "-C", checkout, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.strip()
    return done.stdout.strip() + (" with uncommitted changes" if dirty else "")


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    per_real = [r["checkpoints"] / r["real_s"] for r in runs]
    per_cpu = [r["checkpoints"] / r["cpu_s"] for r in runs]
    return {
        "runs": len(runs),
        "checkpoints_per_real_s_median": round(statistics.median(per_real), 2),
        "checkpoints_per_cpu_s_median": round(statistics.median(per_cpu), 2),
        "real_s_median": round(statistics.median(r["real_s"] for r in runs), 4),
        "work_per_checkpoint": work_per_checkpoint(runs),
    }


def work_per_checkpoint(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """What the simulated job did per checkpoint (the medians of the runs): DFS operations of
    every role, simulated messages, trace events. Two checkouts whose jobs model different work
    (an option added between them) differ here; their speed ratio is then not the simulator's."""
    out: dict[str, float | None] = {}
    for key in ("dfs_ops", "messages", "trace_events"):
        values = [r[key] / r["checkpoints"] for r in runs if r.get(key) is not None and r["checkpoints"]]
        out[key] = round(statistics.median(values), 1) if values else None
    return out


# The options that turn off what the simulated job models since d78e5fe, each at the value that
# does that job's work (--same-work): with them the two checkouts make the same DFS operations,
# messages and trace events per checkpoint, and the ratio is the simulator's own.
SAME_WORK_AS_D78E5FE = {
    "meta_client": "shared",
    "markers": "none",
    "rollback_instants": "none",
    "clean_retain_commits": "off",
    "archive_min_commits": "off",
    "archive_max_commits": "off",
    "metadata_table": "false",
    "file_system_view": "direct",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="HEAD", help="the commit to compare with (a git revision)")
    ap.add_argument("--baseline-path", default="", help="a checkout of the baseline instead of --baseline")
    ap.add_argument("--protocol", default="message-bus")
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--checkpoints", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; each runs both checkouts")
    ap.add_argument("--seeds", type=int, default=3, help="timed runs per checkout per round")
    ap.add_argument("--equivalence-seeds", type=int, default=3, help="seeds per scenario x protocol (0: skip)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="OPTION=VALUE",
        help="a JobConfig option of the timed workload, in each checkout that has it (e.g. "
        "file_system_view=direct: the same work as a checkout from before the option)",
    )
    ap.add_argument(
        "--same-work",
        action="store_true",
        help="set the options that turn off what the job models since d78e5fe (markers, rollback instants, "
        "cleaning, archiving, the metadata table, the file-system view, a meta client per handle): both "
        "checkouts then do the same work, which the output shows; --set still wins",
    )
    ap.add_argument("--out", default="benchmarks/results/sim_speed.json")
    args = ap.parse_args()
    overrides = {**(SAME_WORK_AS_D78E5FE if args.same_work else {}), **dict(s.split("=", 1) for s in args.set)}

    scratch = tempfile.mkdtemp(prefix="commitlab-sim-speed-")
    try:
        with contextlib.ExitStack() as stack:
            base = args.baseline_path or stack.enter_context(common.checkout_of(args.baseline, scratch))
            return measure(args, overrides, base)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args: argparse.Namespace, overrides: dict[str, str], base: str) -> int:
    """The rounds, the equivalence runs and the results file; 0 when every trace compared is the same."""
    current = str(ROOT)
    checkouts = {"baseline": base, "current": current}
    doc: dict[str, Any] = {
        "benchmark": "simulator speed, side by side",
        "environment": common.environment(),
        "params": {
            "protocol": args.protocol,
            "writers": args.writers,
            "checkpoints": args.checkpoints,
            "workload": "protocol (10 rows per writer per round, one bucket per writer, simulated disk)",
            "rounds": args.rounds,
            "seeds": args.seeds,
            "set": overrides,
        },
        "revisions": {k: describe_rev(v) for k, v in checkouts.items()},
    }
    timed: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
    t0 = time.monotonic()
    for i in range(args.rounds):
        order = ["baseline", "current"] if i % 2 == 0 else ["current", "baseline"]
        for name in order:
            runs = child(
                checkouts[name],
                TIMED,
                args.protocol,
                args.writers,
                args.checkpoints,
                args.seeds,
                json.dumps(overrides),
            )
            timed[name].extend(runs)
        b, c = (summary(timed[k][-args.seeds :]) for k in ("baseline", "current"))
        print(
            f"round {i + 1}/{args.rounds}: baseline {b['checkpoints_per_real_s_median']:.1f}, "
            f"current {c['checkpoints_per_real_s_median']:.1f} checkpoints per real s",
            flush=True,
        )
    doc["speed"] = {k: summary(v) for k, v in timed.items()}
    sb, sc = doc["speed"]["baseline"], doc["speed"]["current"]
    doc["ratio_real"] = round(sc["checkpoints_per_real_s_median"] / sb["checkpoints_per_real_s_median"], 3)
    doc["ratio_cpu"] = round(sc["checkpoints_per_cpu_s_median"] / sb["checkpoints_per_cpu_s_median"], 3)
    hashes: dict[str, dict[str, str]] = {"baseline": {}, "current": {}}
    if args.equivalence_seeds:
        print(f"equivalence: every scenario x protocol x {args.equivalence_seeds} seeds, in both", flush=True)
        for name, path in checkouts.items():
            hashes[name] = child(
                path,
                EQUIVALENCE,
                args.equivalence_seeds,
                args.protocol,
                args.writers,
                args.checkpoints,
                args.seeds,
                json.dumps(overrides),
            )
    differ = sorted(k for k in hashes["current"] if hashes["baseline"].get(k) != hashes["current"][k])
    doc["equivalence"] = {"runs": len(hashes["current"]), "traces_differ": differ}
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    common.write_json(args.out, doc)
    print(
        f"{args.protocol}, {args.writers} writers, {args.checkpoints} checkpoints, one process: "
        f"baseline {doc['revisions']['baseline']} {sb['checkpoints_per_real_s_median']:.1f}, "
        f"current {doc['revisions']['current']} {sc['checkpoints_per_real_s_median']:.1f} checkpoints per "
        f"real s: {doc['ratio_real']:.2f}x (per CPU s {doc['ratio_cpu']:.2f}x)"
        + (f"; options set: {overrides}" if overrides else "")
    )
    wb, wc = sb["work_per_checkpoint"], sc["work_per_checkpoint"]
    print(
        "work per checkpoint, baseline / current: "
        + ", ".join(f"{k.replace('_', ' ')} {wb.get(k)} / {wc.get(k)}" for k in wc)
        + ("" if wb == wc else " (the jobs differ: --same-work compares the simulator on the same work)")
    )
    print(
        f"same trace bytes in {len(hashes['current']) - len(differ)} of {len(hashes['current'])} runs"
        + (f"; they differ in {', '.join(differ[:10])}" if differ else "")
    )
    print(f"results: {args.out} ({doc['elapsed_s']:.0f} s)")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
