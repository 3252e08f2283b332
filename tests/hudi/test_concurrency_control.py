"""Hudi's concurrency control, the pieces without a clock of their own: the options and their
checks (``--concurrency-mode``, ``--lock-provider``), the conflict strategy
(``SimpleConcurrentFileWritesConflictResolutionStrategy``), the heartbeats' expiry and the LAZY
policy's choice of instants to roll back, the lock file's document. The pieces on a clock (the
transaction lock's waits, the heartbeat timers) and a whole job are in tests/sim/test_sim_concurrency.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import Dfs
from runtime.hudi.client.concurrency import ConcurrencyControl, config_warnings, is_multi_writer
from runtime.hudi.client.conflict import (
    ConcurrentOperation,
    WriteConflict,
    candidate_instants,
    has_conflict,
    resolve_conflict,
)
from runtime.hudi.client.heartbeat import InstantHeartbeat, expired_instants, heartbeat_path, is_expired
from runtime.hudi.client.lock import Heartbeat, Holder
from runtime.hudi.formats.avro_schema import avro_schema_json
from runtime.hudi.timeline.active_timeline import Timeline
from runtime.hudi.timeline.instant import COMMIT, COMPACTION, COMPLETED, INFLIGHT, REQUESTED, Instant
from tests.hudi.test_table import table  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[2]
T1, T2, T3, T4, T5 = (f"2026010100000{i}000" for i in range(1, 6))


# -- options -----------------------------------------------------------------------------------


def test_single_writer_is_the_default_and_keeps_the_run_wide_lock():
    cfg = JobConfig()
    control = ConcurrencyControl.of(cfg)
    assert cfg.concurrency_mode == "single-writer" and not is_multi_writer(cfg)
    assert not control.multi_writer and not control.lazy and control.lock_provider == ""
    assert control.hudi_options() == {"hoodie.write.concurrency.mode": "SINGLE_WRITER"}


def test_a_multi_writer_mode_is_lazy_with_the_filesystem_lock_by_default():
    control = ConcurrencyControl.of(JobConfig(concurrency_mode="optimistic"))
    assert control.multi_writer and control.lazy and control.checks_conflicts
    assert control.lock_provider == "filesystem" and control.lock_retries == 30
    options = control.hudi_options()
    assert options["hoodie.write.concurrency.mode"] == "OPTIMISTIC_CONCURRENCY_CONTROL"
    assert options["hoodie.clean.failed.writes.policy"] == "LAZY"
    assert options["hoodie.write.lock.provider"].endswith("FileSystemBasedLockProvider")
    nb = ConcurrencyControl.of(
        JobConfig(concurrency_mode="non-blocking", table_type="merge-on-read", lock_provider="in-process")
    )
    assert nb.non_blocking and nb.lazy and not nb.checks_conflicts  # NBCC resolves no conflicts
    assert nb.hudi_options()["hoodie.write.lock.provider"].endswith("InProcessLockProvider")


def test_non_blocking_needs_a_merge_on_read_table():
    with pytest.raises(ConfigError) as refused:
        JobConfig(concurrency_mode="non-blocking").validate()
    message = str(refused.value)
    assert "--concurrency-mode non-blocking" in message and "MOR table with simple bucket index" in message
    assert "--table-type merge-on-read" in message and "--concurrency-mode optimistic" in message
    JobConfig(concurrency_mode="non-blocking", table_type="merge-on-read").validate()


def test_unknown_values_are_refused_naming_the_flag():
    with pytest.raises(ConfigError, match="--concurrency-mode must be one of single-writer, optimistic"):
        JobConfig(concurrency_mode="occ").validate()
    with pytest.raises(ConfigError, match="--lock-provider must be one of"):
        JobConfig(concurrency_mode="optimistic", lock_provider="zookeeper").validate()
    with pytest.raises(ConfigError, match="--lock-retries must not be negative"):
        JobConfig(concurrency_mode="optimistic", lock_retries=-1).validate()


def test_a_lock_provider_under_single_writer_is_ignored_with_a_warning():
    (warning,) = config_warnings(JobConfig(lock_provider="in-process"))
    assert "--lock-provider in-process is ignored under --concurrency-mode single-writer" in warning
    assert "optimistic or non-blocking" in warning
    assert config_warnings(JobConfig(concurrency_mode="optimistic", lock_provider="in-process")) == []


def test_the_command_line_refuses_non_blocking_on_copy_on_write_before_any_work(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "runtime",
            "simulate",
            "--out",
            str(tmp_path / "o"),
            "--concurrency-mode",
            "non-blocking",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "--concurrency-mode non-blocking" in said and "--table-type merge-on-read" in said
    assert "Traceback" not in said and not (tmp_path / "o" / "table" / ".hoodie").exists()


# -- the conflict strategy ---------------------------------------------------------------------


def _timeline(*instants: Instant) -> Timeline:
    return Timeline(instants)


def test_only_instants_completed_since_this_one_started_are_candidates():
    timeline = _timeline(
        Instant(T1, COMMIT, COMPLETED),  # completed before T3 started (the last one then)
        Instant(T2, COMMIT, COMPLETED),  # requested before T3, completed after it started
        Instant(T3, COMMIT, INFLIGHT),  # this one
        Instant(T4, COMMIT, COMPLETED),  # requested and completed after T3 started
        Instant(T5, COMMIT, INFLIGHT),  # pending: not a candidate
    )
    assert candidate_instants(timeline, T3, last_completed=T1) == [T2, T4]
    # no last successful instant recorded (a recommit by a new coordinator): every completed one
    assert candidate_instants(timeline, T3, last_completed=None) == [T1, T2, T4]


def test_a_compaction_pending_and_requested_after_this_instant_is_a_candidate():
    timeline = _timeline(
        Instant(T1, COMMIT, COMPLETED),
        Instant(T2, COMPACTION, REQUESTED),  # before T3: not a candidate while pending
        Instant(T3, COMMIT, INFLIGHT),
        Instant(T4, COMPACTION, REQUESTED),
    )
    assert candidate_instants(timeline, T3, last_completed=T1) == [T4]


def _op(instant: str, *groups: tuple[str, str], compaction: bool = False) -> ConcurrentOperation:
    return ConcurrentOperation(instant, compaction, frozenset(groups))


def test_overlapping_file_groups_conflict_and_the_commit_is_refused():
    this = _op(T3, ("p0", "fg-1"), ("p1", "fg-2"))
    other = _op(T4, ("p1", "fg-2"), ("p1", "fg-3"))
    overlap = has_conflict(this, other)
    assert overlap == {("p1", "fg-2")}
    with pytest.raises(WriteConflict) as refused:
        resolve_conflict(this, other, overlap)
    assert refused.value.instant == T3 and refused.value.other == T4
    assert "Cannot resolve conflicts for overlapping writes" in str(refused.value) and "p1/fg-2" in str(refused.value)


def test_disjoint_file_groups_do_not_conflict():
    # the same file id in another partition is another file group
    assert not has_conflict(_op(T3, ("p0", "fg-1")), _op(T4, ("p1", "fg-1"), ("p0", "fg-2")))


def test_a_compaction_requested_before_this_instant_is_merged_around_one_after_it_conflicts():
    this = _op(T3, ("p0", "fg-1"))
    resolve_conflict(this, _op(T2, ("p0", "fg-1"), compaction=True), {("p0", "fg-1")})
    with pytest.raises(WriteConflict):
        resolve_conflict(this, _op(T4, ("p0", "fg-1"), compaction=True), {("p0", "fg-1")})


# -- heartbeats --------------------------------------------------------------------------------

BEAT = Heartbeat(interval_s=10.0, tolerable_misses=2)  # expires 20 s after the last renewal


def _dfs(tmp_path: Path) -> tuple[Dfs, str]:
    base = str(tmp_path / "t")
    dfs = Dfs(pafs.LocalFileSystem())
    dfs.mkdirs(Dfs.join(base, ".hoodie", ".heartbeat"))
    return dfs, base


def _beat(dfs: Dfs, base: str, instant: str, at: float) -> None:
    dfs.write_bytes(heartbeat_path(base, instant), InstantHeartbeat(instant, at, "w").to_bytes())


def test_an_instant_without_a_heartbeat_is_expired_and_a_renewed_one_is_not(tmp_path):
    dfs, base = _dfs(tmp_path)
    assert is_expired(dfs, base, T1, BEAT, now=1000.0)  # no file: the last heartbeat was at 0
    _beat(dfs, base, T1, at=1000.0)
    assert not is_expired(dfs, base, T1, BEAT, now=1000.0 + BEAT.expiry_s)
    assert is_expired(dfs, base, T1, BEAT, now=1000.0 + BEAT.expiry_s + 0.5)


def test_lazy_rolls_back_only_pending_instants_whose_heartbeat_expired(tmp_path):
    dfs, base = _dfs(tmp_path)
    now = 5000.0
    _beat(dfs, base, T2, at=now - 1.0)  # a live writer's instant
    _beat(dfs, base, T3, at=now - 60.0)  # its writer stopped renewing it
    _beat(dfs, base, T1, at=now - 60.0)  # completed: never rolled back, whatever its heartbeat
    timeline = _timeline(
        Instant(T1, COMMIT, COMPLETED),
        Instant(T2, COMMIT, INFLIGHT),
        Instant(T3, COMMIT, INFLIGHT),
        Instant(T4, COMMIT, REQUESTED),  # no heartbeat file at all
        Instant(T5, COMPACTION, REQUESTED),  # a compaction is not a failed write
    )
    assert expired_instants(dfs, base, timeline, BEAT, now) == [T3, T4]


def test_the_lock_document_names_a_transaction_and_a_runs_lock_reads_as_before():
    run = Holder("tok", "host", 7, "commitlab run", 100.0, 10.0)
    assert b"transaction" not in run.to_bytes()  # a single-writer run's lock file is unchanged
    assert Holder.from_bytes(run.to_bytes()) == run
    txn = Holder("tok#1", "host", 7, "coordinator", 100.0, 10.0, transaction=T3)
    assert Holder.from_bytes(txn.to_bytes()) == txn
    doc = InstantHeartbeat(T3, 123.5, "coordinator of t", 4)
    assert InstantHeartbeat.from_bytes(doc.to_bytes()) == doc
    assert InstantHeartbeat.from_bytes(b"") is None  # Hudi's own empty heartbeat file


# -- the write client's commit under optimistic concurrency control ----------------------------


def test_the_later_of_two_writers_on_one_file_group_is_refused_and_stays_inflight(table):  # noqa: F811
    from runtime.hudi.client.write_client import WriteClient
    from tests.hudi.test_table import I1, I2, I3, stream, write_files

    occ = ConcurrencyControl.of(JobConfig(concurrency_mode="optimistic"))
    metadata = {"schema": avro_schema_json(stream([]).schema, "t")}
    first, second = WriteClient(table, concurrency=occ), WriteClient(table, concurrency=occ)
    first.start_instant(I1)
    first.commit(I1, write_files(table, I1, [("k0", "p0", 1)]), metadata)
    # two writers start, one after the other, both writing partition p0's file group
    first.start_instant(I2)
    second.start_instant(I3)
    assert second.last_completed_at_start[I3] == I1  # preTxn: what had completed when it started
    first.commit(I2, write_files(table, I2, [("k1", "p0", 2)]), metadata)
    late = write_files(table, I3, [("k2", "p0", 3)])
    with pytest.raises(WriteConflict) as refused:
        second.commit(I3, late, metadata)
    assert (refused.value.instant, refused.value.other) == (I3, I2)
    assert not table.is_committed(I3) and table.timeline().pending_commits() == [I3]


def test_a_writer_on_other_file_groups_commits_and_non_blocking_checks_nothing(table):  # noqa: F811
    from runtime.hudi.client.write_client import WriteClient
    from tests.hudi.test_table import I1, I2, stream, write_files

    metadata = {"schema": avro_schema_json(stream([]).schema, "t")}
    occ = ConcurrencyControl.of(JobConfig(concurrency_mode="optimistic"))
    first, second = WriteClient(table, concurrency=occ), WriteClient(table, concurrency=occ)
    first.start_instant(I1)
    second.start_instant(I2)
    first.commit(I1, write_files(table, I1, [("k0", "p0", 1)]), metadata)
    second.commit(I2, write_files(table, I2, [("k1", "p1", 1)]), metadata)  # partition p1: no overlap
    assert table.is_committed(I2) and second.conflict_checks == 1
    nbcc = ConcurrencyControl.of(JobConfig(concurrency_mode="non-blocking", table_type="merge-on-read"))
    assert not WriteClient(table, concurrency=nbcc).concurrency.checks_conflicts


def test_non_blocking_needs_a_table_version_whose_log_files_are_named_by_instant():
    from runtime.job.prepare import validate_job

    cfg = JobConfig(concurrency_mode="non-blocking", table_type="merge-on-read", protocol="message-bus")
    with pytest.raises(ConfigError) as refused:
        validate_job(cfg)  # message-bus models Hudi 0.10/0.11: table version 6
    assert "needs table version 8 or 9" in str(refused.value) and "--table-version 8" in str(refused.value)
    assert validate_job(cfg.replace(table_version="8")).table_version == "8"
    assert validate_job(cfg.replace(protocol="coordination-rpc")).table_version == "9"


def test_the_cleaner_rolls_back_an_expired_instant_and_deletes_its_heartbeat_a_live_one_stays(table):  # noqa: F811
    from runtime.hudi.client.table_services import TableServices
    from runtime.hudi.client.write_client import WriteClient
    from tests.hudi.test_table import I1, I2, I3, stream, write_files

    occ = ConcurrencyControl.of(JobConfig(concurrency_mode="optimistic"))
    client = WriteClient(table, TableServices(clean_retain_commits=5), occ)
    metadata = {"schema": avro_schema_json(stream([]).schema, "t")}
    dfs, base, now = table.dfs, table.base_path, 10_000.0
    dfs.mkdirs(Dfs.join(base, ".hoodie", ".heartbeat"))
    client.start_instant(I1)
    client.commit(I1, write_files(table, I1, [("k0", "p0", 1)]), metadata)
    for instant, renewed in ((I2, now - 3 * occ.heartbeat.expiry_s), (I3, now)):  # a dead and a live writer
        client.start_instant(instant)
        write_files(table, instant, [("k1", "p1", 1)])
        _beat(dfs, base, instant, at=renewed)
    assert client.clean_and_archive(now, wall_time=now) == [I2]
    assert table.timeline().pending_commits() == [I3]
    assert not dfs.exists(heartbeat_path(base, I2)) and dfs.exists(heartbeat_path(base, I3))


def test_two_phase_commit_runs_single_writer_only():
    from runtime.job.prepare import validate_job

    with pytest.raises(ConfigError, match="--protocol two-phase-commit with --concurrency-mode optimistic"):
        validate_job(JobConfig(protocol="two-phase-commit", concurrency_mode="optimistic"))
