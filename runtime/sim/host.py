"""The simulation host: the Ray host's job, in one process, on virtual time, from a seed.

:func:`simulate` runs one job: it prepares it (:mod:`runtime.sim.prepare`), holds its table
(:mod:`runtime.sim.lifecycle`), runs a :class:`~runtime.sim.sim_run.SimRun` (the job topology both
hosts share, :mod:`runtime.job`, with roles that are objects in this process, each on its own
:class:`~runtime.sim.sim_env.SimEnv`) on a :class:`~runtime.sim.loop.SimLoop` to its verdict,
checks the table (:mod:`runtime.sim.verify`), and returns the result record with what only the
simulator reports (:class:`~runtime.lab.results.SimulationRecord`). The role code is unchanged:
only the :class:`~runtime.core.env.Env` differs. Several jobs on one table:
:mod:`runtime.sim.multi_job`.

Same config and seed, same trace, byte for byte; :func:`check_determinism` checks it by running
twice, stopping the second run at the first event that differs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from runtime.core import roles
from runtime.core.config import JobConfig
from runtime.job.driver import Outcome
from runtime.job.prepare import ResolvedJob
from runtime.lab.results import Divergence, JobResult, SimCounts, SimulationRecord
from runtime.lab.status import Status
from runtime.sim.chooser import Chooser, RandomChooser
from runtime.sim.lifecycle import freeze_the_interpreter, hold_table, shutdown_loop
from runtime.sim.loop import SimLoop, SimulationAborted, SimulationError
from runtime.sim.memory_dfs import MemoryStore
from runtime.sim.network import DEFAULT_DELAY, Delay
from runtime.sim.prepare import check_simulatable, placed, prepare_config
from runtime.sim.recorder import Event, TraceRecorder, first_divergence, trace_sha256
from runtime.sim.sim_run import SimRun
from runtime.sim.verify import check_committed_prefix, verify_exactly_once

HARD_LIMIT_MARGIN_S = 60.0  # the loop's own virtual-time bound, past the watchdog's
DEFAULT_MAX_REAL_S = 600.0  # real-time guard of one run


class RunCut(Exception):
    """A run a search cut short (``simulate``'s ``cut``): it has no verdict, and no result is
    collected; ``events``: its trace's length."""

    def __init__(self, events: int) -> None:
        super().__init__(f"cut short after {events} trace events")
        self.events = events


def simulate(
    job: JobConfig | ResolvedJob,
    *,
    seed: int,
    workdir: str | None = None,
    trace: bool = False,
    max_virtual_s: float | None = None,
    delay: Delay | None = None,
    io_delay: Delay | None = None,
    max_real_s: float | None = DEFAULT_MAX_REAL_S,
    verify: bool = True,
    chrome_trace_path: str | None = None,
    expect_trace: list[Event] | None = None,
    storage: str = "disk",
    reply_probes: list[Callable[[str, int, str, str, Any], None]] | None = None,
    store: MemoryStore | None = None,
    existing_table: bool = False,
    chooser: Chooser | None = None,
    hash_trace: bool = True,
    check_prefix: bool = True,
    cut: Callable[[], bool] | None = None,
) -> JobResult:
    """Runs ``job`` under the simulator with ``seed``; returns the result record.

    ``seed`` drives the schedule (message delays, each role's ``rng``); ``cfg.seed`` the data.
    The table is written to ``workdir/table`` (which must not hold one). ``trace=True`` adds the
    event list as ``result.sim.trace``; ``trace_sha256`` and ``trace_events`` are always there.
    ``max_virtual_s`` stops the run (status ``timed-out``) at that virtual time; ``max_real_s``
    is the real-time guard. ``expect_trace``: a reference run's events; the run stops at the first
    event that differs (``result["divergence"]``). ``storage="memory"`` runs on the simulated
    disk (:mod:`runtime.sim.memory_dfs`: no parquet, no workdir) and verifies exactly-once with the
    project's own snapshot reader instead of the official one. ``reply_probes`` see every
    successful reply on the simulated network (replier, its incarnation: restarts so far, caller,
    method, wire value). ``store``: the simulated disk of an earlier run, whose table this run
    writes on (a second ingest, a rerun after a crash); ``existing_table``: on disk, write on
    the table ``workdir`` holds instead of refusing it. ``chooser``: who makes the run's
    nondeterministic decisions (:mod:`runtime.sim.chooser`; the seeded ``RandomChooser(seed)``).
    A search's runs (never replayed by hash, judged by status, commits and trace) skip what they
    need not: ``hash_trace=False``: no ``trace_sha256`` (:data:`TRACE_NOT_HASHED`, 3 % of a check's
    CPU); ``check_prefix=False``: no commit-by-commit check of an unfinished run (7 %,
    :data:`~runtime.sim.verify.PREFIX_NOT_CHECKED`); ``cut() -> True`` after the loop: the search
    cut the run short, it raises :class:`RunCut` (10 %)."""
    wall0 = time.perf_counter()
    freeze_the_interpreter()
    resolved = prepare_config(job, workdir, storage, existing_table)
    store = store or MemoryStore() if storage == "memory" else store
    with hold_table(resolved, store):
        run = _new_run(
            resolved, seed, store, max_virtual_s, max_real_s, delay, io_delay, chrome_trace_path, expect_trace, chooser
        )
        run.network.reply_probes.extend(reply_probes or [])
        run.cut = cut
        record = _run_loop(run, run.loop, chrome_trace_path)
        record.table_before = run.table_before
        record.exactly_once, verify_s = verify_exactly_once(run, verify and record.status == Status.FINISHED)
        if verify and run.driver is not None:
            check_committed_prefix(run, record, check_prefix)
    keep_trace = trace or expect_trace is not None
    record.simulation = _simulation_record(run, storage, seed, wall0, verify_s, keep_trace, hash_trace)
    return record


TRACE_NOT_HASHED = ""  # a record's trace_sha256 when its run was asked not to hash (a check's runs)


def _simulation_record(
    run: SimRun, storage: str, seed: int, wall0: float, verify_s: float, keep_trace: bool, hash_trace: bool
) -> SimulationRecord:
    """What only the simulator reports of a run: its seed, virtual time, the trace's hash (unless
    ``hash_trace`` is False)."""
    events = run.recorder.events
    return SimulationRecord(
        host="simulator",
        storage=storage,
        seed=seed,
        virtual_s=round(run.loop.time(), 6),
        wall_s=round(run.wall_s - wall0, 3),
        verify_s=round(verify_s, 3),
        sim=run.sim_info,
        trace_events=len(events),
        trace_sha256=trace_sha256(events) if hash_trace else TRACE_NOT_HASHED,
        divergence=run.recorder.divergence,
        trace=events if keep_trace else None,
    )


def sim_counts(loop: SimLoop, runs: Sequence[SimRun]) -> SimCounts:
    """The simulator's own figures of ``runs`` on ``loop``: its iterations and clock jumps, the
    messages their networks carried, the delays they ran with (one for all)."""
    return {
        "loop_iterations": loop.iterations,
        "clock_jumps": loop.clock_jumps,
        "messages": sum(r.network.messages for r in runs),
        "delay": repr(runs[0].network.delay),
        "io_delay": repr(runs[0].io_delay) if runs[0].io_delay else None,
        "inline_executor_calls": loop.inline_executor_calls,
    }


def _new_run(
    job: ResolvedJob,
    seed: int,
    store: MemoryStore | None,
    max_virtual_s: float | None,
    max_real_s: float | None,
    delay: Delay | None,
    io_delay: Delay | None,
    chrome_trace_path: str | None,
    expect_trace: list[Event] | None,
    chooser: Chooser | None = None,
) -> SimRun:
    """The loop, the trace recorder and the host of one simulated run."""
    cfg = job.config
    vlimit = max_virtual_s if max_virtual_s is not None else cfg.job_timeout_s
    loop = SimLoop(
        max_virtual_s=vlimit + HARD_LIMIT_MARGIN_S,
        max_real_s=max_real_s,
        chooser=chooser if chooser is not None else RandomChooser(seed),
    )
    recorder = TraceRecorder(
        loop.time,
        scrub={cfg.table: "<table>"},
        expected=expect_trace,
        on_divergence=lambda d: loop.abort(f"the trace diverged from the reference run at event {d['index']}"),
    )
    run = SimRun(
        job,
        seed=seed,
        loop=loop,
        recorder=recorder,
        delay=delay or DEFAULT_DELAY,
        io_delay=io_delay,
        chrome_trace=chrome_trace_path is not None,
        max_virtual_s=max_virtual_s,
        store=store,
    )
    attach = getattr(loop.chooser, "attach", None)
    if attach is not None:  # a search strategy that fingerprints the state reads the trace and the network
        attach(recorder, run.network)
    return run


def _run_loop(run: SimRun, loop: SimLoop, chrome_trace_path: str | None) -> JobResult:
    """Runs the job on the loop to its verdict, collects the result, closes the loop."""
    try:
        try:
            loop.run_until_complete(run.main())
        except SimulationError as exc:
            status = Status.ABORTED if isinstance(exc, SimulationAborted) else Status.TIMED_OUT
            stalls = run.driver.stalls if run.driver is not None else []
            run.outcome = Outcome(status, f"{type(exc).__name__}: {exc}", stalls=stalls)
            run.t_end = loop.time()
            run.recorder.add("host", roles.DRIVER, "end", run.outcome.status.value, run.outcome.error)
        if run.cut is not None and run.cut():
            run.recorder.close()  # as collect() does: the clean-up adds no event
            raise RunCut(len(run.recorder.events))
        record = run.collect()
        run.sim_info = sim_counts(loop, [run])
        chrome = run.chrome_events() if chrome_trace_path else []
    finally:
        run.reap()
        shutdown_loop(loop)
    run.wall_s = time.perf_counter()
    if chrome_trace_path:
        from runtime.core.trace import write_trace

        write_trace(chrome_trace_path, chrome, time_origin=0.0)
    return record


def check_determinism(
    job: JobConfig | ResolvedJob, seed: int, *, workdir: str | None = None, **kwargs: Any
) -> Divergence | None:
    """Runs ``job`` twice with ``seed``; returns the first divergence (``index``, the ``first``
    and ``second`` run's events) or None when the traces are identical. The second run stops at
    the first event that differs. ``kwargs`` go to :func:`simulate`."""
    import tempfile

    kwargs.setdefault("verify", False)
    if not isinstance(job, ResolvedJob):  # checked once for both runs
        check_simulatable(job, kwargs.get("storage", "disk"))
        job = placed(job, job.table)
    with tempfile.TemporaryDirectory(prefix="commitlab-sim-", dir=workdir) as tmp:
        a = simulate(job, seed=seed, workdir=os.path.join(tmp, "a"), trace=True, **kwargs).sim
        b = simulate(job, seed=seed, workdir=os.path.join(tmp, "b"), expect_trace=a.trace, **kwargs).sim
    return b.divergence or first_divergence(a.trace or [], b.trace or [])
