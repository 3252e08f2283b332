"""``commitlab check``'s searches side by side, on the same jobs, in one command, with proof that
they certify the same thing:

* ``rerun-refingerprint``: the re-running search as it was before a run took its prefix's states
  from its parent (every schedule from the start, every choice point fingerprinted);
* ``rerun``: the default, ``commitlab check --search rerun`` (every schedule from the start; the
  states before a run's last deviation are its parent's, not computed again);
* ``fork``: ``--search fork`` (the simulator forks at a choice point, a child takes the
  alternative from there; an alternative before choice point 20 is re-run instead);
  ``fork:K``: the same, re-running the alternatives before choice point ``K`` (``fork:0``:
  forking at every choice point);
* ``rerun@REV`` (``--baseline REV``): the re-running search of commit ``REV``, from a temporary
  git worktree, measured first and the reference of the ratios: this checkout against an earlier
  one, side by side. A commit before the fingerprint named a paused coroutine's line from its
  function's first line (``runtime/sim/fingerprint.py``'s ``_describe``) hashes the same states
  to other values: against one, the counts are compared, not the digests.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_check.py [--protocols message-bus]
                    [--writers 2] [--checkpoints 3] [--bound 2] [--rounds 3]
                    [--searches rerun-refingerprint,rerun,fork] [--baseline REV]
                    [--out benchmarks/results/check.json]

Each round runs each search once per protocol, each in a fresh process, in rotating order (the
first search of round k is the k-th), so all see the same machine and the same neighbours. A
measurement is the CPU seconds of the search (``os.times()``: the process's own and its
waited-for children's, which is where the fork search's runs are), and its real seconds; the
figures are every round's and their median, each search's ratio to the first one's, and distinct
states per CPU second. Where the CPU goes: for each run the choice points before its last
deviation (a prefix its parent ran already, which only a snapshot of the simulator could skip)
and after it, and the runs cut at an explored state. Equivalence: every run of every search must
give the same certificate (runs, distinct states, transitions, deepest run, runs cut, every
invariant's verdict, the counterexamples) and the same set of distinct state hashes (a digest of
the sorted set); the script says where they differ. Measures and prints; asserts nothing about
time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

SEARCHES = ("rerun-refingerprint", "rerun", "fork")

# Runs in a fresh process: one search of one job, its CPU seconds (children included) and its certificate.
TIMED = r"""
import hashlib, json, os, resource, sys
from runtime.sim.certificate import certificate
from runtime.sim.fork_search import ForkSearch
from runtime.sim.schedule import SimSchedule
from runtime.sim.search import BoundedSearch, CheckJob
protocol, kind = sys.argv[1], sys.argv[5]
writers, checkpoints, bound = (int(x) for x in sys.argv[2:5])
job = CheckJob(SimSchedule(writers=writers, rounds=[writers * 100] * checkpoints), protocol)
shape = {"prefix_choice_points": 0, "suffix_choice_points": 0, "cut_runs": 0, "cut_suffixes": []}
def on_run(run, stats):
    last = run.deviations[-1][0] if run.deviations else 0
    shape["prefix_choice_points"] += last
    shape["suffix_choice_points"] += len(run.choices) - last
    if run.cut:
        shape["cut_runs"] += 1
        shape["cut_suffixes"].append(len(run.choices) - last)
def cpu(t):
    return t.user + t.system + t.children_user + t.children_system
t0, f0 = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
if kind.startswith("fork"):
    done = ForkSearch(job, bound, **({"rerun_below": int(kind[5:])} if ":" in kind else {})).run()
else:
    done = BoundedSearch(job, bound, on_run=on_run, reuse_prefix=kind == "rerun").run()
t1, f1 = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
cuts = sorted(shape.pop("cut_suffixes"))
shape["median_cut_suffix"] = cuts[len(cuts) // 2] if cuts else None
doc = certificate(done)
doc["certificate"].pop("real_s")
states = hashlib.sha256(json.dumps(sorted(done.stats.states)).encode()).hexdigest()
print(json.dumps({
    "cpu_s": cpu(t1) - cpu(t0),
    "children_cpu_s": (t1.children_user + t1.children_system) - (t0.children_user + t0.children_system),
    "real_s": t1.elapsed - t0.elapsed,
    "children_minor_faults": f1 - f0,  # the fork search's copy-on-write pages (and the rest)
    "states_sha256": states,
    "shape": shape if not kind.startswith("fork") else None,
    "rss_anon_kb": int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("RssAnon"))),
    "certificate": doc,
}))
"""


def measure(protocol: str, args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """One search of one job in a fresh process: of this checkout, or ``rerun@REV``, the re-running
    search in ``args.baseline_path`` (a checkout of ``REV``)."""
    search, _, rev = kind.partition("@")
    cmd = [sys.executable, "-c", TIMED, protocol, str(args.writers), str(args.checkpoints), str(args.bound), search]
    # one hash seed for every process: the state hashes (``hash()`` of strings) compare across them
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    checkout = args.baseline_path if rev else str(common.ROOT)
    if rev:
        env["PYTHONPATH"] = checkout
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=checkout, env=env)
    if out.returncode != 0:
        raise SystemExit(f"the {kind} search of {protocol} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    doc: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two measurements' certificates differ (empty: the same certificate and states)."""
    out = [f"states_sha256: {a['states_sha256'][:12]} != {b['states_sha256'][:12]}"]
    out = out if a["states_sha256"] != b["states_sha256"] else []
    ca, cb = a["certificate"], b["certificate"]
    for key in sorted(set(ca) | set(cb)):
        if ca.get(key) != cb.get(key):
            out.append(f"{key}: {json.dumps(ca.get(key))[:200]} != {json.dumps(cb.get(key))[:200]}")
    return out


def summarise(runs: dict[str, dict[str, list[dict[str, Any]]]], args: argparse.Namespace, show: bool) -> dict[str, Any]:
    """Every round and the medians so far per protocol (a protocol with every search measured),
    written after every measurement, so a run stopped early keeps what it measured."""
    summary = {}
    kinds = args.searches
    for protocol, by_kind in runs.items():
        if not all(by_kind[kind] for kind in kinds):
            continue
        ref = by_kind[kinds[0]][0]
        diffs = [d for kind in kinds for m in by_kind[kind] for d in differences(ref, m)]
        row: dict[str, Any] = {"same_certificate": not diffs, "differences": diffs[:20]}
        cert = ref["certificate"]["certificate"]
        for kind in kinds:
            cpu = statistics.median(m["cpu_s"] for m in by_kind[kind])
            real = statistics.median(m["real_s"] for m in by_kind[kind])
            row[kind] = {
                "cpu_s": round(cpu, 2),
                "real_s": round(real, 2),
                "states_per_cpu_s": round(cert["distinct_states"] / cpu, 1),
                "rounds_cpu_s": [round(m["cpu_s"], 2) for m in by_kind[kind]],
                "rounds_real_s": [round(m["real_s"], 2) for m in by_kind[kind]],
                "rounds_children_cpu_s": [round(m["children_cpu_s"], 2) for m in by_kind[kind]],
                "rounds_children_minor_faults": [m["children_minor_faults"] for m in by_kind[kind]],
                "rss_anon_kb": [m["rss_anon_kb"] for m in by_kind[kind]],
            }
        # how many times fewer CPU seconds than the first search, per search (median over rounds)
        row["cpu_ratio_to_" + kinds[0]] = {k: round(row[kinds[0]]["cpu_s"] / row[k]["cpu_s"], 2) for k in kinds}
        shape = next((m["shape"] for k in kinds for m in by_kind[k] if m.get("shape")), None)
        if shape is not None:
            row["shape"] = {
                **shape,
                "prefix_share": round(
                    shape["prefix_choice_points"] / (shape["prefix_choice_points"] + shape["suffix_choice_points"]), 3
                ),
            }
        keys = ("complete", "runs", "distinct_states", "transitions", "max_depth", "pruned")
        row["certificate"] = {k: cert[k] for k in keys}
        row["invariants"] = cert["invariants"]
        summary[protocol] = row
        if show:
            each = "; ".join(
                f"{k} {row[k]['cpu_s']} CPU s ({row[k]['states_per_cpu_s']} states/CPU s, "
                f"{row['cpu_ratio_to_' + kinds[0]][k]}x)"
                for k in kinds
            )
            print(
                f"{protocol}, {args.writers} writers, {args.checkpoints} checkpoints, bound {args.bound}: "
                f"{cert['runs']} runs, {cert['distinct_states']} states, invariants {cert['invariants']}; {each}; "
                f"same certificate and states: {'yes' if not diffs else 'NO: ' + '; '.join(diffs[:3])}",
                flush=True,
            )
            if shape is not None:
                print(
                    f"  where a run's CPU goes: {row['shape']['prefix_share']:.0%} of the choice points executed "
                    f"are before a run's last deviation (its parent's prefix again); {shape['cut_runs']} runs cut "
                    f"at an explored state, a median of {shape['median_cut_suffix']} choice points after it",
                    flush=True,
                )
    return summary


def write(args: argparse.Namespace, summary: dict[str, Any], environment: dict[str, Any]) -> None:
    job = {
        "writers": args.writers,
        "checkpoints": args.checkpoints,
        "bound": args.bound,
        "rounds": args.rounds,
        "searches": args.searches,
    }
    common.write_json(
        args.out, {"benchmark": "bench_check", "environment": environment, "job": job, "results": summary}
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocols", default="message-bus", help="comma-separated (default: message-bus)")
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--checkpoints", type=int, default=3)
    p.add_argument("--bound", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--searches",
        default=",".join(SEARCHES),
        help=f"comma-separated, the first is the reference of the ratios; fork:K re-runs the alternatives "
        f"before choice point K (default: {','.join(SEARCHES)})",
    )
    p.add_argument(
        "--baseline",
        default="",
        help="a git revision: its re-running search (rerun@REV, from a temporary worktree) is measured "
        "too, first, and is the reference of the ratios (this checkout against an earlier commit)",
    )
    p.add_argument("--out", default=str(common.ROOT / "benchmarks" / "results" / "check.json"))
    args = p.parse_args()
    protocols = [x.strip() for x in args.protocols.split(",") if x.strip()]
    args.searches = [x.strip() for x in args.searches.split(",") if x.strip()]
    unknown = sorted(k for k in args.searches if k not in SEARCHES and not re.fullmatch(r"fork:\d+", k))
    if unknown or not args.searches:
        p.error(f"--searches: unknown {unknown or 'none given'}; choose among {', '.join(SEARCHES)} or fork:K")
    scratch = tempfile.mkdtemp(prefix="commitlab-check-")
    try:
        with contextlib.ExitStack() as stack:
            if args.baseline:
                args.baseline_path = stack.enter_context(common.checkout_of(args.baseline, scratch))
                args.searches = [f"rerun@{args.baseline}"] + args.searches
            return run_rounds(args, protocols)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_rounds(args: argparse.Namespace, protocols: list[str]) -> int:
    """Every round of every search of every protocol; 0 when they certify the same thing."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {pr: {k: [] for k in args.searches} for pr in protocols}
    environment = common.environment()
    for r in range(args.rounds):
        for protocol in protocols:
            k = r % len(args.searches)
            for kind in args.searches[k:] + args.searches[:k]:
                m = measure(protocol, args, kind)
                runs[protocol][kind].append(m)
                cert = m["certificate"]["certificate"]
                print(
                    f"round {r + 1} {protocol} {kind}: {m['cpu_s']:.1f} CPU s ({m['children_cpu_s']:.1f} in "
                    f"children, {m['children_minor_faults']} page faults there), {m['real_s']:.1f} real s; "
                    f"{cert['runs']} runs, {cert['distinct_states']} states",
                    flush=True,
                )
                write(args, summarise(runs, args, show=False), environment)
    summary = summarise(runs, args, show=True)
    write(args, summary, environment)
    print(f"results: {args.out}")
    return 0 if all(row["same_certificate"] for row in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
