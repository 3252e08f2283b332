"""two-phase-commit (a what-if: Flink's two-phase-committing sink, as Iceberg's commits, on a Hudi
table): writers name their instants, never wait, and a committer commits per checkpoint."""

from __future__ import annotations

import pytest

from runtime.cli.options import protocol_help
from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.fault_spec import FaultSpec
from runtime.hudi.table.hudi_table import HudiTable
from runtime.protocols import get_protocol
from runtime.protocols.two_phase_commit import (
    JOB_ID_KEY,
    MAX_COMMITTED_KEY,
    TwoPhaseCommitProtocol,
    instant_of,
    job_id_after,
)
from runtime.sim import simulate

PROTOCOL = "two-phase-commit"


def _cfg(**kw) -> JobConfig:
    base = dict(protocol=PROTOCOL, source="generator", writers=3, checkpoints=4, records=3_000, bucket_flush_rows=300)
    base.update(kw)
    return JobConfig(**base)


def _table(table: str) -> HudiTable:
    dfs, base = open_dfs(table)
    return HudiTable.open(dfs, base)


def test_it_is_registered_and_listed_as_a_what_if():
    assert get_protocol(PROTOCOL) is TwoPhaseCommitProtocol
    assert TwoPhaseCommitProtocol.description.startswith("what-if, not a Hudi release")
    assert "two-phase-commit (a what-if, not a Hudi release)" in protocol_help("the protocol")
    assert "coordination-rpc (a what-if" not in protocol_help("the protocol")


def test_instant_names_follow_the_table_and_ascend_with_the_checkpoint():
    job = job_id_after(["20260101000000100", "20260101000000250"])
    assert job == "20260101000000251"
    names = [instant_of(job, k) for k in range(1, 2_000)]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(len(n) == 17 and n > "20260101000000250" for n in names)
    assert instant_of(job, 1_000) == "20260101000001251"  # milliseconds carry into seconds


@pytest.mark.parametrize("table_type", ["copy-on-write", "merge-on-read"])
def test_writers_never_wait_and_each_checkpoint_commits_once_with_its_job_and_id(tmp_path, table_type):
    """On the real disk: the official reader verifies both table types."""
    cfg = _cfg(table_type=table_type)
    result = simulate(cfg, seed=3, storage="disk", workdir=str(tmp_path / "run"))
    assert result.status == "finished", result.error
    assert result.exactly_once is not None and result.exactly_once.verified, result.exactly_once
    assert [c["checkpoint"] for c in result.commits] == [1, 2, 3, 4]
    assert all(s == 0 for s in result.figures.writer_blocked_s.values()), result.figures.writer_blocked_s
    table = _table(result.table)
    timeline = table.timeline()
    job = {t["protocol"]["job_id"] for t in result.tasks.values()}
    assert len(job) == 1  # every task named the same job without asking anyone
    for k, instant in enumerate(timeline.completed_commits(), start=1):
        assert instant == instant_of(next(iter(job)), k)
        meta = table.read_commit_metadata(instant, timeline)["extraMetadata"]
        assert meta[JOB_ID_KEY] == next(iter(job)) and meta[MAX_COMMITTED_KEY] == str(k)


def test_a_crash_after_the_checkpoint_before_the_commit_is_recommitted_from_the_restored_state():
    cfg = _cfg(writers=2, faults=[FaultSpec("coordinator.before_commit_file", 2)])
    result = simulate(cfg, seed=1, storage="memory")
    assert result.status == "finished", result.error
    assert len(result.failovers) == 1
    assert result.exactly_once is not None and result.exactly_once.verified, result.exactly_once
    recommitted = result.coordinator.protocol["recommitted"]
    job = result.coordinator.protocol["job_id"]
    assert recommitted == [instant_of(job, 2)]  # the restored job kept its id: the same name
    # the restarted tasks took the job's id back from their checkpointed state (ctx.restored)
    assert {t["protocol"]["job_id"] for t in result.tasks.values()} == {job}
    assert [c["instant"] for c in result.commits] == [instant_of(job, k) for k in (1, 2, 3, 4)]


def test_merge_on_read_with_compaction_on_table_version_6_is_refused_before_the_run(tmp_path):
    from runtime.core.config import ConfigError

    cfg = _cfg(table_type="merge-on-read", table_version="6", compaction_delta_commits=1)
    with pytest.raises(ConfigError, match="use --table-version 8 or 9"):
        simulate(cfg, seed=0, storage="disk", workdir=str(tmp_path / "run"))
    assert not (tmp_path / "run" / "table").exists()
