"""Hudi's concurrency control on the simulator's virtual time: the transaction lock (both
providers: exclusion, the bounded wait and its message, expiry), the heartbeat timers, the two
instant-time generators, and one job under ``optimistic`` and ``non-blocking`` verified exactly
once. The pieces without a clock are in tests/hudi/test_concurrency_control.py."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

import pytest

from runtime.core.config import JobConfig
from runtime.core.dfs import Dfs
from runtime.core.dfs_components import Component
from runtime.hudi.client.concurrency import ConcurrencyControl
from runtime.hudi.client.heartbeat import HeartbeatClient, heartbeat_path, is_expired, last_heartbeat_time
from runtime.hudi.client.lock import LOCK_PATH, Heartbeat, Holder
from runtime.hudi.client.transaction import (
    LOCKED_1X,
    UNLOCKED_0X,
    LockTimeout,
    TransactionManager,
    generate_instant_time,
)
from runtime.sim import simulate
from runtime.sim.loop import SimLoop
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.network import Delay, SimNetwork
from runtime.sim.recorder import TraceRecorder
from runtime.sim.sim_env import SimEnv

BASE = "/t"


def _run(main: Any) -> Any:
    loop = SimLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def _envs(*roles: str) -> tuple[list[SimEnv], Dfs]:
    loop = asyncio.get_running_loop()
    recorder = TraceRecorder(loop.time)
    net = SimNetwork(loop, seed=1, recorder=recorder, delay=Delay.uniform(0.0, 0.0))
    dfs = MemoryDfs(MemoryStore())
    dfs.mkdirs(Dfs.join(BASE, ".hoodie", ".aux"))
    return [SimEnv(r, dfs, net, seed=1, recorder=recorder) for r in roles], dfs


def _control(provider: str = "filesystem", **kw: Any) -> ConcurrencyControl:
    cfg = JobConfig(concurrency_mode="optimistic", lock_provider=provider, **kw)
    return ConcurrencyControl.of(cfg)


@pytest.mark.parametrize("provider", ["filesystem", "in-process"])
def test_the_transaction_lock_excludes_a_second_writer_until_released(provider):
    async def main():
        (a, b), dfs = _envs("job-a", "job-b")
        control = _control(provider)
        first = TransactionManager(a, dfs, BASE, control, "job A")
        second = TransactionManager(b, dfs, BASE, control, "job B")
        order = []

        async def writer(txn, name, hold):
            async with txn.transaction("", f"commit of {name}"):
                order.append((name, "in", round(a.now(), 3)))
                await a.sleep(hold)
                order.append((name, "out", round(a.now(), 3)))

        await asyncio.gather(writer(first, "A", 1.0), writer(second, "B", 0.0))
        return order, second.blocked_s

    order, blocked = _run(main)
    assert [o[:2] for o in order] == [("A", "in"), ("A", "out"), ("B", "in"), ("B", "out")]
    assert order[2][2] >= order[1][2] and blocked >= 1.0  # B waited for A's release


@pytest.mark.parametrize("provider", ["filesystem", "in-process"])
def test_a_lock_wait_is_bounded_and_says_what_it_waited_for(provider):
    async def main():
        (a, b), dfs = _envs("job-a", "job-b")
        control = _control(provider, lock_retries=2)
        holder = TransactionManager(a, dfs, BASE, control, "job A")
        await holder.lock("20260101000000001", "commit")  # never released
        start = b.now()
        with pytest.raises(LockTimeout) as timeout:
            await TransactionManager(b, dfs, BASE, control, "job B").lock("", "create an instant")
        return str(timeout.value), b.now() - start, control

    message, waited, control = _run(main)
    assert "3 attempts" in message and "to create an instant" in message and "job A" in message
    assert "--lock-wait" in message and "--lock-retries" in message
    # the filesystem provider looks once per attempt; the in-process one waits lock_wait each time
    per_attempt = control.lock_wait_s if provider == "in-process" else 0.0
    assert waited == pytest.approx(3 * per_attempt + 2 * control.retry_wait_s, abs=1e-6)


def test_an_expired_transaction_lock_file_is_taken_over():
    async def main():
        (a, b), dfs = _envs("job-a", "job-b")
        control = _control(lock_retries=0)
        dead = TransactionManager(a, dfs, BASE, control, "job A (killed)")
        await dead.lock("20260101000000001", "commit")
        await b.sleep(control.lock_expiry_s + 1.0)
        taker = TransactionManager(b, dfs, BASE, control, "job B")
        await taker.lock("", "create an instant")
        return Holder.from_bytes(dfs.read_bytes(Dfs.join(BASE, *LOCK_PATH)))

    holder = _run(main)
    assert holder is not None and holder.command == "job B"


def test_heartbeats_are_renewed_on_virtual_time_and_stop_deletes_them():
    beat = Heartbeat(interval_s=5.0, tolerable_misses=2)

    async def main():
        (env,), dfs = _envs("coordinator")
        client = HeartbeatClient(env, dfs, BASE, beat, "coordinator of t")
        await client.start("i1")
        await client.start("i2")
        await env.sleep(3 * beat.interval_s + 0.1)
        live = [is_expired(dfs, BASE, i, beat, env.wall_time()) for i in ("i1", "i2")]
        renewed = last_heartbeat_time(dfs, BASE, "i1")
        await client.stop("i1")
        gone = not dfs.exists(heartbeat_path(BASE, "i1"))
        client.close()  # the process ends: the file stays and expires
        await env.sleep(beat.expiry_s + beat.interval_s)
        return live, renewed, env.wall_time(), gone, is_expired(dfs, BASE, "i2", beat, env.wall_time())

    live, renewed, now, gone, expired_after_close = _run(main)
    assert live == [False, False]
    assert renewed > 0 and gone and expired_after_close


def test_the_0x_clock_gives_two_writers_one_instant_time_and_the_1x_generator_does_not():
    async def main():
        (a, b), dfs = _envs("job-a", "job-b")
        now = a.wall_time()
        unlocked = [await generate_instant_time(UNLOCKED_0X, None, now, None) for _ in (a, b)]
        control = _control()
        txns = [TransactionManager(env, dfs, BASE, control, env.role) for env in (a, b)]
        locked = await asyncio.gather(*(generate_instant_time(LOCKED_1X, t, 0.0, None) for t in txns))
        return unlocked, locked

    unlocked, locked = _run(main)
    assert unlocked[0] == unlocked[1]  # the collision HUDI-7507 removed
    assert locked[0] != locked[1]


def _one_job(mode: str, protocol: str, storage: str, workdir: str, **options: Any) -> Any:
    """One simulated job of 2 writers and 4 checkpoints under ``mode``."""
    base: dict[str, Any] = dict(writers=2, checkpoints=4, records=1200, source="generator")
    cfg = JobConfig(protocol=protocol, concurrency_mode=mode, **base, **options)
    return simulate(cfg, seed=5, storage=storage, workdir=workdir, max_real_s=120)


@pytest.mark.parametrize(
    ("mode", "table_type", "protocol", "storage"),
    [
        ("optimistic", "copy-on-write", "message-bus", "memory"),
        ("optimistic", "merge-on-read", "coordination-rpc", "disk"),
        ("non-blocking", "merge-on-read", "coordination-rpc", "disk"),
    ],
)
def test_one_job_under_a_multi_writer_mode_is_exactly_once(mode, table_type, protocol, storage):
    workdir = tempfile.mkdtemp(prefix="commitlab-occ-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    r = _one_job(mode, protocol, storage, workdir, table_type=table_type, compaction_delta_commits=2)
    assert r.status == "finished", r.error
    assert r.exactly_once is not None and r.exactly_once.verified, r.exactly_once
    assert len(r.commits) == 4 and r.rolled_back == []
    coordinator = r.figures.dfs_ops_by_component["coordinator"]
    # the lock taken and released around each instant's creation and commit, counted apart
    assert coordinator[Component.LOCK]["create"] >= 8 and coordinator[Component.LOCK]["delete"] >= 8
    assert coordinator[Component.HEARTBEAT]["delete"] >= 4  # each committed instant's heartbeat is gone
    figures = r.coordinator.concurrency
    assert figures["options"]["hoodie.clean.failed.writes.policy"] == "LAZY" and figures["conflicts"] == []
    assert figures["lock_acquisitions"] >= 8 and figures["conflict_checks"] == (4 if mode == "optimistic" else 0)
    if table_type == "merge-on-read":  # each compaction committed in a transaction of its own
        completed = r.compactions["completed"]
        assert completed and r.figures.dfs_ops_by_component["compaction-commit"][Component.LOCK]["create"] == len(
            completed
        )
    if storage == "disk":
        beats = os.path.join(workdir, "table", ".hoodie", ".heartbeat")
        assert len(os.listdir(beats)) <= 1  # at most the instant started after the last commit
        assert not os.path.exists(os.path.join(workdir, "table", ".hoodie", ".aux", "lock"))


def test_under_optimistic_a_recommit_by_a_restarted_coordinator_conflicts_and_the_job_fails():
    """Hudi's Flink coordinator records the last completed instant (``preTxn``) only when it starts
    an instant; the coordinator of a restarted job recommits the checkpoint's instant with none, so
    every completed instant is a candidate and one that wrote the same file groups conflicts. The
    job fails over again on each attempt (``initInstant`` on the executor: ``failJob``) until its
    restarts are spent. Single-writer recommits the same instant and finishes."""
    from runtime.core.fault_spec import parse_faults

    def run(mode: str) -> Any:
        workdir = tempfile.mkdtemp(prefix="commitlab-occ-")
        return _one_job(mode, "ckp-meta", "memory", workdir, faults=parse_faults("coordinator.before_commit_file@2"))

    single = run("single-writer")
    assert single.status == "finished" and single.exactly_once.verified and len(single.failovers) == 1
    assert single.coordinator.concurrency == {}  # single-writer records nothing new
    occ = run("optimistic")
    assert occ.status == "failed" and len(occ.failovers) == occ.config["max_restarts"]
    assert "Cannot resolve conflicts for overlapping writes" in occ.error
    assert len(occ.commits) == 1  # the first checkpoint's; the second's rows are in no commit


@pytest.mark.parametrize("generator", ["0.x", "1.x"])
def test_a_job_takes_its_instant_times_from_hudis_generator_when_asked(generator):
    workdir = tempfile.mkdtemp(prefix="commitlab-occ-")
    r = _one_job("optimistic", "message-bus", "memory", workdir, instant_times=generator)
    assert r.status == "finished" and r.exactly_once.verified, r.error
    # one writer's 0.x times are its clock's milliseconds, distinct in one process (the collision
    # needs two writers: test_the_0x_clock_gives_two_writers_one_instant_time_...)
    if generator == "1.x":  # the lock is held 200 ms after each reading: no two instants within it
        times = sorted(int(c["instant"]) for c in r.commits)
        assert all(b - a >= 200 for a, b in zip(times, times[1:], strict=False))
