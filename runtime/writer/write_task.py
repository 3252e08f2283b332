"""The write task: Hudi's StreamWriteFunction on a Flink mailbox thread.

Sources: Apache Hudi 0.10.0 - 0.11.1, ``hudi-flink/.../sink/StreamWriteFunction.java``
(``bufferRecord``, ``flushBucket``, ``flushRemaining``, ``snapshotState``) and
``AbstractStreamWriteFunction`` (``initializeState`` sends the bootstrap event,
``this.eventGateway.sendEventToCoordinator(event)``); Apache Flink 1.14+
``TaskOperatorEventGateway`` / ``RpcTaskOperatorEventGateway`` (the event travels TaskExecutor ->
JobMaster -> the coordinator; a failed delivery fails the task).

Everything the task does runs on its mailbox loop: input batches and barriers (the default
action), operator events (lowest-priority mails), checkpoint notifications (highest). Records are
buffered per file group (bucket); a bucket is flushed when it reaches ``bucket_flush_rows``, the
largest bucket when the task holds ``task_buffer_rows``, and everything at the barrier. Each flush
asks the protocol for the instant to write, which may block the mailbox thread: that is where the
protocols differ. An eager flush with no instant is skipped and its bucket stays buffered (Hudi:
"No inflight instant when flushing data, skip."); at the barrier it fails the task.

A flush's ``WriteMetadataEvent`` is fire-and-forget (:meth:`WriteTask._send_event`): the mailbox
thread does not wait for the coordinator, whose handlers queue behind commits and the table lock.
It goes to the job manager, which hands it on to the coordinator in order with the checkpoint's
completion (Flink's route), so the coordinator has a task's last batch before it learns that the
checkpoint completed. The bootstrap event is the one the task awaits: after a region failover the
coordinator answers it only when every task is back (HUDI-6194).

RPC-facing methods (``push_input``, ``operator_event``, ``notify_*``, ``dump``) run on the host's
event loop outside the mailbox thread, so the task answers introspection while its mailbox is blocked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.core import codec, trace_events
from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.messages import (
    Barrier,
    BlockedWait,
    CheckpointAck,
    CheckpointNotice,
    DataBatch,
    EndOfInput,
    InstantWait,
    MailRun,
    TaskDump,
    TaskState,
    WriteMetadataEvent,
    WriteStat,
)
from runtime.data.columns import BUCKET
from runtime.flink.mailbox import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    Action,
    Controller,
    Mail,
    MailboxProcessor,
    Suspension,
    TaskMailbox,
)
from runtime.hudi.compaction import compacting_file_groups
from runtime.hudi.log_writer import LogSlice, PartitionLogs, append_log_file, list_partition
from runtime.hudi.merge import KeyPositions, log_records, merge_file_group
from runtime.hudi.parquet_format import ParquetWriteOptions
from runtime.hudi.table import HudiTable, Timeline, base_file_name, file_group_id
from runtime.protocols.base import Protocol, WriterSide

if TYPE_CHECKING:
    import asyncio


class FlushError(RuntimeError):
    pass


@dataclass
class _FileVersion:
    instant: str
    rel_path: str
    stat: WriteStat
    key_positions: KeyPositions | None = None  # what the merge that wrote it kept (small file groups)


class WriteTask:
    RPC_METHODS = (
        "push_input",
        "operator_event",
        "notify_checkpoint_complete",
        "notify_checkpoint_aborted",
        "inject_failure",
    )

    def __init__(
        self,
        env: Env,
        config: JobConfig,
        task_id: int,
        table: HudiTable,
        protocol: type[Protocol],
        *,
        data_table: HudiTable | None = None,
        coordinator: str = "coordinator",
        job_manager: str = "job-manager",
    ) -> None:
        self.env = env
        self.config = config
        self.task_id = task_id
        self.table = table  # the protocol's view (timeline polls count as the writer's)
        self.data_table = data_table or table  # base files (counted as writer.data)
        self._parquet = ParquetWriteOptions(config.parquet_compression)
        self.coordinator = coordinator
        self.job_manager = job_manager
        self.current_instant: str | None = None
        self.last_checkpoint_id = -1
        self.protocol: WriterSide = protocol.writer_side(self)
        self.messages_on_dfs = protocol.messages_on_dfs
        self.processor = MailboxProcessor(
            self._default_action,
            TaskMailbox(clock=env.now),
            on_mail_start=self._on_mail_start,
            on_mail_end=self._on_mail_end,
        )
        self.mailbox = self.processor.mailbox
        self._inputs: list[Any] = []
        self._input_space: asyncio.Condition | None = None  # created on start (needs the running loop)
        self._suspension: Suspension | None = None
        self.buckets: dict[tuple[str, int], list[pa.Table]] = {}
        self.bucket_rows: dict[tuple[str, int], int] = {}
        self.buffered_rows = 0
        self.versions: dict[tuple[str, str], _FileVersion] = {}  # (partition, file_id) -> latest
        # merge-on-read: (partition, file_id) -> the slice as this task last wrote it; each
        # partition's listing, taken at its first touch in an instant (a compaction scheduled
        # since the last instant moves file groups to new slices: Hudi's file-system view is
        # refreshed per instant); the timeline and the pending compactions' file groups (partition
        # -> file id -> compaction), read once per instant
        self.slices: dict[tuple[str, str], LogSlice] = {}
        self._log_listings: dict[str, PartitionLogs] = {}
        self._log_instant = ""
        self._log_view: tuple[Timeline, dict[str, dict[str, str]]] = (Timeline([]), {})
        self._log_seqno = 1  # a log record's sequence number counts on across flushes, as Hudi's
        self._listed_partitions: set[str] = set()
        self._partitions_ready: set[str] = set()
        self.events_of_instant: list[WriteMetadataEvent] = []
        self.blocked: BlockedWait | None = None
        self._ended_wait: tuple[float, float] | None = None
        self.waits: list[InstantWait] = []  # blocked waits for an instant, with the instant
        self.state = "created"
        self.error: str | None = None
        self.rows_in = 0
        self.flushes = {"bucket": 0, "buffer": 0, "barrier": 0}
        self.skipped_flushes = 0  # eager flushes skipped for want of an instant (data kept)
        self.step = ""  # what the current default-action step is doing, for introspection

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, restored: TaskState | None = None, *, resume_checkpoint_id: int | None = None) -> None:
        """initializeState: restore, open the protocol, send the bootstrap event, start the loop."""
        import asyncio

        self._input_space = asyncio.Condition()
        await self.protocol.open()
        self.current_instant = self.protocol.initial_instant()
        bootstrap = WriteMetadataEvent(self.task_id, -1, self.current_instant or "", bootstrap=True)
        if resume_checkpoint_id is not None:
            # after a failover the next barrier is resume+1: flushes before it ask for message resume
            self.last_checkpoint_id = int(resume_checkpoint_id)
        if restored is not None:
            self.last_checkpoint_id = max(self.last_checkpoint_id, restored.checkpoint_id)
            self.current_instant = restored.instant or self.current_instant
            bootstrap = WriteMetadataEvent(
                self.task_id,
                restored.checkpoint_id,
                restored.instant,
                [s for e in restored.uncommitted for s in e.write_stats],
                bootstrap=True,
            )
        slow = self._slow_restart()
        if slow:  # the task that comes back last (fault tasks.fail_at_instant_start=<seconds>)
            await self.env.sleep(slow)
        # after a region failover the coordinator may hold the reply until every task is back
        await self.env.call(
            self.coordinator,
            "write_metadata",
            bootstrap,
            timeout=self.config.bootstrap_hold_s + self.config.rpc_timeout_s,
        )
        self.state = "running"
        self.loop = self.env.spawn(self._run_loop(), f"{self.env.role}-mailbox")

    async def _run_loop(self) -> None:
        try:
            await self.processor.run_mailbox_loop()
            self.state = "finished"
        except BaseException as exc:  # the task failed: report it to the job manager
            import asyncio

            if isinstance(exc, asyncio.CancelledError):
                self.state = "cancelled"
                raise
            self.state = "failed"
            self.error = f"{type(exc).__name__}: {exc}"
            from runtime.core.messages import TaskFailure

            self.env.send(
                self.job_manager, "task_failed", TaskFailure(self.env.role, self.error, self.last_checkpoint_id)
            )

    async def _instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        """Asks the protocol; a wait it blocked in is recorded with the instant that ended it,
        for the commit-to-unblock latency."""
        self._ended_wait = None
        instant = await self.protocol.instant_to_write(eager=eager, has_data=has_data)
        if self._ended_wait is not None and instant:
            since, until = self._ended_wait
            self.waits.append(InstantWait(instant, since, until))
            del self.waits[:-1000]
        return instant

    def set_blocked(self, wait: BlockedWait | None) -> None:
        if wait is None and self.blocked is not None:
            self._ended_wait = (self.blocked.since, self.env.now())
            seconds = self.env.now() - self.blocked.since
            self.env.metrics.blocked(self.env.role, seconds)
            self.env.tracer.complete(
                "blocked: " + self.blocked.what,
                self.blocked.since,
                self.env.now(),
                thread="mailbox",
                cat=trace_events.BLOCKED,
                args={"waiting_on": self.blocked.waiting_on},
            )
        self.blocked = wait

    # -- RPC-facing (host event loop, not the mailbox thread) ----------------------------------

    async def push_input(self, item: Any) -> None:
        """Enqueues a batch or barrier; waits while the bounded input queue is full (back-pressure)."""
        assert self._input_space is not None
        async with self._input_space:
            await self._input_space.wait_for(
                lambda: len(self._inputs) < self.config.input_queue_batches or self.state != "running"
            )
            if self.state != "running":
                raise FlushError(f"{self.env.role} is {self.state}, not accepting input")
            self._inputs.append(item)
        if self._suspension is not None:
            suspension, self._suspension = self._suspension, None
            suspension.resume()

    def operator_event(self, event: Any) -> None:
        """Operator events run as lowest-priority mails (Flink's main mailbox executor)."""
        kind = type(event).__name__
        self.mailbox.put(
            Mail(
                lambda: self.protocol.on_operator_event(event),
                MIN_PRIORITY,
                kind,
                f"{kind}(ckp={getattr(event, 'checkpoint_id', '?')})",
                0,
                self.env.now(),
            )
        )

    def notify_checkpoint_complete(self, notice: CheckpointNotice) -> None:
        self.mailbox.put(
            Mail(
                lambda: self._on_checkpoint_complete(notice),
                MAX_PRIORITY,
                "notifyCheckpointComplete",
                f"notifyCheckpointComplete(ckp={notice.checkpoint_id})",
                0,
                self.env.now(),
            )
        )

    def notify_checkpoint_aborted(self, notice: CheckpointNotice) -> None:
        self.mailbox.put(
            Mail(
                lambda: None,
                MAX_PRIORITY,
                "notifyCheckpointAborted",
                f"notifyCheckpointAborted(ckp={notice.checkpoint_id})",
                0,
                self.env.now(),
            )
        )

    def _slow_restart(self) -> float:
        """Seconds the last task waits before bootstrapping after tasks.fail_at_instant_start
        fired with a param: it widens the window in which the others run before it is back."""
        faults = self.env.faults
        if faults is None or self.task_id != self.config.writers - 1:
            return 0.0
        spec = next((s for s in faults.specs if s.point == "tasks.fail_at_instant_start" and s.param), None)
        return spec.param if spec is not None and faults.has_fired(spec) else 0.0

    def inject_failure(self, reason: str) -> None:
        """A fault point elsewhere takes this task down with it (tasks.fail_at_instant_start)."""
        self.env.crash(f"{self.env.role}: injected failure: {reason}")

    def dump(self) -> TaskDump:
        """Introspection, answered even while the mailbox thread is blocked."""
        running = self.processor.current
        if running is not None and running.what == "default action" and self.step:
            running.description = self.step
        return TaskDump(
            role=self.env.role,
            state=self.state,
            task_id=self.task_id,
            error=self.error,
            running=running,
            blocked=dataclasses.replace(self.blocked) if self.blocked is not None else None,
            blocked_s=round(self.env.now() - self.blocked.since, 3) if self.blocked is not None else 0.0,
            mailbox=self.mailbox.snapshot(),
            input_queue=len(self._inputs),
            buffered_rows=self.buffered_rows,
            current_instant=self.current_instant,
            last_checkpoint_id=self.last_checkpoint_id,
            rows_in=self.rows_in,
            flushes=dict(self.flushes),
            skipped_flushes=self.skipped_flushes,
            protocol=self.protocol.describe(),
            waits=list(self.waits),
        )

    # -- the mailbox thread --------------------------------------------------------------------

    def _on_mail_start(self, info: MailRun) -> None:
        if info.what == "mail":
            self.env.metrics.mail(info.kind)

    def _on_mail_end(self, info: MailRun, error: BaseException | None) -> None:
        self.env.tracer.complete(
            info.description or info.kind,
            info.started_at,
            self.env.now(),
            thread="mailbox",
            cat=info.what,
            args={"error": repr(error)} if error else None,
        )

    async def _default_action(self, controller: Controller) -> None:
        if not self._inputs:
            self._suspension = controller.suspend_default_action()
            return
        item = self._inputs.pop(0)
        assert self._input_space is not None
        async with self._input_space:
            self._input_space.notify_all()
        if isinstance(item, DataBatch):
            self.step = f"processElement(batch of {item.records.num_rows} rows, round {item.round})"
            records = self.protocol.accept(item.records, item.start_offset)
            if records is not None and records.num_rows:
                await self.process_batch(records)
        elif isinstance(item, Barrier):
            self.step = f"snapshotState(checkpoint {item.checkpoint_id})"
            await self.snapshot_state(item.checkpoint_id)
        elif isinstance(item, EndOfInput):
            controller.all_actions_completed()
        else:
            raise TypeError(f"unexpected input {type(item).__name__}")

    async def process_batch(self, records: pa.Table) -> None:
        """processElement for a batch: buffer per bucket, flush on the size triggers."""
        self.rows_in += records.num_rows
        for key, part in _split_by_file_group(records, self.table.props.partition_field):
            self.buckets.setdefault(key, []).append(part)
            self.bucket_rows[key] = self.bucket_rows.get(key, 0) + part.num_rows
            self.buffered_rows += part.num_rows
            if self.bucket_rows[key] >= self.config.bucket_flush_rows and self.protocol.may_flush_eagerly():
                self.flushes["bucket"] += 1
                await self.flush_bucket(key)
        while (
            self.buffered_rows >= self.config.task_buffer_rows
            and self.bucket_rows
            and self.protocol.may_flush_eagerly()
        ):
            largest = max(self.bucket_rows, key=lambda k: self.bucket_rows[k])
            self.flushes["buffer"] += 1
            if not await self.flush_bucket(largest):
                break  # Hudi logs "still flush the max size data bucket failed" and buffers on

    def has_data(self) -> bool:
        return self.buffered_rows > 0

    async def flush_bucket(self, key: tuple[str, int]) -> bool:
        """An eager flush of one bucket (before the barrier); False when it was skipped for want
        of an instant (Hudi 0.10+ ``StreamWriteFunction.flushBucket``)."""
        outer = self.step
        self.step = f"{outer} -> flushBucket({key[0]}/{key[1]}) -> instantToWrite(eager)"
        instant = await self._instant_to_write(eager=True, has_data=True)
        self.step = outer
        if instant is None:
            # Hudi: "No inflight instant when flushing data, skip." The bucket stays buffered.
            self.skipped_flushes += 1
            self.env.tracer.instant(f"flush of {key[0]}/{key[1]} skipped: no inflight instant", thread="mailbox")
            return False
        self.current_instant = instant
        stat = await self._write_bucket(key, instant)
        event = WriteMetadataEvent(self.task_id, self.last_checkpoint_id + 1, instant, [stat])
        await self._send_event(event)
        return True

    async def snapshot_state(self, checkpoint_id: int) -> None:
        """The barrier: flush everything into the instant, report the last batch, ack the checkpoint."""
        start = self.env.now()
        self.last_checkpoint_id = checkpoint_id
        if self.protocol.flushes_at_barrier:
            instant = await self._instant_to_write(eager=False, has_data=self.has_data())
            if instant is None:
                # in case there are empty checkpoints that have no input data (Hudi's message)
                raise FlushError(
                    f"{self.env.role}: No inflight instant when flushing data at checkpoint {checkpoint_id}"
                )
            self.current_instant = instant
            stats = await self.flush_all(instant)
            await self._send_event(WriteMetadataEvent(self.task_id, checkpoint_id, instant, stats, last_batch=True))
        self.protocol.on_snapshot(checkpoint_id)
        instant = self.current_instant or ""
        state = TaskState(
            self.task_id, checkpoint_id, instant, [e for e in self.events_of_instant if e.instant == instant]
        )
        self.env.tracer.complete(
            f"snapshotState(ckp={checkpoint_id})",
            start,
            self.env.now(),
            thread="mailbox",
            cat=trace_events.SNAPSHOT,
            args=trace_events.checkpoint_args(checkpoint_id, trace_events.SNAPSHOT_TAKEN),
        )
        if self.env.fault("task.in_snapshot", checkpoint=checkpoint_id, task=self.task_id):
            self.env.crash("injected crash at task.in_snapshot")
        if self.messages_on_dfs and self.env.fault(
            "bus.deleted_between_restarts", checkpoint=checkpoint_id, task=self.task_id
        ):
            self.env.crash("injected crash at bus.deleted_between_restarts (the bus goes next)")
        slow = self.env.fault("checkpoint.timeout", checkpoint=checkpoint_id, task=self.task_id)
        if slow is not None:  # a snapshot slower than the checkpoint timeout
            await self.env.sleep(slow.param or self.config.checkpoint_timeout_s + 1.0)
        await self.env.call(
            self.job_manager,
            "ack_checkpoint",
            CheckpointAck(self.env.role, checkpoint_id, codec.encode(state)),
            timeout=self.config.rpc_timeout_s,
        )
        if self.env.fault("task.after_checkpoint_before_commit", checkpoint=checkpoint_id, task=self.task_id):
            self.env.crash("injected crash at task.after_checkpoint_before_commit")

    async def flush_all(self, instant: str) -> list[WriteStat]:
        """Flushes every buffered bucket into ``instant``."""
        stats = []
        for key in sorted(self.buckets):
            self.flushes["barrier"] += 1
            stats.append(await self._write_bucket(key, instant))
        return stats

    async def forget_uncommitted_versions(self) -> int:
        """Forgets the file versions this task wrote into instants that never committed (a
        commit abandoned and rolled back): the next flush of those file groups merges onto their
        committed base file instead of a deleted one. Returns how many were forgotten."""
        if not self.versions and not self.slices:
            return 0
        timeline = await self.env.io(self.data_table.timeline)
        stale = [k for k, v in self.versions.items() if not timeline.is_completed(v.instant)]
        for key in stale:
            del self.versions[key]
            self._listed_partitions.discard(key[0])  # list its committed base files again
        # merge-on-read: the rollback deleted log files and wrote rollback blocks into new log
        # versions, so every slice is listed again (versions must not collide)
        forgotten = len(self.slices)
        self.slices.clear()
        self._log_listings.clear()
        self._log_instant = ""  # the next flush lists the timeline again
        return len(stale) + forgotten

    def discard_buffers(self) -> int:
        """Drops every buffered record (a protocol that will consume them again); returns rows."""
        rows = self.buffered_rows
        self.buckets.clear()
        self.bucket_rows.clear()
        self.buffered_rows = 0
        return rows

    def put_mail(self, action: Action, kind: str, description: str, priority: int = MIN_PRIORITY) -> None:
        """Queues work for the mailbox thread (what a protocol's own agent delivers)."""
        self.mailbox.put(Mail(action, priority, kind, description, 0, self.env.now()))

    async def _send_event(self, event: WriteMetadataEvent) -> None:
        """``sendEventToCoordinator``: fire-and-forget. The event goes to the job manager, which
        hands it to the coordinator (Flink's route: TaskExecutor -> JobMaster -> the coordinator's
        holder), so it reaches the coordinator before this task's checkpoint ack does, as in Flink;
        a lost event fails the task (``RpcTaskOperatorEventGateway``)."""
        self.fault_point("task.after_flush_before_event")
        self.events_of_instant = [e for e in self.events_of_instant if e.instant == event.instant]
        self.events_of_instant.append(event)
        if await self.protocol.on_write_event(event):
            return
        self.env.send_event(
            self.job_manager,
            "write_metadata",
            event,
            timeout=self.config.rpc_timeout_s,
            on_failure=self._event_lost,
        )

    def _event_lost(self, reason: str) -> None:
        """Flink fails the task when an operator event could not be delivered."""
        if self.state != "running":
            return
        self.state = "failed"
        self.error = f"an operator event to the coordinator was lost: {reason}"
        from runtime.core.messages import TaskFailure

        self.env.send(self.job_manager, "task_failed", TaskFailure(self.env.role, self.error, self.last_checkpoint_id))

    def _on_checkpoint_complete(self, notice: CheckpointNotice) -> None:
        # Nothing to release here: Hudi's write function only cleans write handles.
        self.env.tracer.instant(
            f"checkpoint {notice.checkpoint_id} complete",
            thread="mailbox",
            args=trace_events.checkpoint_args(notice.checkpoint_id, trace_events.NOTIFIED),
        )

    # -- writing a file group ------------------------------------------------------------------

    def fault_point(self, point: str) -> Any:
        spec = self.env.fault(point, checkpoint=self.last_checkpoint_id + 1, task=self.task_id)
        if spec is not None:
            self.env.crash(f"injected crash at {point}")
        return spec

    async def _write_bucket(self, key: tuple[str, int], instant: str) -> WriteStat:
        self.fault_point("task.before_flush")
        parts = self.buckets.pop(key)
        self.buffered_rows -= self.bucket_rows.pop(key)
        records = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        start = self.env.now()
        stat = await self.env.io(self._write_file_group_blocking, key, instant, records)
        self.env.tracer.complete(
            f"flush {key[0]}/{key[1]}",
            start,
            self.env.now(),
            thread="io",
            cat=trace_events.FLUSH,
            args={"instant": instant, "rows": records.num_rows},
        )
        return stat

    def _write_file_group_blocking(self, key: tuple[str, int], instant: str, records: pa.Table) -> WriteStat:
        partition, bucket = key
        table = self.data_table
        fid = file_group_id(table.props.table_name, partition, bucket)
        if partition not in self._partitions_ready:
            table.ensure_partition(partition, instant)
            self._partitions_ready.add(partition)
        if table.props.merge_on_read:
            return self._append_log_blocking(partition, fid, instant, records)
        prev = self.versions.get((partition, fid))
        if prev is None and partition not in self._listed_partitions:
            # first touch of this partition: find the committed base files once
            committed = table.committed_base_files(partition, table.timeline())
            for other_fid, (inst, rel) in committed.items():
                self.versions.setdefault(
                    (partition, other_fid),
                    _FileVersion(inst, rel, WriteStat(other_fid, rel, partition, inst, 0, 0, 0, 0, 0)),
                )
            self._listed_partitions.add(partition)
            prev = self.versions.get((partition, fid))
        base = table.read_base_file(prev.rel_path) if prev is not None else None
        name = base_file_name(fid, f"{self.task_id}-0-0", instant)
        rel = f"{partition}/{name}"
        merged = merge_file_group(
            base,
            records,
            instant=instant,
            partition=partition,
            file_name=name,
            key=self._key_field,
            precombine=self._precombine,
            partition_id=self.task_id,
            base_instant=prev.instant if prev is not None and base is not None else None,
            base_positions=prev.key_positions if prev is not None and base is not None else None,
        )
        size = table.write_base_file(rel, merged.table, self._parquet)
        if prev is not None and prev.instant == instant:  # the same instant writes this file group again
            prev_commit = prev.stat.prev_commit
            inserts = prev.stat.num_inserts + merged.inserts
            updates = prev.stat.num_update_writes + merged.updates
        else:
            prev_commit = prev.instant if prev is not None else "null"
            inserts, updates = merged.inserts, merged.updates
        stat = WriteStat(
            fid, rel, partition, prev_commit, merged.table.num_rows, inserts, updates, size, size, merged.written
        )
        self.versions[(partition, fid)] = _FileVersion(instant, rel, stat, merged.key_positions)
        return stat

    def _append_log_blocking(self, partition: str, fid: str, instant: str, records: pa.Table) -> WriteStat:
        """A merge-on-read flush: the records as the next log file of the file group's latest
        slice (:mod:`runtime.hudi.log_writer`)."""
        table = self.data_table
        if instant != self._log_instant:  # a new instant sees the table anew: one timeline listing
            self.slices.clear()
            self._log_listings.clear()
            timeline = table.timeline()
            # version 8+ names a log after its instant: no pending compaction's slice to find
            held = {} if table.version.logs_per_instant else compacting_file_groups(table, timeline)
            self._log_view = (timeline, held)
            self._log_instant = instant
        listing = self._log_listings.get(partition)
        if listing is None:  # first touch of this partition: its file slices, from one listing
            timeline, held = self._log_view
            listing = list_partition(table, partition, timeline, held.get(partition, {}))
            self._log_listings[partition] = listing
        slice_ = self.slices.get((partition, fid)) or listing.slice_for(fid, instant)
        rows = log_records(
            records,
            instant=instant,
            partition=partition,
            file_id=fid,
            key=self._key_field,
            precombine=self._precombine,
            partition_id=self.task_id,
            seqno=self._log_seqno,
        )
        self._log_seqno += rows.num_rows
        stat, self.slices[(partition, fid)] = append_log_file(
            table, partition, fid, slice_, instant, rows, f"{self.task_id}-0-0"
        )
        return stat

    @property
    def _key_field(self) -> str:
        return self.table.props.record_key_field

    @property
    def _precombine(self) -> str:
        return self.table.props.precombine_field


def _split_by_file_group(records: pa.Table, partition_field: str) -> list[tuple[tuple[str, int], pa.Table]]:
    """Groups a batch by (partition, bucket), keeping stream order within each group."""
    if records.num_rows == 0:
        return []
    partitions = records.column(partition_field)
    if partitions.type != pa.string():
        partitions = pc.cast(partitions, pa.string())
    buckets = records.column(BUCKET).to_numpy().astype(np.int64)
    if buckets.min() == buckets.max() and not partitions.null_count:
        lo_hi = pc.min_max(partitions)
        if lo_hi["min"] == lo_hi["max"]:  # the whole batch is one file group (no copy needed)
            return [((lo_hi["min"].as_py(), int(buckets[0])), records)]
    encoded = pc.dictionary_encode(partitions).combine_chunks()
    part_idx = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    code = part_idx * (int(buckets.max()) + 1) + buckets
    order = np.argsort(code, kind="stable")
    cuts = np.flatnonzero(np.diff(code[order])) + 1
    grouped = records.take(pa.array(order, pa.int64()))  # one take; each group is a slice of it
    names = encoded.dictionary.to_pylist()
    out = []
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)], strict=True):
        first = int(order[lo])
        out.append(((names[part_idx[first]], int(buckets[first])), grouped.slice(lo, hi - lo)))
    return out
