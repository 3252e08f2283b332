"""The Ray host of the job driver's port (:class:`~runtime.job.driver.JobHost`): each role a named
actor in one of the job's processes (a task manager's slot, the job manager's and the
coordinator's own), placed by the job's placement group, started, called, described, probed and
killed with ``ray.kill``; every wait bounded (:func:`awaited`).

Task liveness follows Flink's heartbeat (flink-runtime ``HeartbeatManagerOptions.HEARTBEAT_TIMEOUT``,
``heartbeat.timeout``, default 50 s; ``JobMaster``'s ``TaskManagerHeartbeatListener``): a process Ray
saw die fails the job at once; a task that does not answer a probe is busy, not dead, until the
heartbeat timeout passes without an answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import ray
from ray.actor import ActorHandle

from actors.layout import ProcessLayout
from actors.placement import Placement
from actors.process_actor import Deployment, ProcessActor, RoleRef
from actors.ray_session import local_ray_alive
from actors.stream_plan import StreamPlan
from runtime.core import codec
from runtime.core.codec import from_wire, to_wire
from runtime.core.config import JobConfig, flag_of
from runtime.core.env import bounded
from runtime.core.json_doc import JsonObject
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.roles import COORDINATOR, DRIVER, JOB_MANAGER
from runtime.core.trace import TraceEvent
from runtime.hudi.client.lock import TableLock
from runtime.hudi.table.table_config import TableProps
from runtime.job.driver import JobDriver, root_cause
from runtime.job.roles import JobRoles, RoleSpec, first_launch, role_kind
from runtime.job.stop import StopRequest
from runtime.lab.report import ProgressCallback
from runtime.lab.results import ClusterLost

log = logging.getLogger(__name__)


# Flink declares a TaskManager lost after heartbeat.timeout without an answer (default 50 s,
# flink-runtime HeartbeatManagerOptions.HEARTBEAT_TIMEOUT); a task that only answers slowly (16
# writer processes on 2 cores) is busy, not dead. A process Ray saw die fails the job at once.
HEARTBEAT_TIMEOUT_S = 50.0
DUMP_TIMEOUT_S = 5.0
STOPPED = "interrupted (Ctrl-C, SIGTERM or SIGHUP): the job was stopped"


class RayHost:
    """The job's processes and roles on Ray, as the job driver asks for them: the
    :class:`~runtime.job.driver.JobHost` of a run (:class:`~actors.job.JobRun`), which sets its
    ``driver``, ``plan`` and ``props`` once the table is open and the stream planned."""

    start_errors: tuple[type[BaseException], ...] = (
        ray.exceptions.RayTaskError,
        ray.exceptions.RayActorError,
        ray.exceptions.GetTimeoutError,
    )

    driver: JobDriver  # the job's driver, once the table is open
    props: TableProps  # the table's properties the roles are deployed with

    def __init__(
        self,
        cfg: JobConfig,
        *,
        on_progress: ProgressCallback | None,
        on_phase: Callable[[str], None] | None,
        tracing: bool,
        stop: StopRequest | None,
        table_lock: TableLock | None,
    ) -> None:
        self.cfg = cfg
        self.on_progress = on_progress
        self.on_phase = on_phase or (lambda _what: None)  # start-up and wind-down, phase by phase
        self._running = False
        self.tracing = tracing  # the roles record trace events (a trace file, the timeline picture)
        self.stop = stop  # set by a signal (Ctrl-C, SIGTERM, SIGHUP): the job stops, its record is still written
        self.table_lock = table_lock  # this run's hold on the table (runtime.hudi.client.lock)
        self.namespace = f"commitlab-{uuid.uuid4().hex[:8]}"
        self.processes: dict[str, ActorHandle[Any]] = {}  # process name -> its actor
        self._ready: dict[str, ray.ObjectRef[str]] = {}  # process name -> its answer to ready(), once it is up
        self.refs: dict[str, RoleRef] = {}  # role -> where it lives
        self.layout: ProcessLayout | None = None
        self.placement: Placement | None = None
        self.stacks_at_timeout: JsonObject = {}  # filled when the job times out: role -> its stacks
        self.trace_events: list[TraceEvent] = []
        self._last_progress = 0.0
        self._silent_since: dict[str, float] = {}  # task -> when it first did not answer a dump
        self.last_jm: JobManagerView | None = None  # the job manager's last answer (the progress bar's)
        self.plan: StreamPlan | None = None  # the stream, once planned
        self.cluster_lost: ClusterLost | None = None  # the driver lost the Ray cluster: nothing of Ray is asked

    # -- the job's processes ---------------------------------------------------------------------

    def start_processes(self) -> None:
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

    def _ray_up(self) -> bool:
        return self.cluster_lost is None and local_ray_alive()

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
            codec.encode(spec), codec.encode(self.cfg), self.props, Deployment(self.tracing, faults, shard)
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
                if self.tracing:  # the failed attempt stays in the picture
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

    async def _stacks(self, names: tuple[str, ...]) -> JsonObject:
        out: JsonObject = {}
        for name in names:
            try:
                out[name] = await awaited(self.refs[name].actor.stacks.remote(), 10, f"{name}.stacks")
            except (KeyError, ray.exceptions.RayError) as exc:
                out[name] = {"error": f"{name} unreachable: {type(exc).__name__}"}
        return out


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
