"""The fault matrix's bookkeeping, with a stand-in for the job (the Ray matrix is in tests/ray)."""

from __future__ import annotations

import json

import pytest
from recorded import failovers, recorded_result

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FAULT_POINTS
from runtime.lab.fault_matrix import (
    FAILED,
    KNOWN,
    NOT_APPLICABLE,
    NOT_FIRED,
    PASSED,
    applicable,
    classify,
    config_for,
    run_matrix,
)
from runtime.lab.results import JobResult
from runtime.lab.status import Status
from runtime.lab.verdicts import ExactlyOnce


def _finished(cfg: JobConfig, fired: bool) -> JobResult:
    return recorded_result(
        faults_fired=[{"point": cfg.faults[0].point}] if fired else [],
        failovers=failovers("crash") if fired else [],
    )


def test_every_cell_is_recorded_in_matrix_order_with_its_outcome(tmp_path):
    seen: list[tuple[str, str]] = []

    def run(cfg: JobConfig, sub: str) -> JobResult:
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


def test_classify_calls_a_finished_but_unverified_run_a_violation():
    lost = ExactlyOnce(False, 20, 17, lost=3, duplicated=0, unexpected=0, mismatched=0, commit_problems=[])
    result = recorded_result(exactly_once=lost)
    outcome, why = classify("message-bus", "task.in_snapshot", result)
    assert outcome == "VIOLATION" and "lost 3" in why


def test_a_lost_write_status_is_hudis_own_loss_only_where_hudis_coordinator_commits_what_it_has():
    lost = ExactlyOnce(False, 20, 17, lost=3, duplicated=0, unexpected=0, mismatched=0, commit_problems=[])
    result = recorded_result(exactly_once=lost)
    outcome, why = classify("message-bus", "message.dropped", result)
    assert outcome == KNOWN and "notifyCheckpointComplete" in why and "lost 3" in why
    # the what-if's committer is not Hudi's: its loss stays a violation
    assert classify("two-phase-commit", "message.dropped", result)[0] == "VIOLATION"


def test_the_seed_picks_the_checkpoint_and_the_task(tmp_path):
    base = JobConfig(source="generator", writers=2, checkpoints=6, table=str(tmp_path / "table"))
    picks = {
        (
            config_for(base, "message-bus", "task.in_snapshot", s, "t").faults[0].checkpoint,
            config_for(base, "message-bus", "task.in_snapshot", s, "t").faults[0].task,
        )
        for s in range(8)
    }
    assert all(2 <= c <= 5 for c, _ in picks) and len(picks) > 2
    assert {"task.in_snapshot", "coordinator.before_commit_file", "dfs.transient_error"} <= set(FAULT_POINTS)


def test_the_bus_faults_do_not_apply_without_a_bus(tmp_path):
    assert applicable("message-bus", "bus.deleted") and not applicable("coordination-rpc", "bus.deleted")
    # a compaction fault exists only where the table compacts (merge-on-read), never "not fired"
    assert not applicable("message-bus", "compaction.crash_during")
    assert applicable("message-bus", "compaction.crash_during", compacts=True)
    doc = run_matrix(
        JobConfig(source="generator"),
        ["operator-event"],
        ["bus.deleted"],
        1,
        str(tmp_path),
        run=lambda cfg, sub: pytest.fail("an inapplicable cell must not run"),
    )
    assert doc["runs"][0]["outcome"] == NOT_APPLICABLE


def test_a_documented_failure_of_the_shipped_protocol_is_a_known_failure_not_a_failed_run():
    """#3915 as shipped fails a job after a region failover ("No inflight instant when flushing
    data"): the matrix says so as the simulator's exploration does, from the same list."""
    error = "JobFailed: writer-0 failed: FlushError: writer-0: No inflight instant when flushing data at checkpoint 6"
    result = recorded_result(status=Status.FAILED, error=error, failovers=failovers("x"), exactly_once=None)
    outcome, why = classify("message-bus", "wrong-instant", result)
    assert outcome == "known failure" and "#3915" in why
    assert classify("coordination-rpc", "wrong-instant", result)[0] == FAILED  # only where it is documented


def test_the_matrix_runs_kafka_connect_at_the_checkpoint_cadence(tmp_path):
    """Hudi's 60 s Connect interval (3 s scaled) would end a four-checkpoint run inside its first
    commit, and no fault point after it would ever fire."""
    base = JobConfig(source="generator", checkpoints=4)
    cfg = config_for(base, "control-topic", "task.before_flush", 0, str(tmp_path / "t"))
    assert cfg.kafka_commit_interval_s == base.checkpoint_interval_s


@pytest.mark.parametrize(("rows", "columns"), [(1, 1), (2, 2), (7, 19)])
def test_the_heat_map_keeps_its_title_legend_and_names_inside_the_picture(rows, columns):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from runtime.cli.options import protocol_names
    from runtime.lab.fault_matrix import OUTCOMES, SCENARIO_FAULTS, heatmap_figure

    protocols = protocol_names()[:rows]
    faults = (list(FAULT_POINTS) + list(SCENARIO_FAULTS))[:columns]
    runs = [
        {"protocol": p, "fault": f, "outcome": OUTCOMES[(i + j) % len(OUTCOMES)]}
        for i, p in enumerate(protocols)
        for j, f in enumerate(faults)
    ]
    fig = heatmap_figure({"protocols": protocols, "faults": faults, "runs": runs, "seeds": 2})
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        picture = fig.bbox
        ax = fig.axes[0]
        title = fig._suptitle if fig.get_suptitle() else ax.title
        legend = fig.legends[0] if fig.legends else ax.get_legend()
        parts = {
            "title": title.get_window_extent(renderer),
            "legend": legend.get_window_extent(renderer),
            "heat map and its names": ax.get_tightbbox(renderer),
        }
        for name, box in parts.items():
            assert box, name
            inside = box.x0 >= picture.x0 and box.y0 >= picture.y0 and box.x1 <= picture.x1 and box.y1 <= picture.y1
            assert inside, f"{name} {box.bounds} is cut by the picture {picture.bounds} ({rows}x{columns})"
    finally:
        plt.close(fig)


def test_a_matrix_refuses_an_out_folder_holding_an_earlier_matrixs_tables(tmp_path, capsys):
    """Its runs would write into the earlier tables and judge their rows too: refused before Ray
    starts, with the flag and the fix named; the earlier folder is left as it was."""
    from runtime.cli import main

    earlier = tmp_path / "message-bus__task.before_flush__0" / "table"
    earlier.mkdir(parents=True)
    (earlier / "kept").write_text("x")
    assert main(["faults", "--protocols", "message-bus", "--faults", "task.before_flush", "--out", str(tmp_path)]) == 2
    said = capsys.readouterr()
    assert "--out" in said.err + said.out and "new --out" in said.err + said.out
    assert (earlier / "kept").read_text() == "x"
