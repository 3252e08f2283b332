"""One job topology for every host: the roles, their arguments, their start order, the
supervision loop, the failover and the result record.

The Ray host (``actors/job.py``) and the simulation host (``runtime/sim/host.py``) implement
:class:`JobHost`: how a role is placed, started, killed, called and awaited, and how time passes.
:class:`JobDriver` does everything else once, for both: which roles exist (the protocol's own
roles, the coordinator, the job manager, one write task and one source per writer) and in which
order they start, the arguments each is built with (:func:`make_role`, :func:`start_role`),
the watchdog, the failover decision (Flink's restart-all or region strategy,
:mod:`runtime.writer.failover`) and the result (:class:`~runtime.lab.results.JobResult`).

The order follows Flink's deployment: the coordinator starts before its tasks (Flink 1.16,
``OperatorCoordinatorHolder#start`` runs when the job starts, before tasks are deployed); a
region failover (``RestartPipelinedRegionFailoverStrategy``) restarts the region's tasks
together and resets the coordinator (``OperatorCoordinator#subtaskReset``); a global one
restarts every task and the coordinator (``RestartAllFailoverStrategy``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import pyarrow as pa

from runtime.core import codec
from runtime.core.config import ConfigError, JobConfig
from runtime.core.env import Env
from runtime.core.messages import (
    CheckpointView,
    CoordinatorView,
    JobManagerView,
    TaskDump,
    TasksReset,
    TaskState,
)
from runtime.flink.job_manager import JobManager
from runtime.flink.source import Source
from runtime.flink.state_backend import StateBackend
from runtime.hudi.table import HudiTable, commit_summaries, compaction_summaries, files_written
from runtime.lab.deadlock import Stall, find_deadlock, find_stalls
from runtime.lab.prefix import verify_prefix
from runtime.lab.results import (
    CoordinatorRecord,
    FailoverRecord,
    FiredFault,
    JobResult,
    TaskSummary,
    fired_faults,
    run_figures,
)
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix
from runtime.lab.verify import VerifyError
from runtime.protocols import PROTOCOLS, get_protocol
from runtime.writer.compaction import (
    COMMIT_SINK,
    COMPACT_TASK,
    PLAN_OPERATOR,
    CompactionCommitSink,
    CompactionPlanOperator,
    CompactOperator,
    compaction_role_names,
)
from runtime.writer.coordinator import Coordinator
from runtime.writer.failover import region_failover_applies, resume_checkpoint_id, resume_plan, resume_summary
from runtime.writer.write_task import WriteTask

POLL_S = 0.25  # the watchdog's period
BUS_DELETED_FAULT = "bus.deleted_between_restarts"


@dataclass(frozen=True)
class RoleSpec:
    """One role of the job: its name, its kind and what it is built with (wire-safe values)."""

    name: str
    kind: str  # writer, source, coordinator, job-manager, or one of the protocol's extra roles
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoleNames:
    task_names: list[str]
    source_names: list[str]


def validate_job(cfg: JobConfig) -> JobConfig:
    """The checks a job's options get before any work starts, on either host: the configuration's
    own (:meth:`JobConfig.validate`), and that every armed fault can fire under the protocol (a
    bus to delete, an RPC method for a messaging fault to hit). Raises ConfigError. Returns ``cfg``,
    ``--table-version release`` resolved to the version the protocol's Hudi release writes."""
    from runtime.core.fault_spec import MESSAGE_FAULTS

    cfg.validate(list(PROTOCOLS))
    protocol = get_protocol(cfg.protocol)
    methods = {
        *WriteTask.RPC_METHODS,
        *Source.RPC_METHODS,
        *JobManager.RPC_METHODS,
        *Coordinator.OWN_RPC_METHODS,
        *protocol.coordinator_side.RPC_METHODS,
        *protocol.extra_rpc_methods,
    }
    if cfg.allow_empty_commit != "release" and protocol.empty_commit_default is None:
        raise ConfigError(
            f"--allow-empty-commit {cfg.allow_empty_commit}: the Hudi release {cfg.protocol} models has no "
            "hoodie.allow.empty.commit for its Flink writer (it came with 0.14, HUDI-6127; the Kafka Connect "
            "sink always commits); leave it at release, or choose ckp-meta, timeline-server or coordination-rpc"
        )
    for spec in cfg.faults:
        if spec.point.startswith("bus.") and not protocol.messages_on_dfs:
            raise ConfigError(
                f"--faults {spec.text()}: {cfg.protocol} keeps no messages on the DFS, so there is no "
                "directory to delete; the fault could never fire (it applies to message-bus, ckp-meta, "
                "timeline-server)"
            )
        if spec.point in MESSAGE_FAULTS and spec.target and spec.target not in methods:
            raise ConfigError(
                f"--faults {spec.text()}: no role of a {cfg.protocol} job has an RPC method {spec.target!r}; "
                f"name one of {', '.join(sorted(methods))}"
            )
    if cfg.table_version == "release":  # the version the protocol's Hudi release writes
        return cfg.replace(table_version=str(protocol.release_table_version))
    return cfg


def make_role(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, shard: Any = None) -> Any:
    """Builds the role of ``spec`` (the same code on every host; ``shard`` feeds a source)."""
    protocol = get_protocol(cfg.protocol)
    a = spec.args
    if spec.kind == "coordinator":
        return Coordinator(
            env,
            cfg,
            table,
            protocol,
            names.task_names,
            schema_json=a.get("schema_json", ""),
            resume_checkpoint_id=int(a.get("resume_checkpoint_id", 0)),
        )
    if spec.kind == "job-manager":
        return JobManager(
            env,
            cfg,
            names.task_names,
            names.source_names,
            state_backend=StateBackend(env.dfs, table.base_path),
            start_checkpoint_id=int(a.get("start_checkpoint_id", 1)),
            start_round=int(a.get("start_round", 1)),
            compaction_plan=PLAN_OPERATOR if cfg.compacts else "",
        )
    if spec.kind == PLAN_OPERATOR:
        tasks = [n for n in compaction_role_names(cfg) if n.startswith(f"{COMPACT_TASK}-")]
        return CompactionPlanOperator(env, cfg, table, tasks)
    if spec.kind == COMPACT_TASK:
        return CompactOperator(env, cfg, table.with_dfs(env.dfs.for_role("compaction.data")), int(a["task_id"]))
    if spec.kind == COMMIT_SINK:
        return CompactionCommitSink(env, cfg, table, a.get("schema_json", ""))
    if spec.kind == "writer":
        data_table = table.with_dfs(env.dfs.for_role("writer.data"))
        return WriteTask(env, cfg, int(a["task_id"]), table, protocol, data_table=data_table)
    if spec.kind == "source":
        return Source(
            env,
            cfg,
            int(a["task_id"]),
            shard,
            writer=a["writer"],
            start_round=int(a.get("start_round", 1)),
            start_offset=int(a.get("start_offset", 0)),
        )
    if spec.kind in protocol.extra_roles:  # a role the protocol brings (timeline server, control topic)
        return protocol.make_role(spec.kind, env, cfg, table, names.task_names)
    raise ValueError(f"unknown role kind {spec.kind!r}")


async def start_role(role: Any, spec: RoleSpec) -> None:
    """Starts a built role (a source's loop and the job manager's run are the host's to spawn)."""
    if spec.kind == "writer":
        restored = spec.args.get("restored_state")
        state = codec.decode(restored, TaskState) if restored else None
        await role.start(state, resume_checkpoint_id=spec.args.get("resume_checkpoint_id"))
    elif spec.kind not in ("source", "job-manager") and hasattr(role, "start"):
        await role.start()


class JobHost(Protocol):
    """What differs between hosts. Names are role names; ``start`` builds and starts roles
    (:func:`make_role`, :func:`start_role`) placed before with ``place``."""

    start_errors: tuple[type[BaseException], ...]  # a role that failed while starting: the job fails

    def now(self) -> float: ...

    def place(self, spec: RoleSpec, incarnation: int) -> None: ...

    async def start(self, names: Sequence[str]) -> None: ...

    def start_later(self, names: Sequence[str]) -> Awaitable[None]: ...

    async def rebind(self, name: str) -> None: ...

    def run_job_manager(self) -> None: ...

    async def wait_job_manager(self, timeout: float) -> tuple[bool, str | None]: ...

    async def describe_job_manager(self) -> JobManagerView | None: ...

    async def describe_coordinator(self) -> CoordinatorView | None: ...

    async def dumps(self) -> dict[str, TaskDump]: ...

    def dead(self, dumps: dict[str, TaskDump]) -> str | None: ...

    def past_limit(self) -> str | None: ...

    def interrupted(self) -> str | None: ...

    async def timed_out(self) -> str: ...

    def on_failover(self, error: str | None, restore: Any) -> None: ...

    async def kill(self, names: Sequence[str]) -> list[dict[str, Any]]: ...

    async def call(self, name: str, method: str, msg: Any) -> Any: ...

    async def progress(self) -> None: ...


@dataclass
class Outcome:
    status: str  # finished, failed, deadlocked, timed-out, interrupted (aborted: the simulator's verdict)
    error: str | None = None
    deadlock: Any = None
    stalls: list[Stall] = field(default_factory=list)


class JobDriver:
    """Runs one job's topology on a :class:`JobHost`; ``table`` is the driver's view of it."""

    def __init__(self, cfg: JobConfig, table: HudiTable, *, schema_json: str) -> None:
        self.cfg = cfg
        self.table = table
        self.schema_json = schema_json
        self.protocol = get_protocol(cfg.protocol)
        self.names = RoleNames([f"writer-{i}" for i in range(cfg.writers)], [f"source-{i}" for i in range(cfg.writers)])
        self.compaction_names = compaction_role_names(cfg)  # merge-on-read: runtime.writer.compaction
        self.failovers: list[FailoverRecord] = []
        self.last_triggered = 0
        self.prior_checkpoints: dict[int, CheckpointView] = {}
        self.prior_metrics: list[dict[str, Any]] = []
        self.deadline: float | None = None
        self.stalls: list[Stall] = []  # what the watchdog saw last
        self.t_launched: float | None = None  # when the first launch had every role up
        self.failover_clock = "at"  # the failover record's time key in result.json
        # instants pending when an attempt started, and why: the coordinator rolls them back
        self.pending_at_launch: dict[str, str] = {}

    @property
    def task_names(self) -> list[str]:
        return self.names.task_names

    @property
    def source_names(self) -> list[str]:
        return self.names.source_names

    def restartable(self, region: bool) -> list[str]:
        """What a failover restarts: the protocol's own roles live on, the coordinator too in a
        region. The compaction operators are connected to the write tasks, so in their region."""
        tasks = [*self.compaction_names, *self.task_names, *self.source_names]
        return ([] if region else ["coordinator"]) + ["job-manager", *tasks]

    def specs(self, names: Sequence[str], resume: dict[str, int], states: dict[str, bytes]) -> list[RoleSpec]:
        """The specs of ``names``; ``resume`` (empty on a fresh start) and the restored ``states``."""
        out = []
        for name in names:
            if name == "coordinator":
                args: dict[str, Any] = {"schema_json": self.schema_json}
                args.update({"resume_checkpoint_id": resume["resume_checkpoint_id"]} if resume else {})
                out.append(RoleSpec(name, name, args))
            elif name == "job-manager":
                out.append(RoleSpec(name, name, {k: v for k, v in resume.items() if k.startswith("start_")}))
            elif name in self.task_names:
                args = {"task_id": self.task_names.index(name)}
                if resume:
                    args.update(resume_checkpoint_id=resume["resume_checkpoint_id"], restored_state=states.get(name))
                out.append(RoleSpec(name, "writer", args))
            elif name == COMMIT_SINK:
                out.append(RoleSpec(name, COMMIT_SINK, {"schema_json": self.schema_json}))
            elif name == PLAN_OPERATOR:
                out.append(RoleSpec(name, PLAN_OPERATOR))
            elif name.startswith(f"{COMPACT_TASK}-") and name in self.compaction_names:
                out.append(RoleSpec(name, COMPACT_TASK, {"task_id": int(name.rsplit("-", 1)[1])}))
            elif name in self.source_names:
                i = self.source_names.index(name)
                args = {"task_id": i, "writer": self.task_names[i]}
                if resume:
                    state = states.get(name)
                    offset = codec.decode(state).offset if state else 0
                    args.update(start_round=resume["start_round"], start_offset=offset)
                out.append(RoleSpec(name, "source", args))
            else:
                out.append(RoleSpec(name, name))  # one of the protocol's own roles
        return out

    # -- the run -------------------------------------------------------------------------------

    async def run(self, host: JobHost) -> Outcome:
        """Launches, supervises, fails over up to ``max_restarts`` times; the job's outcome."""
        error: str | None = None
        while True:
            try:
                if error is None:
                    await self.launch_first(host)
                else:
                    await self.failover(host, error)
                outcome = await self.supervise(host)
            except host.start_errors as exc:  # a role failed while starting
                outcome = Outcome("failed", root_cause(exc))
            if outcome.status == "failed" and len(self.failovers) < self.cfg.max_restarts:
                error = outcome.error
                continue
            return outcome

    def note_pending(self, reason: str) -> None:
        """Remembers the instants pending now, which the next coordinator rolls back, and why."""
        if not self.table.dfs.exists(self.table.dfs.join(self.table.base_path, ".hoodie")):
            return
        for instant in self.table.timeline().pending_commits():
            self.pending_at_launch.setdefault(instant, reason)

    async def launch_first(self, host: JobHost) -> None:
        self.note_pending("left pending by an earlier run of this table")
        extra = list(self.protocol.extra_roles)
        for spec in self.specs(extra + self.restartable(region=False), {}, {}):
            host.place(spec, 0)  # every role exists before anything starts
        await host.start(extra)  # protocol roles first: the coordinator may call them
        await self.launch(host, region=False)
        self.t_launched = host.now()

    async def launch(self, host: JobHost, *, region: bool) -> None:
        """Starts the placed roles in Flink's order; a region failover keeps the coordinator."""
        if region:
            await host.rebind("coordinator")  # kept: it must reach the new tasks
        else:
            await host.start(["coordinator"])
        await host.start(["job-manager"])
        if self.compaction_names:  # deployed before the tasks whose checkpoints run them
            await host.start(self.compaction_names)
        if region:
            # a region's tasks are deployed together, as Flink does: a source may feed its task
            # while another task has not bootstrapped yet (the HUDI-6194 window)
            tasks = host.start_later(self.task_names)
            host.run_job_manager()
            await host.start(self.source_names)
            await tasks
        else:
            await host.start(self.task_names)
            host.run_job_manager()
            await host.start(self.source_names)

    async def supervise(self, host: JobHost) -> Outcome:
        """Waits for the job manager a poll at a time: dead roles, deadlocks, the time limits."""
        cfg = self.cfg
        if self.deadline is None:
            self.deadline = host.now() + cfg.job_timeout_s
        while True:
            ended, error = await host.wait_job_manager(POLL_S)
            if ended:
                return Outcome("finished" if error is None else "failed", error, None, self.stalls)
            dumps = await host.dumps()
            dead = host.dead(dumps)
            if dead is not None:  # a dead role fails the job, which fails over
                return Outcome("failed", dead, None, self.stalls)
            deadlock = find_deadlock(dumps, cfg.deadlock_threshold_s)
            if deadlock is not None:
                return Outcome("deadlocked", None, deadlock, self.stalls)
            self.stalls = stalls = find_stalls(dumps, cfg.deadlock_threshold_s)
            if host.now() > self.deadline:
                waiting = await host.timed_out()
                error = f"the job did not finish within job_timeout_s={cfg.job_timeout_s}s; {waiting}"
                return Outcome("timed-out", f"{error}stalled tasks: {_stalls_text(stalls)}", None, stalls)
            stopped = host.interrupted()
            if stopped is not None:
                return Outcome("interrupted", stopped, None, stalls)
            limit = host.past_limit()
            if limit is not None:
                return Outcome("timed-out", f"{limit}; stalled tasks: {_stalls_text(stalls)}", None, stalls)
            await host.progress()

    # -- failover ------------------------------------------------------------------------------

    async def failover(self, host: JobHost, error: str | None) -> None:
        """Restarts from the last completed checkpoint: globally (every task, source, the
        coordinator and the job manager) or by region (the coordinator lives on and is told to
        reset; it re-initialises once every task has bootstrapped again)."""
        restore = StateBackend(self.table.dfs, self.table.base_path).latest()
        jm = await host.describe_job_manager()
        if jm is not None:
            self.last_triggered = max([self.last_triggered, jm.current, *jm.checkpoints])
            self.prior_checkpoints.update(jm.checkpoints)
        region = False
        if self.cfg.failover == "region":  # the coordinator must be alive and sound
            coord = await host.describe_coordinator()
            region = region_failover_applies(self.cfg, coordinator_sound=coord is not None and not coord.error)
        summary = resume_summary(self.cfg, self.last_triggered, restore)
        record = FailoverRecord(error, host.now(), "region" if region else "global", **summary)
        record.clock = self.failover_clock
        self.failovers.append(record)
        host.on_failover(error, restore)
        record.deleted = self.delete_bus_if_armed()
        names = self.restartable(region)
        self.prior_metrics += await host.kill(names)
        self.note_pending(f"left pending by attempt {len(self.failovers)}, which failed: {(error or '?')[:200]}")
        planned, resume = resume_plan(self.cfg, self.last_triggered, restore)
        for spec in self.specs(names, resume, planned.states if planned is not None else {}):
            host.place(spec, len(self.failovers))
        if region:
            notice = TasksReset(resume_checkpoint_id(self.last_triggered, restore), error or "")
            record.coordinator_reset = await host.call("coordinator", "reset_tasks", notice)
        await self.launch(host, region=region)
        record.down_s = round(host.now() - record.at, 6)

    def delete_bus_if_armed(self) -> str | None:
        """The bus.deleted_between_restarts fault: once its task crash fired, the protocol's message
        directories on the DFS (the message bus, ckp_meta) are removed while the job is down
        (#8060, #8120), before anything restarts. Returns the deleted paths, relative to the
        table (results travel), or None."""
        from runtime.faults.injector import FaultInjector

        specs = [s for s in self.cfg.faults if s.point == BUS_DELETED_FAULT]
        if not specs or any(f.deleted for f in self.failovers[:-1]):
            return None  # not armed, or the bus went at an earlier failover already
        dfs, base = self.table.dfs, self.table.base_path
        if not FaultInjector(specs, "driver", dfs, base).has_fired(specs[0]):
            return None
        deleted = []
        for path in get_protocol(self.cfg.protocol).dfs_message_dirs(base):
            if dfs.exists(path):
                dfs.delete(path, recursive=True)
                deleted.append(path[len(base) :].lstrip("/"))
        return ",".join(deleted) or None

    # -- the result ----------------------------------------------------------------------------

    def rollbacks(self, coord: CoordinatorView) -> list[dict[str, str]]:
        """Every instant the job rolled back, and why: those pending when an attempt started that
        are gone from the table now, and those the coordinator reports (a failed commit it rolled
        back itself)."""
        timeline = self.table.timeline() if self.pending_at_launch else None
        on_table = set(timeline.pending_commits()) | set(timeline.completed_commits()) if timeline else set()
        out = [{"instant": i, "reason": why} for i, why in self.pending_at_launch.items() if i not in on_table]
        seen = {r["instant"] for r in out}
        out += [
            {"instant": i, "reason": "a failed commit the coordinator rolled back"}
            for i in coord.rolled_back
            if i not in seen
        ]
        return sorted(out, key=lambda r: r["instant"])

    def verify_committed_prefix(
        self, record: JobResult, stream: pa.Table | None, read_actual: Callable[[], pa.Table]
    ) -> CommittedPrefix | None:
        """A run that did not finish: whether its commits hold exactly what they should
        (:mod:`runtime.lab.prefix`); None for a finished run (``exactly_once`` says it all)."""
        if record.status == Status.FINISHED:
            return None
        if stream is None:
            return CommittedPrefix(
                verified=None,
                prefix="not checked: the Spark source keeps no copy of the stream; "
                "run commitlab verify --table with --input to check the table",
            )
        cfg, commits = self.cfg, record.commits
        extra = self.table.read_commit_metadata(commits[-1]["instant"]).get("extraMetadata", {}) if commits else {}
        try:
            return verify_prefix(
                read_actual(),
                stream,
                commits,
                record.figures.checkpoints.detail,
                cfg.round_bounds(),
                extra,
                key=cfg.key_field,
                precombine=cfg.precombine_field,
                partition=cfg.partition_field,
            )
        except (VerifyError, ValueError) as exc:
            return CommittedPrefix(verified=False, prefix="not checked", error=str(exc))

    def faults_not_fired(self, fired: list[FiredFault]) -> list[str]:
        """The armed fault specs no role fired (a marker per firing names the spec)."""
        keys = {(f["point"], f["checkpoint"], f["task"], f.get("target", "")) for f in fired}
        return [s.text() for s in self.cfg.faults if (s.point, s.checkpoint, s.task, s.target) not in keys]

    def trace_markers(self) -> list[dict[str, Any]]:
        """Trace events of the job's failovers (when the job failed, when it was back), for the
        timeline picture and the trace file: what no role could record, since one of them died."""

        def marker(name: str, at: float, args: dict[str, Any]) -> dict[str, Any]:
            ts = round(at * 1e6, 1)
            return {
                "ph": "i",
                "s": "g",
                "pid": "job",
                "tid": "failover",
                "cat": "failover",
                "name": name,
                "ts": ts,
                "args": args,
            }

        out = []
        for n, f in enumerate(self.failovers, start=1):
            what = f"failover {n} ({f.strategy}): restore checkpoint {f.restored_checkpoint}"
            out.append(marker(what, f.at, {"error": (f.error or "")[:300], "down_s": f.down_s}))
            if f.down_s is not None:
                out.append(marker(f"restarted {n}", f.at + f.down_s, {}))
        return out

    def checkpoints(self, jm: JobManagerView | None) -> dict[str, Any]:
        """Every checkpoint of the job, those of job managers a failover replaced included, as
        result.json's ``checkpoints.detail`` (string keys, as JSON has them)."""
        every = {**self.prior_checkpoints, **(jm.checkpoints if jm is not None else {})}
        return {str(k): dataclasses.asdict(v) for k, v in sorted(every.items())}

    def table_record(self, coord: CoordinatorView, figures: dict[str, Any], before: set[str]) -> dict[str, Any]:
        """What the table says of this job, from one listing of its timeline and one read of each
        completed instant's metadata (none when the job stopped before the table was created):
        its commits, which survive any failover; merge-on-read: its compactions and what the
        coordinator scheduled and postponed; the files and bytes it wrote and the write
        amplification."""
        if not self.table.dfs.exists(self.table.hoodie):
            return {"commits": [], "compactions": {}, "data_written": {}}
        timeline = self.table.timeline()
        done = self.table.completed_metadata(timeline, skip=before)
        compactions: dict[str, Any] = {}
        if self.cfg.compacts:
            compactions = {
                "completed": compaction_summaries(done),
                "pending": timeline.pending_compactions(),
                "scheduled": len(coord.compactions_scheduled),
                "postponed": coord.compactions_postponed,
            }
        written: dict[str, Any] = files_written(done)
        checkpoints = max(1, figures["checkpoints"]["completed"])
        for kind in ("base_files", "log_files", "compaction_base_files"):
            written[f"{kind}_per_checkpoint"] = round(written[kind] / checkpoints, 2)
        input_bytes = figures.get("counters", {}).get("input_bytes", 0)
        written["input_bytes"] = input_bytes
        written["write_amplification"] = round(written["bytes"] / input_bytes, 3) if input_bytes else None
        return {"commits": commit_summaries(done), "compactions": compactions, "data_written": written}

    def result(
        self,
        outcome: Outcome,
        *,
        metrics: list[dict[str, Any]],
        driver_dfs_ops: dict[str, dict[str, int]],
        coord: CoordinatorView | None,
        jm: JobManagerView | None,
        dumps: dict[str, TaskDump],
        commits_before: set[str],
        table: str,
        timing: dict[str, Any],
        run_s: float,
    ) -> JobResult:
        """The result record, from what the host gathered of its roles at the end."""
        cfg = self.cfg
        parts = [m for m in metrics if "error" not in m] + self.prior_metrics
        coord = coord or CoordinatorView(instant=None, error="the coordinator did not answer")
        figures = run_figures(parts, driver_dfs_ops, coord.releases, self.checkpoints(jm), dumps, cfg.checkpoints)
        fired = fired_faults(self.table.dfs, self.table.base_path)
        rollbacks = self.rollbacks(coord)
        return JobResult(
            figures=figures,
            protocol=cfg.protocol,
            writers=cfg.writers,
            source=cfg.source,
            table=table,
            status=Status(outcome.status),
            error=outcome.error,
            records=cfg.records,
            **self.table_record(coord, figures.to_json(), commits_before),
            empty_rounds=coord.empty_rounds,
            failovers=self.failovers,
            faults_fired=fired,
            faults_armed=[s.text() for s in cfg.faults],
            faults_not_fired=self.faults_not_fired(fired),
            rolled_back=[r["instant"] for r in rollbacks],
            rollbacks=rollbacks,
            coordinator=CoordinatorRecord(coord.resets, coord.deleted_by_fault, coord.protocol),
            deadlock=outcome.deadlock,
            stalls=list(outcome.stalls),
            timing=timing,
            rows_per_s=round(figures.rows_in / max(1e-9, run_s), 1),
            tasks={n: cast(TaskSummary, _task_summary(d)) for n, d in dumps.items()},
            send_errors=[e for m in metrics + self.prior_metrics for e in m.get("send_errors", [])],
            durations=cfg.effective_durations(),
            config=cfg.record(),
        )


def _task_summary(d: TaskDump) -> dict[str, Any]:
    return {"state": d.state, "error": d.error, "flushes": d.flushes, "protocol": d.protocol, "rows_in": d.rows_in}


def _stalls_text(stalls: list[Stall]) -> str:
    return "; ".join(f"{st.task} {st.what} for {st.blocked_s:.1f}s ({st.waiting_on})" for st in stalls) or "none"


def root_cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {cause}".splitlines()[0][:2000]
