"""Flink's CheckpointCoordinator as the job manager models it: up to max-concurrent-checkpoints in
flight (default 1); a later checkpoint completing subsumes a pending older one (aborted,
CHECKPOINT_SUBSUMED) and a completion notification not yet sent (a later one covers it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from harness import Inbox, Sim

from runtime.core import codec
from runtime.core.config import JobConfig, Schedule
from runtime.core.messages import CheckpointAck, CheckpointNotice, CheckpointTrigger, RoundEmitted
from runtime.flink.job_manager import JobManager

TASKS = ["writer-0", "writer-1"]
Acks = Callable[[JobManager, int], None]  # what a barrier to the source sets off


class _Coordinator:
    """Answers the job manager's calls at once (a completion notification after ``commit_s``, a
    commit in progress), recording (method, checkpoint id) as each arrives."""

    RPC_METHODS = ("checkpoint_coordinator", "notify_checkpoint_complete", "notify_checkpoint_aborted", "end_of_input")

    def __init__(self, commit_s: float = 0.0) -> None:
        self.calls: list[tuple[str, int]] = []
        self.commit_s = commit_s
        self.commits_done: list[int] = []

    def _record(self, method: str, msg: Any) -> None:
        self.calls.append((method, getattr(msg, "checkpoint_id", -1)))

    def checkpoint_coordinator(self, msg: CheckpointTrigger) -> bytes:
        self._record("checkpoint_coordinator", msg)
        return codec.encode(b"")  # an empty snapshot, encoded as the coordinator's is

    async def notify_checkpoint_complete(self, msg: CheckpointNotice) -> dict[str, Any]:
        self._record("notify_checkpoint_complete", msg)
        if self.commit_s:
            await asyncio.sleep(self.commit_s)
            self.commits_done.append(msg.checkpoint_id)
        return {}

    def notify_checkpoint_aborted(self, msg: CheckpointNotice) -> dict[str, Any]:
        self._record("notify_checkpoint_aborted", msg)
        return {}

    def end_of_input(self, msg: Any) -> dict[str, Any]:
        self._record("end_of_input", msg)
        return {}


class _Source:
    """A barrier it is sent calls ``on_barrier`` with the checkpoint id."""

    RPC_METHODS = ("trigger_barrier", "finish")

    def __init__(self, on_barrier: Callable[[int], None]) -> None:
        self.on_barrier = on_barrier

    def trigger_barrier(self, msg: CheckpointTrigger) -> None:
        self.on_barrier(msg.checkpoint_id)

    def finish(self, msg: Any) -> None:
        pass


def _job(sim: Sim, config: JobConfig, acks: Acks, commit_s: float = 0.0) -> tuple[JobManager, _Coordinator]:
    """A job manager on the test's simulator, with a coordinator, a source and the write tasks
    (which only take their notifications); each barrier is acked by ``acks`` 0.01 s later."""
    coordinator = sim.register("coordinator", _Coordinator(commit_s))
    jm = JobManager(sim.env("job-manager"), config, TASKS, ["source-0"])
    sim.register("source-0", _Source(lambda ckp: asyncio.get_running_loop().call_later(0.01, acks, jm, ckp)))
    for task in TASKS:
        sim.register(task, Inbox("notify_checkpoint_complete", "notify_checkpoint_aborted"))
    for r in range(1, config.checkpoints + 1):
        jm.round_emitted(RoundEmitted("source-0", r, 0))
    return jm, coordinator


def _run(sim: Sim, config: JobConfig, acks: Acks) -> tuple[JobManager, _Coordinator]:
    jm, coordinator = _job(sim, config, acks)
    sim.run(jm.run(), 10.0)
    return jm, coordinator


def _ack(jm: JobManager, ckp: int, tasks: list[str] = TASKS) -> None:
    for t in tasks:
        jm.ack_checkpoint(CheckpointAck(t, ckp))


def _config(**kw: Any) -> JobConfig:
    base: dict[str, Any] = {"writers": 2, "checkpoints": 2, "checkpoint_interval_s": 0.01, "checkpoint_timeout_s": 2.0}
    return JobConfig(**{**base, **kw})


def test_one_checkpoint_at_a_time_by_default(sim):
    assert JobConfig().max_concurrent_checkpoints == 1
    jm, coordinator = _run(sim, _config(), _ack)
    methods = [c for c in coordinator.calls if c[0] != "end_of_input"]
    # ckp 2 is triggered only after ckp 1 was notified
    assert methods == [
        ("checkpoint_coordinator", 1),
        ("notify_checkpoint_complete", 1),
        ("checkpoint_coordinator", 2),
        ("notify_checkpoint_complete", 2),
    ]


def test_a_later_completed_checkpoint_subsumes_a_pending_one(sim):
    def acks(jm: JobManager, ckp: int) -> None:
        _ack(jm, ckp, TASKS if ckp == 2 else TASKS[:1])  # ckp 1 never gets writer-1's ack

    jm, coordinator = _run(sim, _config(max_concurrent_checkpoints=2), acks)
    assert jm.checkpoints[1].status == "subsumed" and "subsumed by checkpoint 2" in jm.checkpoints[1].reason
    assert jm.checkpoints[2].status == "completed"
    assert ("notify_checkpoint_aborted", 1) in coordinator.calls
    assert ("notify_checkpoint_complete", 1) not in coordinator.calls


def test_a_completion_notification_is_subsumed_by_a_later_one(sim):
    cfg = _config(max_concurrent_checkpoints=2, schedule=Schedule(notify_delay_s={1: 0.5}))
    jm, coordinator = _run(sim, cfg, _ack)
    notified = [c for m, c in coordinator.calls if m == "notify_checkpoint_complete"]
    assert notified == [2]
    assert jm.checkpoints[1].status == "completed"
    assert "subsumed by checkpoint 2" in jm.checkpoints[1].reason


def test_a_task_failure_does_not_cut_a_completion_notification_already_sent(sim):
    """Flink's completePendingCheckpoint stores the checkpoint and notifies the coordinators in one
    step (sendAcknowledgeMessages): a task failure handled after the completion cannot come between
    them. The job manager reports the failure only once the coordinator answered; the failover
    then restores a checkpoint whose data the coordinator committed."""
    from runtime.core.messages import TaskFailure
    from runtime.flink.job_manager import JobFailed

    def acks(jm: JobManager, ckp: int) -> None:
        _ack(jm, ckp)
        # writer-0 dies right after its ack, while the coordinator commits checkpoint 1
        asyncio.get_running_loop().call_later(0.05, jm.task_failed, TaskFailure("writer-0", "crash", ckp))

    jm, coordinator = _job(sim, _config(), acks, commit_s=0.3)

    async def main() -> None:
        try:
            await asyncio.wait_for(jm.run(), 10.0)
        except JobFailed:
            return
        raise AssertionError("the job did not fail")

    sim.run(main())
    assert jm.checkpoints[1].status == "completed"
    assert coordinator.commits_done == [1]  # the old job manager cancelled the call: []


def _cancel_at(sim: Sim, jm: JobManager, at_s: float) -> dict[str, Any]:
    """Runs the job and cancels it ``at_s`` seconds in (as the Ray host does for a stopped job);
    the view the cancellation returned and the run's own end, as the host sees them."""
    seen: dict[str, Any] = {}

    async def main() -> None:
        run = asyncio.ensure_future(jm.run())
        await asyncio.sleep(at_s)
        seen["view"] = await jm.cancel("SIGINT")
        seen["run"] = await asyncio.wait_for(run, 10.0)

    sim.run(main())
    return seen


def test_a_cancelled_job_completes_no_checkpoint_after_its_cancellation(sim):
    """The checkpoint-28 question: a stopped run's record must not say a checkpoint was pending
    while the table holds its commit. Flink's cancel stops the checkpoint coordinator
    (stopCheckpointScheduler): the pending checkpoint is aborted, acks arriving afterwards complete
    nothing, and the coordinator is never told to commit it; the view the cancellation returns is
    the last word."""

    def late_acks(jm: JobManager, ckp: int) -> None:  # acks come 0.3 s after the barrier
        asyncio.get_running_loop().call_later(0.3, _ack, jm, ckp)

    jm, coordinator = _job(sim, _config(checkpoints=3), late_acks)
    seen = _cancel_at(sim, jm, 0.15)  # checkpoint 1 triggered, its acks not in yet
    view = seen["view"]
    assert view.checkpoints[1].status == "aborted" and "cancelled" in view.checkpoints[1].reason
    assert jm.checkpoints[1].status == "aborted"  # the late acks changed nothing
    assert ("notify_checkpoint_complete", 1) not in coordinator.calls
    assert [c for m, c in coordinator.calls if m == "checkpoint_coordinator"] == [1]  # no trigger after it
    assert seen["run"].status == "cancelled"


def test_a_completion_that_began_before_the_cancellation_ends_and_is_in_its_view(sim):
    """A checkpoint whose completion began (stored, its coordinator being notified) completes, as
    under Flink's checkpoint lock; the cancellation waits for the commit, so its view says
    completed for every checkpoint the coordinator committed."""
    jm, coordinator = _job(sim, _config(checkpoints=3), _ack, commit_s=0.5)
    view = _cancel_at(sim, jm, 0.2)["view"]  # checkpoint 1 is being committed
    assert view.checkpoints[1].status == "completed"
    assert coordinator.commits_done == [1]
    assert 2 not in view.checkpoints or view.checkpoints[2].status == "aborted"
    assert ("notify_checkpoint_complete", 2) not in coordinator.calls
