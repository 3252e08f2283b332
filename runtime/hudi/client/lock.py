"""One writer per table: a run holds the table's lock file, renewed by a heartbeat.

What is modelled, from Hudi 0.14.0 (``hudi-client/hudi-client-common``):

* ``client/transaction/lock/FileSystemBasedLockProvider``: the lock is a file named ``lock``
  that exists while it is held, created with ``fs.create(lockFile, false)`` (``acquireLock``: the
  create fails when it exists), holding who took it (``initLockInfo``: the time and the thread);
  ``tryLock`` deletes a lock file whose modification time is older than its expiry
  (``checkIfExpired``) and takes it; a live one is refused and its content read for the message
  (``reloadCurrentOwnerLockInfo``); ``unlock``/``close`` delete it. ``getLockConfig`` (what
  Hudi's Flink writer uses when it needs a lock, ``FlinkWriteClients.getHoodieClientConfig``)
  puts it under the table's auxiliary folder: here ``<table>/.hoodie/.aux/lock``.
* ``client/heartbeat/HoodieHeartbeatClient``: a running writer renews its heartbeat by
  rewriting a file every ``hoodie.client.heartbeat.interval_in_ms`` (60000) from a timer thread
  (``start``, ``updateHeartbeat``); it is expired when its modification time is older than the
  interval times ``hoodie.client.heartbeat.tolerable.misses`` (2): ``isHeartbeatExpired``,
  ``maxAllowableHeartbeatIntervalInMs``; an interval below one second is refused.
* ``client/heartbeat/HeartbeatUtils`` (``deleteHeartbeatFile``: a stopped heartbeat's file is
  deleted; ``abortIfHeartbeatExpired``: a writer whose own heartbeat expired must not commit).
  The instants a dead writer left pending are rolled back by the next writer's
  ``rollbackFailedWrites``: the coordinator does so when it starts
  (``runtime/writer/coordinator.py`` ``_init_instant``), and ``result.json``'s ``rollbacks``
  says "left pending by a run whose heartbeat expired" after a takeover.

What differs, and why:

* One file is both: the lock is held for the whole run (Hudi holds its lock for one
  transaction and heartbeats each instant in ``.hoodie/.heartbeat/<instant>``), so the lock file
  *is* the run's heartbeat: the holder rewrites it every interval and it expires after
  interval x tolerable misses without one. Hudi's own lock expiry
  (``hoodie.write.lock.filesystem.expire``, minutes; 0 = never, ``getLockConfig`` sets 1) has no
  option of its own here: it is the heartbeat's expiry.
* The content is JSON naming the holder (host, pid, command, start time and a unique token),
  so a refused run can say who holds the table; Hudi writes the time, the thread and a stack.
* The durations follow ``--time-scale`` like every Hudi default, but the interval is not scaled
  below :data:`HEARTBEAT_FLOOR_S` (5 s, so the lock expires after 10 s): a loaded 2-core machine
  (Ray, Spark and the roles starting) can delay the driver's renewal thread by seconds, and a
  live run whose lock expired would be taken over by another writer. An explicit
  ``--heartbeat-interval`` may go down to Hudi's own 1 s minimum.
* Object stores (S3) have no create-if-absent, which ``FileSystemBasedLockProvider`` requires
  (Hudi refuses such schemes: ``StorageSchemes.isAtomicCreationSupported``). Here the lock is
  written, and read back :data:`OBJECT_STORE_SETTLE_S` later: S3 reads are strongly consistent
  and the later of two writes wins, so of two runs whose writes land within that window exactly
  one reads its own token and the other is refused. Limit: a write delayed by more than the
  window after its existence check can still overwrite a lock another run just took; each
  renewal reads the token first, so the run that lost the lock stops at its next heartbeat
  rather than writing on.
* The heartbeat's I/O is bounded by the storage's own timeouts (S3: the URI's ``connect_timeout``
  and ``request_timeout``, :mod:`runtime.core.storage`); a renewal that fails is a missed beat,
  and the release waits for a renewal in flight at most an interval and 5 s.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone

import pyarrow.fs as pafs

from runtime.core.config import ConfigError, JobConfig, flag_of
from runtime.core.dfs import Dfs, DfsCounters, DfsError, DfsNotFound
from runtime.core.durations import UNSET
from runtime.core.errors import UserError
from runtime.core.storage import StorageError, check_location, open_filesystem, redact

log = logging.getLogger(__name__)

LOCK_PATH = (".hoodie", ".aux", "lock")  # FileSystemBasedLockProvider.getLockConfig: the auxiliary folder
HUDI_HEARTBEAT_INTERVAL_S = 60.0  # hoodie.client.heartbeat.interval_in_ms
HUDI_TOLERABLE_MISSES = 2  # hoodie.client.heartbeat.tolerable.misses
HUDI_MIN_INTERVAL_S = 1.0  # HoodieHeartbeatClient: "Cannot set heartbeat lower than 1 second"
HEARTBEAT_FLOOR_S = 5.0  # the scaled default's floor: what a loaded 2-core machine renews in time
OBJECT_STORE_SETTLE_S = 2.0  # the read-back delay that stands in for create-if-absent on S3
HEARTBEAT_DEFAULT_TEXT = f"{HUDI_HEARTBEAT_INTERVAL_S:g} s x --time-scale, at least {HEARTBEAT_FLOOR_S:g} s"
TAKE_ATTEMPTS = 3  # a lock that vanished or was taken between two reads: look again, a bounded number of times


class TableLocked(UserError):
    """Another run holds the table (its heartbeat is live)."""

    heading = "table in use"


@dataclass(frozen=True)
class Heartbeat:
    """How often the holder renews the lock, and how many renewals may be missed before it expires."""

    interval_s: float
    tolerable_misses: int = HUDI_TOLERABLE_MISSES

    @property
    def expiry_s(self) -> float:
        """HoodieHeartbeatClient.maxAllowableHeartbeatIntervalInMs: interval x tolerable misses."""
        return self.interval_s * self.tolerable_misses

    @classmethod
    def of(cls, cfg: JobConfig) -> Heartbeat:
        """The job's heartbeat: Hudi's defaults times the time scale, the interval not below
        :data:`HEARTBEAT_FLOOR_S`; an explicit interval as given, not below Hudi's 1 s."""
        interval = cfg.heartbeat_interval_s
        if interval == UNSET:
            interval = max(HEARTBEAT_FLOOR_S, HUDI_HEARTBEAT_INTERVAL_S * cfg.time_scale)
        elif interval < HUDI_MIN_INTERVAL_S:
            raise ConfigError(
                f"{flag_of('heartbeat_interval_s')} {interval:g}: Hudi refuses a heartbeat below "
                f"{HUDI_MIN_INTERVAL_S:g} s (HoodieHeartbeatClient); give 1 or more seconds"
            )
        if cfg.heartbeat_tolerable_misses < 1:
            raise ConfigError(
                f"{flag_of('heartbeat_tolerable_misses')} {cfg.heartbeat_tolerable_misses}: give 1 or more "
                "(the lock expires after the interval times this count without a renewal)"
            )
        return cls(float(interval), cfg.heartbeat_tolerable_misses)


@dataclass(frozen=True)
class Holder:
    """Who holds the lock: the lock file's content."""

    token: str
    host: str
    pid: int
    command: str
    started_at: float  # seconds since the epoch
    expiry_s: float  # the holder's own expiry: a challenger judges the lock by it, not by its own options
    renewals: int = 0
    # the instant of a multi-writer transaction lock (runtime.hudi.client.transaction); empty for a
    # run's lock. A transaction's lock is never renewed: it expires expiry_s after started_at
    transaction: str = ""

    @classmethod
    def this_process(cls, command: str, expiry_s: float) -> Holder:
        return cls(uuid.uuid4().hex, socket.gethostname(), os.getpid(), command, time.time(), expiry_s)

    def to_bytes(self) -> bytes:
        doc = asdict(self)
        if not self.transaction:  # a run's lock reads as it always did
            del doc["transaction"]
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Holder | None:
        """The holder a lock file names; None for content this module did not write."""
        try:
            doc = json.loads(data)
            return cls(
                str(doc["token"]),
                str(doc["host"]),
                int(doc["pid"]),
                str(doc["command"]),
                float(doc["started_at"]),
                float(doc["expiry_s"]),
                int(doc.get("renewals", 0)),
                str(doc.get("transaction", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        started = datetime.fromtimestamp(self.started_at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"pid {self.pid} on {self.host} ({self.command!r}), started {started}"


def describe_holder(holder: Holder | None) -> str:
    """Who holds a lock, for a message."""
    return holder.describe() if holder is not None else "a lock file this lab cannot read"


def _gone(holder: Holder | None) -> str:
    """A note when the holder is a process of this host that is no longer running."""
    if holder is None or holder.host != socket.gethostname():
        return ""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return " (that process is no longer running on this host: it was killed)"
    except PermissionError:  # running, as another user
        pass
    return ""


class TableLock:
    """The lock of one table, for one run: :meth:`acquire`, renewed by a daemon thread, :meth:`release`.

    ``took_over`` is the holder whose expired lock this run took (None when the table was free);
    ``lost`` is set when a renewal finds the lock file gone or another run's: the run must stop."""

    def __init__(self, table: str, heartbeat: Heartbeat, command: str, *, dfs: Dfs | None = None) -> None:
        if dfs is None:  # its own counters: the lock's I/O is not the protocol's
            fs, base = open_filesystem(table)  # a malformed URI: StorageError, exit 2
            check_location(fs, table)  # an unreachable endpoint or a missing bucket: exit 2
            dfs = Dfs(fs, counters=DfsCounters())
        else:
            base = table
        self.dfs, self.table = dfs, table
        self.path = Dfs.join(base, *LOCK_PATH)
        self.heartbeat = heartbeat
        self.holder = Holder.this_process(command, heartbeat.expiry_s)
        self.taken_over = False  # the table's lock had expired and this run took it
        self.took_over: Holder | None = None  # whose (None: a lock file this lab cannot read)
        self.expired_for_s = 0.0  # how long the taken-over lock had gone without a renewal
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._atomic = isinstance(dfs.fs, pafs.LocalFileSystem)
        self._made: list[str] = []  # the folders acquire made, innermost first

    # -- acquisition --------------------------------------------------------------------------

    def acquire(self) -> TableLock:
        """Takes the table, or raises TableLocked naming the live holder. Starts the heartbeat.
        A storage that refuses the lock file: StorageError naming it."""
        try:
            return self._acquire()
        except DfsError as exc:
            raise StorageError(
                f"cannot take the lock of {redact(self.table)} ({self.path}): {exc}. A run writes its lock into "
                "the table first: check that --table is writable"
            ) from None

    def _acquire(self) -> TableLock:
        aux = self.path.rsplit("/", 1)[0]
        hoodie = aux.rsplit("/", 1)[0]
        # a .hoodie made for the lock alone goes with it (a run refused later leaves none behind)
        self._made = [] if self.dfs.exists(hoodie) else [aux, hoodie]
        self.dfs.mkdirs(aux)
        for _ in range(TAKE_ATTEMPTS):
            if self._create():
                self._start_heartbeat()
                return self
            current = self._read()
            if current is None:
                continue  # released between the create and the read
            holder, age = current
            if age <= self._expiry_of(holder):
                raise TableLocked(self._refusal(holder, age))
            self._take_over(holder, age)
        raise TableLocked(
            f"{redact(self.table)}: its lock ({self.path}) changed hands {TAKE_ATTEMPTS} times while this run "
            "tried to take it; another run is starting on this table. Try again when it has ended."
        )

    def _create(self) -> bool:
        """The lock file with this run's token, if none exists (read back on an object store)."""
        if not self.dfs.create_new(self.path, self.holder.to_bytes()):
            return False
        if self._atomic:
            return True
        time.sleep(OBJECT_STORE_SETTLE_S)  # a racing write lands within the window: the later one wins
        current = self._read()
        if current is not None and current[0] is not None and current[0].token == self.holder.token:
            return True
        if current is not None:
            raise TableLocked(self._refusal(current[0], current[1]))
        return False

    def _read(self) -> tuple[Holder | None, float] | None:
        """The current holder and how long ago it renewed the lock; None when there is no lock file."""
        try:
            data = self.dfs.read_bytes(self.path)
            age = time.time() - self.dfs.modified(self.path)
        except DfsNotFound:
            return None
        return Holder.from_bytes(data), max(0.0, age)

    def _expiry_of(self, holder: Holder | None) -> float:
        """How long the holder's lock lives without a renewal: its own expiry (a lock file this lab
        cannot read: this run's)."""
        return holder.expiry_s if holder is not None else self.heartbeat.expiry_s

    def _take_over(self, expired: Holder | None, age: float) -> None:
        """FileSystemBasedLockProvider.tryLock: an expired lock file is deleted (if it is still
        the same one), then created anew by whoever gets there first."""
        again = self._read()
        if again is None or (again[0] != expired):
            return  # another run took it or renewed it meanwhile: look again
        self.dfs.delete(self.path)
        log.warning("deleted the expired lock %s of %s", self.path, describe_holder(expired))
        self.taken_over, self.took_over, self.expired_for_s = True, expired, age

    def _refusal(self, holder: Holder | None, age: float) -> str:
        expiry = self._expiry_of(holder)
        return (
            f"{redact(self.table)} is being written by another run: {describe_holder(holder)}{_gone(holder)}; its lock "
            f"({self.path}) was renewed {age:.1f} s ago. One writer per table: wait until that run ends, "
            f"or write another --table. If that run was killed, its lock expires {max(0.0, expiry - age):.0f} s "
            f"from now (that run's {flag_of('heartbeat_interval_s')} x {flag_of('heartbeat_tolerable_misses')}: "
            f"{expiry:g} s without a renewal) and the next run takes the table over."
        )

    def took_over_text(self) -> str:
        """Whose expired lock this run took."""
        return describe_holder(self.took_over)

    def takeover_line(self) -> str:
        """What a run that took an expired lock says."""
        return (
            f"took the table over from {self.took_over_text()}: its heartbeat expired "
            f"({self.expired_for_s:.0f} s without a renewal, more than {self._expiry_of(self.took_over):g} s); "
            "the instants it left pending are rolled back"
        )

    # -- the heartbeat -------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"table-lock-heartbeat-{self.holder.pid}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        """HoodieHeartbeatClient's timer: renew every interval until released or lost."""
        while not self._stop.wait(self.heartbeat.interval_s):
            try:
                self._renew()
            except DfsError as exc:  # a missed beat; the next one tries again
                log.warning("the heartbeat of %s failed: %s", self.path, exc)
            if self.lost.is_set():
                return

    def _renew(self) -> None:
        current = self._read()
        if current is None or current[0] is None or current[0].token != self.holder.token:
            log.error("the lock %s is no longer this run's: %s", self.path, describe_holder(current and current[0]))
            self.lost.set()
            return
        self.holder = replace(self.holder, renewals=self.holder.renewals + 1)
        self.dfs.write_bytes(self.path, self.holder.to_bytes())

    def lost_reason(self) -> str:
        return (
            f"the table's lock {self.path} was taken by another run after this one missed its heartbeat "
            f"(more than {self.heartbeat.expiry_s:g} s without a renewal): the job stopped so that one writer "
            "writes the table"
        )

    # -- release -------------------------------------------------------------------------------

    def _remove_made_folders(self) -> None:
        """``.hoodie`` when acquire made it and it holds nothing but the empty ``.aux`` (no table
        was created under the lock: the run was refused or failed before)."""
        if not self._made or not self.dfs.exists(self._made[1]):
            return
        aux, hoodie = self._made
        if [e.name for e in self.dfs.list_dir(hoodie)] == [".aux"] and not self.dfs.list_dir(aux):
            self.dfs.delete(hoodie, recursive=True)

    def release(self) -> None:
        """Stops the heartbeat and deletes the lock file if it is still this run's (``unlock``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat.interval_s + 5.0)  # a renewal in flight ends first
        try:
            current = self._read()
            if current is not None and current[0] is not None and current[0].token == self.holder.token:
                self.dfs.delete(self.path)
            self._remove_made_folders()
        except DfsError as exc:  # the lock then expires on its own
            log.warning("could not release %s: %s", self.path, exc)


@contextmanager
def hold_table(
    table: str, heartbeat: Heartbeat, command: str, *, on_take_over: Callable[[str], None] | None = None
) -> Iterator[TableLock]:
    """The table's lock for the body: taken (or TableLocked), released however the body ends."""
    lock = TableLock(table, heartbeat, command).acquire()
    try:
        if lock.taken_over:
            log.warning(lock.takeover_line())
            if on_take_over is not None:
                on_take_over(lock.takeover_line())
        yield lock
    finally:
        lock.release()


def command_line() -> str:
    """This process's command, for the lock file (``commitlab run --table T ...``)."""
    program = os.path.basename(sys.argv[0]) if sys.argv else "python"
    program = "python -m runtime" if program == "__main__.py" else program
    return " ".join([program, *map(redact, sys.argv[1:])])[:300]  # no secret key into the table


def check_free(table: str, heartbeat: Heartbeat) -> None:
    """Raises TableLocked when a live run holds ``table`` (for a command about to remove it)."""
    lock = TableLock(table, heartbeat, "")
    current = lock._read() if lock.dfs.exists(lock.path) else None
    if current is not None and current[1] <= lock._expiry_of(current[0]):
        raise TableLocked(lock._refusal(*current))
