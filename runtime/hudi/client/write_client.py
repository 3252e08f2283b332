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
  :meth:`WriteClient.rollback` (:mod:`runtime.hudi.client.rollback`).
* ``commitCompaction`` / ``rollbackInflightCompaction``: :mod:`runtime.hudi.client.compaction`.
* ``HoodieTable.maybeDeleteMetadataTable`` when the table is opened for writing
  (:func:`create_or_open`).

Each action that changes the data table's files is handed the metadata table's writer when the
table keeps one (``HoodieTable.getMetadataWriter``).
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.core.dfs import Dfs
from runtime.core.messages import WriteStat
from runtime.hudi.client import compaction, rollback
from runtime.hudi.client.metadata_writer import METADATA_PARTITIONS_KEY, MetadataTableWriter, metadata_writer
from runtime.hudi.client.table_metadata import publish
from runtime.hudi.client.table_services import TableServices
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
    """The write client of ``table``; ``services``: what runs after a writers' commit."""

    def __init__(self, table: HudiTable, services: TableServices | None = None) -> None:
        self.table = table
        self.services = services or TableServices()

    def start_instant(self, instant: str) -> None:
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
        if table.props.markers:
            self._reconcile_against_markers(instant, stats)
        doc = commit_metadata_doc(stats, extra)
        publish(table, instant, table.props.write_action, doc, now, metadata_writer(table))
        if table.props.markers:  # BaseHoodieWriteClient.postCommit, after the completed instant file
            table.write_markers(instant).delete_folder()

    def _reconcile_against_markers(self, instant: str, stats: list[WriteStat]) -> None:
        """``HoodieTable.finalizeWrite`` -> ``reconcileAgainstMarkers``, before the commit file: a
        data file the instant's markers name that no write stat lists (a flush whose status never
        reached the coordinator) is deleted, so the commit publishes only what it lists."""
        listed = {s.path for s in stats}
        for path in self.table.write_markers(instant).created_and_merged_data_paths():
            if path not in listed:
                self.table.dfs.delete(Dfs.join(self.table.base_path, path))

    def clean_and_archive(self, now: float) -> None:
        """``mayBeCleanAndArchive`` after a writers' commit, as ``services`` say."""
        self.services.after_commit(self.table, now, metadata_writer(self.table))

    def failed_writes(self, timeline: Timeline) -> list[str]:
        return rollback.failed_writes(self.table, timeline)

    def rollback(self, instant: str, data_files: Iterable[str] = (), *, now: float | None = None) -> list[str]:
        """Rolls back an uncommitted writer's instant (:func:`runtime.hudi.client.rollback.rollback`)."""
        return rollback.rollback(self.table, instant, data_files, now=now, metadata=metadata_writer(self.table))

    def commit_compaction(self, instant: str, stats: list[WriteStat], schema_json: str, now: float | None) -> None:
        compaction.commit_compaction(self.table, instant, stats, schema_json, now, metadata_writer(self.table))

    def rollback_compaction(self, instant: str, now: float | None) -> list[str]:
        return compaction.rollback_compaction(self.table, instant, now, metadata_writer(self.table))
