"""``commitlab check --search fork``: the search that forks the simulator at a choice point gives
the certificate the re-running search gives, its failures replay, and it leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from runtime.cli.command import main
from runtime.core.json_doc import JsonObject
from runtime.lab.fault_matrix import KNOWN
from runtime.sim import fork_search
from runtime.sim.certificate import certificate
from runtime.sim.fork_search import ForkSearch
from runtime.sim.schedule import SimSchedule
from runtime.sim.search import BoundedSearch, CheckJob, run_deviations

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


def _same(job: CheckJob, bound: int, rerun_below: int = 0) -> tuple[BoundedSearch, ForkSearch]:
    """The two searches' certificates; the fork search forks at every choice point unless
    ``rerun_below`` says otherwise."""
    before = _children()
    rerun = BoundedSearch(job, bound).run()
    fork = ForkSearch(job, bound, rerun_below=rerun_below).run()
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


def test_alternatives_re_run_before_a_choice_point_and_forked_after_it_give_the_same_certificate() -> None:
    """``rerun_below``: an alternative at an early choice point is run from the start, nested in
    the run under way, and later ones are forked; where the split falls changes no figure."""
    for below in (5, 1000):
        _same(ONE, 2, rerun_below=below)
    _same(P1, 1, rerun_below=3)


def test_a_re_run_that_fails_fails_the_search_as_in_the_rerunning_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in a run re-run nested in another is the search's error, raised once the run it
    was nested in is over; no process is left and asyncio has no loop running any more."""

    def fails(job: CheckJob, *args: Any, **kwargs: Any) -> Any:
        if kwargs["chooser"].deviations:  # the first run that deviates
            raise RuntimeError("the simulator broke")
        return run_deviations(job, *args, **kwargs)

    monkeypatch.setattr("runtime.sim.fork_search.run_deviations", fails)
    before = _children()
    with pytest.raises(RuntimeError, match="the simulator broke"):
        ForkSearch(ONE, 1, rerun_below=1000).run()
    assert _children() == before
    assert asyncio.events._get_running_loop() is None


def test_the_fork_search_keeps_pandas_out_of_the_process_it_forks() -> None:
    """pyarrow would import pandas (a third of the process every fork copies) only to ask whether
    an input is a pandas object; pandas still comes when a conversion to it is asked for."""
    code = (
        "import sys\n"
        "from runtime.sim.fork_search import ForkSearch\n"
        "from runtime.sim.schedule import SimSchedule\n"
        "from runtime.sim.search import CheckJob\n"
        "search = ForkSearch(CheckJob(SimSchedule(writers=1, rounds=[100]), 'message-bus'), 1).run()\n"
        "print(search.complete, 'pandas' in sys.modules)\n"
        "import pyarrow as pa\n"
        "print(type(pa.table({'a': [1]}).to_pandas()).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.split() == ["True", "False", "DataFrame"]


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
    search = ForkSearch(SMALL, 1, rerun_below=0).run()
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
