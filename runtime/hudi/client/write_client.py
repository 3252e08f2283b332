"""Hudi's write client over one table (``BaseHoodieWriteClient``, ``HoodieFlinkWriteClient``):
what a writer does to the table goes through it, as Hudi's Flink coordinator reaches the table
services through its write client.

* ``startCommitWithTime`` + ``transitionRequestedToInflight``: :meth:`WriteClient.start_instant`.
* ``commit``: ``HoodieTable.finalizeWrite`` -> ``reconcileAgainstMarkers`` (a data file the
  instant's markers name that no write stat lists is deleted), ``writeTableMetadata`` (the metadata
  table's delta commit), the completed instant file; then ``postCommit``'s deletion of the marker
  folder. An instant with no write stats is committed only when asked
  (``hoodie.allow.empty.commit``).
* ``mayBeCleanAndArchive`` (0.14: ``autoCleanOnCommit`` then ``autoArchiveOnCommit``):
  :meth:`WriteClient.clean_and_archive` (:mod:`runtime.hudi.client.table_services`).
* ``rollbackFailedWrites`` (``startCommit``, EAGER): :meth:`WriteClient.failed_writes` and
  :meth:`WriteClient.rollback` (:mod:`runtime.hudi.client.rollback`); under a multi-writer
  ``--concurrency-mode`` the policy is LAZY (:mod:`runtime.hudi.client.concurrency`): only
  instants whose heartbeat expired (:mod:`runtime.hudi.client.heartbeat`), rolled back by the
  cleaner (``CleanerUtils.rollbackFailedWrites``, CLEAN_ACTION) in :meth:`WriteClient.clean_and_archive`.
* Multi-writer (:meth:`WriteClient.attach`): the heartbeats (``HoodieHeartbeatClient``), the
  transaction manager (:mod:`runtime.hudi.client.transaction`) the caller holds around timeline
  changes, ``preTxn``'s last completed instant recorded when an instant starts, and ``preCommit``'s
  conflict check under optimistic concurrency control (:mod:`runtime.hudi.client.conflict`).
* ``commitCompaction`` / ``rollbackInflightCompaction``: :mod:`runtime.hudi.client.compaction`.
* ``HoodieTable.maybeDeleteMetadataTable`` when the table is opened for writing
  (:func:`create_or_open`).

Each action that changes the data table's files is handed the metadata table's writer when the
table keeps one (``HoodieTable.getMetadataWriter``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from runtime.core.dfs import Dfs
from runtime.core.env import Env
from runtime.core.messages import WriteStat
from runtime.hudi.client import compaction, rollback
from runtime.hudi.client.concurrency import ConcurrencyControl
from runtime.hudi.client.conflict import ConcurrentOperation, resolve_write_conflict_if_any
from runtime.hudi.client.heartbeat import HeartbeatClient, expired_instants, heartbeat_path
from runtime.hudi.client.metadata_writer import METADATA_PARTITIONS_KEY, MetadataTableWriter, metadata_writer
from runtime.hudi.client.table_metadata import publish
from runtime.hudi.client.table_services import TableServices
from runtime.hudi.client.transaction import (
    HUDI_MAX_CLOCK_SKEW_S,
    LOCKED_1X,
    UNLOCKED_0X,
    TransactionManager,
    instant_time_0x,
)
from runtime.hudi.formats.commit_metadata import commit_metadata_doc
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError, TableProps
from runtime.hudi.timeline.active_timeline import Timeline


def create_or_open(dfs: Dfs, base_path: str, props: TableProps) -> HudiTable:
    """The table a writer writes, created or opened (:meth:`HudiTable.create_or_open`); a writer
    with the metadata table off (``props.metadata_table`` False) deletes the one its properties
    declare (``HoodieTable.maybeDeleteMetadataTable``, decided by
    ``hoodie.table.metadata.partitions``); one with it on initialises it at its first commit, when
    the instant's clock is at hand."""
    table, existing = HudiTable.create_or_open_found(dfs, base_path, props)
    if props.metadata_table is False and existing.get(METADATA_PARTITIONS_KEY):
        MetadataTableWriter(table).delete()
    return table


class WriteClient:
    """The write client of ``table``; ``services``: what runs after a writers' commit;
    ``concurrency``: the job's concurrency control (single-writer when not given)."""

    def __init__(
        self, table: HudiTable, services: TableServices | None = None, concurrency: ConcurrencyControl | None = None
    ) -> None:
        self.table = table
        self.services = services or TableServices()
        self.concurrency = concurrency or ConcurrencyControl()
        self.heartbeats: HeartbeatClient | None = None  # multi-writer only (attach)
        self.transactions: TransactionManager | None = None
        # preTxn: the last completed instant of the commits timeline when each instant started
        self.last_completed_at_start: dict[str, str | None] = {}
        self.conflict_checks = 0  # commits checked for conflicts (optimistic)
        self.last_generated: str | None = None  # the last instant time the 0.x/1.x generator gave

    def attach(self, env: Env, owner: str) -> WriteClient:
        """A multi-writer mode's heartbeats and transaction lock, on ``env``'s clock; ``owner``
        names this writer in the heartbeat and lock files. Single-writer: nothing."""
        if self.concurrency.multi_writer:
            dfs, base = self.table.dfs, self.table.base_path
            self.heartbeats = HeartbeatClient(env, dfs, base, self.concurrency.heartbeat, owner)
            self.transactions = TransactionManager(env, dfs, base, self.concurrency, owner)
        return self

    @asynccontextmanager
    async def transaction(self, instant: str, what: str) -> AsyncIterator[None]:
        """``TransactionManager.beginTransaction`` ... ``endTransaction`` under a multi-writer mode
        (the lock provider's lock, :mod:`runtime.hudi.client.transaction`; ``what`` for a timeout's
        message); nothing under single-writer, whose run holds the table for its whole life."""
        if self.transactions is None:
            yield
            return
        async with self.transactions.transaction(instant, what):
            yield

    async def new_instant_time(self, env: Env) -> str | None:
        """``--instant-times``: the instant time Hudi's generator gives now, or None for the lab's
        own (``table``: after every instant on the timeline). 0.x: the millisecond clock, monotonic
        in this writer only (``HoodieActiveTimeline.createNewInstantTime``); 1.x: the same clock read
        by a caller that holds the transaction lock, which is then held for the maximum expected
        clock skew (``SkewAdjustingTimeGenerator.generateTime``, the lock not taken again:
        ``startCommit`` calls it inside its transaction)."""
        generator = self.concurrency.instant_times
        if generator not in (UNLOCKED_0X, LOCKED_1X):
            return None
        ts = instant_time_0x(env.wall_time(), self.last_generated)
        if generator == LOCKED_1X:
            await env.sleep(HUDI_MAX_CLOCK_SKEW_S)
        self.last_generated = ts
        return ts

    def concurrency_figures(self, conflicts: list[str]) -> dict[str, object]:
        """A multi-writer mode's record: Hudi's options, the commits ``conflicts`` failed, what the
        lock cost (acquisitions, seconds blocked), the heartbeats; empty under single-writer."""
        if not self.concurrency.multi_writer:
            return {}
        txn, beats = self.transactions, self.heartbeats
        return {
            "options": self.concurrency.hudi_options(),
            "conflicts": list(conflicts),
            "conflict_checks": self.conflict_checks,
            "lock_acquisitions": txn.acquisitions if txn else 0,
            "lock_blocked_s": round(txn.blocked_s, 6) if txn else 0.0,
            "heartbeats_running": beats.running() if beats else [],
            "heartbeats_missed": beats.missed if beats else 0,
        }

    def start_instant(self, instant: str, timeline: Timeline | None = None) -> None:
        """The instant requested and inflight; under a multi-writer mode ``timeline`` (listed
        under the lock) gives ``preTxn``'s last completed instant for the conflict check."""
        if self.concurrency.multi_writer:
            done = (timeline or self.table.timeline()).completed_instants()
            self.last_completed_at_start[instant] = max(done) if done else None
        self.table.start_instant(instant)

    def commit(
        self,
        instant: str,
        stats: list[WriteStat],
        extra: dict[str, str],
        *,
        empty: bool = False,
        now: float | None = None,
    ) -> None:
        """Writes ``<instant>.commit``: the last step, which publishes the instant. ``empty``:
        hoodie.allow.empty.commit (the Kafka Connect sink); by mistake an instant with no write
        stats would publish files no stat lists. ``now``: the clock the completion time comes
        from (layout 2)."""
        table = self.table
        if not stats and not empty:
            raise TableError(
                f"refusing to commit {instant} with no write stats: an empty commit is committed only "
                "with hoodie.allow.empty.commit (--allow-empty-commit)"
            )
        if self.concurrency.multi_writer:  # under the lock: what the other writers completed
            timeline = table.timeline()
            if self.concurrency.checks_conflicts:  # preCommit: resolveWriteConflict
                self.conflict_checks += 1
                this = ConcurrentOperation.of_stats(instant, stats)
                resolve_write_conflict_if_any(table, timeline, this, self.last_completed_at_start.get(instant))
            table.after_timeline(timeline)  # the completion time comes after theirs
        if table.props.markers:
            self._reconcile_against_markers(instant, stats)
        doc = commit_metadata_doc(stats, extra)
        publish(table, instant, table.props.write_action, doc, now, metadata_writer(table))
        if table.props.markers:  # BaseHoodieWriteClient.postCommit, after the completed instant file
            table.write_markers(instant).delete_folder()
        self.last_completed_at_start.pop(instant, None)

    def _reconcile_against_markers(self, instant: str, stats: list[WriteStat]) -> None:
        """``HoodieTable.finalizeWrite`` -> ``reconcileAgainstMarkers``, before the commit file: a
        data file the instant's markers name that no write stat lists (a flush whose status never
        reached the coordinator) is deleted, so the commit publishes only what it lists."""
        listed = {s.path for s in stats}
        for path in self.table.write_markers(instant).created_and_merged_data_paths():
            if path not in listed:
                self.table.dfs.delete(Dfs.join(self.table.base_path, path))

    def clean_and_archive(self, now: float, *, wall_time: float | None = None) -> list[str]:
        """``mayBeCleanAndArchive`` after a writers' commit, as ``services`` say. Under LAZY the
        clean first rolls back the writers' instants whose heartbeat expired by ``wall_time``
        (``CleanerUtils.rollbackFailedWrites`` for CLEAN_ACTION); returns them."""
        undone = []
        if self.concurrency.lazy and self.services.clean_retain_commits:
            for pending in self.failed_writes(self.table.timeline(), now=wall_time):
                self.rollback(pending, now=now)
                # rollbackFailedWrites under LAZY: HeartbeatUtils.deleteHeartbeatFile
                self.table.dfs.delete(heartbeat_path(self.table.base_path, pending))
                undone.append(pending)
        self.services.after_commit(self.table, now, metadata_writer(self.table))
        return undone

    def failed_writes(self, timeline: Timeline, *, now: float | None = None) -> list[str]:
        """``getInstantsToRollback``: EAGER, every pending writer's instant
        (:func:`runtime.hudi.client.rollback.failed_writes`); LAZY, those whose heartbeat expired
        by ``now`` (:func:`runtime.hudi.client.heartbeat.expired_instants`)."""
        if not self.concurrency.lazy:
            return rollback.failed_writes(self.table, timeline)
        if now is None:
            raise ValueError("the LAZY failed-writes policy judges heartbeats: give the clock's time")
        return expired_instants(self.table.dfs, self.table.base_path, timeline, self.concurrency.heartbeat, now)

    def rollback(self, instant: str, data_files: Iterable[str] = (), *, now: float | None = None) -> list[str]:
        """Rolls back an uncommitted writer's instant (:func:`runtime.hudi.client.rollback.rollback`)."""
        return rollback.rollback(self.table, instant, data_files, now=now, metadata=metadata_writer(self.table))

    def commit_compaction(self, instant: str, stats: list[WriteStat], schema_json: str, now: float | None) -> None:
        if self.concurrency.multi_writer:  # completeCompaction, under the lock
            self.table.after_timeline(self.table.timeline())
        compaction.commit_compaction(self.table, instant, stats, schema_json, now, metadata_writer(self.table))

    def rollback_compaction(self, instant: str, now: float | None) -> list[str]:
        return compaction.rollback_compaction(self.table, instant, now, metadata_writer(self.table))
