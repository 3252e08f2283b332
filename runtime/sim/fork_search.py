"""The bounded search without re-running prefixes: the simulator forks at a choice point
(``commitlab check --search fork``).

:class:`~runtime.sim.search.BoundedSearch` re-executes the job from the start for every schedule
(CHESS's way), so a run that deviates at choice point ``i`` first re-executes the ``i`` choice
points its parent executed. Here the run itself walks: at each choice point of the walk, where
the re-running search would later start a run per alternative, this process ``os.fork()``\\ s; the
child takes the alternative and goes on as that run (copy-on-write: the simulator's whole state,
its random sources and the chooser's record of decisions come along), while the parent waits for
it, then takes the next alternative, and finally the default one. A child reports back through a
pipe what the certificate needs: its runs' figures, the distinct states they met, the states it
marked explored (with the deviations left), its failing, known-failure and timeout-saved runs,
and why it stopped early, if it did. At most ``bound + 1`` processes are alive (one per
deviation, each waiting for the next), and one runs at a time. Where an alternative's prefix is
short (a choice point before ``rerun_below``, 20 by default) a fork costs more than re-running
the prefix (see below), so that run is run from the start in this process instead, nested in
the run under way, which waits at its choice point (the nested run has its own loop: asyncio's
running loop is set aside meanwhile, and it starts in the context the search started in), and
walked the same way; its prefix's states are its parent's (``reuse_prefix``). Only the root
process re-runs (a child is forked at ``rerun_below`` or later and walks from there).

The same certificate. Write ``seen`` for the explored states (state -> most deviations left it
was explored with; values only grow). The re-running search runs a schedule ``D`` in full,
stopping it early at the first choice point past its last deviation whose state ``seen`` covers
*as it was when the run started*; then it walks the run's choice points ``i`` from the one after
its last deviation: it stops at the first whose state the *current* ``seen`` covers, else marks
it and searches each alternative's schedule ``D + (i, alt)`` (recursively) before the next ``i``.
Here the process of ``D`` does the same steps in the same order, merely interleaved with its
own run: at choice point ``i`` it makes the walk's step with the current ``seen`` (its children's
reports merged), and decides whether its run stops with ``seen`` as it was when it was forked
(the entries changed since keep their value from then). The run's own decisions depend only on
that earlier ``seen`` and the process's state at ``i`` is, by the simulator's determinism, the
state the re-run of ``D + (i, alt)`` reaches there, so every run, every walk step and every
``seen`` update happen as in the re-running search, in the same order; a run's figures (its
choice points, prefix included, its states, its verdict) are the same. Only the moment a run is
judged moves: after its alternatives, not before, so the lists of runs are put back into the
search's order (by deviations: the depth-first order is their lexicographic order) before the
shortest counterexample of each invariant is chosen, first of equals as before. That order
matters when the search stops early: ``--first``, ``--max-runs``, ``--max-seconds`` and Ctrl-C
stop new runs and let the runs under way finish, so a partial certificate may count a few runs
more or other runs than the re-running search's, and under ``--first`` the failure found may be
a deeper run's (its alternatives are searched before a run's own verdict is known). A run
re-run nested makes the same steps as a forked one: it starts when the fork would have, its
stops read ``seen`` as it was then, its walk reads the current one.

What it costs (``benchmarks/bench_check.py``, a 2-core VM shared with other work): a fork and
its child's exit copy and drop the page tables of the process's anonymous memory, about 0.07 ms
of CPU per MB: 44 MB here, 3 ms, since pyarrow is kept from importing pandas (22 MB more, which
it imports only to ask whether an input is a pandas object: :mod:`runtime.sim.pandas_kept_out`). A child
then writes to every page whose objects it touches, if only their reference counts (CPython
3.11), each write a copy-on-write fault of about 2.6 us: some 300 pages in the fork's return
alone (the interpreter's own after-fork work), 750 for a run cut a few choice points after its
deviation, 2,850 for one that runs to its verdict (1,050 of them in the verification, which
reads the whole table), and the parent faults again on the pages it writes after each fork. A
fork thus costs some 6 ms beyond the child's own steps, about what re-running 20 choice points
costs (2.5 ms to start a run, 0.21 ms a choice point). Measured side by side (one round each,
a load of 12 to 18 on the two cores), message-bus, 2 writers, 2 checkpoints, bound 2 (2,043
runs, 25,741 states, the same certificate and states every time): re-running 34.5 CPU s,
forking at every choice point 40.7, re-running below choice point 20 and forking from there
33.0 (40: 33.9; 70: 36.0); the issue's job (2 writers, 3 checkpoints: 4,826 runs, 100,379
states, the same) 105.1 CPU s forking, 104.5 re-running. With 1 writer (``--writers 1
--checkpoints 2 --rounds 3 --searches rerun,fork,fork:0``: 496 runs of at most 54 choice points,
a median of 3 rounds at a load of 7) re-running took 4.98 CPU s (rounds 5.16, 4.98, 4.34),
this search 6.40 (6.40, 6.74, 6.13), forking everywhere 7.51 (with pandas imported, an earlier
round: 8.5): the best split depends on the job (its runs' length, its process's size). So
this search costs about what the re-running one does, not ten times less: it is not the
default. The collector is off in a child (a collection would walk, and so copy, the parent's
pages) and the interpreter's objects are frozen before the first run (``runtime.sim.lifecycle``);
glibc's ``malloc_trim`` before a fork gives back 0.3 MB, not worth a call.

A fork needs a process with one thread (the child has only the forking one): no progress thread,
no Ray; pyarrow's idle pool threads are fork-safe (Arrow reinitialises its pools in a child).
A child is killed if its parent dies (``PR_SET_PDEATHSIG``), its output is flushed before it
exits, and one that dies without its report (a signal, an interpreter crash) stops the search,
which says which run's process died and how: the certificate is then partial, nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import functools
import gc
import os
import pickle
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from runtime.lab.fault_matrix import PASSED
from runtime.sim.pandas_kept_out import keep_pandas_out
from runtime.sim.search import (
    INTERRUPTED,
    BoundedSearch,
    CheckJob,
    CheckRun,
    cut_run,
    keep_shortest,
    run_deviations,
    scripted_chooser,
)
from runtime.sim.strategies import Choice, Deviations, ScriptedChooser, format_deviations

__all__ = ["ForkSearch", "NotForkable"]

_PR_SET_PDEATHSIG = 1
RERUN_BELOW = 20  # an alternative before this choice point is re-run, not forked (measured: module docstring)


class NotForkable(RuntimeError):
    """The process cannot fork safely (another thread is alive, or Ray runs in it)."""


@dataclass
class _Walk:
    """A run under way in this process: its deviations, where its walk starts, the deviations
    left, its chooser, and the explored states' values as they were when it started (those
    changed since: what its stops read)."""

    deviations: Deviations
    start: int
    left: int
    walking: bool = True
    seen_before: dict[int, int] = field(default_factory=dict)
    chooser: ScriptedChooser | None = None


@dataclass
class _Report:
    """What a child sends its parent: its subtree's figures and findings."""

    runs: int
    transitions: int
    max_depth: int
    pruned: int
    deepest_deviations: int
    states: set[int]
    seen: dict[int, int]
    failures: list[CheckRun]
    known: list[CheckRun]
    recovered_by_timeout: list[CheckRun]
    stopped: str | None


@dataclass
class _Since:
    """What this process found since its own run started (what a child reports)."""

    states: set[int] = field(default_factory=set)  # distinct states first met
    runs: int = 0
    transitions: int = 0
    pruned: int = 0


class ForkSearch(BoundedSearch):
    """The bounded search of :class:`BoundedSearch`, forking at choice points instead of
    re-running prefixes (see the module docstring); the same options and results.
    ``rerun_below``: an alternative at a choice point before this one is run from the start in
    this process instead (a prefix that short costs less to re-run than a fork costs)."""

    _pipe: int | None = None  # a child's end of the pipe to its parent (None: the root)
    _failed: Exception | None = None  # a re-run's error, raised when the root's own run is over

    def __init__(self, job: CheckJob, bound: int, *, rerun_below: int = RERUN_BELOW, **options: Any) -> None:
        super().__init__(job, bound, **options)
        self.rerun_below = rerun_below

    def run(self) -> ForkSearch:
        check_forkable()
        keep_pandas_out()
        self._since = _Since()
        self._walks: list[_Walk] = []  # the runs under way here, outermost first (re-runs nest)
        self._context = contextvars.copy_context()  # what a run re-run here starts in
        if self._out_of_budget():
            return self
        try:
            self._run_walk(_Walk((), 0, self.bound))
            if self._failed is not None:
                raise self._failed
        except KeyboardInterrupt:
            self.stopped = INTERRUPTED
        except BaseException as exc:
            if self._pipe is None:
                raise
            self.stopped = f"the search process of run {self._named()} failed: {type(exc).__name__}: {exc}"
        finally:
            if self._pipe is not None:
                self._report_and_exit()
        self._in_search_order()
        return self

    def _run_walk(self, walk: _Walk, known: Sequence[Choice] = ()) -> None:
        """Runs ``walk``'s run here and walks it (nested in the run under way here, if any). In a
        child, the run it was forked for reports and exits when it ends."""
        self._walks.append(walk)
        self._start_run(walk)
        covered = functools.partial(self._covered_from_start, walk) if self.prune else None
        walk.chooser = scripted_chooser(
            self.job, walk.deviations, covered, functools.partial(self._branch, walk), known
        )
        run = run_deviations(self.job, chooser=walk.chooser)
        self._finish_run(run)
        if self._pipe is not None and walk is self._walks[0]:
            self._report_and_exit()
        self._walks.pop()

    # -- the walk (asked at every choice point of a run under way here) ------------------------

    def _branch(self, w: _Walk, index: int, state: int, alternatives: int) -> int:
        if not w.walking or index < w.start:
            return 0
        if self.prune and self._seen.get(state, -1) >= w.left:
            self.stats.pruned += 1
            self._since.pruned += 1
            w.walking = False
            return 0
        self._mark(state, w.left)
        if w.left <= 0:
            return 0
        for alt in range(1, alternatives):
            if not w.deviations and not self._mine():
                continue
            if self._out_of_budget():
                w.walking = False
                return 0
            if index < self.rerun_below:
                self._rerun(w, index, alt)
            elif self._fork(w, index, alt):
                return alt  # this is the child: its run takes ``alt`` here
            if self.stopped is not None:
                w.walking = False
                return 0
        return 0

    def _covered_from_start(self, w: _Walk, index: int, state: int) -> bool:
        """Whether the run stops here: past its last deviation, at a state ``seen`` covered when
        the run started (the entries changed since read as they were then)."""
        if w.deviations and index <= w.deviations[-1][0]:
            return False
        before = w.seen_before
        cut = (before[state] if state in before else self._seen.get(state, -1)) >= w.left
        if cut and self._pipe is not None and w is self._walks[0]:
            self._cut_child(w, index)
        return cut

    def _cut_child(self, w: _Walk, index: int) -> None:
        """A child whose run stops here reports now: a run cut short has no verdict, so the
        simulator's wind-down (the loop's abort, the result, the trace's hash) would be work for
        nothing, and in a forked process, copying every page it reads."""
        chooser = w.chooser
        assert chooser is not None
        chooser.cut_at = index
        self._finish_run(cut_run(chooser, 0))
        self._report_and_exit()

    def _mark(self, state: int, left: int) -> None:
        old = self._seen.get(state, -1)
        for w in self._walks:
            w.seen_before.setdefault(state, old)
        self._seen[state] = left

    def _out_of_budget(self) -> bool:
        reason = self.halt() if self.halt is not None else None
        if reason is None and self.max_runs is not None and self.stats.runs >= self.max_runs:
            reason = f"stopped at --max-runs {self.max_runs}"
        if reason is None and self.max_s is not None and self.stats.real_s >= self.max_s:
            reason = f"stopped at --max-seconds {self.max_s:g}"
        self.stopped = self.stopped or reason
        return reason is not None

    # -- runs -----------------------------------------------------------------------------------

    def _start_run(self, w: _Walk) -> None:
        self.stats.runs += 1
        self._since.runs += 1
        self.stats.deepest_deviations = max(self.stats.deepest_deviations, len(w.deviations))

    def _finish_run(self, run: CheckRun) -> None:
        s = self.stats
        s.transitions += len(run.choices)
        self._since.transitions += len(run.choices)
        s.max_depth = max(s.max_depth, len(run.choices))
        for choice in run.choices:
            if choice.fingerprint not in s.states:
                s.states.add(choice.fingerprint)
                self._since.states.add(choice.fingerprint)
        if not run.deviations:
            self.root_choices = len(run.choices)
        if not run.cut:
            self._classify(run)
        if self.on_run is not None:
            self.on_run(run, s)
        if self.stop_at_first and not run.cut and run.verdict.outcome != PASSED:
            self.stopped = self.stopped or "stopped at the first failure"

    def _in_search_order(self) -> None:
        for runs in (self.failures, self.known, self.recovered_by_timeout):
            runs.sort(key=lambda r: r.deviations)
        self.violated = {}
        for run in self.failures:
            keep_shortest(self.violated, run)

    def _rerun(self, w: _Walk, index: int, alt: int) -> None:
        """Runs ``w.deviations + (index, alt)`` from the start in this process, nested in ``w``'s
        run (paused at ``index``): its own loop, in the context the search started in; the
        states of its first choice points are ``w``'s (see ``reuse_prefix``)."""
        nested = _Walk((*w.deviations, (index, alt)), index + 1, w.left - 1)
        assert w.chooser is not None
        known = w.chooser.choices[: index + 1] if self.reuse_prefix else ()
        paused = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(None)  # asyncio runs one loop at a time: ``w``'s waits
        try:
            self._context.copy().run(self._run_walk, nested, known)
        except Exception as exc:  # noqa: BLE001 - raised by run() once the paused runs end
            self._walks.remove(nested)
            self._failed = self._failed or exc
            self.stopped = self.stopped or f"run {format_deviations(nested.deviations)} failed: {type(exc).__name__}"
        finally:
            asyncio.events._set_running_loop(paused)

    # -- processes ------------------------------------------------------------------------------

    def _fork(self, w: _Walk, index: int, alt: int) -> bool:
        """Forks the run of ``w.deviations + (index, alt)``; True in the child. The parent waits
        for the child's report and merges it."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        child = format_deviations((*w.deviations, (index, alt)))
        loop, parent = asyncio.get_running_loop(), os.getpid()
        try:
            read_end, write_end = os.pipe()
            pid = os.fork()
        except OSError as exc:
            self.stopped = self.stopped or f"could not fork the search process of run {child}: {exc}"
            return False
        if pid == 0:
            # asyncio forgets the running loop in a forked child (it checks the pid): this run's loop goes on
            asyncio.events._set_running_loop(loop)
            os.close(read_end)
            self._become_child(write_end, w, index, alt, parent)
            return True
        os.close(write_end)
        data, interrupted = _read_all(read_end)
        status = _reap(pid)
        try:
            report: _Report = pickle.loads(data)
        except Exception:  # noqa: BLE001 - any undecodable report is a dead child
            self.stopped = self.stopped or f"the search process of run {child} died without its report ({status})"
            return False
        self._merge(report)
        if interrupted:
            self.stopped = self.stopped or INTERRUPTED
        return False

    def _become_child(self, write_end: int, w: _Walk, index: int, alt: int, parent: int) -> None:
        """The child goes on as the run of ``w.deviations + (index, alt)`` (``w`` is its run now:
        its chooser asks the walk through it) and is this process's only run."""
        _die_with_parent(parent)
        # a child lives for one run and its alternatives: a collection would only walk (and so
        # copy) the parent's pages; what the run leaves goes when the process exits
        gc.disable()
        self._pipe = write_end
        w.deviations, w.start, w.left = (*w.deviations, (index, alt)), index + 1, w.left - 1
        w.walking, w.seen_before = True, {}
        self._walks = [w]
        self._since = _Since()
        self.failures, self.known, self.recovered_by_timeout = [], [], []
        self._start_run(w)

    def _merge(self, r: _Report) -> None:
        s, since = self.stats, self._since
        s.runs += r.runs
        since.runs += r.runs
        s.transitions += r.transitions
        since.transitions += r.transitions
        s.pruned += r.pruned
        since.pruned += r.pruned
        s.max_depth = max(s.max_depth, r.max_depth)
        s.deepest_deviations = max(s.deepest_deviations, r.deepest_deviations)
        s.states |= r.states
        since.states |= r.states
        for state, left in r.seen.items():
            self._mark(state, left)
        self.failures += r.failures
        self.known += r.known
        self.recovered_by_timeout += r.recovered_by_timeout
        self.stopped = self.stopped or r.stopped

    def _report_and_exit(self) -> NoReturn:
        """The child's last act: its report down the pipe, then exit without running the
        parent's clean-up (it is the parent's, copied)."""
        code = 0
        try:
            since, s = self._since, self.stats
            report = _Report(
                since.runs,
                since.transitions,
                s.max_depth,
                since.pruned,
                s.deepest_deviations,
                since.states,
                {state: self._seen[state] for state in self._walks[0].seen_before},
                self.failures,
                self.known,
                self.recovered_by_timeout,
                self.stopped,
            )
            _write_all(self._pipe, pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        except BaseException:  # noqa: BLE001 - the parent sees the exit code and says so
            code = 70
        os._exit(code)

    def _named(self) -> str:
        return format_deviations(self._walks[0].deviations) if self._walks else "(the default schedule)"


def check_forkable() -> None:
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread())
        raise NotForkable(
            f"the fork search needs a process with one thread, but these are alive: {names} "
            "(a progress bar must not refresh on its own thread); use --search rerun"
        )
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        raise NotForkable("the fork search cannot run in a process connected to Ray; use --search rerun")


def _prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: a child outlives a killed parent only until its run ends


_PRCTL = _prctl()


def _die_with_parent(parent: int) -> None:
    """A child is killed with its parent (Linux), so no search process outlives the search."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the signal was armed


def _read_all(fd: int) -> tuple[bytes, bool]:
    """Everything the child writes, to its end; Ctrl-C here waits on (the child stops at the same
    signal and reports)."""
    chunks: list[bytes] = []
    interrupted = False
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except KeyboardInterrupt:
            interrupted = True
            continue
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks), interrupted


def _write_all(fd: int | None, data: bytes) -> None:
    assert fd is not None
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def _reap(pid: int) -> str:
    """Waits for the child to exit (no zombie); how it ended, in words."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except KeyboardInterrupt:
            continue
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
