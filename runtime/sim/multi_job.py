"""The simulation host of several jobs on one table: each job whole, all on one virtual clock.

Every job is a :class:`~runtime.sim.sim_run.SimRun` as a single simulated job is (its own job
driver, job manager, coordinator, write tasks, sources and simulated network: role names are
per job, as each Flink job has its own), with its own stream (:mod:`runtime.data.job_streams`).
The jobs share the loop (one virtual clock, one seed), the table (the simulated disk or a
directory) and the trace, where every role's name carries its job's (``job-1/coordinator``).
Job ``j`` starts ``JobsSpec.start_of(j)`` virtual seconds after the command.

Nothing between the jobs is the lab's: what keeps them apart is what Hudi's mode gives them
(``--concurrency-mode``: single-writer's EAGER rollback of every pending instant at the start of a
commit, or multi-writer's lock, heartbeats and conflict check). The verdict is the table's against
both streams merged under the merge rule (:mod:`runtime.lab.job_verdicts`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from runtime.core import roles, trace_events
from runtime.core.config import JobConfig
from runtime.core.jobs_spec import JobsSpec, check_simulated_lock, concurrency_mode, job_name
from runtime.core.json_doc import JsonObject
from runtime.core.last_value import LastValue
from runtime.data.job_streams import job_config, job_stream, shards
from runtime.job.driver import Outcome
from runtime.job.prepare import ResolvedJob
from runtime.lab.job_verdicts import JobShare, expected_rows, merged_expected, shares, verify_jobs_on_disk
from runtime.lab.jobs_result import JobsResult
from runtime.lab.results import SimulationRecord
from runtime.lab.status import Status
from runtime.lab.verdicts import ExactlyOnce
from runtime.sim.chooser import Chooser, RandomChooser
from runtime.sim.host import DEFAULT_MAX_REAL_S, HARD_LIMIT_MARGIN_S, TRACE_NOT_HASHED, RunCut, sim_counts
from runtime.sim.lifecycle import freeze_the_interpreter, hold_table, shutdown_loop
from runtime.sim.loop import SimLoop, SimulationAborted, SimulationError
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.memory_dfs import read_snapshot as read_memory_snapshot
from runtime.sim.network import DEFAULT_DELAY, Delay
from runtime.sim.prepare import prepare_config
from runtime.sim.recorder import TraceRecorder, trace_sha256
from runtime.sim.sim_run import SimRun
from runtime.sim.verify import verify_memory

SEED_STRIDE = 7919  # job j's roles draw from seed + j * SEED_STRIDE: the jobs' schedules differ


class JobRecorder:
    """One job's view of the shared trace: every role name it records carries the job's."""

    def __init__(self, shared: TraceRecorder, job: str) -> None:
        self.shared = shared
        self.prefix = f"{job}/"
        self.clock = shared.clock

    @property
    def events(self) -> list[Any]:
        return self.shared.events

    @property
    def divergence(self) -> Any:
        return self.shared.divergence

    def add(self, kind: str, role: str, *fields: Any) -> None:
        self.shared.add(kind, self.prefix + role, *fields)

    def add_message(self, kind: str, role: str, to: str, method: str, what: str, call_id: int) -> None:
        self.shared.add_message(kind, self.prefix + role, self.prefix + to, method, what, call_id)

    def add_span(
        self, role: str, thread: str, cat: str, name: str, ts_us: float, dur_us: float, args: JsonObject | None
    ) -> None:
        self.shared.add_span(self.prefix + role, thread, cat, name, ts_us, dur_us, args)

    def close(self) -> None:
        pass  # the host closes the shared trace when every job is done


class _JobRun(SimRun):
    """One job of several: its stream is its own; the expected state is the host's (both streams)."""

    def __init__(self, job: ResolvedJob, stream: pa.Table, **kwargs: Any) -> None:
        super().__init__(job, **kwargs)
        self.own_stream = stream

    def _workload(self) -> tuple[pa.Table, list[Any]]:
        return self.own_stream, shards(self.cfg, self.own_stream)

    def _table_before_and_expected(self, base: str, stream: pa.Table) -> None:
        pass  # the table starts empty; the host verifies both streams merged


def simulate_jobs(
    job: JobConfig,
    spec: JobsSpec,
    *,
    seed: int,
    workdir: str | None = None,
    storage: str = "disk",
    trace: bool = False,
    max_virtual_s: float | None = None,
    delay: Delay | None = None,
    io_delay: Delay | None = None,
    max_real_s: float | None = DEFAULT_MAX_REAL_S,
    verify: bool = True,
    chooser: Chooser | None = None,
    hash_trace: bool = True,
    cut: Callable[[], bool] | None = None,
) -> JobsResult:
    """Runs ``spec.jobs`` jobs of ``job`` on one new table under the simulator with ``seed``; ``chooser``
    decides the run (the seeded one by default); ``hash_trace``, ``cut``: :func:`~runtime.sim.host.simulate`'s."""
    wall0 = time.perf_counter()
    freeze_the_interpreter()
    mode = concurrency_mode(job)
    spec.validate(mode)
    check_simulated_lock(job, spec)
    resolved = prepare_config(job, workdir, storage)
    store = MemoryStore() if storage == "memory" else None
    cfg = resolved.config
    vlimit = max_virtual_s if max_virtual_s is not None else cfg.job_timeout_s + max(spec.start_s, default=0.0)
    chooser = chooser if chooser is not None else RandomChooser(seed)
    loop = SimLoop(max_virtual_s=vlimit + HARD_LIMIT_MARGIN_S, max_real_s=max_real_s, chooser=chooser)
    recorder = TraceRecorder(loop.time, scrub={cfg.table: "<table>"})
    streams = _STREAMS.of((repr(cfg), repr(spec)), lambda: job_streams(cfg, spec))
    runs = [
        _JobRun(
            ResolvedJob(job_config(cfg, i, spec.overrides_of(i))),
            stream,
            seed=seed + i * SEED_STRIDE,
            loop=loop,
            recorder=JobRecorder(recorder, job_name(i)),
            delay=delay or DEFAULT_DELAY,
            io_delay=io_delay,
            chrome_trace=False,
            max_virtual_s=max_virtual_s,
            store=store,
        )
        for i, (_, stream) in enumerate(streams)
    ]
    attach = getattr(chooser, "attach", None)
    if attach is not None:  # a search's fingerprint: the shared trace, and the loop's timers (any network's)
        attach(recorder, runs[0].network)
    with hold_table(resolved, store):
        records = _run_all(runs, spec, loop, recorder, cut)
    result = JobsResult(records, spec, mode)
    t = time.perf_counter()
    if verify and result.status == Status.FINISHED:
        result.exactly_once, result.shares = verify_jobs(cfg, streams, store)
    result.simulation = _simulation_record(
        runs, loop, recorder, storage=storage, seed=seed, trace=trace, wall0=wall0, t=t, hash_trace=hash_trace
    )
    return result


def _simulation_record(
    runs: list[_JobRun],
    loop: SimLoop,
    recorder: TraceRecorder,
    *,
    storage: str,
    seed: int,
    trace: bool,
    wall0: float,
    t: float,
    hash_trace: bool,
) -> SimulationRecord:
    """The simulator's part of the record of several jobs (``wall0``: the run's start, ``t``: the
    verification's)."""
    return SimulationRecord(
        host="simulator",
        storage=storage,
        seed=seed,
        virtual_s=round(loop.time(), 6),
        wall_s=round(time.perf_counter() - wall0, 3),
        verify_s=round(time.perf_counter() - t, 3),
        sim=sim_counts(loop, runs),
        trace_events=len(recorder.events),
        trace_sha256=trace_sha256(recorder.events) if hash_trace else TRACE_NOT_HASHED,
        divergence=None,
        trace=recorder.events if trace else None,
    )


def _run_all(
    runs: list[_JobRun], spec: JobsSpec, loop: SimLoop, recorder: TraceRecorder, cut: Callable[[], bool] | None
) -> list[Any]:
    """Runs every job to its verdict on the loop; their result records, in job order (a run
    ``cut`` says a search cut short raises :class:`~runtime.sim.host.RunCut` instead)."""

    async def one(i: int, run: _JobRun) -> None:
        if spec.start_of(i):
            await asyncio.sleep(spec.start_of(i))
        await run.main()

    async def every() -> None:
        await asyncio.gather(*(one(i, r) for i, r in enumerate(runs)))

    try:
        try:
            loop.run_until_complete(every())
        except SimulationError as exc:
            status = Status.ABORTED if isinstance(exc, SimulationAborted) else Status.TIMED_OUT
            for run in runs:
                if run.outcome is None:
                    stalls = run.driver.stalls if run.driver is not None else []
                    run.outcome = Outcome(status, f"{type(exc).__name__}: {exc}", stalls=stalls)
                    run.t_end = loop.time()
                    run.recorder.add("host", roles.DRIVER, "end", status.value, run.outcome.error)
        recorder.close()
        if cut is not None and cut():
            raise RunCut(len(recorder.events))
        records = [run.collect() for run in runs]
        for i, record in enumerate(records):  # the table's commits are both jobs': keep the job's own
            own = own_commits(recorder.events, job_name(i))
            record.commits = [c for c in record.commits if c["instant"] in own]
        return records
    finally:
        for run in runs:
            run.reap()
        shutdown_loop(loop)


def own_commits(events: list[Any], job: str) -> set[str]:
    """The instants ``job``'s coordinators committed, from the shared trace (their ``commit``
    steps: ``(t, "X", role, thread, cat, name, ...)``)."""
    prefix = f"{job}/"
    return {
        str(e[5]).split(" ", 1)[1]
        for e in events
        if e[1] == "X" and e[4] == trace_events.COMMIT and str(e[2]).startswith(prefix)
    }


# Both jobs' streams, generated once per configuration (a tenth of a two-job run): a bounded search
# runs one configuration thousands of times. Keyed by value (``repr`` names every field of both);
# the streams are the generator's for the configuration, and Arrow tables are immutable.
_STREAMS: LastValue[list[tuple[str, pa.Table]]] = LastValue()


def job_streams(cfg: JobConfig, spec: JobsSpec) -> list[tuple[str, pa.Table]]:
    """Every job's name and stream (``cfg``: the command's configuration)."""
    return [
        (job_name(i), job_stream(job_config(cfg, i, spec.overrides_of(i)), i, spec.jobs, spec.overlap))
        for i in range(spec.jobs)
    ]


def verify_jobs(
    cfg: JobConfig, streams: list[tuple[str, pa.Table]], store: MemoryStore | None = None
) -> tuple[ExactlyOnce, list[JobShare]]:
    """The table ``cfg.table`` against every stream merged under the merge rule, and each job's
    share (on the simulated disk ``store``, or on disk with the official reader)."""
    key, part = cfg.key_field, cfg.partition_field
    if store is None:
        return verify_jobs_on_disk(cfg.table, streams, key, cfg.precombine_field, part)
    tagged = merged_expected(streams, key, cfg.precombine_field, part, None)
    verdict = verify_memory(store, cfg.table, expected_rows(tagged), key, part)
    actual = read_memory_snapshot(MemoryDfs(store, role="verifier"), cfg.table)
    return verdict, shares(tagged, actual, verdict, [name for name, _ in streams], key, part)
