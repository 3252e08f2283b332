"""The simulation host: the Ray host's job, in one process, on virtual time, from a seed.

:func:`simulate` builds the roles ``actors/job.py`` builds (the protocol's extra roles, the
coordinator, the job manager, one write task and one source per writer), starts them in the same
order, runs the job manager's loop and the same deadlock watchdog (every 0.25 virtual s on the
writers' ``dump()``), and returns a result with the field names of the Ray host's ``result.json``.
The role code is unchanged: only the :class:`~runtime.core.env.Env` differs.

Same config and seed, same trace, byte for byte; :func:`check_determinism` checks it by running
twice, stopping the second run at the first event that differs.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from runtime.core import codec
from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import DfsCounters, open_dfs
from runtime.data import generator
from runtime.flink.job_manager import JobManager
from runtime.flink.source import InMemoryShard, Source
from runtime.hudi.table import HudiTable, TableProps, avro_schema_json
from runtime.lab.deadlock import find_deadlock, find_stalls
from runtime.lab.results import run_figures
from runtime.lab.verify import expected_state, verify_run
from runtime.protocols import PROTOCOLS, get_protocol
from runtime.sim.loop import SimLoop, SimulationAborted, SimulationError
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.memory_dfs import read_snapshot as read_memory_snapshot
from runtime.sim.network import DEFAULT_DELAY, Delay, SimNetwork
from runtime.sim.recorder import Event, TraceRecorder, first_divergence, trace_sha256
from runtime.sim.sim_env import SimEnv
from runtime.writer.coordinator import Coordinator
from runtime.writer.failover import region_failover_applies, resume_checkpoint_id, resume_plan, resume_summary
from runtime.writer.write_task import WriteTask

POLL_S = 0.25  # the watchdog's period, as the Ray driver's
SOURCE_DONE_S = 5.0  # how long a finished job waits for its sources to push end-of-input
STORAGES = ("disk", "memory")  # disk: real parquet, the official reader verifies; memory: the simulated disk
MEMORY_TABLE = "/commitlab-sim/table"  # the table's path on the simulated disk (same in every run)
HARD_LIMIT_MARGIN_S = 60.0  # the loop's own virtual-time bound, past the watchdog's
DEFAULT_MAX_REAL_S = 600.0  # real-time guard of one run
CLEANUP_REAL_S = 30.0  # real-time guard of cancelling what still runs after the verdict


def _accepted(fn: Callable[..., Any], **optional: Any) -> dict[str, Any]:
    """The optional keyword arguments ``fn`` accepts: the host passes what the Ray host passes
    when this version of a role takes it, and stays runnable while roles gain options."""
    params = inspect.signature(fn).parameters
    return {k: v for k, v in optional.items() if k in params}


def _root_cause(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:2000]


class _SimRun:
    """One simulated job: roles, supervision and result collection (inside the loop)."""

    def __init__(
        self,
        cfg: JobConfig,
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
        self.cfg = cfg
        self.store = store
        self.seed = seed
        self.loop = loop
        self.recorder = recorder
        self.network = SimNetwork(loop, seed, recorder, delay)
        self.io_delay = io_delay
        self.chrome_trace = chrome_trace
        self.max_virtual_s = max_virtual_s
        self.task_names = [f"writer-{i}" for i in range(cfg.writers)]
        self.source_names = [f"source-{i}" for i in range(cfg.writers)]
        self.envs: dict[str, SimEnv] = {}
        self.roles: dict[str, Any] = {}
        self.source_tasks: dict[str, asyncio.Task[Any]] = {}
        self.jm_task: asyncio.Task[Any] | None = None
        self.status: str = "created"
        self.error: str | None = None
        self.props = TableProps(cfg.table_name, cfg.key_field, cfg.partition_field, cfg.precombine_field)
        self.deadlock: Any = None
        self.stalls: list[dict[str, Any]] = []
        self.t_started = 0.0
        self.t_end = 0.0
        self.driver_counters = DfsCounters()
        self.expected: pa.Table | None = None
        self.prepare_s = 0.0
        self.failovers: list[dict[str, Any]] = []
        self.last_triggered = 0
        self.prior_checkpoints: dict[int, Any] = {}
        self.prior_metrics: dict[str, dict[str, Any]] = {}
        self.kinds: dict[str, str] = {}
        self.shards: list[Any] = []
        self.schema_json = ""

    # -- set-up --------------------------------------------------------------------------------

    def _env(self, name: str, kind: str, incarnation: int = 0) -> tuple[SimEnv, HudiTable]:
        """A role's env and table view, each role with its own DFS counters (its own process on
        Ray, so per-process singletons such as the message bus client stay per role)."""
        dfs, base = self._open_dfs(kind, DfsCounters())
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
            from runtime.faults.injector import COORDINATOR_DFS_FAULTS, FaultInjector, coordinator_dfs_hook

            env.faults = FaultInjector(self.cfg.faults, name, dfs, base)
            if kind == "coordinator" and {f.point for f in self.cfg.faults} & set(COORDINATOR_DFS_FAULTS):
                # a slow DFS operation costs virtual time, spent when the I/O call returns
                dfs.fault_hook = coordinator_dfs_hook(env, env.defer_io_delay)
        self.envs[name] = env
        return env, HudiTable(dfs, base, self.props)

    def _open_dfs(self, role: str, counters: DfsCounters) -> tuple[Any, str]:
        if self.store is not None:
            return MemoryDfs(self.store, role=role, counters=counters), self.cfg.table
        return open_dfs(self.cfg.table, role=role, counters=counters)

    async def main(self) -> None:
        cfg = self.cfg
        t0 = time.perf_counter()
        stream = generator.generate(cfg)
        shards = generator.shards_by_round(cfg, stream)
        self.expected = expected_state(stream, cfg.key_field, cfg.precombine_field).select(
            [generator.KEY_FIELD, generator.PARTITION_FIELD, generator.PRECOMBINE_FIELD, "payload"]
        )
        schema_json = avro_schema_json(stream.schema, cfg.table_name)
        dfs, base = self._open_dfs("driver", self.driver_counters)
        HudiTable.check_compatible(dfs, base, self.props)
        HudiTable.create_or_open(dfs, base, self.props)
        self.prepare_s = time.perf_counter() - t0
        self.recorder.add("host", "driver", "start", cfg.protocol, cfg.writers)

        protocol = get_protocol(cfg.protocol)
        # every name is known to the network before anything starts, as every actor exists on Ray
        # before the first start() call
        kinds: list[tuple[str, str]] = [(k, k) for k in protocol.extra_roles]
        kinds += [("coordinator", "coordinator"), ("job-manager", "job-manager")]
        kinds += [(n, "writer") for n in self.task_names] + [(n, "source") for n in self.source_names]
        self.kinds = dict(kinds)
        self.shards, self.schema_json = shards, schema_json
        views = {name: self._env(name, kind) for name, kind in kinds}
        for kind in protocol.extra_roles:  # protocol roles first: the coordinator may call them
            env, table = views[kind]
            role = protocol.make_role(kind, env, cfg, table, self.task_names)
            self._bind(kind, role)
            if hasattr(role, "start"):
                await self._bounded(role.start(), kind)
        await self._launch(views, restore=None)
        self.t_started = self.loop.time()
        self.status = "running"
        await self._supervise()

    async def _bounded(self, aw: Any, what: str) -> Any:
        start_timeout = max(60.0, self.cfg.rpc_timeout_s)
        try:
            return await asyncio.wait_for(aw, start_timeout)
        except asyncio.TimeoutError:
            raise SimulationError(f"{what} did not start within {start_timeout:.0f} virtual s") from None

    async def _launch(self, views: dict[str, tuple[SimEnv, HudiTable]], restore: Any) -> None:
        """Creates and starts the coordinator, the job manager, the write tasks and the sources, as
        ``actors/job.py`` does; after a failover from ``restore`` (the last completed checkpoint,
        or None)."""
        cfg = self.cfg
        protocol = get_protocol(cfg.protocol)
        resume: dict[str, int] = {}
        if self.failovers:
            restore, resume = resume_plan(cfg, self.last_triggered, restore)
        states = restore.states if restore is not None else {}
        region = "coordinator" not in views  # a region failover keeps the coordinator
        if not region:
            env, table = views["coordinator"]
            coord = Coordinator(
                env,
                cfg,
                table,
                protocol,
                self.task_names,
                schema_json=self.schema_json,
                **({"resume_checkpoint_id": resume["resume_checkpoint_id"]} if resume else {}),
            )
            self._bind("coordinator", coord)
            await self._bounded(coord.start(), "coordinator")
        env, table = views["job-manager"]
        optional: dict[str, Any] = {}
        try:
            from runtime.flink.state_backend import StateBackend  # the completed-checkpoint store, when present

            optional["state_backend"] = StateBackend(env.dfs, table.base_path)
        except ImportError:
            pass
        optional.update({k: v for k, v in resume.items() if k.startswith("start_")})
        jm = JobManager(env, cfg, self.task_names, self.source_names, **_accepted(JobManager.__init__, **optional))
        self._bind("job-manager", jm)
        writers = []
        for i, name in enumerate(self.task_names):
            env, table = views[name]
            data_table = table.with_dfs(env.dfs.for_role("writer.data"))
            task = WriteTask(env, cfg, i, table, protocol, data_table=data_table)
            self._bind(name, task, starting=region)
            writers.append(task)

        async def start_writer(name: str, w: WriteTask) -> None:
            if resume:
                from runtime.core.messages import TaskState

                await w.start(
                    codec.decode(states[name], TaskState) if states.get(name) else None,
                    resume_checkpoint_id=resume["resume_checkpoint_id"],
                )
            else:
                await w.start()
            self.network.started(name)

        async def start_writers() -> None:
            await asyncio.gather(*(start_writer(n, w) for n, w in zip(self.task_names, writers, strict=True)))

        starts = start_writers()
        if region:
            # as the Ray host: a region's tasks are deployed together, so sources may feed a task
            # while another has not bootstrapped yet (the HUDI-6194 window); the starts are
            # awaited after the sources are up
            starts_task = self.envs["job-manager"].spawn(starts, "the write tasks' start")
        else:
            await self._bounded(starts, "the write tasks")
        self.jm_task = self.envs["job-manager"].spawn(jm.run(), "job-manager.run")
        for i, name in enumerate(self.source_names):
            env, _ = views[name]
            start: dict[str, int] = {}
            if resume:
                src_state = states.get(name)
                start = {
                    "start_round": resume["start_round"],
                    "start_offset": codec.decode(src_state).offset if src_state else 0,
                }
            src = Source(env, cfg, i, InMemoryShard(self.shards[i]), writer=self.task_names[i], **start)
            self._bind(name, src)
            self.source_tasks[name] = env.spawn(src.run(), f"{name}.run")
        if region:
            await self._bounded(starts_task, "the write tasks")

    def _region_failover_possible(self) -> bool:
        """As ``actors/job.py``: ``failover=region``, a protocol whose tasks restore from their
        checkpointed state, and a coordinator alive and sound."""
        coord = self.roles.get("coordinator")
        env = self.envs.get("coordinator")
        sound = coord is not None and env is not None and env.crashed is None and not coord.error
        return region_failover_applies(self.cfg, coordinator_sound=sound)

    async def _failover(self, error: str | None) -> None:
        """As ``actors/job.py``: restart from the last completed checkpoint. Global (Flink's
        restart-all): every task, source, the coordinator and the job manager die and restart.
        Region: the coordinator lives on and is told to reset. The protocol's own roles (timeline
        server, control topic) live on either way."""
        from runtime.core.messages import TasksReset
        from runtime.flink.state_backend import StateBackend

        dfs, base = self._open_dfs("driver", self.driver_counters)
        restore = StateBackend(dfs, base).latest()
        jm = self.roles["job-manager"].describe()
        self.last_triggered = max([self.last_triggered, jm.get("current", 0)] + [int(k) for k in jm["checkpoints"]])
        self.prior_checkpoints.update({int(k): v for k, v in jm["checkpoints"].items()})
        region = self._region_failover_possible()
        self.failovers.append(
            {
                "error": error,
                "at_virtual_s": round(self.loop.time(), 6),
                "strategy": "region" if region else "global",
                **resume_summary(self.cfg, self.last_triggered, restore),
            }
        )
        self.recorder.add("host", "driver", "failover", error, restore.checkpoint_id if restore is not None else None)
        for probe in self.network.reply_probes:  # observers that count per failover epoch
            if hasattr(probe, "on_failover"):
                probe.on_failover()
        names = ([] if region else ["coordinator"]) + ["job-manager", *self.task_names, *self.source_names]
        for name in names:
            old = self.envs[name]
            self.prior_metrics[f"{name}#{old.incarnation}"] = self._metrics_of(old)
            self.network.kill(name)
            old.kill()
        self.source_tasks = {}
        # let the cancellations land before anything new starts (bounded: a task cannot refuse)
        await asyncio.sleep(0)
        views = {name: self._env(name, self.kinds[name], incarnation=len(self.failovers)) for name in names}
        if region:
            resume_id = resume_checkpoint_id(self.last_triggered, restore)
            await self._bounded(
                self.roles["coordinator"].reset_tasks(TasksReset(resume_id, error or "")), "the coordinator's reset"
            )
        await self._launch(views, restore)

    def _bind(self, name: str, role: Any, *, starting: bool = False) -> None:
        self.roles[name] = role
        self.network.bind(name, role, starting=starting)

    # -- supervision ---------------------------------------------------------------------------

    def _dumps(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in self.task_names:
            role = self.roles.get(name)
            out[name] = role.dump() if role is not None else {"role": name, "state": "not started"}
        return out

    async def _supervise(self) -> None:
        """The Ray driver's loop: wait for the job manager a poll at a time, run the watchdog,
        stop at the job timeout or the virtual-time limit."""
        cfg = self.cfg
        assert self.jm_task is not None
        deadline = self.loop.time() + cfg.job_timeout_s
        while True:
            done, _ = await asyncio.wait({self.jm_task}, timeout=POLL_S)
            if done:
                exc = self.jm_task.exception()
                self.status, self.error = ("finished", None) if exc is None else ("failed", _root_cause(exc))
                if exc is not None and len(self.failovers) < cfg.max_restarts:
                    await self._failover(self.error)
                    self.status, self.error = "running", None
                    continue
                break
            dead = [n for n, e in self.envs.items() if e.crashed is not None]
            if dead:  # as the Ray driver sees a dead actor: the job fails, and fails over
                self.status, self.error = "failed", f"{dead[0]} died ({self.envs[dead[0]].crashed})"
                if len(self.failovers) < cfg.max_restarts:
                    await self._failover(self.error)
                    self.status, self.error = "running", None
                    continue
                break
            dumps = self._dumps()
            self.deadlock = find_deadlock(dumps, cfg.deadlock_threshold_s)
            if self.deadlock is not None:
                self.status = "deadlocked"
                break
            self.stalls = find_stalls(dumps, cfg.deadlock_threshold_s)
            now = self.loop.time()
            if now > deadline:
                self.status = "timed-out"
                self.error = (
                    f"the job did not finish within job_timeout_s={cfg.job_timeout_s}s; "
                    f"stalled tasks: {self.stalls or 'none'}"
                )
                break
            if self.max_virtual_s is not None and now >= self.max_virtual_s:
                self.status = "timed-out"
                self.error = (
                    f"the simulation reached its virtual-time limit of {self.max_virtual_s}s; "
                    f"stalled tasks: {self.stalls or 'none'}"
                )
                break
        self.t_end = self.loop.time()
        if self.status == "finished":
            # let the sources push end-of-input so every mailbox loop ends cleanly (bounded)
            pending = [t for t in self.source_tasks.values() if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=SOURCE_DONE_S)
        self.recorder.add("host", "driver", "end", self.status, self.error)

    # -- results -------------------------------------------------------------------------------

    def collect(self) -> dict[str, Any]:
        """The Ray host's result record, from the roles in this process."""
        cfg = self.cfg
        self.recorder.close()
        metrics = dict(self.prior_metrics)  # the roles that died in a failover count too
        for name, env in self.envs.items():
            metrics[name] = self._metrics_of(env)
        coord = (
            self.roles["coordinator"].describe()
            if "coordinator" in self.roles
            else {"commits": [], "empty_rounds": [], "releases": []}
        )
        jm = self.roles["job-manager"].describe() if "job-manager" in self.roles else {"checkpoints": {}}
        if self.failovers:
            jm["checkpoints"] = {**self.prior_checkpoints, **jm["checkpoints"]}
            coord = {**coord, "commits": self._commits_from_table()}
        dumps = self._dumps() if all(n in self.roles for n in self.task_names) else {}
        figures = run_figures(
            metrics.values(), self.driver_counters.snapshot(), coord, jm["checkpoints"], dumps, cfg.checkpoints
        )
        rows_in = figures["rows_in"]
        run_s = max(0.0, self.t_end - self.t_started)
        return {
            **figures,
            "protocol": cfg.protocol,
            "writers": cfg.writers,
            "source": cfg.source,
            "table": cfg.table,
            "status": self.status,
            "error": self.error,
            "records": cfg.records,
            "commits": [
                {"instant": c["instant"], "checkpoint": c["checkpoint"], "rows": c["rows"]} for c in coord["commits"]
            ],
            "empty_rounds": coord["empty_rounds"],
            "deadlock": self.deadlock.to_result() if self.deadlock else None,
            "stalls": self.stalls,
            "timing": {
                "prepare_s": round(self.prepare_s, 3),
                "setup_s": round(self.t_started, 6),
                "run_s": round(run_s, 6),
            },
            "rows_per_s": round(rows_in / max(1e-9, run_s), 1),
            "tasks": {
                n: {k: d.get(k) for k in ("state", "error", "flushes", "protocol", "rows_in")} for n, d in dumps.items()
            },
            "send_errors": [e for m in metrics.values() for e in m.get("send_errors", [])],
            "failovers": self.failovers,
        }

    def reap(self) -> None:
        """Takes the outcome of every finished role task: a task that failed (a source whose
        writer failed) has been accounted for by the verdict, and must not be reported again
        when it is garbage-collected."""
        for env in self.envs.values():
            for task in env.tasks:
                if task.done() and not task.cancelled():
                    task.exception()

    @staticmethod
    def _metrics_of(env: SimEnv) -> dict[str, Any]:
        snap = env.metrics.snapshot()
        snap["dfs_ops"] = env.dfs.counters.snapshot()
        snap["send_errors"] = list(env.send_errors)
        return snap

    def _commits_from_table(self) -> list[dict[str, Any]]:
        """The commits of the job, read from the table (as the Ray host does): after a failover
        the coordinator that made the early ones is gone."""
        dfs, base = self._open_dfs("driver", DfsCounters())
        return HudiTable(dfs, base, self.props).commit_summaries()

    def chrome_events(self) -> list[dict[str, Any]]:
        return [ev for env in self.envs.values() for ev in env.tracer.drain()]


def _shutdown(loop: SimLoop) -> None:
    """Cancels what still runs (a deadlocked task, agents that poll forever) and closes the loop."""
    loop.disarm_guards()
    loop.arm_real_time_guard(CLEANUP_REAL_S)  # a task that ignores cancellation cannot hang us
    try:
        tasks = sorted((t for t in asyncio.all_tasks(loop) if not t.done()), key=lambda t: t.get_name())
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=SOURCE_DONE_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except SimulationError:
        pass  # what is left is dropped with the loop
    finally:
        loop.close()


def prepare_config(cfg: JobConfig, workdir: str | None, storage: str = "disk") -> JobConfig:
    """The config a simulation runs: the generator source, the table under ``workdir`` (on the
    simulated disk: at a fixed path, so traces never name a directory)."""
    if cfg.input_path:
        raise ConfigError("the simulator runs the built-in generator; --input needs the Ray host")
    if storage not in STORAGES:
        raise ConfigError(f"unknown storage {storage!r}; choose one of {', '.join(STORAGES)}")
    if storage == "memory":
        return cfg.replace(source="generator", table=MEMORY_TABLE).validate(list(PROTOCOLS))
    if workdir is None:
        raise ConfigError(
            "a simulation on disk writes its table under a workdir: pass workdir (or use storage='memory')"
        )
    table = os.path.join(os.path.abspath(workdir), "table")
    cfg = cfg.replace(source="generator", table=table).validate(list(PROTOCOLS))
    if os.path.isdir(table) and os.listdir(table):
        raise ConfigError(
            f"{table} already holds a table: a simulation writes a fresh one (same seed, "
            "same files); remove it or use another workdir"
        )
    return cfg


def simulate(
    cfg: JobConfig,
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
) -> dict[str, Any]:
    """Runs ``cfg`` under the simulator with ``seed``; returns the result record.

    ``seed`` drives the schedule (message delays, each role's ``rng``); ``cfg.seed`` the data.
    The table is written to ``workdir/table`` (which must not hold one). ``trace=True`` adds the
    event list as ``result["trace"]``; ``trace_sha256`` and ``trace_events`` are always there.
    ``max_virtual_s`` stops the run (status ``timed-out``) at that virtual time; ``max_real_s``
    is the real-time guard. ``expect_trace``: a reference run's events; the run stops at the first
    event that differs (``result["divergence"]``). ``storage="memory"`` runs on the simulated
    disk (:mod:`runtime.sim.memory_dfs`: no parquet, no workdir) and verifies exactly-once with the
    project's own snapshot reader instead of the official one. ``reply_probes`` see every
    successful reply on the simulated network (replier, its incarnation: restarts so far, caller,
    method, wire value).
    """
    wall0 = time.perf_counter()
    cfg = prepare_config(cfg, workdir, storage)
    store = MemoryStore() if storage == "memory" else None
    if store is None:
        os.makedirs(cfg.table, exist_ok=True)
    vlimit = max_virtual_s if max_virtual_s is not None else cfg.job_timeout_s
    loop = SimLoop(max_virtual_s=vlimit + HARD_LIMIT_MARGIN_S, max_real_s=max_real_s)
    recorder = TraceRecorder(
        loop.time,
        scrub={cfg.table: "<table>"},
        expected=expect_trace,
        on_divergence=lambda d: loop.abort(f"the trace diverged from the reference run at event {d['index']}"),
    )
    run = _SimRun(
        cfg,
        seed=seed,
        loop=loop,
        recorder=recorder,
        delay=delay or DEFAULT_DELAY,
        io_delay=io_delay,
        chrome_trace=chrome_trace_path is not None,
        max_virtual_s=max_virtual_s,
        store=store,
    )
    run.network.reply_probes.extend(reply_probes or [])
    try:
        try:
            loop.run_until_complete(run.main())
        except SimulationError as exc:
            run.status = "aborted" if isinstance(exc, SimulationAborted) else "timed-out"
            run.error = f"{type(exc).__name__}: {exc}"
            run.t_end = loop.time()
            recorder.add("host", "driver", "end", run.status, run.error)
        if run.status in ("created", "running") and run.error is None:
            run.status = "failed"
        result = run.collect()
        virtual_s = loop.time()
        sim_info = {
            "loop_iterations": loop.iterations,
            "clock_jumps": loop.clock_jumps,
            "messages": run.network.messages,
            "delay": repr(run.network.delay),
            "io_delay": repr(io_delay) if io_delay else None,
            "inline_executor_calls": loop.inline_executor_calls,
        }
        chrome = run.chrome_events() if chrome_trace_path else []
    finally:
        run.reap()
        _shutdown(loop)
    wall_s = time.perf_counter() - wall0
    verify_s = 0.0
    if verify and result["status"] == "finished" and run.expected is not None:
        t = time.perf_counter()
        if store is not None:
            result["exactly_once"] = verify_memory(store, cfg.table, run.expected, cfg.key_field)
        else:
            result["exactly_once"] = verify_run(cfg.table, run.expected, cfg.key_field)
        verify_s = time.perf_counter() - t
    else:
        result["exactly_once"] = None
    if chrome_trace_path:
        from runtime.core.trace import write_trace

        write_trace(chrome_trace_path, chrome, time_origin=0.0)
    events = recorder.events
    result.update(
        {
            "host": "simulator",
            "storage": storage,
            "seed": seed,
            "virtual_s": round(virtual_s, 6),
            "wall_s": round(wall_s, 3),
            "verify_s": round(verify_s, 3),
            "sim": sim_info,
            "trace_events": len(events),
            "trace_sha256": trace_sha256(events),
            "divergence": recorder.divergence,
        }
    )
    if trace or expect_trace is not None:
        result["trace"] = events
    return result


def verify_memory(store: MemoryStore, table: str, expected: pa.Table, key: str) -> dict[str, Any]:
    """Exactly-once on the simulated disk: the snapshot by the project's own rules against the
    expected state (the official reader needs parquet files: use storage="disk" for it)."""
    from runtime.lab.verify import VerifyError, compare

    try:
        verdict = compare(expected, read_memory_snapshot(MemoryDfs(store, role="verifier"), table), key)
    except VerifyError as exc:
        return {"verified": False, "expected": expected.num_rows, "actual": None, "error": str(exc), "samples": {}}
    verdict["reader"] = "commitlab snapshot (simulated disk)"
    return verdict


def check_determinism(cfg: JobConfig, seed: int, *, workdir: str | None = None, **kwargs: Any) -> dict[str, Any] | None:
    """Runs ``cfg`` twice with ``seed``; returns the first divergence (``index``, the ``first``
    and ``second`` run's events) or None when the traces are identical. The second run stops at
    the first event that differs. ``kwargs`` go to :func:`simulate`."""
    import tempfile

    kwargs.setdefault("verify", False)
    with tempfile.TemporaryDirectory(prefix="commitlab-sim-", dir=workdir) as tmp:
        a = simulate(cfg, seed=seed, workdir=os.path.join(tmp, "a"), trace=True, **kwargs)
        b = simulate(cfg, seed=seed, workdir=os.path.join(tmp, "b"), expect_trace=a["trace"], **kwargs)
    return b["divergence"] or first_divergence(a["trace"], b["trace"])
