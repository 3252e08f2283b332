"""P5 ``control-topic`` (RFC-32, Hudi's Kafka Connect sink): commits ride a control topic.

One single-partition topic carries every control message. The transaction coordinator (in the
coordinator actor; in Kafka Connect it lives in the task owning partition 0) runs:
START_COMMIT(commit time, offsets) -> commit interval -> END_COMMIT -> collect WRITE_STATUS from
every partition -> write the commit with the offsets in its metadata -> ACK_COMMIT -> next
START_COMMIT. A missing WRITE_STATUS past ``write_status_timeout_s`` abandons the commit (rolled
back); messages of another commit time are stale and dropped.

Participants (the write tasks) consume the topic with an agent coroutine that delivers each
message to the task's mailbox; they write only inside a commit, flush on END_COMMIT (not at the
barrier) and report the last offset written. Offset rules: on START_COMMIT, seek to the
coordinator's offset if it differs; a batch starting above the expected offset makes the source
seek back; rows below it are skipped. Offsets live in the commit metadata
(``kafka.commit.offsets``), from which a restarted coordinator reads them back.

The commit interval here is the job manager's checkpoint interval (each checkpoint trigger ends
the current commit), so every protocol runs the same rounds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.core.env import wait_ended
from runtime.core.messages import WriteMetadataEvent, WriteStat
from runtime.flink.source import SeekRequest
from runtime.hudi.table import TableError
from runtime.kafka.topic import (
    ACK_COMMIT,
    END_COMMIT,
    START_COMMIT,
    WRITE_STATUS,
    ControlMessage,
    ControlTopic,
    TopicConsumer,
    publish,
)
from runtime.protocols.base import CoordinatorSide, Protocol, WriterSide

TOPIC = "control-topic"
OFFSETS_KEY = "kafka.commit.offsets"


def format_offsets(offsets: dict[int, int]) -> str:
    return ",".join(f"{p}={o}" for p, o in sorted(offsets.items()))


def parse_offsets(text: str) -> dict[int, int]:
    out = {}
    for part in filter(None, (text or "").split(",")):
        p, _, o = part.partition("=")
        out[int(p)] = int(o)
    return out


class ControlTopicParticipant(WriterSide):
    flushes_at_barrier = False
    # after a failover the sources replay from the start and the participants skip what the
    # commit metadata says is committed (Kafka Connect resumes from committed offsets, not from
    # a Flink checkpoint)
    replays_from_committed_offsets = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.commit_time: str | None = None
        self.expected = 0  # next shard position to accept
        self.write_from = 0  # first position not yet reported in a WRITE_STATUS
        self.committed_offset = 0  # acknowledged by ACK_COMMIT
        self.stats: dict[str, WriteStat] = {}  # this commit's writes, latest per file group
        self.last_status: tuple[str, int] | None = None
        self.counts = {"stale": 0, "seek_back": 0, "skipped_rows": 0, "gap_batches": 0, "start": 0, "end": 0, "ack": 0}
        self.consumer: TopicConsumer | None = None
        self._agent_task: asyncio.Task | None = None

    async def open(self) -> None:
        env = self.ctx.env
        self.consumer = TopicConsumer(env, env.role, TOPIC, rpc_timeout_s=self.ctx.config.rpc_timeout_s)
        await self.consumer.seek_to_end()  # a restarted participant ignores the commits before it
        self._agent_task = env.spawn(self._agent(), f"{env.role}-control-agent")

    async def _agent(self) -> None:
        """Kafka Connect's control agent: consumes the topic, hands messages to the task thread."""
        assert self.consumer is not None
        while self.ctx.state in ("created", "running"):
            try:
                records = await self.consumer.poll(timeout_s=0.5)
            except Exception as exc:  # the topic is unreachable: try again, visibly
                self.ctx.env.metrics.count("control_topic_poll_errors")
                self.ctx.env.tracer.instant("control agent poll failed", args={"error": str(exc)[:200]})
                await self.ctx.env.sleep(0.1)
                continue
            for rec in records:
                msg = rec.message
                if msg.kind in (START_COMMIT, END_COMMIT, ACK_COMMIT):
                    self.ctx.put_mail(
                        lambda m=msg: self.handle(m), f"control:{msg.kind}", f"{msg.kind}({msg.commit_time})"
                    )

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
        self.ctx.env.send(f"source-{self.ctx.task_id}", "seek", SeekRequest(offset))

    def may_flush_eagerly(self) -> bool:
        return self.commit_time is not None

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        return self.commit_time

    async def on_write_event(self, event: WriteMetadataEvent) -> bool:
        for s in event.write_stats:
            self.stats[s.file_id] = s
        return True  # reported with WRITE_STATUS, not as an operator event

    # -- control messages ---------------------------------------------------------------------

    async def handle(self, msg: ControlMessage) -> None:
        env, task = self.ctx.env, self.ctx.task_id
        if msg.kind == START_COMMIT:
            self.counts["start"] += 1
            if msg.commit_time == self.commit_time:
                return
            offset = msg.offsets.get(task, msg.offsets.get(str(task)))  # type: ignore[call-overload]
            if offset is not None and offset != self.write_from:
                # the coordinator's committed offset is the truth: drop what is buffered and
                # consume again from there (a commit was abandoned, or we restarted)
                self.ctx.discard_buffers()
                self.expected = self.write_from = offset
                self._seek_source(offset)
                # an abandoned commit's files were rolled back: merge onto committed versions
                await self.ctx.forget_uncommitted_versions()
            self.commit_time = msg.commit_time
            self.ctx.current_instant = msg.commit_time
            self.stats = {}
        elif msg.kind == END_COMMIT:
            if msg.commit_time != self.commit_time:
                self.counts["stale"] += 1
                return
            self.counts["end"] += 1
            for s in await self.ctx.flush_all(self.commit_time):
                self.stats[s.file_id] = s  # eager flushes' stats came through on_write_event
            if self.ctx.buckets:
                raise RuntimeError("buffers left after END_COMMIT's flush")
            last_offset = self.expected - 1
            stats = list(self.stats.values())
            # the participant's flush is done and its status not yet sent: the same point as a
            # WriteMetadataEvent not yet sent under the other protocols
            # (the k-th END_COMMIT closes the interval checkpoint k ended)
            spec = env.fault("task.after_flush_before_event", checkpoint=self.counts["end"], task=task)
            if spec is not None:
                env.crash("injected crash at task.after_flush_before_event")
            await publish(
                env,
                ControlMessage(
                    WRITE_STATUS, self.commit_time, env.role, partition=task, write_stats=stats, last_offset=last_offset
                ),
                TOPIC,
                timeout=self.ctx.config.rpc_timeout_s,
            )
            self.last_status = (self.commit_time, last_offset)
            self.write_from = self.expected
            self.commit_time = None
            self.stats = {}
        elif msg.kind == ACK_COMMIT:
            if self.last_status is None or msg.commit_time != self.last_status[0]:
                self.counts["stale"] += 1
                return
            self.counts["ack"] += 1
            self.committed_offset = self.last_status[1] + 1

    def describe(self) -> dict[str, Any]:
        return {
            "commit_time": self.commit_time,
            "expected": self.expected,
            "write_from": self.write_from,
            "committed_offset": self.committed_offset,
            **self.counts,
        }


class ControlTopicCoordinator(CoordinatorSide):
    eager_instants = False

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.committed_offsets: dict[int, int] = {}
        self.current: str | None = None
        self.interval = asyncio.Event()
        self.intervals = 0
        self.stopping = False
        self.abandoned: list[str] = []
        self.stale_dropped = 0
        self.commits = 0
        self.consumer: TopicConsumer | None = None
        self._loop: asyncio.Task | None = None
        self.error: str | None = None

    async def open(self) -> None:
        env = self.ctx.env
        self.consumer = TopicConsumer(env, "coordinator", TOPIC, rpc_timeout_s=self.ctx.config.rpc_timeout_s)
        await self.consumer.seek_to_end()
        self.committed_offsets = await env.io(self._recover_offsets)

    def _recover_offsets(self) -> dict[int, int]:
        """Reads the offsets back from the last completed commit (a restarted coordinator)."""
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
        self.interval.set()  # the commit interval elapsed

    async def on_checkpoint_complete(self, checkpoint_id: int) -> dict[str, Any]:
        return {"committed": False, "reason": "control-topic commits on its own interval"}

    async def _publish(self, kind: str, instant: str, **kw: Any) -> None:
        await publish(
            self.ctx.env,
            ControlMessage(kind, instant, "coordinator", **kw),
            TOPIC,
            timeout=self.ctx.config.rpc_timeout_s,
        )

    async def _run(self) -> None:
        try:
            while not self.stopping:
                await self._one_commit()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.ctx.error = f"transaction coordinator failed: {self.error}"
            raise

    async def _one_commit(self) -> None:
        ctx = self.ctx
        instant = await ctx.create_instant(self.intervals + 1)  # the interval this commit covers
        self.current = instant
        await self._publish(START_COMMIT, instant, offsets=dict(self.committed_offsets))
        await self.interval.wait()
        self.interval.clear()
        ended_by = self.intervals  # the checkpoint trigger that ended this commit's interval
        await self._publish(END_COMMIT, instant)
        statuses = await self._collect(instant)
        if statuses is None:
            self.abandoned.append(instant)
            await ctx.env.io(ctx.table.rollback, instant, [])
            self.current = None
            return
        written = [s for m in statuses.values() for s in m.write_stats]
        offsets = dict(self.committed_offsets)
        offsets.update({p: m.last_offset + 1 for p, m in statuses.items()})
        if not written:
            await ctx.env.io(ctx.table.rollback, instant, [])  # nothing to commit
            ctx.empty_rounds.append(ended_by)
        else:
            ctx.events.extend(
                WriteMetadataEvent(p, ended_by, instant, m.write_stats, last_batch=True) for p, m in statuses.items()
            )
            await ctx.commit_instant(instant, ended_by, extra={OFFSETS_KEY: format_offsets(offsets)})
            self.commits += 1
            # the k-th commit (its interval may have spanned several checkpoint triggers)
            if ctx.env.fault("coordinator.after_commit_before_next_instant", checkpoint=self.commits):
                ctx.env.crash("injected crash at coordinator.after_commit_before_next_instant")
        # the instant is decided (committed or rolled back) before the offsets say so: an
        # end-of-input arriving now must not roll it back (a race the simulator found)
        self.current = None
        self.committed_offsets = offsets
        await self._publish(ACK_COMMIT, instant)

    async def _collect(self, instant: str) -> dict[int, ControlMessage] | None:
        """WRITE_STATUS from every partition, or None after the write-status timeout."""
        env, cfg = self.ctx.env, self.ctx.config
        assert self.consumer is not None
        statuses: dict[int, ControlMessage] = {}
        deadline = env.now() + cfg.write_status_timeout_s
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
        """Runs commit rounds until every partition's rows are committed (bounded)."""
        env, cfg = self.ctx.env, self.ctx.config
        deadline = env.now() + cfg.job_timeout_s
        while any(self.committed_offsets.get(p, 0) < o for p, o in final_offsets.items()):
            if self._loop is not None and self._loop.done():
                raise RuntimeError(f"the transaction coordinator stopped: {self.error}")
            if env.now() > deadline:
                raise RuntimeError(
                    f"control-topic: offsets {self.committed_offsets} never reached the end of input {final_offsets}"
                )
            self.interval.set()
            await env.sleep(0.05)
        self.stopping = True
        if self._loop is not None:
            self._loop.cancel()
            # bounded: a loop that does not stop is named, not waited for until the job times out
            if not await wait_ended(self._loop, cfg.rpc_timeout_s):
                raise RuntimeError(
                    f"the transaction coordinator did not stop within {cfg.rpc_timeout_s:.0f}s of the end of input"
                )
        # the commit started after the last data (if any) holds nothing: take it off the timeline
        for pending in (await env.io(self.ctx.table.timeline)).pending_commits():
            await env.io(self.ctx.table.rollback, pending, [])
        return {"committed_offsets": dict(self.committed_offsets), "commits": self.commits}

    def describe(self) -> dict[str, Any]:
        return {
            "committed_offsets": self.committed_offsets,
            "abandoned": self.abandoned,
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

    @classmethod
    def make_role(cls, kind, env, config, table, task_names):
        if kind != TOPIC:
            return super().make_role(kind, env, config, table, task_names)
        return ControlTopic(env, retention_records=config.topic_retention_records)
