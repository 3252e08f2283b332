"""Faults on Ray: what the Ray host does itself, once per mechanism. A crashed actor's process
really exits and the role is re-placed under its name; a fault fires once across processes (a
marker on the DFS); messages are dropped or delayed by the Ray env; a slow DFS sleeps in the I/O
thread; a region failover re-places the tasks beside the living coordinator.

The matrices of fault points, protocols and failover strategies run the same role code under the
simulator (tests/sim/test_sim_faults.py, tests/sim/test_sim_failover.py), where a run takes a
fraction of a second instead of ten."""

from __future__ import annotations

import json
import os

import pytest

from actors.job import run_job
from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.lab.fault_matrix import KNOWN, PASSED, plot_heatmap, run_matrix
from runtime.lab.report import why_not_verified

pytestmark = pytest.mark.ray

# a write task's process and the coordinator's process (the job manager's actor) exit
CRASHES = ["task.in_snapshot", "coordinator.after_commit_before_next_instant"]


def _cfg(tmp_path, protocol="message-bus", **kw) -> JobConfig:
    base = dict(
        source="generator",
        protocol=protocol,
        writers=2,
        checkpoints=4,
        records=4_000,
        bucket_flush_rows=500,
        checkpoint_timeout_s=4.0,
        table=str(tmp_path / "table"),
    )
    base.update(kw)
    return JobConfig(**base)


@pytest.mark.parametrize("point", CRASHES)
def test_a_crash_fires_once_and_recovery_verifies(ray_session, tmp_path, point):
    task = 0 if point.startswith("task.") else -1
    ckp = -1 if point == "dfs.transient_error" else 2
    result = run_job(_cfg(tmp_path, faults=[FaultSpec(point, ckp, task)]), str(tmp_path / "out"))
    fired = [f["point"] for f in result.faults_fired]
    assert fired == [point]  # fired exactly once, even though the job restarted
    assert len(result.failovers) == 1, result.failovers
    assert result.status == "finished", result.error
    eo = result.exactly_once
    assert eo.verified, why_not_verified(eo)
    # nothing of the failed attempt is left: every commit's rows match what the reader returns for
    # it, and the only pending instant is the coordinator's next one, with no files
    assert eo.commit_problems == []
    names = os.listdir(tmp_path / "table" / ".hoodie")
    # a commit's inflight file is <t>.inflight; a completed rollback keeps its <t>.rollback.inflight
    pending = [
        n.split(".")[0]
        for n in names
        if n.count(".") == 1 and n.endswith(".inflight") and n.replace(".inflight", ".commit") not in names
    ]
    assert len(pending) <= 1
    data = [
        f for d in os.listdir(tmp_path / "table") if not d.startswith(".") for f in os.listdir(tmp_path / "table" / d)
    ]
    assert not [f for f in data for p in pending if p in f]
    with open(tmp_path / "out" / "result.json") as f:
        assert json.load(f)["faults_fired"][0]["point"] == point


def test_a_coordinator_crash_before_the_commit_file_is_recommitted_from_task_state(ray_session, tmp_path):
    result = run_job(_cfg(tmp_path, faults=[FaultSpec("coordinator.before_commit_file", 2)]), None)
    failover = result.failovers[0]
    # checkpoint 2 completed (its states were stored) before the coordinator died: restored from 2,
    # the tasks' bootstrap events recommit its instant
    assert failover.restored_checkpoint == 2
    assert 2 in [c["checkpoint"] for c in result.commits]
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


@pytest.mark.parametrize("point,effect", [("checkpoint.timeout", "timed-out")])  # on real time
def test_checkpoint_faults_leave_the_instant_pending_and_lose_nothing(ray_session, tmp_path, point, effect):
    result = run_job(_cfg(tmp_path, faults=[FaultSpec(point, 2, 0)]), None)
    assert [f["point"] for f in result.faults_fired] == [point]
    assert result.failovers == []
    assert result.figures.checkpoints.detail["2"]["status"] == effect
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    # checkpoint 2's data was committed by a later checkpoint: no commit names checkpoint 2
    assert 2 not in [c["checkpoint"] for c in result.commits]


def test_fault_matrix_records_outcomes_and_draws_the_heat_map(ray_session, tmp_path):
    # the bookkeeping of every outcome is tests/lab/test_fault_matrix.py's; here two real runs side
    # by side: a crash P1 recovers from and the quiet round it deadlocks in
    base = _cfg(tmp_path)
    doc = run_matrix(
        base,
        ["operator-event"],
        ["task.in_snapshot", "quiet-round"],
        1,
        str(tmp_path / "m"),
        run=lambda cfg, sub: run_job(cfg, sub),
        parallel=2,
    )
    assert [(r["fault"], r["protocol"], r["outcome"]) for r in doc["runs"]] == [
        ("task.in_snapshot", "operator-event", PASSED),
        ("quiet-round", "operator-event", KNOWN),
    ]
    on_disk = json.loads((tmp_path / "m" / "faults.json").read_text())
    assert on_disk["runs"][0]["fired"][0]["point"] == "task.in_snapshot"
    assert os.path.getsize(plot_heatmap(doc, str(tmp_path / "m"))) > 1000


def test_a_lost_notification_deadlocks_operator_events_too(ray_session, tmp_path):
    """Found by the fault matrix: under P1 (Hudi 0.10), when checkpoint 2's completion never
    reaches the coordinator, no new instant starts; each writer's barrier flush of checkpoint 3
    (``snapshotState -> flushRemaining -> instantToWrite``) waits for an instant that does not
    change, checkpoint 3 times out, and its abort's CommitAckEvent lands in the mailbox of the
    writer that is blocked: the same wait-for cycle as after an empty round.

    In Hudi, ``write.commit.ack.timeout`` equals the checkpoint timeout, so the writer's wait ends
    about one wait tick after the abort: the task fails and the job fails over. Whether the lab's
    watchdog sees the cycle within that tick is a race, so this test gives the ack timeout twice
    the checkpoint timeout (``commit_ack_timeout_s``, the lab's knob for exactly this) to make the
    cycle observable every time; the fault matrix runs Hudi's equal timeouts."""
    cfg = _cfg(
        tmp_path,
        "operator-event",
        commit_ack_timeout_s=8.0,
        faults=[FaultSpec("checkpoint.notification_lost", 2)],
    )
    result = run_job(cfg, None)
    assert result.status == "deadlocked", result.error
    assert result.deadlock.releasing_mail == "CommitAckEvent(ckp=3)"
    assert result.deadlock.running_mail == "snapshotState(checkpoint 3)"
    assert result.figures.checkpoints.detail["3"]["status"] == "timed-out"


# -- messaging, DFS latency, the bus deleted, HUDI-6194, region failover --------------------------


def test_a_dropped_event_fails_the_task_and_the_job_recovers(ray_session, tmp_path):
    """A write-metadata event is one-way (Flink's operator event gateway): its loss is noticed when
    the acknowledgement does not come within the RPC timeout, and the task fails, as Flink's
    RpcTaskOperatorEventGateway fails it. Eight checkpoints keep the job running past that moment."""
    spec = FaultSpec("message.dropped", 2, 0, target="write_metadata")
    # Without write markers: with them, the commit reconciles the lost flush's file away (as Hudi's
    # reconcileAgainstMarkers would) and the task fails at its next merge, before the RPC timeout
    # this test is about notices the loss (docs/FIDELITY.md, "Write markers")
    cfg = _cfg(tmp_path, faults=[spec], rpc_timeout_s=1.0, checkpoints=8, markers="none")
    result = run_job(cfg, None)
    assert [(f["point"], f.get("target")) for f in result.faults_fired] == [("message.dropped", "write_metadata")]
    assert len(result.failovers) == 1
    assert "operator event to the coordinator was lost" in result.failovers[0].error
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


def test_a_delayed_event_and_a_slow_dfs_are_ridden_out(ray_session, tmp_path):
    faults = [
        FaultSpec("message.delayed", 2, 0, param=1.0, target="write_metadata"),
        FaultSpec("dfs.latency", 3, param=0.05),
    ]
    # the late event holds up its task's checkpoint ack behind it (one sender's order per receiver)
    result = run_job(_cfg(tmp_path, faults=faults), None)
    assert sorted(f["point"] for f in result.faults_fired) == ["dfs.latency", "message.delayed"]
    assert result.failovers == []
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    assert result.figures.checkpoints.detail["2"]["status"] == "completed"  # 1 s late is within 4 s


def test_a_bus_deleted_while_running_is_recreated_and_nothing_is_lost(ray_session, tmp_path):
    result = run_job(_cfg(tmp_path, "message-bus", faults=[FaultSpec("bus.deleted", 2)]), None)
    assert [f["point"] for f in result.faults_fired] == ["bus.deleted"]
    coord = result.coordinator
    assert coord.deleted_by_fault and coord.deleted_by_fault[0].endswith("message_bus")
    assert coord.protocol["bus_recreated"] >= 1  # the next message found the directory gone
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


def test_a_ckp_meta_directory_deleted_while_running_stalls_writers_until_a_failover(ray_session, tmp_path):
    """#8060: with ckp_meta gone, writers find no pending instant and wait in instantToWrite until
    the instant-wait timeout fails them; the restarted job bootstraps ckp_meta again."""
    result = run_job(_cfg(tmp_path, "timeline-server", faults=[FaultSpec("bus.deleted", 2)]), None)
    assert [f["point"] for f in result.faults_fired] == ["bus.deleted"]
    assert len(result.failovers) >= 1
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


def test_a_bus_deleted_between_restarts_is_recreated_by_the_new_coordinator(ray_session, tmp_path):
    spec = FaultSpec("bus.deleted_between_restarts", 2, 0)
    result = run_job(_cfg(tmp_path, faults=[spec]), None)
    assert [f["point"] for f in result.faults_fired] == ["bus.deleted_between_restarts"]
    assert result.failovers[0].deleted == ".hoodie/.aux/message_bus"
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


def _pending_instant_files(table) -> list[str]:
    names = os.listdir(table / ".hoodie")
    # a commit's inflight file is <t>.inflight; a completed rollback keeps its <t>.rollback.inflight
    pending = [
        n.split(".")[0]
        for n in names
        if n.count(".") == 1 and n.endswith(".inflight") and n.replace(".inflight", ".commit") not in names
    ]
    data = [f for d in os.listdir(table) if not d.startswith(".") for f in os.listdir(table / d)]
    return [f for f in data for p in pending if p in f]


@pytest.mark.parametrize("failover", ["region"])  # global: tests/sim/test_sim_faults.py
def test_every_task_failing_as_an_instant_starts_leaves_no_data_in_a_rolled_back_instant(
    ray_session, tmp_path, failover
):
    """HUDI-6194: all tasks fail over while the coordinator starts a new instant."""
    spec = FaultSpec("tasks.fail_at_instant_start", 2)
    result = run_job(_cfg(tmp_path, faults=[spec], failover=failover), None)
    assert [f["point"] for f in result.faults_fired] == ["tasks.fail_at_instant_start"]
    assert [f.strategy for f in result.failovers] == [failover]
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    assert result.exactly_once.commit_problems == []
    assert result.rolled_back, "the instant started as the tasks failed was rolled back"
    assert _pending_instant_files(tmp_path / "table") == []
    if failover == "region":
        (reset,) = result.coordinator.resets  # the same coordinator lived through it
        assert reset["resume_checkpoint_id"] >= 2


# the eager-instant family and the RPC family reset differently; every protocol: tests/sim/test_sim_faults.py
@pytest.mark.parametrize("protocol", ["message-bus", "coordination-rpc"])
def test_region_failover_keeps_the_coordinator_and_verifies(ray_session, tmp_path, protocol):
    result = run_job(
        _cfg(tmp_path, protocol, faults=[FaultSpec("task.after_flush_before_event", 2, 0)], failover="region"), None
    )
    assert [f.strategy for f in result.failovers] == ["region"]
    assert len(result.coordinator.resets) == 1
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    if not protocol.startswith("coordination-rpc"):
        assert _pending_instant_files(tmp_path / "table") == []
    # else Hudi 1.1 leaves the instant a region failover interrupted pending, its files unread
    # (subtaskReset keeps the event buffers; no rollback: docs/FIDELITY.md, coordination-rpc)


def _flush_instants(trace_path) -> set[str]:
    with open(trace_path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return {
        e["args"]["instant"]
        for e in events
        if e.get("name", "").startswith("flush ") and "instant" in e.get("args", {})
    }


@pytest.mark.parametrize("hold", [True])  # without the hold: tests/sim/test_sim_faults.py, deterministic
def test_hudi_6194_writes_into_a_rolled_back_instant_unless_bootstraps_are_held(ray_session, tmp_path, hold):
    """Every task fails as instant I1 starts; the failover is regional (the coordinator keeps I1
    pending) and one task comes back 5 s late. Answering the early tasks' bootstraps at once lets
    them write into I1, which the coordinator rolls back when the last task is in: HUDI-6194.
    Holding the answers until every task is back (the default) writes nothing there."""
    from actors.job import JobRun
    from runtime.faults.scenarios import wrong_instant_config
    from runtime.job.prepare import prepare_job

    cfg = wrong_instant_config(_cfg(tmp_path, "operator-event", hold_bootstraps=hold))
    trace = tmp_path / "trace.json"
    result = JobRun(prepare_job(cfg), None, trace_path=str(trace)).run()
    assert result.failovers[0].strategy == "region"
    written_then_rolled_back = _flush_instants(trace) & set(result.rolled_back)
    if hold:
        assert written_then_rolled_back == set()
        assert result.status == "finished", result.error
        assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    else:
        # the early task wrote into I1: either its own trace shows it, or (its trace died with
        # it) it failed reading back its file of I1, or the table is no longer exactly-once
        read_its_rolled_back_file = any(i in (f.error or "") for f in result.failovers[1:] for i in result.rolled_back)
        broken = result.status != "finished" or not (result.exactly_once and result.exactly_once.verified)
        assert written_then_rolled_back or read_its_rolled_back_file or broken, result.failovers
