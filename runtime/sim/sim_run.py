"""One simulated job: the simulation host of :class:`~runtime.job.driver.JobDriver`.

:class:`SimRun` runs the job topology both hosts share (:mod:`runtime.job`: the roles, their start
order and arguments, the watchdog, the failover, the result record) with roles that are objects in
this process, each on its own :class:`~runtime.sim.sim_env.SimEnv`: a role is killed by cancelling
its tasks, and every wait is on virtual time. The role code is unchanged: only the
:class:`~runtime.core.env.Env` differs. :func:`runtime.sim.host.simulate` builds one and runs it
on a :class:`~runtime.sim.loop.SimLoop`; :mod:`runtime.sim.multi_job` runs several on one loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pyarrow as pa

from runtime.core import roles
from runtime.core.dfs import DfsCounters, OneThreadCounters, open_dfs
from runtime.core.env import WaitTimeout
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.trace import TraceEvent
from runtime.faults.injector import COORDINATOR_DFS_FAULTS, FaultInjector, coordinator_dfs_hook
from runtime.faults.points import ArmedFaultPoints
from runtime.flink.source import InMemoryShard
from runtime.hudi.client import write_client
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.job.driver import JobDriver, Outcome
from runtime.job.prepare import ResolvedJob
from runtime.job.record import job_result, trace_markers
from runtime.job.roles import RoleSpec, make_role, role_kind, start_role
from runtime.lab.results import JobResult, SimCounts, Timing
from runtime.lab.status import Status
from runtime.lab.verdicts import TableBefore
from runtime.lab.verify import read_snapshot, read_table_before
from runtime.sim.job_workload import expected_table, schema_json, stream_and_shards
from runtime.sim.loop import SimLoop, SimulationError
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.memory_dfs import read_snapshot as read_memory_snapshot
from runtime.sim.network import Delay, SimNetwork
from runtime.sim.recorder import TraceRecorder
from runtime.sim.sim_env import SimEnv

SOURCE_DONE_S = 5.0  # how long a finished job waits for its sources to push end-of-input


def root_cause(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:2000]


class RoleStartFailed(Exception):
    """A role's start raised: on Ray the call's error comes back as a ``RayTaskError`` and the job
    fails over (``actors/job.py``'s start errors); the simulated host does the same."""


class SimRun:
    """One simulated job: the simulation host of :class:`~runtime.job.driver.JobDriver`.
    Every role is an object in this process with its own :class:`SimEnv`; a role is killed by
    cancelling its tasks, and every wait is on virtual time."""

    # a role whose start failed (its own bounded wait gave up, as a lost bootstrap event's ask
    # does, or its code raised) fails the job, which fails over, as a failed start on Ray does;
    # the simulator's own errors (its guards, a stuck loop) end the run
    start_errors: tuple[type[BaseException], ...] = (WaitTimeout, RoleStartFailed)

    def __init__(
        self,
        job: ResolvedJob,
        *,
        seed: int,
        loop: SimLoop,
        recorder: TraceRecorder,
        delay: Delay,
        io_delay: Delay | None,
        chrome_trace: bool,
        max_virtual_s: float | None,
        store: MemoryStore | None = None,
    ) -> None:
        self.job = job
        self.cfg = cfg = job.config
        self.store = store
        self.seed = seed
        self.loop = loop
        self.recorder = recorder
        self.network = SimNetwork(loop, seed, recorder, delay, chooser=loop.chooser)
        self.io_delay = io_delay
        self.chrome_trace = chrome_trace
        self.max_virtual_s = max_virtual_s
        self.envs: dict[str, SimEnv] = {}
        self.earlier_trace: list[TraceEvent] = []  # events of roles a failover replaced
        self.views: dict[str, tuple[SimEnv, HudiTable, RoleSpec]] = {}
        self.roles: dict[str, Any] = {}
        self.source_tasks: dict[str, asyncio.Task[Any]] = {}
        self.jm_task: asyncio.Task[Any] | None = None
        self.outcome: Outcome | None = None
        self.props = TableProps.for_job(cfg)
        self.t_end = 0.0
        self.driver_counters = OneThreadCounters()
        self.expected: pa.Table | None = None
        self.before: pa.Table | None = None  # the table's snapshot before the run (None: it was empty)
        self.table_before: TableBefore | None = None
        self.stream: pa.Table | None = None
        self.prepare_s = 0.0
        self.shards: list[Any] = []
        self.driver: JobDriver | None = None
        self.sim_info = SimCounts(  # the loop's own figures, for the result, when it ran
            loop_iterations=0, clock_jumps=0, messages=0, delay="", io_delay=None, inline_executor_calls=0
        )
        self.wall_s = 0.0  # when the loop was closed (perf_counter)
        self.cut: Callable[[], bool] | None = None  # True: a search cut the run short (simulate's cut)

    # -- set-up --------------------------------------------------------------------------------

    def _env(self, name: str, kind: str, incarnation: int = 0) -> tuple[SimEnv, HudiTable]:
        """A role's env and table view, each role with its own DFS counters (its own process on
        Ray, so per-process singletons such as the message bus client stay per role)."""
        dfs, base = self._open_dfs(kind, OneThreadCounters())
        env = SimEnv(
            name,
            dfs,
            self.network,
            seed=self.seed,
            recorder=self.recorder,
            chrome_trace=self.chrome_trace,
            io_delay=self.io_delay,
            incarnation=incarnation,
        )
        if self.cfg.faults:
            # the fault points the roles reach fire here as on Ray (once per job, marker on the DFS)
            injector = FaultInjector(self.cfg.faults, name, dfs, base)
            env.faults = ArmedFaultPoints(injector, env, on_dropped=env.note_dropped)
            if kind == roles.COORDINATOR and {f.point for f in self.cfg.faults} & set(COORDINATOR_DFS_FAULTS):
                # a slow DFS operation costs virtual time, spent when the I/O call returns
                dfs.fault_hook = coordinator_dfs_hook(env.faults, env.defer_io_delay)
        self.envs[name] = env
        return env, HudiTable(dfs, base, self.props)

    def _open_dfs(self, role: str, counters: DfsCounters) -> tuple[Any, str]:
        if self.store is not None:
            return MemoryDfs(self.store, role=role, counters=counters), self.cfg.table
        return open_dfs(self.cfg.table, role=role, counters=counters)

    async def main(self) -> None:
        cfg = self.cfg
        t0 = time.perf_counter()
        self.stream, self.shards = self._workload()
        stream = self.stream
        dfs, base = self._open_dfs(roles.DRIVER, self.driver_counters)
        HudiTable.check_compatible(dfs, base, self.props)
        table = write_client.create_or_open(dfs, base, self.props)
        self._table_before_and_expected(base, stream)
        self.driver = JobDriver(self.job, table, schema_json=schema_json(stream.schema, cfg.table_name))
        self.driver.failover_clock = "at_virtual_s"
        self.prepare_s = time.perf_counter() - t0
        self.recorder.add("host", roles.DRIVER, "start", cfg.protocol, cfg.writers)
        self.outcome = await self.driver.run(self)
        self.t_end = self.loop.time()
        if self.outcome.status == Status.FINISHED:
            # let the sources push end-of-input so every mailbox loop ends cleanly (bounded)
            pending = [t for t in self.source_tasks.values() if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=SOURCE_DONE_S)
        self.recorder.add("host", roles.DRIVER, "end", self.outcome.status.value, self.outcome.error)

    def _workload(self) -> tuple[pa.Table, list[Any]]:
        """The job's stream and its shards (``[task][round-1]``)."""
        return stream_and_shards(self.cfg)

    def _table_before_and_expected(self, base: str, stream: pa.Table) -> None:
        """The table as the run finds it (an earlier run's commits), which the stream merges into,
        and the state the run should leave (listed apart from the driver's DFS counters:
        result.json's figures stay the run's own)."""
        cfg = self.cfg
        completed = HudiTable(self._open_dfs(roles.DRIVER, OneThreadCounters())[0], base, self.props).timeline()
        self.before, self.table_before = read_table_before(
            completed.completed_instants(),
            self.snapshot,
            cfg.key_field,
            cfg.partition_field,
        )
        self.expected = expected_table(cfg, stream, self.before)

    async def _bounded(self, aw: Any, what: str) -> Any:
        start_timeout = max(60.0, self.cfg.rpc_timeout_s)
        try:
            return await asyncio.wait_for(aw, start_timeout)
        except WaitTimeout:
            raise  # the role's own bound: a start error (start_errors)
        except asyncio.TimeoutError:
            raise SimulationError(f"{what} did not start within {start_timeout:.0f} virtual s") from None
        except SimulationError:
            raise
        except Exception as exc:  # the role's code raised while starting: what Ray reports as RayTaskError
            raise RoleStartFailed(f"{what}: {root_cause(exc)}") from exc

    # -- the host ------------------------------------------------------------------------------

    def now(self) -> float:
        return self.loop.time()

    def place(self, spec: RoleSpec, incarnation: int) -> None:
        """The role's env; every name is known to the network before anything starts, as every
        actor exists on Ray before the first start() call."""
        env, table = self._env(spec.name, spec.kind, incarnation)
        self.views[spec.name] = (env, table, spec)

    def _make(self, name: str, *, starting: bool = False) -> Any:
        env, table, spec = self.views[name]
        assert self.driver is not None
        takes_shard = role_kind(spec.kind).takes_shard
        shard = InMemoryShard(self.shards[spec.args.task_id]) if takes_shard else None
        role = make_role(spec, env, self.cfg, table, self.driver.names, shard)
        self.roles[name] = role
        self.network.bind(name, role, starting=starting)
        return role

    async def start(self, names: Sequence[str]) -> None:
        kind = role_kind(self.views[names[0]][2].kind if names else "")
        if kind.starts_together:  # the write tasks
            await self._bounded(self._start_writers(names, starting=False), "the write tasks")
        elif kind.spawns_loop:  # the sources
            for name in names:
                self.source_tasks[name] = self.envs[name].spawn(self._make(name).run(), f"{name}.run")
        else:  # the protocol's roles, the coordinator, the job manager, compaction: one at a time
            for name in names:
                role, spec = self._make(name), self.views[name][2]
                start = start_role(role, spec)
                if start is not None:
                    await self._bounded(start, name)

    def _start_writers(self, names: Sequence[str], *, starting: bool) -> Awaitable[Any]:
        """Builds the write tasks now; the returned awaitable starts them together."""
        tasks = [(name, self._make(name, starting=starting)) for name in names]

        async def start_one(name: str, task: Any) -> None:
            start = start_role(task, self.views[name][2])
            if start is not None:
                await start
            self.network.started(name)

        async def start_all() -> None:
            await asyncio.gather(*(start_one(n, t) for n, t in tasks))

        return start_all()

    def start_later(self, names: Sequence[str]) -> Awaitable[None]:
        # sources may feed a task while another has not bootstrapped yet (the HUDI-6194 window)
        starts = self.envs[roles.JOB_MANAGER].spawn(self._start_writers(names, starting=True), "the write tasks' start")
        return self._bounded(starts, "the write tasks")

    async def rebind(self, name: str) -> None:
        pass  # the simulated network reaches every role by name

    def run_job_manager(self) -> None:
        self.jm_task = self.envs[roles.JOB_MANAGER].spawn(self.roles[roles.JOB_MANAGER].run(), "job-manager.run")

    async def wait_job_manager(self, timeout: float) -> tuple[bool, str | None]:
        assert self.jm_task is not None
        done, _ = await asyncio.wait({self.jm_task}, timeout=timeout)
        if not done:
            return False, None
        exc = self.jm_task.exception()
        return True, None if exc is None else root_cause(exc)

    async def describe_job_manager(self) -> JobManagerView | None:
        role = self.roles.get(roles.JOB_MANAGER)
        return role.describe() if role is not None else None

    async def describe_coordinator(self) -> CoordinatorView | None:
        """The coordinator's view; one that crashed reports it as its error."""
        role, env = self.roles.get(roles.COORDINATOR), self.envs.get(roles.COORDINATOR)
        if role is None or env is None:
            return None
        view: CoordinatorView = role.describe()
        return dataclasses.replace(view, error=env.crashed) if env.crashed is not None else view

    async def dumps(self) -> dict[str, TaskDump]:
        return self._dumps()

    def _dumps(self) -> dict[str, TaskDump]:
        assert self.driver is not None
        out = {}
        for name in self.driver.task_names:
            role = self.roles.get(name)
            out[name] = role.dump() if role is not None else TaskDump(name, "not started")
        return out

    def dead(self, dumps: dict[str, TaskDump]) -> str | None:
        dead = [n for n, e in self.envs.items() if e.crashed is not None]
        return f"{dead[0]} died ({self.envs[dead[0]].crashed})" if dead else None

    def interrupted(self) -> str | None:
        return None  # a simulation runs to its end or its limits

    def past_limit(self) -> str | None:
        if self.max_virtual_s is not None and self.loop.time() >= self.max_virtual_s:
            return f"the simulation reached its virtual-time limit of {self.max_virtual_s}s"
        return None

    async def timed_out(self) -> str:
        return ""  # the trace says where every role waited

    def on_failover(self, error: str | None, restore: Any) -> None:
        self.recorder.add(
            "host", roles.DRIVER, "failover", error, restore.checkpoint_id if restore is not None else None
        )
        for probe in self.network.reply_probes:  # observers that count per failover epoch
            if hasattr(probe, "on_failover"):
                probe.on_failover()

    async def kill(self, names: Sequence[str]) -> list[MetricsSnapshot]:
        metrics = []
        for name in names:
            old = self.envs[name]
            metrics.append(self._metrics_of(old))
            self.earlier_trace += old.tracer.drain()  # the failed attempt stays in the picture
            self.network.kill(name)
            old.kill()
        self.source_tasks = {}
        # let the cancellations land before anything new starts (bounded: a task cannot refuse)
        await asyncio.sleep(0)
        return metrics

    async def call(self, name: str, method: str, msg: Any) -> Any:
        what = "the coordinator's reset" if method == "reset_tasks" else f"{name}.{method}"
        return await self._bounded(getattr(self.roles[name], method)(msg), what)

    async def progress(self) -> None:
        pass  # nobody watches a simulation while it runs

    # -- results -------------------------------------------------------------------------------

    def collect(self) -> JobResult:
        """The result record, from the roles in this process."""
        if self.driver is None:  # stopped before the job was set up
            dfs, base = self._open_dfs(roles.DRIVER, self.driver_counters)
            self.driver = JobDriver(self.job, HudiTable(dfs, base, self.props), schema_json="")
        self.recorder.close()
        outcome = self.outcome or Outcome(Status.FAILED, stalls=self.driver.stalls)
        coord = self.roles[roles.COORDINATOR].describe() if roles.COORDINATOR in self.roles else None
        jm = self.roles[roles.JOB_MANAGER].describe() if roles.JOB_MANAGER in self.roles else None
        dumps = self._dumps() if all(n in self.roles for n in self.driver.task_names) else {}
        t_started = self.driver.t_launched or 0.0
        run_s = max(0.0, self.t_end - t_started)
        timing = Timing(prepare_s=round(self.prepare_s, 3), setup_s=round(t_started, 6), run_s=round(run_s, 6))
        return job_result(
            self.driver,
            outcome,
            metrics=[self._metrics_of(env) for env in self.envs.values()],
            driver_dfs=self.driver_counters,
            coord=coord,
            jm=jm,
            dumps=dumps,
            commits_before=set(),
            table=self.cfg.table,
            timing=timing,
            run_s=run_s,
        )

    def reap(self) -> None:
        """Takes the outcome of every finished role task: a task that failed (a source whose
        writer failed) has been accounted for by the verdict, and must not be reported again
        when it is garbage-collected."""
        for env in self.envs.values():
            for task in env.tasks:
                if task.done() and not task.cancelled():
                    task.exception()

    def snapshot(self) -> pa.Table:
        """The table's snapshot: the project's reader on the simulated disk, the official one on disk."""
        if self.store is not None:
            return read_memory_snapshot(MemoryDfs(self.store, role="verifier"), self.cfg.table)
        return read_snapshot(self.cfg.table)

    @staticmethod
    def _metrics_of(env: SimEnv) -> MetricsSnapshot:
        return env.metrics.snapshot(env.dfs.counters, env.send_errors)

    def chrome_events(self) -> list[TraceEvent]:
        """Every role's events, those of earlier attempts included, and the driver's failovers."""
        markers = trace_markers(self.driver) if self.driver is not None else []
        return self.earlier_trace + [ev for env in self.envs.values() for ev in env.tracer.drain()] + markers
