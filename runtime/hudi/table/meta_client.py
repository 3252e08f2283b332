"""What Hudi's Flink writer reads around each write: meta clients and the write handles' checks.

Measured with ``commitlab conformance`` (every Hadoop ``FileSystem`` call of Hudi 0.14.0's Flink
writer traced to the Hudi method that made it) and read in the 0.14.0 bundle:

* A write task's flush of one file group is one ``HoodieFlinkWriteClient.upsert`` (one write
  handle). It builds the table anew: ``BaseHoodieWriteClient.initTable`` ->
  ``createMetaClient(true)``, a ``HoodieTableMetaClient`` that checks the table
  (``TableNotFoundException.checkTableValidity``: a status of ``.hoodie``), reads
  ``hoodie.properties`` (``HoodieTableConfig.fetchConfigs``) and lists the active timeline
  (``HoodieTableMetaClient.scanFiles``); the file-system view builds a second meta client without
  the timeline (status, open). ``HoodieTable.validateUpsertSchema`` reads the latest completed
  commit's metadata (``HoodieActiveTimeline.readDataFromPath``) once one exists. A handle that
  looks up the file group's latest slice (a merge or an append) builds a file-system view, which
  looks for a bootstrap index (``HFileBootstrapIndex.<init>``: a status under ``.hoodie/.aux``).
* Every handle: ``HoodiePartitionMetadata.trySave`` checks the partition's metadata file.
  ``HoodieCreateHandle``: ``HoodieWriteHandle.makeNewPath`` (the partition folder),
  ``FlinkCreateHandle.makeNewPath`` (the new file, left by an earlier attempt?),
  ``setupWriteStatus`` (the written file's size). ``HoodieMergeHandle``: ``ParquetUtils.readMetadata``
  (two statuses and an open of the old file's footer), ``FlinkMergeHandle.makeOldAndNewFilePaths``
  (the new file), the old file's reader (``HoodieAvroParquetReader``, ``ParquetReaderIterator``: a
  status each beside the read), ``HoodieMergeHandle.close`` (the new file's size).
  ``HoodieAppendHandle``: ``HoodieLogFormatWriter.getOutputStream`` (the log file), ``close`` (its
  size), and ``HoodieLogFile.rollOver`` (a listing of the partition) when the slice has a log file
  already (a local or object store cannot append to it).
* A write task's open: 9 meta clients (4 with the timeline) and 4 bootstrap index look-ups
  before its first flush (the trace's count); with the remote file-system view, the view storage
  properties' open (:mod:`runtime.hudi.table.file_system_view`).
* The coordinator: ``commitStats`` -> ``createTable`` and the post-commit table services build
  meta clients per commit, ``startCommit`` (``rollbackFailedWrites``' table) and
  ``transitionRequestedToInflight`` per instant: 6 meta clients a checkpoint, 4 with the timeline
  (the trace's ``fetchConfigs`` 6, ``checkTableValidity`` 6, ``scanFiles`` 4 a checkpoint, of which
  the lab's own timeline listing of an instant's start is one); on merge-on-read the compaction
  schedule's two more (``scheduleCompaction``'s tables; the lab's own listing stands for the
  timeline one).

``--meta-client release`` makes these calls where Hudi does; ``shared`` keeps the lab's one view
per task (the table and its timeline read once an instant). Hudi 1.x's writer is modelled as 0.14:
the conformance harness cannot run a 1.x Flink bundle here to measure it.
"""

from __future__ import annotations

from runtime.core.dfs import Dfs
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import AUX

SHARED = "shared"  # --meta-client shared: the lab's one view per task

# HFileBootstrapIndex's index of bootstrapped partitions (``BOOTSTRAP_INDEX_ROOT_FOLDER_PATH``)
_BOOTSTRAP_INDEX = f"{AUX}/.bootstrap/.partitions"


def meta_client_per_handle(option: str) -> bool:
    """Whether a job with ``--meta-client option`` builds a meta client per write handle."""
    return option != SHARED


def file_status(dfs: Dfs, path: str) -> None:
    """A Hadoop ``getFileStatus``/``exists`` whose answer the lab does not need: counted as a stat."""
    dfs.probe("stat", path)


def load_meta_client(table: HudiTable, *, timeline: bool) -> None:
    """``HoodieTableMetaClient.builder().build()``: the table check, ``hoodie.properties`` and,
    with ``loadActiveTimelineOnLoad``, one listing of the active timeline."""
    dfs = table.dfs
    file_status(dfs, table.hoodie)
    dfs.probe("read", Dfs.join(table.hoodie, "hoodie.properties"))
    if timeline:
        dfs.probe("list", table.timeline_dir)


def bootstrap_index_status(table: HudiTable) -> None:
    """A file-system view's ``HFileBootstrapIndex.<init>``: is there a bootstrap index?"""
    file_status(table.dfs, Dfs.join(table.hoodie, _BOOTSTRAP_INDEX))


class WriteClientTables:
    """What a write task's ``upsert`` reads before its handle writes: the table's meta client and
    the view's, the latest commit's metadata (the schema check) and, for a handle that looks up
    the file group's slice, the bootstrap index. The lab needs one answer of the timeline, whether
    a commit exists to read: it lists it for real, once an instant, until it has seen one; later
    listings are probes and the commit read is the one last seen (the read's cost is the model,
    not its content)."""

    def __init__(self, table: HudiTable) -> None:
        self.table = table
        self._instant = ""
        self._latest_commit_file: str | None = None

    def before_handle(self, instant: str, *, views_slices: bool) -> None:
        table, dfs = self.table, self.table.dfs
        if self._latest_commit_file is None and instant != self._instant:
            file_status(dfs, table.hoodie)
            dfs.probe("read", Dfs.join(table.hoodie, "hoodie.properties"))
            self._latest_commit_file = _latest_commit_file(table, table.timeline())
            self._instant = instant
        else:
            load_meta_client(table, timeline=True)
        load_meta_client(table, timeline=False)
        if self._latest_commit_file is not None:
            dfs.probe("read", self._latest_commit_file)
        if views_slices:
            bootstrap_index_status(table)


def _latest_commit_file(table: HudiTable, timeline: Timeline) -> str | None:
    latest = timeline.last_completed()
    return table.timeline_file(table.commit_file(latest, timeline)) if latest is not None else None


def meta_clients(table: HudiTable, *, loaded: int, bare: int) -> None:
    """Meta clients a step builds: ``loaded`` with the timeline, ``bare`` without."""
    for _ in range(loaded):
        load_meta_client(table, timeline=True)
    for _ in range(bare):
        load_meta_client(table, timeline=False)


def write_client_opened(table: HudiTable) -> None:
    """A write task's open (``FlinkWriteClients.createWriteClient`` and the write function's
    first table): 9 meta clients, 4 with the timeline, and 4 file-system views' bootstrap index
    look-ups, as the trace counts them per task before its first flush."""
    meta_clients(table, loaded=4, bare=5)
    for _ in range(4):
        bootstrap_index_status(table)


def create_handle_checks(table: HudiTable, partition: str, rel_path: str) -> None:
    """``HoodieCreateHandle``'s checks before it writes (the partition folder, the new file)."""
    file_status(table.dfs, table.partition_path(partition))
    file_status(table.dfs, Dfs.join(table.base_path, rel_path))


def merge_handle_checks(table: HudiTable, old_rel_path: str, new_rel_path: str) -> None:
    """``HoodieMergeHandle``'s reads before the merge: the old file's footer, the new path, the
    old file's reader (the lab's read of the old file is the reader's open)."""
    dfs, old = table.dfs, Dfs.join(table.base_path, old_rel_path)
    file_status(dfs, old)
    file_status(dfs, old)
    dfs.probe("read", old)
    file_status(dfs, Dfs.join(table.base_path, new_rel_path))
    file_status(dfs, old)
    file_status(dfs, old)


def written_file_status(table: HudiTable, rel_path: str) -> None:
    """The handle's close: the written file's size (``setupWriteStatus``, ``close``)."""
    file_status(table.dfs, Dfs.join(table.base_path, rel_path))
