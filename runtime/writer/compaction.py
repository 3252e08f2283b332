"""The compaction operators of Hudi's Flink merge-on-read pipeline, as roles of the job.

Sources (apache/hudi 0.13 - 0.15, ``hudi-flink/.../sink/compact/`` and ``util/CompactionUtil``;
``Pipelines.compact`` wires them after the write operator):

* :class:`CompactionPlanOperator` (``CompactionPlanOperator``, parallelism 1): on ``open`` it rolls
  every inflight compaction back to requested (``CompactionUtil.rollbackCompaction(table)``: a
  compaction a failed attempt left half done runs again); on ``notifyCheckpointComplete`` it takes
  the earliest *requested* compaction (``filterPendingCompactionTimeline``, first REQUESTED), marks
  it inflight and emits one ``CompactionPlanEvent`` per operation, rebalanced over the compaction
  tasks; at the end of a bounded input, ``endInput`` does the same once more.
* :class:`CompactOperator` (``CompactOperator`` / ``CompactFunction``, ``compaction.tasks``
  parallel instances): compacts one file group per event on its single executor thread
  (``NonThrownExecutor``); a failure emits a failed ``CompactionCommitEvent`` (no write status)
  instead of failing the job.
* :class:`CompactionCommitSink` (``CompactionCommitSink``, parallelism 1): buffers the events per
  instant and file id; once there is one per operation of the plan it rolls the compaction back
  (``CompactionUtil.rollbackCompaction(table, instant)``) if any failed, otherwise writes the
  compaction's commit (``CompactHelpers.createCompactionMetadata``, ``completeCompaction``).

The coordinator schedules the plans (:mod:`runtime.writer.compaction_schedule`);
the file-level work is :mod:`runtime.hudi.client.compaction`.

Differences: the compaction operators take no part in checkpoints (they keep no state Flink would
restore: the plan is on the timeline, and the commit sink's buffer is rebuilt by re-running the
compaction). The job manager notifies the plan operator of a completed checkpoint before the
coordinator, as Flink's ``CheckpointCoordinator.sendAcknowledgeMessages`` notifies the tasks before
the coordinators: the coordinator schedules a plan after its commit, so the plan operator runs it
at the next completed checkpoint (a plan saved while the operator lists the timeline may run at
once, in Flink too). At the end of input the plan operator runs every requested compaction, not only the
earliest, and waits (bounded) until none is pending, retrying a failed one up to
:data:`FINAL_ATTEMPTS` times: the official reader (hudi-rs 0.5.0) reads no file slice of a pending
compaction, so a job that ended with one pending would hide the rows written after its plan.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from runtime.core import trace_events
from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.messages import CheckpointNotice, CompactionCommitEvent, CompactionPlanEvent, WriteStat
from runtime.hudi.client import compaction
from runtime.hudi.client.concurrency import ConcurrencyControl
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.compaction_plan import CompactionOperation
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import INFLIGHT, REQUESTED
from runtime.writer.file_group_writer import HeldRows, filter_to_keep

PLAN_OPERATOR = "compaction-plan"
COMMIT_SINK = "compaction-commit"
COMPACT_TASK = "compact"  # compact-0, compact-1, ...
FINAL_ATTEMPTS = 3  # runs of one compaction at the end of input before the job gives up on it


def compaction_role_names(cfg: JobConfig) -> list[str]:
    """The job's compaction roles, in start order (sink first: the tasks send to it)."""
    if not cfg.compacts:
        return []
    tasks = [f"{COMPACT_TASK}-{i}" for i in range(cfg.compaction_parallelism)]
    return [COMMIT_SINK, *tasks, PLAN_OPERATOR]


class CompactionPlanOperator:
    RPC_METHODS = ("notify_checkpoint_complete", "end_of_input")

    def __init__(self, env: Env, config: JobConfig, table: HudiTable, compact_tasks: list[str]) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.compact_tasks = compact_tasks
        self.next_task = 0  # rebalance: round robin over the compaction tasks
        self.executed = 0  # compactions sent to the compaction tasks (runs of one included)

    async def start(self) -> None:
        """``open``: every inflight compaction back to requested, to be run again."""
        timeline = await self.env.io(self.table.timeline)
        for instant in timeline.pending_compactions(INFLIGHT):
            await self.env.io(WriteClient(self.table).rollback_compaction, instant, self.env.wall_time())
            self.env.metrics.count("compactions_rolled_back")
            self.env.tracer.instant(f"roll back inflight compaction {instant}", thread="compaction-plan")

    async def notify_checkpoint_complete(self, notice: CheckpointNotice) -> None:
        """Runs the earliest requested compaction, if any."""
        timeline = await self.env.io(self.table.timeline)
        requested = timeline.pending_compactions(REQUESTED)
        if requested:
            await self._execute(requested[0], notice.checkpoint_id)

    async def _execute(self, instant: str, checkpoint_id: int) -> None:
        plan = await self.env.io(compaction.start_compaction, self.table, instant)
        self.executed += 1
        self.env.tracer.instant(
            f"execute compaction {instant}",
            thread="compaction-plan",
            args={"file_groups": len(plan.operations), "checkpoint": checkpoint_id},
        )
        for op in plan.operations:
            task = self.compact_tasks[self.next_task % len(self.compact_tasks)]
            self.next_task += 1
            event = CompactionPlanEvent(
                instant, op.partition, op.file_id, op.base_instant, op.base_file, list(op.log_files), checkpoint_id
            )
            self.env.send(task, "compact", event)

    async def end_of_input(self, notice: CheckpointNotice) -> dict[str, Any]:
        """``endInput``: every requested compaction runs, and the pipeline waits (bounded) until
        none is pending; a failed one is retried (the module docstring says why)."""
        attempts: dict[str, int] = {}
        deadline = self.env.now() + self.config.checkpoint_timeout_s * FINAL_ATTEMPTS
        while True:
            timeline = await self.env.io(self.table.timeline)
            if not timeline.pending_compactions():
                return {"compactions_run": self.executed}
            if self.env.now() > deadline:
                raise TableError(
                    f"compactions {timeline.pending_compactions()} are still pending at the end of input after "
                    f"{self.config.checkpoint_timeout_s * FINAL_ATTEMPTS:.0f}s (--checkpoint-timeout x "
                    f"{FINAL_ATTEMPTS}): the official reader would not show the rows written after their plans"
                )
            if not timeline.pending_compactions(INFLIGHT):
                for instant in timeline.pending_compactions(REQUESTED):
                    attempts[instant] = attempts.get(instant, 0) + 1
                    if attempts[instant] > FINAL_ATTEMPTS:
                        raise TableError(
                            f"compaction {instant} failed {FINAL_ATTEMPTS} times at the end of input; "
                            "its plan stays requested on the timeline for the next run"
                        )
                    await self._execute(instant, notice.checkpoint_id)
            await self.env.sleep(self.config.wait_tick_s)


class CompactOperator:
    RPC_METHODS = ("compact",)

    def __init__(self, env: Env, config: JobConfig, table: HudiTable, task_id: int) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.task_id = task_id
        self._parquet = ParquetWriteOptions.of(config)
        self._executor = asyncio.Lock()  # NonThrownExecutor: one compaction at a time
        # the timeline a compaction's blocks are judged by, listed at its first file group (as
        # HoodieCompactor reads the completed instants once per compaction)
        self._timeline: tuple[str, Timeline] | None = None
        # (partition, file id) -> the base file this task last wrote into the group: when the
        # group's next compaction comes to this task too (the plan operator deals round robin: a
        # group does when every plan lists the same groups, a multiple of the tasks), it reads
        # the file without decoding it again (rows held within HELD_ROWS_BYTES)
        self._held: dict[tuple[str, str], compaction.CompactedBase] = {}
        self._held_rows = HeldRows(self._parquet)

    async def compact(self, event: CompactionPlanEvent) -> None:
        async with self._executor:
            start = self.env.now()
            op = CompactionOperation(
                event.partition, event.file_id, event.base_instant, event.base_file, tuple(event.log_files)
            )
            try:
                if self.env.faults.fire("compaction.failed", checkpoint=event.checkpoint_id, task=self.task_id):
                    raise TableError("injected failure at compaction.failed")
                stat = await self.env.io(self._compact_blocking, op, event.instant)
            except (OSError, ValueError, TableError) as exc:  # NonThrownExecutor: reported, not thrown
                self.env.metrics.count("compactions_failed")
                error = f"{type(exc).__name__}: {exc}"
                self.env.send(
                    COMMIT_SINK,
                    "commit_event",
                    CompactionCommitEvent(event.instant, op.file_id, self.task_id, None, error, event.checkpoint_id),
                )
                return
            if self.env.faults.fire("compaction.crash_during", checkpoint=event.checkpoint_id, task=self.task_id):
                self.env.crash("injected crash at compaction.crash_during")
            self.env.tracer.complete(
                f"compact {op.partition}/{op.file_id[:8]}",
                start,
                self.env.now(),
                thread="compaction",
                cat=trace_events.COMPACTION,
                args={"instant": event.instant, "rows": stat.num_writes, "log_files": len(op.log_files)},
            )
            self.env.send(
                COMMIT_SINK,
                "commit_event",
                CompactionCommitEvent(event.instant, op.file_id, self.task_id, stat, "", event.checkpoint_id),
            )

    def _compact_blocking(self, op: CompactionOperation, instant: str) -> WriteStat:
        if self._timeline is None or self._timeline[0] != instant:
            self._timeline = (instant, self.table.timeline())
        group = (op.partition, op.file_id)
        stat, written = compaction.compact_file_group(
            self.table,
            op,
            instant,
            self._timeline[1],
            task_id=self.task_id,
            options=self._parquet,
            held=self._held.get(group),
        )
        self._hold(group, written)
        return stat

    def _hold(self, group: tuple[str, str], written: compaction.CompactedBase) -> None:
        """Keeps the rows of the base file written (within the budget) and its keys' filter (of
        a large file), the group's previous one let go. Only on a storage that encodes parquet: the
        simulated one keeps the table itself."""
        previous = self._held.pop(group, None)
        if previous is not None:
            self._held_rows.let_go(previous.rows)
        if not self.table.dfs.encodes_parquet or written.rows is None:
            return
        rows = self._held_rows.hold(written.rows)
        self._held[group] = compaction.CompactedBase(written.rel_path, rows, filter_to_keep(written.key_filter))


class CompactionCommitSink:
    RPC_METHODS = ("commit_event",)

    def __init__(self, env: Env, config: JobConfig, table: HudiTable, schema_json: str) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.schema_json = schema_json
        self.buffer: dict[str, dict[str, CompactionCommitEvent]] = {}
        self.plan_sizes: dict[str, int] = {}
        # under a multi-writer --concurrency-mode the compaction completes in a transaction
        # (BaseHoodieTableServiceClient.completeCompaction: beginTransaction ... endTransaction)
        control = ConcurrencyControl.of(config)
        self.client = WriteClient(table, concurrency=control).attach(env, f"{env.role} of {config.table_name}")

    async def commit_event(self, event: CompactionCommitEvent) -> None:
        events = self.buffer.setdefault(event.instant, {})
        events[event.file_id] = event  # a re-run's event replaces the failed attempt's
        if event.instant not in self.plan_sizes:
            plan = await self.env.io(compaction.read_plan, self.table, event.instant)
            self.plan_sizes[event.instant] = len(plan.operations)
        if len(events) < self.plan_sizes[event.instant]:
            return
        done = self.buffer.pop(event.instant)
        self.plan_sizes.pop(event.instant)
        failed = [e for e in done.values() if e.failed]
        if failed:
            async with self.client.transaction(event.instant, f"roll back compaction {event.instant}"):
                await self.env.io(self.client.rollback_compaction, event.instant, self.env.wall_time())
            self.env.metrics.count("compactions_rolled_back")
            self.env.tracer.instant(
                f"roll back compaction {event.instant}",
                thread="compaction-commit",
                args={"failed_file_groups": len(failed), "error": failed[0].error[:200]},
            )
            return
        stats: list[WriteStat] = [e.stat for e in done.values() if e.stat is not None]
        checkpoint = max((e.checkpoint_id for e in done.values()), default=-1)
        if self.env.faults.fire("compaction.commit_lost", checkpoint=checkpoint):
            self.env.crash("injected crash at compaction.commit_lost")
        async with self.client.transaction(event.instant, f"commit compaction {event.instant}"):
            await self.env.io(
                functools.partial(self.client.commit_compaction, event.instant, stats, self.schema_json, self.env.now())
            )
        self.env.metrics.count("compactions_committed")
        self.env.tracer.instant(
            f"commit compaction {event.instant}",
            thread="compaction-commit",
            args={"file_groups": len(stats), "rows": sum(s.num_writes for s in stats)},
        )
