"""Faults on Ray: every fault point fires, the job recovers, and the official reader finds the
table exactly-once. Real crashes: a crashed actor's process exits."""

from __future__ import annotations

import json
import os

import pytest

from actors.job import run_job
from runtime.config import JobConfig
from runtime.fault_matrix import KNOWN, PASSED, classify, config_for, plot_heatmap, run_matrix
from runtime.faults import FAULT_POINTS, FaultSpec

pytestmark = pytest.mark.ray

CRASHES = ["task.before_flush", "task.after_flush_before_event", "task.in_snapshot",
           "task.after_checkpoint_before_commit", "coordinator.before_commit_file",
           "coordinator.after_commit_before_next_instant", "dfs.transient_error"]


def _cfg(tmp_path, protocol="message-bus", **kw) -> JobConfig:
    base = dict(source="generator", protocol=protocol, writers=2, checkpoints=4, records=4_000,
                bucket_flush_rows=500, checkpoint_timeout_s=4.0, table=str(tmp_path / "table"))
    base.update(kw)
    return JobConfig(**base)


@pytest.mark.parametrize("point", CRASHES)
def test_a_crash_fires_once_and_recovery_verifies(ray_session, tmp_path, point):
    task = 0 if point.startswith("task.") else -1
    ckp = -1 if point == "dfs.transient_error" else 2
    result = run_job(_cfg(tmp_path, faults=[FaultSpec(point, ckp, task)]), str(tmp_path / "out"))
    fired = [f["point"] for f in result["faults_fired"]]
    assert fired == [point]  # fired exactly once, even though the job restarted
    assert len(result["failovers"]) == 1, result["failovers"]
    assert result["status"] == "finished", result["error"]
    eo = result["exactly_once"]
    assert eo["verified"], eo
    # nothing of the failed attempt is left: every commit's rows match what the reader returns for
    # it, and the only pending instant is the coordinator's next one, with no files
    assert eo["commit_problems"] == []
    names = os.listdir(tmp_path / "table" / ".hoodie")
    pending = [n.split(".")[0] for n in names
               if n.endswith(".inflight") and n.replace(".inflight", ".commit") not in names]
    assert len(pending) <= 1
    data = [f for d in os.listdir(tmp_path / "table") if not d.startswith(".")
            for f in os.listdir(tmp_path / "table" / d)]
    assert not [f for f in data for p in pending if p in f]
    with open(tmp_path / "out" / "result.json") as f:
        assert json.load(f)["faults_fired"][0]["point"] == point


def test_a_coordinator_crash_before_the_commit_file_is_recommitted_from_task_state(ray_session, tmp_path):
    result = run_job(_cfg(tmp_path, faults=[FaultSpec("coordinator.before_commit_file", 2)]), None)
    failover = result["failovers"][0]
    # checkpoint 2 completed (its states were stored) before the coordinator died: restored from 2,
    # the tasks' bootstrap events recommit its instant
    assert failover["restored_checkpoint"] == 2
    assert 2 in [c["checkpoint"] for c in result["commits"]]
    assert result["exactly_once"]["verified"]


@pytest.mark.parametrize("point,effect", [("checkpoint.abort", "aborted"),
                                          ("checkpoint.timeout", "timed-out"),
                                          ("checkpoint.notification_lost", "completed")])
def test_checkpoint_faults_leave_the_instant_pending_and_lose_nothing(ray_session, tmp_path, point, effect):
    result = run_job(_cfg(tmp_path, faults=[FaultSpec(point, 2, 0)]), None)
    assert [f["point"] for f in result["faults_fired"]] == [point]
    assert result["failovers"] == []
    assert result["checkpoints"]["detail"]["2"]["status"] == effect
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]
    # checkpoint 2's data was committed by a later checkpoint: no commit names checkpoint 2
    assert 2 not in [c["checkpoint"] for c in result["commits"]]


@pytest.mark.parametrize("protocol", ["operator-event", "timeline-server", "coordination-rpc",
                                      "coordination-rpc-async", "control-topic"])
def test_every_protocol_recovers_from_a_task_crash(ray_session, tmp_path, protocol):
    result = run_job(_cfg(tmp_path, protocol, faults=[FaultSpec("task.in_snapshot", 2, 1)]), None)
    assert len(result["failovers"]) == 1
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]


def test_restarts_are_bounded_and_the_failure_is_named(ray_session, tmp_path):
    spec = FaultSpec("task.in_snapshot", -1, 0, times=5)  # crashes at every snapshot
    result = run_job(_cfg(tmp_path, faults=[spec], max_restarts=2), None)
    assert result["status"] == "failed"
    assert len(result["failovers"]) == 2
    assert "writer-0" in result["error"]
    assert result["exactly_once"] is None


def test_fault_matrix_records_outcomes_and_draws_the_heat_map(ray_session, tmp_path):
    base = _cfg(tmp_path)
    doc = run_matrix(base, ["message-bus", "operator-event"], ["task.in_snapshot", "quiet-round"], 1,
                     str(tmp_path / "m"), run=lambda cfg, sub: run_job(cfg, sub))
    outcomes = {(r["protocol"], r["fault"]): r["outcome"] for r in doc["runs"]}
    assert outcomes[("message-bus", "task.in_snapshot")] == PASSED
    assert outcomes[("operator-event", "quiet-round")] == KNOWN
    assert outcomes[("message-bus", "quiet-round")] == PASSED
    on_disk = json.loads((tmp_path / "m" / "faults.json").read_text())
    assert {"protocol", "fault", "seed", "outcome", "fired", "replay"} <= set(on_disk["runs"][0])
    assert on_disk["runs"][0]["fired"][0]["point"] == "task.in_snapshot"
    assert os.path.getsize(plot_heatmap(doc, str(tmp_path / "m"))) > 1000


def test_classify_calls_a_finished_but_unverified_run_a_violation():
    result = {"status": "finished", "failovers": [], "deadlock": None,
              "exactly_once": {"verified": False, "lost": 3, "duplicated": 0, "unexpected": 0,
                               "mismatched": 0, "commit_problems": []}}
    outcome, why = classify("message-bus", "task.in_snapshot", result)
    assert outcome == "VIOLATION" and "lost 3" in why


def test_the_seed_picks_the_checkpoint_and_the_task(tmp_path):
    base = _cfg(tmp_path, checkpoints=6)
    picks = {(config_for(base, "message-bus", "task.in_snapshot", s, "t").faults[0].checkpoint,
              config_for(base, "message-bus", "task.in_snapshot", s, "t").faults[0].task) for s in range(8)}
    assert all(2 <= c <= 5 for c, _ in picks) and len(picks) > 2
    assert set(FAULT_POINTS) >= set(CRASHES)


def test_a_lost_notification_deadlocks_operator_events_too(ray_session, tmp_path):
    """Found by the fault matrix: under P1, when checkpoint 2's completion never reaches the
    coordinator, no new instant starts; the writers block in round 3's eager flush, checkpoint 3
    times out, and its abort sends a CommitAckEvent into the mailbox of a writer that is already
    blocked: the same wait-for cycle as after an empty round."""
    cfg = _cfg(tmp_path, "operator-event", faults=[FaultSpec("checkpoint.notification_lost", 2)])
    result = run_job(cfg, None)
    assert result["status"] == "deadlocked"
    assert result["deadlock"]["releasing_mail"] == "CommitAckEvent(ckp=3)"
    assert result["checkpoints"]["detail"]["3"]["status"] == "timed-out"
