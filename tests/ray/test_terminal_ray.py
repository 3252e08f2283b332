"""What a user sees of ``commitlab run`` on a terminal, and what a driver killed with ``kill -9``
leaves behind.

A driver is started and killed with SIGKILL once its local Ray is up; then an interactive run (a
pseudo-terminal, no ``--quiet``) starts, which ends what the first driver's session left (Ray's
dashboard and runtime-env agents outlive their driver), prints no traceback, and keeps Ray's own
lines in ``OUT/logs/ray-and-spark.log``. Both drivers use a Ray temp directory of their own, so no
other Ray session on this machine is looked at.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 300
RUN = ["-m", "runtime", "run", "--source", "generator", "--writers", "1"]


@dataclass
class Rerun:
    first_session: str  # the killed driver's Ray session directory
    left_by_kill: list[int]  # its processes alive after the kill, before the rerun
    terminal: str  # everything the interactive rerun wrote to its terminal
    exit_code: int
    engines_log: Path
    work: Path  # the runs' tables and outputs


def _env(ray_tmp: str) -> dict[str, str]:
    # wide enough that a path the run prints stays on one line
    return {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": ray_tmp, "COLUMNS": "400"}


def _processes_naming(session_dir: str) -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any(session_dir in arg for arg in (p.info.get("cmdline") or []))
    ]


def _kill_a_driver_once_ray_is_up(work: Path, ray_tmp: str) -> str:
    driver = subprocess.Popen(
        [sys.executable, *RUN, "--records", "200000", "--checkpoints", "50", "--quiet"]
        + ["--out", str(work / "out-1"), "--table", str(work / "table-1")],
        cwd=ROOT,
        env=_env(ray_tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    marks: list[Path] = []
    while not marks and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.5)
        marks = list(Path(ray_tmp, "ray").glob(f"session_*_{driver.pid}/commitlab-driver.json"))
    assert marks, f"the first driver's local Ray did not start within {START_TIMEOUT_S} s"
    time.sleep(2)  # the raylet's agents start beside it
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)
    time.sleep(3)  # what dies with the driver has died
    return str(marks[0].parent)


def _interactive_run(work: Path, ray_tmp: str, run: list[str], ctrl_c_once_running: bool = False) -> tuple[str, int]:
    """``commitlab run`` on a pseudo-terminal: everything it printed there, and its exit code. With
    ``ctrl_c_once_running``, SIGINT goes to its process group (as Ctrl-C does) once its job runs."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, *run],
        cwd=ROOT,
        env=_env(ray_tmp),
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        if ctrl_c_once_running and b"checkpoint" in b"".join(chunks[-20:]):
            time.sleep(1)
            os.killpg(proc.pid, signal.SIGINT)
            ctrl_c_once_running = False
        if not select.select([primary], [], [], 1.0)[0]:
            continue
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the run closed its terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    return b"".join(chunks).decode("utf-8", "replace"), proc.wait(timeout=60)


@pytest.fixture(scope="module")
def rerun() -> Iterator[Rerun]:
    work = Path(tempfile.mkdtemp(prefix="term-"))
    ray_tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")  # short: Ray's socket paths live under it
    try:
        first = _kill_a_driver_once_ray_is_up(work, ray_tmp)
        left = _processes_naming(first)
        short = [*RUN, "--records", "200", "--checkpoints", "1", "--out", str(work / "out-2")]
        terminal, code = _interactive_run(work, ray_tmp, [*short, "--table", str(work / "table-2")])
        yield Rerun(first, left, terminal, code, work / "out-2" / "logs" / "ray-and-spark.log", work)
    finally:
        for pid in _processes_naming(ray_tmp):  # whatever a failed test left
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_the_next_run_ends_what_a_killed_driver_left(rerun: Rerun) -> None:
    assert rerun.exit_code == 0, rerun.terminal[-3000:]
    assert _processes_naming(rerun.first_session) == [], (
        f"left by the driver killed with kill -9: {rerun.left_by_kill}; still alive after the next run"
    )


def test_an_interactive_run_prints_no_traceback(rerun: Rerun) -> None:
    assert "verified" in rerun.terminal
    assert "Traceback" not in rerun.terminal, rerun.terminal[-3000:]
    assert "Exception ignored" not in rerun.terminal, rerun.terminal[-3000:]


def test_rays_own_lines_go_to_the_engines_log_not_the_terminal(rerun: Rerun) -> None:
    log = rerun.engines_log.read_text()
    assert "Started a local Ray instance" in log
    for line in ("Started a local Ray instance", "(raylet)", "gcs_client", "WARN"):
        assert line not in rerun.terminal, rerun.terminal[-3000:]


def test_ctrl_c_stops_a_run_with_its_record_and_no_traceback() -> None:
    ray_tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")
    work = Path(tempfile.mkdtemp(prefix="term-"))
    try:
        long = [*RUN, "--records", "200000", "--checkpoints", "50", "--out", str(work / "out")]
        terminal, code = _interactive_run(work, ray_tmp, [*long, "--table", str(work / "t")], ctrl_c_once_running=True)
    finally:
        for pid in _processes_naming(ray_tmp):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert code == 130, terminal[-3000:]
    assert "interrupted" in terminal
    assert "Traceback" not in terminal and "Exception ignored" not in terminal, terminal[-3000:]
    assert json.loads((work / "out" / "result.json").read_text())["status"] == "interrupted"
    shutil.rmtree(work, ignore_errors=True)


def test_verify_against_an_input_keeps_sparks_lines_off_the_terminal(rerun: Rerun) -> None:
    """verify --input starts Spark on a local Ray: Spark's WARN lines and Ray's workers' lines go to
    the log file it names, not the terminal."""
    data = rerun.work / "input.csv"
    data.write_text("key,partition,ts,payload\nk1,p1,1,a\nk2,p1,2,b\n")
    table = str(rerun.work / "table-2")
    ray_tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")
    try:
        verify = ["-m", "runtime", "verify", "--table", table, "--input", str(data)]
        terminal, code = _interactive_run(rerun.work, ray_tmp, verify)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert code in (0, 1), terminal[-3000:]  # a verdict, not a crash
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal)  # the console's colours
    named = re.search(r"goes to (\S+ray-and-spark\.log)", plain)
    assert named, terminal[-3000:]
    log = Path(named.group(1)).read_text()
    shutil.rmtree(Path(named.group(1)).parent, ignore_errors=True)
    assert "Started a local Ray instance" in log
    for line in ("Started a local Ray instance", "(raylet)", "gcs_client", "WARN", "Traceback"):
        assert line not in terminal, terminal[-3000:]
