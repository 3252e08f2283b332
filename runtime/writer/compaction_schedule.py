"""Scheduling a compaction after the coordinator's commit: Hudi's ``CompactionUtil.scheduleCompaction``.

Source: Apache Hudi 0.13 - 0.15, ``hudi-flink/.../util/CompactionUtil.scheduleCompaction``, called by
``StreamWriteOperatorCoordinator.notifyCheckpointComplete`` after the commit and before the next
instant starts (and by Kafka Connect's ``KafkaConnectTransactionServices.endCommit``): when enough
delta commits follow the last compaction (``ScheduleCompactionActionExecutor.needCompact``), a plan
of every file slice with log files outside a pending compaction is saved as
``<C>.compaction.requested`` (:mod:`runtime.hudi.client.compaction`); the job's compaction
operators run it (:mod:`runtime.writer.compaction`).

Differences: with ``--compaction-pending-guard on`` (the default) a compaction is not scheduled
while a writer's instant newer than the last completed one is pending (the instants a protocol
creates on request can be; an older pending one was abandoned, and every reader skips its blocks):
in table version 6 a plan lists the log files present when it is made, and a delta commit still
writing into a file group's old slice would be shadowed by the compacted base file (Hudi issue
#7969). Hudi checks the same for Spark writers only (``ScheduleCompactionActionExecutor``:
"Earliest write inflight instant time must be later than compaction time"); from table version 8
a log joins the slice by its completion time, so Hudi 1.x needs no guard. The postponed compaction
is scheduled after a later commit and counted in ``compactions_postponed``; ``off`` schedules as
Hudi's Flink writer does.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from runtime.core import trace_events
from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.hudi.client import compaction
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table import meta_client
from runtime.hudi.table.hudi_table import HudiTable


class SchedulingCoordinator(Protocol):
    """What scheduling uses of the coordinator (runtime.writer.coordinator.Coordinator)."""

    env: Env
    config: JobConfig
    table: HudiTable
    table_lock: asyncio.Lock
    client: WriteClient
    builds_meta_clients: bool
    counts_completed_delta_commits: bool
    compaction_pending_guard: bool
    compactions_scheduled: list[str]
    compactions_postponed: int


async def schedule_compaction(coordinator: SchedulingCoordinator, checkpoint_id: int) -> str | None:
    """``CompactionUtil.scheduleCompaction`` after a commit (merge-on-read with compaction on):
    a plan of every file slice with log files outside a pending compaction, saved as
    ``<C>.compaction.requested`` once enough delta commits follow the last compaction.
    Returns the compaction's instant, or None."""
    if not coordinator.config.compacts:
        return None

    def schedule() -> tuple[str | None, int, bool]:
        """(the compaction's instant or None, its operations, whether it was postponed)."""
        if coordinator.builds_meta_clients:  # scheduleCompaction's tables
            meta_client.meta_clients(coordinator.table, loaded=0, bare=2)
        timeline = coordinator.table.timeline()
        if not compaction.needs_compaction(
            timeline,
            coordinator.config.compaction_delta_commits,
            completed_only=coordinator.counts_completed_delta_commits,
        ):
            return None, 0, False
        if coordinator.compaction_pending_guard and compaction.newer_writer_pending(timeline):
            return None, 0, True  # the guard: see the module docstring
        ops = compaction.generate_plan(coordinator.table, timeline)
        if not ops:
            return None, 0, False
        instant = coordinator.table.new_instant_time(coordinator.env.wall_time(), timeline)
        compaction.save_plan(coordinator.table, instant, ops)
        return instant, len(ops), False

    start = coordinator.env.now()
    async with coordinator.table_lock, coordinator.client.transaction("", "schedule a compaction"):
        instant, operations, postponed = await coordinator.env.io(schedule)
    coordinator.compactions_postponed += postponed
    if instant is not None:
        coordinator.compactions_scheduled.append(instant)
        coordinator.env.tracer.complete(
            f"schedule compaction {instant}",
            start,
            coordinator.env.now(),
            thread="coordinator",
            cat=trace_events.COMPACTION,
            args={"checkpoint": checkpoint_id, "file_groups": operations},
        )
    return instant
