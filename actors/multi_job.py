"""The Ray host of several jobs on one table: each job whole, all in one Ray session.

Every job is a :class:`~actors.job.JobRun` as a single job on Ray is (its own job driver, job
manager, coordinator and write tasks as named actors in its own namespace and placement group),
with its own stream (:mod:`runtime.data.job_streams`: the built-in generator's records made the
job's own, planned into Ray's object store by :func:`~actors.stream_plan.plan_of_stream`). The
driver starts every job up in turn (the table is created once, by the first), then runs them side
by side, job ``j`` ``JobsSpec.start_of(j)`` real seconds after the first started, each bounded
by its own watchdog (``--job-timeout``), and waits for all. The table is then verified once with
the official reader against every stream merged under the merge rule, each difference charged to
a job (:mod:`runtime.lab.job_verdicts`, the simulator's verdict of several jobs).

Nothing between the jobs is the lab's: what keeps them apart is what Hudi's ``--concurrency-mode``
gives them, as in the simulator (:mod:`runtime.sim.multi_job`). Each job's coordinator runs in a
process of its own, as each Flink job's coordinator runs in its JobManager's JVM: Hudi's
``InProcessLockProvider`` (a static map of the JVM) therefore excludes nothing between the two jobs,
as between two Flink deployments.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from actors.job import JobRun, _reader_uri
from actors.stream_plan import StreamPlan, plan_of_stream
from runtime.core.config import JobConfig
from runtime.core.jobs_spec import JobsSpec, concurrency_mode, job_name
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.data.job_streams import job_config, job_stream, shards
from runtime.hudi.client.lock import TableLock
from runtime.job.driver import Outcome
from runtime.job.prepare import ResolvedJob
from runtime.job.stop import StopRequest
from runtime.lab.job_verdicts import verify_jobs_on_disk
from runtime.lab.jobs_result import JobsResult
from runtime.lab.results import JobResult
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix

SHARED_TABLE = (
    "not checked on its own: the table holds every job's rows; the verdict of the jobs is checked once all finished"
)


class JobOfSeveral(JobRun):
    """One job of several on Ray: its stream is its own, its commits are those its coordinator
    made, and the table is verified by the host once every job is done."""

    def __init__(self, job: ResolvedJob, stream: pa.Table, **kwargs: Any) -> None:
        super().__init__(job, None, timeline=False, **kwargs)
        self.own_stream = stream
        self.own_commits: set[str] = set()
        self.own_compactions: set[str] = set()

    def _plan(self) -> StreamPlan:
        self.on_phase(f"handing its stream to Ray: {self.own_stream.num_rows:,} records")
        return plan_of_stream(self.cfg, self.own_stream, shards(self.cfg, self.own_stream), time.time())

    async def _views(self) -> tuple[CoordinatorView | None, JobManagerView | None, dict[str, TaskDump]]:
        coord, jm, dumps = await super()._views()
        if coord is not None:  # the instants this job's coordinator committed
            self.own_commits = {c.instant for c in coord.commits}
            self.own_compactions = set(coord.compactions_scheduled)
        return coord, jm, dumps

    def _collect(self, outcome: Outcome, counters: Any, run_s: float) -> JobResult:
        record = super()._collect(outcome, counters, run_s)
        # the table's commits are every job's: keep the job's own (its coordinator's record of them)
        record.commits = [c for c in record.commits if c["instant"] in self.own_commits]
        if "completed" in record.compactions:  # and the compactions its coordinator scheduled
            done = record.compactions["completed"]
            record.compactions["completed"] = [c for c in done if c["instant"] in self.own_compactions]
        return record

    def _verify(self, record: JobResult, outcome: Outcome) -> None:
        if outcome.status != Status.FINISHED:
            record.committed_prefix = CommittedPrefix(verified=None, prefix=SHARED_TABLE)


def run_jobs(
    cfg: JobConfig,
    spec: JobsSpec,
    *,
    on_phase: Callable[[str], None] | None = None,
    stop: StopRequest | None = None,
    table_lock: TableLock | None = None,
) -> JobsResult:
    """Runs ``spec.jobs`` jobs of ``cfg`` on its table in the current Ray session; the record of
    every job and the table's verdict against every stream merged."""
    say = on_phase or (lambda _what: None)
    cfg = cfg.replace(source="generator")  # each job's stream is made here (runtime.data.job_streams)
    names = [job_name(i) for i in range(spec.jobs)]
    configs = [job_config(cfg, i, spec.overrides_of(i)) for i in range(spec.jobs)]
    streams = [(names[i], job_stream(configs[i], i, spec.jobs, spec.overlap)) for i in range(spec.jobs)]
    runs = [
        JobOfSeveral(
            ResolvedJob(configs[i]),
            streams[i][1],
            on_phase=lambda what, n=names[i]: say(f"{n}: {what}"),
            stop=stop,
            table_lock=table_lock,
        )
        for i in range(spec.jobs)
    ]
    try:
        for run in runs:  # in turn: the first creates the table, and reads it as the jobs find it
            run.start_up()
        records = _side_by_side(runs, spec, stop)
    finally:
        for run in runs:
            run._shutdown()
    result = JobsResult(records, spec, concurrency_mode(cfg))
    if result.status == Status.FINISHED:
        say("verifying the table with the official reader against both streams merged")
        result.exactly_once, result.shares = verify_jobs_on_disk(
            _reader_uri(cfg.table), streams, cfg.key_field, cfg.precombine_field, cfg.partition_field, runs[0].before
        )
    return result


def _side_by_side(runs: list[JobOfSeveral], spec: JobsSpec, stop: StopRequest | None) -> list[JobResult]:
    """Every job run to its end, each in a thread of its own (its driver's event loop), job ``j``
    starting ``spec.start_of(j)`` seconds after the first; their records, in job order."""
    t0 = time.monotonic()
    waiting = stop if stop is not None else threading.Event()

    def one(i: int, run: JobOfSeveral) -> JobResult:
        waiting.wait(max(0.0, t0 + spec.start_of(i) - time.monotonic()))  # a stop ends the wait at once
        return run.finish()

    with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="job") as pool:
        futures = [pool.submit(one, i, run) for i, run in enumerate(runs)]
        return [f.result() for f in futures]
