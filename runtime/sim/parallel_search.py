"""The bounded search spread over several processes (``commitlab check --jobs N``).

Each of ``jobs`` forked processes runs :class:`~runtime.sim.search.BoundedSearch` with its share
(every N-th first deviation, round robin; :mod:`runtime.sim.search` says why each share is sound
and their union is the whole search) and sends back what a certificate needs: its figures, its
failing, known-failure and timeout-saved runs, and why it stopped early, if it did. The parent
merges them into one :class:`BoundedSearch`, so a certificate reads it as it reads one process's.

The processes publish their figures in shared memory for the parent's progress line; a process
that finds a failure under ``stop_at_first`` tells the others to stop; Ctrl-C reaches every
process (one process group), each keeps its partial share, and the merged certificate is partial.
The simulator is a single thread with no I/O of its own, so a fork copies a quiet process.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.sharedctypes
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from runtime.lab.fault_matrix import PASSED
from runtime.sim.fork_search import ForkSearch
from runtime.sim.search import BoundedSearch, CheckJob, CheckRun, SearchStats, keep_shortest

__all__ = ["parallel_search"]

_FIGURES = 3  # per process: runs, distinct states, deepest run
_POLL_S = 0.5


@dataclass
class _Share:
    """What one process sends back."""

    runs: int
    states: set[int]
    transitions: int
    max_depth: int
    pruned: int
    deepest_deviations: int
    root_choices: int
    failures: list[CheckRun]
    known: list[CheckRun]
    recovered_by_timeout: list[CheckRun]
    violated: dict[str, CheckRun]
    stopped: str | None


# set in each forked process before it searches (a fork inherits them; nothing is pickled)
_figures: Any = None
_found: Any = None


def _search_share(job: CheckJob, bound: int, k: int, jobs: int, options: dict[str, Any]) -> _Share:
    def on_run(run: CheckRun, s: SearchStats) -> None:
        base = k * _FIGURES
        _figures[base], _figures[base + 1], _figures[base + 2] = s.runs, len(s.states), s.max_depth
        if options["stop_at_first"] and not run.cut and run.verdict.outcome != PASSED:
            _found.value = 1

    def halt() -> str | None:
        return "stopped: another process found a failure" if _found.value else None

    kind = ForkSearch if options.pop("fork") else BoundedSearch
    search = kind(job, bound, share=(k, jobs), on_run=on_run, halt=halt, **options).run()
    s = search.stats
    return _Share(
        s.runs,
        s.states,
        s.transitions,
        s.max_depth,
        s.pruned,
        s.deepest_deviations,
        search.root_choices,
        search.failures,
        search.known,
        search.recovered_by_timeout,
        search.violated,
        search.stopped,
    )


def parallel_search(
    job: CheckJob,
    bound: int,
    jobs: int,
    *,
    max_runs: int | None = None,
    max_s: float | None = None,
    stop_at_first: bool = False,
    on_progress: Callable[[int, int, int], None] | None = None,
    fork: bool = False,
) -> BoundedSearch:
    """The search of ``job`` within ``bound`` over ``jobs`` processes, merged (``max_runs`` is
    shared out among them); ``fork``: each process's share is a fork search (:mod:`runtime.sim.fork_search`)."""
    global _figures, _found
    ctx = multiprocessing.get_context("fork")
    _figures = ctx.Array("q", jobs * _FIGURES, lock=False)
    _found = ctx.Value("b", 0, lock=False)
    per = None if max_runs is None else max(1, -(-max_runs // jobs))
    options = {"max_runs": per, "max_s": max_s, "stop_at_first": stop_at_first, "fork": fork}
    merged = BoundedSearch(job, bound, max_runs=max_runs, max_s=max_s, stop_at_first=stop_at_first)
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_search_share, job, bound, k, jobs, options) for k in range(jobs)]
        _await(futures, on_progress)
        shares = [f.result() for f in futures]
    return _merge(merged, shares)


def _await(futures: list[Future[_Share]], on_progress: Callable[[int, int, int], None] | None) -> None:
    """Waits for every process, showing their summed figures (runs, states met, deepest run; a
    state two processes met counts twice here); Ctrl-C here waits on, since each process stops
    at the same signal and returns its partial share."""
    while True:
        try:
            _, pending = wait(futures, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
        except KeyboardInterrupt:
            continue
        figures = list(_figures)
        if on_progress is not None:
            on_progress(sum(figures[0::_FIGURES]), sum(figures[1::_FIGURES]), max(figures[2::_FIGURES]))
        if not pending:
            return


def _merge(merged: BoundedSearch, shares: list[_Share]) -> BoundedSearch:
    """One search of the shares: figures summed (the default run, which every process makes,
    counted once), states united, runs deduplicated by their deviations."""
    s = merged.stats
    extra = len(shares) - 1
    s.runs = sum(x.runs for x in shares) - extra
    s.transitions = sum(x.transitions for x in shares) - extra * max(x.root_choices for x in shares)
    s.states = set().union(*(x.states for x in shares))
    s.max_depth = max(x.max_depth for x in shares)
    s.pruned = sum(x.pruned for x in shares)
    s.deepest_deviations = max(x.deepest_deviations for x in shares)
    merged.failures = _unique(r for x in shares for r in x.failures)
    merged.known = _unique(r for x in shares for r in x.known)
    merged.recovered_by_timeout = _unique(r for x in shares for r in x.recovered_by_timeout)
    for x in shares:
        for run in x.violated.values():
            keep_shortest(merged.violated, run)
    merged.stopped = next((x.stopped for x in shares if x.stopped is not None), None)
    return merged


def _unique(runs: Any) -> list[CheckRun]:
    out: dict[tuple[tuple[int, int], ...], CheckRun] = {}
    for run in runs:
        out.setdefault(run.deviations, run)
    return list(out.values())
