"""P5 ``control-topic`` (RFC-32, Hudi's Kafka Connect sink): commits ride a control topic.

Modelled on hudi-kafka-connect (the ``ControlMessage`` proto version, Hudi 0.10 on):
``org.apache.hudi.connect.transaction.ConnectTransactionCoordinator`` and
``ConnectTransactionParticipant``, ``KafkaConnectTransactionServices`` and ``KafkaConnectConfigs``.

One single-partition topic carries every control message. The transaction coordinator
(``ConnectTransactionCoordinator``; in Kafka Connect it lives in the task owning partition 0, here
in the coordinator actor) runs the state machine of ``processCoordinatorEvent``:

- ``startNewCommit``: ``KafkaConnectTransactionServices.startCommit`` (the write client's
  ``startCommit`` first rolls back failed writes, the EAGER failed-writes clean policy, then starts
  an inflight instant), START_COMMIT, and END_COMMIT scheduled ``hoodie.kafka.commit.interval.secs``
  later (Hudi's default 60 s; here ``JobConfig.kafka_commit_interval_s``). A failure to start is
  retried after ``RESTART_COMMIT_DELAY_MS``.
- ``endExistingCommit``: END_COMMIT, and WRITE_STATUS_TIMEOUT scheduled
  ``hoodie.kafka.coordinator.write.timeout.secs`` later (Hudi's default 300 s; here
  ``JobConfig.write_status_timeout_s``).
- ``onReceiveWriteStatus``: once every partition reported, ``endCommit`` commits the instant with
  the offsets in its extra metadata (``kafka.commit.offsets``), *even when no partition wrote
  anything* (``HoodieJavaWriteClient.commit`` with no write statuses: an empty commit that
  carries the offsets), then ACK_COMMIT and the next START_COMMIT after
  ``START_COMMIT_INIT_DELAY_MS``. A commit that throws is logged and the state stays
  ENDED_COMMIT: the pending WRITE_STATUS_TIMEOUT starts a new commit (``handleWriteStatusTimeout``),
  so a failed commit never stops the coordinator.
- ``handleWriteStatusTimeout``: a missing WRITE_STATUS abandons the commit; the next START_COMMIT
  (after ``RESTART_COMMIT_DELAY_MS``) carries the unchanged offsets and its ``startCommit`` rolls
  the abandoned instant back. Events of another commit time are stale and dropped.
- ``buildControlMessage``: every coordinator message carries ``globalCommittedKafkaOffsets``.
- ``initializeGlobalCommittedKafkaOffsets``: a (re)started coordinator reads the offsets back
  from the last completed commit.

``JobConfig.control_topic_interval`` names what ends a commit: ``"wall"`` (default, Hudi's) the
commit interval after START_COMMIT, independent of Flink checkpoints; ``"checkpoint"`` each
checkpoint trigger (a lab option: every protocol then runs the same rounds).

Participants (``ConnectTransactionParticipant``; the write tasks) consume the topic with an agent
coroutine (``KafkaConnectControlAgent``) that delivers each message to the task's mailbox; they
write only inside a commit, flush on END_COMMIT (not at the barrier) and report the next offset
(``handleEndCommit``). ``handleStartCommit`` closes an ongoing commit (``cleanupOngoingTransaction``)
and syncs with the leader's offset (``syncKafkaOffsetWithLeader``); ``handleEndCommit`` for another
commit time does the same from the END_COMMIT's offsets; ``handleAckCommit`` advances the
committed offset and syncs it with the ACK_COMMIT's offsets. Offset rules (``writeRecords``):
rows below the expected offset are skipped; a batch starting above it makes the source seek back
(a model rule: Kafka delivers a partition in order).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any
from typing import Protocol as _TypingProtocol

from runtime.core import roles
from runtime.core.config import JobConfig, flag_of
from runtime.core.env import Env, wait_ended
from runtime.core.fault_spec import InjectedCrash
from runtime.core.messages import SeekRequest, WriteMetadataEvent, WriteStat
from runtime.hudi.client.table_services import WRITE_CLIENT_DEFAULTS
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError
from runtime.kafka.address import broker_address
from runtime.kafka.control_topic_ports import control_topic_port
from runtime.kafka.port import ControlConsumer, ControlTopicPort
from runtime.kafka.topic import (
    ACK_COMMIT,
    END_COMMIT,
    START_COMMIT,
    WRITE_STATUS,
    ControlMessage,
    ControlTopic,
)
from runtime.protocols.base import CoordinatorContext, CoordinatorSide, Protocol, WriterContext, WriterSide

TOPIC = "control-topic"
OFFSETS_KEY = "kafka.commit.offsets"  # ConnectTransactionCoordinator.KAFKA_OFFSET_KEY
# ConnectTransactionCoordinator's constants (hard-coded in Hudi, not configurable)
START_COMMIT_INIT_DELAY_S = 0.1  # START_COMMIT_INIT_DELAY_MS: the first commit, and after an ACK
RESTART_COMMIT_DELAY_S = 0.5  # RESTART_COMMIT_DELAY_MS: after a failed or timed-out commit


def format_offsets(offsets: dict[int, int]) -> str:
    return ",".join(f"{p}={o}" for p, o in sorted(offsets.items()))


def parse_offsets(text: str) -> dict[int, int]:
    out = {}
    for part in filter(None, (text or "").split(",")):
        p, _, o = part.partition("=")
        out[int(p)] = int(o)
    return out


class TaskContext(WriterContext, _TypingProtocol):
    """What the participant uses of its write task (runtime.writer.write_task.WriteTask)."""

    state: str
    buckets: dict[Any, Any]

    def put_mail(self, action: Callable[[], Awaitable[None]], kind: str, description: str) -> None: ...

    def discard_buffers(self) -> int: ...

    async def forget_uncommitted_versions(self) -> int: ...

    async def flush_all(self, instant: str) -> list[WriteStat]: ...


class CoordinatorSideContext(CoordinatorContext, _TypingProtocol):
    """What the transaction coordinator uses of the coordinator (runtime.writer.coordinator)."""

    error: str | None
    events: list[WriteMetadataEvent]
    empty_rounds: list[int]
    schema_json: str
    table_lock: asyncio.Lock

    async def create_instant(self, checkpoint_id: int = -1) -> str: ...

    async def commit_instant(self, instant: str, checkpoint_id: int, extra: dict[str, str] | None = None) -> Any: ...

    async def schedule_compaction(self, checkpoint_id: int) -> str | None: ...


def leader_offset(msg: ControlMessage, partition: int) -> int | None:
    """The coordinator's committed offset for ``partition`` in ``msg`` (syncKafkaOffsetWithLeader
    ignores a missing or negative one)."""
    offset = msg.offsets.get(partition)
    return offset if offset is not None and offset >= 0 else None


class ControlTopicParticipant(WriterSide):
    """ConnectTransactionParticipant on a write task's mailbox thread."""

    flushes_at_barrier = False
    # after a failover the sources replay from the start and the participants skip what the
    # commit metadata says is committed (Kafka Connect resumes from committed offsets, not from
    # a Flink checkpoint)
    replays_from_committed_offsets = True

    def __init__(self, ctx: TaskContext) -> None:
        super().__init__(ctx)
        self.ctx: TaskContext = ctx
        self.commit_time: str | None = None
        self.expected = 0  # next shard position to accept
        self.write_from = 0  # first position not yet reported in a WRITE_STATUS
        self.committed_offset = 0  # acknowledged by ACK_COMMIT
        self.stats: dict[str, WriteStat] = {}  # this commit's writes, latest per file written
        self.last_status: tuple[str, int] | None = None
        self.counts = {
            "stale": 0,
            "seek_back": 0,
            "skipped_rows": 0,
            "gap_batches": 0,
            "start": 0,
            "end": 0,
            "ack": 0,
            "rewinds": 0,
            "end_commit_errors": 0,
            "consumer_restarts": 0,
        }
        self.starts_seen = 0  # START_COMMITs this task's agent received (the consumer fault counts them)
        self.last_error = ""
        # where the control topic is (--control-topic): the model, or a broker (nothing connects yet)
        self.port: ControlTopicPort = control_topic_port(ctx.env, ctx.config, ctx.config.table)
        self.consumer: ControlConsumer | None = None
        self._agent_task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        env = self.ctx.env
        self.consumer = self.port.consumer(env.role)
        await self.consumer.open()  # a restarted participant ignores the commits before it
        self._agent_task = env.spawn(self._agent(), f"{env.role}-control-agent")

    async def _agent(self) -> None:
        """KafkaConnectControlAgent: consumes the topic, hands messages to the task thread."""
        assert self.consumer is not None
        try:
            while self.ctx.state in ("created", "running"):
                try:
                    records = await self.consumer.poll(timeout_s=0.5)
                except Exception as exc:  # noqa: BLE001 - the topic is unreachable: try again, visibly
                    self.ctx.env.metrics.count("control_topic_poll_errors")
                    self.ctx.env.tracer.instant("control agent poll failed", args={"error": str(exc)[:200]})
                    await self.ctx.env.sleep(0.1)
                    continue
                for rec in records:
                    msg = rec.message
                    if msg.kind in (START_COMMIT, END_COMMIT, ACK_COMMIT):
                        self.ctx.put_mail(self._mail(msg), f"control:{msg.kind}", f"{msg.kind}({msg.commit_time})")
                    if msg.kind == START_COMMIT:
                        await self._maybe_restart_consumer()
        finally:
            await self.consumer.close()
            await self.port.close()

    async def _maybe_restart_consumer(self) -> None:
        """The ``control_topic.consumer_restarted`` fault: this agent's consumer goes away for a
        while and a new one joins at the end of the topic (Hudi's agent: a new group,
        ``auto.offset.reset=latest``), so what was sent meanwhile never reaches this task."""
        assert self.consumer is not None
        self.starts_seen += 1
        spec = self.ctx.env.faults.fire(
            "control_topic.consumer_restarted", checkpoint=self.starts_seen, task=self.ctx.task_id
        )
        if spec is None:
            return
        await self.consumer.close()
        await self.ctx.env.sleep(spec.value)
        self.consumer = self.port.consumer(self.ctx.env.role)
        await self.consumer.open()
        self.counts["consumer_restarts"] += 1

    def _mail(self, msg: ControlMessage) -> Callable[[], Awaitable[None]]:
        return lambda: self.handle(msg)

    # -- offset rules (the task thread) -------------------------------------------------------

    def accept(self, records: Any, start_offset: int) -> Any:
        if start_offset < 0:
            return records
        end = start_offset + records.num_rows
        if start_offset > self.expected:
            # a gap: records were missed; ask the source to seek back to the expected offset
            self.counts["gap_batches"] += 1
            self._seek_source(self.expected)
            return None
        if end <= self.expected:
            self.counts["skipped_rows"] += records.num_rows
            return None
        if start_offset < self.expected:
            skip = self.expected - start_offset
            self.counts["skipped_rows"] += skip
            records = records.slice(skip)
        self.expected = end
        return records

    def _seek_source(self, offset: int) -> None:
        self.counts["seek_back"] += 1
        self.ctx.env.send(roles.source_name(self.ctx.task_id), "seek", SeekRequest(offset))

    def may_flush_eagerly(self) -> bool:
        return self.commit_time is not None

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        return self.commit_time

    async def on_write_event(self, event: WriteMetadataEvent) -> bool:
        for s in event.write_stats:
            self.stats[s.path] = s
        return True  # reported with WRITE_STATUS, not as an operator event

    # -- control messages ---------------------------------------------------------------------

    async def handle(self, msg: ControlMessage) -> None:
        if msg.kind == START_COMMIT:
            await self._start_commit(msg)
        elif msg.kind == END_COMMIT:
            await self._end_commit(msg)
        elif msg.kind == ACK_COMMIT:
            self._ack_commit(msg)

    async def _rewind(self, offset: int) -> None:
        """Drops what is buffered and consumes again from ``offset`` (the coordinator's committed
        offset is the truth: a commit was abandoned, or this task restarted)."""
        self.counts["rewinds"] += 1
        self.ctx.discard_buffers()
        self.expected = self.write_from = offset
        self._seek_source(offset)
        # an abandoned commit's files are rolled back: merge onto committed versions
        await self.ctx.forget_uncommitted_versions()

    async def _cleanup_and_sync(self, msg: ControlMessage) -> None:
        """cleanupOngoingTransaction + syncKafkaOffsetWithLeader: the ongoing commit (if any) is
        over; consume again from the leader's offset (without one for this partition, from the
        offset last acknowledged, as Hudi's participant resets its last written offset to its
        committed one) when it differs from where we are, or when rows were already flushed into
        the dead commit (its files are rolled back)."""
        leader = leader_offset(msg, self.ctx.task_id)
        target = self.committed_offset if leader is None else leader
        dead_writes = self.commit_time is not None and bool(self.stats)
        self.commit_time = None
        self.stats = {}
        if target != self.write_from or dead_writes:
            await self._rewind(target)

    async def _start_commit(self, msg: ControlMessage) -> None:
        """handleStartCommit."""
        self.counts["start"] += 1
        if msg.commit_time == self.commit_time:
            return  # a duplicate
        await self._cleanup_and_sync(msg)
        self.commit_time = msg.commit_time
        self.ctx.current_instant = msg.commit_time

    async def _end_commit(self, msg: ControlMessage) -> None:
        """handleEndCommit: flush, then WRITE_STATUS with the next offset."""
        env, task = self.ctx.env, self.ctx.task_id
        if self.commit_time is None:
            self.counts["stale"] += 1  # "END_COMMIT received while NOT in active transaction"
            return
        if msg.commit_time != self.commit_time:
            # "A new END_COMMIT from leader caused interruption to an existing transaction":
            # close it and reset to the leader's offset
            self.counts["stale"] += 1
            await self._cleanup_and_sync(msg)
            return
        self.counts["end"] += 1
        try:
            flushed = await self.ctx.flush_all(self.commit_time)
        except OSError as exc:
            await self._end_commit_failed(exc)
            return
        for s in flushed:
            self.stats[s.path] = s  # eager flushes' stats came through on_write_event
        if self.ctx.buckets:
            raise RuntimeError("buffers left after END_COMMIT's flush")
        last_offset = self.expected - 1
        stats = list(self.stats.values())
        # the participant's flush is done and its status not yet sent: the same point as a
        # WriteMetadataEvent not yet sent under the other protocols (the k-th END_COMMIT)
        spec = env.faults.fire("task.after_flush_before_event", checkpoint=self.counts["end"], task=task)
        if spec is not None:
            env.crash("injected crash at task.after_flush_before_event")
        await self.port.publish(
            ControlMessage(
                WRITE_STATUS, self.commit_time, env.role, partition=task, write_stats=stats, last_offset=last_offset
            )
        )
        self.last_status = (self.commit_time, last_offset)
        self.write_from = self.expected
        self.commit_time = None
        self.stats = {}

    async def _end_commit_failed(self, exc: OSError) -> None:
        """handleEndCommit's writer close failed (its commit was abandoned and rolled back while
        this task was busy): Hudi throws an IOException, which ``HoodieSinkTask.put`` turns into
        Connect's RetriableException; the task lives on and sends no WRITE_STATUS. Its rows are
        consumed again from the last position it reported (the model's replay by seek)."""
        self.counts["end_commit_errors"] += 1
        self.last_error = f"END_COMMIT {self.commit_time}: {type(exc).__name__}: {exc}"[:300]
        self.commit_time = None
        self.stats = {}
        await self._rewind(self.write_from)

    def _ack_commit(self, msg: ControlMessage) -> None:
        """handleAckCommit: the committed offset advances to what we reported, then syncs with
        the leader's (the ACK_COMMIT carries the offsets just committed)."""
        if self.last_status is None or msg.commit_time != self.last_status[0]:
            self.counts["stale"] += 1
            return
        self.counts["ack"] += 1
        self.committed_offset = max(self.committed_offset, self.last_status[1] + 1)
        leader = leader_offset(msg, self.ctx.task_id)
        if leader is not None:
            self.committed_offset = leader

    def describe(self) -> dict[str, Any]:
        return {
            "commit_time": self.commit_time,
            "expected": self.expected,
            "write_from": self.write_from,
            "committed_offset": self.committed_offset,
            "last_error": self.last_error,
            **self.counts,
        }


class ControlTopicCoordinator(CoordinatorSide):
    """ConnectTransactionCoordinator, as one coroutine walking its states in order."""

    eager_instants = False
    rolls_back_at_start_commit = False  # _start_commit rolls back itself (its own timeline read)

    def __init__(self, ctx: CoordinatorSideContext) -> None:
        super().__init__(ctx)
        self.ctx: CoordinatorSideContext = ctx
        self.committed_offsets: dict[int, int] = {}  # globalCommittedKafkaOffsets
        self.current: str | None = None
        self.state = "INIT"  # ConnectTransactionCoordinator.State
        self.interval = asyncio.Event()  # control_topic_interval="checkpoint": a trigger ends the commit
        self.intervals = 0  # the last checkpoint triggered
        self.stopping = False
        self.abandoned: list[str] = []  # timed out waiting for WRITE_STATUS
        self.failed: list[dict[str, str]] = []  # a start or a commit threw; the next commit started
        self.empty_commits: list[str] = []
        self.stale_dropped = 0
        self.commits = 0
        self.port: ControlTopicPort = control_topic_port(ctx.env, ctx.config, ctx.config.table)
        self.consumer: ControlConsumer | None = None
        self._loop: asyncio.Task[None] | None = None
        self.error: str | None = None

    @property
    def cfg(self) -> JobConfig:
        return self.ctx.config

    async def open(self) -> None:
        env = self.ctx.env
        self.consumer = self.port.consumer(roles.COORDINATOR)
        await self.consumer.open()
        self.committed_offsets = await env.io(self._recover_offsets)

    def _recover_offsets(self) -> dict[int, int]:
        """initializeGlobalCommittedKafkaOffsets: the offsets of the last completed commit."""
        table = self.ctx.table
        last = table.timeline().last_completed()
        if last is None:
            return {}
        try:
            meta = table.read_commit_metadata(last)
        except (OSError, ValueError, TableError):
            return {}
        return parse_offsets(meta.get("extraMetadata", {}).get(OFFSETS_KEY, ""))

    async def on_all_bootstrapped(self) -> None:
        self._loop = self.ctx.env.spawn(self._run(), "transaction-coordinator")

    async def on_checkpoint_trigger(self, checkpoint_id: int) -> None:
        if self._loop is not None and self._loop.done():
            # a dead transaction coordinator fails the job at the next trigger, not at the end of
            # input: meanwhile no commit starts and the participants buffer everything
            raise RuntimeError(f"the transaction coordinator stopped: {self.error}")
        self.intervals = checkpoint_id
        if self.cfg.control_topic_interval == "checkpoint":
            self.interval.set()  # the commit interval elapsed

    async def on_checkpoint_complete(self, checkpoint_id: int) -> dict[str, Any]:
        return {"committed": False, "reason": "control-topic commits on its own interval"}

    async def _publish(self, kind: str, instant: str, **kw: Any) -> None:
        """buildControlMessage: every coordinator message carries the committed offsets."""
        offsets = dict(self.committed_offsets)
        await self.port.publish(ControlMessage(kind, instant, roles.COORDINATOR, offsets=offsets, **kw))

    async def _publish_logged(self, kind: str, instant: str) -> None:
        """END_COMMIT and ACK_COMMIT: a failed publish is logged and the state machine goes on
        (endExistingCommit, submitAckCommit); participants repair from the next message's offsets."""
        try:
            await self._publish(kind, instant)
        except InjectedCrash:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; Hudi logs it and goes on
            self._record_failure(instant, f"publish {kind}", exc)

    def _record_failure(self, instant: str, phase: str, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        self.failed.append({"instant": instant, "phase": phase, "error": error[:500]})
        self.ctx.env.metrics.count("control_topic_failures")
        self.ctx.env.tracer.instant(f"{phase} failed", args={"instant": instant, "error": error[:200]})

    async def _run(self) -> None:
        delay = START_COMMIT_INIT_DELAY_S
        try:
            while not self.stopping:
                await self.ctx.env.sleep(delay)
                delay = await self._one_commit()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.ctx.error = f"transaction coordinator failed: {self.error}"
            raise

    async def _one_commit(self) -> float:
        """START -> interval -> END -> WRITE_STATUS from all -> commit -> ACK; returns the delay
        before the next START_COMMIT."""
        env, cfg = self.ctx.env, self.cfg
        try:
            instant = await self._start_commit()
        except InjectedCrash:
            raise
        except Exception as exc:  # noqa: BLE001 - startNewCommit: "Failed to start a new commit, will retry"
            self._record_failure(self.current or "", "start commit", exc)
            self.current = None
            return RESTART_COMMIT_DELAY_S
        await self._commit_interval()
        ended_by = self.intervals  # the last checkpoint triggered when this commit's interval ended
        ended_at = env.now()
        await self._publish_logged(END_COMMIT, instant)
        self.state = "ENDED_COMMIT"
        deadline = env.now() + cfg.write_status_timeout_s  # the WRITE_STATUS_TIMEOUT event
        statuses = await self._collect(instant, deadline)
        if statuses is None:
            self.state = "WRITE_STATUS_TIMEDOUT"
            self.abandoned.append(instant)
            self.current = None
            return RESTART_COMMIT_DELAY_S
        offsets = {p: m.last_offset + 1 for p, m in statuses.items()}  # currentConsumedKafkaOffsets
        try:
            await self._end_commit(instant, ended_by, statuses, offsets)
        except InjectedCrash:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, as Hudi logs it
            # "Fatal error while committing file": the state stays ENDED_COMMIT until the
            # write-status timeout starts a new commit, which rolls this one back
            self._record_failure(instant, "commit", exc)
            await env.sleep(max(0.0, deadline - env.now()))
            self.state = "WRITE_STATUS_TIMEDOUT"
            self.current = None
            return RESTART_COMMIT_DELAY_S
        self.state = "WRITE_STATUS_RCVD"
        self.commits += 1
        # the k-th commit (its interval may have spanned several checkpoint triggers)
        if env.faults.fire("coordinator.after_commit_before_next_instant", checkpoint=self.commits):
            env.crash("injected crash at coordinator.after_commit_before_next_instant")
        # the instant is decided before the offsets say so: an end-of-input arriving now must not
        # roll it back (a race the simulator found)
        self.current = None
        self.committed_offsets.update(offsets)
        await self._publish_logged(ACK_COMMIT, instant)
        self.state = "ACKED_COMMIT"
        env.metrics.sample("control_topic.commit_s", env.now() - ended_at)  # END_COMMIT to ACK_COMMIT
        return START_COMMIT_INIT_DELAY_S

    async def _start_commit(self) -> str:
        """startNewCommit: startCommit (rolling back failed writes first), then START_COMMIT."""
        await self._rollback_failed_writes()
        instant = await self.ctx.create_instant(self.intervals + 1)  # the interval this commit covers
        self.current = instant
        await self._publish(START_COMMIT, instant)
        self.state = "STARTED_COMMIT"
        return instant

    async def _rollback_failed_writes(self) -> None:
        """BaseHoodieWriteClient.startCommit -> rollbackFailedWrites (the EAGER failed-writes clean
        policy, Hudi's default): every pending instant on the timeline is a failed write here
        (the coordinator is the table's only writer) and is rolled back before a new one starts."""
        ctx = self.ctx
        if ctx.client.concurrency.lazy:
            return  # a multi-writer --concurrency-mode (LAZY): the cleaner rolls back expired instants only
        async with ctx.table_lock:
            for pending in (await ctx.env.io(ctx.table.timeline)).pending_commits():
                await ctx.env.io(ctx.client.rollback, pending, [])

    async def _commit_interval(self) -> None:
        """The END_COMMIT event: ``kafka_commit_interval_s`` after START_COMMIT (Hudi's
        hoodie.kafka.commit.interval.secs, default 60 s), or the next checkpoint trigger."""
        if self.cfg.control_topic_interval == "wall":
            await self.ctx.env.sleep(self.cfg.kafka_commit_interval_s)
        else:
            await self.interval.wait()
            self.interval.clear()

    async def _end_commit(
        self, instant: str, ended_by: int, statuses: dict[int, ControlMessage], offsets: dict[int, int]
    ) -> None:
        """KafkaConnectTransactionServices.endCommit: commits what every partition wrote with the
        offsets, also when nothing was written (HoodieJavaWriteClient.commit with no statuses)."""
        ctx = self.ctx
        extra = {OFFSETS_KEY: format_offsets(offsets)}
        if not any(m.write_stats for m in statuses.values()):
            await self._commit_empty(instant, ended_by, extra)
            return
        ctx.events.extend(
            WriteMetadataEvent(p, ended_by, instant, m.write_stats, last_batch=True) for p, m in statuses.items()
        )
        error_before = ctx.error
        try:
            await ctx.commit_instant(instant, ended_by, extra=extra)
        except Exception:
            # the coordinator keeps its instant for a restarted one to recommit; the Connect
            # coordinator instead abandons it and lives on: forget its events and its error
            ctx.events = [e for e in ctx.events if e.instant != instant]
            ctx.error = error_before
            raise
        # endCommit then schedules a compaction of a merge-on-read table (executed here by the
        # job's compaction operators; the connector leaves it to a separate compactor job)
        await ctx.schedule_compaction(ended_by)

    async def _commit_empty(self, instant: str, ended_by: int, extra: dict[str, str]) -> None:
        """An empty commit: the completed instant's metadata has no write stats, only the offsets."""
        ctx = self.ctx
        metadata = {"schema": ctx.schema_json, "checkpoint.id": str(ended_by), **extra}
        if ctx.env.faults.fire("coordinator.before_commit_file", checkpoint=ended_by):
            ctx.env.crash("injected crash at coordinator.before_commit_file")
        async with ctx.table_lock:
            await ctx.env.io(functools.partial(ctx.client.commit, instant, [], metadata, empty=True, now=ctx.env.now()))
        self.empty_commits.append(instant)
        ctx.empty_rounds.append(ended_by)

    async def _collect(self, instant: str, deadline: float) -> dict[int, ControlMessage] | None:
        """WRITE_STATUS from every partition, or None at ``deadline`` (the write-status timeout)."""
        env = self.ctx.env
        assert self.consumer is not None
        statuses: dict[int, ControlMessage] = {}
        n = len(self.ctx.task_names)
        while len(statuses) < n:
            remaining = deadline - env.now()
            if remaining <= 0:
                missing = sorted(set(range(n)) - set(statuses))
                env.tracer.instant(f"abandon {instant}", args={"missing_partitions": missing})
                return None
            for rec in await self.consumer.poll(timeout_s=min(0.5, remaining)):
                m = rec.message
                if m.kind != WRITE_STATUS:
                    continue
                if m.commit_time != instant:
                    self.stale_dropped += 1
                    continue
                statuses[m.partition] = m
        return statuses

    async def on_end_of_input(self, final_offsets: dict[int, int]) -> dict[str, Any]:
        """Waits (bounded) for commits until every partition's rows are committed. With the
        checkpoint interval the end of input ends commits at once; with the wall interval the
        commits keep their pace."""
        env, cfg = self.ctx.env, self.cfg
        deadline = env.now() + cfg.job_timeout_s
        while any(self.committed_offsets.get(p, 0) < o for p, o in final_offsets.items()):
            if self._loop is not None and self._loop.done():
                raise RuntimeError(f"the transaction coordinator stopped: {self.error}")
            if env.now() > deadline:
                raise RuntimeError(
                    f"control-topic: offsets {self.committed_offsets} never reached the end of input {final_offsets}"
                )
            if cfg.control_topic_interval == "checkpoint":
                self.interval.set()
            await env.sleep(0.05)
        self.stopping = True
        if self._loop is not None:
            self._loop.cancel()
            # bounded: a loop that does not stop is named, not waited for until the job times out
            if not await wait_ended(self._loop, cfg.rpc_timeout_s):
                raise RuntimeError(
                    f"the transaction coordinator did not stop within {cfg.rpc_timeout_s:.0f}s of the end of input "
                    f"({flag_of('rpc_timeout_s')})"
                )
        await self.close()  # the loop was the consumer's only reader
        # the commit started after the last data (if any) holds nothing: take it off the timeline
        await self._rollback_failed_writes()
        return {"committed_offsets": dict(self.committed_offsets), "commits": self.commits}

    async def close(self) -> None:
        if self.consumer is not None:
            await self.consumer.close()
        await self.port.close()

    def describe(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "committed_offsets": self.committed_offsets,
            "abandoned": self.abandoned,
            "failed": self.failed,
            "empty_commits": self.empty_commits,
            "stale_dropped": self.stale_dropped,
            "commits": self.commits,
            "error": self.error,
        }


class ControlTopicProtocol(Protocol):
    name = "control-topic"
    description = "P5: a single-partition control topic carries START/END/WRITE_STATUS/ACK (RFC-32)"
    writer_side = ControlTopicParticipant
    coordinator_side = ControlTopicCoordinator
    extra_roles = (TOPIC,)
    extra_rpc_methods = ControlTopic.RPC_METHODS
    # the Connect sink's Java write client cleans and archives with HoodieWriteConfig's defaults
    table_service_defaults = WRITE_CLIENT_DEFAULTS
    # each participant's write client runs its own embedded timeline server: no coordinator's view
    release_file_system_view = "direct"

    @classmethod
    def check_config(cls, config: JobConfig) -> None:
        broker_address(config.control_topic)  # model or kafka://HOST:PORT[/TOPIC], else ConfigError

    @classmethod
    def roles_for(cls, config: JobConfig) -> tuple[str, ...]:
        """The topic is a role of the job only when it is the model; a broker is outside the job."""
        return cls.extra_roles if broker_address(config.control_topic) is None else ()

    @classmethod
    def make_role(cls, kind: str, env: Env, config: JobConfig, table: HudiTable, task_names: list[str]) -> Any:
        if kind != TOPIC:
            return super().make_role(kind, env, config, table, task_names)
        return ControlTopic(env, retention_records=config.topic_retention_records)
