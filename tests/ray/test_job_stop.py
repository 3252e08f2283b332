"""``ray job stop`` of a submitted ``commitlab run``: its record, the verdict on what it committed,
and no driver left.

Ray's job supervisor (``ray/dashboard/modules/job/job_supervisor.py``, Ray 2.52.1) stops a job by
sending SIGTERM (``RAY_JOB_STOP_SIGNAL``) to the entrypoint and every process under it, then
SIGKILL to those still alive after ``RAY_JOB_STOP_WAIT_TIME_S`` (3 s by default), read in the
supervisor actor's environment: the job's runtime environment sets it for that job
(``--runtime-env-json '{"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "30"}}'``), as docs/COMMANDS.md
says. At 30 s the run ends by itself with its record, the committed prefix verified; at Ray's 3 s
it says so as it starts, and its record is written before the check (the check may be cut short
by the SIGKILL: the record then says it was not checked). The job runs on a two-node local
cluster (``tests/ray/ray_nodes.py``) and is stopped with the ``ray job stop`` command at a random
moment: while it starts, while it runs, while it verifies. One stop a wait runs by default;
``COMMITLAB_STOPS_PER_WAY=20`` runs 20 at random moments at ``COMMITLAB_JOB_STOP_GRACE_S`` (30
unless set; 3 is Ray's default).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from test_cli_stops import RUNNING, START_UP, STOPS_PER_WAY, VERIFYING
from test_job_submit import ROOT, local_cluster  # noqa: F401 (a fixture)

from actors.submitted_job import CHECKED_STOP_WAIT_S
from tests.ray.ray_nodes import RAY, LocalCluster, ray_env

# RAY_JOB_STOP_WAIT_TIME_S for the job: at 30 s every stop measured here left its record with the
# prefix checked; COMMITLAB_JOB_STOP_GRACE_S=3 is Ray's default
GRACE_S = int(os.environ.get("COMMITLAB_JOB_STOP_GRACE_S", "30"))
RAY_DEFAULT_S = 3
WAIT_S = 180  # for the job to reach a moment, and to end once stopped
ENDED = ("STOPPED", "SUCCEEDED", "FAILED")


@dataclass
class StoppedJob:
    status: str  # Ray's status of the job once it ended
    log: str  # the driver's output, as `ray job logs` shows it
    out: Path
    stop_s: float  # how long `ray job stop` took
    left: list[str] = field(default_factory=list)  # the job's driver processes alive after it ended
    grace_s: int = GRACE_S  # RAY_JOB_STOP_WAIT_TIME_S it was submitted with

    @property
    def record(self) -> dict | None:
        path = self.out / "result.json"
        return json.loads(path.read_text()) if path.exists() else None


def _api(cluster: LocalCluster, path: str) -> dict:
    with urllib.request.urlopen(f"{cluster.dashboard}/api/jobs/{path}", timeout=10) as r:
        return json.loads(r.read())


def _wait(what: str, check: object, cluster: LocalCluster, sid: str) -> None:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.25)
    pytest.fail(f"gave up after {WAIT_S} s waiting for {what}:\n{_api(cluster, sid + '/logs')['logs'][-3000:]}")


def _drivers(out: Path) -> list[str]:
    """The job's entrypoint processes (they name its --out on their command line)."""
    alive = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if str(out) in cmdline:
            alive.append(f"{p.pid} {cmdline[:120]}")
    return alive


def _submit(submit: list[str], attempts: int = 3) -> None:
    """``ray job submit``, again after a few seconds when it fails: on a busy machine the head's job
    agent can refuse a submission made right after the cluster came up (a fixture's race, not the
    run's); the last failure's output is the test's."""
    for attempt in range(1, attempts + 1):
        proc = subprocess.run(submit, cwd=ROOT, env=ray_env(), capture_output=True, text=True, timeout=WAIT_S)
        if proc.returncode == 0:
            return
        if attempt == attempts:
            output = (proc.stdout + proc.stderr)[-3000:]
            pytest.fail(f"`ray job submit` exited {proc.returncode} {attempts} times:\n{output}")
        time.sleep(5)


def stop_a_job(
    cluster: LocalCluster, work: Path, moment: str, rng: random.Random, grace_s: int = GRACE_S
) -> StoppedJob:
    sid = f"commitlab-stop-{uuid.uuid4().hex[:8]}"
    out = work / "out"
    size = ["--records", "20000", "--checkpoints", "3"] if moment == VERIFYING else ["--records", "200000"]
    size += ["--checkpoints", "60"] if moment != VERIFYING else []
    job = ["python", "-m", "runtime", "run", "--source", "generator", *size]
    job += ["--out", str(out), "--table", str(work / "table")]
    runtime_env = {"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": str(grace_s)}}
    submit = [RAY, "job", "submit", "--no-wait", "--address", cluster.dashboard, "--working-dir", str(ROOT)]
    submit += ["--submission-id", sid, "--runtime-env-json", json.dumps(runtime_env), "--", *job]
    _submit(submit)

    def status() -> str:
        return str(_api(cluster, sid)["status"])

    def logged(text: str) -> object:
        return lambda: text in _api(cluster, sid + "/logs")["logs"] or status() in ENDED

    if moment == START_UP:
        _wait("the job to run", lambda: status() != "PENDING", cluster, sid)
        time.sleep(rng.uniform(0.0, 5.0))
    elif moment == RUNNING:
        _wait("its checkpoints", logged("running 60 checkpoints"), cluster, sid)
        time.sleep(rng.uniform(0.0, 2.5))
    else:
        _wait("its verification", logged("verifying the table"), cluster, sid)
    t0 = time.monotonic()
    stop = [RAY, "job", "stop", "--address", cluster.dashboard, sid]
    subprocess.run(stop, cwd=ROOT, env=ray_env(), capture_output=True, text=True, timeout=grace_s + WAIT_S)
    stop_s = time.monotonic() - t0
    _wait("the job to end", lambda: status() in ENDED, cluster, sid)
    time.sleep(1.5)  # the supervisor's SIGKILL comes before it says STOPPED; its log is flushed after
    left: list[str] = []
    for _ in range(20):
        left = _drivers(out)
        if not left:
            break
        time.sleep(0.5)
    return StoppedJob(status(), _api(cluster, sid + "/logs")["logs"], out, stop_s, left, grace_s)


def check(stopped: StoppedJob, what: str) -> None:
    """The record is written, what the run committed verified (or, when Ray's SIGKILL came
    during the check at a wait shorter than 30 s, said not checked), no driver process left. At
    30 s the driver ends by itself, its own last line printed; below, it said so as it started."""
    tail = f"{what} (ray job stop took {stopped.stop_s:.1f} s, status {stopped.status}):\n{stopped.log[-3000:]}"
    assert "Traceback" not in stopped.log, tail
    assert not stopped.left, f"{what}: left running: {stopped.left}"
    short = stopped.grace_s < CHECKED_STOP_WAIT_S
    assert (f"then SIGKILL {stopped.grace_s} s later (RAY_JOB_STOP_WAIT_TIME_S)" in stopped.log) == short, tail
    record = stopped.record
    assert record is not None, tail
    if record["status"] == "finished":  # the job had finished when the stop came
        assert record["exactly_once"] is None or record["exactly_once"]["verified"] is True, tail
        assert record["exactly_once"] is not None or short, tail  # its check cut short by the SIGKILL
        return
    assert stopped.status == "STOPPED", tail
    assert "SIGTERM: stopping the job and writing its record" in stopped.log, tail
    assert record["status"] == "interrupted", tail
    prefix = record["committed_prefix"]
    if short and prefix["verified"] is None:  # Ray's SIGKILL came during the check
        assert "ray job stop's SIGKILL" in prefix["prefix"] and "commitlab verify --result" in prefix["prefix"], tail
        return
    assert prefix["verified"] is True, tail
    if not short:
        assert "result: " in stopped.log[-2000:], tail  # the driver's last line: it ended by itself


@pytest.mark.timeout(2 * (3 * WAIT_S + GRACE_S) + 300)  # the cluster's start (tried twice) and two stopped jobs
def test_ray_job_stop_leaves_the_record_and_a_checked_prefix(local_cluster, tmp_path):  # noqa: F811
    for grace_s in (CHECKED_STOP_WAIT_S, RAY_DEFAULT_S):
        rng = random.Random(f"ray-job-stop-{grace_s}")
        stopped = stop_a_job(local_cluster, tmp_path / str(grace_s), RUNNING, rng, grace_s)
        check(stopped, f"ray job stop while running, RAY_JOB_STOP_WAIT_TIME_S={grace_s}")


@pytest.mark.skipif(not STOPS_PER_WAY, reason="set COMMITLAB_STOPS_PER_WAY=N for N stops")
@pytest.mark.timeout(STOPS_PER_WAY * (3 * WAIT_S + GRACE_S) + 300)  # each stop is bounded; the loop is not 300 s
def test_many_ray_job_stops_at_random_moments(local_cluster, tmp_path):  # noqa: F811
    rng = random.Random(f"ray-job-stop-{os.environ.get('COMMITLAB_STOPS_SEED', '0')}")
    failures, counts, took = [], {}, []
    for n in range(STOPS_PER_WAY):
        moment = rng.choice([START_UP, RUNNING, RUNNING, VERIFYING])
        stopped = stop_a_job(local_cluster, tmp_path / f"stop-{n}", moment, rng)
        record = stopped.record
        outcome = f"{moment}: {stopped.status}, {_said(record)}"
        counts[outcome] = counts.get(outcome, 0) + 1
        took.append(round(stopped.stop_s, 1))
        try:
            check(stopped, f"ray job stop #{n} during the {moment}")
        except AssertionError as exc:
            failures.append(str(exc)[:1500])
    counted = json.dumps(counts, sort_keys=True)
    print(f"ray job stop, RAY_JOB_STOP_WAIT_TIME_S={GRACE_S}: {STOPS_PER_WAY} stops: {counted}; it took {took} s")
    assert not failures, f"{len(failures)} of {STOPS_PER_WAY} stops failed:\n" + "\n\n".join(failures)


def _said(record: dict | None) -> str:
    """A record in a few words, for the counts: its status and its verdict."""
    if record is None:
        return "no record"
    verdict = record.get("exactly_once") if record["status"] == "finished" else record.get("committed_prefix")
    checked = {True: "verified", False: "VIOLATED", None: "not checked"}[(verdict or {}).get("verified")]
    return f"{record['status']}, {checked}"
