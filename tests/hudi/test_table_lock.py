"""One writer per table (runtime/hudi/client/lock.py): a second run on a held table is refused naming the
holder; a lock whose heartbeat expired is taken over with a line that says so; the lock goes
however the run ends; the simulator and the command line refuse a held table before any work.

Intervals here are tenths of a second, in process; tests/ray/test_table_lock_ray.py runs two
``commitlab run`` processes on one table, and a kill -9."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import Dfs
from runtime.core.errors import UserError
from runtime.hudi.client import lock as table_lock
from runtime.hudi.client.lock import Heartbeat, Holder, TableLock, TableLocked, hold_table

FAST = Heartbeat(interval_s=0.1, tolerable_misses=2)  # expires 0.2 s after the last renewal
LIVE = Heartbeat(interval_s=0.2, tolerable_misses=10)  # renewed often, expires after 2 s: a loaded machine keeps it


def _lock_file(table: Path) -> Path:
    return table / ".hoodie" / ".aux" / "lock"


def _said(text: str) -> str:
    return " ".join(text.split())  # the console folds long lines


def test_a_second_run_is_refused_naming_the_holder(tmp_path):
    table = str(tmp_path / "t")
    with hold_table(table, LIVE, "commitlab run --table t") as first:
        with pytest.raises(TableLocked) as refused:
            TableLock(table, LIVE, "commitlab run --table t (second)").acquire()
        message = str(refused.value)
        assert isinstance(refused.value, UserError)  # exit 2 on the command line
        assert f"pid {os.getpid()}" in message and first.holder.host in message
        assert "'commitlab run --table t'" in message and "started 20" in message and "UTC" in message
        assert "One writer per table" in message and "another --table" in message
    assert not _lock_file(tmp_path / "t").exists()


def test_a_live_holder_keeps_the_table_beyond_the_expiry_by_renewing_it(tmp_path):
    table = str(tmp_path / "t")
    with hold_table(table, LIVE, "first") as first:
        time.sleep(LIVE.expiry_s * 1.5)
        with pytest.raises(TableLocked):
            TableLock(table, LIVE, "second").acquire()
        assert first.holder.renewals >= 2 and not first.lost.is_set()


def test_an_expired_heartbeat_is_taken_over_with_a_line_that_says_so(tmp_path):
    table = str(tmp_path / "t")
    dead = TableLock(table, FAST, "commitlab run (killed)").acquire()
    dead._stop.set()  # a kill -9: the heartbeat stops, the lock file stays
    dead._thread.join()
    time.sleep(FAST.expiry_s + 0.2)
    said: list[str] = []
    with hold_table(table, FAST, "second", on_take_over=said.append) as second:
        assert second.taken_over and second.took_over.token == dead.holder.token
        assert json.loads(_lock_file(tmp_path / "t").read_bytes())["token"] == second.holder.token
    assert len(said) == 1
    assert said[0].startswith("took the table over from pid") and "'commitlab run (killed)'" in said[0]
    assert "heartbeat expired" in said[0] and "rolled back" in said[0]


def test_the_refusal_says_when_the_holder_is_no_longer_running_here(tmp_path):
    table = tmp_path / "t"
    _lock_file(table).parent.mkdir(parents=True)
    killed = Holder("token", Holder.this_process("", 0).host, 2**22 + 7, "commitlab run (killed)", time.time(), 60.0)
    _lock_file(table).write_bytes(killed.to_bytes())  # a pid no process has: killed moments ago
    with pytest.raises(TableLocked, match=r"no longer running on this host: it was killed\); its lock .* expires 60 s"):
        TableLock(str(table), LIVE, "second").acquire()


def test_a_live_holder_is_judged_by_its_own_expiry_not_the_challengers(tmp_path):
    table = str(tmp_path / "t")
    with hold_table(table, Heartbeat(10.0, 2), "a run with a long heartbeat"):  # renews after 10 s
        time.sleep(FAST.expiry_s * 3)  # past the challenger's expiry, well within the holder's 20 s
        with pytest.raises(TableLocked, match="a run with a long heartbeat"):
            TableLock(table, FAST, "a run with a short heartbeat").acquire()


def test_the_lock_is_released_when_the_run_raises(tmp_path):
    table = str(tmp_path / "t")
    with pytest.raises(RuntimeError), hold_table(table, LIVE, "first"):
        raise RuntimeError("the job failed")
    assert not _lock_file(tmp_path / "t").exists()
    with hold_table(table, LIVE, "second") as second:  # at once, no expiry to wait for
        assert not second.taken_over


def test_a_run_whose_lock_was_taken_knows_it_lost_the_table(tmp_path):
    table = str(tmp_path / "t")
    with hold_table(table, LIVE, "first") as first:
        other = Holder.this_process("another run", LIVE.expiry_s)
        _lock_file(tmp_path / "t").write_bytes(other.to_bytes())
        for _ in range(50):
            if first.lost.wait(0.2):
                break
        assert first.lost.is_set() and "taken by another run" in first.lost_reason()
    # the release leaves the other run's lock alone
    assert json.loads(_lock_file(tmp_path / "t").read_bytes())["token"] == other.token


def test_on_an_object_store_the_later_write_wins_and_the_earlier_run_is_refused(tmp_path, monkeypatch):
    """No create-if-absent (S3): the lock is written, then read back after a settle delay; a run
    whose write was overwritten in that window is refused naming the one that wrote last."""
    (tmp_path / "t").mkdir()
    store = Dfs(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))  # not a LocalFileSystem: no link
    racer = Holder.this_process("the racing run", FAST.expiry_s)

    def racing_write(_s: float) -> None:  # the other run's write lands inside the window
        store.write_bytes("t/.hoodie/.aux/lock", racer.to_bytes())

    monkeypatch.setattr(table_lock.time, "sleep", racing_write)
    with pytest.raises(TableLocked) as refused:
        TableLock("t", FAST, "this run", dfs=store).acquire()
    assert "'the racing run'" in str(refused.value)
    assert json.loads(_lock_file(tmp_path / "t").read_bytes())["token"] == racer.token


def test_the_heartbeat_follows_the_time_scale_but_not_below_its_floor():
    assert Heartbeat.of(JobConfig()) == Heartbeat(5.0, 2)  # 60 s x 0.05 = 3 s: floored
    assert Heartbeat.of(JobConfig(time_scale=1.0)) == Heartbeat(60.0, 2)  # Hudi's defaults
    assert Heartbeat.of(JobConfig(time_scale=1.0)).expiry_s == 120.0
    assert Heartbeat.of(JobConfig(heartbeat_interval_s=1.5, heartbeat_tolerable_misses=3)).expiry_s == 4.5
    with pytest.raises(ConfigError, match="--heartbeat-interval 0.5: Hudi refuses a heartbeat below 1 s"):
        Heartbeat.of(JobConfig(heartbeat_interval_s=0.5))
    with pytest.raises(ConfigError, match="--heartbeat-tolerable-misses 0"):
        Heartbeat.of(JobConfig(heartbeat_tolerable_misses=0))


def test_commitlab_run_on_a_held_table_exits_2_within_seconds_before_ray(tmp_path, no_ray, capsys):
    from runtime.cli import main

    table = tmp_path / "t"
    with hold_table(str(table), LIVE, "commitlab run --table t"):
        t0 = time.monotonic()
        args = ["run", "--source", "generator", "--table", str(table), "--out", str(tmp_path / "out"), "--quiet"]
        assert main(args) == 2
        assert time.monotonic() - t0 < 5
    said = _said(capsys.readouterr().out)
    assert "table in use:" in said and f"pid {os.getpid()}" in said and "'commitlab run --table t'" in said


def test_simulate_refuses_a_table_a_live_run_holds(tmp_path, capsys):
    from runtime.cli import main
    from runtime.sim.host import simulate

    out = tmp_path / "sim"
    table = out / "table"
    with hold_table(str(table), LIVE, "commitlab run --table sim/table"):
        with pytest.raises(TableLocked):
            simulate(JobConfig(records=100, checkpoints=1), seed=0, workdir=str(out))
        # a table a previous simulation under OUT wrote is removed first: not while a run holds it
        (out / "result.json").write_text(json.dumps({"sim": {}}))
        assert main(["simulate", "--out", str(out), "--records", "100", "--checkpoints", "1", "--quiet"]) == 2
        assert _lock_file(table).exists()
    assert "table in use:" in _said(capsys.readouterr().out)


@pytest.mark.parametrize("ending", [KeyboardInterrupt, RuntimeError])
def test_commitlab_run_releases_the_table_however_the_run_ends(tmp_path, monkeypatch, ending):
    """Ctrl-C (a second SIGINT or SIGTERM raises KeyboardInterrupt: exit 130) or an exception:
    the table is free for the next run at once."""
    import actors.job
    from runtime.cli import main

    table = tmp_path / "t"
    held: list[bool] = []

    def run_job(job, out, *, table_lock, **_kwargs):
        held.append(_lock_file(table).exists() and not table_lock.lost.is_set())
        raise ending("the run ends here")

    monkeypatch.setattr(actors.job, "run_job", run_job)
    args = ["run", "--source", "generator", "--table", str(table), "--out", str(tmp_path / "out"), "--quiet"]
    if ending is KeyboardInterrupt:
        assert main(args) == 130
    else:
        with pytest.raises(RuntimeError):
            main(args)
    assert held == [True] and not _lock_file(table).exists()
    assert not (table / ".hoodie").exists()  # made for the lock alone: gone with it


def test_on_s3_a_second_run_is_refused_and_the_lock_goes_with_the_run(s3, monkeypatch):
    monkeypatch.setattr(table_lock, "OBJECT_STORE_SETTLE_S", 0.1)
    uri = s3.uri("lab", "lock/t")
    with hold_table(uri, LIVE, "commitlab run --table s3://lab/lock/t") as first:
        assert not first._atomic  # written, then read back: S3 has no create-if-absent
        with pytest.raises(TableLocked, match="s3://lab/lock/t"):
            TableLock(uri, LIVE, "second").acquire()
    with hold_table(uri, LIVE, "third") as third:  # released: free at once
        assert not third.taken_over
