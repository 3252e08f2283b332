"""A protocol in a file outside the project runs on the Ray host: every actor process loads the
file named in the job's configuration itself (docs/PROTOCOL_API.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

from actors.job import run_job
from runtime.core.config import JobConfig

TEMPLATE = Path(__file__).resolve().parents[2] / "docs" / "protocol_template.py"


def test_a_protocol_file_outside_the_project_runs_on_ray_and_verifies(ray_session, tmp_path):
    own = tmp_path / "research" / "my_protocol.py"
    own.parent.mkdir()
    shutil.copy(TEMPLATE, own)
    cfg = JobConfig(
        source="generator",
        protocol=str(own),
        writers=2,
        checkpoints=3,
        records=2_000,
        table=str(tmp_path / "table"),
    )
    result = run_job(cfg, None)
    assert result.protocol == "my-poll-timeline"  # results name it by its class's name
    assert result.status.value == "finished"
    assert result.exactly_once is not None and result.exactly_once.verified
