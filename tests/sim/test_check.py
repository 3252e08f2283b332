"""``commitlab check``: the bounded search over a simulated job's schedules finds what a random
seed misses, certifies what it explored, replays what it found, and keeps a partial certificate."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from runtime.cli.command import main
from runtime.lab.fault_matrix import KNOWN, PASSED
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix
from runtime.protocols import PROTOCOLS
from runtime.sim.certificate import HOLDS, KNOWN_FAILURE, certificate
from runtime.sim.chooser import RandomChooser
from runtime.sim.explore import prepared_schedule, run_schedule
from runtime.sim.host import TRACE_NOT_HASHED, simulate
from runtime.sim.judge import Verdict
from runtime.sim.schedule import SimSchedule
from runtime.sim.search import BoundedSearch, CheckJob, CheckRun, run_deviations
from runtime.sim.strategies import PCTChooser, parse_deviations
from runtime.sim.verify import PREFIX_NOT_CHECKED

# P1's deadlock needs the commit ack of a quiet round to reach a writer late (commitlab deadlock)
P1 = CheckJob(SimSchedule(writers=1, rounds=[100, 0, 100]), "operator-event")
SMALL = CheckJob(SimSchedule(writers=1, rounds=[100, 100]), "message-bus")


def test_the_default_schedule_is_the_seeds_random_run() -> None:
    """No deviation: the same trace as the seeded random run, so a check starts from explore's run."""
    _, random_run = run_schedule(SMALL.schedule, SMALL.protocol, SMALL.seed, chooser=RandomChooser(SMALL.seed))
    scripted = run_deviations(SMALL)
    assert scripted.verdict.outcome == PASSED
    assert scripted.choices and scripted.events == random_run.sim.trace_events


def test_only_a_checks_runs_skip_the_trace_hash() -> None:
    """A check's run does not hash its trace (nobody replays it by hash) and says so; every other
    run keeps the hash its replay is compared by, the same hash for the same run."""
    _, hashed = run_schedule(SMALL.schedule, SMALL.protocol, SMALL.seed)
    _, unhashed = run_schedule(SMALL.schedule, SMALL.protocol, SMALL.seed, hash_trace=False)
    assert len(hashed.sim.trace_sha256) == 64 and unhashed.sim.trace_sha256 == TRACE_NOT_HASHED
    assert unhashed.sim.trace == hashed.sim.trace and unhashed.sim.trace_events == hashed.sim.trace_events
    _, again = run_schedule(SMALL.schedule, SMALL.protocol, SMALL.seed)
    assert again.sim.trace_sha256 == hashed.sim.trace_sha256


def test_only_a_checks_unfinished_runs_skip_the_committed_prefix() -> None:
    """A run stopped before its end: its commits are checked one by one, unless a check's run asks
    not to (its judge reads status, commits and trace), which its record then says."""
    job = prepared_schedule(SMALL.schedule, SMALL.protocol, None, "memory")
    checked = simulate(job, seed=SMALL.seed, storage="memory", max_virtual_s=0.25)
    skipped = simulate(job, seed=SMALL.seed, storage="memory", max_virtual_s=0.25, check_prefix=False)
    assert checked.status == skipped.status == Status.TIMED_OUT and len(checked.commits) == 1
    assert checked.commits == skipped.commits
    assert checked.committed_prefix is not None and checked.committed_prefix.verified is True
    assert skipped.committed_prefix == CommittedPrefix(verified=None, prefix=PREFIX_NOT_CHECKED)
    finished = simulate(job, seed=SMALL.seed, storage="memory", check_prefix=False)
    assert finished.status == Status.FINISHED and finished.committed_prefix is None
    assert finished.exactly_once is not None and finished.exactly_once.verified


def test_the_search_finds_p1s_deadlock_at_bound_1_and_not_0() -> None:
    assert not BoundedSearch(P1, 0).run().known
    cut: list[CheckRun] = []
    search = BoundedSearch(P1, 1, on_run=lambda run, _: cut.append(run) if run.cut else None).run()
    # a run stopped at a state explored before has no verdict: nothing of it is kept to show
    assert cut and all(not r.excerpt and r.deadlock is None for r in cut)
    assert search.complete
    found = search.shortest(search.known)
    assert found is not None and len(found.deviations) == 1
    assert found.verdict.outcome == KNOWN and found.verdict.invariant == "no-deadlock"
    assert found.deadlock is not None  # the watchdog's wait-for diagnosis comes with it
    # the deviations alone replay it
    again = run_deviations(P1, found.deviations)
    assert again.verdict.kind == found.verdict.kind and again.events == found.events
    doc = certificate(search)
    assert doc["certificate"]["invariants"]["no-deadlock"] == KNOWN_FAILURE
    assert "--replay" in doc["known_failure"]["replay"]


def test_a_complete_certificate_and_its_figures() -> None:
    search = BoundedSearch(SMALL, 1).run()
    doc = certificate(search)["certificate"]
    assert doc["complete"] and doc["stopped"] is None
    assert set(doc["invariants"].values()) == {HOLDS}
    assert doc["runs"] > 1 and doc["distinct_states"] > 0 and doc["transitions"] >= doc["max_depth"] > 0


def test_a_state_reached_again_is_not_explored_twice() -> None:
    """Pruning by fingerprint runs fewer schedules than the plain enumeration, with the same verdicts."""
    job = CheckJob(SimSchedule(writers=1, rounds=[100]), "message-bus", ready_order=False)
    pruned = BoundedSearch(job, 2).run()
    every = BoundedSearch(job, 2, prune=False).run()
    assert pruned.complete and every.complete
    assert pruned.stats.pruned > 0 and pruned.stats.runs < every.stats.runs
    assert certificate(pruned)["certificate"]["invariants"] == certificate(every)["certificate"]["invariants"]


def test_ctrl_c_keeps_a_partial_certificate() -> None:
    def interrupt(run: CheckRun, stats: object) -> None:
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(run)

    seen: list[CheckRun] = []
    search = BoundedSearch(SMALL, 2, on_run=interrupt).run()
    doc = certificate(search)["certificate"]
    assert not doc["complete"] and "interrupted" in doc["stopped"] and doc["runs"] == 3


def test_check_stopped_by_ctrl_c_writes_its_partial_certificate_and_exits_130(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partial certificate is no certificate: the command says the signal stopped it (130, as a
    stopped run), not 0 as if every schedule within the bound held."""
    import runtime.sim.search as search_module

    calls: list[int] = []
    real = search_module.run_deviations

    def ctrl_c_on_the_third_run(*args: Any, **kw: Any) -> CheckRun:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(search_module, "run_deviations", ctrl_c_on_the_third_run)
    out = str(tmp_path)
    code = main(["check", "--protocol", "message-bus", "--writers", "1", "--checkpoints", "2", "--quiet", "--out", out])
    assert code == 130
    with open(os.path.join(out, "check.json")) as f:
        cert = json.load(f)["certificate"]
    assert not cert["complete"] and cert["stopped"] == "interrupted (Ctrl-C)" and cert["runs"] == 2


def test_a_run_saved_only_by_a_timeout_is_told_apart() -> None:
    run = CheckRun((), Verdict(PASSED, None, "ok"), "finished", 10, [], 1, [], None)
    assert run.by_timeout
    assert not CheckRun((), Verdict(KNOWN, "no-deadlock", "P1"), "deadlocked", 10, [], 0, [], None).by_timeout


def test_pct_reproduces_from_its_seed() -> None:
    a = PCTChooser(7, depth=3, events=50)
    b = PCTChooser(7, depth=3, events=50)
    assert a.change_points == b.change_points and len(a.change_points) == 2


def test_bad_deviations_name_the_form() -> None:
    with pytest.raises(ValueError, match="CHOICE:ALTERNATIVE"):
        parse_deviations("3")
    assert parse_deviations("9:1,2:2") == ((2, 2), (9, 1))


def test_cli_check_writes_the_certificate_and_replays(tmp_path: str) -> None:
    out = os.path.join(tmp_path, "c")
    args = ["check", "--protocol", "operator-event", "--writers", "1", "--quiet-rounds", "2", "--out", out]
    assert main([*args, "--bound", "1", "--first", "--quiet"]) == 0  # a known failure is no failure
    with open(os.path.join(out, "check.json")) as f:
        doc = json.load(f)
    assert doc["certificate"]["invariants"]["no-deadlock"] == KNOWN_FAILURE
    assert main(["report", out]) == 0  # the HTML page shows the certificate and the known failure
    with open(os.path.join(out, "report.html")) as f:
        page = f.read()
    assert "Check: operator-event" in page and "Shortest known failure" in page
    replay = doc["known_failure"]["replay"]
    devs = replay.split("--replay ")[1].strip("'")
    again = os.path.join(tmp_path, "r")
    assert main(["check", "--protocol", "operator-event", "--schedule", os.path.join(out, "check.json"),
                 "--out", again, "--replay", devs]) == 0  # fmt: skip
    with open(os.path.join(again, "check.json")) as f:
        assert json.load(f)["replay"]["outcome"] == KNOWN


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--bound", "-1"], "--bound"),
        (["--late-notices", "2"], "--late-notices"),
        (["--replay", "x"], "--replay"),
        (["--jobs", "0"], "--jobs"),
        (["--lose", "write_metadata,no_such_method"], "--lose"),
    ],
)
def test_cli_check_bad_input_is_exit_2(tmp_path: str, flags: list[str], named: str, capsys: object) -> None:
    code = main(["check", "--protocol", "message-bus", "--out", os.path.join(tmp_path, "o"), "--quiet", *flags])
    assert code == 2


def test_a_region_failover_aborts_the_checkpoint_it_left_pending() -> None:
    """The check's finding on message-bus (wrong-instant, explore seed 87, one job-manager barrier
    trigger late): checkpoint 3 was pending when a write task crashed. Flink aborts the pending
    checkpoints before a region's tasks restart and tells the coordinator, which writes message 3
    as aborted, so the restarted tasks' next barrier does not wait for it until the job times out."""
    from runtime.sim.schedule import draw

    job = CheckJob(draw("wrong-instant", 87), "message-bus")
    run = run_deviations(job, ((130, 1),))
    assert run.verdict.outcome == PASSED, run.verdict.detail
    assert not run.timeouts


def test_a_run_stops_at_a_state_explored_before_and_p1s_deadlock_is_still_found() -> None:
    """The early cut: a run that reaches, past its last deviation, a state explored before stops
    there, judged no further; the search still finds P1's deadlock after a quiet round, and at
    bound 2 too (where most runs are cut)."""
    cut: list[CheckRun] = []
    search = BoundedSearch(P1, 2, on_run=lambda run, s: cut.append(run) if run.cut else None).run()
    assert search.complete and cut
    assert all(run.cut_at is not None and len(run.choices) == run.cut_at + 1 for run in cut)
    found = search.shortest(search.known)
    assert found is not None and len(found.deviations) == 1 and found.verdict.invariant == "no-deadlock"


def test_two_processes_share_the_search_and_find_what_one_finds() -> None:
    from runtime.sim.parallel_search import parallel_search

    both = parallel_search(P1, 1, 2)
    assert both.complete
    found = both.shortest(both.known)
    assert found is not None and len(found.deviations) == 1 and found.verdict.invariant == "no-deadlock"
    one = BoundedSearch(SMALL, 1).run()
    two = parallel_search(SMALL, 1, 2)
    assert two.complete and two.stats.runs >= one.stats.runs
    assert certificate(two)["certificate"]["invariants"] == certificate(one)["certificate"]["invariants"]


def test_an_instant_minted_at_another_time_is_the_same_state() -> None:
    """The fingerprint ranks instant times instead of reading them: a run whose coordinator minted
    its instants later (a late message) meets the same state; instants met in another order do not."""
    from runtime.sim.fingerprint import StateFingerprint

    def state(*instants: str) -> int:
        fp = StateFingerprint()
        events = [
            (0, "X", "coordinator", "coordinator", "instant", f"start instant {i}", 0.0, 0.0, None) for i in instants
        ]
        fp.attach(type("Trace", (), {"events": events})())  # type: ignore[arg-type]
        return fp()

    assert state("20260101000000004", "20260101000001288") == state("20260101000000504", "20260101000001788")
    assert state("20260101000000004", "20260101000001288") != state("20260101000000004", "20260101000000004")


LOSSY = CheckJob(SimSchedule(writers=2, rounds=[100, 100]), "message-bus", lossy=("write_metadata",))


def test_a_search_with_losses_finds_the_lost_write_status_hudi_commits_without() -> None:
    """One lost write status whose task's checkpoint ack gets through: Hudi's coordinator commits
    the statuses it has, and the rows of that flush are gone (docs/FIDELITY.md, "Write markers")."""
    search = BoundedSearch(LOSSY, 1).run()
    assert search.complete
    lost = search.violated["exactly-once"]
    assert len(lost.deviations) == 1 and "lost" in lost.verdict.detail
    doc = certificate(search)
    assert doc["lossy_methods"] == ["write_metadata"]
    assert doc["counterexample"]["deviations"][0]["kind"] == "message-loss"
    assert "--lose write_metadata" in doc["counterexample"]["replay"]
    # the default schedule is the same run with or without losses searched
    assert run_deviations(LOSSY).choices and run_deviations(LOSSY).verdict.outcome == PASSED


def test_the_two_phase_committable_survives_any_one_lost_message() -> None:
    """Its committable is confirmed before the checkpoint ack, as Sink V2 sends it ahead of the
    barrier: a loss fails the task at the RPC timeout and the job replays; nothing is lost."""
    job = CheckJob(LOSSY.schedule, "two-phase-commit", lossy=("write_metadata",))
    search = BoundedSearch(job, 1).run()
    assert search.complete and not search.failures and not search.violated
    assert search.stats.runs > 10


def test_no_message_between_the_job_manager_and_the_coordinator_is_lost() -> None:
    """They are one process in Flink (the JobMaster): the search offers no loss between them."""
    run = run_deviations(LOSSY)
    losses = [c for c in run.choices if c.point.value == "message-loss"]
    assert losses and all(c.stream.startswith("writer-") for c in losses)


def test_a_run_repeating_its_parents_prefix_meets_the_same_choice_points_as_one_working_them_out() -> None:
    """Where a run takes the default before its last deviation, it takes the choice points (which
    ready-queue asks are one, their states) from its parent's run; where it deviates there (a
    ready callback moved, a message late), it works the choice point out: either way, the choice
    points a run working everything out meets."""
    root = run_deviations(SMALL)
    ready = [i for i, c in enumerate(root.choices) if c.point.value == "ready-order"]
    late = [i for i, c in enumerate(root.choices) if c.point.value == "message-delay"]
    assert ready and len(late) > 4
    for first in (ready[0], *late[:4]):
        parent = run_deviations(SMALL, ((first, 1),))
        for then in range(first + 1, min(first + 12, len(parent.choices))):
            both = ((first, 1), (then, 1))
            fresh = run_deviations(SMALL, both)
            reused = run_deviations(SMALL, both, known=parent.choices[: then + 1])
            assert reused.choices == fresh.choices and len(fresh.choices) > then + 1
            assert reused.verdict == fresh.verdict and reused.events == fresh.events


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_a_run_takes_its_prefix_states_from_its_parent_and_certifies_the_same(protocol: str) -> None:
    """A run repeats its parent's decisions before its last deviation, so it takes those states
    from the parent's run rather than fingerprinting them again: the same certificate (figures,
    verdicts, counterexamples) and the same set of distinct states, on every protocol (one with
    a failure within the bound among them: P1's deadlock)."""
    rounds = [100, 0, 100] if protocol == "operator-event" else [100, 100]
    job = CheckJob(SimSchedule(writers=1, rounds=rounds), protocol)
    again = BoundedSearch(job, 1, reuse_prefix=False).run()
    reused = BoundedSearch(job, 1).run()
    a, b = certificate(again), certificate(reused)
    for doc in (a, b):
        assert isinstance(doc["certificate"], dict)
        doc["certificate"].pop("real_s")
    assert b == a and reused.stats.states == again.stats.states
    assert reused.complete and reused.stats.runs > 1
