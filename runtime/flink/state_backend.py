"""Checkpoint storage on the DFS: Flink's completed-checkpoint store.

The job manager writes every role's state of a checkpoint (tasks, sources, the coordinator) to
``<table>/.hoodie/.aux/commitlab/checkpoints/<id>.ckp`` before it notifies completion, so a
restarted job resumes from the last completed checkpoint wherever its actors land. A few are kept.

Each of several jobs on one table (``--jobs 2``) keeps its checkpoints under
``checkpoints/<job id>/``, as Flink's checkpoint storage keys them (``FsCheckpointStorageAccess``:
``<state.checkpoints.dir>/<job id>/chk-<n>``), so one job's failover never restores another's
checkpoint. A single job keeps the table's store whatever its ``--job-id``: a job started with a
new id restores an earlier job's checkpoint from it with ``--from-checkpoint``, as Flink's
``--fromSavepoint`` takes any job's checkpoint path.
"""

from __future__ import annotations

from runtime.core import codec
from runtime.core.dfs import Dfs, DfsNotFound
from runtime.core.messages import CompletedCheckpoint

KEEP = 3


def checkpoints_path(table_base: str, own: str = "") -> str:
    """The table's checkpoint store, or the folder ``own`` of one of several jobs in it."""
    path = Dfs.join(table_base, ".hoodie", ".aux", "commitlab", "checkpoints")
    return Dfs.join(path, own) if own else path


class StateBackend:
    def __init__(self, dfs: Dfs, table_base: str, own: str = "") -> None:
        self.dfs = dfs
        self.path = checkpoints_path(table_base, own)

    def save(self, ckp: CompletedCheckpoint) -> None:
        self.dfs.mkdirs(self.path)
        self.dfs.write_bytes(Dfs.join(self.path, f"{ckp.checkpoint_id:010d}.ckp"), codec.encode(ckp))
        ids = self.list_ids()
        for old in ids[:-KEEP]:
            self.dfs.delete(Dfs.join(self.path, f"{old:010d}.ckp"))

    def list_ids(self) -> list[int]:
        try:
            entries = self.dfs.list_dir(self.path)
        except DfsNotFound:
            return []
        return sorted(int(e.name[:-4]) for e in entries if e.name.endswith(".ckp") and e.name[:-4].isdigit())

    def latest(self) -> CompletedCheckpoint | None:
        """The last completed checkpoint whose file reads back; a corrupt one is skipped."""
        for ckp_id in reversed(self.list_ids()):
            try:
                return codec.decode(self.dfs.read_bytes(Dfs.join(self.path, f"{ckp_id:010d}.ckp")), CompletedCheckpoint)
            except (codec.CodecError, OSError):
                continue
        return None

    def completed(self) -> list[CompletedCheckpoint]:
        """The completed checkpoints the store keeps (the last few), oldest first; a corrupt one is skipped."""
        out = []
        for ckp_id in self.list_ids():
            try:
                out.append(
                    codec.decode(self.dfs.read_bytes(Dfs.join(self.path, f"{ckp_id:010d}.ckp")), CompletedCheckpoint)
                )
            except (codec.CodecError, OSError):
                continue
        return out

    def keep_up_to(self, checkpoint_id: int) -> CompletedCheckpoint | None:
        """Flink's --fromSavepoint on this store: deletes the checkpoints after ``checkpoint_id``
        (an earlier job's, which this job's ids will reuse) and returns that one, or None when the
        store does not hold it."""
        if checkpoint_id not in self.list_ids():
            return None
        for later in (i for i in self.list_ids() if i > checkpoint_id):
            self.dfs.delete(Dfs.join(self.path, f"{later:010d}.ckp"))
        return self.latest()

    def clear(self) -> None:
        if self.dfs.exists(self.path):
            self.dfs.delete(self.path, recursive=True)
