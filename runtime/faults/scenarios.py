"""Named schedules that reproduce a known behaviour deterministically.

``deadlock`` (PROTOCOLS.md section 5): a round with data, an empty round, then data again. After
the empty round the coordinator reuses the instant, and P1 tells the writers so with a
CommitAckEvent. The completion of checkpoint 2 reaches the coordinator a little late (as a slow
notification does in Flink), so each writer is already flushing round 3 (an eager flush: the
round's first batch fills a bucket) when the ack arrives: under P1 it waits in ``instant_to_write``
for an ack that sits behind it in its own mailbox. Under P2 the same schedule only waits for the
message file of checkpoint 2, and completes.
"""

from __future__ import annotations

import dataclasses

from runtime.core.config import ConfigError, JobConfig, Schedule
from runtime.core.jobs_spec import JobsSpec


def deadlock_config(base: JobConfig) -> JobConfig:
    per_round = max(base.writers * 400, base.records // 2 if base.records else 0)
    records = 2 * per_round
    return base.replace(
        checkpoints=3,
        records=records,
        keys=records,
        source_batch_rows=200,
        # the first batch of round 3 reaches a bucket's flush size: an eager flush
        bucket_flush_rows=1,
        schedule=Schedule(rounds=[per_round, 0, per_round], notify_delay_s={2: 0.5}),
    )


def with_quiet_round(base: JobConfig, quiet: int = 2, notify_delay_s: float = 0.5) -> JobConfig:
    """A stream with a quiet period: round ``quiet`` carries no data, the others share the
    records; the completion of the quiet checkpoint reaches the coordinator ``notify_delay_s``
    late, and buckets are small enough that the next round flushes eagerly. This is the workload
    ``commitlab compare`` runs by default: realistic, and it exposes P1's deadlock."""
    if base.checkpoints < quiet + 1:
        raise ConfigError(
            f"--schedule quiet-round makes round {quiet} quiet: it needs --checkpoints {quiet + 1} or more, "
            f"got {base.checkpoints}; use --schedule even for fewer"
        )
    active = base.checkpoints - 1
    per, extra = divmod(base.records, active)
    rounds = []
    for r in range(1, base.checkpoints + 1):
        if r == quiet:
            rounds.append(0)
        else:
            rounds.append(per + (1 if extra > 0 else 0))
            extra -= 1
    per_group = max(1, per // (base.partitions * base.num_buckets))
    return base.replace(
        bucket_flush_rows=min(base.bucket_flush_rows, max(1, per_group // 4)),
        schedule=dataclasses.replace(
            base.schedule, rounds=rounds, notify_delay_s={**base.schedule.notify_delay_s, quiet: notify_delay_s}
        ),
    )


SCENARIOS = {"deadlock": deadlock_config}


def lock_held_config(base: JobConfig) -> JobConfig:
    """#19902: after checkpoint 1 commits, a cleaning action holds the table lock for 2.5 RPC
    timeouts while the writers ask for the instant of round 2. ``coordination-rpc`` (sync) creates
    the instant inside the request, so the request times out, the task fails and the job restarts;
    ``coordination-rpc-async`` replies PENDING and the writers poll until the lock is free."""
    rpc_timeout = 1.0
    per_round = max(base.writers * 400, base.records // 3 if base.records else 0)
    return base.replace(
        checkpoints=3,
        records=3 * per_round,
        rpc_timeout_s=rpc_timeout,
        schedule=Schedule(rounds=[per_round] * 3, clean_lock_s={1: 2.5 * rpc_timeout}),
    )


SCENARIOS["lock-held"] = lock_held_config


def wrong_instant_config(base: JobConfig, *, slow_task_s: float = 5.0) -> JobConfig:
    """HUDI-6194: every write task fails as the coordinator starts the instant of round 3; the
    failover is regional, so the coordinator keeps running with that instant pending, and the
    last task comes back ``slow_task_s`` late. The tasks back first get input at once (buckets
    flush at a few rows): if their bootstrap is answered before every task's is in (Hudi before
    the fix, ``hold_bootstraps=False``), they write into the instant the coordinator then rolls
    back. The checkpoint timeout leaves room for the slow task."""
    from runtime.core.fault_spec import FaultSpec

    return base.replace(
        failover="region",
        bucket_flush_rows=min(base.bucket_flush_rows, 20),
        checkpoint_timeout_s=max(base.checkpoint_timeout_s, 3 * slow_task_s),
        faults=[FaultSpec("tasks.fail_at_instant_start", 2, param=slow_task_s)],
    )


SCENARIOS["wrong-instant"] = wrong_instant_config


# -- two jobs on one table (runtime.core.jobs_spec) --------------------------------------------------


def job_restart_overlap(base: JobConfig) -> tuple[JobConfig, JobsSpec]:
    """apache/hudi #19357: a cancelled job's ``StreamWriteOperatorCoordinator.close()`` takes
    minutes on slow storage, and the restarted job's coordinator starts meanwhile. Job 1 is the
    old job: its last checkpoint completes, but the completion reaches its coordinator
    ``CLOSE_DELAY_INTERVALS`` checkpoint intervals late (the slow close, which still commits);
    job 2, the new job, starts half an interval after that checkpoint. Under single-writer the new
    coordinator's first instant runs ``BaseHoodieWriteClient.startCommit`` ->
    ``rollbackFailedWrites`` (EAGER: every pending instant is a failed write), which rolls back the
    old job's pending instant and deletes its files before the old coordinator commits it: the
    checkpoint's rows are lost, and the verdict names job 1. Under multi-writer (LAZY with
    per-instant heartbeats) the instant's heartbeat is alive, so it is left alone.

    The difference from the report: the restarted job carries its own stream here (the
    report's restores the old job's checkpoint, whose rows it then does not replay either)."""
    interval = base.checkpoint_interval_s
    checkpoints = 3
    per_round = max(base.writers * 200, base.records // checkpoints if base.records else 0)
    cfg = base.replace(checkpoints=checkpoints, records=checkpoints * per_round)
    late = Schedule(notify_delay_s={checkpoints: CLOSE_DELAY_INTERVALS * interval})
    spec = JobsSpec(jobs=2, start_s=(0.0, (checkpoints + 0.5) * interval), overrides=({"schedule": late},))
    return cfg, spec


CLOSE_DELAY_INTERVALS = 5.0  # how late the old job's last completion reaches its coordinator

# name -> (configuration, jobs) of the command's: the scenarios of two jobs on one table
JOBS_SCENARIOS = {"job-restart-overlap": job_restart_overlap}
