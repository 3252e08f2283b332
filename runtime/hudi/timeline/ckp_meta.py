"""The checkpoint metadata directory ``<table>/.hoodie/.aux/ckp_meta/``, keyed by instant.

Hudi 0.11 to 1.0, ``hudi-flink`` ``org.apache.hudi.sink.meta``:

- ``CkpMessage``: one empty file ``<instant>.<STATE>`` per state an instant reached, STATE one of
  ``INFLIGHT < ABORTED < COMPLETED`` (an aborted instant is reused, so ABORTED ranks below
  COMPLETED). Messages sort by instant, then state.
- ``CkpMetadata``: the coordinator (driver) calls ``bootstrap`` at start (delete the directory,
  recreate it: HUDI-6030 / PR #8374 restored this after #7620 had kept it, #8060),
  ``startInstant`` (INFLIGHT, then keep the last ``MAX_RETAIN_CKP_NUM`` = 3 started instants:
  the oldest one's files are deleted), ``commitInstant`` (COMPLETED) and ``abortInstant``
  (ABORTED). Readers ``load`` (list the directory; a missing one reads as empty, "required when
  the storage is minio"), keep each instant's highest state, sort, and ``lastPendingInstant`` is
  the LAST message's instant unless it is COMPLETED (0.13 to 1.0; 0.11 and 0.12 walked back to
  the latest non-completed one, which differs only if a completed instant follows a pending one,
  something the coordinator never writes within one bootstrap).
- ``ckpMetaPath``: ``ckp_meta`` or ``ckp_meta_<write.client.id>`` when a client id is set.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.hudi.timeline.instant import AUX, HOODIE

CKP_META = "ckp_meta"
# CkpMetadata.MAX_RETAIN_CKP_NUM: "1 is actually enough for fetching the latest pending instant,
# keep 3 instants here for purpose of debugging"
MAX_RETAIN_CKP_NUM = 3


class CkpMetaError(DfsError):
    """A file in ckp_meta that is not ``<instant>.<STATE>`` (Hudi: checkState fails)."""


class State(enum.IntEnum):
    INFLIGHT = 0
    ABORTED = 1
    COMPLETED = 2


@dataclass(frozen=True, order=True)
class CkpMessage:
    instant: str
    state: State

    @property
    def file_name(self) -> str:
        return f"{self.instant}.{self.state.name}"

    def is_complete(self) -> bool:
        return self.state is State.COMPLETED

    def is_aborted(self) -> bool:
        return self.state is State.ABORTED

    @classmethod
    def parse(cls, file_name: str) -> CkpMessage:
        """``CkpMessage(FileStatus)``: exactly one dot, a known state."""
        parts = file_name.split(".")
        if len(parts) != 2 or parts[1] not in State.__members__:
            raise CkpMetaError(f"{file_name!r} is not a ckp_meta file <instant>.INFLIGHT|ABORTED|COMPLETED")
        return cls(parts[0], State[parts[1]])


def all_file_names(instant: str) -> list[str]:
    """``CkpMessage.getAllFileNames``: every state's file of one instant."""
    return [CkpMessage(instant, s).file_name for s in State]


def ckp_meta_path(base_path: str, unique_id: str = "") -> str:
    path = Dfs.join(base_path, HOODIE, AUX, CKP_META)
    return f"{path}_{unique_id}" if unique_id else path


def reduce_messages(messages: Iterable[CkpMessage]) -> list[CkpMessage]:
    """``scanCkpMetadata``: each instant's highest state, sorted by instant."""
    best: dict[str, CkpMessage] = {}
    for m in messages:
        if m.instant not in best or m.state > best[m.instant].state:
            best[m.instant] = m
    return sorted(best.values())


def last_pending_instant(messages: list[CkpMessage]) -> str | None:
    """``lastPendingInstant`` on loaded messages: 'aborted' counts as pending (reused)."""
    if messages and not messages[-1].is_complete():
        return messages[-1].instant
    return None


class CkpMetadata:
    """One table's ckp_meta, as the coordinator writes it and a writer reads it."""

    def __init__(self, dfs: Dfs, base_path: str, unique_id: str = "") -> None:
        self.dfs = dfs
        self.path = ckp_meta_path(base_path, unique_id)
        self.instant_cache: list[str] = []  # started instants, oldest first (the driver's cleaning)

    # -- the driver's side ---------------------------------------------------------------------

    def bootstrap(self) -> None:
        """Cleans every message: the coordinator's start."""
        self.dfs.delete(self.path, recursive=True)
        self.dfs.mkdirs(self.path)

    def start_instant(self, instant: str) -> None:
        self.dfs.create_empty(Dfs.join(self.path, CkpMessage(instant, State.INFLIGHT).file_name))
        self.instant_cache.append(instant)
        self._clean()

    def _clean(self) -> None:
        """Deletes the oldest started instant's files once more than MAX_RETAIN_CKP_NUM started;
        on an error it stays in the cache and is retried at the next start (as Hudi)."""
        if len(self.instant_cache) <= MAX_RETAIN_CKP_NUM:
            return
        oldest = self.instant_cache[0]
        try:
            for name in all_file_names(oldest):
                self.dfs.delete(Dfs.join(self.path, name))
        except DfsError:
            return  # Hudi logs "Exception while cleaning the checkpoint meta file" and goes on
        self.instant_cache.pop(0)

    def commit_instant(self, instant: str) -> None:
        self.dfs.create_empty(Dfs.join(self.path, CkpMessage(instant, State.COMPLETED).file_name))

    def abort_instant(self, instant: str) -> None:
        self.dfs.create_empty(Dfs.join(self.path, CkpMessage(instant, State.ABORTED).file_name))

    def delete_all(self) -> None:
        """Removes the directory (the #8060 fault: someone cleans ckp_meta under the job)."""
        self.dfs.delete(self.path, recursive=True)

    # -- the readers' side ---------------------------------------------------------------------

    def fetch_messages(self) -> list[CkpMessage]:
        """``fetchCkpMessages``: one listing; a missing directory reads as no message."""
        try:
            entries = self.dfs.list_dir(self.path)
        except DfsNotFound:
            return []
        return [CkpMessage.parse(e.name) for e in entries if not e.is_dir]

    def load(self) -> list[CkpMessage]:
        return reduce_messages(self.fetch_messages())

    def last_pending_instant(self) -> str | None:
        return last_pending_instant(self.load())

    def exists(self) -> bool:
        return self.dfs.exists(self.path)
