"""What an action on a data table asks of its metadata table's writer (Hudi's
``HoodieTableMetadataWriter`` interface, which ``HoodieTable.getMetadataWriter`` hands an action
when the metadata table is on): a delta commit of the files an instant changed, and the removal
of an undone instant's. :class:`runtime.hudi.client.metadata_writer.MetadataTableWriter` is it;
the write client passes it to the actions (rollback, clean, compaction), which never build it.

:func:`publish` is ``BaseActionExecutor.writeTableMetadata`` then ``saveAsComplete``: the
metadata table's delta commit first, then the instant's completed file."""

from __future__ import annotations

from typing import Protocol

from runtime.hudi.formats.commit_metadata import CommitMetadataDoc
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import FileChanges, commit_changes


class TableMetadataWriter(Protocol):
    def update(self, instant: str, changes: FileChanges, now: float | None) -> None: ...

    def undo(self, instant: str) -> None: ...


def publish(
    table: HudiTable,
    instant: str,
    action: str,
    doc: CommitMetadataDoc,
    now: float | None,
    metadata: TableMetadataWriter | None,
) -> None:
    """A completed instant with its metadata ``doc``; with the metadata table on (``metadata``),
    its delta commit of the instant's files first."""
    if metadata is not None:
        metadata.update(instant, commit_changes(doc), now)
    table.save_as_complete(instant, action, doc, now)
