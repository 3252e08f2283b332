"""Hudi's concurrency modes for writers (``hoodie.write.concurrency.mode``), resolved once per job.

What is modelled (Hudi 1.0 - 1.1 unless named):

* ``hudi-common`` ``WriteConcurrencyMode``: ``SINGLE_WRITER`` (the default),
  ``OPTIMISTIC_CONCURRENCY_CONTROL`` and ``NON_BLOCKING_CONCURRENCY_CONTROL`` (1.0+):
  ``supportsMultiWriter`` (either of the last two), ``supportsOptimisticConcurrencyControl``
  (the first of them only: only it checks conflicts, ``TransactionUtils.resolveWriteConflictIfAny``),
  ``isNonBlockingConcurrencyControl``. Here: ``--concurrency-mode single-writer|optimistic|non-blocking``.
* ``HoodieWriteConfig.Builder.validate``: non-blocking needs a merge-on-read table with the simple
  bucket index ("Non-blocking concurrency control requires the MOR table with simple bucket
  index"); checked by :meth:`runtime.core.config.JobConfig.validate` before any host starts (the
  lab's index is always the simple bucket index, ``runtime/writer/buckets.py``).
* ``HoodieWriteConfig.Builder.autoAdjustConfigsForConcurrencyMode``: under a multi-writer mode the
  failed-writes policy (``hoodie.clean.failed.writes.policy``) is LAZY (:attr:`ConcurrencyControl.lazy`):
  each instant has a heartbeat (:mod:`runtime.hudi.client.heartbeat`) and only instants whose
  heartbeat expired are rolled back, by the cleaner (``CleanerUtils.rollbackFailedWrites``);
  ``startCommit`` rolls nothing back (it does under EAGER, the single-writer default).
* ``hudi-flink`` ``OptionsResolver.isMultiWriter`` / ``isLockRequired`` and
  ``FlinkWriteClients.getHoodieClientConfig``: without a configured provider the Flink writer
  takes ``FileSystemBasedLockProvider`` under the auxiliary folder, ``withLockWaitTimeInMillis(2000)``,
  ``withFileSystemLockExpire(1)`` (a minute) and ``withClientNumRetries(30)``
  (:mod:`runtime.hudi.client.transaction`). ``--lock-provider in-process`` is ``InProcessLockProvider``.

What differs, and why:

* Single-writer keeps the lab's run-wide table lock (:mod:`runtime.hudi.client.lock`: one run
  holds the table for its whole life); a multi-writer run holds no run-wide lock, so a second job
  can write the table, and takes the transaction lock around each timeline change instead.
* ``--lock-provider`` without a multi-writer mode is accepted and ignored with a warning: Hudi
  accepts a lock provider under SINGLE_WRITER too and uses it only for the metadata table's
  transactions with async table services, which the run-wide lock already excludes here.
* The durations follow ``--time-scale`` as every Hudi default does; the lock's expiry (a
  minute) not below :data:`LOCK_EXPIRY_FLOOR_S`, for the same reason as the heartbeat's floor.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.config import JobConfig, flag_of
from runtime.core.durations import UNSET
from runtime.core.job_options import FILESYSTEM_LOCK, NON_BLOCKING, OPTIMISTIC, SINGLE_WRITER
from runtime.hudi.client.lock import HEARTBEAT_FLOOR_S, HUDI_TOLERABLE_MISSES, Heartbeat, TableLock, hold_table

log = logging.getLogger(__name__)

# hoodie.write.concurrency.mode as Hudi spells each --concurrency-mode
HUDI_MODES = {
    SINGLE_WRITER: "SINGLE_WRITER",
    OPTIMISTIC: "OPTIMISTIC_CONCURRENCY_CONTROL",
    NON_BLOCKING: "NON_BLOCKING_CONCURRENCY_CONTROL",
}
# hoodie.write.lock.provider as Hudi names each --lock-provider
HUDI_LOCK_PROVIDERS = {
    FILESYSTEM_LOCK: "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
    "in-process": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
}
HUDI_LOCK_WAIT_S = 2.0  # FlinkWriteClients: withLockWaitTimeInMillis(2000L), hoodie.write.lock.wait_time_ms
HUDI_LOCK_EXPIRY_S = 60.0  # FlinkWriteClients: withFileSystemLockExpire(1), in minutes
LOCK_EXPIRY_FLOOR_S = HEARTBEAT_FLOOR_S * HUDI_TOLERABLE_MISSES  # a loaded 2-core host's commit fits in it
# HoodieLockConfig.LOCK_ACQUIRE_CLIENT_RETRY_WAIT_TIME_IN_MILLIS (hoodie.write.lock.client.wait_time_ms_between_retry)
HUDI_RETRY_WAIT_S = 10.0


@dataclass(frozen=True)
class ConcurrencyControl:
    """One job's concurrency control, as Hudi's write config resolves it."""

    mode: str = SINGLE_WRITER
    lock_provider: str = ""  # resolved: empty under single-writer
    lock_wait_s: float = 2.0  # one attempt's wait (hoodie.write.lock.wait_time_ms)
    lock_retries: int = 30  # attempts after the first (hoodie.write.lock.client.num_retries)
    retry_wait_s: float = HUDI_RETRY_WAIT_S  # between attempts
    lock_expiry_s: float = HUDI_LOCK_EXPIRY_S  # a transaction lock older than this is taken over
    heartbeat: Heartbeat = Heartbeat(HEARTBEAT_FLOOR_S)
    instant_times: str = "table"  # --instant-times: table, 0.x or 1.x (runtime.hudi.client.transaction)

    @classmethod
    def of(cls, cfg: JobConfig) -> ConcurrencyControl:
        """The job's concurrency control (its options already validated)."""
        scale = cfg.time_scale
        multi = cfg.concurrency_mode != SINGLE_WRITER
        return cls(
            mode=cfg.concurrency_mode,
            lock_provider=(cfg.lock_provider or FILESYSTEM_LOCK) if multi else "",
            lock_wait_s=HUDI_LOCK_WAIT_S * scale if cfg.lock_wait_s == UNSET else cfg.lock_wait_s,
            lock_retries=cfg.lock_retries,
            retry_wait_s=HUDI_RETRY_WAIT_S * scale,
            lock_expiry_s=max(LOCK_EXPIRY_FLOOR_S, HUDI_LOCK_EXPIRY_S * scale),
            heartbeat=Heartbeat.of(cfg),
            instant_times=cfg.instant_times,
        )

    @property
    def multi_writer(self) -> bool:
        """``WriteConcurrencyMode.supportsMultiWriter`` (``OptionsResolver.isMultiWriter``)."""
        return self.mode != SINGLE_WRITER

    @property
    def checks_conflicts(self) -> bool:
        """``supportsOptimisticConcurrencyControl``: only optimistic resolves write conflicts."""
        return self.mode == OPTIMISTIC

    @property
    def non_blocking(self) -> bool:
        return self.mode == NON_BLOCKING

    @property
    def lazy(self) -> bool:
        """The failed-writes policy is LAZY (``autoAdjustConfigsForConcurrencyMode``), else EAGER."""
        return self.multi_writer

    def hudi_options(self) -> dict[str, str]:
        """The Hudi options this resolves to, for a record of the run."""
        out = {"hoodie.write.concurrency.mode": HUDI_MODES[self.mode]}
        if self.multi_writer:
            out |= {
                "hoodie.clean.failed.writes.policy": "LAZY",
                "hoodie.write.lock.provider": HUDI_LOCK_PROVIDERS[self.lock_provider],
                "hoodie.write.lock.wait_time_ms": str(round(self.lock_wait_s * 1000)),
                "hoodie.write.lock.client.num_retries": str(self.lock_retries),
            }
        return out


def is_multi_writer(cfg: JobConfig) -> bool:
    """Whether the job runs under a multi-writer mode (no run-wide table lock)."""
    return cfg.concurrency_mode != SINGLE_WRITER


def config_warnings(cfg: JobConfig) -> list[str]:
    """What a valid configuration does not do that its options suggest (printed, never fatal)."""
    if cfg.lock_provider and not is_multi_writer(cfg):
        return [
            f"{flag_of('lock_provider')} {cfg.lock_provider} is ignored under {flag_of('concurrency_mode')} "
            f"single-writer: the run holds the table's lock for its whole life (Hudi, too, uses a lock provider "
            f"under SINGLE_WRITER only for the metadata table's transactions); give "
            f"{flag_of('concurrency_mode')} optimistic or non-blocking to use it"
        ]
    return []


def warn_config(cfg: JobConfig) -> None:
    for line in config_warnings(cfg):
        log.warning(line)


def hold_for_run(
    cfg: JobConfig, command: str, *, on_take_over: Callable[[str], None] | None = None
) -> contextlib.AbstractContextManager[TableLock | None]:
    """The run-wide table lock a run holds: single-writer's (:func:`runtime.hudi.client.lock.hold_table`),
    or none under a multi-writer mode, whose commits take the transaction lock instead."""
    if is_multi_writer(cfg):
        return contextlib.nullcontext(None)
    return hold_table(cfg.table, Heartbeat.of(cfg), command, on_take_over=on_take_over)
