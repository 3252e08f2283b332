"""Faults on Ray: every fault point fires, the job recovers, and the official reader finds the
table exactly-once. Real crashes: a crashed actor's process exits."""

from __future__ import annotations

import json
import os

import pytest

from actors.job import run_job
from runtime.core.config import JobConfig
from runtime.core.fault_spec import FAULT_POINTS, FaultSpec
from runtime.lab.fault_matrix import KNOWN, PASSED, classify, config_for, plot_heatmap, run_matrix

pytestmark = pytest.mark.ray

CRASHES = [
    "task.before_flush",
    "task.after_flush_before_event",
    "task.in_snapshot",
    "task.after_checkpoint_before_commit",
    "coordinator.before_commit_file",
    "coordinator.after_commit_before_next_instant",
    "dfs.transient_error",
]


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
    pending = [
        n.split(".")[0] for n in names if n.endswith(".inflight") and n.replace(".inflight", ".commit") not in names
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
    failover = result["failovers"][0]
    # checkpoint 2 completed (its states were stored) before the coordinator died: restored from 2,
    # the tasks' bootstrap events recommit its instant
    assert failover["restored_checkpoint"] == 2
    assert 2 in [c["checkpoint"] for c in result["commits"]]
    assert result["exactly_once"]["verified"]


@pytest.mark.parametrize(
    "point,effect",
    [
        ("checkpoint.abort", "aborted"),
        ("checkpoint.timeout", "timed-out"),
        ("checkpoint.notification_lost", "completed"),
    ],
)
def test_checkpoint_faults_leave_the_instant_pending_and_lose_nothing(ray_session, tmp_path, point, effect):
    result = run_job(_cfg(tmp_path, faults=[FaultSpec(point, 2, 0)]), None)
    assert [f["point"] for f in result["faults_fired"]] == [point]
    assert result["failovers"] == []
    assert result["checkpoints"]["detail"]["2"]["status"] == effect
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]
    # checkpoint 2's data was committed by a later checkpoint: no commit names checkpoint 2
    assert 2 not in [c["checkpoint"] for c in result["commits"]]


@pytest.mark.parametrize(
    "protocol", ["operator-event", "timeline-server", "coordination-rpc", "coordination-rpc-async", "control-topic"]
)
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


def test_classify_calls_a_finished_but_unverified_run_a_violation():
    result = {
        "status": "finished",
        "failovers": [],
        "deadlock": None,
        "exactly_once": {
            "verified": False,
            "lost": 3,
            "duplicated": 0,
            "unexpected": 0,
            "mismatched": 0,
            "commit_problems": [],
        },
    }
    outcome, why = classify("message-bus", "task.in_snapshot", result)
    assert outcome == "VIOLATION" and "lost 3" in why


def test_the_seed_picks_the_checkpoint_and_the_task(tmp_path):
    base = _cfg(tmp_path, checkpoints=6)
    picks = {
        (
            config_for(base, "message-bus", "task.in_snapshot", s, "t").faults[0].checkpoint,
            config_for(base, "message-bus", "task.in_snapshot", s, "t").faults[0].task,
        )
        for s in range(8)
    }
    assert all(2 <= c <= 5 for c, _ in picks) and len(picks) > 2
    assert set(FAULT_POINTS) >= set(CRASHES)


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
    assert result["status"] == "deadlocked", result["error"]
    assert result["deadlock"]["releasing_mail"] == "CommitAckEvent(ckp=3)"
    assert result["deadlock"]["running_mail"] == "snapshotState(checkpoint 3)"
    assert result["checkpoints"]["detail"]["3"]["status"] == "timed-out"


# -- fault specs, messaging, DFS latency, the bus deleted, HUDI-6194, region failover ------------


def test_fault_specs_read_back_from_their_text():
    from runtime.core.fault_spec import parse_faults

    text = "task.in_snapshot@2#0,message.dropped:operator_event@3,dfs.latency=0.5,message.delayed#1=1.5"
    specs = parse_faults(text)
    assert ",".join(s.text() for s in specs) == text
    assert specs[1].target == "operator_event" and specs[2].value == 0.5
    assert parse_faults("dfs.latency")[0].value == 0.2  # the point's default
    with pytest.raises(ValueError, match="only message.dropped and message.delayed take a :target"):
        parse_faults("task.in_snapshot:write_metadata")
    with pytest.raises(ValueError, match="cannot read fault"):
        parse_faults("task.in_snapshot@two")


def test_a_message_without_a_checkpoint_never_takes_a_fault_meant_for_one(sim):
    from runtime.faults.injector import FaultInjector

    class _Msg:
        def __init__(self, ckp: int) -> None:
            self.checkpoint_id = ckp

    env = sim.env("coordinator")
    env.faults = FaultInjector([FaultSpec("message.dropped", 3, target="operator_event")], "coordinator", None, "")
    assert env.message_fault("writer-0", "operator_event", None) is None  # no checkpoint id
    assert env.message_fault("writer-0", "operator_event", _Msg(2)) is None
    assert env.message_fault("writer-0", "write_metadata", _Msg(3)) is None  # another target
    spec = env.message_fault("writer-1", "operator_event", _Msg(3))
    assert spec is not None and env.faults.fired[0]["task"] == 1  # the writer at the other end


def test_a_dropped_event_fails_the_task_and_the_job_recovers(ray_session, tmp_path):
    """A write-metadata event is one-way (Flink's operator event gateway): its loss is noticed when
    the acknowledgement does not come within the RPC timeout, and the task fails, as Flink's
    RpcTaskOperatorEventGateway fails it. Eight checkpoints keep the job running past that moment."""
    spec = FaultSpec("message.dropped", 2, 0, target="write_metadata")
    result = run_job(_cfg(tmp_path, faults=[spec], rpc_timeout_s=1.0, checkpoints=8), None)
    assert [(f["point"], f.get("target")) for f in result["faults_fired"]] == [("message.dropped", "write_metadata")]
    assert len(result["failovers"]) == 1
    assert "operator event to the coordinator was lost" in result["failovers"][0]["error"]
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]


def test_a_delayed_event_and_a_slow_dfs_are_ridden_out(ray_session, tmp_path):
    faults = [
        FaultSpec("message.delayed", 2, 0, param=1.0, target="write_metadata"),
        FaultSpec("dfs.latency", 3, param=0.05),
    ]
    result = run_job(_cfg(tmp_path, faults=faults), None)
    assert sorted(f["point"] for f in result["faults_fired"]) == ["dfs.latency", "message.delayed"]
    assert result["failovers"] == []
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]
    assert result["checkpoints"]["detail"]["2"]["status"] == "completed"  # 1 s late is within 4 s


def test_a_bus_deleted_while_running_is_recreated_and_nothing_is_lost(ray_session, tmp_path):
    result = run_job(_cfg(tmp_path, "message-bus", faults=[FaultSpec("bus.deleted", 2)]), None)
    assert [f["point"] for f in result["faults_fired"]] == ["bus.deleted"]
    coord = result["coordinator"]
    assert coord["deleted_by_fault"] and coord["deleted_by_fault"][0].endswith("message_bus")
    assert coord["protocol"]["bus_recreated"] >= 1  # the next message found the directory gone
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]


def test_a_ckp_meta_directory_deleted_while_running_stalls_writers_until_a_failover(ray_session, tmp_path):
    """#8060: with ckp_meta gone, writers find no pending instant and wait in instantToWrite until
    the instant-wait timeout fails them; the restarted job bootstraps ckp_meta again."""
    result = run_job(_cfg(tmp_path, "timeline-server", faults=[FaultSpec("bus.deleted", 2)]), None)
    assert [f["point"] for f in result["faults_fired"]] == ["bus.deleted"]
    assert len(result["failovers"]) >= 1
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]


def test_a_bus_deleted_between_restarts_is_recreated_by_the_new_coordinator(ray_session, tmp_path):
    spec = FaultSpec("bus.deleted_between_restarts", 2, 0)
    result = run_job(_cfg(tmp_path, faults=[spec]), None)
    assert [f["point"] for f in result["faults_fired"]] == ["bus.deleted_between_restarts"]
    assert result["failovers"][0]["deleted"] == ".hoodie/.aux/message_bus"
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]


def test_the_bus_faults_do_not_apply_without_a_bus(tmp_path):
    from runtime.lab.fault_matrix import NOT_APPLICABLE, applicable, run_matrix

    assert applicable("message-bus", "bus.deleted") and not applicable("coordination-rpc", "bus.deleted")
    doc = run_matrix(
        JobConfig(source="generator"),
        ["operator-event"],
        ["bus.deleted"],
        1,
        str(tmp_path),
        run=lambda cfg, sub: pytest.fail("an inapplicable cell must not run"),
    )
    assert doc["runs"][0]["outcome"] == NOT_APPLICABLE


def _pending_instant_files(table) -> list[str]:
    names = os.listdir(table / ".hoodie")
    pending = [
        n.split(".")[0] for n in names if n.endswith(".inflight") and n.replace(".inflight", ".commit") not in names
    ]
    data = [f for d in os.listdir(table) if not d.startswith(".") for f in os.listdir(table / d)]
    return [f for f in data for p in pending if p in f]


@pytest.mark.parametrize("failover", ["global", "region"])
def test_every_task_failing_as_an_instant_starts_leaves_no_data_in_a_rolled_back_instant(
    ray_session, tmp_path, failover
):
    """HUDI-6194: all tasks fail over while the coordinator starts a new instant."""
    spec = FaultSpec("tasks.fail_at_instant_start", 2)
    result = run_job(_cfg(tmp_path, faults=[spec], failover=failover), None)
    assert [f["point"] for f in result["faults_fired"]] == ["tasks.fail_at_instant_start"]
    assert [f["strategy"] for f in result["failovers"]] == [failover]
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]
    assert result["exactly_once"]["commit_problems"] == []
    assert result["rolled_back"], "the instant started as the tasks failed was rolled back"
    assert _pending_instant_files(tmp_path / "table") == []
    if failover == "region":
        (reset,) = result["coordinator"]["resets"]  # the same coordinator lived through it
        assert reset["resume_checkpoint_id"] >= 2


@pytest.mark.parametrize(
    "protocol", ["operator-event", "message-bus", "timeline-server", "coordination-rpc", "coordination-rpc-async"]
)
def test_region_failover_keeps_the_coordinator_and_verifies(ray_session, tmp_path, protocol):
    result = run_job(
        _cfg(tmp_path, protocol, faults=[FaultSpec("task.after_flush_before_event", 2, 0)], failover="region"), None
    )
    assert [f["strategy"] for f in result["failovers"]] == ["region"]
    assert len(result["coordinator"]["resets"]) == 1
    assert result["status"] == "finished", result["error"]
    assert result["exactly_once"]["verified"]
    if not protocol.startswith("coordination-rpc"):
        assert _pending_instant_files(tmp_path / "table") == []
    # else Hudi 1.1 leaves the instant a region failover interrupted pending, its files unread
    # (subtaskReset keeps the event buffers; no rollback: docs/FIDELITY.md, coordination-rpc)


def test_region_failover_falls_back_to_global_when_the_coordinator_died(ray_session, tmp_path):
    spec = FaultSpec("coordinator.before_commit_file", 2)
    result = run_job(_cfg(tmp_path, faults=[spec], failover="region"), None)
    assert [f["strategy"] for f in result["failovers"]] == ["global"]
    assert result["exactly_once"]["verified"]


def _flush_instants(trace_path) -> set[str]:
    with open(trace_path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return {
        e["args"]["instant"]
        for e in events
        if e.get("name", "").startswith("flush ") and "instant" in e.get("args", {})
    }


@pytest.mark.parametrize("hold", [True, False])
def test_hudi_6194_writes_into_a_rolled_back_instant_unless_bootstraps_are_held(ray_session, tmp_path, hold):
    """Every task fails as instant I1 starts; the failover is regional (the coordinator keeps I1
    pending) and one task comes back 5 s late. Answering the early tasks' bootstraps at once lets
    them write into I1, which the coordinator rolls back when the last task is in: HUDI-6194.
    Holding the answers until every task is back (the default) writes nothing there."""
    from actors.job import JobRun
    from runtime.faults.scenarios import wrong_instant_config

    cfg = wrong_instant_config(_cfg(tmp_path, "operator-event", hold_bootstraps=hold))
    trace = tmp_path / "trace.json"
    result = JobRun(cfg, None, trace_path=str(trace)).run()
    assert result["failovers"][0]["strategy"] == "region"
    written_then_rolled_back = _flush_instants(trace) & set(result["rolled_back"])
    if hold:
        assert written_then_rolled_back == set()
        assert result["status"] == "finished", result["error"]
        assert result["exactly_once"]["verified"]
    else:
        # the early task wrote into I1: either its own trace shows it, or (its trace died with
        # it) it failed reading back its file of I1, or the table is no longer exactly-once
        read_its_rolled_back_file = any(
            i in (f["error"] or "") for f in result["failovers"][1:] for i in result["rolled_back"]
        )
        broken = result["status"] != "finished" or not (result["exactly_once"] or {}).get("verified")
        assert written_then_rolled_back or read_its_rolled_back_file or broken, result["failovers"]
