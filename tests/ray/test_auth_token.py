"""Token authentication (Ray 2.52+, ``RAY_AUTH_MODE=token``) on a two-node cluster, as
docs/CLUSTER.md starts it: both nodes started with the token, a job submitted with it verifies,
and clients without it are refused by the job API (HTTP 401, a wrong token 403), by
``ray job submit`` and by the GCS (a driver's ``ray.init``).

The token is the test's own (``RAY_AUTH_TOKEN_PATH``, a file of its temp dir), never the user's
``~/.ray/auth_token``; the refused clients run with an empty ``HOME`` so that file cannot lend them one.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from tests.ray.ray_nodes import RAY, LocalCluster, ray_env, two_node_cluster

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 240
REFUSED_DRIVER_TIMEOUT_S = 120
AUTH_SINCE = (2, 52)  # Ray 2.52.0 added token authentication

if tuple(int(p) for p in ray.__version__.split(".")[:2]) < AUTH_SINCE:
    pytest.skip(f"Ray {ray.__version__} has no token authentication (added in 2.52.0)", allow_module_level=True)


@pytest.fixture
def token_cluster(tmp_path) -> Iterator[tuple[LocalCluster, str]]:
    token = secrets.token_hex(32)
    path = tmp_path / "ray-token"
    path.write_text(token)
    path.chmod(0o600)
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}
    with two_node_cluster(env, {"Authorization": f"Bearer {token}"}) as cluster:
        yield cluster, token


def _without_token(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "no-token-home"
    home.mkdir(exist_ok=True)
    return ray_env({"HOME": str(home)})  # ray_env drops every RAY_AUTH* variable


def _status(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_token_cluster_runs_a_job_with_the_token_and_refuses_clients_without_it(token_cluster, tmp_path):
    cluster, token = token_cluster
    out = tmp_path / "out"
    job = ["python", "-m", "runtime", "run", "--source", "generator", "--writers", "2", "--records", "2000"]
    job += ["--checkpoints", "2", "--job-timeout", "120", "--table", str(tmp_path / "table"), "--out", str(out)]
    submit = [RAY, "job", "submit", "--address", cluster.dashboard, "--working-dir", str(ROOT)]
    proc = subprocess.run(
        [*submit, "--submission-id", "with-token", "--", *job, "--quiet"],
        cwd=ROOT,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Job 'with-token' succeeded" in log, f"{log[-4000:]}\n{cluster.log_tail()}"
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "finished" and result["exactly_once"]["verified"] is True, result.get("error")

    jobs = f"{cluster.dashboard}/api/jobs/"
    assert _status(jobs, {"Authorization": f"Bearer {token}"}) == 200
    assert _status(jobs, {}) == 401  # no token
    assert _status(jobs, {"Authorization": "Bearer " + secrets.token_hex(32)}) == 403  # a wrong one

    no_token = _without_token(tmp_path)
    refused = subprocess.run(
        [*submit, "--submission-id", "no-token", "--", "python", "-c", "print('ran')"],
        cwd=ROOT,
        env=no_token,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Authentication required" in said, said[-3000:]
    assert "ran" not in refused.stdout

    # a driver: the GCS answers every call without the token "Unauthenticated" until ray.init gives up
    driver = "import ray, sys; ray.init(address=sys.argv[1]); print('connected')"
    refused = subprocess.run(
        [sys.executable, "-c", driver, cluster.gcs],
        env=no_token,
        capture_output=True,
        text=True,
        timeout=REFUSED_DRIVER_TIMEOUT_S,
    )
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "connected" not in refused.stdout, said[-3000:]
    assert "InvalidAuthToken" in said or "Unauthenticated" in said, said[-3000:]
