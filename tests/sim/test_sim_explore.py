"""Exploration, replay and shrinking under the simulator (no Ray), on the simulated disk.

What is asserted is behaviour: random schedules find P1's deadlock by themselves and never make
the message bus deadlock, explore's verdicts are a function of the seeds, replay reproduces a
verdict, shrinking ends with a smaller schedule that still fails, and the invariants fire on the
results they exist for.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from recorded import failovers, recorded_result

from runtime.cli import main as sim_main
from runtime.core.config import JobConfig
from runtime.lab.results import FailoverRecord
from runtime.lab.status import Status
from runtime.lab.verdicts import Deadlock, ExactlyOnce
from runtime.sim import simulate
from runtime.sim.explore import explore, run_schedule
from runtime.sim.judge import InstantProbe, committed_twice, judge
from runtime.sim.schedule import SCENARIOS, SimSchedule, draw
from runtime.sim.shrink import shrink

# P1's deadlock shows up in about a third of the deadlock scenario's seeds; 30 seeds leave a
# failure of this test to a real change, not to bad luck (the draws are fixed by the seeds)
FIND_WITHIN = 30


def _without_timing(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "timing"}


@pytest.fixture(scope="module")
def p1_exploration() -> dict:
    # in this process: two spawned workers cost more than they save on 30 short runs (that
    # workers give the same records is test_explore_gives_the_same_verdicts_in_worker_processes's)
    return explore("deadlock", list(range(FIND_WITHIN)), ["operator-event"], jobs=1)


def test_exploration_finds_the_p1_deadlock_on_its_own(p1_exploration):
    found = [r for r in p1_exploration["runs"] if r["outcome"] == "known failure" and r["invariant"] == "no-deadlock"]
    assert found, f"no P1 deadlock in {FIND_WITHIN} random schedules: {p1_exploration['counts']}"
    assert p1_exploration["failures"] == [], "P1's deadlock is its known failure, not a violation"
    # not every schedule deadlocks: the draws cover more than the one bad corner
    assert any(r["outcome"] == "passed" for r in p1_exploration["runs"])
    first = p1_exploration["known_failures"][0]
    assert first["replay"] == f"commitlab replay --seed {first['seed']} --protocol operator-event --scenario deadlock"
    assert any("CommitAckEvent" in line for line in first["trace_excerpt"])


def test_the_same_schedules_do_not_deadlock_the_message_bus(p1_exploration):
    seeds = p1_exploration["known_failure_seeds"][:5]
    doc = explore("deadlock", seeds, ["message-bus"])
    assert doc["counts"]["message-bus"]["passed"] == len(seeds), doc["failures"]


def test_explore_verdicts_are_a_function_of_the_seeds(p1_exploration):
    seeds = list(range(8))
    # in this process, as the fixture's (that worker processes give the same records is the
    # worker-process test's)
    again = explore("deadlock", seeds, ["operator-event"], jobs=1)
    first = {r["seed"]: r for r in p1_exploration["runs"] if r["seed"] in seeds}
    assert [first[s] for s in seeds] == again["runs"]
    assert _without_timing(explore("deadlock", seeds, ["operator-event"], jobs=1)) == _without_timing(again)


def test_replay_reproduces_the_explore_verdict(p1_exploration, capsys):
    rec = p1_exploration["known_failures"][0]
    verdict, result = run_schedule(draw("deadlock", rec["seed"]), "operator-event", rec["seed"])
    assert (verdict.outcome, verdict.invariant, result.sim.trace_sha256) == (
        rec["outcome"],
        rec["invariant"],
        rec["trace_sha256"],
    )
    code = sim_main(["replay", "--seed", str(rec["seed"]), "--protocol", "operator-event", "--scenario", "deadlock"])
    out = capsys.readouterr().out
    assert code == 0  # a known failure is not a failure of the command
    assert "known failure (no-deadlock)" in out and "trace excerpt:" in out
    assert result.sim.trace_sha256[:16] in out


def test_shrinking_a_p1_deadlock_keeps_it_and_makes_it_smaller(p1_exploration, tmp_path):
    rec = max(p1_exploration["known_failures"], key=lambda r: SimSchedule.from_dict(r["schedule_json"]).size())
    original = SimSchedule.from_dict(rec["schedule_json"])
    res = shrink(original, "operator-event", rec["seed"], max_runs=60)
    small = res.schedule
    assert small.size() < original.size(), res.steps
    assert small.checkpoints <= original.checkpoints and small.writers <= original.writers
    verdict, result = run_schedule(small, "operator-event", rec["seed"])
    assert result.status == "deadlocked" and verdict.invariant == "no-deadlock"
    # the shrunk schedule replays from its file
    path = tmp_path / "shrunk.json"
    path.write_text(json.dumps(res.to_dict()))
    assert SimSchedule.load(str(path)) == small


def test_shrinking_a_passing_seed_is_refused():
    passing = SimSchedule(writers=1, rounds=[100, 100, 100])
    with pytest.raises(ValueError, match="nothing to shrink"):
        shrink(passing, "message-bus", 0)


def test_explore_command_writes_explore_json_with_a_shrunk_schedule(tmp_path, p1_exploration, capsys):
    seeds = p1_exploration["known_failure_seeds"][:1]
    out = tmp_path / "ex"
    code = sim_main(
        [
            "explore",
            "--scenario",
            "deadlock",
            "--seeds",
            "1",
            "--first-seed",
            str(seeds[0]),
            "--protocol",
            "operator-event",
            "--out",
            str(out),
            "--shrink",
        ]
    )
    assert code == 0
    doc = json.loads((out / "explore.json").read_text())
    assert doc["counts"]["operator-event"]["known failure"] == 1
    shrunk = doc["shrunk"][0]
    assert (out / shrunk["file"]).is_file() and "--schedule" in shrunk["replay"]
    # the file records its seed: replay needs no --seed
    capsys.readouterr()
    schedule = str(out / shrunk["file"])
    assert sim_main(["replay", "--protocol", "operator-event", "--schedule", schedule]) == 0
    assert f"operator-event, seed {seeds[0]}:" in capsys.readouterr().out
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(json.loads((out / shrunk["file"]).read_text())["schedule"]))
    assert sim_main(["replay", "--protocol", "operator-event", "--schedule", str(bare)]) == 2
    assert "--seed is needed (the schedule file" in capsys.readouterr().out


# -- the invariants themselves ----------------------------------------------------------------------


_result = recorded_result


def _failovers(error: str) -> list[FailoverRecord]:
    return failovers(error)


def test_the_invariants_fire_on_what_they_guard():
    assert judge("message-bus", _result()).outcome == "passed"
    backwards = _result(
        commits=[{"instant": "20260101000000100", "checkpoint": 2}, {"instant": "20260101000000200", "checkpoint": 1}]
    )
    assert judge("message-bus", backwards).invariant == "ascending-commits"
    lost = _result(exactly_once=ExactlyOnce(False, 20, 17, lost=3, duplicated=0, unexpected=0, mismatched=0))
    assert (judge("message-bus", lost).outcome, judge("message-bus", lost).invariant) == ("VIOLATION", "exactly-once")
    dl = Deadlock("writer-0", "flush", "instant", "CommitAckEvent(ckp=2)", 0, 2.1, 3, "", [])
    assert judge("message-bus", _result(status=Status.DEADLOCKED, deadlock=dl)).outcome == "VIOLATION"
    assert judge("operator-event", _result(status=Status.DEADLOCKED, deadlock=dl)).outcome == "known failure"
    two = {3: {"20260101000000300", "20260101000000400"}}
    assert judge("coordination-rpc", _result(), two).invariant == "one-instant-per-checkpoint"
    assert judge("message-bus", _result(), two).outcome == "passed"  # P2 makes no such promise
    assert judge("control-topic", _result(status=Status.TIMED_OUT, error="stuck")).outcome == "FAILED"
    # a failover the schedule caused is part of the run; one it did not cause is a failure
    crash = _failovers("JobFailed: writer-1 failed: InjectedCrash: injected crash at task.in_snapshot")
    assert judge("message-bus", _result(failovers=crash)).outcome == "passed"
    odd = _failovers("JobFailed: writer-0 failed: DfsNotFound: file p00/x.parquet does not exist")
    assert judge("control-topic", _result(failovers=odd)).outcome == "FAILED"
    lock = _failovers("InstantTimeRequest(ckp=2) timed out after 1.0s ... (Hudi #19902)")
    assert judge("coordination-rpc", _result(failovers=lock)).outcome == "known failure"
    assert judge("coordination-rpc-async", _result(failovers=lock)).outcome == "FAILED"
    # #3915's own failures after a region failover are the message bus's, as shipped
    no_instant = (
        "JobFailed: writer-0 failed: FlushError: writer-0: No inflight instant when flushing data at checkpoint 5"
    )
    assert judge("message-bus", _result(status=Status.FAILED, error=no_instant)).outcome == "known failure"
    assert judge("ckp-meta", _result(status=Status.FAILED, error=no_instant)).outcome == "FAILED"
    aborted = _failovers("JobFailed: coordinator failed: Receive an unexpected event for instant aborted from task 0")
    assert judge("message-bus", _result(failovers=aborted)).outcome == "known failure"


def test_a_loss_is_hudi_1_1s_19215_only_where_a_failover_interrupted_a_completed_checkpoints_commit():
    """#19215: Hudi 1.1's coordinator state of checkpoint n lacks the buffer its completion commits,
    so a failure before that commit restores n without it. Only that shape is Hudi's loss."""
    lost = ExactlyOnce(False, 30, 20, lost=10, duplicated=0, unexpected=0, mismatched=0)
    commit_failed = "CommitError: commit of 20260101000000200 failed: injected transient DFS error on create x"
    interrupted = [FailoverRecord(commit_failed, 0.5, "global", 2, 3, clock="at_virtual_s")]
    without_2 = [{"instant": "20260101000000100", "checkpoint": 1}, {"instant": "20260101000000300", "checkpoint": 3}]
    run = _result(exactly_once=lost, failovers=interrupted, commits=without_2)
    verdict = judge("coordination-rpc", run)
    assert (verdict.outcome, verdict.invariant) == ("known failure", "exactly-once")
    assert "#19215" in verdict.detail and "checkpoint 2" in verdict.detail
    assert judge("coordination-rpc-async", run).outcome == "known failure"
    # the 0.x bootstrap recommits such an instant: there the same loss is the lab's bug
    assert judge("message-bus", run).outcome == "VIOLATION"
    # checkpoint 2's commit landed after all, or rows came back twice: not the known loss
    with_2 = [*without_2, {"instant": "20260101000000200", "checkpoint": 2}]
    assert judge("coordination-rpc", dataclasses.replace(run, commits=with_2)).outcome == "VIOLATION"
    twice = dataclasses.replace(lost, duplicated=1)
    assert judge("coordination-rpc", dataclasses.replace(run, exactly_once=twice)).outcome == "VIOLATION"


def test_exploration_reports_a_dfs_fault_in_a_1_1_commit_as_19215():
    """dfs-faults seed 9: a transient DFS error fails checkpoint 2's commit; the global failover
    restores checkpoint 2 and its 1,600 rows are gone, as #19215's reporter shows with a failed commit."""
    run = explore("dfs-faults", [9], ["coordination-rpc"], jobs=1)["runs"][0]
    assert run["outcome"] == "known failure" and "#19215" in run["detail"], run["detail"]


def test_the_control_topic_rollback_bug_exploration_found_stays_fixed():
    """Found by exploration (seed 8): the write-status timeout abandons a commit and rolls its
    files back, and the participant then merged onto a base file that no longer existed; only a
    failover saved the job. Participants now forget the versions of an abandoned commit."""
    verdict, result = run_schedule(draw("checkpoint-timeout", 8), "control-topic", 8)
    assert verdict.outcome == "passed", verdict.detail
    assert result.failovers == []


@pytest.mark.parametrize("scenario,outcome", [("wrong-instant-unfixed", "VIOLATION"), ("wrong-instant", "passed")])
def test_exploration_finds_hudi_6194_only_without_the_bootstrap_hold(scenario, outcome):
    """Found by exploring wrong-instant-unfixed under message-bus (seed 87): every task fails over
    (regionally) as the coordinator starts instant 3; the coordinator answers the bootstraps at
    once (Hudi before HUDI-6194), so the two tasks back early flush before it re-initialises: their
    checkpoint id is -1 (PR #3915), they read message 0, still the job's first instant (committed
    long ago), and write round 4's rows into it; those rows are lost. The same schedule with the
    bootstraps held (the fix) passes: the tasks flush only after message 0 holds the new instant."""
    schedule = dataclasses.replace(draw("wrong-instant-unfixed", 87), hold_bootstraps=scenario == "wrong-instant")
    verdict, result = run_schedule(schedule, "message-bus", 87)
    assert verdict.outcome == outcome, verdict.detail
    assert [f.strategy for f in result.failovers] == ["region"]
    if outcome == "VIOLATION":
        assert verdict.invariant == "exactly-once" and "lost" in verdict.detail


def test_the_instant_probe_reads_coordination_rpc_replies():
    sched = SimSchedule(writers=2, rounds=[200, 200, 200])
    probe = InstantProbe()
    result = simulate(sched.config("coordination-rpc"), seed=3, storage="memory", reply_probes=[probe])
    assert result.status == "finished"
    assert probe.by_key and all(len(v) == 1 for v in probe.by_key.values())
    committed = {c["instant"] for c in result.commits}
    assert committed <= set().union(*probe.by_key.values())


def test_a_lost_final_notification_is_caught_by_the_memory_verifier():
    """The simulated disk's exactly-once check can fail: the last checkpoint's completion never
    reaches the coordinator, so the last round is never committed."""
    sched = SimSchedule(writers=1, rounds=[100, 100], lost_notifications=[2])
    verdict, result = run_schedule(sched, "message-bus", 0)
    assert result.status == "finished"
    assert verdict.invariant == "exactly-once" and result.exactly_once.lost == 100


# -- schedules and the simulated disk ---------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_schedules_are_drawn_from_the_seed_and_round_trip_as_json(scenario):
    a, b = draw(scenario, 11), draw(scenario, 11)
    assert a == b
    assert SimSchedule.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    a.config("message-bus").validate()
    assert any(draw(scenario, s) != a for s in range(12, 16))


def test_the_simulated_disk_runs_the_same_job_as_real_parquet(tmp_path):
    """Same seed, same trace, byte for byte: the storage option changes the disk, not the run."""
    cfg = JobConfig(
        protocol="message-bus", source="generator", writers=2, checkpoints=3, records=1_200, bucket_flush_rows=200
    )
    mem = simulate(cfg, seed=4, storage="memory")
    disk = simulate(cfg, seed=4, workdir=str(tmp_path / "d"))
    assert mem.sim.trace_sha256 == disk.sim.trace_sha256
    assert mem.commits == disk.commits
    assert mem.exactly_once.verified and disk.exactly_once.verified
    assert mem.exactly_once.actual == disk.exactly_once.actual


def test_explore_gives_the_same_verdicts_in_worker_processes():
    """--jobs only changes who runs a seed: every record but the timing is the same."""
    one = explore("dfs-faults", list(range(4)), ["message-bus", "control-topic"], jobs=1)
    two = explore("dfs-faults", list(range(4)), ["message-bus", "control-topic"], jobs=2)
    assert two["timing"]["jobs"] == 2
    assert {k: v for k, v in one.items() if k != "timing"} == {k: v for k, v in two.items() if k != "timing"}


def test_dfs_fault_failovers_are_the_schedules_own():
    """A failover caused by an injected DFS error is expected (not a liveness failure) and the
    recommitted data passes exactly-once."""
    schedule = SimSchedule(writers=2, rounds=[400, 400, 400], crashes=["dfs.transient_error@2"])
    verdict, result = run_schedule(schedule, "message-bus", 3)
    assert len(result.failovers) == 1
    assert verdict.outcome == "passed", verdict.detail


def test_the_instant_probe_counts_per_failover_epoch():
    """A region failover rolls back the instant handed out for checkpoint 1 and hands out another
    for the same key: not two instants for one checkpoint in one epoch (explore found this probe
    too coarse when it counted per coordinator incarnation, which a region failover keeps)."""
    verdict, result = run_schedule(draw("wrong-instant", 0), "coordination-rpc", 0)
    assert result.failovers[0].strategy == "region"
    assert verdict.outcome == "passed", verdict.detail
    from runtime.core.codec import to_wire
    from runtime.protocols.coordination_rpc import InstantTimeReply

    def reply(instant: str) -> None:
        probe("coordinator", 0, "writer-0", "instant_time_request", to_wire(InstantTimeReply(1, "OK", instant)))

    probe = InstantProbe()
    reply("a")
    probe.on_failover()
    reply("b")  # the same key after a failover: a new epoch
    assert probe.by_key == {1: {"a"}}
    reply("c")  # two instants for one key within an epoch: what the invariant catches
    assert probe.by_key == {1: {"b", "c"}}


def test_the_message_bus_stall_after_a_restart_is_3915s_own():
    """Seed 17 of ``random``: a failed commit restarts the job; the restarted coordinator's
    MessageDriver empties the bus and re-initialises on message 0, the restored tasks' barrier of
    checkpoint 3 reads message 2 (prevCkp) until the checkpoint timeout, a later flush takes the
    literal 'aborted', and every restart repeats it until the job times out: #3915 as shipped."""
    verdict, result = run_schedule(draw("random", 17), "message-bus", 17)
    assert result.status == Status.TIMED_OUT and "message bus file" in str(result.error)
    assert [f.strategy for f in result.failovers][:1] == ["global"]
    assert (verdict.outcome, verdict.invariant) == ("known failure", None)
    assert "#3915" in verdict.detail and "MessageDriver" in verdict.detail
    # the same wait with no restart, or under another protocol, is no documented stall
    assert judge("message-bus", dataclasses.replace(result, failovers=[])).outcome == "FAILED"
    assert judge("ckp-meta", result).outcome == "FAILED"


@pytest.mark.parametrize(("protocol", "seed"), [("coordination-rpc", 1068), ("coordination-rpc-async", 885)])
def test_a_second_commit_of_a_restored_instant_is_hudi_1_1s_own(protocol, seed):
    """A global failover restores a coordinator state holding a buffer whose instant the restored
    checkpoint's completion committed; restoreEvents skips its recommit but keeps it, and the next
    commitInstants commits it again after later instants: the commits' checkpoints are out of
    order, and that instant alone explains it. The table is still exactly-once."""
    verdict, result = run_schedule(draw("random", seed), protocol, seed)
    (again,) = committed_twice(result)
    assert result.coordinator.protocol["restored"] and result.exactly_once.verified
    assert (verdict.outcome, verdict.invariant) == ("known failure", "ascending-commits")
    assert again in verdict.detail and "restoreEvents" in verdict.detail
    # without the second commit in the trace the disorder is unexplained: a violation
    no_trace = dataclasses.replace(result, simulation=dataclasses.replace(result.sim, trace=[]))
    assert judge(protocol, no_trace).outcome == "VIOLATION"
