"""``commitlab run`` stopped every way a user stops it, at random moments: its record, the verdict
on what it committed, its exit code, and nothing of it left running.

The ways: Ctrl-C (SIGINT to the whole process group: the driver and Spark's JVM; the local Ray's
processes run in process groups of their own), SIGINT to the driver alone, SIGTERM to the driver
(a container's stop), SIGTERM to the group (a service manager's stop of the whole unit), SIGHUP to
the group (the terminal closed), and a second Ctrl-C while the first is handled. The moments:
during the start-up (at random in its first seconds, and within 4 s after "starting Ray", while
``ray.init`` starts the local Ray and connects the driver), while the job runs (between
checkpoints or inside one), and during the final verification. Each run is a command of its own,
in a session of its own, with a Ray temp directory of its own, so its processes are known.

A stop while the command's modules load ends it with a line saying nothing ran (no record: no
table was opened). Six stops run by default; ``COMMITLAB_STOPS_PER_WAY=20`` runs 20 per way at
random moments (about 15 minutes a way on two busy cores). ``ray job stop`` of a submitted run:
``tests/ray/test_job_stop.py``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
STOPS_PER_WAY = int(os.environ.get("COMMITLAB_STOPS_PER_WAY", "0"))
RUNNING, START_UP, RAY_INIT, VERIFYING = "running", "start-up", "ray.init", "verification"
# how long after "starting Ray" a stop may come: ray.init takes a second or two, more on busy cores
RAY_INIT_WINDOW_S = 4.0
RUN_TIMEOUT_S = 240


@dataclass(frozen=True)
class Way:
    signal: signal.Signals
    group: bool  # to the whole process group, or the driver alone
    exit_code: int
    again_after_s: float | None = None  # a second signal, this long after the first


WAYS = {
    "ctrl-c": Way(signal.SIGINT, True, 130),
    "sigint-driver": Way(signal.SIGINT, False, 130),
    "sigterm-driver": Way(signal.SIGTERM, False, 143),
    "sigterm-group": Way(signal.SIGTERM, True, 143),
    "sighup-group": Way(signal.SIGHUP, True, 129),
    "second-ctrl-c": Way(signal.SIGINT, True, 130, again_after_s=1.5),
}


@dataclass
class Stopped:
    code: int
    console: str
    out: Path
    left: list[str] = field(default_factory=list)  # processes of the run alive after it ended
    ended_by_itself: bool = False  # it ended before the moment of the stop came: not a stop

    @property
    def record(self) -> dict | None:
        path = self.out / "result.json"
        return json.loads(path.read_text()) if path.exists() else None


class _Console:
    """The run's console lines as they come, on a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, proc: subprocess.Popen[str], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end and proc.poll() is None:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.05)
        return False


def _survivors(ray_tmp: str, session: int) -> list[str]:
    """Processes of the run: those naming its Ray temp directory, or in its session."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(p.info["cmdline"] or [])
            if ray_tmp in cmdline or os.getsid(p.pid) == session:
                out.append(f"{p.pid} {cmdline[:120]}")
        except (psutil.Error, OSError):
            continue
    return out


def stop_a_run(way: Way, moment: str, work: Path, rng: random.Random) -> Stopped:
    ray_tmp = tempfile.mkdtemp(prefix="rs-", dir="/tmp")  # short: Ray's socket paths live under it
    out = work / "out"
    size = ["--records", "20000", "--checkpoints", "3"] if moment == VERIFYING else ["--records", "200000"]
    cmd = [sys.executable, "-m", "runtime", "run", "--source", "generator", *size]
    cmd += ["--checkpoints", "60"] if moment != VERIFYING else []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": ray_tmp, "COLUMNS": "300"}
    proc = subprocess.Popen(
        [*cmd, "--out", str(out), "--table", str(work / "table")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_as_a_terminal_starts_it,
    )
    console = _Console(proc)
    try:
        if moment == START_UP:
            # its modules load, Ray starts, the stream is made; not the interpreter's own start: a
            # signal there is Python's, before any of the command's code runs (seconds on busy cores)
            assert _catching(proc, way.signal), "".join(console.lines)
            time.sleep(rng.uniform(0.0, 4.0))
        elif moment == RAY_INIT:  # while ray.init starts the local Ray and connects the driver
            if not console.wait_for("starting Ray", proc, 120):
                return _ended_by_itself(proc, console, out)
            time.sleep(rng.uniform(0.0, RAY_INIT_WINDOW_S))
        elif moment == RUNNING:
            if not console.wait_for("running 60 checkpoints", proc, 120):
                return _ended_by_itself(proc, console, out)
            time.sleep(rng.uniform(0.0, 2.5))
        else:
            if not console.wait_for("verifying the table", proc, 120):
                return _ended_by_itself(proc, console, out)
        _send(proc, way)
        if way.again_after_s is not None:
            time.sleep(way.again_after_s)
            _send(proc, way)
        code = proc.wait(timeout=RUN_TIMEOUT_S)
        console.thread.join(10)
        return Stopped(code, "".join(console.lines), out, left_running(ray_tmp, proc.pid))
    finally:
        end_what_is_left(proc, ray_tmp)


def left_running(ray_tmp: str, session: int) -> list[str]:
    """The run's processes still running once what it ends on its way out had seconds to go."""
    left: list[str] = []
    for _ in range(20):
        left = _survivors(ray_tmp, session)
        if not left:
            break
        time.sleep(0.5)
    return left


def end_what_is_left(proc: subprocess.Popen[str], ray_tmp: str) -> None:
    """Whatever a run (or a failed test) left: its session's processes, its Ray's, its temp directory."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    for line in _survivors(ray_tmp, proc.pid):
        try:
            psutil.Process(int(line.split()[0])).kill()
        except psutil.Error:
            pass
    shutil.rmtree(ray_tmp, ignore_errors=True)


def _as_a_terminal_starts_it() -> None:
    """The run's signals as a shell in a terminal leaves them, whatever this test runs under: a
    test session started by ``nohup`` or in a script's background ignores SIGHUP or SIGINT, which
    its children would inherit (and the command then keeps ignoring: tests/test_cli_signals.py)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _ended_by_itself(proc: subprocess.Popen[str], console: _Console, out: Path) -> Stopped:
    """The run ended (or hung) before the moment came: no stop was sent; the caller reports it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    console.thread.join(10)
    return Stopped(proc.wait(timeout=30), "".join(console.lines), out, ended_by_itself=True)


def _catching(proc: subprocess.Popen[str], sig: signal.Signals, timeout: float = 60.0) -> bool:
    """Waits until the command catches ``sig`` (its first line, ``runtime.cli``, set its handler):
    the process's caught-signals mask in /proc."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return False
        caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
        if caught >> (int(sig) - 1) & 1:
            return True
        time.sleep(0.01)
    return False


def _send(proc: subprocess.Popen[str], way: Way) -> None:
    try:
        if way.group:
            os.killpg(proc.pid, way.signal)
        else:
            proc.send_signal(way.signal)
    except ProcessLookupError:
        pass  # it had ended


def check(stopped: Stopped, way: Way, what: str, moment: str = RUNNING) -> None:
    """What holds after any stop: a record (or, after a second signal, a line saying there is
    none), the committed prefix verified, the exit code of the signal, nothing left running. A
    stop in the start-up or in ``ray.init`` is never lost: the run cannot have finished by then."""
    tail = f"{what}:\n{stopped.console[-3000:]}"
    assert not stopped.ended_by_itself, f"{what}: the run ended before the stop (exit {stopped.code}): {tail}"
    assert "Traceback" not in stopped.console and "Exception ignored" not in stopped.console, tail
    assert not stopped.left, f"{what}: left running: {stopped.left}"
    record = stopped.record
    # while its modules loaded, or after and before the job's handlers (the options, the table's check)
    if "stopped before the command started" in stopped.console or "stopped before the job started" in stopped.console:
        assert record is None and stopped.code == way.exit_code, tail
        return
    if way.again_after_s is not None and "stopped at once" in stopped.console:
        written = "result.json was not written" not in stopped.console
        assert written == (record is not None), tail
        assert stopped.code == way.exit_code, tail
        if record is None:
            return
    assert record is not None, tail
    commits = {c["checkpoint"] for c in record["commits"]}
    completed = {int(k) for k, v in record["checkpoints"]["detail"].items() if v["status"] == "completed"}
    assert commits <= completed, f"{what}: commits of checkpoints the record does not say completed: {tail}"
    if record["status"] == "finished":  # the signal came once the job had finished
        lost = f"{what}: the stop was lost, the run went on and finished; its first lines:\n{stopped.console[:1200]}"
        assert moment not in (START_UP, RAY_INIT), lost
        assert (record.get("exactly_once") or {}).get("verified"), tail
        assert stopped.code in (0, way.exit_code), tail
        return
    assert record["status"] == "interrupted", tail
    assert stopped.code == way.exit_code, tail
    prefix = record["committed_prefix"]
    assert prefix["verified"] is True or "a second signal" in prefix["prefix"], tail


# the handful the suite runs (about a minute and a half on two idle cores): Ctrl-C in the start-up
# and while running, SIGTERM to the driver and to the group while ray.init connects (Ray's own
# SIGTERM handlers, kept out) and while running, SIGHUP to the group; a second signal's handling is
# tested without Ray (tests/test_cli_signals.py) and on Ray by COMMITLAB_STOPS_PER_WAY
HANDFUL = [
    ("ctrl-c", START_UP),
    ("ctrl-c", RUNNING),
    ("sigterm-driver", RAY_INIT),
    ("sigterm-group", RAY_INIT),
    ("sigterm-driver", RUNNING),
    ("sighup-group", RUNNING),
]


@pytest.mark.parametrize(("way", "moment"), HANDFUL, ids=[f"{w}-{m}" for w, m in HANDFUL])
def test_a_stopped_run_leaves_its_record_a_checked_prefix_and_no_process(way, moment, tmp_path):
    stopped = stop_a_run(WAYS[way], moment, tmp_path, random.Random(f"{way}-{moment}"))
    check(stopped, WAYS[way], f"{way} during the {moment}", moment)


@pytest.mark.skipif(not STOPS_PER_WAY, reason="set COMMITLAB_STOPS_PER_WAY=N for N stops per way")
@pytest.mark.timeout(STOPS_PER_WAY * (RUN_TIMEOUT_S + 120) + 60)  # each stop is bounded; the loop is not 300 s
@pytest.mark.parametrize("way", sorted(WAYS))
def test_many_stops_at_random_moments(way, tmp_path):
    rng = random.Random(f"{way}-{os.environ.get('COMMITLAB_STOPS_SEED', '0')}")
    failures, counts, ended = [], {}, []
    for n in range(STOPS_PER_WAY):
        moment = rng.choice([START_UP, RAY_INIT, RUNNING, RUNNING, VERIFYING])
        work = tmp_path / f"stop-{n}"
        stopped = stop_a_run(WAYS[way], moment, work, rng)
        record = stopped.record
        outcome = f"{moment}: exit {stopped.code}, {record['status'] if record else 'no record'}"
        if stopped.ended_by_itself:  # a run that failed on its own (a loaded machine): reported, no stop
            outcome = f"{moment}: ended by itself before the stop, exit {stopped.code}"
            ended.append(f"{way} #{n}: {stopped.console[-1500:]}")
        counts[outcome] = counts.get(outcome, 0) + 1
        if stopped.ended_by_itself:
            continue
        try:
            check(stopped, WAYS[way], f"{way} #{n} during the {moment}", moment)
        except AssertionError as exc:
            failures.append(str(exc)[:1500])
        shutil.rmtree(work, ignore_errors=True)
    print(f"{way}: {STOPS_PER_WAY} stops: {json.dumps(counts, sort_keys=True)}")
    print("\n".join(f"ended by itself: {e}" for e in ended))
    assert not failures, f"{len(failures)} of {STOPS_PER_WAY} stops failed:\n" + "\n\n".join(failures)
