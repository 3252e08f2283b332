"""Exploration and the bounded search of two jobs on one table (``--table-jobs 2``).

A seed's schedule (:mod:`runtime.sim.schedule`) applies to each job alike: both jobs' checkpoints
are aborted, their notifications late, their tables' locks held by a cleaner (``lock-held`` on
both jobs) as the schedule says; each job has its own stream (:mod:`runtime.data.job_streams`).
The verdict of a run is each job's by :func:`runtime.sim.explore.judge` (its liveness, its commits
in order, a deadlock, a failover nothing injected), then the shared table's against both streams
merged (:mod:`runtime.lab.job_verdicts`), naming the job whose rows were lost or duplicated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from runtime.core.config import JobConfig
from runtime.core.jobs_spec import JobsSpec
from runtime.lab.fault_matrix import KNOWN, PASSED, VIOLATION
from runtime.lab.job_verdicts import named
from runtime.lab.jobs_result import CONFLICT, JobsResult, conflict_failovers, known_losses
from runtime.lab.results import JobResult
from runtime.sim.chooser import Chooser
from runtime.sim.judge import MAX_REAL_S, Verdict, judge
from runtime.sim.multi_job import simulate_jobs
from runtime.sim.network import Delay
from runtime.sim.schedule import SimSchedule


def judge_jobs(protocol: str, result: JobsResult) -> Verdict:
    """The first job's failure, else the shared table's verdict (the module docstring). A
    failover a write conflict caused is the optimistic mode's way, not a failure: the table's
    verdict says whether the replay made up for it."""
    for job in result.jobs:
        own = [f for f in job.failovers if CONFLICT not in str(f.error or "")]
        verdict = judge(protocol, dataclasses.replace(job, exactly_once=None, failovers=own))
        if verdict.outcome != PASSED:
            name = str(job.config.get("job_id", ""))
            role = f"{name}/{verdict.role}" if verdict.role else None
            return dataclasses.replace(verdict, detail=f"{name}: {verdict.detail}", role=role)
    eo = result.exactly_once
    if eo is not None and not eo.verified:
        detail = named(result.shares) or eo.error or "the table differs"
        known = known_losses(protocol, result)
        if known is not None:
            return Verdict(KNOWN, "exactly-once", f"{known}: {detail}")
        return Verdict(VIOLATION, "exactly-once", detail)
    commits = sum(len(j.commits) for j in result.jobs)
    conflicts = sum(conflict_failovers(j) for j in result.jobs)
    replayed = f", {conflicts} write conflict(s) failed over and replayed" if conflicts else ""
    return Verdict(PASSED, None, f"{commits} commit(s) of {len(result.jobs)} jobs{replayed}, exactly-once")


def run_jobs_schedule(
    schedule: SimSchedule,
    protocol: str,
    seed: int,
    jobs: JobsSpec,
    *,
    storage: str = "memory",
    workdir: str | None = None,
    base: JobConfig | None = None,
    chooser: Chooser | None = None,
    hash_trace: bool = True,
    cut: Callable[[], bool] | None = None,
) -> tuple[Verdict, JobResult]:
    """:func:`runtime.sim.explore.run_schedule` for several jobs: the verdict, and one record
    standing for the run (the first job's, with the run's simulation, status and table verdict);
    ``hash_trace``, ``cut``: :func:`~runtime.sim.multi_job.simulate_jobs`'."""
    cfg = schedule.config(protocol, base)
    result = simulate_jobs(
        cfg,
        jobs,
        seed=seed,
        workdir=workdir,
        storage=storage,
        trace=True,
        delay=Delay.parse(schedule.delay),
        max_real_s=MAX_REAL_S,
        chooser=chooser,
        hash_trace=hash_trace,
        cut=cut,
    )
    verdict = judge_jobs(protocol, result)
    first = result.jobs[0]
    record = dataclasses.replace(
        first,
        status=result.status,
        simulation=result.simulation,
        exactly_once=result.exactly_once,
        deadlock=next((j.deadlock for j in result.jobs if j.deadlock is not None), None),
        commits=[c for j in result.jobs for c in j.commits],
    )
    return verdict, record
