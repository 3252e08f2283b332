"""The control topic's participant: ``ConnectTransactionParticipant`` on a write task's mailbox.

Hudi 0.10+ hudi-kafka-connect (the ``ControlMessage`` proto version):
``connect/transaction/ConnectTransactionParticipant.java`` (``processRecords``,
``handleStartCommit``, ``handleEndCommit``, ``handleAckCommit``, ``writeRecords``,
``cleanupOngoingTransaction``, ``syncKafkaOffsetWithLeader``), ``connect/kafka/KafkaConnectControlAgent.java``
(``start``) and ``connect/HoodieSinkTask.java`` (``put``).

Participants (the write tasks) consume the topic with an agent coroutine
(``KafkaConnectControlAgent``) that delivers each message to the task's mailbox; they write only
inside a commit, flush on END_COMMIT (not at the barrier) and report the next offset
(``handleEndCommit``). ``handleStartCommit`` closes an ongoing commit (``cleanupOngoingTransaction``)
and syncs with the leader's offset (``syncKafkaOffsetWithLeader``); ``handleEndCommit`` for another
commit time does the same from the END_COMMIT's offsets; ``handleAckCommit`` advances the
committed offset and syncs it with the ACK_COMMIT's offsets. Offset rules (``writeRecords``):
rows below the expected offset are skipped; a batch starting above it makes the source seek back
(a model rule: Kafka delivers a partition in order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from typing import Protocol as _TypingProtocol

from runtime.core import roles
from runtime.core.messages import SeekRequest, WriteMetadataEvent, WriteStat
from runtime.kafka.control_topic_ports import control_topic_port
from runtime.kafka.port import ControlConsumer, ControlTopicPort
from runtime.kafka.topic import (
    ACK_COMMIT,
    END_COMMIT,
    START_COMMIT,
    WRITE_STATUS,
    ControlMessage,
)
from runtime.protocols.base import WriterContext, WriterSide
from runtime.protocols.control_topic.offsets import leader_offset


class TaskContext(WriterContext, _TypingProtocol):
    """What the participant uses of its write task (runtime.writer.write_task.WriteTask)."""

    state: str
    buckets: dict[Any, Any]

    def put_mail(self, action: Callable[[], Awaitable[None]], kind: str, description: str) -> None: ...

    def discard_buffers(self) -> int: ...

    async def forget_uncommitted_versions(self) -> int: ...

    async def flush_all(self, instant: str) -> list[WriteStat]: ...


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
