"""Where a write task learns its file slices: the embedded timeline server's file-system view.

Hudi's Flink writer (0.10 - 1.1; read in 0.14 and the 1.x ``FlinkWriteClients``, traced in the
0.14.0 bundle by ``commitlab conformance``):

* ``StreamWriteOperatorCoordinator.start`` -> ``FlinkWriteClients.createWriteClient(conf)``: the
  coordinator's write client runs with the embedded timeline server on
  (``getHoodieClientConfig(conf, true, false)``), and ``ViewStorageProperties.createProperties``
  saves where it listens as ``.hoodie/.aux/view_storage_conf.properties`` (a delete, then a
  create): ``hoodie.filesystem.view.type`` REMOTE_FIRST, ``hoodie.filesystem.view.remote.host``,
  ``.port``, ``.timeout.secs`` and the retry options.
* A write task's client (``createWriteClient(conf, runtimeContext)``: ``loadFsViewStorageConfig``
  true, the embedded server off) reads that file (``ViewStorageProperties.loadFromProperties``: an
  open), so its file-system view is ``RemoteHoodieTableFileSystemView`` behind a
  ``PriorityBasedFileSystemView``: a request that fails (any error, or no answer within
  ``hoodie.filesystem.view.remote.timeout.secs``) is answered by the local view, which lists the
  storage, for the rest of that view's life; the Flink client builds its table, and so its view,
  anew for each write (``HoodieTable``'s constructor creates the view manager). Its look-ups are REST
  calls: ``BucketStreamWriteFunction.bootstrapIndexIfNeed`` (``getAllFileGroups`` of a partition,
  once per partition), ``HoodieMergeHandle`` (``getLatestBaseFile``), ``HoodieAppendHandle.init``
  (``getLatestFileSlice``). Each request carries the client's last instant and timeline hash.
* The server (``RequestHandler.syncIfLocalViewBehind``) syncs its view when the client's timeline
  differs from its own: ``AbstractTableFileSystemView.sync`` reloads the active timeline (one
  listing) and, without incremental sync, drops every partition it had loaded, with a new view's
  bootstrap index look-up. A partition is listed when first asked for
  (``ensurePartitionLoadedCorrectly`` -> ``listPartition``: a missing partition is checked and
  created, ``mkdirs``). The trace of 0.14.0 (2 writers, 4 partitions): the write tasks list no
  partition to learn slices; the server lists each partition once per checkpoint.

The lab: ``--file-system-view remote`` has the coordinator serve its view as Hudi's embedded
server does (its DFS calls counted as the timeline server's), and the task ask it once per flush
that needs a slice: a partition's first touch asks for every file group (``getAllFileGroups``), a
merge or an append for its file group's latest slice (``getLatestBaseFile``,
``getLatestFileSlice``); ``direct`` has the task list the partition itself, the lab before.
The server syncs when a request names a newer instant than the one it last synced for (a task
writes a new instant once it has seen the last one complete) or, with a partition's first listing
in an instant, a timeline other than the one it synced for (a compaction or a rollback completes
with no new instant); it drops its view when the tasks restart. An append whose next log file
exists already rolls over past it (:func:`runtime.hudi.table.log_writer.rolled_over`), as Hudi's log
writer does, so a view behind the storage never makes a task overwrite a log file.
"""

from __future__ import annotations

import functools
import hashlib

from runtime.core.dfs import Dfs, DfsNotFound
from runtime.core.messages import FileSliceRequest, PartitionFiles
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.meta_client import bootstrap_index_status, file_status, load_meta_client
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import AUX

RELEASE, REMOTE, DIRECT = "release", "remote", "direct"
CHOICES = (RELEASE, REMOTE, DIRECT)

# ViewStorageProperties.FILE_NAME, under HoodieTableMetaClient.AUXILIARYFOLDER_NAME
VIEW_STORAGE_PROPERTIES = f"{AUX}/view_storage_conf.properties"

# a remote request's bound (FileSystemViewStorageConfig.REMOTE_TIMEOUT_SECS)
REMOTE_TIMEOUT_OPTION = "hoodie.filesystem.view.remote.timeout.secs"
REMOTE_TIMEOUT_S = 300.0

# FileSystemViewStorageConfig's options as FlinkWriteClients.createWriteClient saves them
_PROPERTIES = (
    "hoodie.filesystem.view.type=REMOTE_FIRST\n"
    "hoodie.filesystem.view.remote.host=coordinator\n"
    f"{REMOTE_TIMEOUT_OPTION}={REMOTE_TIMEOUT_S:.0f}\n"
)


def tasks_use_remote_view(option: str, release_view: str) -> bool:
    """Whether the write tasks ask the coordinator's server for file slices (``--file-system-view``;
    ``release_view``: what the protocol's release does)."""
    return (release_view if option == RELEASE else option) == REMOTE


def timeline_key(timeline: Timeline) -> str:
    """What the client's timeline hash stands for here: its completed instants."""
    return hashlib.sha1(",".join(timeline.completed_instants()).encode()).hexdigest()[:16]


def save_view_storage_properties(table: HudiTable) -> None:
    """``ViewStorageProperties.createProperties``: the coordinator's start."""
    path = Dfs.join(table.hoodie, VIEW_STORAGE_PROPERTIES)
    table.dfs.delete(path)
    table.dfs.write_bytes(path, _PROPERTIES.encode())


def load_view_storage_properties(table: HudiTable) -> None:
    """``ViewStorageProperties.loadFromProperties``: a write task's client opens the file."""
    table.dfs.probe("read", Dfs.join(table.hoodie, VIEW_STORAGE_PROPERTIES))


@functools.lru_cache(maxsize=65536)
def _file_group_of(name: str) -> str | None:
    """The file group a base or log file belongs to (cached: a partition's names come back at
    every sync of the view)."""
    base = parse_base_file_name(name)
    if base is not None:
        return base[0]
    log = LogFileName.parse(name)
    return log.file_id if log is not None else None


def by_file_group(files: PartitionFiles) -> dict[str, PartitionFiles]:
    """A partition's files by the file group they belong to (base and log files; others left out)."""
    groups: dict[str, PartitionFiles] = {}
    for name, size in zip(files.names, files.sizes, strict=True):
        fid = _file_group_of(name)
        if fid is not None:
            group = groups.get(fid)
            if group is None:  # (not setdefault: it would build a group for every file)
                group = groups[fid] = PartitionFiles([], [])
            group.names.append(name)
            group.sizes.append(size)
    return groups


class EmbeddedViewServer:
    """The embedded timeline server's file-system view of ``table`` (blocking: run it through
    ``env.io``, one request at a time)."""

    def __init__(self, table: HudiTable) -> None:
        self.table = table
        self._synced: str | None = None  # the instant the view last synced for; None: not built
        self._timeline = ""  # the key of the client timeline it last synced for
        self._partitions: dict[str, PartitionFiles] = {}
        self._file_groups: dict[str, dict[str, PartitionFiles]] = {}  # partition -> file id -> its files
        self.requests = 0
        self.syncs = 0
        self.listings = 0

    def latest_file_slices(self, request: FileSliceRequest) -> PartitionFiles:
        """The partition's files as the view holds them, after syncing a view that is behind."""
        self.requests += 1
        if self._synced is None:  # the view's first use: its meta client, the bootstrap index
            load_meta_client(self.table, timeline=True)
            bootstrap_index_status(self.table)
        elif self._behind(request):  # syncIfLocalViewBehind -> sync: reload, drop partitions
            self.table.dfs.probe("list", self.table.timeline_dir)
            bootstrap_index_status(self.table)
            self.forget()
            self.syncs += 1
        self._synced = max(self._synced or "", request.instant)
        self._timeline = request.timeline or self._timeline
        files = self._partitions.get(request.partition)
        if files is None:
            files = self._partitions[request.partition] = self._list_partition(request.partition)
        if not request.file_id:
            return files
        groups = self._file_groups.get(request.partition)
        if groups is None:
            groups = self._file_groups[request.partition] = by_file_group(files)
        return groups.get(request.file_id) or PartitionFiles([], [])

    def _behind(self, request: FileSliceRequest) -> bool:
        """A newer instant, or a timeline other than the one it synced for (a compaction or a
        rollback completes with no new instant written)."""
        assert self._synced is not None
        return request.instant > self._synced or bool(request.timeline and request.timeline != self._timeline)

    def forget(self) -> None:
        """Drops every loaded partition: the next request lists again."""
        self._partitions.clear()
        self._file_groups.clear()

    def _list_partition(self, partition: str) -> PartitionFiles:
        """``AbstractTableFileSystemView.listPartition``: a missing partition is created."""
        self.listings += 1
        dfs, path = self.table.dfs, self.table.partition_path(partition)
        try:
            entries = dfs.list_dir(path)
        except DfsNotFound:
            file_status(dfs, path)
            dfs.mkdirs(path)
            return PartitionFiles([], [])
        return PartitionFiles.listed(entries)
