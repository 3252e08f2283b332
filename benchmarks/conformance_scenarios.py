"""Every scenario x release the conformance harness runs: the lab's verdict beside the real
release's, one ``commitlab conformance --scenario`` check per cell (the simulator on one side,
Hudi's Flink writer in a MiniCluster on the other, the same records).

    [PYTHONPATH=<checkout>] .venv/bin/python benchmarks/conformance_scenarios.py
        [--scenarios deadlock,task-crash,late-notice] [--releases 0.10.1,0.12.3,0.13.1,0.14.0,0.14.1]
        [--table-types copy-on-write] [--out benchmarks/results/conformance_scenarios.json]

The protocol of a release is the one it ships (0.10.1: operator-event; later: ckp-meta); the
deadlock is also run on 0.14.x with ``hoodie.allow.empty.commit`` true. Prints a markdown table
(scenario, release, table type, lab verdict, real verdict, agreement, failovers, rollbacks, pending
instants, the real blocked frame) and writes every cell's outcomes to ``--out``. Runs one cell at
a time; measures and prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402,F401  (sets sys.path to the project root)

from runtime.conformance.harness import HarnessError  # noqa: E402
from runtime.conformance.releases import RELEASES  # noqa: E402
from runtime.conformance.scenario_run import ScenarioComparison, run_scenario  # noqa: E402
from runtime.conformance.scenarios import scenario  # noqa: E402
from runtime.core.config import JobConfig  # noqa: E402

EMPTY_COMMIT_RELEASES = ("0.14.0", "0.14.1")  # the Flink writer reads hoodie.allow.empty.commit from 0.14


def protocol_of(release: str) -> str:
    return "operator-event" if release == "0.10.1" else "ckp-meta"


def cells(scenarios: list[str], releases: list[str], table_types: list[str]) -> list[tuple[str, str, str, str]]:
    """(scenario, release, table type, --allow-empty-commit) in the order they run."""
    out = []
    for sc in scenarios:
        for rel in releases:
            for tt in table_types:
                out.append((sc, rel, tt, "release"))
                if sc == "deadlock" and rel in EMPTY_COMMIT_RELEASES:
                    out.append((sc, rel, tt, "true"))
    return out


def run_cell(sc: str, rel: str, tt: str, empty: str, root: str) -> ScenarioComparison:
    cfg = JobConfig(
        protocol=protocol_of(rel),
        source="generator",
        writers=2,
        checkpoints=4,
        records=4_000,
        table_type=tt,
        allow_empty_commit=empty,
    ).validate()
    out = os.path.join(root, f"{sc}-{rel}-{tt}-{empty}")
    return run_scenario(scenario(sc, cfg), RELEASES[rel], out, seed=0, timeout_s=240.0, on_phase=lambda _: None)


def row(c: ScenarioComparison, empty: str) -> str:
    agree = "agree" if c.verdicts_agree else (f"named: {c.named}" if c.named else "**differ**")
    blocked = c.real.frames[0] if c.real.frames else "-"
    flag = " (allow.empty.commit=true)" if empty == "true" else ""
    return (
        f"| {c.scenario}{flag} | {c.release} ({c.protocol}) | {c.table_type} | {c.lab.verdict} | {c.real.verdict} "
        f"| {agree} | {c.lab.failovers} / {c.real.failovers} | {len(c.lab.rollbacks)} / {len(c.real.rollbacks)} "
        f"| {len(c.lab.pending)} / {len(c.real.pending)} | {blocked} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="deadlock,task-crash,late-notice")
    ap.add_argument("--releases", default=",".join(RELEASES))
    ap.add_argument("--table-types", default="copy-on-write")
    ap.add_argument("--out", default="benchmarks/results/conformance_scenarios.json")
    ap.add_argument("--workdir", default=None, help="keep every cell's runs here (default: a temporary folder)")
    args = ap.parse_args()
    todo = cells(args.scenarios.split(","), args.releases.split(","), args.table_types.split(","))
    results = []
    print(
        "| scenario | release (protocol) | table | lab | real | | failovers lab / real | rollbacks | pending "
        "| real blocked in |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="conformance-scenarios-") as tmp:
        root = args.workdir or tmp
        for sc, rel, tt, empty in todo:
            try:
                c = run_cell(sc, rel, tt, empty, root)
            except HarnessError as exc:  # the cell did not run as the scenario asks: said, not scored
                print(f"| {sc} | {rel} | {tt} | not compared: {str(exc)[:200]} |", flush=True)
                results.append({"scenario": sc, "release": rel, "table_type": tt, "not_compared": str(exc)})
                continue
            print(row(c, empty), flush=True)
            results.append({**c.to_json(), "allow_empty_commit": empty, "real_detail": c.real.detail[:300]})
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
