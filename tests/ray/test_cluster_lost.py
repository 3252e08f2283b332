"""``commitlab run`` whose Ray cluster's head goes away mid-run ends with its record, not inside Ray.

Ray ends a driver that cannot reach its GCS for ``gcs_rpc_server_reconnect_timeout_s`` (60 s) from
C++, with no record written; the driver's watch (``actors/cluster_watch.py``) notices first and
ends the run as a stop does: status ``failed`` with an error naming the lost head, the committed
prefix checked with the official reader, a line on the terminal, exit 4.

Each run is a command of its own with its own local Ray (its processes known by their Ray temp
directory and as the driver's children), whose GCS is found among the driver's child processes:
killed (a local GCS that exited is lost at once), or stopped with SIGSTOP (alive but silent, as a
head cut off or hung: lost after ``--cluster-lost-after`` s of unanswered probes). The stopped
head is first stopped for a moment shorter than the grace and let go: the run goes on. Stopped
before the job fails over (the coordinator's commit fails at checkpoint 3: ``dfs.transient_error``),
the failover waits on the GCS in a call Ray answers only by ending the driver (a named actor's
lookup): the watch's thread makes the record (``actors/job.py``, ``JobRun._on_cluster_lost``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.ray.test_cli_stops import ROOT, _Console, end_what_is_left, left_running

CLUSTER_LOST = 4  # runtime.cli.exits.ExitCode.CLUSTER_LOST
LOST_AFTER_S = 4.0  # --cluster-lost-after for the stopped head
BRIEF_PAUSE_S = 3.0  # a head busy this long (longer than a probe's timeout) is not lost
LOST_IN_FAILOVER_S = 20.0  # the head silent before a failover: the failover begins well before it is lost
EXIT_WITHIN_S = 45.0  # well before Ray's own end of the driver (60 s after it noticed)


def _commits(table: Path) -> int:
    """Completed commits on the table's timeline (a completed instant's file ends in .commit; in
    .hoodie, or .hoodie/timeline from table version 8)."""
    hoodie = table / ".hoodie"
    return len([*hoodie.glob("*.commit"), *(hoodie / "timeline").glob("*.commit")])


def _wait(what: str, until, proc: subprocess.Popen[str], console: _Console, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if until():
            return
        tail = "".join(console.lines)[-3000:]
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {what}:\n{tail}"
        time.sleep(0.1)
    tail = "".join(console.lines)[-3000:]
    raise AssertionError(f"no {what} within {timeout:g} s:\n{tail}")


def _gcs_of(driver: int) -> psutil.Process:
    """The local Ray's GCS: a child of the driver (Ray starts it in a process group of its own)."""
    found = [p for p in psutil.Process(driver).children(recursive=True) if p.name() == "gcs_server"]
    assert len(found) == 1, f"the run's GCS among its processes: {found}"
    return found[0]


def lose_the_head(tmp_path: Path, how: str) -> tuple[int, float, str, Path, list[str]]:
    """Runs a job, ends or stops its GCS once it committed; the exit code, seconds from
    the head's loss to the command's end, the console, the table and what was left running."""
    ray_tmp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")  # short: Ray's socket paths live under it
    out, table = tmp_path / "out", tmp_path / "table"
    cmd = [sys.executable, "-m", "runtime", "run", "--source", "generator", "--records", "200000"]
    if how == "stopped-in-failover":  # the coordinator fails at checkpoint 3: the job fails over
        cmd += ["--faults", "dfs.transient_error@3", "--cluster-lost-after", f"{LOST_IN_FAILOVER_S:g}"]
    else:
        cmd += ["--cluster-lost-after", f"{LOST_AFTER_S:g}"]
    cmd += ["--checkpoints", "60"]
    cmd += ["--out", str(out), "--table", str(table)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": ray_tmp, "COLUMNS": "300"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    console = _Console(proc)
    try:
        needed = 1 if how == "stopped-in-failover" else 2  # the failover's fault comes at checkpoint 3
        _wait(f"{needed} commit(s)", lambda: _commits(table) >= needed, proc, console, 180)
        gcs = _gcs_of(proc.pid)
        if how == "stopped-in-failover":  # silent before checkpoint 3, whose failover then waits on the GCS
            lost_at = time.monotonic()
            gcs.suspend()
        elif how == "killed":
            lost_at = time.monotonic()
            gcs.kill()
        else:  # busy for a moment: not lost; then silent for good
            gcs.suspend()
            time.sleep(BRIEF_PAUSE_S)
            gcs.resume()
            before = _commits(table)
            _wait("a commit after the pause", lambda: _commits(table) > before, proc, console, 60)
            lost_at = time.monotonic()
            gcs.suspend()
        code = proc.wait(timeout=90)
        took = time.monotonic() - lost_at
        console.thread.join(10)
        return code, took, "".join(console.lines), table, left_running(ray_tmp, proc.pid)
    finally:
        end_what_is_left(proc, ray_tmp)


@pytest.mark.parametrize("how", ["killed", "stopped", "stopped-in-failover"])
def test_a_run_that_lost_its_head_writes_its_record_and_exits_4(how, tmp_path):
    code, took, console, table, left = lose_the_head(tmp_path, how)
    tail = f"{how}: exit {code} {took:.1f} s after the head was lost:\n{console[-3000:]}"
    print(f"the head's GCS {how}: exit {code} {took:.1f} s after")  # the figure docs/CLUSTER_NETWORK.md gives
    assert code == CLUSTER_LOST, tail
    assert took < EXIT_WITHIN_S, tail
    assert "Traceback" not in console and "Exception ignored" not in console, tail
    flat = " ".join(console.split())  # the console folds long lines
    assert "lost the Ray cluster: its head (GCS at" in flat, tail
    assert not left, f"{how}: left running: {left}"

    record = json.loads((tmp_path / "out" / "result.json").read_text())
    assert record["status"] == "failed", tail
    assert record["error"].startswith("lost the Ray cluster: its head (GCS at"), record["error"]
    assert f"commitlab verify --table {table}" in record["error"]
    lost = record["cluster_lost"]
    if how == "killed":
        assert "gcs_server process" in lost["seen"] and "exited" in lost["seen"], lost
    else:
        assert "did not answer" in lost["seen"] and lost["unreachable_s"] >= LOST_AFTER_S, lost
    if how == "stopped-in-failover":  # the driver's loop waited on the GCS in the failover: the watch ended the run
        assert "ending the run from the watch" in flat, tail
        assert len(record["failovers"]) == 1, record["failovers"]
    commits = {c["checkpoint"] for c in record["commits"]}
    completed = {int(k) for k, v in record["checkpoints"]["detail"].items() if v["status"] == "completed"}
    assert len(commits) >= 2 and commits <= completed, tail
    prefix = record["committed_prefix"]
    assert prefix["verified"] is True and not prefix.get("lost"), prefix  # no row of a committed instant lost

    check = subprocess.run(
        [sys.executable, "-m", "runtime", "verify", "--table", str(table)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
