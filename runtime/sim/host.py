"""The simulation host: the Ray host's job, in one process, on virtual time, from a seed.

:func:`simulate` runs the job topology both hosts share (:mod:`runtime.job`: the
roles, their start order and arguments, the watchdog, the failover, the result record) with
roles that are objects in this process, each on its own :class:`~runtime.sim.sim_env.SimEnv`.
The role code is unchanged: only the :class:`~runtime.core.env.Env` differs.

Same config and seed, same trace, byte for byte; :func:`check_determinism` checks it by running
twice, stopping the second run at the first event that differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pyarrow as pa

from runtime.core import roles
from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import DfsCounters, OneThreadCounters, open_dfs
from runtime.core.env import WaitTimeout
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.trace import TraceEvent
from runtime.data import generator
from runtime.faults.injector import COORDINATOR_DFS_FAULTS, FaultInjector, coordinator_dfs_hook
from runtime.faults.points import ArmedFaultPoints
from runtime.flink.source import InMemoryShard
from runtime.hudi.client import write_client
from runtime.hudi.client.concurrency import hold_for_run
from runtime.hudi.client.lock import command_line
from runtime.hudi.table.base_files import avro_schema_json
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.hudi.timeline.instant import HOODIE
from runtime.job.driver import JobDriver, Outcome
from runtime.job.prepare import ResolvedJob, prepare_job
from runtime.job.record import job_result, trace_markers, verify_committed_prefix
from runtime.job.roles import RoleSpec, make_role, role_kind, start_role
from runtime.lab.results import Divergence, JobResult, SimCounts, SimulationRecord, Timing
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix, ExactlyOnce, TableBefore
from runtime.lab.verify import expected_state, read_snapshot, read_table_before, verify_run
from runtime.sim.chooser import Chooser, RandomChooser
from runtime.sim.loop import SimLoop, SimulationAborted, SimulationError
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.memory_dfs import read_snapshot as read_memory_snapshot
from runtime.sim.network import DEFAULT_DELAY, Delay, SimNetwork
from runtime.sim.recorder import Event, TraceRecorder, first_divergence, trace_sha256
from runtime.sim.sim_env import SimEnv

SOURCE_DONE_S = 5.0  # how long a finished job waits for its sources to push end-of-input
STORAGES = ("disk", "memory")  # disk: real parquet, the official reader verifies; memory: the simulated disk
MEMORY_TABLE = "/commitlab-sim/table"  # the table's path on the simulated disk (same in every run)
HARD_LIMIT_MARGIN_S = 60.0  # the loop's own virtual-time bound, past the watchdog's
DEFAULT_MAX_REAL_S = 600.0  # real-time guard of one run
CLEANUP_REAL_S = 30.0  # real-time guard of cancelling what still runs after the verdict


def _root_cause(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:2000]


class RunCut(Exception):
    """A run a search cut short (``simulate``'s ``cut``): it has no verdict, and no result is
    collected; ``events``: its trace's length."""

    def __init__(self, events: int) -> None:
        super().__init__(f"cut short after {events} trace events")
        self.events = events


class RoleStartFailed(Exception):
    """A role's start raised: on Ray the call's error comes back as a ``RayTaskError`` and the job
    fails over (``actors/job.py``'s start errors); the simulated host does the same."""


class _SimRun:
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
        self.driver = JobDriver(self.job, table, schema_json=_schema_json(stream.schema, cfg.table_name))
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
        return _stream_and_shards(self.cfg)

    def _table_before_and_expected(self, base: str, stream: pa.Table) -> None:
        """The table as the run finds it (an earlier run's commits), which the stream merges into,
        and the state the run should leave (listed apart from the driver's DFS counters:
        result.json's figures stay the run's own)."""
        cfg = self.cfg
        completed = HudiTable(self._open_dfs(roles.DRIVER, OneThreadCounters())[0], base, self.props).timeline()
        self.before, self.table_before = read_table_before(
            completed.completed_instants(),
            lambda: _snapshot(self, self.store),
            cfg.key_field,
            cfg.partition_field,
        )
        self.expected = _expected(cfg, stream, self.before)

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
            raise RoleStartFailed(f"{what}: {_root_cause(exc)}") from exc

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
        return True, None if exc is None else _root_cause(exc)

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

    @staticmethod
    def _metrics_of(env: SimEnv) -> MetricsSnapshot:
        return env.metrics.snapshot(env.dfs.counters, env.send_errors)

    def chrome_events(self) -> list[TraceEvent]:
        """Every role's events, those of earlier attempts included, and the driver's failovers."""
        markers = trace_markers(self.driver) if self.driver is not None else []
        return self.earlier_trace + [ev for env in self.envs.values() for ev in env.tracer.drain()] + markers


def _shutdown(loop: SimLoop) -> None:
    """Cancels what still runs (a deadlocked task, agents that poll forever) and closes the loop."""
    loop.disarm_guards()
    loop.arm_real_time_guard(CLEANUP_REAL_S)  # a task that ignores cancellation cannot hang us
    try:
        tasks = sorted(loop.pending_tasks(), key=lambda t: t.get_name())
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=SOURCE_DONE_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except SimulationError:
        pass  # what is left is dropped with the loop
    finally:
        loop.close()


def _data_entries(table: str) -> list[str]:
    return [e for e in os.listdir(table) if not e.startswith(".")] if os.path.isdir(table) else []


def prepare_config(
    job: JobConfig | ResolvedJob, workdir: str | None, storage: str = "disk", existing_table: bool = False
) -> ResolvedJob:
    """The job a simulation runs: the generator source, the table under ``workdir`` (on the
    simulated disk: at a fixed path, so traces never name a directory); a plain config is
    checked here (:func:`~runtime.job.prepare.prepare_job`: the table is always a new one)."""
    _check_simulatable(job.config if isinstance(job, ResolvedJob) else job, storage)
    if storage == "memory":
        return _placed(job, MEMORY_TABLE)
    if workdir is None:
        raise ConfigError(
            "a simulation on disk writes its table under a workdir: pass workdir (or use storage='memory')"
        )
    table = os.path.join(os.path.abspath(workdir), "table")
    resolved = _placed(job, table)
    if not existing_table and (
        os.path.isfile(os.path.join(table, HOODIE, "hoodie.properties")) or _data_entries(table)
    ):
        raise ConfigError(
            f"{table} already holds a table: a simulation writes a fresh one (same seed, "
            "same files); remove it or use another workdir"
        )
    return resolved


def _check_simulatable(cfg: JobConfig, storage: str) -> None:
    if cfg.input_path:
        raise ConfigError("the simulator runs the built-in generator; --input needs the Ray host")
    if cfg.control_topic != "model":
        raise ConfigError(
            f"--control-topic {cfg.control_topic}: the simulator runs the control topic's model only (a broker "
            "is real time, not the seed's); use commitlab run or compare for a broker"
        )
    if storage not in STORAGES:
        raise ConfigError(f"unknown storage {storage!r}; choose one of {', '.join(STORAGES)}")
    if storage == "memory" and cfg.table_type != "copy-on-write":
        # the simulated disk's own snapshot reader reads base files; log files need the official one
        raise ConfigError(
            f"--table-type {cfg.table_type} runs on the real disk only (--storage disk): the simulated "
            "disk's snapshot reader reads base files, not log files"
        )


def _placed(job: JobConfig | ResolvedJob, table: str) -> ResolvedJob:
    """``job`` on the generator source, writing a new table at ``table``; a plain config is
    prepared now, a prepared job keeps its checks (neither the source nor the table path
    changes what they found)."""
    if isinstance(job, ResolvedJob):
        return ResolvedJob(job.config.replace(source="generator", table=table))
    return prepare_job(job.replace(source="generator", table=table), fresh_table=True)


# The last job's stream, shards and expected table (when the table started empty): a search or an
# exploration runs one job under many seeds and schedules, and these depend on the job alone.
# Arrow tables are immutable and nothing changes the shards' lists, so runs share them.
_WORKLOAD: dict[tuple[object, ...], tuple[pa.Table, list[list[pa.Table]]]] = {}
_EXPECTED: dict[tuple[object, ...], pa.Table] = {}


def _stream_and_shards(cfg: JobConfig) -> tuple[pa.Table, list[list[pa.Table]]]:
    key = generator.workload_key(cfg)
    found = _WORKLOAD.get(key)
    if found is None:
        _WORKLOAD.clear()
        stream = generator.generate(cfg)
        found = _WORKLOAD[key] = (stream, generator.shards_by_round(cfg, stream))
    return found


def _expected(cfg: JobConfig, stream: pa.Table, before: pa.Table | None) -> pa.Table:
    """What the table should hold after the run: the stream's latest record of each identity,
    merged into what the table held before."""
    key = (generator.workload_key(cfg), cfg.key_field, cfg.precombine_field, cfg.partition_field)
    if before is None and key in _EXPECTED:
        return _EXPECTED[key]
    state = expected_state(stream, cfg.key_field, cfg.precombine_field, cfg.partition_field, before)
    expected = state.select([generator.KEY_FIELD, generator.PARTITION_FIELD, generator.PRECOMBINE_FIELD, "payload"])
    if before is None:
        _EXPECTED.clear()
        _EXPECTED[key] = expected
    return expected


# The stream's Avro schema text by (schema, table name): a search's runs share their stream's. A
# schema is immutable, hashed and compared by value, and the text is a function of the two.
_SCHEMA_JSON: dict[tuple[pa.Schema, str], str] = {}


def _schema_json(schema: pa.Schema, table_name: str) -> str:
    found = _SCHEMA_JSON.get((schema, table_name))
    if found is None:
        _SCHEMA_JSON.clear()
        found = _SCHEMA_JSON[(schema, table_name)] = avro_schema_json(schema, table_name)
    return found


_frozen = False  # whether this process froze what was alive at its first simulated run


def _freeze_the_interpreter() -> None:
    """Before a process's first simulated run: what is alive then (the modules, their classes and
    functions, pyarrow's and numpy's: some 75 thousand objects) is moved out of the garbage
    collector's sight (``gc.freeze``). It lives as long as the process, and every full collection
    walked all of it (about 20 ms, near every run of the speed benchmark's workload). Once: later
    runs' objects stay collectable. The flag, not ``gc.get_freeze_count()``, says it was done: that
    count walks every frozen object (about 1.5 ms, paid by every run of a bounded search)."""
    global _frozen
    if not _frozen:
        _frozen = True
        if not gc.get_freeze_count():
            gc.freeze()


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
    CPU); ``check_prefix=False``: no commit-by-commit check of an unfinished run (:data:`PREFIX_NOT_CHECKED`,
    7 %); ``cut() -> True`` after the loop: the search cut the run short, it raises :class:`RunCut` (10 %).
    """
    wall0 = time.perf_counter()
    _freeze_the_interpreter()
    resolved = prepare_config(job, workdir, storage, existing_table)
    store = store or MemoryStore() if storage == "memory" else store
    with _held(resolved, store):
        run = _new_run(
            resolved, seed, store, max_virtual_s, max_real_s, delay, io_delay, chrome_trace_path, expect_trace, chooser
        )
        run.network.reply_probes.extend(reply_probes or [])
        run.cut = cut
        record = _run_loop(run, run.loop, chrome_trace_path)
        record.table_before = run.table_before
        record.exactly_once, verify_s = _verify(run, store, verify and record.status == Status.FINISHED)
        if verify and run.driver is not None:
            _check_committed_prefix(run, record, store, check_prefix)
    keep_trace = trace or expect_trace is not None
    record.simulation = _simulation_record(run, storage, seed, wall0, verify_s, keep_trace, hash_trace)
    return record


def _check_committed_prefix(run: _SimRun, record: JobResult, store: MemoryStore | None, check_prefix: bool) -> None:
    """``record.committed_prefix``: the run's committed prefix checked (a run that did not finish)
    or, with ``check_prefix=False`` and a run that did not finish, a record that it was not."""
    assert run.driver is not None
    if not check_prefix and record.status != Status.FINISHED:
        record.committed_prefix = CommittedPrefix(verified=None, prefix=PREFIX_NOT_CHECKED)
    else:
        record.committed_prefix = verify_committed_prefix(
            run.driver, record, run.stream, lambda: _snapshot(run, store), before=run.before
        )


PREFIX_NOT_CHECKED = "not checked: a bounded search's run, judged by its status, commits and trace"
TRACE_NOT_HASHED = ""  # a record's trace_sha256 when its run was asked not to hash (a check's runs)


def _simulation_record(
    run: _SimRun, storage: str, seed: int, wall0: float, verify_s: float, keep_trace: bool, hash_trace: bool
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


def sim_counts(loop: SimLoop, runs: Sequence[_SimRun]) -> SimCounts:
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


def _held(job: ResolvedJob, store: MemoryStore | None) -> contextlib.AbstractContextManager[Any]:
    """A table on the real disk is held as a run on Ray holds it (one writer at a time): its lock's
    I/O and heartbeat are real time, outside the simulated network, disk and trace
    (:mod:`runtime.hudi.client.lock`; none under a multi-writer --concurrency-mode). The simulated
    disk has nothing to hold."""
    if store is not None:
        return contextlib.nullcontext()
    os.makedirs(job.config.table, exist_ok=True)
    return hold_for_run(job.config, command_line())


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
) -> _SimRun:
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
    run = _SimRun(
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


def _run_loop(run: _SimRun, loop: SimLoop, chrome_trace_path: str | None) -> JobResult:
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
        _shutdown(loop)
    run.wall_s = time.perf_counter()
    if chrome_trace_path:
        from runtime.core.trace import write_trace

        write_trace(chrome_trace_path, chrome, time_origin=0.0)
    return record


def _snapshot(run: _SimRun, store: MemoryStore | None) -> pa.Table:
    """The table's snapshot: the project's reader on the simulated disk, the official one on disk."""
    if store is not None:
        return read_memory_snapshot(MemoryDfs(store, role="verifier"), run.cfg.table)
    return read_snapshot(run.cfg.table)


def _verify(run: _SimRun, store: MemoryStore | None, verify: bool) -> tuple[ExactlyOnce | None, float]:
    """Exactly-once of a finished run (None when not verified), and how long it took."""
    if not verify or run.expected is None:
        return None, 0.0
    t = time.perf_counter()
    if store is not None:
        verdict = verify_memory(store, run.cfg.table, run.expected, run.cfg.key_field, run.cfg.partition_field)
    else:
        verdict = verify_run(run.cfg.table, run.expected, run.cfg.key_field, run.cfg.partition_field)
    return verdict, time.perf_counter() - t


def verify_memory(
    store: MemoryStore, table: str, expected: pa.Table, key: str, partition: str | None = None
) -> ExactlyOnce:
    """Exactly-once on the simulated disk: the snapshot by the project's own rules against the
    expected state (the official reader needs parquet files: use storage="disk" for it)."""
    from runtime.lab.verify import VerifyError, compare, unreadable

    try:
        verdict = compare(expected, read_memory_snapshot(MemoryDfs(store, role="verifier"), table), key, partition)
    except VerifyError as exc:
        return unreadable(expected, exc)
    verdict.reader = "commitlab snapshot (simulated disk)"
    return verdict


def check_determinism(
    job: JobConfig | ResolvedJob, seed: int, *, workdir: str | None = None, **kwargs: Any
) -> Divergence | None:
    """Runs ``job`` twice with ``seed``; returns the first divergence (``index``, the ``first``
    and ``second`` run's events) or None when the traces are identical. The second run stops at
    the first event that differs. ``kwargs`` go to :func:`simulate`."""
    import tempfile

    kwargs.setdefault("verify", False)
    if not isinstance(job, ResolvedJob):  # checked once for both runs
        _check_simulatable(job, kwargs.get("storage", "disk"))
        job = _placed(job, job.table)
    with tempfile.TemporaryDirectory(prefix="commitlab-sim-", dir=workdir) as tmp:
        a = simulate(job, seed=seed, workdir=os.path.join(tmp, "a"), trace=True, **kwargs).sim
        b = simulate(job, seed=seed, workdir=os.path.join(tmp, "b"), expect_trace=a.trace, **kwargs).sim
    return b.divergence or first_divergence(a.trace or [], b.trace or [])
