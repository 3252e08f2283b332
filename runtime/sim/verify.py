"""A simulated run's verdicts: exactly-once of a finished run, the committed prefix of any run.

On disk the official reader checks the table (:func:`runtime.lab.verify.verify_run`); on the
simulated disk, which has no parquet files, :func:`verify_memory` compares the project's own
snapshot with the expected state. A search's runs skip the commit-by-commit check of an unfinished
run (``check_prefix=False``: :data:`PREFIX_NOT_CHECKED`).
"""

from __future__ import annotations

import time

import pyarrow as pa

from runtime.job.record import verify_committed_prefix
from runtime.lab.results import JobResult
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix, ExactlyOnce
from runtime.lab.verify import verify_run
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.memory_dfs import read_snapshot as read_memory_snapshot
from runtime.sim.sim_run import SimRun

PREFIX_NOT_CHECKED = "not checked: a bounded search's run, judged by its status, commits and trace"


def check_committed_prefix(run: SimRun, record: JobResult, check_prefix: bool) -> None:
    """``record.committed_prefix``: the run's committed prefix checked (a run that did not finish)
    or, with ``check_prefix=False`` and a run that did not finish, a record that it was not."""
    assert run.driver is not None
    if not check_prefix and record.status != Status.FINISHED:
        record.committed_prefix = CommittedPrefix(verified=None, prefix=PREFIX_NOT_CHECKED)
    else:
        record.committed_prefix = verify_committed_prefix(
            run.driver, record, run.stream, run.snapshot, before=run.before
        )


def verify_exactly_once(run: SimRun, verify: bool) -> tuple[ExactlyOnce | None, float]:
    """Exactly-once of a finished run (None when not verified), and how long it took."""
    if not verify or run.expected is None:
        return None, 0.0
    t = time.perf_counter()
    if run.store is not None:
        verdict = verify_memory(run.store, run.cfg.table, run.expected, run.cfg.key_field, run.cfg.partition_field)
    else:
        verdict = verify_run(run.cfg.table, run.expected, run.cfg.key_field, run.cfg.partition_field)
    return verdict, time.perf_counter() - t


def verify_memory(
    store: MemoryStore, table: str, expected: pa.Table, key: str, partition: str | None = None
) -> ExactlyOnce:
    """Exactly-once on the simulated disk: the snapshot by the project's own rules against the
    expected state (the official reader needs parquet files: use storage="disk" for it)."""
    from runtime.lab.verify import VerifyError, compare, unreadable

    try:
        verdict = compare(expected, read_memory_snapshot(MemoryDfs(store, role="verifier"), table), key, partition)
    except VerifyError as exc:
        return unreadable(expected, exc)
    verdict.reader = "commitlab snapshot (simulated disk)"
    return verdict
