"""``ray job submit`` against a two-node Ray cluster with a dashboard, as docs/CLUSTER.md deploys it.

Everything Ray runs in subprocesses (the nodes: ``tests/ray/ray_nodes.py``), and the job goes in
through the ``ray job submit`` CLI over the dashboard's HTTP address, shipping this checkout as the
job's ``--working-dir``. The test process opens no Ray session of its own.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ray.ray_nodes import RAY, LocalCluster, ray_env, two_node_cluster

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 240


@pytest.fixture
def local_cluster() -> Iterator[LocalCluster]:
    """The two-node cluster (``tests/ray/ray_nodes.py``), stopped after the test."""
    with two_node_cluster() as cluster:
        yield cluster


def test_ray_job_submit_runs_a_verified_job_whose_task_managers_span_both_nodes(local_cluster, tmp_path):
    out = tmp_path / "out"
    job = [
        "python",
        "-m",
        "runtime",
        "run",
        "--source",
        "generator",
        "--writers",
        "4",
        "--slots-per-task-manager",
        "2",
        "--placement",
        "spread",
        "--records",
        "4000",
        "--checkpoints",
        "3",
        "--job-timeout",
        "120",
        "--table",
        str(tmp_path / "table"),
        "--out",
        str(out),
        "--quiet",
    ]
    submit = [RAY, "job", "submit", "--address", local_cluster.dashboard, "--working-dir", str(ROOT)]
    submit += ["--submission-id", "commitlab-test", "--", *job]
    try:
        proc = subprocess.run(submit, cwd=ROOT, env=ray_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"`ray job submit` did not return within {JOB_TIMEOUT_S} s:\n{exc.stdout!r}\n{local_cluster.log_tail()}"
        )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"`ray job submit` exited {proc.returncode}:\n{log[-4000:]}"
    assert "Job 'commitlab-test' succeeded" in log, log[-4000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "finished" and result["exactly_once"]["verified"] is True, result.get("error")
    processes = result["placement"]["processes"]
    managers = {name: p for name, p in processes.items() if name.startswith("taskmanager-")}
    assert len(managers) == 2, sorted(processes)
    assert len({p["node_id"] for p in managers.values()}) == 2, f"SPREAD left a node without a task manager: {managers}"
