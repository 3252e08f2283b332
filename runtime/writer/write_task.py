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

The mailbox loop, the input queue and the mails are :class:`runtime.writer.stream_task.StreamTask`'s
(Flink's ``StreamTask``); how a flush becomes a file is the table type's write handle
(:mod:`runtime.writer.file_group_writer`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from runtime.core import codec, roles, trace_events
from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.fault_points import FaultPoints
from runtime.core.fault_spec import InjectedCrash
from runtime.core.messages import (
    Barrier,
    CheckpointAck,
    CheckpointNotice,
    DataBatch,
    EndOfInput,
    FileSliceRequest,
    InstantWait,
    PartitionFiles,
    TaskDump,
    TaskState,
    WriteMetadataEvent,
    WriteStat,
)
from runtime.flink.mailbox import Controller
from runtime.hudi.client.concurrency import is_multi_writer
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.file_system_view import (
    REMOTE_TIMEOUT_OPTION,
    REMOTE_TIMEOUT_S,
    load_view_storage_properties,
    tasks_use_remote_view,
)
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.meta_client import meta_client_per_handle, write_client_opened
from runtime.protocols.base import Protocol, WriterSide
from runtime.writer.buckets import split_by_file_group
from runtime.writer.file_group_writer import file_group_writer
from runtime.writer.stream_task import FlushError, StreamTask


class WriteTask(StreamTask):
    RPC_METHODS = (*StreamTask.RPC_METHODS, "operator_event", "inject_failure")

    def __init__(
        self,
        env: Env,
        config: JobConfig,
        task_id: int,
        table: HudiTable,
        protocol: type[Protocol],
        *,
        data_table: HudiTable | None = None,
        coordinator: str = roles.COORDINATOR,
        job_manager: str = roles.JOB_MANAGER,
    ) -> None:
        super().__init__(env, config, job_manager)
        self.task_id = task_id
        self.table = table  # the protocol's view (timeline polls count as the writer's)
        self.data_table = data_table or table  # base files (counted as writer.data)
        self.coordinator = coordinator
        self.current_instant: str | None = None
        self.restored: TaskState | None = None  # the checkpointed state it restarted from
        self.protocol: WriterSide = protocol.writer_side(self)
        self.messages_on_dfs = protocol.messages_on_dfs
        self.buckets: dict[tuple[str, int], list[pa.Table]] = {}
        self.bucket_rows: dict[tuple[str, int], int] = {}
        self.buffered_rows = 0
        # how a flush is written: a base file version (copy-on-write) or a log file (merge-on-read)
        self.writer = file_group_writer(
            self.data_table,
            task_id,
            ParquetWriteOptions.of(config),
            per_handle=meta_client_per_handle(config.meta_client),
            shared=is_multi_writer(config),
        )
        # the file slices come from the coordinator's embedded timeline server (--file-system-view)
        self.remote_view = tasks_use_remote_view(config.file_system_view, protocol.release_file_system_view)
        self.events_of_instant: list[WriteMetadataEvent] = []
        self.waits: list[InstantWait] = []  # blocked waits for an instant, with the instant
        self.rows_in = 0
        self.flushes = {"bucket": 0, "buffer": 0, "barrier": 0}
        self.skipped_flushes = 0  # eager flushes skipped for want of an instant (data kept)
        self.step = ""  # what the current default-action step is doing, for introspection

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, restored: TaskState | None = None, *, resume_checkpoint_id: int | None = None) -> None:
        """initializeState: restore, open the protocol, send the bootstrap event, start the loop."""
        self._open_input()
        self.restored = restored
        if meta_client_per_handle(self.config.meta_client):  # the write client's tables, as Hudi opens it
            await self.env.io(write_client_opened, self.data_table)
        if self.remote_view:  # the write client's view storage config, saved by the coordinator
            await self.env.io(load_view_storage_properties, self.data_table)
        await self.protocol.open()
        self.current_instant = self.protocol.initial_instant()
        bootstrap = _bootstrap_event(self.task_id, self.current_instant, restored)
        if resume_checkpoint_id is not None:
            # after a failover the next barrier is resume+1: flushes before it ask for message resume
            self.last_checkpoint_id = int(resume_checkpoint_id)
        if restored is not None:
            self.last_checkpoint_id = max(self.last_checkpoint_id, restored.checkpoint_id)
            self.current_instant = restored.instant or self.current_instant
        slow = _slow_restart_s(self.env.faults) if self.task_id == self.config.writers - 1 else 0.0
        if slow:  # the task that comes back last (fault tasks.fail_at_instant_start=<seconds>)
            await self.env.sleep(slow)
        # after a region failover the coordinator may hold the reply until every task is back
        await self.env.call(
            self.coordinator,
            "write_metadata",
            bootstrap,
            timeout=self.config.bootstrap_hold_s + self.config.rpc_timeout_s,
        )
        self._start_mailbox_loop()

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

    # -- RPC-facing (host event loop, not the mailbox thread) ----------------------------------

    def operator_event(self, event: Any) -> None:
        """Operator events run as lowest-priority mails (Flink's main mailbox executor)."""
        kind = type(event).__name__
        description = f"{kind}(ckp={getattr(event, 'checkpoint_id', '?')})"
        self.put_mail(lambda: self.protocol.on_operator_event(event), kind, description)

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

    async def _default_action(self, controller: Controller) -> None:
        item = await self._next_input(controller)
        if item is None:
            return
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
        for key, part in split_by_file_group(records, self.table.props.partition_field):
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
        if self.env.faults.fire("task.in_snapshot", checkpoint=checkpoint_id, task=self.task_id):
            self.env.crash("injected crash at task.in_snapshot")
        if self.messages_on_dfs and self.env.faults.fire(
            "bus.deleted_between_restarts", checkpoint=checkpoint_id, task=self.task_id
        ):
            self.env.crash("injected crash at bus.deleted_between_restarts (the bus goes next)")
        slow = self.env.faults.fire("checkpoint.timeout", checkpoint=checkpoint_id, task=self.task_id)
        if slow is not None:  # a snapshot slower than the checkpoint timeout
            await self.env.sleep(slow.param or self.config.checkpoint_timeout_s + 1.0)
        await self.env.call(
            self.job_manager,
            "ack_checkpoint",
            CheckpointAck(self.env.role, checkpoint_id, codec.encode(state)),
            timeout=self.config.rpc_timeout_s,
        )
        if self.env.faults.fire("task.after_checkpoint_before_commit", checkpoint=checkpoint_id, task=self.task_id):
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
        commit abandoned and rolled back): the next flush of those file groups writes onto what
        was committed instead of deleted files. Returns how many were forgotten."""
        if not self.writer.remembers_writes():
            return 0
        timeline = await self.env.io(self.data_table.timeline)
        return self.writer.forget_uncommitted(timeline)

    def discard_buffers(self) -> int:
        """Drops every buffered record (a protocol that will consume them again); returns rows."""
        rows = self.buffered_rows
        self.buckets.clear()
        self.bucket_rows.clear()
        self.buffered_rows = 0
        return rows

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
        if self.state == "running":
            self._fail(f"an operator event to the coordinator was lost: {reason}")

    def _on_checkpoint_complete(self, notice: CheckpointNotice) -> None:
        # Nothing to release here: Hudi's write function only cleans write handles.
        self.env.tracer.instant(
            f"checkpoint {notice.checkpoint_id} complete",
            thread="mailbox",
            args=trace_events.checkpoint_args(notice.checkpoint_id, trace_events.NOTIFIED),
        )

    # -- writing a file group ------------------------------------------------------------------

    def fault_point(self, point: str) -> Any:
        spec = self.env.faults.fire(point, checkpoint=self.last_checkpoint_id + 1, task=self.task_id)
        if spec is not None:
            self.env.crash(f"injected crash at {point}")
        return spec

    async def _write_bucket(self, key: tuple[str, int], instant: str) -> WriteStat:
        self.fault_point("task.before_flush")
        parts = self.buckets.pop(key)
        self.buffered_rows -= self.bucket_rows.pop(key)
        records = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        start = self.env.now()
        files = await self._view_files(key[0], key[1], instant)
        stat = await self.env.io(self.writer.write, key[0], key[1], instant, records, files)
        self.env.tracer.complete(
            f"flush {key[0]}/{key[1]}",
            start,
            self.env.now(),
            thread="io",
            cat=trace_events.FLUSH,
            args={"instant": instant, "rows": records.num_rows},
        )
        return stat

    async def _view_files(self, partition: str, bucket: int, instant: str) -> PartitionFiles | None:
        """What the flush looks up in the coordinator's embedded timeline server when the view is
        remote (``RemoteHoodieTableFileSystemView``): the partition's files at its first touch,
        else its file group's. None when the view is direct or the request failed: the writer
        then lists the partition itself (the local view)."""
        if not self.remote_view or not self.writer.asks_view(partition, bucket):
            return None
        timeline = await self.env.io(self.writer.view_timeline, partition, bucket, instant)
        # a timeline read for the flush means the partition's slices are learnt now: all of them
        file_id = "" if timeline else self.writer.file_group(partition, bucket)
        request = FileSliceRequest(partition, instant, timeline, file_id)
        try:
            answer: PartitionFiles = await self.env.call(
                self.coordinator, "latest_file_slices", request, timeout=REMOTE_TIMEOUT_S, option=REMOTE_TIMEOUT_OPTION
            )
        except InjectedCrash:
            raise
        except Exception as exc:  # noqa: BLE001 - PriorityBasedFileSystemView: any failure of the remote view
            # the secondary (local) view answers this write: the writer lists the partition itself
            self.env.metrics.count("file_system_view_fallbacks")
            self.env.tracer.instant(f"view request failed, local view: {type(exc).__name__}", thread="io")
            return None
        return answer


def _slow_restart_s(faults: FaultPoints) -> float:
    """Seconds the last task waits before bootstrapping after tasks.fail_at_instant_start fired
    with a param: it widens the window in which the others run before it is back."""
    spec = next((s for s in faults.specs if s.point == "tasks.fail_at_instant_start" and s.param), None)
    return spec.param if spec is not None and faults.has_fired(spec) else 0.0


def _bootstrap_event(task_id: int, instant: str | None, restored: TaskState | None) -> WriteMetadataEvent:
    """The event a (re)starting task sends: empty, or with the write stats its restored state
    holds of instants not yet committed (``AbstractStreamWriteFunction.initializeState``)."""
    if restored is None:
        return WriteMetadataEvent(task_id, -1, instant or "", bootstrap=True)
    stats = [s for e in restored.uncommitted for s in e.write_stats]
    return WriteMetadataEvent(task_id, restored.checkpoint_id, restored.instant, stats, bootstrap=True)
