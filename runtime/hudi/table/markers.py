"""Write markers: an empty file per data file a write creates, so a failed write can be undone.

Hudi's Flink write tasks (0.14.0 bytecode, ``hudi-flink1.17-bundle-0.14.0``; 1.1 where noted)
create *direct* markers themselves: ``hoodie.write.markers.type`` defaults to
``TIMELINE_SERVER_BASED``, but ``FlinkWriteClients`` builds the write tasks' client with the
embedded timeline server off, so ``WriteMarkersFactory.get`` falls back to ``DirectWriteMarkers``.

* Where: ``.hoodie/.temp/<instant>/<partition>/<data file name>.marker.<IOType>``
  (``HoodieTableMetaClient.getMarkerFolderPath``, ``WriteMarkers.getMarkerFileName``).
* Which: ``FlinkCreateHandle`` (a file group without a base file) CREATE, ``FlinkMergeHandle`` and
  ``FlinkMergeAndReplaceHandle`` (a new version of one, or the same instant's again) MERGE, each
  named after the base file it writes; ``FlinkAppendHandle`` (merge-on-read) APPEND, named after the
  slice's base file name (``HoodieAppendHandle.init``: ``FSUtils.makeBaseFileName(baseInstantTime,
  writeToken, fileId)``, HUDI-1517). From table version 8 (Hudi 1.x) a log file gets its own
  marker, ``<log file name>.marker.CREATE``, as it is created (``HoodieAppendHandle
  .getLogCreationCallback`` -> ``WriteMarkers.createLogMarkerIfNotExists``).
* How: every Flink handle calls ``WriteMarkers.createIfNotExists``; ``DirectWriteMarkers.create``
  checks the marker's folder exists (``mkdirs`` when not), checks the marker exists (nothing more
  when it does) and creates it (``fs.create(path, false)``).
* Commit: ``HoodieTable.finalizeWrite`` -> ``reconcileAgainstMarkers``, before the completed instant
  file: the folder exists, its markers listed, a data file a CREATE or MERGE marker names that no
  write stat lists is deleted. ``BaseHoodieWriteClient.postCommit``, after the completed instant file is written,
  ``quietDeleteMarkerDir`` -> ``FSUtils.deleteDir``: exists, one listing, a recursive delete of
  each entry (the partition folders), the folder itself.
* Rollback: ``MarkerBasedRollbackStrategy`` (``hoodie.rollback.using.markers``, default true)
  reads the markers (``MarkerBasedRollbackUtils.getAllMarkerPaths``: is there a ``MARKERS.type``
  file, the timeline server's; else ``DirectWriteMarkers.allMarkerFilePaths``: the folder exists,
  a recursive listing); a CREATE or MERGE marker's data file is deleted, an APPEND marker's file
  slice gets its rollback. ``BaseRollbackActionExecutor.runRollback`` then deletes the marker
  folder.

The Kafka Connect sink's participants (``KafkaConnectWriterProvider``) leave the embedded timeline
server on, so Hudi's sink writes timeline-server-based markers (batched ``MARKERS<n>`` files); the
lab writes direct markers for it (``docs/FIDELITY.md``). The data table's compaction markers are not
modelled; the metadata table's own writes' are (:mod:`runtime.hudi.client.metadata_writer`).
"""

from __future__ import annotations

from runtime.core.dfs import Dfs, DfsNotFound

TEMP_FOLDER = ".temp"  # HoodieTableMetaClient.TEMPFOLDER_NAME, under .hoodie
MARKER_EXTENSION = ".marker"  # HoodieTableMetaClient.MARKER_EXTN
MARKER_TYPE_FILE = "MARKERS.type"  # MarkerUtils.MARKER_TYPE_FILENAME (timeline-server-based only)
CREATE, MERGE, APPEND = "CREATE", "MERGE", "APPEND"  # IOType

# --markers: release is what each protocol's release does, direct for every one the lab models
MARKERS_CHOICES = ("release", "direct", "none")


def markers_on(option: str) -> bool:
    """Whether a job with ``--markers option`` writes markers (release: direct, see the module doc)."""
    return option != "none"


def marker_name(data_file_name: str, io_type: str) -> str:
    return f"{data_file_name}{MARKER_EXTENSION}.{io_type}"


def data_file_of(marker: str) -> tuple[str, str]:
    """(the data file's path relative to the marker folder, its IOType) of a marker's relative path."""
    path, _, io_type = marker.rpartition(MARKER_EXTENSION + ".")
    return path, io_type


class DirectWriteMarkers:
    """The markers of one instant of the table at ``base_path``, each a file on the DFS."""

    def __init__(self, dfs: Dfs, base_path: str, instant: str) -> None:
        self.dfs = dfs
        self.folder = Dfs.join(base_path, ".hoodie", TEMP_FOLDER, instant)

    def create_if_not_exists(self, partition: str, data_file_name: str, io_type: str) -> bool:
        """Creates the marker of a data file unless it exists; whether it created it."""
        parent = Dfs.join(self.folder, partition) if partition else self.folder
        if not self.dfs.exists(parent):
            self.dfs.mkdirs(parent)
        path = Dfs.join(parent, marker_name(data_file_name, io_type))
        if self.dfs.exists(path):  # a later flush of the same file (or a restarted task's)
            return False
        self.dfs.create_empty(path)
        return True

    def all_markers(self) -> list[str]:
        """Every marker, relative to the marker folder (``getAllMarkerPaths``); none without the folder."""
        if self.dfs.exists(Dfs.join(self.folder, MARKER_TYPE_FILE)) or not self.dfs.exists(self.folder):
            return []  # (the lab writes no timeline-server-based markers)
        return self.listed()

    def created_and_merged_data_paths(self) -> list[str]:
        """The data files of the CREATE and MERGE markers, relative to the base path, after the
        folder's existence check (``reconcileAgainstMarkers``: ``doesMarkerDirExist``, then
        ``createdAndMergedDataPaths``); none without the folder."""
        if not self.dfs.exists(self.folder):
            return []
        return [path for path, io_type in map(data_file_of, self.listed()) if io_type != APPEND]

    def listed(self) -> list[str]:
        """The markers as one listing per folder finds them, relative to the marker folder."""
        found, todo = [], [""]
        while todo:  # FSUtils.processFiles: one listing per folder
            prefix = todo.pop()
            try:
                entries = self.dfs.list_dir(Dfs.join(self.folder, prefix) if prefix else self.folder)
            except DfsNotFound:
                continue
            for e in entries:
                rel = f"{prefix}/{e.name}" if prefix else e.name
                if e.is_dir:
                    todo.append(rel)
                elif MARKER_EXTENSION in e.name:
                    found.append(rel)
        return sorted(found)

    def delete_folder(self) -> None:
        """``FSUtils.deleteDir``: exists, one listing, a recursive delete per entry, the folder."""
        if not self.dfs.exists(self.folder):
            return
        for e in self.dfs.list_dir(self.folder):
            self.dfs.delete(e.path, recursive=True)
        self.dfs.delete(self.folder, recursive=True)
