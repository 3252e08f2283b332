"""P4 ``coordination-rpc`` (HUDI-9381, Hudi 1.1, PR #13285) and its async variant (PR #19960).

Sources (apache/hudi, module hudi-flink, Hudi 1.1 and master):

- ``sink/StreamWriteFunction``: ``flushBucket`` (an eager flush) and ``flushRemaining`` (the flush
  in ``snapshotState``) each call ``instantToWrite``, so **every flush sends one request**; their
  events carry the task's ``checkpointId``.
- ``sink/common/AbstractStreamWriteFunction``: ``instantToWrite`` ->
  ``correspondent.requestInstantTime(this.checkpointId)``; ``checkpointId`` is the last checkpoint
  the task snapshotted (-1 before the first; updated after the barrier flush), so data written
  after barrier k-1, eager or at barrier k, asks for key k-1. ``initializeState`` ->
  ``sendBootstrapEvent``: a task on attempt > 0 sends ``WriteMetadataEvent.emptyBootstrap(taskID,
  checkpointId)``, not its checkpointed write statuses (those are re-sent only on attempt 0).
- ``sink/event/Correspondent``: ``InstantTimeRequest(checkpointId)`` / ``InstantTimeResponse``
  through ``TaskOperatorEventGateway.sendRequestToCoordinator``: the reply returns on the
  request's future, not through the mailbox.
- ``sink/StreamWriteOperatorCoordinator``: ``handleCoordinationRequest`` ->
  ``handleInstantRequest`` (single-thread ``instantRequestExecutor``): a checkpoint id without a
  buffer gets a new instant (``startInstant``, under the table's transaction lock) and
  ``eventBuffers.initNewEventBuffer(checkpointId, instant)``; one id, one instant.
  ``handleWriteMetaEvent`` adds an event to its buffer; ``handleBootstrapEvent`` with the bootstrap
  instant -> ``eventBuffers.cleanLegacyEvents`` (drops that task's events of keys >= its
  checkpoint id). ``notifyCheckpointComplete(n)`` -> ``commitInstants``: every buffer with key < n,
  in ascending order, **whatever the tasks reported**; ``commitInstant`` on a buffer with no write
  status resets the buffer and leaves the instant pending (no rollback). ``checkpointCoordinator``
  serializes ``eventBuffers.getAllCompletedEvents()`` (buffers in which every task sent its last
  batch); ``resetToCheckpoint`` restores them and ``start`` -> ``restoreEvents`` ->
  ``recommitInstant`` commits each one whose instant is not completed (HUDI-9570, PR #13543); one
  already completed stays buffered, so the next ``commitInstants`` commits it a second time, after
  later instants (``runtime.lab.fault_matrix.RECOMMITTED_COMPLETED``). An abort does nothing: the
  next success commits the backlog. ``subtaskReset`` does nothing.
- ``sink/utils/EventBuffers``: one slot per task; an event of the slot's instant merges into it.

``sync`` (Hudi 1.1): the instant is created inside the request, under the table lock; a cleaning
action holding the lock longer than the RPC timeout (10 s) fails the request and the job restarts
(#19902). ``async`` (PR #19960, open, as PROTOCOLS.md P4 describes it): the coordinator replies
PENDING at once and creates the instant in the background, once per checkpoint id; the writer polls
with backoff (50 ms doubling to 1 s, with jitter) under one deadline, and a request lost or timed
out in transport is retried inside that deadline. (One stored revision of the PR's Correspondent
polls from 200 ms without jitter and propagates request failures: the PR was still under review.)

``startInstant`` -> ``BaseHoodieWriteClient.startCommit`` rolls every pending writer's instant back
first (EAGER failed-writes policy; ``Coordinator.create_instant``), so an instant a crashed attempt
left behind gets its ``.rollback`` at the next instant request.

Known differences: the instant start's rollback spares the instants of open event buffers
(:meth:`CoordinatorSide.instants_in_use`): read literally, 1.1 rolls them back too, and a task still
flushing into one would fail (docs/FIDELITY.md, the failed-writes row). The request key after a
failover is the task's resume id (the last checkpoint
triggered), not Flink's restored checkpoint id; the lab's commit metadata records the checkpoint
whose completion committed the instant (Hudi writes the buffer's key); ``awaitAllInstantsTo
CompleteIfNecessary`` (blocking instant generation, off by default) is not modelled. Hudi 1.1 loses
the data of a completed checkpoint whose commit a coordinator crash interrupted (#19215: the
coordinator's state omits buffers still collecting at the trigger, and tasks on attempt > 0 send
an empty bootstrap; fixed after 1.1 by PR #19237): this model reproduces it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast
from typing import Protocol as TypingProtocol

from runtime.core import codec, roles
from runtime.core.config import flag_of
from runtime.core.env import WaitTimeout
from runtime.core.messages import (
    BlockedWait,
    EventBufferState,
    InstantTimeReply,
    InstantTimeRequest,
    RpcCoordinatorState,
    WriteMetadataEvent,
)
from runtime.protocols.base import (
    CoordinatorContext,
    CoordinatorSide,
    InstantWaitTimeout,
    Protocol,
    WriterContext,
    WriterSide,
)

__all__ = [
    "OK",
    "PENDING",
    "AsyncCoordinationRpcProtocol",
    "CoordinationRpcProtocol",
    "InstantTimeReply",
    "InstantTimeRequest",
]

OK, PENDING = "OK", "PENDING"
BACKOFF_START_S, BACKOFF_MAX_S = 0.05, 1.0
NO_CHECKPOINT = -1  # AbstractStreamWriteFunction.checkpointId before any checkpoint


class _CommitRecord(TypingProtocol):
    instant: str


class RpcCoordinatorContext(CoordinatorContext, TypingProtocol):
    """What P4's coordinator side uses of the coordinator (runtime.writer.coordinator.Coordinator)."""

    events: list[WriteMetadataEvent]
    empty_rounds: list[int]
    empty_commits: bool  # hoodie.allow.empty.commit

    async def create_instant(self, checkpoint_id: int = -1) -> str: ...

    def release(self, instant: str) -> None: ...

    async def commit_instant(
        self, instant: str, checkpoint_id: int, extra: dict[str, str] | None = None, *, empty: bool = False
    ) -> _CommitRecord | None: ...


# -- the writer side ------------------------------------------------------------------------------


class CoordinationRpcWriter(WriterSide):
    mode = "sync"

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.instants: dict[int, str] = {}  # the last reply per key (for introspection only)
        self.requests = 0
        self.pending_replies = 0
        self.transport_retries = 0

    def request_key(self, eager: bool) -> int:
        """AbstractStreamWriteFunction.checkpointId: the last checkpoint snapshotted. The task's
        ``last_checkpoint_id`` already holds the barrier's id during the barrier flush, so that
        flush asks for the one before; checkpoint ids start at 1, so 0 means none (-1)."""
        ckp = self.ctx.last_checkpoint_id if eager else self.ctx.last_checkpoint_id - 1
        return ckp if ckp >= 1 else NO_CHECKPOINT

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        """One request per flush (flushBucket / flushRemaining -> instantToWrite)."""
        key = self.request_key(eager)
        env = self.ctx.env
        started = env.now()
        self.ctx.set_blocked(
            BlockedWait(
                what="instant request",
                waiting_on=f"the coordinator's reply to InstantTimeRequest(ckp={key}) (an RPC future, not a mail)",
                since=started,
                releasing_mail=None,
                checkpoint_id=key,
            )
        )
        try:
            instant = await (self._request_sync(key) if self.mode == "sync" else self._request_async(key))
        finally:
            self.ctx.set_blocked(None)
        env.metrics.sample("instant_request_s", env.now() - started)
        self.instants = {k: v for k, v in self.instants.items() if k >= key - 2}
        self.instants[key] = instant
        return instant

    async def _ask(self, key: int, timeout: float) -> InstantTimeReply:
        self.requests += 1
        reply = await self.ctx.env.call(
            roles.COORDINATOR, "instant_time_request", InstantTimeRequest(self.ctx.task_id, key), timeout=timeout
        )
        return cast(InstantTimeReply, reply)

    async def _request_sync(self, key: int) -> str:
        try:
            reply = await self._ask(key, self.ctx.config.rpc_timeout_s)
        except WaitTimeout as exc:
            raise InstantWaitTimeout(
                f"{self.ctx.env.role}: InstantTimeRequest(ckp={key}) timed out after "
                f"{self.ctx.config.rpc_timeout_s:.1f}s ({flag_of('rpc_timeout_s')}) with no reply: the "
                "coordinator creates the instant inside the request, under the table lock, so a lock held "
                "longer than the RPC timeout (Hudi #19902), like a lost request, ends here; the task fails "
                f"and the job restarts ({exc})"
            ) from exc
        return reply.instant

    async def _request_async(self, key: int) -> str:
        """Polls until OK under one deadline; a request lost or timed out in transport counts as
        one more poll (PR #19960)."""
        env, cfg = self.ctx.env, self.ctx.config
        deadline = env.now() + cfg.instant_wait_timeout
        backoff = BACKOFF_START_S
        last_error = ""
        while True:
            remaining = deadline - env.now()
            try:
                reply = await self._ask(key, min(cfg.rpc_timeout_s, max(remaining, 1e-3)))
                if reply.status == OK:
                    return reply.instant
                self.pending_replies += 1
                last_error = "still PENDING"
            except (WaitTimeout, ConnectionError) as exc:
                self.transport_retries += 1
                env.metrics.count("instant_request_transport_retries")
                last_error = f"the last request failed in transport: {exc}"
            remaining = deadline - env.now()
            if remaining <= 0:
                raise InstantWaitTimeout(
                    f"{env.role}: the instant of checkpoint {key} was not known after "
                    f"{cfg.instant_wait_timeout:.1f}s of polling ({flag_of('instant_wait_timeout_s')}; {last_error}; "
                    "the reply was PENDING "
                    f"{self.pending_replies} times in this task)"
                )
            # jitter keeps writers from polling in step; the last sleep ends at the deadline,
            # where one more poll is made
            await env.sleep(min(remaining, backoff * (0.5 + env.rng.random())))
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "requests": self.requests,
            "pending_replies": self.pending_replies,
            "transport_retries": self.transport_retries,
            "instants": dict(self.instants),
        }


# -- the coordinator side -------------------------------------------------------------------------


@dataclass
class _EventBuffer:
    instant: str
    slots: dict[int, WriteMetadataEvent] = field(default_factory=dict)  # task id -> its (merged) event

    def add(self, event: WriteMetadataEvent) -> None:
        """EventBuffer.addEvent: an event of the slot's instant merges into it (mergeWith)."""
        prev = self.slots.get(event.task_id)
        if prev is not None and prev.instant == event.instant:
            event = dataclasses.replace(
                prev,
                checkpoint_id=event.checkpoint_id,
                write_stats=[*prev.write_stats, *event.write_stats],
                last_batch=prev.last_batch or event.last_batch,
            )
        self.slots[event.task_id] = event

    def all_events_received(self, tasks: int) -> bool:
        return all(t in self.slots and self.slots[t].last_batch for t in range(tasks))

    def has_data(self) -> bool:
        return any(e.write_stats for e in self.slots.values())


class CoordinationRpcCoordinator(CoordinatorSide):
    RPC_METHODS = ("instant_time_request",)
    eager_instants = False
    buffers_events = True
    mode = "sync"

    def __init__(self, ctx: CoordinatorContext) -> None:
        super().__init__(ctx)
        self.rpc = cast(RpcCoordinatorContext, ctx)
        self.buffers: dict[int, _EventBuffer] = {}  # EventBuffers: checkpoint key -> buffer
        self.creating: dict[int, asyncio.Task[str]] = {}
        self.created = 0
        self.failures: list[str] = []
        self.restored: list[int] = []  # keys restored from the coordinator's checkpoint
        self.recommitted: list[str] = []
        self.left_pending: list[str] = []  # instants whose buffer had no data (not rolled back)
        self.cleaned_slots = 0  # task slots dropped by empty bootstraps (cleanLegacyEvents)
        self.ignored_resent_stats = 0  # statuses a restored task re-sent (attempt > 0: ignored)

    @property
    def instants(self) -> dict[int, str]:
        """Checkpoint key -> instant, for every buffer not yet committed."""
        return {k: b.instant for k, b in sorted(self.buffers.items())}

    def instants_in_use(self) -> set[str]:
        """The instants of the open event buffers: a later checkpoint's instant start spares them
        (see the module docstring: a deliberate difference from startCommit's EAGER rollback)."""
        return {b.instant for b in self.buffers.values()}

    # -- instant requests --------------------------------------------------------------------

    async def _create(self, key: int) -> str:
        try:
            instant = await self.rpc.create_instant(key)  # startInstant: under the table lock
        except Exception as exc:
            # forget the attempt so the next request tries again, and say why this one failed
            self.creating.pop(key, None)
            self.failures.append(f"checkpoint {key}: {type(exc).__name__}: {exc}"[:300])
            self.ctx.env.metrics.count("instant_creation_failures")
            raise
        self.buffers[key] = _EventBuffer(instant)  # initNewEventBuffer
        self.rpc.release(instant)
        self.created += 1
        self.creating.pop(key, None)
        return instant

    def _creation(self, key: int) -> asyncio.Task[str]:
        task = self.creating.get(key)
        if task is None:
            task = self.ctx.env.spawn(self._create(key), f"create-instant-{key}")
            self.creating[key] = task
        return task

    async def instant_time_request(self, req: InstantTimeRequest) -> InstantTimeReply:
        key = req.checkpoint_id
        buffer = self.buffers.get(key)
        if buffer is not None:
            return InstantTimeReply(key, OK, buffer.instant)
        task = self._creation(key)  # one checkpoint id, one instant, created once
        if self.mode == "async":
            if task.done() and task.exception() is not None:
                self.creating.pop(key, None)
            return InstantTimeReply(key, PENDING)
        instant = await asyncio.shield(task)
        return InstantTimeReply(key, OK, instant)

    # -- events --------------------------------------------------------------------------------

    async def on_write_metadata(self, event: Any) -> None:
        if event.bootstrap:
            self._bootstrap(event)
            return
        key = next((k for k, b in self.buffers.items() if b.instant == event.instant), None)
        if key is None:  # Hudi: eventBuffers.get(checkpointId) is null and the job fails
            raise RuntimeError(
                f"coordination-rpc: task {event.task_id} reported instant {event.instant!r}, which no "
                f"event buffer holds (buffers: {self.instants})"
            )
        self.buffers[key].add(event)

    def _bootstrap(self, event: WriteMetadataEvent) -> None:
        """A task on attempt > 0 sends an empty bootstrap: cleanLegacyEvents drops its slot in
        every buffer of key >= its checkpoint id (what it wrote after that checkpoint is replayed)."""
        self.ignored_resent_stats += len(event.write_stats)
        for key, buffer in self.buffers.items():
            if key >= event.checkpoint_id and buffer.slots.pop(event.task_id, None) is not None:
                self.cleaned_slots += 1

    async def on_checkpoint_complete(self, checkpoint_id: int) -> dict[str, Any]:
        """commitInstants: every buffer with key < n, ascending, whatever the tasks reported."""
        committed = []
        for key in sorted(k for k in self.buffers if k < checkpoint_id):
            instant = await self._commit_buffer(key, checkpoint_id)
            if instant is not None:
                committed.append(instant)
        if not committed:
            self.rpc.empty_rounds.append(checkpoint_id)
        return {"committed": bool(committed), "instants": committed}

    async def _commit_buffer(self, key: int, checkpoint_id: int) -> str | None:
        """commitInstant: no event at all (every task reset): reset the buffer and leave the
        instant pending; no write status: the same, unless hoodie.allow.empty.commit (Hudi 1.1's
        default), which commits the instant empty; otherwise commit it and drop the buffer.
        Returns the instant committed, or None."""
        buffer = self.buffers[key]
        if not buffer.slots or (not buffer.has_data() and not self.rpc.empty_commits):
            del self.buffers[key]
            self.left_pending.append(buffer.instant)
            del self.left_pending[:-100]
            return None
        events = list(buffer.slots.values())
        self.rpc.events.extend(events)  # the coordinator commits the events of the instant it holds
        try:
            rec = await self.rpc.commit_instant(buffer.instant, checkpoint_id, empty=self.rpc.empty_commits)
        finally:
            self.rpc.events[:] = [e for e in self.rpc.events if e.instant != buffer.instant]
        del self.buffers[key]
        return buffer.instant if rec is not None else None

    # -- the coordinator's checkpoint ----------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> bytes:
        """checkpointCoordinator: the buffers in which every task sent its last batch."""
        tasks = len(self.ctx.task_names)
        complete = [
            EventBufferState(k, b.instant, [b.slots[t] for t in sorted(b.slots)])
            for k, b in sorted(self.buffers.items())
            if b.all_events_received(tasks)
        ]
        return codec.encode(RpcCoordinatorState(complete))

    async def restore_state(self, state: bytes) -> None:
        """resetToCheckpoint: addEventsToBuffer."""
        for entry in codec.decode(state, RpcCoordinatorState).buffers:
            buffer = _EventBuffer(entry.instant)
            for event in entry.events:
                buffer.add(event)
            self.buffers[entry.checkpoint_id] = buffer
            self.restored.append(entry.checkpoint_id)

    async def open(self) -> None:
        """start -> restoreEvents -> recommitInstant: a restored buffer whose instant is not
        completed is committed now (one already completed stays buffered, as in Hudi 1.1)."""
        for key in sorted(self.restored):
            buffer = self.buffers.get(key)
            if buffer is None or await self.ctx.env.io(self.ctx.table.is_committed, buffer.instant):
                continue
            if await self._commit_buffer(key, key + 1) is not None:
                self.recommitted.append(buffer.instant)

    async def on_tasks_reset(self) -> None:
        """subtaskReset does nothing in Hudi 1.x: the buffers stay, the restarted tasks' empty
        bootstraps clean their slots."""

    def describe(self) -> dict[str, Any]:
        return {
            "pending": self.instants,
            "created": self.created,
            "failures": self.failures[-5:],
            "restored": self.restored,
            "recommitted": self.recommitted,
            "left_pending": self.left_pending[-10:],
            "cleaned_slots": self.cleaned_slots,
            "ignored_resent_stats": self.ignored_resent_stats,
        }


class CoordinationRpcProtocol(Protocol):
    name = "coordination-rpc"
    description = "P4: writers ask the coordinator by RPC; the instant is created in the request (Hudi 1.1)"
    # Hudi 1.1: allowCommitOnEmptyBatch takes hoodie.allow.empty.commit's default, true (HUDI-7819)
    empty_commit_default = True
    release_table_version = 9  # HoodieTableVersion.current() in Hudi 1.1
    metadata_table_default = True  # FlinkOptions.METADATA_ENABLED, true from 1.0
    writer_side = CoordinationRpcWriter
    coordinator_side = CoordinationRpcCoordinator


class AsyncCoordinationRpcWriter(CoordinationRpcWriter):
    mode = "async"


class AsyncCoordinationRpcCoordinator(CoordinationRpcCoordinator):
    mode = "async"


class AsyncCoordinationRpcProtocol(Protocol):
    name = "coordination-rpc-async"
    empty_commit_default = True  # as coordination-rpc (Hudi 1.1)
    release_table_version = 9
    metadata_table_default = True
    description = (
        "P4 with PR #19960: the coordinator replies PENDING and creates the instant in "
        "the background; writers poll with backoff"
    )
    writer_side = AsyncCoordinationRpcWriter
    coordinator_side = AsyncCoordinationRpcCoordinator
