"""The job manager's checkpointing: Flink's CheckpointCoordinator.

Sources: Apache Flink 1.14-1.18 ``flink-runtime/.../checkpoint/CheckpointCoordinator.java``
(``triggerCheckpoint``, ``receiveAcknowledgeMessage``, ``completePendingCheckpoint``,
``dropSubsumedCheckpoints``: pending checkpoints older than a completed one are aborted with
``CHECKPOINT_SUBSUMED``), ``CheckpointCoordinatorConfiguration`` (``maxConcurrentCheckpoints``,
default 1), ``CheckpointListener`` (a completion notification may be skipped: a later one subsumes
it), ``OperatorCoordinatorCheckpoints`` (the coordinator's snapshot is taken first, bounded by the
checkpoint timeout), ``JobMaster.sendOperatorEventToCoordinator`` (a task's operator event reaches
the coordinator through the job master, in order with the task's acknowledgements),
``completePendingCheckpoint`` -> ``cleanupAfterCompletedCheckpoint`` -> ``sendAcknowledgeMessages``
(the checkpoint is stored and the coordinators notified in one step, so a task failure handled
afterwards cannot come between them: a notification already sent is awaited before the failure is
reported), ``CheckpointCoordinatorDeActivator.jobStatusChanges`` ->
``CheckpointCoordinator.stopCheckpointScheduler`` (a cancelled job: :meth:`JobManager.cancel`).

For each checkpoint: snapshot the operator coordinator first, then inject barriers through the
sources; collect an ack from every write task; on all acks notify completion (coordinator first,
then tasks), on timeout or a scheduled abort notify abortion. Checkpoint k is triggered once every
source has emitted round k (so a run's rounds are deterministic), the interval has passed and fewer
than ``max_concurrent_checkpoints`` are in flight.

Merge-on-read: the compaction plan operator is notified of a completed checkpoint before the
coordinator, as Flink notifies every task before the coordinators
(``CheckpointCoordinator.sendAcknowledgeMessages``), so it runs the plan the coordinator scheduled
at an earlier checkpoint; at the end of input it is asked to finish the pending compactions
(:mod:`runtime.writer.compaction` says why it takes no part in the checkpoints themselves).

Differences: the completion notification to the coordinator is awaited (bounded by the checkpoint
timeout) before the next trigger when one checkpoint at a time is allowed, so a run's rounds stay in
lock step; Flink sends it asynchronously. The coordinator's handlers are serialized anyway, so the
next snapshot would queue behind the commit in Flink too. The write tasks are notified after the
coordinator's notification returns (Flink: before it, as the compaction plan operator here).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.core import roles, trace_events
from runtime.core.config import JobConfig, flag_of
from runtime.core.env import Env, WaitTimeout, bounded, waited_text
from runtime.core.messages import (
    CheckpointAck,
    CheckpointNotice,
    CheckpointTrigger,
    CheckpointView,
    CompletedCheckpoint,
    JobManagerView,
    RoundEmitted,
    TaskFailure,
    WriteMetadataEvent,
)

MAX_FINAL_CHECKPOINTS = 3  # extra checkpoints at end of input when the last one did not complete


class JobCancelled(RuntimeError):
    """The job was cancelled (:meth:`JobManager.cancel`): the loop ends, triggering nothing more."""


class JobFailed(RuntimeError):
    pass


class _Changed:
    """``asyncio.Event``'s ``set`` and ``wait``, step for step (the same future, made and
    resolved at the same moments), for the job manager's one-generation wake-ups: a new one
    each change, waited on about 5,000 times a simulated run, and an ``asyncio.Event`` binds
    itself to the running loop under a global lock at its first wait."""

    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[bool]] = []

    def set(self) -> None:
        if not self._value:
            self._value = True
            for fut in self._waiters:
                if not fut.done():
                    fut.set_result(True)

    async def wait(self) -> bool:
        if self._value:
            return True
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
            return True
        finally:
            self._waiters.remove(fut)


@dataclass
class CheckpointRecord:
    checkpoint_id: int
    round: int = 0  # the data round its barriers close
    status: str = "pending"  # completed / aborted / timed-out
    triggered_at: float = 0.0
    acked_at: float = 0.0
    notified_at: float = 0.0
    notifying: bool = False  # the completion notification is on its way to the coordinator
    completing: bool = False  # its completion began (states stored, then notified): a cancel waits for it
    reason: str = ""
    acks: dict[str, bytes] = field(default_factory=dict)


class JobManager:
    RPC_METHODS = ("ack_checkpoint", "round_emitted", "task_failed", "write_metadata", "cancel")

    def __init__(
        self,
        env: Env,
        config: JobConfig,
        task_names: list[str],
        source_names: list[str],
        *,
        coordinator: str = roles.COORDINATOR,
        state_backend: Any = None,
        start_checkpoint_id: int = 1,
        start_round: int = 1,
        compaction_plan: str = "",
    ) -> None:
        self.env = env
        self.config = config
        self.task_names = task_names
        self.source_names = source_names
        self.coordinator = coordinator
        self.checkpoints: dict[int, CheckpointRecord] = {}
        self.rounds_emitted: dict[str, int] = {s: 0 for s in source_names}
        self.rows_emitted: dict[str, int] = {s: 0 for s in source_names}
        self.failures: list[TaskFailure] = []
        self._changed = _Changed()
        self.status = "created"
        self.waiting_for = ""  # what the loop waits for now (a timed-out job's diagnosis)
        self.current: int = 0
        self.commit_results: dict[int, Any] = {}
        self.state_backend = state_backend  # runtime.flink.state_backend.StateBackend, or None
        self.start_checkpoint_id = start_checkpoint_id  # after a failover: ids go on increasing
        self.start_round = start_round  # after a failover: the first round not yet checkpointed
        self.latest_completed = start_checkpoint_id - 1  # pending checkpoints below it are subsumed
        self.latest_notified = start_checkpoint_id - 1  # completion notifications below it are skipped
        # merge-on-read: the compaction plan operator, notified after the write tasks and
        # drained at the end of input (runtime.writer.compaction); "" when the job compacts not
        self.compaction_plan = compaction_plan
        self.cancelled = ""  # why the job was cancelled; "" while it is not
        self._inflight: dict[int, asyncio.Task[bool]] = {}  # the checkpoints of the running loop

    # -- handlers ------------------------------------------------------------------------------

    def ack_checkpoint(self, ack: CheckpointAck) -> None:
        rec = self.checkpoints.get(ack.checkpoint_id)
        if rec is not None and rec.status == "pending":
            rec.acks[ack.role] = ack.state
        self._notify_changed()

    def write_metadata(self, event: WriteMetadataEvent) -> None:
        """``JobMaster.sendOperatorEventToCoordinator``: a task's operator event is handed on to
        its coordinator at once, on the same lane as this job manager's later checkpoint
        notifications, so an event a task sent before its ack reaches the coordinator before the
        completion of that checkpoint does (Flink delivers both on the JobMaster's main thread)."""
        self.env.send(self.coordinator, "write_metadata", event)

    def round_emitted(self, msg: RoundEmitted) -> None:
        if msg.round > self.rounds_emitted.get(msg.source, 0):
            self.rows_emitted[msg.source] = max(self.rows_emitted.get(msg.source, 0) + msg.rows, msg.end_offset)
        self.rounds_emitted[msg.source] = max(self.rounds_emitted.get(msg.source, 0), msg.round)
        self._notify_changed()

    def task_failed(self, failure: TaskFailure) -> None:
        self.failures.append(failure)
        self._notify_changed()

    def describe(self) -> JobManagerView:
        return JobManagerView(
            status=self.status,
            current=self.current,
            waiting_for=self.waiting_for,
            checkpoints={
                k: CheckpointView(r.status, r.round, r.reason, sorted(r.acks)) for k, r in self.checkpoints.items()
            },
            rounds_emitted=dict(self.rounds_emitted),
            failures=list(self.failures),
        )

    # -- the loop ------------------------------------------------------------------------------

    def _notify_changed(self) -> None:
        """Wakes every wait of the loop and of the checkpoints in flight (each waits on the event
        of its generation, so one waiter never clears another's wake-up)."""
        self._changed.set()
        self._changed = _Changed()

    async def _wait_until(self, predicate: Callable[[], bool], timeout: float, what: str, option: str) -> None:
        self.waiting_for = what
        deadline = self.env.now() + timeout
        while True:
            changed = self._changed
            if predicate():
                return
            self._check_failures()
            remaining = deadline - self.env.now()
            if remaining <= 0:
                raise WaitTimeout(waited_text(self.env.role, timeout, what, option))
            try:
                await bounded(changed.wait(), min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass

    def _check_failures(self) -> None:
        if self.cancelled:
            raise JobCancelled(self.cancelled)
        if self.failures:
            f = self.failures[0]
            raise JobFailed(f"{f.role} failed: {f.error}")

    def _all_emitted(self, round_no: int) -> bool:
        return all(v >= round_no for v in self.rounds_emitted.values())

    async def _settle(self, inflight: dict[int, asyncio.Task[bool]], below: int) -> None:
        """Waits until fewer than ``below`` checkpoints are in flight; a checkpoint that failed
        (its coordinator call raised) fails the job here."""
        await self._wait_until(
            lambda: sum(not t.done() for t in inflight.values()) < below,
            self.config.job_timeout_s,
            f"fewer than {below} checkpoints in flight (max_concurrent_checkpoints)",
            flag_of("job_timeout_s"),
        )
        for ckp in sorted(k for k, t in inflight.items() if t.done()):
            inflight.pop(ckp).result()  # raises what the checkpoint raised

    async def run(self) -> JobManagerView:
        """Runs one checkpoint per round of data, at most ``max_concurrent_checkpoints`` in
        flight, then final checkpoints until one completes; returns a summary. Raises JobFailed on
        a task failure."""
        self.status = "running"
        inflight = self._inflight
        try:
            ckp = await self._checkpoint_rounds(inflight)
            await self._end_input(ckp)
            self.status = "finished"
            return self.describe()
        except JobCancelled:
            for ckp, task in inflight.items():  # a completion that began is left to end: cancel awaits it
                if not self.checkpoints[ckp].completing:
                    task.cancel()
            return self.describe()
        except BaseException as exc:
            if self.status == "running":
                self.status = "failed"
            if isinstance(exc, JobFailed):
                await self._finish_sent_notifications(inflight)
            for task in inflight.values():
                task.cancel()
            raise

    async def cancel(self, reason: str) -> JobManagerView:
        """Flink's cancellation: the job leaves RUNNING and its checkpoint coordinator stops
        (Flink 1.14-1.18 ``CheckpointCoordinatorDeActivator.jobStatusChanges`` ->
        ``CheckpointCoordinator.stopCheckpointScheduler``: under the coordinator's lock, no trigger
        after it and every pending checkpoint aborted, ``CHECKPOINT_COORDINATOR_SUSPEND``). A
        checkpoint whose completion began before (``completePendingCheckpoint`` holds the same
        lock: stored, then its coordinators notified) completes, and its notification is awaited
        (bounded by the checkpoint timeout). So the view returned is final: no checkpoint completes,
        and the coordinator is notified of none, after it. The aborted checkpoints' participants
        are not notified (Flink cancels them next; here the host ends their processes)."""
        if not self.cancelled:
            self.cancelled = reason or "cancelled"
            if self.status == "running":
                self.status = "cancelled"
            for rec in self.checkpoints.values():
                if rec.status == "pending" and not rec.completing:
                    rec.status, rec.reason = "aborted", f"the job was cancelled ({self.cancelled})"
            self._notify_changed()
        completing = [t for k, t in self._inflight.items() if not t.done() and self.checkpoints[k].completing]
        if completing:
            self.waiting_for = "the completions that began before the job was cancelled"
            await asyncio.wait(completing, timeout=self.config.checkpoint_timeout_s)
        return self.describe()

    async def _checkpoint_rounds(self, inflight: dict[int, asyncio.Task[bool]]) -> int:
        """Triggers a checkpoint per round once every source emitted it (its tasks kept in
        ``inflight``), then final ones until one completes or the retries run out; returns the
        last checkpoint id."""
        cfg = self.config
        last_trigger = self.env.now()
        ckp = self.start_checkpoint_id - 1
        round_no = self.start_round - 1
        finals = 0
        while True:
            if round_no < cfg.checkpoints:
                round_no += 1
            else:
                await self._settle(inflight, 1)  # end of input: every checkpoint settled
                last = self.checkpoints.get(ckp)
                if (last is not None and last.status == "completed") or finals >= MAX_FINAL_CHECKPOINTS:
                    return ckp
                finals += 1  # end of input: retry until a checkpoint completes
            ckp += 1
            await self._wait_until(
                functools.partial(self._all_emitted, round_no),
                cfg.job_timeout_s,
                f"every source to emit round {round_no}",
                flag_of("job_timeout_s"),
            )
            await self._settle(inflight, cfg.max_concurrent_checkpoints)
            wait = cfg.checkpoint_interval_s - (self.env.now() - last_trigger)
            if wait > 0:
                await self.env.sleep(wait)
            if self.cancelled:  # cancelled while it waited: no trigger
                raise JobCancelled(self.cancelled)
            last_trigger = self.env.now()
            inflight[ckp] = self.env.spawn(self._checkpoint(ckp, round_no), f"checkpoint-{ckp}")

    async def _end_input(self, ckp: int) -> None:
        """After the final checkpoint ``ckp`` completed: the coordinator (and the compaction plan)
        commit up to the end of input, and the sources are told to finish. Raises JobFailed when
        the final checkpoint did not complete."""
        cfg = self.config
        last = self.checkpoints.get(ckp)
        if last is None or last.status != "completed":
            self.status = "failed"
            raise JobFailed(
                f"the final checkpoint did not complete after {MAX_FINAL_CHECKPOINTS} retries: data stays uncommitted"
            )
        from runtime.core.messages import InputFinished

        final = {i: self.rows_emitted.get(src, 0) for i, src in enumerate(self.source_names)}
        self.waiting_for = f"the coordinator to commit up to the end of input (rows per task {final})"
        self.end_of_input = await self.env.call(
            self.coordinator,
            "end_of_input",
            InputFinished(final),
            timeout=cfg.job_timeout_s,
            option=flag_of("job_timeout_s"),
        )
        if self.compaction_plan:
            self.waiting_for = "the compactions pending at the end of input"
            self.end_of_input["compaction"] = await self.env.call(
                self.compaction_plan,
                "end_of_input",
                CheckpointNotice(ckp),
                timeout=cfg.job_timeout_s,
                option=flag_of("job_timeout_s"),
            )
        for src in self.source_names:
            self.env.send(src, "finish", None)

    async def _finish_sent_notifications(self, inflight: dict[int, asyncio.Task[bool]]) -> None:
        """A task failure does not cut a completed checkpoint's notification to the coordinator:
        Flink's ``completePendingCheckpoint`` stores the checkpoint and calls
        ``sendAcknowledgeMessages`` (-> ``coordinatorContext.notifyCheckpointComplete``) in one
        step on the job master's thread, so a failure handled after the completion cannot come
        between them. Here the coordinator is another role, so the notification already sent is
        awaited (bounded by the checkpoint timeout) before the failure is reported."""
        sent = [
            t for k, t in inflight.items() if not t.done() and k in self.checkpoints and self.checkpoints[k].notifying
        ]
        if not sent:
            return
        self.waiting_for = "the coordinator's completion notifications already sent, before failing over"
        done, _ = await asyncio.wait(sent, timeout=self.config.checkpoint_timeout_s)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                self.env.metrics.count("completion_notifications_failed_at_failover")

    async def _checkpoint(self, ckp: int, round_no: int) -> bool:
        self.current = ckp
        rec = CheckpointRecord(ckp, round_no, triggered_at=self.env.now())
        self.checkpoints[ckp] = rec
        try:
            return await self._run_checkpoint(rec, round_no)
        finally:
            self._notify_changed()

    async def _run_checkpoint(self, rec: CheckpointRecord, round_no: int) -> bool:
        cfg, ckp = self.config, rec.checkpoint_id
        self.env.tracer.instant(
            f"checkpoint {ckp} triggered",
            thread="checkpoints",
            args=trace_events.checkpoint_args(ckp, trace_events.TRIGGERED),
        )
        trigger = CheckpointTrigger(ckp, self.env.wall_time())
        # Flink: the coordinator's snapshot is a future of the pending checkpoint, bounded by the
        # checkpoint timeout (it queues behind commits on Hudi's executor), not by an ask timeout
        coordinator_state = await self.env.call(
            self.coordinator,
            "checkpoint_coordinator",
            trigger,
            timeout=cfg.checkpoint_timeout_s,
            option=flag_of("checkpoint_timeout_s"),
        )
        if self.cancelled:
            return False  # aborted by the cancellation while the coordinator took its snapshot
        for src in self.source_names:
            self.env.send(src, "trigger_barrier", trigger)
        tasks = frozenset(self.task_names)  # every task acked: the acks hold them all (tested at every change)
        try:
            await self._wait_until(
                lambda: rec.acks.keys() >= tasks or self.latest_completed > ckp,
                cfg.checkpoint_timeout_s,
                f"acks of checkpoint {ckp}",
                flag_of("checkpoint_timeout_s"),
            )
        except JobCancelled:
            return False  # aborted by the cancellation
        except WaitTimeout:
            missing = sorted(set(self.task_names) - set(rec.acks))
            rec.status, rec.reason = "timed-out", f"no ack from {', '.join(missing)}"
            await self._notify_aborted(ckp, rec.reason)
            return False
        if self.latest_completed > ckp:
            return await self._subsumed(rec)
        rec.acked_at = self.env.now()
        if ckp in cfg.schedule.abort_checkpoints or self.env.faults.fire("checkpoint.abort", checkpoint=ckp):
            rec.status, rec.reason = "aborted", "aborted by the schedule"
            await self._notify_aborted(ckp, rec.reason)
            return False
        if self.cancelled:
            return False  # aborted by the cancellation
        rec.completing = True  # from here the checkpoint completes: a cancellation waits for it
        if self.state_backend is not None:
            # the checkpoint is complete once its states are stored; only then is it notified
            states = dict(rec.acks, coordinator=coordinator_state or b"")
            await self.env.io(self.state_backend.save, CompletedCheckpoint(ckp, round_no, states))
        rec.status = "completed"
        self.latest_completed = max(self.latest_completed, ckp)
        self._notify_changed()  # older checkpoints still pending are subsumed now
        return await self._notify_complete(rec)

    async def _notify_complete(self, rec: CheckpointRecord) -> bool:
        """Notifies the coordinator, then the tasks, unless a later notification went out first."""
        cfg, ckp = self.config, rec.checkpoint_id
        delay = cfg.schedule.notify_delay_s.get(ckp, 0.0)
        if delay:
            await self.env.sleep(delay)
        if self.latest_notified > ckp:
            # a later checkpoint's notification went out first and subsumes this one (Flink's
            # CheckpointListener contract: a notification may be skipped; the next one covers it)
            rec.reason = f"the completion notification was subsumed by checkpoint {self.latest_notified}"
            self.env.tracer.instant(
                f"checkpoint {ckp} notification subsumed",
                thread="checkpoints",
                args=trace_events.checkpoint_args(ckp, trace_events.NOTIFICATION_SUBSUMED),
            )
            return True
        self.latest_notified = ckp
        rec.notified_at = self.env.now()
        notice = CheckpointNotice(ckp)
        if self.env.faults.fire("checkpoint.notification_lost", checkpoint=ckp):
            rec.reason = "the completion notification was lost"
            return True
        if self.compaction_plan:
            # Flink's sendAcknowledgeMessages notifies the tasks before the coordinators, so the
            # plan operator runs a plan the coordinator scheduled at an earlier checkpoint
            self.env.send(self.compaction_plan, "notify_checkpoint_complete", notice)
        # Flink notifies the coordinator asynchronously: a commit slowed by a held table lock
        # must not fail the job, so the bound is the checkpoint timeout, not the RPC timeout
        rec.notifying = True
        self.commit_results[ckp] = await self.env.call(
            self.coordinator,
            "notify_checkpoint_complete",
            notice,
            timeout=cfg.checkpoint_timeout_s,
            option=flag_of("checkpoint_timeout_s"),
        )
        for task in self.task_names:
            self.env.send(task, "notify_checkpoint_complete", notice)
        self.env.tracer.instant(
            f"checkpoint {ckp} complete",
            thread="checkpoints",
            args=trace_events.checkpoint_args(ckp, trace_events.COMPLETED),
        )
        return True

    async def _subsumed(self, rec: CheckpointRecord) -> bool:
        """A later checkpoint completed while this one was pending: Flink aborts it
        (``CheckpointFailureReason.CHECKPOINT_SUBSUMED``, ``dropSubsumedCheckpoints``)."""
        rec.status, rec.reason = "subsumed", f"subsumed by checkpoint {self.latest_completed}"
        await self._notify_aborted(rec.checkpoint_id, rec.reason)
        return False

    async def _notify_aborted(self, ckp: int, reason: str) -> None:
        notice = CheckpointNotice(ckp, reason)
        self.env.tracer.instant(
            f"checkpoint {ckp} aborted: {reason}",
            thread="checkpoints",
            args=trace_events.checkpoint_args(ckp, trace_events.ABORTED),
        )
        # (Flink's notifyCheckpointAborted is asynchronous too: queued behind a commit, not an ask)
        await self.env.call(
            self.coordinator,
            "notify_checkpoint_aborted",
            notice,
            timeout=self.config.checkpoint_timeout_s,
            option=flag_of("checkpoint_timeout_s"),
        )
        for task in self.task_names:
            self.env.send(task, "notify_checkpoint_aborted", notice)
