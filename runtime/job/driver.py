"""One job on any host: the launch in Flink's order, the supervision loop and the failover.

The Ray host (``actors/ray_host.py``) and the simulation host (``runtime/sim/sim_run.py``) implement
:class:`JobHost`: how a role is placed, started, killed, called and awaited, and how time passes.
:class:`JobDriver` does everything else once, for both: which roles exist and in which order they
start (:mod:`runtime.job.roles`), the watchdog, the failover decision (Flink's restart-all or
region strategy, :mod:`runtime.job.failover`); :mod:`runtime.job.record` makes its result.

The order follows Flink's deployment: the coordinator starts before its tasks (Flink 1.16,
``OperatorCoordinatorHolder#start`` runs when the job starts, before tasks are deployed); a
region failover (``RestartPipelinedRegionFailoverStrategy``) restarts the region's tasks
together and resets the coordinator (``OperatorCoordinator#subtaskReset``); a global one
restarts every task and the coordinator (``RestartAllFailoverStrategy``). Before a region's tasks
are reset, the checkpoints still pending are aborted and the coordinator, which lives on, is told
so (Flink 1.14-1.18 ``SchedulerBase.restoreState`` -> ``CheckpointCoordinator.abortPendingCheckpoints``
(``JOB_FAILOVER_REGION``) -> ``sendAbortedMessages`` -> ``notifyCheckpointAborted`` on every
coordinator): message-bus writes the aborted message the restarted tasks' next barrier reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.core import roles
from runtime.core.config import ConfigError, flag_of
from runtime.core.messages import (
    CheckpointNotice,
    CheckpointView,
    CompletedCheckpoint,
    CoordinatorView,
    JobManagerView,
    TaskDump,
    TasksReset,
)
from runtime.core.metrics import MetricsSnapshot
from runtime.core.roles import COORDINATOR, JOB_MANAGER
from runtime.flink.state_backend import StateBackend
from runtime.hudi.table.hudi_table import HudiTable
from runtime.job.failover import region_failover_applies, resume_checkpoint_id, resume_plan, resume_summary
from runtime.job.prepare import ResolvedJob
from runtime.job.roles import JobRoles, Resume, RoleNames, RoleSpec, first_launch, restartable, role_specs
from runtime.lab.deadlock import Stall, find_deadlock, find_stalls, stalls_text
from runtime.lab.results import FailoverRecord
from runtime.lab.status import Status
from runtime.protocols import get_protocol

POLL_S = 0.25  # the watchdog's period
BUS_DELETED_FAULT = "bus.deleted_between_restarts"


class JobHost(Protocol):
    """What differs between hosts. Names are role names; ``start`` builds and starts roles
    (:func:`~runtime.job.roles.make_role`, :func:`~runtime.job.roles.start_role`) placed before with ``place``."""

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

    def on_failover(self, error: str | None, restore: CompletedCheckpoint | None) -> None: ...

    async def kill(self, names: Sequence[str]) -> list[MetricsSnapshot]: ...

    async def call(self, name: str, method: str, msg: Any) -> Any: ...

    async def progress(self) -> None: ...


@dataclass
class Outcome:
    status: Status
    error: str | None = None
    deadlock: Any = None
    stalls: list[Stall] = field(default_factory=list)


class JobDriver:
    """Runs one job's topology on a :class:`JobHost`; ``table`` is the driver's view of it."""

    def __init__(self, job: ResolvedJob, table: HudiTable, *, schema_json: str) -> None:
        self.cfg = cfg = job.config
        self.table = table
        self.protocol = get_protocol(cfg.protocol)
        self.roles = JobRoles.of(cfg, schema_json)
        self.failovers: list[FailoverRecord] = []
        self.last_triggered = 0
        self.prior_checkpoints: dict[int, CheckpointView] = {}
        self.prior_metrics: list[MetricsSnapshot] = []  # of the roles failovers replaced
        self.deadline: float | None = None
        self.stalls: list[Stall] = []  # what the watchdog saw last
        self.t_launched: float | None = None  # when the first launch had every role up
        self.t_sources: float | None = None  # when the first launch began starting the sources
        self.failover_clock = "at"  # the failover record's time key in result.json
        # instants pending when an attempt started, and why: the coordinator rolls them back
        self.pending_at_launch: dict[str, str] = {}
        # why the instants pending at the first launch are (the host says when a run died)
        self.left_pending_by = "an earlier run of this table"

    @property
    def names(self) -> RoleNames:
        return self.roles.names

    @property
    def task_names(self) -> list[str]:
        return self.roles.names.task_names

    @property
    def source_names(self) -> list[str]:
        return self.roles.names.source_names

    @property
    def compaction_names(self) -> list[str]:
        return self.roles.compaction

    def restartable(self, region: bool) -> list[str]:
        """What a failover restarts (:func:`runtime.job.roles.restartable`)."""
        return restartable(self.roles, region=region)

    def specs(self, names: Sequence[str], resume: Resume) -> list[RoleSpec]:
        """The specs of ``names``, resuming from ``resume`` (empty on a fresh start)."""
        return role_specs(list(names), self.roles, resume)

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
                outcome = Outcome(Status.FAILED, root_cause(exc))
            if outcome.status == Status.FAILED and len(self.failovers) < self.cfg.max_restarts:
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
        self.note_pending(f"left pending by {self.left_pending_by}")
        for spec in self.specs(first_launch(self.roles), self.first_resume()):
            host.place(spec, 0)  # every role exists before anything starts
        await host.start(self.roles.extra)  # protocol roles first: the coordinator may call them
        await self.launch(host, region=False)
        self.t_launched = host.now()

    def first_resume(self) -> Resume:
        """A fresh start, or with ``--from-checkpoint`` the state of that checkpoint of the table's
        store (Flink's --fromSavepoint): the job's checkpoint ids continue after it."""
        wanted = self.cfg.from_checkpoint
        if not wanted:
            return Resume()
        store = StateBackend(self.table.dfs, self.table.base_path, self.cfg.checkpoint_store)
        held = store.list_ids()
        restore = store.keep_up_to(wanted)
        if restore is None:
            raise ConfigError(
                f"{flag_of('from_checkpoint')} {wanted}: the table's checkpoint store holds "
                f"{', '.join(map(str, held)) or 'no checkpoint'}; give one of those, or 0 for a start without state"
            )
        planned, at = resume_plan(self.cfg, 0, restore)
        self.last_triggered = restore.checkpoint_id
        return Resume(at, planned.states if planned is not None else {})

    async def launch(self, host: JobHost, *, region: bool) -> None:
        """Starts the placed roles in Flink's order; a region failover keeps the coordinator."""
        if region:
            await host.rebind(COORDINATOR)  # kept: it must reach the new tasks
        else:
            await host.start([COORDINATOR])
        await host.start([JOB_MANAGER])
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
            if self.t_sources is None:
                self.t_sources = host.now()
            await host.start(self.source_names)

    async def supervise(self, host: JobHost) -> Outcome:
        """Waits for the job manager a poll at a time: dead roles, deadlocks, the time limits."""
        cfg = self.cfg
        if self.deadline is None:
            self.deadline = host.now() + cfg.job_timeout_s
        while True:
            ended, error = await host.wait_job_manager(POLL_S)
            if ended:
                return Outcome(Status.FINISHED if error is None else Status.FAILED, error, None, self.stalls)
            dumps = await host.dumps()
            dead = host.dead(dumps)
            if dead is not None:  # a dead role fails the job, which fails over
                return Outcome(Status.FAILED, dead, None, self.stalls)
            deadlock = find_deadlock(dumps, cfg.deadlock_threshold_s)
            if deadlock is not None:
                return Outcome(Status.DEADLOCKED, None, deadlock, self.stalls)
            self.stalls = stalls = find_stalls(dumps, cfg.deadlock_threshold_s)
            if host.now() > self.deadline:
                waiting = await host.timed_out()
                error = f"the job did not finish within {cfg.job_timeout_s:g}s ({flag_of('job_timeout_s')}); {waiting}"
                return Outcome(Status.TIMED_OUT, f"{error}stalled tasks: {stalls_text(stalls)}", None, stalls)
            stopped = host.interrupted()
            if stopped is not None:
                return Outcome(Status.INTERRUPTED, stopped, None, stalls)
            limit = host.past_limit()
            if limit is not None:
                return Outcome(Status.TIMED_OUT, f"{limit}; stalled tasks: {stalls_text(stalls)}", None, stalls)
            await host.progress()

    # -- failover ------------------------------------------------------------------------------

    async def failover(self, host: JobHost, error: str | None) -> None:
        """Restarts from the last completed checkpoint: globally (every task, source, the
        coordinator and the job manager) or by region (the coordinator lives on and is told to
        reset; it re-initialises once every task has bootstrapped again)."""
        restore = StateBackend(self.table.dfs, self.table.base_path, self.cfg.checkpoint_store).latest()
        jm = await host.describe_job_manager()
        if jm is not None:
            self.last_triggered = max([self.last_triggered, jm.current, *jm.checkpoints])
            self.prior_checkpoints.update(jm.checkpoints)
        region = False
        if self.cfg.failover == "region":  # the coordinator must be alive and sound
            coord = await host.describe_coordinator()
            region = region_failover_applies(self.cfg, coordinator_sound=coord is not None and not coord.error)
        restored, resumed_round = resume_summary(self.cfg, self.last_triggered, restore)
        record = FailoverRecord(error, host.now(), "region" if region else "global", restored, resumed_round)
        record.clock = self.failover_clock
        self.failovers.append(record)
        host.on_failover(error, restore)
        record.deleted = self.delete_bus_if_armed()
        names = self.restartable(region)
        self.prior_metrics += await host.kill(names)
        self.note_pending(f"left pending by attempt {len(self.failovers)}, which failed: {(error or '?')[:200]}")
        planned, resume = resume_plan(self.cfg, self.last_triggered, restore)
        for spec in self.specs(names, Resume(resume, planned.states if planned is not None else {})):
            host.place(spec, len(self.failovers))
        if region:
            await self.abort_pending(host, jm)
            notice = TasksReset(resume_checkpoint_id(self.last_triggered, restore), error or "")
            record.coordinator_reset = await host.call(COORDINATOR, "reset_tasks", notice)
        await self.launch(host, region=region)
        record.down_s = round(host.now() - record.at, 6)

    async def abort_pending(self, host: JobHost, jm: JobManagerView | None) -> None:
        """Region failover: the checkpoints the failed attempt left pending are aborted, and the
        coordinator is notified of each, oldest first (the tasks being restarted are not: their
        attempts are gone)."""
        pending = sorted(k for k, c in (jm.checkpoints if jm is not None else {}).items() if c.status == "pending")
        for ckp in pending:
            await host.call(COORDINATOR, "notify_checkpoint_aborted", CheckpointNotice(ckp, "job failover (region)"))

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
        if not FaultInjector(specs, roles.DRIVER, dfs, base).has_fired(specs[0]):
            return None
        deleted = []
        for path in get_protocol(self.cfg.protocol).dfs_message_dirs(base):
            if dfs.exists(path):
                dfs.delete(path, recursive=True)
                deleted.append(path[len(base) :].lstrip("/"))
        return ",".join(deleted) or None


def root_cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {cause}".splitlines()[0][:2000]
