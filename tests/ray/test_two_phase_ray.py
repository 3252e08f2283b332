"""two-phase-commit on the Ray host, both table types, verified by the official reader: writers
that never wait, one instant per checkpoint named by the writers, the job recorded in each commit."""

from __future__ import annotations

import pytest

from actors.job import run_job
from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.hudi.table.hudi_table import HudiTable
from runtime.protocols.two_phase_commit import JOB_ID_KEY, MAX_COMMITTED_KEY


@pytest.mark.parametrize("table_type", ["merge-on-read", "copy-on-write"])
def test_two_phase_commit_runs_on_ray_and_the_official_reader_verifies_it(ray_session, tmp_path, table_type):
    cfg = JobConfig(
        source="generator",
        protocol="two-phase-commit",
        table_type=table_type,
        writers=2,
        checkpoints=3,
        records=2_000,
        table=str(tmp_path / "table"),
    )
    result = run_job(cfg, None)
    assert result.status.value == "finished", result.error
    assert result.exactly_once is not None and result.exactly_once.verified, result.exactly_once
    assert [c["checkpoint"] for c in result.commits] == [1, 2, 3]
    assert all(s == 0 for s in result.figures.writer_blocked_s.values())
    dfs, base = open_dfs(cfg.table)
    table = HudiTable.open(dfs, base)
    timeline = table.timeline()
    metas = [table.read_commit_metadata(i, timeline)["extraMetadata"] for i in timeline.completed_commits()]
    assert [m[MAX_COMMITTED_KEY] for m in metas] == ["1", "2", "3"]
    assert len({m[JOB_ID_KEY] for m in metas}) == 1
