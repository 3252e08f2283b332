"""One writer per table, with real ``commitlab run`` processes: a second run on a table another run
is writing is refused in seconds (exit 2, naming the holder) while the first verifies; a run
killed with SIGKILL leaves its lock and a pending instant, and the next run, once the heartbeat
expired, takes the table over, rolls the instant back and verifies.

Each run is its own process with its own local Ray (the generator source: no Spark)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--source", "generator", "--writers", "2", "--records", "2000", "--quiet"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env["PYTHONPATH"] = str(ROOT)
    env["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "0"
    env["COLUMNS"] = "400"  # one line per message
    return env


@pytest.fixture
def runs() -> Iterator[list[subprocess.Popen[str]]]:
    """The runs a test starts; each in its own session, so what Ray started under it goes too."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)


def _run(runs: list[subprocess.Popen[str]], table: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "runtime", "run", "--table", str(table), "--out", str(out), *SMALL, *extra]
    p = subprocess.Popen(
        cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    runs.append(p)
    return p


def _until(what: str, check: object, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout:.0f} s for {what}")


def _lock(table: Path) -> Path:
    return table / ".hoodie" / ".aux" / "lock"


def _instants(table: Path, suffix: str) -> set[str]:
    return {
        p.name.split(".")[0]
        for d in (table / ".hoodie", table / ".hoodie" / "timeline")
        if d.is_dir()
        for p in d.iterdir()
        if p.name.endswith(suffix)
    }


def test_a_second_run_on_the_same_table_exits_2_in_seconds_naming_the_first(tmp_path, runs):
    table = tmp_path / "table"
    first = _run(runs, table, tmp_path / "a", "--checkpoints", "4")
    _until("the first run's lock", _lock(table).exists, 60)
    t0 = time.monotonic()
    second = _run(runs, table, tmp_path / "b", "--checkpoints", "4")
    said, _ = second.communicate(timeout=120)
    assert second.returncode == 2, said
    assert time.monotonic() - t0 < 30, "refused, but not in seconds"
    flat = " ".join(said.split())
    assert "table in use:" in flat and f"pid {first.pid} on" in flat and "started 20" in flat, said
    assert "'python -m runtime run --table" in flat, said
    assert not (tmp_path / "b" / "result.json").exists()
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out
    assert not _lock(table).exists()  # released at the end


def test_a_killed_run_is_taken_over_once_its_heartbeat_expired_and_its_instant_rolled_back(tmp_path, runs):
    table = tmp_path / "table"
    slow = ["--checkpoints", "30", "--checkpoint-interval", "1", "--heartbeat-interval", "2"]
    first = _run(runs, table, tmp_path / "a", *slow)
    _until("the first run's first commit", lambda: bool(_instants(table, ".commit")), 300)
    os.kill(first.pid, signal.SIGKILL)  # the driver only: its lock and its pending instant stay
    first.wait(timeout=30)
    pending = _instants(table, ".inflight") - _instants(table, ".commit")
    assert pending and _lock(table).exists()
    time.sleep(2 * 2 + 1)  # its heartbeat expires: 2 intervals of 2 s
    second = _run(runs, table, tmp_path / "b", "--checkpoints", "30", "--checkpoint-interval", "0.2")
    said, _ = second.communicate(timeout=600)
    assert second.returncode == 0, said
    flat = " ".join(said.split())
    assert f"took the table over from pid {first.pid} on" in flat and "heartbeat expired" in flat, said
    result = json.loads((tmp_path / "b" / "result.json").read_text())
    rolled = {r["instant"]: r["reason"] for r in result["rollbacks"]}
    for instant in pending:
        assert rolled.get(instant, "").startswith("left pending by a run whose heartbeat expired"), rolled
    assert not pending & _instants(table, ".commit")
