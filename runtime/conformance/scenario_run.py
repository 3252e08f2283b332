"""One scenario on both sides (``commitlab conformance --scenario``): the lab's run on the
simulator and Hudi's own writer's under the harness, the same records and rounds per task, each
outcome read from its own run (:mod:`runtime.conformance.outcomes`), then set side by side.

They agree when the verdicts are the same and, where both committed every round, the official
reader returns the same rows from both tables. A disagreement that docs/FIDELITY.md explains is in
:data:`NAMED_DIFFERENCES` and reported as such; any other fails the check.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from runtime.conformance.comparison import Contents, compare_contents
from runtime.conformance.harness import HarnessError, run_harness
from runtime.conformance.older_tables import UnreadableTable, copy_on_write_snapshot
from runtime.conformance.outcomes import Outcome, lab_outcome, real_outcome
from runtime.conformance.releases import Release
from runtime.conformance.run import Dirs
from runtime.conformance.scenarios import Scenario
from runtime.conformance.workload import export_workload
from runtime.core.json_doc import JsonObject
from runtime.data.columns import KEY
from runtime.lab.run_output import write_result
from runtime.lab.verify import compare, generator_state, read_snapshot
from runtime.sim import simulate

# how the harness's error begins when a barrier did not fall right after its round (RoundSource)
INPUT_ORDER_LOST = "input order not kept"
# (protocol, release, scenario) -> the docs/FIDELITY.md row that explains why the verdicts differ
NAMED_DIFFERENCES: dict[tuple[str, str, str], str] = {}


@dataclass
class ScenarioComparison:
    protocol: str
    release: str
    scenario: str
    table_type: str
    lab: Outcome
    real: Outcome
    contents: Contents | None  # both tables, when both sides committed every round
    named: str | None  # the FIDELITY.md row that explains a disagreement

    @property
    def verdicts_agree(self) -> bool:
        return self.lab.verdict == self.real.verdict

    @property
    def agrees(self) -> bool:
        tables = self.contents is None or self.contents.equal
        return (self.verdicts_agree and tables) or self.named is not None

    def to_json(self) -> JsonObject:
        return {
            "protocol": self.protocol,
            "release": self.release,
            "scenario": self.scenario,
            "table_type": self.table_type,
            "agrees": self.agrees,
            "verdicts_agree": self.verdicts_agree,
            "named_difference": self.named,
            "tables_equal": None if self.contents is None else self.contents.equal,
            "outcomes": {"lab": self.lab.to_json(), "real": self.real.to_json()},
        }


def run_scenario(
    sc: Scenario,
    release: Release,
    out: str,
    *,
    seed: int,
    timeout_s: float,
    on_phase: Callable[[str], None],
) -> ScenarioComparison:
    """Runs ``sc`` in the lab and under ``release``; their outcomes side by side."""
    cfg = sc.lab
    dirs = Dirs(os.path.join(out, cfg.table_type))
    os.makedirs(dirs.root, exist_ok=True)
    on_phase(f"{cfg.table_type}: {sc.name} in the lab ({cfg.protocol}, simulated, {cfg.writers} writers)")
    lab = simulate(cfg, seed=seed, workdir=dirs.at("lab"), storage="disk")
    write_result(dirs.at("lab"), lab)
    on_phase(f"{cfg.table_type}: {sc.name} under Hudi {release.hudi}'s Flink writer on Flink {release.flink}")
    workload = export_workload(cfg, dirs.at("input"), dirs.at("real-table"), sc.checkpoint_interval_ms)
    _add_scenario(workload.directory, sc)
    real = run_harness(release, workload.directory, dirs.at("real.json"), dirs.at("harness.log"), timeout_s=timeout_s)
    if real.error and real.error.startswith(INPUT_ORDER_LOST):
        # the real job's rounds did not fall between its barriers as the scenario's do: no verdict
        raise HarnessError(
            f"Hudi {release.hudi}'s job did not keep the scenario's rounds ({real.error}); the outcomes are not "
            f"compared (a loaded machine delays the sources: run it again); its output: {dirs.at('harness.log')}"
        )
    on_phase(f"{cfg.table_type}: reading the tables with the official reader")
    real_rows, how = _real_rows(dirs.at("real-table"), release) if real.job_status == "COMMITTED" else (None, "")
    real_check = None if real_rows is None else compare(generator_state(cfg), real_rows, KEY, cfg.partition_field)
    lab_side, real_side = lab_outcome(lab), real_outcome(real, real_check, dirs.at("real-table"))
    real_side.detail = "; ".join(x for x in (real_side.detail, how) if x)
    contents = None
    if lab_side.verdict == real_side.verdict == "exactly-once" and real_rows is not None:
        contents = compare_contents(read_snapshot(lab.table), real_rows, KEY)
    comparison = ScenarioComparison(
        cfg.protocol,
        release.hudi,
        sc.name,
        cfg.table_type,
        lab_side,
        real_side,
        contents,
        None if lab_side.verdict == real_side.verdict else NAMED_DIFFERENCES.get((cfg.protocol, release.hudi, sc.name)),
    )
    with open(dirs.at("conformance.json"), "w") as f:
        json.dump(comparison.to_json(), f, indent=1)
    return comparison


def _real_rows(table: str, release: Release) -> tuple[pa.Table | None, str]:
    """The real table's rows: the official reader's for table version 6 and later; for 0.10 to
    0.13's versions 3 and 5 (which it refuses) a copy-on-write table's latest committed base
    files (:mod:`runtime.conformance.older_tables`); None, and why, when neither reads it."""
    if release.table_version >= 6:
        return read_snapshot(table), ""
    try:
        return copy_on_write_snapshot(table), f"table version {release.table_version} read from its base files"
    except UnreadableTable as exc:
        return None, f"not read: {exc}"


def _add_scenario(directory: str, sc: Scenario) -> None:
    """The scenario's block and Hudi options in ``workload.json`` (the contract in conformance/README.md)."""
    path = os.path.join(directory, "workload.json")
    with open(path) as f:
        doc = json.load(f)
    doc["scenario"] = {"name": sc.name, **sc.harness}
    doc["hudi_options"] = {**doc.get("hudi_options", {}), **sc.hudi_options}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
