"""``commitlab check --search fork``: the search that forks the simulator at a choice point gives
the certificate the re-running search gives, its failures replay, and it leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from runtime.cli.command import main
from runtime.core.json_doc import JsonObject
from runtime.lab.fault_matrix import KNOWN
from runtime.sim import fork_search
from runtime.sim.certificate import certificate
from runtime.sim.fork_search import ForkSearch
from runtime.sim.schedule import SimSchedule
from runtime.sim.search import BoundedSearch, CheckJob

pytestmark = pytest.mark.one_thread  # tests/sim/conftest.py: a fresh interpreter beside Ray's threads

SMALL = CheckJob(SimSchedule(writers=1, rounds=[100, 100]), "message-bus")
ONE = CheckJob(SimSchedule(writers=1, rounds=[100]), "message-bus")
P1 = CheckJob(SimSchedule(writers=1, rounds=[100, 0, 100]), "operator-event")
LOSSY = CheckJob(SimSchedule(writers=2, rounds=[100, 100]), "message-bus", lossy=("write_metadata",))


def _children() -> list[int]:
    """This process's child processes (zombies included)."""
    me = str(os.getpid())
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            out.append(int(pid))
    return out


def _same(job: CheckJob, bound: int) -> tuple[BoundedSearch, ForkSearch]:
    before = _children()
    rerun = BoundedSearch(job, bound).run()
    fork = ForkSearch(job, bound).run()
    assert _children() == before  # every search process was waited for
    a, b = certificate(rerun), certificate(fork)
    for doc in (a, b):
        assert isinstance(doc["certificate"], dict)
        doc["certificate"].pop("real_s")
    assert b == a  # figures, verdicts, counterexamples with their replay commands
    assert fork.stats.states == rerun.stats.states  # the same distinct states, not just as many
    for x, y in ((rerun.failures, fork.failures), (rerun.known, fork.known)):
        assert [r.deviations for r in y] == [r.deviations for r in x]
    return rerun, fork


def test_the_fork_search_gives_the_same_certificate_as_the_rerunning_one() -> None:
    rerun, fork = _same(ONE, 2)
    assert fork.complete and fork.stats.pruned > 0 and fork.stats.deepest_deviations == 2


def test_the_same_failures_in_the_same_order() -> None:
    _, fork = _same(P1, 1)
    found = fork.shortest(fork.known)
    assert found is not None and found.verdict.outcome == KNOWN and len(found.deviations) == 1
    _, lossy = _same(LOSSY, 1)
    assert "lost" in lossy.violated["exactly-once"].verdict.detail


def _check(tmp: str, *extra: str) -> tuple[int, JsonObject]:
    code = main(
        ["check", "--protocol", "message-bus", "--writers", "2", "--checkpoints", "2", "--out", tmp, "--quiet", *extra]
    )
    with open(os.path.join(tmp, "check.json")) as f:
        return code, json.load(f)


def test_a_failure_the_fork_search_finds_replays_from_its_command(tmp_path: object) -> None:
    out = str(tmp_path)
    code, doc = _check(out, "--lose", "write_metadata", "--bound", "1", "--search", "fork")
    assert code == 1 and doc["certificate"]["complete"]
    found = doc["counterexample"]
    replay = found["replay"]
    assert "--replay" in replay and "--search" not in replay
    deviations = replay.split("--replay ")[1].strip("'")
    code, again = _check(out, "--lose", "write_metadata", "--replay", deviations)
    assert code == 1
    rec = again["replay"]
    assert (rec["outcome"], rec["invariant"], rec["detail"], rec["events"]) == (
        found["outcome"],
        found["invariant"],
        found["detail"],
        found["events"],
    )


def test_a_search_process_that_dies_is_reported_and_nothing_is_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child killed mid-run (here: the first run that deviates) stops the search with a partial
    certificate naming that run and its signal; every process was waited for."""
    become = ForkSearch._become_child

    def die(self: ForkSearch, *child: Any) -> None:
        become(self, *child)
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(fork_search.ForkSearch, "_become_child", die)
    before = _children()
    search = ForkSearch(SMALL, 1).run()
    assert _children() == before
    assert not search.complete and search.stopped is not None
    assert "died without its report (killed by signal SIGKILL)" in search.stopped
    assert certificate(search)["certificate"]["complete"] is False


def test_no_fork_beside_another_thread() -> None:
    import threading

    release = threading.Event()
    other = threading.Thread(target=release.wait, name="progress-refresh")
    other.start()
    try:
        with pytest.raises(fork_search.NotForkable, match="progress-refresh"):
            ForkSearch(SMALL, 1).run()
    finally:
        release.set()
        other.join()


def test_processes_sharing_the_search_fork_too() -> None:
    """``--jobs 2 --search fork``: each share is a fork search, merged as the re-running shares are."""
    from runtime.sim.parallel_search import parallel_search

    rerun = parallel_search(ONE, 2, 2)
    fork = parallel_search(ONE, 2, 2, fork=True)
    a, b = certificate(rerun), certificate(fork)
    for doc in (a, b):
        assert isinstance(doc["certificate"], dict)
        doc["certificate"].pop("real_s")
    assert b == a and fork.stats.states == rerun.stats.states
