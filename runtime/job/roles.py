"""The kinds of role a job runs, in one table: how each is built, the arguments it resumes with,
how it starts, whether a failover restarts it, and what a host must know of it.

Every host builds and starts roles through this table (the Ray host in ``actors/``, the
simulation host in ``runtime/sim/sim_run.py``), so a new kind of role is one entry here. The kinds:
the coordinator, the job manager, the merge-on-read compaction operators
(:mod:`runtime.writer.compaction`), one write task and one source per writer, and the protocol's
own roles (timeline server, control topic: ``protocol.extra_roles``) through one generic entry.

Flink's region failover (``RestartPipelinedRegionFailoverStrategy``) restarts a region's tasks and
keeps the coordinator (``OperatorCoordinator#subtaskReset``); a global one
(``RestartAllFailoverStrategy``) restarts the coordinator too. The protocol's own roles are
services outside the Flink job: no failover restarts them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.core import codec
from runtime.core.codec import message
from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.messages import TaskState
from runtime.core.roles import COORDINATOR, JOB_MANAGER, SOURCE, WRITER, source_name, writer_name
from runtime.flink.job_manager import JobManager
from runtime.flink.source import Source
from runtime.flink.state_backend import StateBackend
from runtime.hudi.table.hudi_table import HudiTable
from runtime.job.failover import ResumePoint
from runtime.protocols import get_protocol
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
from runtime.writer.write_task import WriteTask


class Role(Protocol):
    """What every built role offers: the methods other roles may call on it. A role may also
    have ``start`` (awaited before it takes messages), ``run`` (the loop its host spawns),
    ``describe`` (the coordinator's, the job manager's view) and ``dump`` (a write task's
    introspection); hosts look those up by the role's kind or by name."""

    @property
    def RPC_METHODS(self) -> tuple[str, ...]: ...  # noqa: N802 - the name every host looks up


@message
@dataclass(frozen=True)
class RoleArgs:
    """What a role is built with beyond the job's configuration, fresh or resuming after a
    failover; each kind reads its own (:data:`ROLE_KINDS`). A codec message: the Ray host sends
    it to the role's process."""

    task_id: int = 0  # a write task's, a source's, a compaction task's index
    writer: str = ""  # a source's write task
    schema_json: str = ""  # the coordinator's, the compaction commit sink's: the commit metadata's schema
    # resuming (runtime.job.failover.ResumePoint): a write task and the coordinator resume after
    # ``resume_checkpoint_id`` (None: a fresh start); the job manager's next checkpoint id and
    # round; a source's round and its offset in the stream
    resume_checkpoint_id: int | None = None
    restored_state: bytes | None = None  # a write task's checkpointed TaskState
    start_checkpoint_id: int = 1
    start_round: int = 1
    start_offset: int = 0


@message
@dataclass(frozen=True)
class RoleSpec:
    """One role of the job: its name, its kind and what it is built with (a codec message)."""

    name: str
    kind: str  # a RoleKind's kind, or one of the protocol's extra roles
    args: RoleArgs = field(default_factory=RoleArgs)


@dataclass(frozen=True)
class RoleNames:
    task_names: list[str]
    source_names: list[str]


@dataclass(frozen=True)
class JobRoles:
    """The role names of one job, and what the roles are built with that the job fixes."""

    names: RoleNames
    compaction: list[str]  # merge-on-read: runtime.writer.compaction, in start order
    extra: list[str]  # the protocol's own roles
    schema_json: str

    @classmethod
    def of(cls, cfg: JobConfig, schema_json: str) -> JobRoles:
        writers = range(cfg.writers)
        names = RoleNames([writer_name(i) for i in writers], [source_name(i) for i in writers])
        return cls(names, compaction_role_names(cfg), list(get_protocol(cfg.protocol).roles_for(cfg)), schema_json)


@dataclass(frozen=True)
class Resume:
    """Where restarted roles resume (:mod:`runtime.job.failover`): the checkpoint ids and round
    (``at``), and each role's restored state; None and empty on a fresh start."""

    at: ResumePoint | None = None
    states: dict[str, bytes] = field(default_factory=dict)


Build = Callable[[RoleSpec, Env, JobConfig, HudiTable, RoleNames, Any], Role]


@dataclass(frozen=True)
class RoleKind:
    """One kind of role. ``build`` makes it (``shard`` feeds a source); ``names`` are the job's
    roles of this kind; ``args`` what one is built with, fresh or resuming; ``start`` gives what
    to await before it takes messages (None: nothing to start). ``restarts``: by a global failover,
    ``in_region``: by a region failover too. ``spawns_loop``: its host spawns its ``run()``
    (a source's emitting loop when it starts; the job manager's run when the driver says).
    ``starts_together``: the roles of a launch start as one (Flink deploys a region's tasks
    together). ``takes_shard``: the host hands it its share of the stream."""

    kind: str
    build: Build
    names: Callable[[JobRoles], list[str]]
    args: Callable[[str, JobRoles, Resume], RoleArgs] = lambda _name, _roles, _resume: RoleArgs()
    start: Callable[[Any, RoleSpec], Awaitable[None] | None] = lambda _role, _spec: None
    restarts: bool = True
    in_region: bool = True
    spawns_loop: bool = False
    starts_together: bool = False
    takes_shard: bool = False


# -- how each kind is built (the same code on every host) ------------------------------------------


def _build_coordinator(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    return Coordinator(
        env,
        cfg,
        table,
        get_protocol(cfg.protocol),
        names.task_names,
        schema_json=spec.args.schema_json,
        resume_checkpoint_id=spec.args.resume_checkpoint_id or 0,
    )


def _build_job_manager(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    return JobManager(
        env,
        cfg,
        names.task_names,
        names.source_names,
        state_backend=StateBackend(env.dfs, table.base_path, cfg.checkpoint_store),
        start_checkpoint_id=spec.args.start_checkpoint_id,
        start_round=spec.args.start_round,
        compaction_plan=PLAN_OPERATOR if cfg.compacts else "",
    )


def _build_plan_operator(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    tasks = [n for n in compaction_role_names(cfg) if n.startswith(f"{COMPACT_TASK}-")]
    return CompactionPlanOperator(env, cfg, table, tasks)


def _build_compact_task(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    return CompactOperator(env, cfg, table.with_dfs(env.dfs.for_role("compaction.data")), spec.args.task_id)


def _build_commit_sink(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    return CompactionCommitSink(env, cfg, table, spec.args.schema_json)


def _build_writer(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    data_table = table.with_dfs(env.dfs.for_role("writer.data"))
    return WriteTask(env, cfg, spec.args.task_id, table, get_protocol(cfg.protocol), data_table=data_table)


def _build_source(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, shard: Any) -> Role:
    a = spec.args
    return Source(env, cfg, a.task_id, shard, writer=a.writer, start_round=a.start_round, start_offset=a.start_offset)


def _build_protocol_role(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, _: Any) -> Role:
    protocol = get_protocol(cfg.protocol)
    if spec.kind in protocol.extra_roles:  # a role the protocol brings (timeline server, control topic)
        role: Role = protocol.make_role(spec.kind, env, cfg, table, names.task_names)
        return role
    raise ValueError(f"unknown role kind {spec.kind!r}")


# -- what each kind is built with, fresh or resuming -------------------------------------------------


def _coordinator_args(name: str, roles: JobRoles, resume: Resume) -> RoleArgs:
    at = resume.at
    return RoleArgs(schema_json=roles.schema_json, resume_checkpoint_id=at.resume_checkpoint_id if at else None)


def _job_manager_args(name: str, roles: JobRoles, resume: Resume) -> RoleArgs:
    at = resume.at
    return RoleArgs(start_checkpoint_id=at.start_checkpoint_id, start_round=at.start_round) if at else RoleArgs()


def _writer_args(name: str, roles: JobRoles, resume: Resume) -> RoleArgs:
    task_id = roles.names.task_names.index(name)
    if resume.at is None:
        return RoleArgs(task_id)
    return RoleArgs(
        task_id, resume_checkpoint_id=resume.at.resume_checkpoint_id, restored_state=resume.states.get(name)
    )


def _source_args(name: str, roles: JobRoles, resume: Resume) -> RoleArgs:
    i = roles.names.source_names.index(name)
    if resume.at is None:
        return RoleArgs(i, roles.names.task_names[i])
    state = resume.states.get(name)
    offset = codec.decode(state).offset if state else 0
    return RoleArgs(i, roles.names.task_names[i], start_round=resume.at.start_round, start_offset=offset)


def _schema_args(name: str, roles: JobRoles, resume: Resume) -> RoleArgs:
    return RoleArgs(schema_json=roles.schema_json)


def _compact_task_args(name: str, roles: JobRoles, resume: Resume) -> RoleArgs:
    return RoleArgs(int(name.rsplit("-", 1)[1]))


# -- how each kind starts ------------------------------------------------------------------------------


def _start_writer(role: Any, spec: RoleSpec) -> Awaitable[None]:
    restored = spec.args.restored_state
    state = codec.decode(restored, TaskState) if restored else None
    started: Awaitable[None] = role.start(state, resume_checkpoint_id=spec.args.resume_checkpoint_id)
    return started


def _start_if_startable(role: Any, spec: RoleSpec) -> Awaitable[None] | None:
    return role.start() if hasattr(role, "start") else None


def _compaction(name: str) -> Callable[[JobRoles], list[str]]:
    return lambda roles: [n for n in roles.compaction if n == name or n.startswith(f"{name}-")]


# the kinds in the order a failover restarts them (compaction: sink first, the tasks send to it)
ROLE_KINDS: tuple[RoleKind, ...] = (
    RoleKind(
        COORDINATOR,
        _build_coordinator,
        lambda _: [COORDINATOR],
        _coordinator_args,
        _start_if_startable,
        in_region=False,
    ),
    RoleKind(JOB_MANAGER, _build_job_manager, lambda _: [JOB_MANAGER], _job_manager_args),
    RoleKind(COMMIT_SINK, _build_commit_sink, _compaction(COMMIT_SINK), _schema_args, _start_if_startable),
    RoleKind(COMPACT_TASK, _build_compact_task, _compaction(COMPACT_TASK), _compact_task_args, _start_if_startable),
    RoleKind(PLAN_OPERATOR, _build_plan_operator, _compaction(PLAN_OPERATOR), start=_start_if_startable),
    RoleKind(WRITER, _build_writer, lambda r: r.names.task_names, _writer_args, _start_writer, starts_together=True),
    RoleKind(SOURCE, _build_source, lambda r: r.names.source_names, _source_args, spawns_loop=True, takes_shard=True),
)
# the protocol's own roles (kind: their name); services outside the Flink job, never restarted
PROTOCOL_ROLE = RoleKind("", _build_protocol_role, lambda r: r.extra, start=_start_if_startable, restarts=False)
_BY_KIND = {k.kind: k for k in ROLE_KINDS}


def role_kind(kind: str) -> RoleKind:
    """The entry of a spec's kind (a protocol's role: the generic entry)."""
    return _BY_KIND.get(kind, PROTOCOL_ROLE)


def kind_of(name: str, roles: JobRoles) -> RoleKind:
    """The kind of the job's role ``name``."""
    return next((k for k in ROLE_KINDS if name in k.names(roles)), PROTOCOL_ROLE)


def role_specs(names: list[str], roles: JobRoles, resume: Resume) -> list[RoleSpec]:
    """The specs of ``names``, resuming from ``resume`` (empty on a fresh start)."""
    out = []
    for name in names:
        kind = kind_of(name, roles)
        out.append(RoleSpec(name, kind.kind or name, kind.args(name, roles, resume)))
    return out


def restartable(roles: JobRoles, *, region: bool) -> list[str]:
    """What a failover restarts: the protocol's own roles live on, the coordinator too in a
    region. The compaction operators are connected to the write tasks, so in their region."""
    return [n for k in ROLE_KINDS if k.restarts and (k.in_region or not region) for n in k.names(roles)]


def first_launch(roles: JobRoles) -> list[str]:
    """Every role the job's first launch places: the protocol's own roles first (the coordinator
    may call them as it starts), then every restartable one."""
    return [*roles.extra, *restartable(roles, region=False)]


def make_role(spec: RoleSpec, env: Env, cfg: JobConfig, table: HudiTable, names: RoleNames, shard: Any = None) -> Role:
    """Builds the role of ``spec`` (the same code on every host; ``shard`` feeds a source)."""
    return role_kind(spec.kind).build(spec, env, cfg, table, names, shard)


def start_role(role: Any, spec: RoleSpec) -> Awaitable[None] | None:
    """What starts a built role, to await before it takes messages; None when it has nothing
    to start (a source's loop and the job manager's run are the host's to spawn)."""
    return role_kind(spec.kind).start(role, spec)
