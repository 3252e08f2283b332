"""The schedules and faults ``commitlab conformance --scenario`` runs on both sides: the lab's
configuration for the scenario and what the harness is told (``workload.json``'s ``scenario``
block and Hudi options), the same records and rounds per task on both.

* ``happy-path``: the check of :mod:`runtime.conformance.run` (no fault, every round with data).
* ``deadlock``: data, an empty round, data again (PROTOCOLS.md section 5). The real source emits
  round 3 right after its barrier-2 snapshot with Flink's buffer timeout 0, and Hudi's
  ``write.batch.size`` is small enough (5 KB) that ``StreamWriteFunction.processElement`` flushes a
  bucket while round 3 arrives; round 1 is small so its own eager flushes stay few. On both sides
  the completion notice of checkpoint 2 reaches the coordinator 2 s late
  (:func:`runtime.faults.scenarios.deadlock_config` has 0.5 s; on a loaded machine round 3 took
  longer than that to reach Hudi's write tasks, and the ack won: the harness delays Hudi's
  coordinator's ``notifyCheckpointComplete``), so round 3 reaches the write tasks before the
  ``CommitAckEvent`` whatever the machine's load; the lab flushes per record. Hudi's
  ``write.commit.ack.timeout`` is the checkpoint timeout (``HoodieTableSink``), here
  :data:`ACK_TIMEOUT_S` for the real job (the lab's watchdog names the deadlock first), so a deadlock
  ends in a bounded time.
* ``task-crash``: write task 0 throws in its snapshot of checkpoint 3 (after its flush, before its
  ack: the lab's ``task.in_snapshot@3#0``); the job restarts once from checkpoint 2.
* ``late-notice``: data in every round, the completion notice of checkpoint 2 reaches the
  coordinator a second late (both sides), and the write tasks flush eagerly (50 KB batches; the lab
  every 50 rows), so round 3's first flushes wait for an instant the late commit will start.

In the scenarios the harness routes records into the write tasks with Hudi's own
``BucketIndexPartitioner`` (the happy path keeps the lab's routing to compare costs task by task):
a write task restarted after a failover loads the file groups of the buckets that partitioner
gives it and no others, so with the lab's routing it opened a second file group for every other
bucket it wrote, and the official reader returned 655 keys twice (Hudi 0.14.0, task-crash, measured).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.core.config import JobConfig, Schedule
from runtime.core.fault_spec import FaultSpec

HAPPY_PATH = "happy-path"
HarnessValue = int | bool | dict[str, int]
ACK_TIMEOUT_S = 30.0
# how late checkpoint 2's completion notice reaches the coordinator in the deadlock scenario (both sides)
DEADLOCK_NOTICE_DELAY_S = 2.0
# round sizes of the deadlock scenario, per write task
DEADLOCK_ROUND_1 = 20
DEADLOCK_ROUND_3 = 400
DEADLOCK_BATCH_MB = "0.005"
CRASH_CHECKPOINT = 3
LATE_NOTICE_S = 1.0
LATE_NOTICE_BATCH_MB = "0.05"


@dataclass(frozen=True)
class Scenario:
    """One scenario on one configuration: the lab's job and what the harness is told."""

    name: str
    lab: JobConfig
    harness: dict[str, HarnessValue] = field(default_factory=dict)  # workload.json "scenario"
    hudi_options: dict[str, str] = field(default_factory=dict)
    # Flink's checkpoint interval in the harness (the happy path's, run.CHECKPOINT_INTERVAL_MS, by default)
    checkpoint_interval_ms: int = 2_000


def _deadlock(cfg: JobConfig) -> Scenario:
    rounds = [cfg.writers * DEADLOCK_ROUND_1, 0, cfg.writers * DEADLOCK_ROUND_3]
    lab = cfg.replace(
        checkpoints=3,
        records=sum(rounds),
        keys=sum(rounds),
        source_batch_rows=200,
        bucket_flush_rows=1,
        schedule=Schedule(rounds=rounds, notify_delay_s={2: DEADLOCK_NOTICE_DELAY_S}),
    )
    harness: dict[str, HarnessValue] = {
        "notice_delay_ms": {str(k): round(v * 1000) for k, v in lab.schedule.notify_delay_s.items()},
        "buffer_timeout_ms": 0,
        "checkpoint_timeout_ms": int(ACK_TIMEOUT_S * 1000),
        "stall_ms": 4000,
        "hudi_routing": True,
    }
    # 4 s between barriers: room for round 1's small flushes on a loaded machine before barrier 2
    return Scenario("deadlock", lab, harness, {"write.batch.size": DEADLOCK_BATCH_MB}, 4_000)


def _task_crash(cfg: JobConfig) -> Scenario:
    lab = cfg.replace(
        checkpoints=max(cfg.checkpoints, CRASH_CHECKPOINT + 1),
        faults=[FaultSpec("task.in_snapshot", CRASH_CHECKPOINT, 0)],
        failover="global",
    )
    harness: dict[str, HarnessValue] = {
        "crash_round": CRASH_CHECKPOINT,
        "crash_task": 0,
        "restarts": 1,
        "hudi_routing": True,
    }
    return Scenario("task-crash", lab, harness)


def _late_notice(cfg: JobConfig) -> Scenario:
    """Data in every round; the completion notice of checkpoint 2 reaches the coordinator
    :data:`LATE_NOTICE_S` late, while round 3 is already flushing into the next instant."""
    lab = cfg.replace(
        checkpoints=max(cfg.checkpoints, 3),
        bucket_flush_rows=min(cfg.bucket_flush_rows, 50),
        schedule=Schedule(notify_delay_s={2: LATE_NOTICE_S}),
    )
    harness: dict[str, HarnessValue] = {
        "notice_delay_ms": {"2": round(LATE_NOTICE_S * 1000)},
        "buffer_timeout_ms": 0,
        "hudi_routing": True,
    }
    return Scenario("late-notice", lab, harness, {"write.batch.size": LATE_NOTICE_BATCH_MB}, 4_000)


SCENARIOS = {
    HAPPY_PATH: "every round with data, no fault: the tables, timelines and DFS calls compared",
    "deadlock": "data, an empty round, data reaching the write tasks before the CommitAckEvent",
    "task-crash": f"write task 0 throws in its snapshot of checkpoint {CRASH_CHECKPOINT}; one restart",
    "late-notice": "data in every round; the completion notice of checkpoint 2 reaches the coordinator late",
}
_BUILD = {"deadlock": _deadlock, "task-crash": _task_crash, "late-notice": _late_notice}


def scenario(name: str, cfg: JobConfig) -> Scenario:
    """The scenario ``name`` on ``cfg`` (the happy path is ``cfg`` itself). An explicit
    ``--allow-empty-commit`` is Hudi's ``hoodie.allow.empty.commit`` on the real side too."""
    sc = Scenario(HAPPY_PATH, cfg) if name == HAPPY_PATH else _BUILD[name](cfg)
    if cfg.allow_empty_commit in ("true", "false"):
        sc.hudi_options["hoodie.allow.empty.commit"] = cfg.allow_empty_commit
    return sc
