"""The transaction lock of a multi-writer mode: what a writer holds while it changes the timeline.

What is modelled (Hudi 0.14 - 1.1, ``hudi-client/hudi-client-common``):

* ``client/transaction/TransactionManager``: ``beginTransaction(Option<HoodieInstant>, ...)`` takes
  the lock (when ``isLockRequired``: a multi-writer mode) and records the transaction's owner
  instant; ``endTransaction`` releases it. Here :meth:`TransactionManager.transaction`, around the
  creation of an instant (``startCommit``), the commit (``commitStats``: ``preCommit``'s conflict
  check, then the completed instant), the scheduling of a compaction (``scheduleTableService``) and
  a cleaning that holds the table lock.
* ``client/transaction/lock/LockManager.lock``: ``tryLock(hoodie.write.lock.wait_time_ms)`` up to
  ``hoodie.write.lock.client.num_retries`` more times, sleeping
  ``hoodie.write.lock.client.wait_time_ms_between_retry`` between attempts; then
  ``HoodieLockException("Unable to acquire lock, lock object ...")``: :class:`LockTimeout`, which
  names what it waited for, the holder and the options that change the wait.
* ``lock/FileSystemBasedLockProvider.tryLock``: the lock file ``<lock path>/lock`` (the Flink writer:
  the auxiliary folder, so ``.hoodie/.aux/lock``, the same file a single-writer run holds); an
  existing one older than ``hoodie.write.lock.filesystem.expire`` (``checkIfExpired``) is deleted,
  a live one refuses (``reloadCurrentOwnerLockInfo``), else it is created with
  ``create(lockFile, false)`` (``acquireLock``); the wait time is not used (one look per attempt).
  The content names the holder (``LockInfo``): here :class:`~runtime.hudi.client.lock.Holder` with
  the transaction's instant. ``unlock`` deletes the file.
* ``lock/InProcessLockProvider``: a ``ReentrantReadWriteLock`` per table path in a static map of
  the JVM; ``tryLock(time)`` waits up to the wait time. Only writers in one process are excluded:
  two Flink jobs (two job managers) are not, nor two Ray actors here. The simulator runs every
  role in one process, so there it excludes the jobs it runs (one lock per table per event loop).
* Instant times (:func:`generate_instant_time`): Hudi 0.x ``HoodieActiveTimeline.createNewInstantTime``
  reads the millisecond clock without a lock, monotonic only within one process (two writers can
  take the same time); Hudi 1.x (HUDI-7507) takes it under the lock
  (``TimeGenerator``, ``SkewAdjustingTimeGenerator.generateTime``: lock, read the clock, sleep the
  maximum expected clock skew, unlock), so two writers' times differ.

What differs, and why: a transaction lock's age is read from its content (the writer's clock at
acquisition), not the file's modification time, so the simulator's virtual clock judges it; a
single-writer run's lock in the same file is judged by its own renewals (its modification time),
as :mod:`runtime.hudi.client.lock` does.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Protocol

import pyarrow.fs as pafs

from runtime.core.config import flag_of
from runtime.core.dfs import Dfs, DfsNotFound
from runtime.core.env import Env
from runtime.core.job_options import FILESYSTEM_LOCK
from runtime.core.job_options import LOCKED_1X as LOCKED_1X  # the two instant-time generators (--instant-times)
from runtime.core.job_options import UNLOCKED_0X as UNLOCKED_0X
from runtime.hudi.client.concurrency import ConcurrencyControl
from runtime.hudi.client.lock import LOCK_PATH, Holder, describe_holder
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.instant import bump_instant, format_instant

HUDI_MAX_CLOCK_SKEW_S = 0.2  # the time generator's maximum expected clock skew (200 ms)


class LockTimeout(TableError):
    """``HoodieLockException``: the transaction lock was not taken within the bounded wait."""


class LockProvider(Protocol):
    """``LockProvider``: one table's lock, tried by one owner at a time."""

    where: str  # what the lock is, for a message

    async def try_lock(self, owner: Holder, wait_s: float) -> bool: ...

    async def unlock(self, owner: Holder) -> None: ...

    async def current_owner(self) -> str: ...


class FileSystemLockProvider:
    """``FileSystemBasedLockProvider``: the lock file under ``.hoodie/.aux``."""

    def __init__(self, env: Env, dfs: Dfs, base_path: str) -> None:
        self.env, self.dfs = env, dfs
        self.path = Dfs.join(base_path, *LOCK_PATH)
        self.where = f"the lock file {self.path}"

    def _read(self) -> tuple[Holder | None, float] | None:
        """The holder and its age; None when there is no lock file."""
        try:
            holder = Holder.from_bytes(self.dfs.read_bytes(self.path))
            if holder is not None and holder.transaction:
                return holder, self.env.wall_time() - holder.started_at
            # a single-writer run's lock: renewed by rewriting it, judged by the storage's clock
            return holder, time.time() - self.dfs.modified(self.path)
        except DfsNotFound:
            return None

    def _try(self, owner: Holder) -> bool:
        current = self._read()
        if current is not None:
            holder, age = current
            expiry = holder.expiry_s if holder is not None else owner.expiry_s
            if age <= expiry:
                return False
            self.dfs.delete(self.path)  # checkIfExpired: an expired lock file is deleted
        self.dfs.mkdirs(self.path.rsplit("/", 1)[0])
        if not self.dfs.create_new(self.path, owner.to_bytes()):
            return False
        if isinstance(self.dfs.fs, pafs.LocalFileSystem):
            return True
        # an object store has no create-if-absent: the later write wins (runtime.hudi.client.lock)
        again = self._read()
        return again is not None and again[0] is not None and again[0].token == owner.token

    async def try_lock(self, owner: Holder, wait_s: float) -> bool:
        return await self.env.io(self._try, owner)

    async def unlock(self, owner: Holder) -> None:
        def release() -> None:
            current = self._read()
            if current is not None and current[0] is not None and current[0].token == owner.token:
                self.dfs.delete(self.path)

        await self.env.io(release)

    async def current_owner(self) -> str:
        current = await self.env.io(self._read)
        return "nobody (the lock was released meanwhile)" if current is None else describe_holder(current[0])


# InProcessLockProvider's static map: one lock per table path, per process (per event loop here)
_IN_PROCESS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, tuple[Holder, asyncio.Event]]] = (
    weakref.WeakKeyDictionary()
)


class InProcessLockProvider:
    """``InProcessLockProvider``: excludes the writers of one process only."""

    def __init__(self, env: Env, base_path: str) -> None:
        self.env, self.base_path = env, base_path
        self.where = f"the in-process lock of {base_path}"

    def _locks(self) -> dict[str, tuple[Holder, asyncio.Event]]:
        return _IN_PROCESS.setdefault(asyncio.get_running_loop(), {})

    async def try_lock(self, owner: Holder, wait_s: float) -> bool:
        locks = self._locks()
        held = locks.get(self.base_path)
        if held is not None:
            try:
                await self.env.wait_for(held[1].wait(), wait_s, self.where, option=flag_of("lock_wait_s"))
            except TimeoutError:
                return False
            if self.base_path in locks:
                return False  # another waiter took it first
        locks[self.base_path] = (owner, asyncio.Event())
        return True

    async def unlock(self, owner: Holder) -> None:
        locks = self._locks()
        held = locks.get(self.base_path)
        if held is not None and held[0].token == owner.token:
            del locks[self.base_path]
            held[1].set()

    async def current_owner(self) -> str:
        held = self._locks().get(self.base_path)
        return describe_holder(held[0]) if held is not None else "nobody (the lock was released meanwhile)"


class TransactionManager:
    """One writer's ``TransactionManager`` and ``LockManager`` over the job's lock provider.
    ``blocked_s`` and ``acquisitions`` say what the lock cost (for the comparison of modes)."""

    def __init__(self, env: Env, dfs: Dfs, base_path: str, control: ConcurrencyControl, owner: str) -> None:
        self.env, self.control, self.owner = env, control, owner
        self.provider: LockProvider = (
            FileSystemLockProvider(env, dfs, base_path)
            if control.lock_provider == FILESYSTEM_LOCK
            else InProcessLockProvider(env, base_path)
        )
        self._holder = Holder.this_process(owner, control.lock_expiry_s)
        self._count = 0
        self.blocked_s = 0.0
        self.acquisitions = 0

    async def lock(self, instant: str, what: str) -> Holder:
        """``LockManager.lock``: the first attempt and ``lock_retries`` more, or :class:`LockTimeout`."""
        self._count += 1
        owner = replace(
            self._holder, token=f"{self.owner}#{self._count}", started_at=self.env.wall_time(), transaction=instant
        )
        start = self.env.now()
        attempts = self.control.lock_retries + 1
        for attempt in range(attempts):
            if await self.provider.try_lock(owner, self.control.lock_wait_s):
                self.blocked_s += self.env.now() - start
                self.acquisitions += 1
                return replace(owner, started_at=self.env.wall_time())
            if attempt + 1 < attempts:
                await self.env.sleep(self.control.retry_wait_s)
        self.blocked_s += self.env.now() - start
        holder = await self.provider.current_owner()
        raise LockTimeout(
            f"Unable to acquire lock: waited {self.env.now() - start:.1f} s ({attempts} attempts) for "
            f"{self.provider.where} to {what}, held by {holder}; {flag_of('lock_wait_s')} (one attempt's "
            f"wait) and {flag_of('lock_retries')} (attempts after the first) change the wait"
        )

    @asynccontextmanager
    async def transaction(self, instant: str, what: str) -> AsyncIterator[None]:
        """``beginTransaction`` ... ``endTransaction``: the body runs holding the lock."""
        owner = await self.lock(instant, what)
        try:
            yield
        finally:
            await self.provider.unlock(owner)


def instant_time_0x(now: float, last_issued: str | None) -> str:
    """Hudi 0.x ``HoodieActiveTimeline.createNewInstantTime``: the millisecond clock, after the
    last time this process issued and nothing else (no lock: another process may take the same)."""
    ts = format_instant(now)
    return bump_instant(last_issued) if last_issued is not None and ts <= last_issued else ts


async def instant_time_1x(txn: TransactionManager, last_issued: str | None) -> str:
    """Hudi 1.x ``SkewAdjustingTimeGenerator.generateTime`` under the lock (HUDI-7507): the clock is
    read holding the lock, which is held for the maximum expected clock skew after the reading."""
    async with txn.transaction("", "generate an instant time"):
        ts = instant_time_0x(txn.env.wall_time(), last_issued)
        await txn.env.sleep(HUDI_MAX_CLOCK_SKEW_S)
    return ts


async def generate_instant_time(generator: str, txn: TransactionManager | None, now: float, last: str | None) -> str:
    """A new instant time by ``generator``: :data:`UNLOCKED_0X` (the 0.x clock, ``now``) or
    :data:`LOCKED_1X` (1.x, under ``txn``'s lock: the writer's clock when it holds the lock)."""
    if generator == UNLOCKED_0X:
        return instant_time_0x(now, last)
    if generator == LOCKED_1X:
        if txn is None:
            raise ValueError("the 1.x instant-time generator takes the transaction lock: give a TransactionManager")
        return await instant_time_1x(txn, last)
    raise ValueError(f"unknown instant-time generator {generator!r}; give {UNLOCKED_0X!r} or {LOCKED_1X!r}")
