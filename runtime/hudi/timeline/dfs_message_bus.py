"""The DFS message bus of HUDI-2677 (Hudi PR #3915): checkpoint messages as files.

Source: apache/hudi commit dbf8c44 (master, 2021-11-04, PR #3915 "[HUDI-2677] Add DFS based message
queue for flink writer"), module hudi-flink, package ``org.apache.hudi.sink.message``. ``CkpMetadata``
(protocol P2b, Hudi 0.11) later took its place.

- ``MessageBus.java``, class ``MessageBus``: the directory ``<table>/.hoodie/.aux/message_bus``
  (``messageBusPath``), file names ``<ckp>.commit`` / ``<ckp>.aborted`` (``getCommitFileName``,
  ``getAbortedFileName``), ``INITIAL_CKP_ID`` 0, ``ABORTED_CKP_INSTANT`` "aborted",
  ``MESSAGE_QUEUE_LENGTH`` 20, ``CLIENT_MESSAGE_CACHE_SIZE`` 10, ``canAbort``, ``notInitialCkp``.
- ``MessageBus.CkpMessage``: ``toBytes`` writes ``"<commit instant>,<inflight instant>"``;
  ``fromBytes`` is ``content.split(",")`` then ``splits[0]``, ``splits[1]``. Java's
  ``String.split`` drops trailing empty fields, so ``"a,"`` gives ``["a"]``, ``","`` gives ``[]``
  and ``""`` gives ``[""]``: each throws ArrayIndexOutOfBoundsException, which the client swallows
  (no message: the writer keeps waiting). ``"a,b,c"`` reads as ``a``/``b``. :func:`java_split`
  and :meth:`CkpMessage.from_bytes` model exactly that. ``fromPath``: an ``.aborted`` file is not
  read; its message holds ``aborted`` in both fields.
- ``MessageDriver.java``, class ``MessageDriver``: ``initialize`` (the constructor) deletes and
  recreates the directory; ``commitCkp`` creates ``<ckp>.commit`` with overwrite; ``abortCkp``
  ``createNewFile``s ``<ckp>.aborted``; both remember the id in ``ckpIdCache`` (a TreeMap) and call
  ``clean``, which, once the cache holds at least 20 + 10 ids, deletes the oldest down to 20;
  ``close`` clears the cache and keeps the files.
- ``MessageClient.java``, class ``MessageClient``: ``getSingleton`` keeps one client per base path
  in a static map (one per TaskManager JVM); ``getCkpMessage`` first evicts the lowest id when the
  cache holds 10 (even for a cached id), then answers from the cache, else reads ``.commit`` then
  ``.aborted``; any error reading is logged and answered as no message (not cached); ``close``
  clears the cache (every write task calls it when it closes).

Differences, each named: the one-client-per-path map is a :class:`MessageClientRegistry` owned by
the role that reads (a write task is its own process on Ray, so within a process the registry
keeps Hudi's sharing; no process-global map); a write to a deleted directory recreates it, as
Hadoop's ``FileSystem.create`` creates missing parents (our local DFS does not), and is counted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
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
MESSAGE_SEPARATOR = ","


class MessageBusError(RuntimeError):
    """A bus file is malformed or the bus directory is unusable; the message names the file."""


def java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split(sep)`` (limit 0) for a one-character, non-regex separator: no match
    gives ``[text]`` (so ``""`` gives ``[""]``); otherwise trailing empty fields are dropped."""
    if sep not in text:
        return [text]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


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
        return f"{commit_instant}{MESSAGE_SEPARATOR}{inflight_instant}".encode()

    @classmethod
    def from_bytes(cls, checkpoint_id: int, data: bytes, *, path: str = "") -> CkpMessage:
        """``CkpMessage.fromBytes``: fewer than two fields after Java's split is the
        ArrayIndexOutOfBoundsException Hudi throws (and its client swallows); extra fields are
        ignored, as ``splits[0]``, ``splits[1]`` ignore them."""
        parts = java_split(data.decode("utf-8", errors="replace"), MESSAGE_SEPARATOR)
        if len(parts) < 2:
            raise MessageBusError(
                f'message file {path or checkpoint_id} holds {data[:40]!r}: String.split(",") gives '
                f"{len(parts)} field(s), so CkpMessage.fromBytes fails (ArrayIndexOutOfBoundsException); "
                "a message is '<committed instant>,<inflight instant>' with a non-empty inflight instant"
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

    def _write(self, write: Callable[[], object]) -> None:
        """Writes one message. Hadoop's ``FileSystem.create`` creates missing parents; our local
        DFS does not, so a bus deleted under the job (#8060) is recreated here, once per write,
        and counted. The messages it held are gone: writers waiting for one give up at their
        instant-wait timeout."""
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
    """Reads checkpoint messages (``MessageClient``). Obtain one through a
    :class:`MessageClientRegistry`, which keeps Hudi's one client per table path."""

    def __init__(self, dfs: Dfs, base_path: str) -> None:
        self.dfs = dfs
        self.path = message_bus_path(base_path)
        self.ckp_cache: OrderedDict[int, CkpMessage] = OrderedDict()
        self.read_errors = 0
        self.last_error: str | None = None

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
            in_order = not self.ckp_cache or checkpoint_id > next(reversed(self.ckp_cache))
            self.ckp_cache[checkpoint_id] = msg
            if not in_order:  # kept by id (a TreeMap); a later id keeps that order as it is
                self.ckp_cache = OrderedDict(sorted(self.ckp_cache.items()))
            return msg
        return None

    def bus_exists(self) -> bool:
        """Whether the bus directory is there (a deleted bus means writers can wait forever:
        Hudi #8060); used to diagnose a long wait."""
        return self.dfs.exists(self.path)

    def close(self) -> None:
        self.ckp_cache.clear()


class MessageClientRegistry:
    """Hudi's ``MessageClient.getSingleton`` map (base path -> client), as an object owned by the
    process that reads: in Hudi a static map shared by the write tasks of one TaskManager JVM;
    here each write task is its own process (a Ray actor), so its protocol side owns one registry
    and every lookup of a path within it returns the same client. Keyed by base path only, as
    Hudi's (the DFS given first wins)."""

    def __init__(self) -> None:
        self._clients: dict[str, MessageClient] = {}

    def get(self, dfs: Dfs, base_path: str) -> MessageClient:
        client = self._clients.get(base_path)
        if client is None:
            client = self._clients[base_path] = MessageClient(dfs, base_path)
        return client

    def close(self) -> None:
        """Every client's ``close`` (cache cleared); the clients stay registered, as in Hudi."""
        for client in self._clients.values():
            client.close()
