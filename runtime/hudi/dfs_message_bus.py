"""The DFS message bus of HUDI-2677 (Hudi PR #3915): checkpoint messages as files.

Directory ``<table>/.hoodie/.aux/message_bus/``. The driver (coordinator side) writes
``<ckp>.commit`` holding ``"<committed instant>,<inflight instant>"`` when checkpoint ``ckp``
completes (message k names the instant to write during checkpoint k+1; message 0 is written when
the first instant starts) and an empty ``<ckp>.aborted`` when it is aborted. The client (write
task side) reads them, caching a few. No operator event is involved, so a task that waits for a
message never waits on its own mailbox.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from runtime.core import codec
from runtime.core.dfs import Dfs, DfsError

INITIAL_CKP_ID = 0
ABORTED_CKP_INSTANT = "aborted"
MESSAGE_QUEUE_LENGTH = 20  # messages the driver keeps
CLEAN_BATCH = 10  # the driver cleans once it holds MESSAGE_QUEUE_LENGTH + CLEAN_BATCH messages
CLIENT_MESSAGE_CACHE_SIZE = 10
COMMIT_SUFFIX = ".commit"
ABORTED_SUFFIX = ".aborted"


class MessageBusError(RuntimeError):
    """A bus file is malformed or the bus directory is unusable; the message names the file."""


def message_bus_path(base_path: str) -> str:
    return Dfs.join(base_path, ".hoodie", ".aux", "message_bus")


def can_abort(instant: str | None, checkpoint_id: int) -> bool:
    return instant == ABORTED_CKP_INSTANT and not_initial_ckp(checkpoint_id)


def not_initial_ckp(checkpoint_id: int) -> bool:
    return checkpoint_id != INITIAL_CKP_ID


@codec.message
@dataclass(frozen=True)
class CkpMessage:
    checkpoint_id: int
    committed: bool
    commit_instant: str
    inflight_instant: str

    @staticmethod
    def to_bytes(commit_instant: str, inflight_instant: str) -> bytes:
        return f"{commit_instant},{inflight_instant}".encode()

    @classmethod
    def from_bytes(cls, checkpoint_id: int, data: bytes, *, path: str = "") -> CkpMessage:
        parts = data.decode("utf-8", errors="replace").split(",")
        if len(parts) != 2:
            raise MessageBusError(
                f"message file {path or checkpoint_id} holds {data[:40]!r}, expected "
                "'<committed instant>,<inflight instant>'"
            )
        return cls(checkpoint_id, True, parts[0], parts[1])

    @classmethod
    def aborted(cls, checkpoint_id: int) -> CkpMessage:
        return cls(checkpoint_id, False, ABORTED_CKP_INSTANT, ABORTED_CKP_INSTANT)


class MessageDriver:
    """Writes checkpoint messages; recreates the bus directory when it starts."""

    def __init__(self, dfs: Dfs, base_path: str) -> None:
        self.dfs = dfs
        self.path = message_bus_path(base_path)
        # checkpoint id -> committed?, in id order (Hudi: TreeMap<Long, Boolean>)
        self.ckp_id_cache: OrderedDict[int, bool] = OrderedDict()
        self.recreated = 0  # times a write found the bus directory gone (#8060) and recreated it
        if dfs.exists(self.path):
            dfs.delete(self.path, recursive=True)
        dfs.mkdirs(self.path)

    def _file(self, checkpoint_id: int, committed: bool) -> str:
        return Dfs.join(self.path, f"{checkpoint_id}{COMMIT_SUFFIX if committed else ABORTED_SUFFIX}")

    def _remember(self, checkpoint_id: int, committed: bool) -> None:
        self.ckp_id_cache[checkpoint_id] = committed
        self.ckp_id_cache = OrderedDict(sorted(self.ckp_id_cache.items()))
        self._clean()

    def commit_ckp(self, checkpoint_id: int, commit_instant: str, inflight_instant: str) -> None:
        data = CkpMessage.to_bytes(commit_instant, inflight_instant)
        self._write(lambda: self.dfs.write_bytes(self._file(checkpoint_id, True), data))
        self._remember(checkpoint_id, True)

    def abort_ckp(self, checkpoint_id: int) -> None:
        self._write(lambda: self.dfs.create_empty(self._file(checkpoint_id, False)))
        self._remember(checkpoint_id, False)

    def _write(self, write) -> None:
        """Writes one message. HDFS and object stores create missing parents on write; a local
        file system does not, so a bus deleted under the job (#8060) is recreated here, once per
        write, and counted. The messages it held are gone: writers waiting for one give up at
        their instant-wait timeout."""
        try:
            write()
        except DfsError:
            if self.dfs.exists(self.path):
                raise
            self.dfs.mkdirs(self.path)
            self.recreated += 1
            write()

    def delete_all(self) -> None:
        """Deletes the bus directory (the #8060 fault: someone removed it)."""
        self.dfs.delete(self.path, recursive=True)

    def _clean(self) -> None:
        num_to_clean = len(self.ckp_id_cache) - MESSAGE_QUEUE_LENGTH
        if num_to_clean >= CLEAN_BATCH:
            for _ in range(num_to_clean):
                ckp, committed = self.ckp_id_cache.popitem(last=False)
                self.dfs.delete(self._file(ckp, committed))

    def close(self) -> None:
        self.ckp_id_cache.clear()


class MessageClient:
    """Reads checkpoint messages. One per table path per process (``get_singleton``)."""

    _clients: dict[tuple[int, str], MessageClient] = {}
    _lock = threading.Lock()

    def __init__(self, dfs: Dfs, base_path: str) -> None:
        self.dfs = dfs
        self.path = message_bus_path(base_path)
        self.ckp_cache: OrderedDict[int, CkpMessage] = OrderedDict()
        self.read_errors = 0
        self.last_error: str | None = None

    @classmethod
    def get_singleton(cls, dfs: Dfs, base_path: str) -> MessageClient:
        key = (id(dfs.counters), base_path)
        with cls._lock:
            if key not in cls._clients:
                cls._clients[key] = cls(dfs, base_path)
            return cls._clients[key]

    @classmethod
    def reset_singletons(cls) -> None:
        with cls._lock:
            cls._clients.clear()

    def get_ckp_message(self, checkpoint_id: int) -> CkpMessage | None:
        """The message of a checkpoint, or None if there is none yet (read errors count as none,
        as in Hudi; they are remembered in ``last_error`` for diagnosis)."""
        if len(self.ckp_cache) >= CLIENT_MESSAGE_CACHE_SIZE:
            self.ckp_cache.popitem(last=False)  # evict the lowest id (TreeMap.pollFirstEntry)
        if checkpoint_id in self.ckp_cache:
            return self.ckp_cache[checkpoint_id]
        for committed in (True, False):
            path = Dfs.join(self.path, f"{checkpoint_id}{COMMIT_SUFFIX if committed else ABORTED_SUFFIX}")
            try:
                if not self.dfs.exists(path):
                    continue
                msg = (
                    CkpMessage.from_bytes(checkpoint_id, self.dfs.read_bytes(path), path=path)
                    if committed
                    else CkpMessage.aborted(checkpoint_id)
                )
            except (DfsError, MessageBusError) as exc:
                self.read_errors += 1
                self.last_error = str(exc)
                return None
            self.ckp_cache[checkpoint_id] = msg
            self.ckp_cache = OrderedDict(sorted(self.ckp_cache.items()))
            return msg
        return None

    def bus_exists(self) -> bool:
        """Whether the bus directory is there (a deleted bus means writers can wait forever:
        Hudi #8060); used to diagnose a long wait."""
        return self.dfs.exists(self.path)

    def close(self) -> None:
        self.ckp_cache.clear()
