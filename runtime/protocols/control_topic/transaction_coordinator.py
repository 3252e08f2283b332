"""The control topic's transaction coordinator: ``ConnectTransactionCoordinator`` in the coordinator role.

Hudi 0.10+ hudi-kafka-connect (the ``ControlMessage`` proto version):
``connect/transaction/ConnectTransactionCoordinator.java``, ``connect/writers/KafkaConnectTransactionServices.java``
(``startCommit``, ``endCommit``) and ``connect/writers/KafkaConnectConfigs.java``.

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
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any
from typing import Protocol as _TypingProtocol

from runtime.core import roles
from runtime.core.config import JobConfig, flag_of
from runtime.core.env import wait_ended
from runtime.core.fault_spec import InjectedCrash
from runtime.core.messages import WriteMetadataEvent
from runtime.hudi.table.table_config import TableError
from runtime.kafka.control_topic_ports import control_topic_port
from runtime.kafka.port import ControlConsumer, ControlTopicPort
from runtime.kafka.topic import (
    ACK_COMMIT,
    END_COMMIT,
    START_COMMIT,
    WRITE_STATUS,
    ControlMessage,
)
from runtime.protocols.base import CoordinatorContext, CoordinatorSide
from runtime.protocols.control_topic.offsets import OFFSETS_KEY, format_offsets, parse_offsets

# ConnectTransactionCoordinator's constants (hard-coded in Hudi, not configurable)
START_COMMIT_INIT_DELAY_S = 0.1  # START_COMMIT_INIT_DELAY_MS: the first commit, and after an ACK
RESTART_COMMIT_DELAY_S = 0.5  # RESTART_COMMIT_DELAY_MS: after a failed or timed-out commit


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
