"""Flink's CheckpointCoordinator as the job manager models it: up to max-concurrent-checkpoints in
flight (default 1); a later checkpoint completing subsumes a pending older one (aborted,
CHECKPOINT_SUBSUMED) and a completion notification not yet sent (a later one covers it)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from runtime.core.config import JobConfig, Schedule
from runtime.core.env import Env
from runtime.core.messages import CheckpointAck, CheckpointTrigger, RoundEmitted
from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer
from runtime.flink.job_manager import JobManager

TASKS = ["writer-0", "writer-1"]


class _JmEnv(Env):
    """Coordinator calls answer at once; a barrier sent to the source calls ``on_barrier``."""

    def __init__(self, on_barrier: Callable[[int], None]) -> None:
        self.role = "job-manager"
        self.rng = random.Random(0)
        self.tracer = Tracer("job-manager", enabled=False)
        self.metrics = Metrics()
        self.on_barrier = on_barrier
        self.coordinator_calls: list[tuple[str, int]] = []

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def call(self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None) -> Any:
        self.coordinator_calls.append((method, getattr(msg, "checkpoint_id", -1)))
        return b"" if method == "checkpoint_coordinator" else {}

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        if method == "trigger_barrier" and isinstance(msg, CheckpointTrigger):
            self.on_barrier(msg.checkpoint_id)

    async def io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


def _run(config: JobConfig, acks: Callable[[JobManager, int], None]) -> tuple[JobManager, _JmEnv]:
    jm_box: list[JobManager] = []
    env = _JmEnv(lambda ckp: asyncio.get_running_loop().call_later(0.01, acks, jm_box[0], ckp))
    jm = JobManager(env, config, TASKS, ["source-0"])
    jm_box.append(jm)
    for r in range(1, config.checkpoints + 1):
        jm.round_emitted(RoundEmitted("source-0", r, 0))
    asyncio.run(asyncio.wait_for(jm.run(), 10.0))
    return jm, env


def _ack(jm: JobManager, ckp: int, tasks: list[str] = TASKS) -> None:
    for t in tasks:
        jm.ack_checkpoint(CheckpointAck(t, ckp))


def _config(**kw: Any) -> JobConfig:
    base: dict[str, Any] = {"writers": 2, "checkpoints": 2, "checkpoint_interval_s": 0.01, "checkpoint_timeout_s": 2.0}
    return JobConfig(**{**base, **kw})


def test_one_checkpoint_at_a_time_by_default():
    assert JobConfig().max_concurrent_checkpoints == 1
    jm, env = _run(_config(), _ack)
    methods = [c for c in env.coordinator_calls if c[0] != "end_of_input"]
    # ckp 2 is triggered only after ckp 1 was notified
    assert methods == [
        ("checkpoint_coordinator", 1),
        ("notify_checkpoint_complete", 1),
        ("checkpoint_coordinator", 2),
        ("notify_checkpoint_complete", 2),
    ]


def test_a_later_completed_checkpoint_subsumes_a_pending_one():
    def acks(jm: JobManager, ckp: int) -> None:
        _ack(jm, ckp, TASKS if ckp == 2 else TASKS[:1])  # ckp 1 never gets writer-1's ack

    jm, env = _run(_config(max_concurrent_checkpoints=2), acks)
    assert jm.checkpoints[1].status == "subsumed" and "subsumed by checkpoint 2" in jm.checkpoints[1].reason
    assert jm.checkpoints[2].status == "completed"
    assert ("notify_checkpoint_aborted", 1) in env.coordinator_calls
    assert ("notify_checkpoint_complete", 1) not in env.coordinator_calls


def test_a_completion_notification_is_subsumed_by_a_later_one():
    cfg = _config(max_concurrent_checkpoints=2, schedule=Schedule(notify_delay_s={1: 0.5}))
    jm, env = _run(cfg, _ack)
    notified = [c for m, c in env.coordinator_calls if m == "notify_checkpoint_complete"]
    assert notified == [2]
    assert jm.checkpoints[1].status == "completed"
    assert "subsumed by checkpoint 2" in jm.checkpoints[1].reason


class _SlowCommitEnv(_JmEnv):
    """The coordinator's completion notification takes ``commit_s`` (a commit in progress)."""

    def __init__(self, on_barrier: Callable[[int], None], commit_s: float) -> None:
        super().__init__(on_barrier)
        self.commit_s = commit_s
        self.commits_done: list[int] = []

    async def call(self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None) -> Any:
        reply = await super().call(dest, method, msg, timeout=timeout)
        if method == "notify_checkpoint_complete":
            await asyncio.sleep(self.commit_s)
            self.commits_done.append(msg.checkpoint_id)
        return reply


def test_a_task_failure_does_not_cut_a_completion_notification_already_sent():
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

    jm_box: list[JobManager] = []
    env = _SlowCommitEnv(lambda ckp: asyncio.get_running_loop().call_later(0.01, acks, jm_box[0], ckp), 0.3)
    jm = JobManager(env, _config(), TASKS, ["source-0"])
    jm_box.append(jm)
    for r in range(1, 3):
        jm.round_emitted(RoundEmitted("source-0", r, 0))

    async def main() -> None:
        try:
            await asyncio.wait_for(jm.run(), 10.0)
        except JobFailed:
            return
        raise AssertionError("the job did not fail")

    asyncio.run(main())
    assert jm.checkpoints[1].status == "completed"
    assert env.commits_done == [1]  # the old job manager cancelled the call: []
