"""Launches one job on Ray: the Ray host of the job topology (:mod:`runtime.job`).

The topology decides which roles run, in which order they start, how the job is supervised and
fails over, and what the result says. This module opens the table, starts the job's processes
while the stream is planned, has the job driver run the job on its Ray host
(:mod:`actors.ray_host`: the roles placed as named actors, called with every wait bounded,
killed), and at the end gathers counters and traces, verifies the table with the official reader
and writes ``result.json``.
"""

import asyncio
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ray

from actors import cluster_info
from actors.cluster_watch import TAKEOVER_S, EndClaim, check_cluster_lost_after, cluster_watch, lost_error
from actors.layout import ProcessLayout
from actors.ray_host import STOPPED, RayHost
from actors.ray_session import ensure_ray, mark_cluster_lost
from actors.stream_plan import StreamPlan, plan_stream
from runtime.core.codec import from_wire, to_wire
from runtime.core.config import JobConfig
from runtime.core.dfs import DfsCounters, open_dfs
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.roles import DRIVER, JOB_MANAGER
from runtime.core.storage import redact
from runtime.core.trace import write_trace
from runtime.faults.markers import faults_path
from runtime.flink.state_backend import StateBackend
from runtime.hudi.client import write_client
from runtime.hudi.client.concurrency import hold_for_run, is_multi_writer
from runtime.hudi.client.lock import TableLock, command_line
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.job.driver import POLL_S, JobDriver, Outcome
from runtime.job.prepare import ResolvedJob, prepared
from runtime.job.record import (
    completed_instants,
    job_result,
    trace_markers,
    unchanged_table,
    verify_committed_prefix,
)
from runtime.job.roles import first_launch
from runtime.job.stop import StopRequest
from runtime.lab.report import ProgressCallback
from runtime.lab.results import ClusterLost, JobResult, RayRecord
from runtime.lab.run_output import draw_timeline, remove_result, write_result
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix
from runtime.lab.verify import merged_with_table, read_snapshot, read_table_before, verify_run

log = logging.getLogger(__name__)

# how long the driver of a run that lost its Ray cluster waits for the job manager's cancellation,
# and for the job's processes to end: with --cluster-lost-after and the record, well within the
# minute after which Ray ends the driver (gcs_rpc_server_reconnect_timeout_s, 60 s)
LOST_CALL_S = 5.0
# how long the run's own thread waits for the record the cluster watch's thread makes (its check
# with the official reader included), should it get free from the GCS call it waited in
LOST_RECORD_WAIT_S = 120.0

# the run ended between its first record and the check: a second signal, or the SIGKILL `ray job
# stop` sends RAY_JOB_STOP_WAIT_TIME_S after its SIGTERM
PREFIX_UNCHECKED = (
    "not checked: the run ended during the check (a second signal, or ray job stop's SIGKILL); "
    "commitlab verify --result OUT/result.json checks it"
)


class JobRun(RayHost):
    """One run of a job on Ray; ``run()`` returns the result record. It is the Ray host
    (:class:`~actors.ray_host.RayHost`) of :class:`~runtime.job.driver.JobDriver`: roles are named
    actors, placed by the job's placement group, their calls awaited (bounded) and killed with
    ``ray.kill``."""

    def __init__(
        self,
        job: ResolvedJob,
        out_dir: str | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        on_phase: Callable[[str], None] | None = None,
        trace_path: str | None = None,
        timeline: bool = True,
        stop: StopRequest | None = None,
        table_lock: TableLock | None = None,
        on_lost_record: Callable[[JobResult], None] | None = None,
    ) -> None:
        super().__init__(
            job.config,
            on_progress=on_progress,
            on_phase=on_phase,
            tracing=bool(trace_path or (out_dir and timeline)),
            stop=stop,
            table_lock=table_lock,
        )
        self.job = job
        self.out_dir = out_dir
        self.trace_path = trace_path
        self.timeline = timeline  # timeline.png in out_dir (it needs every role's trace events)
        self.final_jm: JobManagerView | None = None  # its answer to the cancellation of a stopped job
        self.launched = False  # the driver started launching roles
        self.before: Any = None  # the table's rows as the run found it (pa.Table), once read
        self.table_before: Any = None
        self.on_lost_record = on_lost_record  # the record of a run that lost its cluster, made by the watch
        self.lost_end = EndClaim()  # who ends a run that lost its cluster
        self.lost_record: JobResult | None = None  # the record the watch's thread made, when it did
        self.lost_record_made = threading.Event()

    def run(self) -> JobResult:
        try:
            return self._run()
        finally:
            self._shutdown()  # whatever happened, the job's processes and placement group go

    def _run(self) -> JobResult:
        self.start_up()
        return self.finish()

    def start_up(self) -> None:
        """Opens (or creates) the table, starts the job's processes and plans its stream: nothing
        of the job runs yet (:meth:`finish` runs it)."""
        self.t0 = time.time()
        self.counters = DfsCounters()
        self.endpoint_before = cluster_info.endpoint_counts(self.cfg.table)  # what an S3 endpoint serves
        if self.out_dir:  # an earlier run's record here is not this run's, even if this one is stopped at once
            remove_result(self.out_dir)
        try:
            self._prepare(self.counters)
            self.ready_at_run = self._processes_ready()
        except KeyboardInterrupt as exc:
            if self.stop is None or not self.stop.stopped_start_up(exc):
                raise
            self.plan, self.ready_at_run = None, 0

    def finish(self) -> JobResult:
        """Runs the started-up job to its end, gathers its record and checks the table."""
        self.t_started = time.time()
        outcome = self._drive(self.ready_at_run)
        t_end = time.time()
        if self.lost_end.by == EndClaim.WATCH:  # the watch's thread makes the record (_on_cluster_lost)
            self.lost_record_made.wait(LOST_RECORD_WAIT_S)
            if self.lost_record is not None:
                return self.lost_record
        if outcome.status == Status.FINISHED and self._ray_up():
            # let the sources push end-of-input so every mailbox loop ends cleanly
            ray.get([self.refs[n].actor.source_done.remote(n, 5.0) for n in self.driver.source_names], timeout=30)
        return self._record(outcome, t_end)

    def _record(self, outcome: Outcome, t_end: float) -> JobResult:
        """The record of the job that ended with ``outcome``: gathered, written, the table checked."""
        t0, counters, endpoint_before, ready_at_run = self.t0, self.counters, self.endpoint_before, self.ready_at_run
        cfg, layout = self.cfg, self.layout or ProcessLayout.for_job(self.cfg.writers, 1, 1.0, 0)
        t_started = self.t_started
        # a start-up stop or Ray ended by the same signal: no role ran, or no place is known
        live = self.processes if self.launched and self._ray_up() else {}
        placement = cluster_info.run_placement(live, cfg.placement, layout.slots)
        t_up = self.driver.t_launched
        # what the roles hold is gathered, then they stop: nothing commits while the record is made
        record = self._collect(outcome, counters, t_end - t_started)
        record.timing["setup_s"], record.timing["run_s"] = round(t_started - t0, 3), round(t_end - t_started, 3)
        record.timing["total_s"] = round(time.time() - t0, 3)
        record.timing["actors_up_s"] = round(t_up - t_started, 3) if t_up else None
        # epoch seconds: when the sources began to start (their first records go out from then)
        record.timing["sources_started_at"] = round(self.driver.t_sources, 3) if self.driver.t_sources else None
        record.timing["processes_up_at_run"] = ready_at_run
        endpoint = cluster_info.endpoint_served(cfg.table, endpoint_before)
        # a timed-out job: where the job manager's and coordinator's coroutines waited
        record.ray = RayRecord(placement, endpoint, self.trace_path, self.stacks_at_timeout or None, self.cluster_lost)
        record.table_before = self.table_before
        self._verify(record, outcome)
        return record

    def _drive(self, ready_at_run: int) -> Outcome:
        """The job, run by its driver; a stop that came during the start-up ends it before any
        role starts. A stopped job is cancelled before anything is gathered (:meth:`_cancel`)."""
        if self.plan is None or (self.stop is not None and self.stop.is_set()):
            return Outcome(Status.INTERRUPTED, f"{STOPPED} during the start-up, before any role started")
        self.launched = True
        roles = first_launch(self.driver.roles)
        self.on_phase(f"starting {len(roles)} roles in {len(self.processes)} processes ({ready_at_run} already up)")
        watch = cluster_watch(self.cfg.cluster_lost_after_s)
        watch.start(self._on_cluster_lost, POLL_S)
        try:
            outcome = asyncio.run(self._until_ray_ends(self.driver.run(self)))
        except Exception as exc:  # noqa: BLE001 - recorded: the run's record is still written
            log.exception("the job driver failed")
            outcome = Outcome(Status.FAILED, f"internal error of the job driver: {type(exc).__name__}: {exc}")
        finally:
            watch.stop()
        if self.cluster_lost is not None and not self.lost_end.claim(EndClaim.LOOP):
            return outcome  # the watch's thread ends the run (_on_cluster_lost)
        if outcome.status == Status.INTERRUPTED:
            self._cancel(outcome.error or STOPPED)
        elif self.cluster_lost is not None:
            self._end_lost_roles()
        return outcome

    def _on_cluster_lost(self, lost: ClusterLost) -> None:
        """On the watch's thread: the driver's loop ends the run at its next poll; when it does not
        claim that within TAKEOVER_S, it is stuck in a call that waits for the GCS (a failover's
        named actor creation or name lookup, which Ray answers only by ending the process), and this
        thread makes the record itself and hands it to ``on_lost_record`` (the command reports it
        and ends the process, exit 4); without one, :meth:`finish` returns it, should the loop get
        free before Ray ends the process."""
        self.cluster_lost = lost
        mark_cluster_lost(lost.gcs_address)
        if not self.lost_end.left_to_the_watch(TAKEOVER_S):
            return
        error = lost_error(lost, redact(self.cfg.table))
        self.on_phase(
            f"lost the Ray cluster (GCS at {lost.gcs_address}) while the driver waits on it: ending the run from the "
            "watch, writing its record"
        )
        try:
            self._end_lost_roles()
            self.lost_record = self._record(Outcome(Status.FAILED, error, None, self.driver.stalls), time.time())
        finally:
            self.lost_record_made.set()
        if self.on_lost_record is not None:
            self.on_lost_record(self.lost_record)

    def _end_lost_roles(self) -> None:
        """The cluster is lost: the job manager cancelled, the job's processes ended, each bounded."""
        self._cancel("the Ray cluster was lost", LOST_CALL_S)
        self._end_processes_directly()

    async def _until_ray_ends(self, job: Awaitable[Outcome]) -> Outcome:
        """The job, unless a stop ended Ray itself (a group-wide SIGTERM or SIGHUP), or the driver
        lost the Ray cluster's head (:mod:`actors.cluster_watch`): then no call of the driver's can
        be answered, and it stops waiting for them (a role's start waits a minute, and Ray ends the
        driver a minute after its GCS went). A lost cluster fails the run, with no failover: its
        record is made from what the driver holds and from the table, as a stop's that ended Ray."""
        task = asyncio.ensure_future(job)
        while not task.done():
            await asyncio.wait({task}, timeout=POLL_S)
            lost = self.cluster_lost  # set by the watch's thread (_on_cluster_lost)
            ours = lost is None or self.lost_end.claim(EndClaim.LOOP)  # else the watch's thread ends the run
            if self.stop is not None and self.stop.is_set() and not self._ray_up() and ours:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return Outcome(Status.INTERRUPTED, f"{STOPPED}; Ray's processes were ended by the same signal")
            if lost is not None and not task.done():
                error = lost_error(lost, redact(self.cfg.table))
                if ours:
                    self.on_phase(f"lost the Ray cluster (GCS at {lost.gcs_address}): ending the run with its record")
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return Outcome(Status.FAILED, error, None, self.driver.stalls)
        return task.result()

    def _end_processes_directly(self) -> None:
        """The cluster is lost: each of the job's processes is asked, by a call straight to it, to
        end (:meth:`ProcessActor.end <actors.process_actor.ProcessActor.end>`), since ``ray.kill``
        goes through the GCS; waits (at most :data:`LOST_CALL_S`) until each is seen gone. One that
        cannot be reached (its node gone or cut off) is left to the end of its node."""
        ends = {name: actor.end.remote() for name, actor in self.processes.items()}
        if not ends:
            return
        done, left = ray.wait(list(ends.values()), num_returns=len(ends), timeout=LOST_CALL_S)
        for ref in done:  # the call of a process that ended: its error is the news, taken here
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(ref, timeout=0)
        if left:
            log.warning("%d of the job's %d processes did not end within %g s", len(left), len(ends), LOST_CALL_S)

    def _cancel(self, reason: str, bound: float | None = None) -> None:
        """Flink's cancel: the job manager stops checkpointing (:meth:`JobManager.cancel
        <runtime.flink.job_manager.JobManager.cancel>`); its answer is the final view of the
        checkpoints, so no checkpoint completes (nor commits) after the record's view of them.
        A job manager that does not answer (its process or Ray itself ended by the same signal)
        leaves the record to what the driver holds and what the table says."""
        if JOB_MANAGER not in self.refs or not (self._ray_up() or self.cluster_lost is not None):
            return  # a lost cluster's roles may still answer a call straight to them
        bound = min(self.cfg.checkpoint_timeout_s + 5, bound or math.inf)
        try:
            view = ray.get(self.refs[JOB_MANAGER].deliver("cancel", to_wire(reason), DRIVER), timeout=bound)
            self.final_jm = from_wire(view)
        except ray.exceptions.RayError as exc:
            log.info("the job manager did not take the cancellation: %s", type(exc).__name__)

    def _verify(self, record: JobResult, outcome: Outcome) -> None:
        """Checks the table with the official reader: exactly-once for a finished run, the
        committed prefix for one that did not finish. The record is written first, so that a
        second signal during the check (or ``ray job stop``'s SIGKILL) still leaves it, saying
        the check was not done; the timeline picture is drawn last, once the record is complete:
        a stop that ends the run meanwhile costs only the picture."""
        cfg, finished = self.cfg, outcome.status == Status.FINISHED
        if self.out_dir:  # a record before the check: what a stop (or Ray ending the driver) during it leaves
            record.committed_prefix = None if finished else CommittedPrefix(verified=None, prefix=PREFIX_UNCHECKED)
            early = write_result(self.out_dir, record)
            if self.stop is not None:
                self.stop.record_written(early, complete=False)
        self.on_phase("verifying the table with the official reader" if finished else "checking what the run committed")
        reader = _reader_uri(cfg.table)
        if self.plan is None:  # stopped while starting: no role ran, so nothing can have committed
            record.committed_prefix = unchanged_table(self.table, self.commits_before)
        elif finished:
            record.exactly_once = verify_run(reader, self.plan.expected, cfg.key_field, cfg.partition_field)
        else:
            record.committed_prefix = verify_committed_prefix(
                self.driver, record, self.plan.stream, lambda: read_snapshot(reader), self.before
            )
        if not self.out_dir:
            return
        path = write_result(self.out_dir, record)
        if self.stop is not None:
            self.stop.record_written(path, complete=True)
        if self.trace_events:
            draw_timeline(self.out_dir, record, self.trace_events)
            write_result(self.out_dir, record)  # the same record, naming its picture

    def _prepare(self, counters: DfsCounters) -> None:
        """Opens the table, starts the job's processes and plans the stream; bad input fails here,
        before anything is written."""
        cfg = self.cfg
        dfs, base = open_dfs(cfg.table, role=DRIVER, counters=counters)
        cluster_info.check_storage(dfs, cfg.table)  # an unreachable endpoint or missing bucket
        props = TableProps.for_job(cfg)
        HudiTable.check_compatible(dfs, base, props)  # a foreign or mismatched table: fail early
        # the table as it is, and a driver of it: what the record of a run stopped in the start-up says
        self.table = HudiTable(dfs, base, props)
        self.commits_before = completed_instants(self.table)
        self.driver = JobDriver(self.job, self.table, schema_json="")
        with self.stop.start_up() if self.stop is not None else contextlib.nullcontext():
            self.start_processes()  # they come up while the stream is planned
            plan = self._plan()
        table = write_client.create_or_open(dfs, base, props)
        self.cfg = plan.config
        self.job = ResolvedJob(plan.config)  # the prepared job, with the input's record count
        self.plan, self.props, self.table = plan, props, table
        StateBackend(
            dfs, base, self.cfg.checkpoint_store
        ).clear()  # checkpoints of an earlier job on this table are not ours
        if dfs.exists(faults_path(base)):  # nor are the fault markers of an earlier job
            dfs.delete(faults_path(base), recursive=True)
        self.commits_before = completed_instants(table)  # the table exists now
        # the table as the run finds it, before the first checkpoint: what the stream merges into
        self.before, self.table_before = read_table_before(
            sorted(self.commits_before),
            lambda: read_snapshot(_reader_uri(cfg.table)),
            cfg.key_field,
            cfg.partition_field,
        )
        if self.before is not None:
            plan.expected = merged_with_table(
                self.before, plan.expected, cfg.key_field, cfg.precombine_field, cfg.partition_field
            )
        self.driver = JobDriver(self.job, table, schema_json=plan.schema_json)
        if self.table_lock is not None and self.table_lock.taken_over:
            self.driver.left_pending_by = f"a run whose heartbeat expired ({self.table_lock.took_over_text()})"

    def _plan(self) -> StreamPlan:
        return plan_stream(self.cfg, self.on_phase, self.job.input)

    # -- the result ------------------------------------------------------------------------------

    def _collect(self, outcome: Outcome, counters: DfsCounters, run_s: float) -> JobResult:
        """The record, from what the roles say (when Ray still runs) and what the table says. The
        job manager's view is final when the job ended or took its cancellation; otherwise the
        last one the driver holds, and the checkpoint store on the table completes it."""
        metrics: list[MetricsSnapshot] = []
        coord, jm, dumps = None, None, dict[str, TaskDump]()
        if self._ray_up() and self.launched:
            for name, ref in self.refs.items():
                try:
                    metrics.append(ray.get(ref.actor.metrics.remote(name), timeout=10))
                except ray.exceptions.RayError as exc:  # a dead process's counters are lost with it
                    log.info("the counters of %s are lost: %s", name, type(exc).__name__)
            coord, jm, dumps = asyncio.run(self._views())
            self._gather_traces()
        ended_itself = outcome.status != Status.INTERRUPTED and self.cluster_lost is None
        jm_final = ended_itself or self.final_jm is not None or not self.launched
        jm = self.final_jm or jm or self.last_jm
        self._shutdown()  # a job that did not finish would go on committing under the record
        return job_result(
            self.driver,
            outcome,
            metrics=metrics,
            driver_dfs=counters,
            coord=coord,
            jm=jm,
            jm_final=jm_final,
            dumps=dumps,
            commits_before=self.commits_before,
            table=redact(self.cfg.table),
            timing=self.plan.timings.copy() if self.plan is not None else {},
            run_s=run_s,
        )

    def _gather_traces(self) -> None:
        if not self.tracing:
            return
        for name, ref in self.refs.items():
            try:
                self.trace_events += ray.get(ref.actor.trace_events.remote(name), timeout=10)
            except ray.exceptions.RayError as exc:
                log.info("the trace events of %s are lost: %s", name, type(exc).__name__)
        self.trace_events += trace_markers(self.driver)
        if self.trace_path:
            write_trace(self.trace_path, self.trace_events)

    async def _views(self) -> tuple[CoordinatorView | None, JobManagerView | None, dict[str, TaskDump]]:
        """The coordinator's and the job manager's views and the tasks' dumps, for the record."""
        return await self.describe_coordinator(), await self.describe_job_manager(), await self.dumps()


def _reader_uri(table: str) -> str:
    return table if "://" in table else os.path.abspath(table)


def run_job(
    job: JobConfig | ResolvedJob, out_dir: str | None = None, *, table_lock: TableLock | None = None, **kwargs: Any
) -> JobResult:
    """Runs a job on the current Ray cluster (starting a local one if needed). A plain config is
    prepared first (:func:`~runtime.job.prepare.prepare_job`): options that disagree with an
    existing table fail before Ray starts. The run holds its table (:mod:`runtime.hudi.client.lock`):
    ``table_lock`` when the caller took it (the command line, before Ray and Spark start), else
    the lock is taken here, before Ray starts (another run's live lock: TableLocked), and
    released however the run ends."""
    resolved = prepared(job)
    if table_lock is not None or is_multi_writer(resolved.config):  # a multi-writer run holds none
        return _run_on_ray(resolved, out_dir, table_lock, kwargs)
    cfg = resolved.config
    with hold_for_run(cfg, command_line(), on_take_over=kwargs.get("on_phase")) as lock:
        return _run_on_ray(resolved, out_dir, lock, kwargs)


def _run_on_ray(
    job: ResolvedJob, out_dir: str | None, table_lock: TableLock | None, kwargs: dict[str, Any]
) -> JobResult:
    check_cluster_lost_after(job.config.cluster_lost_after_s)  # before Ray starts: exit 2
    if not ray.is_initialized() and kwargs.get("on_phase"):
        kwargs["on_phase"]("starting Ray")
    stop: StopRequest | None = kwargs.get("stop")
    try:
        with stop.start_up() if stop is not None else contextlib.nullcontext():
            ensure_ray()
    except KeyboardInterrupt as exc:  # stopped while Ray started: the run records that
        if stop is None or not stop.stopped_start_up(exc):
            raise
    return JobRun(job, out_dir, table_lock=table_lock, **kwargs).run()
