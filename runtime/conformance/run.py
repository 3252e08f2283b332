"""One conformance check: the lab's run and Hudi's own writer's, on the same records, compared.

The lab side runs on the simulator with the table on disk: the same role code as on Ray, on
virtual time, so its counts are those of the modelled schedule and do not depend on how busy the
machine is; Hudi's side runs in real time. Both tables are read back by the official reader.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from runtime.conformance.comparison import Comparison, RunPair, compare_contents, compare_runs, timeline_shape
from runtime.conformance.harness import HarnessError, run_harness
from runtime.conformance.releases import Release
from runtime.conformance.workload import export_workload
from runtime.core.config import JobConfig
from runtime.data.columns import KEY
from runtime.lab.run_output import write_result
from runtime.lab.verify import read_snapshot
from runtime.sim import simulate

# Flink's checkpoint interval in the harness: long enough for a 2-core machine to write a round,
# short enough that a handful of checkpoints take seconds (the harness holds each round back until
# its barrier, so the interval paces the run and changes no count).
CHECKPOINT_INTERVAL_MS = 2_000


@dataclass(frozen=True)
class Dirs:
    """Where one check keeps its parts, under ``--out``/<table type>."""

    root: str

    def at(self, name: str) -> str:
        return os.path.join(self.root, name)


def run_check(
    cfg: JobConfig,
    release: Release,
    out: str,
    *,
    seed: int,
    timeout_s: float,
    on_phase: Callable[[str], None],
    on_line: Callable[[str], None] | None = None,
) -> Comparison:
    """Runs ``cfg`` in the lab and under ``release``, and compares them."""
    dirs = Dirs(os.path.join(out, cfg.table_type))
    os.makedirs(dirs.root, exist_ok=True)
    on_phase(f"{cfg.table_type}: the lab's run ({cfg.protocol}, simulated, {cfg.writers} writers)")
    lab = simulate(cfg, seed=seed, workdir=dirs.at("lab"), storage="disk")
    write_result(dirs.at("lab"), lab)
    on_phase(f"{cfg.table_type}: Hudi {release.hudi}'s Flink writer on Flink {release.flink}")
    workload = export_workload(cfg, dirs.at("input"), dirs.at("real-table"), CHECKPOINT_INTERVAL_MS)
    real = run_harness(
        release, workload.directory, dirs.at("real.json"), dirs.at("harness.log"), timeout_s=timeout_s, on_line=on_line
    )
    if real.error:
        raise HarnessError(
            f"Hudi {release.hudi}'s job did not finish: {real.error} (its output: {dirs.at('harness.log')})"
        )
    on_phase(f"{cfg.table_type}: reading both tables with the official reader")
    lab_rows, real_rows = read_snapshot(lab.table), read_snapshot(dirs.at("real-table"))
    pair = RunPair(
        cfg.protocol, cfg.table_type, lab, real, timeline_shape(lab.table), timeline_shape(dirs.at("real-table"))
    )
    comparison = compare_runs(pair, compare_contents(lab_rows, real_rows, KEY))
    with open(dirs.at("conformance.json"), "w") as f:
        json.dump(comparison.to_json(), f, indent=1)
    return comparison
