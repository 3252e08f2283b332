"""A bounded systematic search over a simulated job's schedules (stateless model checking).

A run is a function of its decisions (:mod:`runtime.sim.strategies`): the default schedule (the
seed's run, every choice point at alternative 0) plus a few *deviations*, each one choice point
taking another alternative (a callback run out of FIFO order, a message delivered late). The
search enumerates, depth first, every set of at most ``bound`` deviations, by re-executing the
job from the start for each (as CHESS and loom do: a run costs only milliseconds of real time
per virtual second): having run a schedule, it tries each alternative at each choice point after
that schedule's last deviation. :class:`~runtime.sim.fork_search.ForkSearch` (``commitlab check
--search fork``) makes the same search without re-running prefixes: the process forks at a
choice point and the child goes on with the alternative.

Pruning: at each choice point a run records the state's fingerprint
(:class:`~runtime.sim.fingerprint.StateFingerprint`). Past the last deviation a run follows the
default schedule, which is deterministic from the state; so if the state at choice point ``i``
was already reached with at least as many deviations left, every schedule that deviates at ``i``
or later was explored from that state already, and the search stops walking this run there.
The same argument stops a run early: a run that reaches such a state past its last deviation
is stopped there (the loop aborts), since the rest of it, and its verdict, is that of the run
that explored the state first; it is counted as pruned and judged no further. That is what most
of the search's redundant work was: a deviation that commutes with the events around it (a
message delayed past events of roles it does not interact with, two independent callbacks
swapped) reaches a state seen before within a few choice points, and the run no longer goes on
to the job's end to find out.
That is sound exactly as far as the fingerprint is complete; its module docstring says where it is
not (virtual time, the table's files, write-task symmetry), so "holds within the bound" means:
in every schedule the search ran, and in the ones it pruned as equal by fingerprint.

A run's prefix is its parent's: the run ``D + (i, alt)`` makes the decisions of ``D`` up to choice
point ``i``, so by the simulator's determinism (not the fingerprint's completeness: the same code
on the same inputs) its states at choice points ``0..i`` are those the parent's run recorded. The
search hands them over (``reuse_prefix``) and the chooser does not fingerprint them again; the
fingerprint's running hashes fold the skipped trace events at the next state it computes, in the
same order, so every state after ``i`` is what computing them all gives. Nor does it work out
again, where the run takes the default before ``i``, which of the ready queue's asks are choice
points (which ready callbacks may move): the parent's run recorded that too. The certificate is the
same, figure for figure and state for state (``tests/sim/test_check.py``, ``bench_check.py``).
It saves what fingerprinting cost in the prefix, about a tenth of a run; the prefix itself is
still executed: ``benchmarks/bench_check.py`` measures how much of the search that is.

With ``--jobs N`` (:mod:`runtime.sim.parallel_search`) N processes share the search: each runs
the default schedule and walks it as above, but explores only every N-th first deviation (round
robin), with the states it met itself. Each is sound alone for its share, and their union is the
whole search: a state a process marks while walking the default schedule stands for the
schedules from it that all the processes together explore, and any other state it marks it
explores itself. A process prunes only against its own states, so the union runs at least the
schedules the single search runs (fewer shared states, more runs; never fewer schedules).

Each run is judged by :func:`runtime.sim.explore.judge`, the invariants and verdicts of
``commitlab explore`` (a protocol's documented failure is a known failure, not a violation). A
run that passes but only because a call's bound fired (a ``timeout`` event: the wait was broken
by a timeout option, not by the protocol) is counted apart as *recovered by a timeout*: a circular
wait a timeout breaks is not the watchdog's deadlock, which no timeout ends.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from runtime.core.config import JobConfig
from runtime.core.jobs_spec import JobsSpec
from runtime.core.json_doc import JsonObject
from runtime.core.last_value import LastValue
from runtime.job.prepare import ResolvedJob
from runtime.lab.fault_matrix import FAILED, KNOWN, PASSED, VIOLATION
from runtime.sim.explore import Options, excerpt, prepared_schedule, run_schedule
from runtime.sim.fingerprint import StateFingerprint
from runtime.sim.host import RunCut
from runtime.sim.judge import ONE_INSTANT_PER_CHECKPOINT, Verdict
from runtime.sim.pandas_kept_out import keep_pandas_out
from runtime.sim.schedule import SimSchedule
from runtime.sim.strategies import DEFAULT_LATE_S, Choice, Deviations, ScriptedChooser

__all__ = [
    "CheckJob",
    "CheckRun",
    "SearchStats",
    "BoundedSearch",
    "run_deviations",
    "invariants_of",
    "keep_shortest",
    "scripted_chooser",
    "cut_run",
]

LIVENESS = "liveness"  # the job finishes without a failover nothing injected (explore's FAILED)
# why a search a SIGINT stopped is partial (its certificate says it; check exits 130)
INTERRUPTED = "interrupted (Ctrl-C)"
# The collector while a search runs: its youngest generation collected after each run, when the
# run's garbage (its loop, tasks, roles and tables, which hold one another) is dead and nothing of
# the next run is alive yet, and not while a run is under way (CPython's threshold of 700 collected
# the live run's objects mid-run and promoted them, so its older collections walked a few runs'
# dead objects: some 8 % of a check's CPU). Every tenth run, the second generation too, as
# CPython's own threshold (10 young collections) does.
_YOUNG_THRESHOLD = 20_000
_OLDER_EVERY = 10
CUT = "cut"  # the outcome and status of a run cut short at a state explored before (never judged)


@dataclass(frozen=True)
class CheckJob:
    """What is checked: one protocol on one fixed schedule; the search varies only the
    interleaving (``seed``: the default schedule's delays; ``late_s``: how late a late message is)."""

    schedule: SimSchedule
    protocol: str
    seed: int = 0
    late_s: float = DEFAULT_LATE_S
    symmetry: bool = True
    allow_empty_commit: str = "release"
    ready_order: bool = True  # False: only message delays deviate (the ready queue stays FIFO)
    lossy: tuple[str, ...] = ()  # RPC methods whose messages a deviation may lose
    jobs: JobsSpec | None = None  # several jobs on the table (--table-jobs), each on the schedule
    options: Options = ()  # the base configuration's --concurrency-mode, --lock-provider, --table-type


@dataclass
class CheckRun:
    """One run of the search: its deviations, verdict and what the report shows of it."""

    deviations: Deviations
    verdict: Verdict
    status: str
    events: int
    choices: list[Choice]
    timeouts: int  # calls whose bound fired
    excerpt: list[str]
    deadlock: JsonObject | None
    cut_at: int | None = None  # stopped at this choice point, a state explored before: no verdict

    @property
    def cut(self) -> bool:
        return self.cut_at is not None

    @property
    def by_timeout(self) -> bool:
        return self.verdict.outcome == PASSED and self.timeouts > 0

    def rank(self) -> tuple[int, int]:
        """Shorter first: fewest deviations, then fewest events."""
        return (len(self.deviations), self.events)


def scripted_chooser(
    job: CheckJob,
    deviations: Deviations = (),
    covered: Callable[[int, int], bool] | None = None,
    branch: Callable[[int, int, int], int] | None = None,
    known: Sequence[Choice] = (),
) -> ScriptedChooser:
    """The chooser of one run of ``job``: ``deviations``, ``covered`` (choice index, state) -> True
    stops the run there (:attr:`CheckRun.cut_at`, no verdict of its own); ``branch``: the fork
    search's walk, asked at every choice point (:mod:`runtime.sim.fork_search`); ``known``: the
    states of the run's first choice points, when an earlier run made the same decisions there."""
    return ScriptedChooser(
        job.seed,
        deviations,
        late_s=job.late_s,
        fingerprint=StateFingerprint(symmetry=job.symmetry),
        ready_order=job.ready_order,
        covered=covered,
        lossy=frozenset(job.lossy),
        branch=branch,
        known=known,
    )


def run_deviations(
    job: CheckJob,
    deviations: Deviations = (),
    covered: Callable[[int, int], bool] | None = None,
    chooser: ScriptedChooser | None = None,
    known: Sequence[Choice] = (),
) -> CheckRun:
    """Simulates ``job`` with ``deviations`` from its default schedule (or as ``chooser`` decides)
    and judges it; ``covered``, ``known``: see :func:`scripted_chooser`."""
    chooser = chooser if chooser is not None else scripted_chooser(job, deviations, covered, known=known)
    several = job.jobs is not None and job.jobs.several
    # a check's run is judged and counted, never replayed by its hash: the trace is not hashed;
    # the judge reads an unfinished run's status, commits and trace, not its committed prefix;
    # a run cut short is not judged at all
    try:
        verdict, result = run_schedule(
            job.schedule,
            job.protocol,
            job.seed,
            chooser=chooser,
            prepared=None if several else _prepared(job),
            base=_base_config(job) if several else None,
            jobs=job.jobs if several else None,
            hash_trace=False,
            check_prefix=False,
            cut=lambda: chooser.cut_at is not None,
        )
    except RunCut as cut:
        return cut_run(chooser, cut.events)
    trace = result.sim.trace or []
    # a run cut at a state explored before has no verdict of its own: the report shows nothing of it
    shown = chooser.cut_at is None
    failing = shown and verdict.outcome != PASSED
    timeouts = sum(1 for e in trace if e[1] == "timeout")
    return CheckRun(
        deviations=tuple(sorted(chooser.deviations.items())),
        verdict=verdict,
        status=result.status.value,
        events=len(trace),
        choices=chooser.choices,
        timeouts=timeouts,
        excerpt=excerpt(trace, verdict.role, at_failover=verdict.at_failover)
        if shown and (failing or timeouts)
        else [],
        deadlock=result.deadlock.to_json() if failing and result.deadlock is not None else None,
        cut_at=chooser.cut_at,
    )


def cut_run(chooser: ScriptedChooser, events: int) -> CheckRun:
    """The run ``chooser`` cut short at a state explored before (``events``: its trace's length
    then): it has no verdict of its own, and the report shows nothing of it."""
    assert chooser.cut_at is not None
    return CheckRun(
        deviations=tuple(sorted(chooser.deviations.items())),
        verdict=Verdict(CUT, None, f"the state at choice {chooser.cut_at} was explored before"),
        status=CUT,
        events=events,
        choices=chooser.choices,
        timeouts=0,
        excerpt=[],
        deadlock=None,
        cut_at=chooser.cut_at,
    )


def _base_config(job: CheckJob) -> JobConfig:
    """What a check's configuration sets beside its schedule."""
    return JobConfig(allow_empty_commit=job.allow_empty_commit).replace(**dict(job.options))


# The job a check runs, built from its schedule and validated once, not at every run (a third of a
# millisecond a run, thousands of runs a certificate), keyed by all the configuration is made of:
# the schedule's fields (its repr names every one), the protocol, --allow-empty-commit and the
# options. Building and checking a configuration reads nothing else (the table is always a new one
# on the simulated disk), and a ResolvedJob is frozen (the simulation takes its own copy).
_PREPARED: LastValue[ResolvedJob] = LastValue()


def _prepared(job: CheckJob) -> ResolvedJob:
    key = (repr(job.schedule), job.protocol, job.allow_empty_commit, job.options)
    return _PREPARED.of(key, lambda: prepared_schedule(job.schedule, job.protocol, _base_config(job), "memory"))


def invariants_of(protocol: str) -> list[str]:
    """The invariants a certificate covers for ``protocol`` (explore's, and liveness)."""
    names = ["exactly-once", "no-deadlock", "ascending-commits"]
    if protocol in ONE_INSTANT_PER_CHECKPOINT:
        names.append("one-instant-per-checkpoint")
    return [*names, LIVENESS]


@dataclass
class SearchStats:
    runs: int = 0
    states: set[int] = field(default_factory=set)  # distinct fingerprints met
    transitions: int = 0  # choice points executed, over all runs
    max_depth: int = 0  # most choice points in one run
    pruned: int = 0  # runs cut short at a state explored before
    started: float = field(default_factory=time.perf_counter)
    deepest_deviations: int = 0  # most deviations in a run so far

    @property
    def real_s(self) -> float:
        return time.perf_counter() - self.started


class BoundedSearch:
    """Every schedule of ``job`` with at most ``bound`` deviations (see the module docstring).

    ``max_runs`` / ``max_s`` stop it early (the certificate then says it is partial, and why);
    ``stop_at_first``: stop at the first failing (or known-failure) run; ``on_run`` sees every
    run with the figures so far (a progress bar); ``prune=False`` runs every schedule within the
    bound (what the pruning saves, and a check of it)."""

    def __init__(
        self,
        job: CheckJob,
        bound: int,
        *,
        max_runs: int | None = None,
        max_s: float | None = None,
        stop_at_first: bool = False,
        on_run: Callable[[CheckRun, SearchStats], None] | None = None,
        prune: bool = True,
        share: tuple[int, int] = (0, 1),
        halt: Callable[[], str | None] | None = None,
        reuse_prefix: bool = True,
    ) -> None:
        self.job = job
        # a run takes the states before its last deviation from its parent's run, whose decisions
        # it repeats there, rather than fingerprinting them again (False: as before; the same
        # certificate, compared by tests/sim/test_check.py and benchmarks/bench_check.py)
        self.reuse_prefix = reuse_prefix
        # (k, n): explore only every n-th first deviation, from the k-th (one of n processes)
        self.share = share
        self.halt = halt  # a reason to stop now (another process found a failure), or None
        self.bound = bound
        self.max_runs = max_runs
        self.max_s = max_s
        self.stop_at_first = stop_at_first
        self.on_run = on_run
        self.prune = prune  # False: every schedule within the bound, states seen or not
        self.stats = SearchStats()
        self.failures: list[CheckRun] = []  # VIOLATION / FAILED runs
        self.known: list[CheckRun] = []  # the protocol's documented failures
        self.recovered_by_timeout: list[CheckRun] = []
        self.violated: dict[str, CheckRun] = {}  # invariant -> its shortest counterexample
        self.stopped: str | None = None  # why the search ended early (None: it is complete)
        self._seen: dict[int, int] = {}  # fingerprint -> most deviations left it was explored with

    def run(self) -> BoundedSearch:
        keep_pandas_out()  # (a tenth of a CPU second, never used)
        try:
            with _collected_between_runs():
                root = self._execute(())
                if root is not None:
                    self.root_choices = len(root.choices)
                    self._visit(root)
        except KeyboardInterrupt:
            self.stopped = INTERRUPTED
        except _Stop as stop:
            self.stopped = str(stop)
        return self

    def _visit(self, parent: CheckRun) -> None:
        left = self.bound - len(parent.deviations)
        start = parent.deviations[-1][0] + 1 if parent.deviations else 0
        for i in range(start, len(parent.choices)):
            choice = parent.choices[i]
            if self.prune and self._seen.get(choice.fingerprint, -1) >= left:
                self.stats.pruned += 1
                return
            self._seen[choice.fingerprint] = left
            if left <= 0:
                continue
            for alt in range(1, choice.alternatives):
                if not parent.deviations and not self._mine():
                    continue
                known = parent.choices[: i + 1] if self.reuse_prefix else ()
                child = self._execute((*parent.deviations, (i, alt)), known)
                if child is not None:
                    self._visit(child)

    def _mine(self) -> bool:
        """Whether the next first deviation is this process's share (round robin)."""
        k, n = self.share
        self._firsts += 1
        return (self._firsts - 1) % n == k

    _firsts = 0  # first deviations met so far
    root_choices = 0  # choice points of the default schedule

    def _execute(self, deviations: Deviations, known: Sequence[Choice] = ()) -> CheckRun | None:
        reason = self.halt() if self.halt is not None else None
        if reason is not None:
            raise _Stop(reason)
        if self.max_runs is not None and self.stats.runs >= self.max_runs:
            raise _Stop(f"stopped at --max-runs {self.max_runs}")
        if self.max_s is not None and self.stats.real_s >= self.max_s:
            raise _Stop(f"stopped at --max-seconds {self.max_s:g}")
        run = run_deviations(self.job, deviations, self._covered(deviations) if self.prune else None, known=known)
        s = self.stats
        s.runs += 1
        s.transitions += len(run.choices)
        s.max_depth = max(s.max_depth, len(run.choices))
        s.deepest_deviations = max(s.deepest_deviations, len(deviations))
        s.states.update(c.fingerprint for c in run.choices[len(known) :])  # (the prefix's: the parent's)
        if gc.isenabled():  # the run's garbage, now (see _YOUNG_THRESHOLD)
            gc.collect(1 if s.runs % _OLDER_EVERY == 0 else 0)
        if not run.cut:
            self._classify(run)
        if self.on_run is not None:
            self.on_run(run, s)
        if self.stop_at_first and not run.cut and run.verdict.outcome != PASSED:
            raise _Stop("stopped at the first failure")
        return run

    def _covered(self, deviations: Deviations) -> Callable[[int, int], bool]:
        """Whether a run with ``deviations`` may stop at a choice point: past its last deviation,
        at a state explored already with at least as many deviations left (the run's future is
        that earlier run's, and so is its verdict: see the module docstring)."""
        last = deviations[-1][0] if deviations else -1
        left = self.bound - len(deviations)
        seen = self._seen
        return lambda index, state: index > last and seen.get(state, -1) >= left

    def _classify(self, run: CheckRun) -> None:
        v = run.verdict
        if v.outcome in (VIOLATION, FAILED):
            self.failures.append(run)
            keep_shortest(self.violated, run)
        elif v.outcome == KNOWN:
            self.known.append(run)
        elif run.by_timeout:
            self.recovered_by_timeout.append(run)

    @property
    def complete(self) -> bool:
        return self.stopped is None

    def shortest(self, runs: list[CheckRun]) -> CheckRun | None:
        return min(runs, key=CheckRun.rank, default=None)


def keep_shortest(violated: dict[str, CheckRun], run: CheckRun) -> None:
    """Keeps ``run`` as its invariant's counterexample if it is shorter than the one kept (the
    first of equals: runs come in the search's order)."""
    name = run.verdict.invariant or LIVENESS
    best = violated.get(name)
    if best is None or run.rank() < best.rank():
        violated[name] = run


@contextlib.contextmanager
def _collected_between_runs() -> Iterator[None]:
    """The collector's youngest generation raised for the search (see ``_YOUNG_THRESHOLD``); the
    process's own thresholds back when it ends."""
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], _YOUNG_THRESHOLD), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


class _Stop(Exception):
    """A budget ran out (the message says which)."""
