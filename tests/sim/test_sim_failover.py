"""Crashes and global failover under the simulator: the outcomes tests/ray/test_faults_ray.py asserts
on Ray, on virtual time, on the simulated disk."""

from __future__ import annotations

import os

import pytest

from runtime.core.config import JobConfig
from runtime.core.fault_spec import DFS_LATENCY_WINDOW_S, FaultSpec
from runtime.protocols import PROTOCOLS
from runtime.sim import check_determinism, simulate


def _cfg(protocol: str = "message-bus", **kw) -> JobConfig:
    base = dict(protocol=protocol, source="generator", writers=2, checkpoints=4, records=2_000, bucket_flush_rows=200)
    base.update(kw)
    return JobConfig(**base)


def _sim(cfg: JobConfig, seed: int = 1) -> dict:
    return simulate(cfg, seed=seed, storage="memory", max_real_s=120.0)


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_recovers_from_a_task_crash(protocol):
    result = _sim(_cfg(protocol, faults=[FaultSpec("task.in_snapshot", 2, 1)]))
    assert len(result.failovers) == 1
    assert "writer-1" in result.failovers[0].error
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once


def test_a_coordinator_crash_before_the_commit_file_is_recommitted_from_task_state():
    result = _sim(_cfg(faults=[FaultSpec("coordinator.before_commit_file", 2)]))
    failover = result.failovers[0]
    # checkpoint 2 completed (its states were stored) before the coordinator died: restored from 2,
    # the tasks' bootstrap events recommit its instant
    assert failover.restored_checkpoint == 2
    assert 2 in [c["checkpoint"] for c in result.commits]
    assert result.exactly_once.verified


def test_restarts_are_bounded_and_the_failure_is_named():
    spec = FaultSpec("task.in_snapshot", -1, 0, times=5)  # crashes at every snapshot
    result = _sim(_cfg(faults=[spec], max_restarts=2))
    assert result.status == "failed"
    assert len(result.failovers) == 2
    assert "writer-0" in result.error
    assert result.exactly_once is None


def test_a_run_with_a_failover_is_deterministic():
    cfg = _cfg("coordination-rpc", faults=[FaultSpec("task.after_checkpoint_before_commit", 2, 0)])
    assert check_determinism(cfg, 7, storage="memory") is None
    assert len(_sim(cfg, 7).failovers) == 1


@pytest.mark.parametrize("protocol", ["operator-event", "message-bus", "timeline-server"])
def test_a_commit_that_fails_on_the_dfs_stays_inflight_and_is_recommitted(protocol):
    """Found by exploring the dfs-faults scenario: the coordinator's write of checkpoint 2's commit
    file fails after checkpoint 2 completed. It used to roll the instant back, and the sources,
    restored past checkpoint 2, never sent those rows again: rows lost. The instant now stays
    inflight and the restarted coordinator recommits it from the checkpoint."""
    result = _sim(_cfg(protocol, faults=[FaultSpec("dfs.transient_error", 2)]))
    assert [f.restored_checkpoint for f in result.failovers] == [2]
    assert "stays inflight" in result.failovers[0].error
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    if protocol == "message-bus":
        # PR #3915: the restarted driver emptied the bus and wrote message 0; barrier 3 reads
        # message 2 (prevCkp), waits the whole instant-wait timeout, then assumes a silent
        # cancel: checkpoint 3 times out and checkpoint 4 commits its rows
        assert result.figures.checkpoints.detail["3"]["status"] == "timed-out"  # keys are strings, as in result.json
        assert sorted(c["checkpoint"] for c in result.commits) == [1, 2, 4]
    else:
        assert sorted(c["checkpoint"] for c in result.commits) == [1, 2, 3, 4]


def test_a_slow_dfs_costs_the_coordinator_virtual_time_and_nothing_else():
    """dfs.latency in the simulator: each coordinator DFS operation in the window takes the
    fault's latency in virtual time (as the Ray host sleeps in the I/O thread); the run rides it out."""
    base = _sim(_cfg())
    slow = _sim(_cfg(faults=[FaultSpec("dfs.latency", 2, param=0.5)]))
    assert slow.failovers == [] and slow.exactly_once.verified
    # a commit (several coordinator DFS operations, each 0.5 s slower) lies inside the 5 s window
    assert slow.sim.virtual_s > base.sim.virtual_s + 1.0


def test_a_slow_dfs_window_closes_inside_a_long_commit_as_it_does_in_real_time():
    """A commit makes its DFS operations inside one inline call, in which virtual time stood
    still: every operation paid the latency, however long the window had been over (38 operations
    of 0.76 s, a 30 s commit, a timed-out checkpoint). Inside the call the role's clock now counts
    what it owes, so the 5 s window ends mid-commit, as it does for the Ray host's sleeps."""
    base = _sim(_cfg("coordination-rpc"))
    slow = _sim(_cfg("coordination-rpc", faults=[FaultSpec("dfs.latency", 2, param=1.0)]))
    assert slow.failovers == [] and slow.exactly_once.verified
    assert slow.sim.virtual_s < base.sim.virtual_s + DFS_LATENCY_WINDOW_S + 1.5


@pytest.mark.parametrize("storage", ["memory", "disk"])
def test_a_bus_deleted_between_restarts_is_deleted_by_the_simulator_too(storage, tmp_path):
    """As on Ray (tests/ray/test_faults_ray.py): once the task crash of the fault fired, the host
    deletes the message bus while the job is down; the new coordinator starts without it. The result
    names the fault and what the coordinator lived through, as the Ray host's does."""
    cfg = _cfg(faults=[FaultSpec("bus.deleted_between_restarts", 2, 0)])
    result = simulate(cfg, seed=1, storage=storage, workdir=str(tmp_path), max_real_s=120.0)
    assert [(f["point"], f["role"], f["checkpoint"], f["task"]) for f in result.faults_fired] == [
        ("bus.deleted_between_restarts", "writer-0", 2, 0)
    ]
    assert result.failovers[0].deleted == ".hoodie/.aux/message_bus"
    assert set(result.to_json()["coordinator"]) == {"resets", "deleted_by_fault", "protocol"}
    assert isinstance(result.rolled_back, list)
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once


def test_an_instant_a_crashed_snapshot_left_pending_is_rolled_back_at_the_next_instant_start(tmp_path):
    """BaseHoodieWriteClient.startCommit rolls failed writes back (EAGER) before a new instant:
    coordination-rpc's instant of checkpoint 3, whose snapshot crashed, gets a .rollback when the
    restarted tasks ask for the next instant, so cleaning sees no pending instant and runs."""
    cfg = _cfg(
        "coordination-rpc",
        checkpoints=6,
        records=6_000,
        faults=[FaultSpec("task.in_snapshot", 3, 0)],
        clean_retain_commits="2",
        archive_min_commits="3",
        archive_max_commits="6",
    )
    result = simulate(cfg, seed=0, storage="disk", workdir=str(tmp_path), max_real_s=120.0)
    assert len(result.failovers) == 1 and result.exactly_once.verified, result.exactly_once
    timeline = os.listdir(os.path.join(result.table, ".hoodie", "timeline"))
    rolled_back = {f.split(".")[0].split("_")[0] for f in timeline if f.endswith(".rollback")}
    assert rolled_back, sorted(timeline)
    assert [r["instant"] for r in result.rollbacks], result.rollbacks
    started = {f.split(".")[0] for f in timeline if f.endswith(".commit.requested")}
    pending = started - {f.split("_")[0] for f in timeline if f.endswith(".commit")} - rolled_back
    assert not pending, f"instants left pending: {sorted(pending)}"
    assert any(f.endswith(".clean") for f in timeline), "cleaning never ran past the pending instant"


def test_ctrl_c_inside_a_write_task_ends_the_simulation_instead_of_failing_the_task_over(monkeypatch):
    """SIGINT lands in whatever coroutine runs: in the simulator's one process, most often a write
    task's mailbox. It is the process's stop (check and explore then write their partial record),
    not a task failure that a failover would absorb while the search or the exploration goes on."""
    from runtime.writer.write_task import WriteTask

    original = WriteTask.process_batch
    pressed = []

    async def ctrl_c_once(self, records):
        if not pressed:
            pressed.append(self.env.role)
            raise KeyboardInterrupt
        await original(self, records)

    monkeypatch.setattr(WriteTask, "process_batch", ctrl_c_once)
    with pytest.raises(KeyboardInterrupt):
        _sim(_cfg())
    assert pressed
