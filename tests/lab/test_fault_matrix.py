"""The fault matrix's bookkeeping, with a stand-in for the job (the Ray matrix is in tests/ray)."""

from __future__ import annotations

import json
from typing import Any

from runtime.core.config import JobConfig
from runtime.lab.fault_matrix import FAILED, NOT_APPLICABLE, NOT_FIRED, PASSED, run_matrix


def _finished(cfg: JobConfig, fired: bool) -> dict[str, Any]:
    return {
        "status": "finished",
        "error": None,
        "exactly_once": {"verified": True},
        "faults_fired": [{"point": cfg.faults[0].point}] if fired else [],
        "failovers": [{"error": "crash"}] if fired else [],
        "commits": [{"instant": "1"}, {"instant": "2"}],
    }


def test_every_cell_is_recorded_in_matrix_order_with_its_outcome(tmp_path):
    seen: list[tuple[str, str]] = []

    def run(cfg: JobConfig, sub: str) -> dict[str, Any]:
        seen.append((cfg.protocol, sub))
        if cfg.protocol == "control-topic":
            raise RuntimeError("could not start")
        return _finished(cfg, fired=cfg.protocol == "message-bus")

    doc = run_matrix(
        JobConfig(source="generator", writers=2, checkpoints=4),
        ["message-bus", "operator-event", "control-topic", "coordination-rpc"],
        ["task.before_flush", "bus.deleted"],
        1,
        str(tmp_path),
        run=run,
        parallel=2,
    )
    cells = [(r["fault"], r["protocol"], r["outcome"]) for r in doc["runs"]]
    assert cells == [
        ("task.before_flush", "message-bus", PASSED),
        ("task.before_flush", "operator-event", NOT_FIRED),  # finished, but the point never fired
        ("task.before_flush", "control-topic", FAILED),  # the run could not start: recorded, not raised
        ("task.before_flush", "coordination-rpc", NOT_FIRED),
        ("bus.deleted", "message-bus", PASSED),
        ("bus.deleted", "operator-event", NOT_APPLICABLE),  # no bus: never run
        ("bus.deleted", "control-topic", NOT_APPLICABLE),
        ("bus.deleted", "coordination-rpc", NOT_APPLICABLE),
    ]
    assert len(seen) == 5  # the cells that do not apply are not run
    failed = doc["runs"][2]
    assert failed["explanation"] == "RuntimeError: could not start" and failed["status"] == "error"
    assert doc["runs"][0]["commits"] == 2 and doc["runs"][0]["replay"].startswith("commitlab run")
    assert json.loads((tmp_path / "faults.json").read_text())["runs"] == doc["runs"]
