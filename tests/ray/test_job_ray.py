"""End to end on Ray: real actors, a real Hudi table, read back by the official reader."""

from __future__ import annotations

import json
import os

import pytest

from actors.job import run_job
from runtime.core.config import JobConfig, Schedule
from runtime.core.dfs import open_dfs
from runtime.core.fault_spec import FaultSpec, parse_faults
from runtime.faults.scenarios import deadlock_config
from runtime.hudi.table.hudi_table import HudiTable
from runtime.lab.report import why_not_verified
from runtime.lab.verify import read_completed_commits

pytestmark = pytest.mark.ray

RESULT_KEYS = {"protocol", "writers", "table", "rows_in", "checkpoints", "commits", "deadlock", "dfs_ops", "rpcs"}


def _cfg(tmp_path, **kw) -> JobConfig:
    base = dict(
        source="generator",
        writers=2,
        checkpoints=3,
        records=6_000,
        bucket_flush_rows=400,
        table=str(tmp_path / "table"),
    )
    base.update(kw)
    return JobConfig(**base)


ALL = [
    "operator-event",
    "message-bus",
    "timeline-server",
    "coordination-rpc",
    "coordination-rpc-async",
    "control-topic",
]


@pytest.fixture(scope="module")
def job_of(ray_session, tmp_path_factory):
    """The default job of a protocol, run once per module: (result, its directory, holding
    ``table`` and ``out``). Several tests assert on the same run instead of running it again."""
    runs: dict[str, tuple[dict, object]] = {}

    def job(protocol: str):
        if protocol not in runs:
            workdir = tmp_path_factory.mktemp(protocol)
            runs[protocol] = (run_job(_cfg(workdir, protocol=protocol), str(workdir / "out")), workdir)
        return runs[protocol]

    return job


@pytest.mark.parametrize("protocol", ALL)
def test_run_commits_every_checkpoint_exactly_once(job_of, protocol):
    result, tmp_path = job_of(protocol)
    out = tmp_path / "out"
    assert result.status == "finished", result.error
    assert RESULT_KEYS <= set(result.to_json())
    with open(out / "result.json") as f:
        on_disk = json.load(f)
    assert on_disk["commits"] == result.commits
    ckps = [c["checkpoint"] for c in result.commits]
    if protocol == "control-topic":
        # commits follow Kafka Connect's wall-time commit interval, not checkpoints (a commit
        # records the last completed checkpoint, 0 before the first): in order, every row arrives
        assert ckps == sorted(ckps) and set(ckps) <= {0, 1, 2, 3}
        assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    else:
        assert ckps == [1, 2, 3]
    assert result.figures.checkpoints.completed == 3 and result.figures.checkpoints.aborted == 0
    assert result.figures.rows_in == 6_000
    eo = result.exactly_once
    assert eo.verified, why_not_verified(eo)
    assert eo.expected == eo.actual == 3_000
    # the official reader sees exactly the commits the coordinator made
    assert read_completed_commits(str(tmp_path / "table")) == [c["instant"] for c in result.commits]
    # counters by role: the coordinator created an instant per commit (the control topic's
    # wall-time interval may close fewer commits than checkpoints), writers wrote base files
    assert result.figures.dfs_ops["coordinator"]["create"] >= len(result.commits) >= 1
    assert result.figures.dfs_ops["writer.data"]["write"] >= 3
    assert result.deadlock is None
    # every commit records its checkpoint in extraMetadata (JSON in version 6, Avro from 8)
    table = HudiTable.open(*open_dfs(str(tmp_path / "table")))
    timeline = table.timeline()
    for c in result.commits:
        meta = table.read_commit_metadata(c["instant"], timeline)
        assert meta["extraMetadata"]["checkpoint.id"] == str(c["checkpoint"])


def test_the_job_processes_start_before_the_stream_is_planned(ray_session, tmp_path, monkeypatch):
    """The job's processes come up while the stream is prepared (Spark's hand-off on the default
    source), not after it: when planning begins, every task manager and the coordinator's and job
    manager's processes have been asked for, and the run counts how many were up when it began."""
    import actors.job as job_module

    asked_for: list[set[str]] = []
    plan = job_module.plan_stream
    # a killed actor of an earlier job may still be listed for a moment: only this job's namespace counts
    earlier = {a["namespace"] for a in ray_session.util.list_named_actors(all_namespaces=True)}

    def planning(*args, **kwargs):
        named = ray_session.util.list_named_actors(all_namespaces=True)
        asked_for.append(
            {a["name"] for a in named if a["namespace"].startswith("commitlab-") and a["namespace"] not in earlier}
        )
        return plan(*args, **kwargs)

    monkeypatch.setattr(job_module, "plan_stream", planning)
    result = run_job(_cfg(tmp_path, writers=3, slots_per_task_manager=2, protocol="message-bus"), None)
    assert result.status == "finished", result.error
    assert asked_for == [{"taskmanager-0", "taskmanager-1", "coordinator", "job-manager"}]
    assert 0 <= result.timing["processes_up_at_run"] <= 4


def test_message_bus_run_writes_bus_files_and_no_timeline_polls(job_of):
    result, tmp_path = job_of("message-bus")
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    bus = tmp_path / "table" / ".hoodie" / ".aux" / "message_bus"
    # message 0 (first instant) and one per completed checkpoint
    assert sorted(os.listdir(bus)) == ["0.commit", "1.commit", "2.commit", "3.commit"]
    # writers learn instants from the bus, not by listing the timeline
    assert result.figures.dfs_ops["writer"].get("list", 0) == 0
    assert result.figures.dfs_ops["writer"]["exists"] >= 1


def test_operator_event_writers_poll_the_timeline(job_of):
    result, _ = job_of("operator-event")
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    assert result.figures.dfs_ops["writer"]["list"] >= 2 * 3  # every writer, every round


def test_deadlock_schedule_deadlocks_operator_events_and_explains_it(ray_session, tmp_path):
    cfg = deadlock_config(_cfg(tmp_path, protocol="operator-event"))
    result = run_job(cfg, str(tmp_path / "out"))
    assert result.status == "deadlocked"
    d = result.deadlock
    assert d.task in ("writer-0", "writer-1")
    assert d.releasing_mail == "CommitAckEvent(ckp=2)"
    assert d.mailbox[d.mailbox_position].kind == "CommitAckEvent"
    assert "instantToWrite" in d.running_mail and "round 3" in d.running_mail
    assert d.waiting_for.startswith("instant initialize")
    assert d.blocked_s >= cfg.deadlock_threshold_s
    assert "own mailbox" in d.explanation
    # round 1 committed; round 2 was empty (instant reused, acks sent); round 3 never commits
    assert [c["checkpoint"] for c in result.commits] == [1]
    assert result.empty_rounds == [2]
    assert result.figures.rpcs["operator_event"] == cfg.writers
    with open(tmp_path / "out" / "result.json") as f:
        assert json.load(f)["deadlock"]["task"] == d.task


def test_deadlock_schedule_completes_with_the_message_bus(ray_session, tmp_path):
    cfg = deadlock_config(_cfg(tmp_path, protocol="message-bus"))
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    assert result.deadlock is None
    # the empty round reuses the instant: round 3's data lands in it, committed at checkpoint 3
    assert [c["checkpoint"] for c in result.commits] == [1, 3]
    assert result.empty_rounds == [2]
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    assert "operator_event" not in result.figures.rpcs


def test_aborted_checkpoint_keeps_the_instant_pending_and_loses_nothing(ray_session, tmp_path):
    cfg = _cfg(tmp_path, protocol="message-bus", schedule=Schedule(abort_checkpoints=[2]))
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    assert result.figures.checkpoints.aborted == 1
    commits = result.commits
    assert [c["checkpoint"] for c in commits] == [1, 3]
    assert sorted(os.listdir(tmp_path / "table" / ".hoodie" / ".aux" / "message_bus")) == [
        "0.commit",
        "1.commit",
        "2.aborted",
        "3.commit",
    ]
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


def test_a_second_ingest_with_another_protocol_and_writers_verifies_and_so_does_its_result(ray_session, tmp_path):
    from runtime.cli import main

    first = run_job(_cfg(tmp_path, protocol="operator-event"), None)
    assert first.exactly_once.verified, why_not_verified(first.exactly_once)
    cfg = _cfg(tmp_path, protocol="coordination-rpc", seed=7, writers=3, buckets=4, table_version="6")
    second = run_job(cfg, str(tmp_path / "out2"))
    assert second.status == "finished", second.error
    before = second.table_before
    assert before.rows == first.exactly_once.actual and before.as_of == first.commits[-1]["instant"]
    assert second.exactly_once.verified, why_not_verified(second.exactly_once)
    assert main(["verify", "--result", str(tmp_path / "out2")]) == 0


def test_timeline_server_answers_writers_so_they_never_read_the_dfs(job_of):
    result, _ = job_of("timeline-server")
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    assert result.figures.rpcs["get_all_instant_states"] >= 2
    assert result.figures.rpcs["refresh"] >= 3  # the coordinator posts a refresh after each ckp_meta file
    assert result.figures.dfs_ops.get("writer", {}) == {}  # the server reads for them
    assert result.figures.dfs_ops["timeline-server"]["list"] >= 3
    assert result.figures.counters.get("timeline_server_fallbacks", 0) == 0


def test_coordination_rpc_creates_one_instant_per_checkpoint_and_commits_the_backlog(ray_session, tmp_path):
    cfg = _cfg(tmp_path, protocol="coordination-rpc", schedule=Schedule(abort_checkpoints=[2]))
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    commits = result.commits
    # checkpoint 2 aborted: its instant waits; checkpoint 3's success commits both, in order
    assert [c["checkpoint"] for c in commits] == [1, 3, 3]
    assert commits[1]["instant"] < commits[2]["instant"]
    # one instant per checkpoint key: 3 instants for 3 rounds, requested by 2 writers each
    assert len({c["instant"] for c in commits}) == 3
    assert result.figures.rpcs["instant_time_request"] == 2 * 3
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)


def test_control_topic_commits_with_offsets_in_the_metadata(job_of):
    result, tmp_path = job_of("control-topic")
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    last = result.commits[-1]["instant"]
    meta = json.loads((tmp_path / "table" / ".hoodie" / f"{last}.commit").read_text())
    offsets = dict(p.split("=") for p in meta["extraMetadata"]["kafka.commit.offsets"].split(","))
    # every partition's offset reached its source's row count: nothing left uncommitted
    assert sum(int(o) for o in offsets.values()) == 6_000
    # START, END, a WRITE_STATUS per partition and ACK per commit; how many commits the wall-time
    # interval closes depends on the run's speed
    assert result.figures.rpcs["append"] >= (3 + 2) * len(result.commits)
    assert "write_metadata" not in result.figures.rpcs or result.figures.rpcs["write_metadata"] == 2  # bootstrap only


@pytest.mark.parametrize("heartbeat_s", [50.0, 0.0])
def test_a_task_that_answers_slowly_is_busy_not_dead_until_the_heartbeat_timeout(
    ray_session, tmp_path, monkeypatch, heartbeat_s
):
    """Every liveness probe times out (as with 16 writer processes on 2 busy cores): within Flink's
    heartbeat timeout the job runs on and commits; past it the silent task is declared lost."""
    import actors.ray_host

    monkeypatch.setattr(actors.ray_host, "DUMP_TIMEOUT_S", 0.0)
    monkeypatch.setattr(actors.ray_host, "HEARTBEAT_TIMEOUT_S", heartbeat_s)
    result = run_job(_cfg(tmp_path, protocol="coordination-rpc", max_restarts=0), None)
    if heartbeat_s:
        assert result.status == "finished", result.error
        assert result.exactly_once.verified and not result.failovers
    else:
        assert result.status == "failed"
        assert "heartbeat timeout" in result.error


def test_an_interrupted_job_writes_its_record_and_checks_what_it_committed(ray_session, tmp_path):
    """Ctrl-C or SIGTERM (the CLI sets the event): the job stops at the watchdog's next poll; its
    result.json is written, status interrupted, and its commits are checked as a prefix."""
    import threading

    from runtime.job.stop import StopRequest

    stop, done = StopRequest(), threading.Event()
    cfg = _cfg(tmp_path, protocol="coordination-rpc", checkpoints=40, checkpoint_interval_s=0.25)

    def stop_after_a_commit() -> None:  # as a user who presses Ctrl-C once the job commits
        timeline = tmp_path / "table" / ".hoodie" / "timeline"  # coordination-rpc writes version 9
        while not done.wait(0.1):
            if timeline.is_dir() and any(p.suffix == ".commit" for p in timeline.iterdir()):
                stop.request("SIGINT")
                return

    watcher = threading.Thread(target=stop_after_a_commit, daemon=True)
    watcher.start()
    try:
        result = run_job(cfg, str(tmp_path / "out"), stop=stop)
    finally:
        done.set()
    assert result.status == "interrupted" and "SIGTERM" in result.error
    on_disk = json.loads((tmp_path / "out" / "result.json").read_text())
    assert on_disk["status"] == "interrupted" and on_disk["commits"] == result.commits
    assert 1 <= len(result.commits) < 40
    prefix = result.committed_prefix
    assert prefix is not None and prefix.verified and prefix.prefix.startswith("rounds 1 to")


def test_task_managers_host_several_slots_each_with_its_own_mailbox(ray_session, tmp_path):
    """Four writers in two task managers of two slots: a write task and its source share a slot;
    the two tasks of a task manager share its process but not their mailboxes; a crash of the
    process takes both down, the job fails over and verifies; P1's deadlock in one slot is seen
    while the other slot of the same process still answers."""
    crash = [FaultSpec("task.in_snapshot", 2, 1)]
    cfg = _cfg(tmp_path, protocol="coordination-rpc", writers=4, slots_per_task_manager=2, faults=crash)
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    processes = result.ray.placement["processes"]
    assert sorted(processes["taskmanager-0"]["roles"]) == ["source-0", "source-1", "writer-0", "writer-1"]
    assert sorted(processes["taskmanager-1"]["roles"]) == ["source-2", "source-3", "writer-2", "writer-3"]
    roles = result.ray.placement["roles"]
    assert roles["writer-0"]["pid"] == roles["writer-1"]["pid"] != roles["writer-2"]["pid"]
    assert result.failovers, "the crash must have failed the job over"
    failover = result.failovers[0]
    assert "writer-0" in failover.error and "writer-1" in failover.error  # one process, both tasks

    dl = run_job(deadlock_config(_cfg(tmp_path / "dl", protocol="operator-event", slots_per_task_manager=2)), None)
    assert dl.status == "deadlocked" and dl.deadlock and dl.deadlock.releasing_mail == "CommitAckEvent(ckp=2)"
    assert dl.ray and set(dl.ray.placement["processes"]["taskmanager-0"]["roles"]) >= {"writer-0", "writer-1"}


def test_a_merge_on_read_job_on_ray_commits_delta_commits_and_compacts(ray_session, tmp_path):
    """Two protocols that find the instant differently (the timeline; the coordinator's answer):
    log files per flush, delta commits, and compactions run by the compaction operators in the
    task managers' slots, one of them crashing its task manager mid-compaction (the job fails
    over, the plan operator rolls the compaction back and it runs again)."""
    # the crash is pinned to no checkpoint: it hits the first compaction, whichever checkpoint's
    # notification hands it out (on a loaded machine that was not always the third, and the
    # fault did not fire)
    for protocol, faults in (("message-bus", ""), ("coordination-rpc", "compaction.crash_during")):
        cfg = _cfg(
            tmp_path / protocol,
            protocol=protocol,
            table_type="merge-on-read",
            records=4_000,
            compaction_delta_commits=2,
            faults=parse_faults(faults),
        )
        result = run_job(cfg, None)
        assert result.status == "finished", result.error
        assert result.exactly_once.verified, why_not_verified(result.exactly_once)
        assert result.faults_not_fired == []
        table = tmp_path / protocol / "table"
        hudi = HudiTable.open(*open_dfs(str(table)))  # version 6 for message-bus, 9 for coordination-rpc
        assert hudi.props.version == (9 if protocol == "coordination-rpc" else 6)
        assert set(hudi.timeline().completed_commits()) == {c["instant"] for c in result.commits}
        assert list(table.glob("p*/.*.log.*"))
        done = result.compactions["completed"]
        assert done and not result.compactions["pending"], result.compactions
        assert list(table.glob(f"p*/*_{done[-1]['instant']}.parquet"))
        roles = {r for p in result.ray.placement["processes"].values() for r in p["roles"]}
        assert {"compaction-plan", "compaction-commit", "compact-0"} <= roles
