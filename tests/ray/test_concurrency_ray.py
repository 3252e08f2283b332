"""One job under ``--concurrency-mode optimistic`` on Ray, a real ``commitlab run`` process: it holds
no run-wide lock, takes the transaction lock around each instant's creation and commit, heartbeats
each instant under ``.hoodie/.heartbeat`` and verifies exactly once with the official reader.

The generator source (no Spark); one run."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.ray.test_table_lock_ray import ROOT, SMALL, _env


def test_one_job_under_optimistic_on_ray_is_exactly_once_and_counts_its_lock_and_heartbeats(tmp_path):
    table, out = tmp_path / "table", tmp_path / "out"
    cmd = [sys.executable, "-m", "runtime", "run", "--table", str(table), "--out", str(out), *SMALL]
    cmd += ["--checkpoints", "4", "--concurrency-mode", "optimistic"]
    r = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "result.json").read_text())
    assert doc["status"] == "finished" and doc["exactly_once"]["verified"], doc["exactly_once"]
    figures = doc["coordinator"]["concurrency"]
    assert figures["options"]["hoodie.write.concurrency.mode"] == "OPTIMISTIC_CONCURRENCY_CONTROL"
    assert figures["conflicts"] == [] and figures["conflict_checks"] == 4 and figures["lock_acquisitions"] >= 8
    parts = doc["dfs_ops_by_component"]["coordinator"]
    assert parts["lock"]["create"] >= 8 and parts["heartbeat"]["write"] >= 4
    assert not (table / ".hoodie" / ".aux" / "lock").exists()  # every transaction released it
    assert len(list((table / ".hoodie" / ".heartbeat").iterdir())) <= 1  # the instant after the last commit
