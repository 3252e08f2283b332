"""Launches one job on Ray: the Ray host of the job topology (:mod:`runtime.job`).

The topology decides which roles run, in which order they start, how the job is supervised and
fails over, and what the result says; this module only places the roles as named actors, calls
them (every wait bounded), kills them, and at the end gathers counters and traces, verifies the
table with the official reader and writes ``result.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import ray

from actors import cluster_info
from actors.layout import ProcessLayout
from actors.placement import Placement
from actors.process_actor import Deployment, ProcessActor, RoleRef
from actors.ray_session import ensure_ray, local_ray_alive
from actors.stream_plan import StreamPlan, plan_stream
from runtime.core import codec
from runtime.core.codec import from_wire, to_wire
from runtime.core.config import JobConfig, flag_of
from runtime.core.dfs import DfsCounters, open_dfs
from runtime.core.env import bounded
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.roles import COORDINATOR, DRIVER, JOB_MANAGER
from runtime.core.storage import redact
from runtime.core.trace import TraceEvent, write_trace
from runtime.faults.markers import faults_path
from runtime.flink.state_backend import StateBackend
from runtime.hudi.client import write_client
from runtime.hudi.client.concurrency import hold_for_run, is_multi_writer
from runtime.hudi.client.lock import TableLock, command_line
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.job.driver import POLL_S, JobDriver, Outcome, root_cause
from runtime.job.prepare import ResolvedJob, prepared
from runtime.job.record import (
    completed_instants,
    job_result,
    trace_markers,
    unchanged_table,
    verify_committed_prefix,
)
from runtime.job.roles import JobRoles, RoleSpec, first_launch, role_kind
from runtime.job.stop import StopRequest
from runtime.lab.results import JobResult, RayRecord
from runtime.lab.run_output import draw_timeline, remove_result, write_result
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix
from runtime.lab.verify import merged_with_table, read_snapshot, read_table_before, verify_run

log = logging.getLogger(__name__)


# Flink declares a TaskManager lost after heartbeat.timeout without an answer (default 50 s,
# flink-runtime HeartbeatManagerOptions.HEARTBEAT_TIMEOUT); a task that only answers slowly (16
# writer processes on 2 cores) is busy, not dead. A process Ray saw die fails the job at once.
HEARTBEAT_TIMEOUT_S = 50.0
DUMP_TIMEOUT_S = 5.0
STOPPED = "interrupted (Ctrl-C, SIGTERM or SIGHUP): the job was stopped"
# the run ended between its first record and the check: a second signal, or the SIGKILL `ray job
# stop` sends RAY_JOB_STOP_WAIT_TIME_S after its SIGTERM
PREFIX_UNCHECKED = (
    "not checked: the run ended during the check (a second signal, or ray job stop's SIGKILL); "
    "commitlab verify --result OUT/result.json checks it"
)


class JobRun:
    """One run of a job on Ray; ``run()`` returns the result record. It is the Ray host of
    :class:`~runtime.job.driver.JobDriver`: roles are named actors, placed by the job's
    placement group, their calls awaited (bounded) and killed with ``ray.kill``."""

    start_errors: tuple[type[BaseException], ...] = (
        ray.exceptions.RayTaskError,
        ray.exceptions.RayActorError,
        ray.exceptions.GetTimeoutError,
    )

    def __init__(
        self,
        job: ResolvedJob,
        out_dir: str | None = None,
        *,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        on_phase: Callable[[str], None] | None = None,
        trace_path: str | None = None,
        timeline: bool = True,
        stop: StopRequest | None = None,
        table_lock: TableLock | None = None,
    ) -> None:
        self.job = job
        self.cfg = job.config
        self.out_dir = out_dir
        self.on_progress = on_progress
        self.on_phase = on_phase or (lambda _what: None)  # start-up and wind-down, phase by phase
        self._running = False
        self.trace_path = trace_path
        self.timeline = timeline  # timeline.png in out_dir (it needs every role's trace events)
        self.stop = stop  # set by a signal (Ctrl-C, SIGTERM, SIGHUP): the job stops, its record is still written
        self.table_lock = table_lock  # this run's hold on the table (runtime.hudi.client.lock)
        self.namespace = f"commitlab-{uuid.uuid4().hex[:8]}"
        self.processes: dict[str, Any] = {}  # process name -> its actor
        self._ready: dict[str, Any] = {}  # process name -> its answer to ready(), once it is up
        self.refs: dict[str, RoleRef] = {}  # role -> where it lives
        self.layout: ProcessLayout | None = None
        self.placement: Placement | None = None
        self.stacks_at_timeout: dict[str, Any] = {}  # filled when the job times out
        self.trace_events: list[TraceEvent] = []
        self._last_progress = 0.0
        self._silent_since: dict[str, float] = {}  # task -> when it first did not answer a dump
        self.last_jm: JobManagerView | None = None  # the job manager's last answer (the progress bar's)
        self.final_jm: JobManagerView | None = None  # its answer to the cancellation of a stopped job
        self.launched = False  # the driver started launching roles
        self.plan: StreamPlan | None = None  # the stream, once planned
        self.before: Any = None  # the table's rows as the run found it (pa.Table), once read
        self.table_before: Any = None

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
        t0, counters, endpoint_before, ready_at_run = self.t0, self.counters, self.endpoint_before, self.ready_at_run
        cfg, layout = self.cfg, self.layout or ProcessLayout.for_job(self.cfg.writers, 1, 1.0, 0)
        t_started = time.time()
        outcome = self._drive(ready_at_run)
        t_end = time.time()
        if outcome.status == Status.FINISHED:
            # let the sources push end-of-input so every mailbox loop ends cleanly
            ray.get([self.refs[n].actor.source_done.remote(n, 5.0) for n in self.driver.source_names], timeout=30)
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
        record.ray = RayRecord(placement, endpoint, self.trace_path, self.stacks_at_timeout or None)
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
        try:
            outcome = asyncio.run(self._until_ray_ends(self.driver.run(self)))
        except Exception as exc:  # noqa: BLE001 - recorded: the run's record is still written
            log.exception("the job driver failed")
            outcome = Outcome(Status.FAILED, f"internal error of the job driver: {type(exc).__name__}: {exc}")
        if outcome.status == Status.INTERRUPTED:
            self._cancel(outcome.error or STOPPED)
        return outcome

    async def _until_ray_ends(self, job: Awaitable[Outcome]) -> Outcome:
        """The job, unless a stop ended Ray itself (a group-wide SIGTERM or SIGHUP): then no call
        of the driver's can be answered, and it stops waiting for them (a role's start waits a
        minute, and Ray ends the driver a minute after its GCS went)."""
        task = asyncio.ensure_future(job)
        while not task.done():
            await asyncio.wait({task}, timeout=POLL_S)
            if self.stop is not None and self.stop.is_set() and not self._ray_up():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return Outcome(Status.INTERRUPTED, f"{STOPPED}; Ray's processes were ended by the same signal")
        return task.result()

    def _cancel(self, reason: str) -> None:
        """Flink's cancel: the job manager stops checkpointing (:meth:`JobManager.cancel
        <runtime.flink.job_manager.JobManager.cancel>`); its answer is the final view of the
        checkpoints, so no checkpoint completes (nor commits) after the record's view of them.
        A job manager that does not answer (its process or Ray itself ended by the same signal)
        leaves the record to what the driver holds and what the table says."""
        if JOB_MANAGER not in self.refs or not self._ray_up():
            return
        bound = self.cfg.checkpoint_timeout_s + 5
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

    def _start_processes(self) -> None:
        """Starts the job's processes (its task managers, the job manager's and coordinator's, a
        protocol's own) before the stream is prepared, so that they come up while Spark works: a
        process needs a second or more of CPU to start (the interpreter, Ray's worker, the imports)
        and nothing of the stream. Flink's task managers, too, are running when a job's tasks are
        deployed into their slots; here the roles are deployed by ``place`` once the job is planned.
        """
        cfg = self.cfg
        layout = ProcessLayout.for_job(
            cfg.writers,
            cfg.slots_per_task_manager,
            ray.cluster_resources().get("CPU", 1.0),
            cfg.compaction_parallelism if cfg.compacts else 0,
        )
        self.layout = layout
        self.placement = Placement(cfg.placement, layout.task_managers)
        processes = sorted({layout.process_of(n) for n in first_launch(JobRoles.of(cfg, schema_json=""))})
        self.on_phase(
            f"starting the job's {len(processes)} processes ({layout.task_managers} task manager(s) of "
            f"{layout.slots} slot(s)) while the stream is prepared"
        )
        for process in processes:
            self._process(process)

    def _process(self, process: str) -> Any:
        """The actor of ``process``, started in its bundle of the placement group when it is not running."""
        assert self.layout is not None
        actor = self.processes.get(process)
        if actor is None:
            opts = self.placement.options(self.layout.bundle_of(process)) if self.placement else {}
            # ray.remote gives the actor class options() and remote(), which mypy cannot see
            actor_class: Any = ProcessActor
            actor = actor_class.options(name=process, namespace=self.namespace, **opts).remote(process)
            self.processes[process] = actor
            self._ready[process] = actor.ready.remote()
        return actor

    def _processes_ready(self) -> int:
        """How many of the processes started so far have come up (answered); waits for none."""
        refs = list(self._ready.values())
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return len(ready)

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
            self._start_processes()  # they come up while the stream is planned
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

    # -- the host --------------------------------------------------------------------------------

    def now(self) -> float:
        return time.time()

    def place(self, spec: RoleSpec, incarnation: int) -> None:
        """The role into its process (a task into its task manager's slot); the process is
        started first when it is not running, in its bundle of the placement group."""
        assert self.layout is not None
        actor = self._process(self.layout.process_of(spec.name))
        assert self.plan is not None  # roles are placed once the stream is planned
        shard = self.plan.shards[spec.args.task_id] if role_kind(spec.kind).takes_shard else None
        faults = codec.encode(self.cfg.faults) if self.cfg.faults else b""
        actor.deploy.remote(
            codec.encode(spec), codec.encode(self.cfg), self.props, Deployment(self._tracing, faults, shard)
        )
        self.refs[spec.name] = RoleRef(actor, spec.name)

    def _start_refs(self, names: Sequence[str]) -> list[Any]:
        handles, d = dict(self.refs), self.driver
        return [self.refs[n].actor.start.remote(n, handles, d.task_names, d.source_names) for n in names]

    async def _started(self, refs: list[Any], what: str) -> None:
        timeout = max(60.0, self.cfg.rpc_timeout_s)
        await awaited(refs, timeout, what, f"{flag_of('rpc_timeout_s')} above 60 s raises it")

    async def start(self, names: Sequence[str]) -> None:
        await self._started(self._start_refs(names), f"the start of {', '.join(names)}")

    def start_later(self, names: Sequence[str]) -> Awaitable[None]:
        refs = self._start_refs(names)  # deployed now, awaited later
        return self._started(refs, f"the start of {', '.join(names)}")

    async def rebind(self, name: str) -> None:
        await self._started([self.refs[name].actor.rebind.remote(name, dict(self.refs))], f"the rebinding of {name}")

    def run_job_manager(self) -> None:
        self.jm_ref = self.refs[JOB_MANAGER].actor.run.remote(JOB_MANAGER)
        self.jm_run: asyncio.Future[Any] = asyncio.wrap_future(self.jm_ref.future())
        # taken even when no one waits for it any more (a stop that ended Ray): no "never retrieved" at exit
        self.jm_run.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def wait_job_manager(self, timeout: float) -> tuple[bool, str | None]:
        done, _ = await asyncio.wait({self.jm_run}, timeout=timeout)
        if not done:
            return False, None
        try:
            self.jm_run.result()
            return True, None
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
            return True, root_cause(exc)

    async def describe_job_manager(self) -> JobManagerView | None:
        described = await self._describe(JOB_MANAGER)
        if isinstance(described, JobManagerView):
            self.last_jm = described
            return described
        return None

    async def describe_coordinator(self) -> CoordinatorView | None:
        described = await self._describe(COORDINATOR)
        return described if isinstance(described, CoordinatorView) else None

    async def _describe(self, name: str) -> Any:
        """The role's description; None when it is gone or does not answer."""
        try:
            return from_wire(await awaited(self.refs[name].actor.describe.remote(name), 5, f"{name}.describe"))
        except (KeyError, ray.exceptions.RayError) as exc:
            log.info("%s did not describe itself: %s", name, type(exc).__name__)
            return None

    async def dumps(self) -> dict[str, TaskDump]:
        refs = {n: self.refs[n].actor.dump.remote(n) for n in self.driver.task_names}
        out = {}
        for name, ref in refs.items():
            try:
                out[name] = from_wire(await awaited(ref, DUMP_TIMEOUT_S, f"{name}.dump"))
                self._silent_since.pop(name, None)
            except ray.exceptions.RayActorError as exc:
                out[name] = TaskDump(name, f"unreachable: {type(exc).__name__}")
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref)
                silent = time.monotonic() - self._silent_since.setdefault(name, time.monotonic()) + DUMP_TIMEOUT_S
                state = f"not answering for {silent:.0f} s"
                if silent >= HEARTBEAT_TIMEOUT_S:
                    state = f"unreachable: no answer for {silent:.0f} s (heartbeat timeout)"
                out[name] = TaskDump(name, state)
        return out

    def dead(self, dumps: dict[str, TaskDump]) -> str | None:
        dead = sorted(n for n, d in dumps.items() if d.unreachable)
        return f"{', '.join(dead)} died ({dumps[dead[0]].state})" if dead else None

    def past_limit(self) -> str | None:
        return None  # the job timeout is the only limit

    def interrupted(self) -> str | None:
        if self.table_lock is not None and self.table_lock.lost.is_set():
            return self.table_lock.lost_reason()
        if self.stop is not None and self.stop.is_set():
            return f"{STOPPED}; what it committed stays on the table"
        return None

    async def timed_out(self) -> str:
        """Where the job manager and the coordinator wait, for the result."""
        jm = await self.describe_job_manager()
        waiting = (jm.waiting_for if jm is not None else "") or "?"
        self.stacks_at_timeout = await self._stacks((JOB_MANAGER, COORDINATOR))
        return f"the job manager was waiting for {waiting}; "

    def on_failover(self, error: str | None, restore: Any) -> None:
        pass  # nothing to record on Ray beyond the failover record

    async def kill(self, names: Sequence[str]) -> list[MetricsSnapshot]:
        """Kills the processes of the roles (a task manager with every task it hosts); the roles'
        counters and trace events, when their process still answers."""
        assert self.layout is not None
        metrics = []
        processes = sorted({self.layout.process_of(n) for n in names})
        for process in processes:
            left = set(self.layout.roles_of(process)) - set(names)
            if left:
                raise RuntimeError(f"{process} would be killed with roles it hosts that do not restart: {sorted(left)}")
        for name in names:
            ref = self.refs.pop(name)
            self._silent_since.pop(name, None)
            try:
                metrics.append(await awaited(ref.actor.metrics.remote(name), 5, f"{name}.metrics"))
                if self._tracing:  # the failed attempt stays in the picture
                    self.trace_events += await awaited(ref.actor.trace_events.remote(name), 10, f"{name}.trace_events")
            except ray.exceptions.RayError as exc:  # a dead process's counters and events are lost with it
                log.info("the counters of %s are lost: %s", name, type(exc).__name__)
        for process in processes:
            ray.kill(self.processes.pop(process), no_restart=True)
        await self._wait_names_free(processes)
        return metrics

    async def call(self, name: str, method: str, msg: Any) -> Any:
        reply = self.refs[name].deliver(method, to_wire(msg), DRIVER)
        timeout = max(30.0, self.cfg.rpc_timeout_s)
        return from_wire(
            await awaited(reply, timeout, f"{name}.{method}", f"{flag_of('rpc_timeout_s')} above 30 s raises it")
        )

    async def progress(self) -> None:
        if not self._running:
            self._running = True
            self.on_phase(f"running {self.cfg.checkpoints} checkpoints")
        if self.on_progress is None or time.time() - self._last_progress <= 0.5:
            return
        self._last_progress = time.time()
        jm = await self.describe_job_manager()
        if jm is None:
            self.on_progress({})
            return
        done = sum(1 for c in jm.checkpoints.values() if c.status == "completed")
        self.on_progress({"checkpoint": jm.current, "completed": done, "total": self.cfg.checkpoints})

    async def _wait_names_free(self, names: list[str], timeout: float = 30.0) -> None:
        """Killed named actors release their names asynchronously; wait (bounded) before reuse."""
        end = time.time() + timeout
        for name in names:
            while time.time() < end:
                try:
                    ray.get_actor(name, namespace=self.namespace)
                except ValueError:
                    break
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError(f"the killed actor {name!r} still holds its name after {timeout}s")

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
        jm_final = outcome.status != Status.INTERRUPTED or self.final_jm is not None or not self.launched
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

    def _ray_up(self) -> bool:
        return local_ray_alive()

    @property
    def _tracing(self) -> bool:
        return bool(self.trace_path or (self.out_dir and self.timeline))

    def _gather_traces(self) -> None:
        if not self._tracing:
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

    async def _stacks(self, names: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            try:
                out[name] = await awaited(self.refs[name].actor.stacks.remote(), 10, f"{name}.stacks")
            except (KeyError, ray.exceptions.RayError) as exc:
                out[name] = {"error": f"{name} unreachable: {type(exc).__name__}"}
        return out

    def _shutdown(self) -> None:
        """Kills the job's processes and removes its placement group; when Ray itself was ended
        (its processes, and so the actors, are gone) there is nothing to ask it."""
        if self._ray_up():
            for actor in self.processes.values():
                ray.kill(actor, no_restart=True)
            if self.placement is not None:
                self.placement.remove()
        self.placement = None
        self.processes.clear()
        self._ready.clear()
        self.refs.clear()


async def awaited(refs: Any, timeout: float, what: str, option: str = "") -> Any:
    """``refs`` (an object ref or a list of them) awaited for at most ``timeout`` s, without
    blocking the driver's event loop; past it, Ray's GetTimeoutError naming what was awaited and
    the option that changes the bound (``option``; none: a fixed bound of this host)."""
    try:
        if not isinstance(refs, list):
            return await bounded(refs, timeout)
        # every ref's outcome is taken (a dead actor's error is not left unretrieved), then the
        # first error is raised, as ray.get of a list does
        outcomes = await bounded(asyncio.gather(*refs, return_exceptions=True), timeout)
        failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
        if failed is not None:
            raise failed
        return outcomes
    except asyncio.TimeoutError:
        bound = option or "a fixed bound of the Ray host"
        raise ray.exceptions.GetTimeoutError(f"{what} did not answer within {timeout:.0f} s ({bound})") from None


def _reader_uri(table: str) -> str:
    return table if "://" in table else os.path.abspath(table)


@ray.remote(num_cpus=0)
class _Echo:
    async def ping(self) -> int:
        return 0


def measure_rpc_round_trip(n: int = 200) -> dict[str, float]:
    """One actor call's round trip on this cluster (async actor, awaited one at a time): the
    floor any coordination protocol on Ray pays."""
    import numpy as np

    ensure_ray()
    echo_class: Any = _Echo  # a Ray actor class: ray.remote gave it remote()
    echo = echo_class.remote()
    ray.get(echo.ping.remote(), timeout=60)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        ray.get(echo.ping.remote(), timeout=10)
        samples.append(time.perf_counter() - t)
    ray.kill(echo)
    a = np.asarray(samples)
    return {
        "p50_s": round(float(np.percentile(a, 50)), 6),
        "p99_s": round(float(np.percentile(a, 99)), 6),
        "samples": n,
    }


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
