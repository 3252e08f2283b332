"""The coordinator: Hudi's StreamWriteOperatorCoordinator, as Hudi 0.10 / 0.11 run it.

Sources: Apache Hudi 0.10.0 - 0.11.1, ``hudi-flink/.../sink/StreamWriteOperatorCoordinator.java``:

* ``handleEventFromOperator`` -> ``handleWriteMetaEvent``: an event is buffered; one whose instant
  is newer than the coordinator's (``checkState(compareTimestamps(this.instant,
  GREATER_THAN_OR_EQUALS, event.getInstantTime()))``) fails the job ("Receive an unexpected event for
  instant %s from task %d"; the executor's exception hook calls ``context.failJob``). Here:
  :meth:`Coordinator.write_metadata`, which sets ``error`` and reports the failure to the job manager.
* ``notifyCheckpointComplete`` -> ``commitInstant(this.instant, checkpointId)``: commits whatever
  events it received ("commits the ever received events anyway ... a successful checkpoint subsumes
  the old one"), not only when every task sent its last batch; no event at all: nothing happens;
  events without write statuses: ``reset()`` (the buffers are cleared) and ``sendCommitAckEvents``
  (the protocol's :meth:`~runtime.protocols.base.CoordinatorSide.on_empty_round`); a commit:
  ``reset()`` and ``startInstant()``.
* ``NonThrownExecutor``: one thread runs the handlers in submission order; here one FIFO lock.
* Merge-on-read (Hudi 0.13 - 0.15): after the commit and before the next instant starts,
  ``CompactionUtil.scheduleCompaction`` schedules a compaction plan when enough delta commits
  follow the last compaction (:meth:`Coordinator.schedule_compaction`,
  :mod:`runtime.hudi.client.compaction`); the job's compaction operators run it
  (:mod:`runtime.writer.compaction`).

It owns the instants on the table's timeline (requested -> inflight -> completed). A round with no
data reuses the instant; an abort leaves it pending. What writers are told, and how, is the
protocol's coordinator side.

Differences: ``--compaction-pending-guard`` (on by default) postpones a compaction while a newer
writer's instant is pending (:mod:`runtime.writer.compaction_schedule` says why).

Events of an instant older than the current one are accepted (as Hudi) but not
committed into the current instant (Hudi's would be: their base files carry the older instant in
their names, which this table model's readers would not resolve); they are dropped at the next
reset and counted in ``stale_events_dropped``. The protocols modelled never produce them outside a
region failover whose old instant is rolled back anyway.

Concurrency control (``--concurrency-mode``): under a multi-writer mode the write client heartbeats
each instant until its commit, rolls back nothing when an instant starts (LAZY), and the instant's
creation, its commit (with the conflict check under optimistic), a compaction's scheduling and a
held clean run in its transaction (``self.client.transaction``); a commit that fails on a conflict
fails over as any failed commit does (docs/CONCURRENCY.md, :mod:`runtime.hudi.client.concurrency`).

RPC surface: :attr:`Coordinator.RPC_METHODS` are the wire names the hosts dispatch through
:meth:`Coordinator.rpc_handler` (the coordinator's own handlers, then those the protocol's
coordinator side declares in its ``RPC_METHODS``, e.g. coordination-rpc's ``instant_time_request``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from runtime.core import codec, roles, trace_events
from runtime.core.config import JobConfig, flag_of
from runtime.core.env import Env
from runtime.core.fault_spec import DFS_LATENCY_WINDOW_S
from runtime.core.messages import (
    BOOTSTRAP_INSTANT,
    CheckpointNotice,
    CheckpointTrigger,
    CommitRecord,
    CoordinatorState,
    CoordinatorView,
    FileSliceRequest,
    InputFinished,
    InstantRelease,
    PartitionFiles,
    TaskFailure,
    TasksReset,
    WriteMetadataEvent,
    WriteStat,
)
from runtime.hudi.client import compaction
from runtime.hudi.client.concurrency import ConcurrencyControl
from runtime.hudi.client.conflict import WriteConflict
from runtime.hudi.client.table_services import TableServices
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table import meta_client
from runtime.hudi.table.file_system_view import save_view_storage_properties
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError
from runtime.protocols.base import CoordinatorSide, Protocol
from runtime.writer import compaction_schedule
from runtime.writer.timeline_service import EmbeddedTimelineService


class CommitError(RuntimeError):
    pass


class Coordinator:
    # the coordinator's own RPC handlers (wire names); the protocol's side may declare more
    OWN_RPC_METHODS = (
        "write_metadata",
        "checkpoint_coordinator",
        "notify_checkpoint_complete",
        "notify_checkpoint_aborted",
        "end_of_input",
        "reset_tasks",
        "latest_file_slices",
    )

    def __init__(
        self,
        env: Env,
        config: JobConfig,
        table: HudiTable,
        protocol: type[Protocol],
        task_names: list[str],
        *,
        schema_json: str = "",
        resume_checkpoint_id: int = 0,
        job_manager: str = roles.JOB_MANAGER,
    ) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.task_names = task_names
        self.job_manager = job_manager
        self.protocol: CoordinatorSide = protocol.coordinator_side(self)
        clash = set(self.OWN_RPC_METHODS) & set(self.protocol.RPC_METHODS)
        if clash:
            raise ValueError(
                f"protocol {protocol.name} declares coordinator RPC methods {sorted(clash)} it may not override"
            )
        self.instant: str = BOOTSTRAP_INSTANT
        self.events: list[WriteMetadataEvent] = []  # buffered, not yet committed
        self.bootstrapped: set[int] = set()
        self.commits: list[CommitRecord] = []
        self.empty_rounds: list[int] = []
        self.aborted: list[int] = []
        self.cleanings: list[dict[str, float]] = []
        # when each instant was made known to the writers (started, reused, or created on request)
        self.releases: list[tuple[str, float]] = []
        self.schema_json = schema_json
        self.started = asyncio.Event()
        self._lock = asyncio.Lock()  # serializes handlers (Hudi's single-thread executor)
        self.table_lock = asyncio.Lock()  # the table's transaction lock (instant creation, commit, clean)
        self.error: str | None = None
        # after a failover: the checkpoint id the restored tasks resume from (message id for the bus)
        self.resume_checkpoint_id = resume_checkpoint_id
        self.rolled_back: list[str] = []
        self.deleted_by_fault: list[str] = []  # what the bus.deleted fault removed
        self.resets: list[dict[str, Any]] = []  # region failovers this coordinator lived through
        self.messages_on_dfs = protocol.messages_on_dfs
        self.empty_commits = protocol.allows_empty_commit(config)  # hoodie.allow.empty.commit
        # Hudi's coordinator builds the table anew per commit and per instant (--meta-client)
        self.builds_meta_clients = meta_client.meta_client_per_handle(config.meta_client)
        self.file_view = EmbeddedTimelineService.of(env, config, table, protocol)  # --file-system-view
        self.stale_events_dropped = 0  # events of an older instant cleared unused (see the module doc)
        self.compactions_scheduled: list[str] = []
        self.compactions_postponed = 0
        # the num_commits trigger counts completed delta commits from Hudi 1.0 (table version 8)
        self.counts_completed_delta_commits = compaction.counts_completed_delta_commits(protocol.release_table_version)
        self.compaction_pending_guard = config.compaction_pending_guard == "on"
        self.concurrency = ConcurrencyControl.of(config)  # --concurrency-mode, --lock-provider
        self.client = self._write_client(protocol)
        self.conflicts: list[str] = []  # commits a write conflict failed (optimistic)

    def _write_client(self, protocol: type[Protocol]) -> WriteClient:
        """The table's write client (what the coordinator does to the table goes through it), with
        the cleaner and archiver after each writers' commit (--clean-retain-commits,
        --archive-*-commits) and the concurrency control of --concurrency-mode."""
        config = self.config
        services = (config.clean_retain_commits, config.archive_min_commits, config.archive_max_commits)
        return WriteClient(
            self.table, TableServices.parse(*services, protocol.table_service_defaults), self.concurrency
        ).attach(self.env, f"{self.env.role} of {config.job_id or config.table_name}")

    @property
    def RPC_METHODS(self) -> tuple[str, ...]:  # noqa: N802 - the name every host looks up
        """Every wire name this role answers: its own, then the protocol side's."""
        return self.OWN_RPC_METHODS + tuple(self.protocol.RPC_METHODS)

    def rpc_handler(self, method: str) -> Callable[[Any], Any]:
        """The handler of RPC ``method`` (hosts dispatch through this, see runtime.core.env.rpc_handler)."""
        if method in self.OWN_RPC_METHODS:
            return getattr(self, method)  # type: ignore[no-any-return]
        if method in self.protocol.RPC_METHODS:
            return getattr(self.protocol, method)  # type: ignore[no-any-return]
        raise ValueError(f"the coordinator has no RPC method {method!r}; it answers {', '.join(self.RPC_METHODS)}")

    async def start(self) -> None:
        if self.file_view is not None:  # FlinkWriteClients.createWriteClient: where the server listens
            await self.env.io(save_view_storage_properties, self.table)
        if self.protocol.buffers_events and self.resume_checkpoint_id > 0:
            await self._restore_protocol_state()
        await self.protocol.open()

    # -- Hudi 1.x event buffers (protocols with buffers_events: coordination-rpc) ---------------

    async def _restore_protocol_state(self) -> None:
        """Flink's resetToCheckpoint on a global failover: the coordinator's state of the last
        completed checkpoint, read from the completed-checkpoint store the hosts restore from."""
        from runtime.flink.state_backend import StateBackend

        latest = await self.env.io(
            StateBackend(self.table.dfs, self.table.base_path, self.config.checkpoint_store).latest
        )
        raw = latest.states.get(roles.COORDINATOR) if latest is not None else None
        if raw:  # the state crossed the network as a message: it may come back decoded
            await self.protocol.restore_state(raw if isinstance(raw, bytes) else codec.encode(raw))

    async def _write_metadata_1x(self, event: WriteMetadataEvent) -> None:
        """The protocol buffers the event; a bootstrap only counts towards every task being back."""
        await self.protocol.on_write_metadata(event)
        if not event.bootstrap:
            return
        self.bootstrapped.add(event.task_id)
        if len(self.bootstrapped) == len(self.task_names):
            await self.protocol.on_all_bootstrapped()
            self.started.set()

    # -- handlers ------------------------------------------------------------------------------

    async def write_metadata(self, event: WriteMetadataEvent) -> None:
        async with self._lock:
            if self.protocol.buffers_events:
                await self._write_metadata_1x(event)
                if not event.bootstrap:
                    return
            elif not event.bootstrap:
                self._handle_write_event(event)
                return
            else:
                await self._handle_bootstrap(event)
        if self.resets and self.config.hold_bootstraps and not self.started.is_set():
            # HUDI-6194: after a region failover a task that bootstrapped early must not write
            # before the instants are re-initialised (the old one is about to be rolled back), so
            # its bootstrap is answered only once every task's has arrived
            await self.env.wait_for(
                self.started.wait(),
                self.config.bootstrap_hold_s,
                "every write task's bootstrap after the region failover",
                # the hold is the longer of the two
                option=f"{flag_of('instant_wait_timeout_s')}, {flag_of('rpc_timeout_s')}",
            )

    def _handle_write_event(self, event: WriteMetadataEvent) -> None:
        """Hudi's handleWriteMetaEvent: an event for an instant newer than the current one fails
        the job. (coordination-rpc creates instants on request and keeps no current one.)"""
        if self.protocol.eager_instants and event.instant > self.instant:
            self.fail_job(f"Receive an unexpected event for instant {event.instant} from task {event.task_id}")
            return
        self.events.append(event)

    def fail_job(self, reason: str) -> None:
        """Flink's ``OperatorCoordinator.Context.failJob`` (called by Hudi's executor exception
        hook): the job fails over; a coordinator with an error is never kept by a region failover."""
        if self.error is None:
            self.error = reason
        self.env.tracer.instant(f"fail job: {reason}", thread="coordinator")
        self.env.send(self.job_manager, "task_failed", TaskFailure(self.env.role, reason, -1))

    async def reset_tasks(self, notice: TasksReset) -> dict[str, Any]:
        """Region failover (Flink's subtaskReset, for every write task): what the tasks sent since
        their last completed checkpoint is void, and their restored states re-send what that
        checkpoint left uncommitted. The coordinator re-initialises (recommit, roll back, new
        instant) when every task has bootstrapped again."""
        async with self._lock:
            dropped = len(self.events)
            self.events.clear()
            self.bootstrapped.clear()
            self.started.clear()
            self.resume_checkpoint_id = notice.resume_checkpoint_id
            if self.file_view is not None:  # the restarted tasks must see what their last attempt wrote
                self.file_view.server.forget()
            await self.protocol.on_tasks_reset()
            self.resets.append(
                {
                    "resume_checkpoint_id": notice.resume_checkpoint_id,
                    "dropped_events": dropped,
                    "instant": self.instant,
                    "reason": notice.reason[:300],
                }
            )
        self.env.tracer.instant("tasks reset (region failover)", thread="coordinator", args={"dropped_events": dropped})
        return self.resets[-1]

    async def latest_file_slices(self, request: FileSliceRequest) -> PartitionFiles:
        """A write task's file-system view request (``RemoteHoodieTableFileSystemView``), answered
        by the embedded timeline server beside the coordinator, not on its executor."""
        if self.file_view is None:
            raise ValueError("the write tasks list partitions themselves (--file-system-view direct)")
        return await self.file_view.latest_file_slices(request)

    async def _handle_bootstrap(self, event: WriteMetadataEvent) -> None:
        self.bootstrapped.add(event.task_id)
        if event.write_stats:
            self.events.append(event)
        if len(self.bootstrapped) == len(self.task_names):
            await self._init_instant()

    async def _init_instant(self) -> None:
        """All tasks bootstrapped: recommit what a restored checkpoint left uncommitted, then
        start the first instant of this run (message 0 for the message bus)."""
        recover = [e for e in self.events if e.write_stats]
        recommitted = ""
        heartbeats = self.client.heartbeats
        if recover:
            instant = recover[0].instant
            committed = await self.env.io(self.table.is_committed, instant)
            if not committed:
                if heartbeats is not None:  # initInstant: "Recommit should start heartbeat" (LAZY)
                    await heartbeats.start(instant)
                # the checkpoint completed but its commit never happened (a crash): commit now
                try:
                    await self.commit_instant(instant, recover[0].checkpoint_id)
                except CommitError as exc:  # initInstant runs on the executor: its hook fails the job
                    self.fail_job(str(exc))
                    return
                recommitted = instant
            self.events.clear()
        if heartbeats is not None and self.instant != BOOTSTRAP_INSTANT:
            await heartbeats.stop(self.instant)  # initInstant: "stop the heartbeat for old instant"
        if not self.concurrency.lazy:
            # instants that can never complete (a failed attempt's): roll them back first
            # (startCommit -> rollbackFailedWrites, EAGER; under LAZY the cleaner does it)
            timeline = await self.env.io(self.table.timeline)
            for pending in await self.env.io(self.client.failed_writes, timeline):
                await self.env.io(functools.partial(self.client.rollback, pending, [], now=self.env.wall_time()))
                self.rolled_back.append(pending)
        if self.protocol.eager_instants:
            await self._start_instant(self.resume_checkpoint_id, committed=recommitted)
        await self.protocol.on_all_bootstrapped()
        self.started.set()

    async def checkpoint_coordinator(self, trigger: CheckpointTrigger) -> bytes:
        """The coordinator's snapshot, taken before the barriers are injected."""
        spec = self.env.faults.fire("dfs.latency", checkpoint=trigger.checkpoint_id)
        if spec is not None:
            self.env.faults.slow_dfs(spec.value, DFS_LATENCY_WINDOW_S)
        if self.env.faults.fire("dfs.transient_error", checkpoint=trigger.checkpoint_id) is not None:
            self.env.faults.fail_next_dfs_write()  # the host's DFS hook fails the next write or create
        async with self._lock:
            if self.protocol.buffers_events:  # Hudi 1.x: the state is the completed event buffers
                state = self.protocol.snapshot_state(trigger.checkpoint_id)
            else:
                state = codec.encode(CoordinatorState(trigger.checkpoint_id, self.instant, list(self.events)))
        await self.protocol.on_checkpoint_trigger(trigger.checkpoint_id)
        return state

    async def end_of_input(self, notice: InputFinished) -> dict[str, Any]:
        return await self.protocol.on_end_of_input(dict(notice.final_offsets))

    async def notify_checkpoint_complete(self, notice: CheckpointNotice) -> dict[str, Any]:
        ckp = notice.checkpoint_id
        async with self._lock:
            custom = await self.protocol.on_checkpoint_complete(ckp)
            if custom is not None:
                result = custom
                if custom.get("committed"):
                    await self.schedule_compaction(ckp)
                if custom.get("committed") and self.env.faults.fire(
                    "coordinator.after_commit_before_next_instant", checkpoint=ckp
                ):
                    # instants created on request: the next one is whatever is asked for next
                    self.env.crash("injected crash at coordinator.after_commit_before_next_instant")
            elif not self.events:
                # Hudi: every buffer slot empty, "the last checkpoint finished successfully"
                result = {"committed": False, "reason": "no write metadata event received"}
            elif not any(e.write_stats for e in self.events if e.instant == self.instant) and not self.empty_commits:
                # No data this round: reset the buffers, reuse the instant and tell the writers.
                self._reset_events()
                self.empty_rounds.append(ckp)
                self.env.tracer.instant(f"ckp {ckp}: empty round, reuse {self.instant}", thread="coordinator")
                await self.protocol.on_empty_round(ckp, self.instant)
                self.release(self.instant)
                result = {"committed": False, "reason": "empty round", "instant": self.instant}
            else:  # data, or an empty round under hoodie.allow.empty.commit (an empty commit)
                instant = self.instant
                await self.commit_instant(instant, ckp, empty=self.empty_commits)
                self._reset_events()
                await self.schedule_compaction(ckp)
                if self.env.faults.fire("coordinator.after_commit_before_next_instant", checkpoint=ckp):
                    self.env.crash("injected crash at coordinator.after_commit_before_next_instant")
                await self._start_instant(ckp, committed=instant)
                result = {"committed": True, "instant": instant}
            if self.messages_on_dfs and self.env.faults.fire("bus.deleted", checkpoint=ckp):
                # someone removes the bus right after message ckp was written (#8060)
                deleted = await self.protocol.delete_dfs_messages()
                self.deleted_by_fault.extend([deleted] if deleted else [])
        hold = self.config.schedule.clean_lock_s.get(ckp)
        if hold:
            self.env.spawn(self.clean(hold, ckp), f"clean-after-{ckp}")
        return result

    async def notify_checkpoint_aborted(self, notice: CheckpointNotice) -> None:
        async with self._lock:
            self.aborted.append(notice.checkpoint_id)
            if self.instant != BOOTSTRAP_INSTANT:
                await self.protocol.on_checkpoint_aborted(notice.checkpoint_id, self.instant)

    async def clean(self, hold_s: float, after_checkpoint: int) -> None:
        """A table service (Hudi's cleaner) that holds the table lock for ``hold_s``: the
        lock-held scenario of #19902."""
        start = self.env.now()
        async with self.table_lock, self.client.transaction("", "clean"):
            acquired = self.env.now()
            await self.env.sleep(hold_s)
        self.cleanings.append(
            {"after_checkpoint": after_checkpoint, "held_s": hold_s, "waited_s": round(acquired - start, 3)}
        )
        self.env.tracer.complete(
            "clean (holds the table lock)", acquired, self.env.now(), thread="coordinator", cat=trace_events.CLEAN
        )

    # -- internals -----------------------------------------------------------------------------

    def _reset_events(self) -> None:
        """Hudi's ``reset()``: a new, empty event buffer."""
        stale = [e for e in self.events if e.write_stats]
        if stale:
            self.stale_events_dropped += len(stale)
            self.env.tracer.instant(
                f"dropped {len(stale)} events of older instants",
                thread="coordinator",
                args={"instants": sorted({e.instant for e in stale})},
            )
        self.events.clear()

    async def schedule_compaction(self, checkpoint_id: int) -> str | None:
        """``CompactionUtil.scheduleCompaction`` after a commit (:mod:`runtime.writer.compaction_schedule`)."""
        return await compaction_schedule.schedule_compaction(self, checkpoint_id)

    async def create_instant(self, checkpoint_id: int = -1) -> str:
        """requested -> inflight on the timeline, under the table lock. ``checkpoint_id``: the
        checkpoint the instant is for, when the caller knows it (fault points use it)."""

        def create(generated: str | None) -> str:
            if self.builds_meta_clients:  # startCommit's and transitionRequestedToInflight's tables
                meta_client.meta_clients(self.table, loaded=1, bare=2)
            timeline = self.table.timeline()
            if self.protocol.rolls_back_at_start_commit and not self.concurrency.lazy:
                # startCommit -> rollbackFailedWrites (EAGER): every pending writer's instant first
                spared = self.protocol.instants_in_use()
                undone = [i for i in self.client.failed_writes(timeline) if i not in spared]
                for pending in undone:
                    self.client.rollback(pending, [], now=self.env.wall_time())
                    self.rolled_back.append(pending)
                timeline = self.table.timeline() if undone else timeline
            instant = generated or self.table.new_instant_time(self.env.wall_time(), timeline)
            self.client.start_instant(instant, timeline)
            return instant

        async with self.table_lock, self.client.transaction("", "create an instant"):
            instant = await self.env.io(create, await self.client.new_instant_time(self.env))
            if self.client.heartbeats is not None:  # startCommit: the heartbeat starts (LAZY)
                await self.client.heartbeats.start(instant)
        if self.env.faults.fire("tasks.fail_at_instant_start", checkpoint=checkpoint_id):
            # HUDI-6194: the whole task side fails over while this instant is being announced
            for task in self.task_names:
                self.env.send(task, "inject_failure", f"lost with every task as {instant} started")
        return instant

    async def _start_instant(self, checkpoint_id: int, committed: str) -> None:
        start = self.env.now()
        new = await self.create_instant(checkpoint_id)
        await self.protocol.on_instant_started(checkpoint_id, committed, new)
        self.release(new)
        self.instant = new
        self.env.tracer.complete(
            f"start instant {new}",
            start,
            self.env.now(),
            thread="coordinator",
            cat=trace_events.INSTANT,
            args={"checkpoint": checkpoint_id},
        )

    def release(self, instant: str) -> None:
        """Records that writers may now learn ``instant`` (the start of commit-to-unblock)."""
        self.releases.append((instant, self.env.now()))
        del self.releases[:-1000]

    async def commit_instant(
        self, instant: str, checkpoint_id: int, extra: dict[str, str] | None = None, *, empty: bool = False
    ) -> CommitRecord | None:
        """Commits the buffered events of ``instant`` (removing them from the buffer). Writes the
        commit file under the table lock; on failure leaves the instant inflight and fails (the
        job fails over and recommits it). Returns None when the instant has no data, unless
        ``empty`` (hoodie.allow.empty.commit): then an empty commit is written."""
        start = self.env.now()
        events = [e for e in self.events if e.instant == instant]
        self.events = [e for e in self.events if e.instant != instant]
        stats = _latest_stats(events)
        if not stats and not empty:
            return None
        metadata = {"schema": self.schema_json, "checkpoint.id": str(checkpoint_id), **(extra or {})}
        if self.env.faults.fire("coordinator.before_commit_file", checkpoint=checkpoint_id):
            self.env.crash("injected crash at coordinator.before_commit_file")
        try:
            async with self.table_lock:
                if self.client.heartbeats is not None:  # commitStats: abortIfHeartbeatExpired
                    await self.client.heartbeats.abort_if_expired(instant)
                async with self.client.transaction(instant, f"commit {instant}"):
                    await self.env.io(
                        functools.partial(
                            self._commit,
                            instant,
                            stats,
                            metadata,
                            empty=empty,
                            now=self.env.now(),
                            wall=self.env.wall_time(),
                        )
                    )
        except (OSError, TableError) as exc:
            if isinstance(exc, WriteConflict):
                self.conflicts.append(str(exc))
            # No rollback here: the checkpoint this commit belongs to has completed, so the sources
            # will not replay its records. The instant stays inflight; the job fails over and the
            # next coordinator recommits it from the checkpoint's write statuses, as Hudi's does.
            # (Rolling back lost the checkpoint's rows: the simulator found it with a DFS fault.)
            self.events = events + self.events
            self.error = f"commit of {instant} failed; the instant stays inflight for the restarted coordinator: {exc}"
            raise CommitError(self.error) from exc
        if self.client.heartbeats is not None:  # the instant completed: its heartbeat stops
            await self.client.heartbeats.stop(instant)
        rows = sum(s.keys_written for s in stats)
        rec = CommitRecord(instant, checkpoint_id, rows, len(stats), self.env.wall_time())
        self.commits.append(rec)
        self.env.tracer.complete(
            f"commit {instant}",
            start,
            self.env.now(),
            thread="coordinator",
            cat=trace_events.COMMIT,
            args={"checkpoint": checkpoint_id, "rows": rows},
        )
        return rec

    def _commit(
        self, instant: str, stats: list[WriteStat], metadata: dict[str, str], *, empty: bool, now: float, wall: float
    ) -> None:
        """``commitStats``: the tables it and the post-commit services build, then the commit file."""
        services = self.client.services.any
        if self.builds_meta_clients:  # the table services' table lists the timeline after the commit
            meta_client.meta_clients(self.table, loaded=1 if services else 2, bare=2 if services else 1)
        self.client.commit(instant, stats, metadata, empty=empty, now=now)
        if not services:
            return
        try:  # the commit is done: a table service that fails leaves it committed, as Hudi's async clean
            self.rolled_back.extend(self.client.clean_and_archive(now, wall_time=wall))
        except OSError as exc:
            self.env.tracer.instant(f"clean/archive after {instant} failed: {exc}"[:300], thread="coordinator")

    def describe(self) -> CoordinatorView:
        return CoordinatorView(
            instant=self.instant,
            commits=list(self.commits),
            empty_rounds=list(self.empty_rounds),
            aborted=list(self.aborted),
            bootstrapped=sorted(self.bootstrapped),
            error=self.error,
            cleanings=list(self.cleanings),
            buffered_events=len(self.events),
            releases=[InstantRelease(instant, at) for instant, at in self.releases],
            rolled_back=list(self.rolled_back),
            protocol=self.protocol.describe(),
            deleted_by_fault=list(self.deleted_by_fault),
            resets=list(self.resets),
            stale_events_dropped=self.stale_events_dropped,
            compactions_scheduled=list(self.compactions_scheduled),
            compactions_postponed=self.compactions_postponed,
            concurrency=self.client.concurrency_figures(self.conflicts),
        )


def _latest_stats(events: list[WriteMetadataEvent]) -> list[WriteStat]:
    """The write stats of an instant's events, a later flush of the same file version superseding
    (copy-on-write rewrites one base file per file group and instant; merge-on-read writes a log
    file per flush)."""
    latest: dict[str, WriteStat] = {}
    for e in events:
        for s in e.write_stats:
            latest[s.path] = s
    return list(latest.values())
