"""Every fault point and failover strategy under the simulator, for every protocol it applies to.

The role code is the Ray host's; what differs on Ray (a real process exiting, an actor re-placed
under its name, a fault marker seen across processes) is tested once per mechanism in
tests/ray/test_faults_ray.py. The matrices live here, where a run costs a fraction of a second.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.faults.scenarios import wrong_instant_config
from runtime.sim import simulate
from runtime.sim.schedule import CRASH_POINTS

CRASHES = [*CRASH_POINTS, "dfs.transient_error"]  # every crash point, and a failed commit file


def _cfg(protocol: str = "message-bus", **kw) -> JobConfig:
    base = dict(
        protocol=protocol,
        source="generator",
        writers=2,
        checkpoints=4,
        records=2_000,
        bucket_flush_rows=250,
        checkpoint_timeout_s=4.0,
    )
    base.update(kw)
    return JobConfig(**base)


def _run(cfg: JobConfig, tmp_path: Path, seed: int = 1) -> dict:
    """A run on the real parquet table, so the files left behind can be checked."""
    return simulate(cfg, seed=seed, workdir=str(tmp_path), max_real_s=120.0)


def _files_of_pending_instants(table: Path) -> list[str]:
    names = os.listdir(table / ".hoodie")
    pending = [
        n.split(".")[0] for n in names if n.endswith(".inflight") and n.replace(".inflight", ".commit") not in names
    ]
    data = [f for d in os.listdir(table) if not d.startswith(".") for f in os.listdir(table / d)]
    return [f for f in data for p in pending if p in f]


@pytest.mark.parametrize("point", CRASHES)
def test_a_crash_fires_once_and_recovery_leaves_nothing_of_the_failed_attempt(tmp_path, point):
    task = 0 if point.startswith("task.") else -1
    ckp = -1 if point == "dfs.transient_error" else 2
    result = _run(_cfg(faults=[FaultSpec(point, ckp, task)]), tmp_path)
    assert [f["point"] for f in result.faults_fired] == [point]  # once, though the job restarted
    assert len(result.failovers) == 1, result.failovers
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    assert result.exactly_once.commit_problems == []
    assert _files_of_pending_instants(tmp_path / "table") == []


@pytest.mark.parametrize(
    "point,effect",
    [
        ("checkpoint.abort", "aborted"),
        ("checkpoint.timeout", "timed-out"),
        ("checkpoint.notification_lost", "completed"),
    ],
)
def test_checkpoint_faults_leave_the_instant_pending_and_lose_nothing(tmp_path, point, effect):
    result = _run(_cfg(faults=[FaultSpec(point, 2, 0)]), tmp_path)
    assert [f["point"] for f in result.faults_fired] == [point]
    assert result.failovers == []
    assert result.figures.checkpoints.detail["2"]["status"] == effect
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    # checkpoint 2's data was committed by a later checkpoint: no commit names checkpoint 2
    assert 2 not in [c["checkpoint"] for c in result.commits]


@pytest.mark.parametrize("failover", ["global", "region"])
def test_every_task_failing_as_an_instant_starts_leaves_no_data_in_a_rolled_back_instant(tmp_path, failover):
    """HUDI-6194: all tasks fail over while the coordinator starts a new instant."""
    result = _run(_cfg(faults=[FaultSpec("tasks.fail_at_instant_start", 2)], failover=failover), tmp_path)
    assert [f["point"] for f in result.faults_fired] == ["tasks.fail_at_instant_start"]
    assert [f.strategy for f in result.failovers] == [failover]
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    assert result.rolled_back, "the instant started as the tasks failed was rolled back"
    assert _files_of_pending_instants(tmp_path / "table") == []
    if failover == "region":
        (reset,) = result.coordinator.resets  # the same coordinator lived through it
        assert reset["resume_checkpoint_id"] >= 2


@pytest.mark.parametrize(
    "protocol",
    ["operator-event", "message-bus", "ckp-meta", "timeline-server", "coordination-rpc", "coordination-rpc-async"],
)
def test_region_failover_keeps_the_coordinator_and_verifies(tmp_path, protocol):
    result = _run(
        _cfg(protocol, faults=[FaultSpec("task.after_flush_before_event", 2, 0)], failover="region"), tmp_path
    )
    assert [f.strategy for f in result.failovers] == ["region"]
    assert len(result.coordinator.resets) == 1
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    if not protocol.startswith("coordination-rpc"):
        assert _files_of_pending_instants(tmp_path / "table") == []
    # else Hudi 1.1 leaves the instant a region failover interrupted pending, its files unread
    # (subtaskReset keeps the event buffers; no rollback: docs/FIDELITY.md, coordination-rpc)


def test_region_failover_falls_back_to_global_when_the_coordinator_died(tmp_path):
    result = _run(_cfg(faults=[FaultSpec("coordinator.before_commit_file", 2)], failover="region"), tmp_path)
    assert [f.strategy for f in result.failovers] == ["global"]
    assert result.exactly_once.verified, result.exactly_once


@pytest.mark.parametrize("hold", [True, False])
def test_hudi_6194_the_bootstrap_hold_keeps_writes_out_of_a_rolled_back_instant(tmp_path, hold):
    """The Ray test's schedule (every task fails as instant I1 starts, one comes back late, region
    failover) on virtual time: with the hold nothing is written into an instant rolled back later."""
    cfg = wrong_instant_config(_cfg("operator-event", hold_bootstraps=hold))
    result = simulate(cfg, seed=1, workdir=str(tmp_path), trace=True, max_real_s=120.0)
    assert result.failovers[0].strategy == "region"
    # a flush's trace event: (t_ns, "X", role, "io", "flush", name, start, duration, args as JSON);
    # the failed attempt's writes into the instant are legal (rolled back), a restored task's are not
    failed_over_ns = result.failovers[0].at * 1e9
    flushed_after = {
        json.loads(e[8])["instant"]
        for e in result.sim.trace
        if e[1:5] == ("X", e[2], "io", "flush") and e[0] > failed_over_ns
    }
    assert flushed_after
    written_then_rolled_back = flushed_after & set(result.rolled_back)
    if hold:
        assert written_then_rolled_back == set()
        assert result.status == "finished", result.error
        assert result.exactly_once.verified, result.exactly_once
    else:
        broken = result.status != "finished" or not (result.exactly_once and result.exactly_once.verified)
        assert written_then_rolled_back and broken, result.failovers


@pytest.mark.parametrize("protocol", ["operator-event", "message-bus", "two-phase-commit"])
def test_a_late_write_status_holds_up_its_tasks_checkpoint_ack_and_nothing_is_lost(tmp_path, protocol):
    """Flink's RPC keeps one sender's order per receiver: a write-metadata event that arrives late
    delays the same task's checkpoint acknowledgement behind it, so the checkpoint completes late
    with every write status in, and the commit keeps the flush (the lane's order held)."""
    spec = FaultSpec("message.delayed", 2, 0, param=1.0, target="write_metadata")
    result = _run(_cfg(protocol, faults=[spec]), tmp_path)
    assert [f["point"] for f in result.faults_fired] == ["message.delayed"]
    assert result.failovers == []
    assert result.figures.checkpoints.detail["2"]["status"] == "completed"  # 1 s late is within 4 s
    assert result.exactly_once.verified, result.exactly_once


def test_a_lost_write_status_whose_checkpoint_completes_loses_that_flush_as_hudi_does(tmp_path):
    """Hudi's coordinator commits the events it received when the checkpoint completes
    (``StreamWriteOperatorCoordinator.notifyCheckpointComplete``: "commits the ever received
    events anyway"); a lost event is noticed only when its ask times out, after that commit, and
    the restored task's bootstrap finds the instant completed. The verdict says so."""
    spec = FaultSpec("message.dropped", 2, 0, target="write_metadata")
    result = _run(_cfg("message-bus", faults=[spec]), tmp_path)
    assert result.figures.checkpoints.detail["2"]["status"] == "completed"
    assert not result.exactly_once.verified
    assert result.exactly_once.lost > 0 and result.exactly_once.duplicated == 0


def test_a_lost_committable_fails_its_task_before_the_checkpoint_completes(tmp_path):
    """Sink V2 sends a checkpoint's committable ahead of the barrier, so no checkpoint completes
    without it: the two-phase-commit writer's committable is confirmed before its ack, and a lost
    one fails the task at the RPC timeout; the job restores the previous checkpoint and replays."""
    spec = FaultSpec("message.dropped", 2, 0, target="write_metadata")
    result = _run(_cfg("two-phase-commit", faults=[spec], rpc_timeout_s=2.0), tmp_path)
    assert [f["point"] for f in result.faults_fired] == ["message.dropped"]
    assert len(result.failovers) == 1 and "write_metadata" in result.failovers[0].error
    assert result.failovers[0].restored_checkpoint == 1
    assert result.exactly_once.verified, result.exactly_once
