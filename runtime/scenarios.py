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

from runtime.config import JobConfig, Schedule


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
