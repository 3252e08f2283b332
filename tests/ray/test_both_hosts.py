"""One job topology, two hosts: the same job with the same fault on Ray and in the simulator gives
the same result record, field by field, except what legitimately differs between the hosts."""

from __future__ import annotations

from typing import Any

from actors.job import run_job
from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.sim import simulate

# Fields that differ between hosts by nature, and why:
HOST_ONLY = {
    # Ray: where each actor ran (nodes, pids, memory) and what an S3 endpoint served
    "placement",
    "dfs_endpoint",
    "timeline",
    "stacks_at_timeout",
    "trace_file",
    # simulator: its seed, clocks, trace and the loop's own counters
    "host",
    "storage",
    "seed",
    "virtual_s",
    "wall_s",
    "verify_s",
    "sim",
    "trace_events",
    "trace_sha256",
    "divergence",
}
EXCLUDED = {
    "table": "a path: each host writes its own table",
    "timing": "times: wall-clock seconds on Ray, virtual seconds in the simulator",
    "rows_per_s": "a time",
    "writer_blocked_s": "times",
    "commit_to_unblock_s": "times",
    "commit_to_unblock_samples": "times",
    "stalls": "the watchdog's view at a moment of time",
    # the commit protocol polls and retries by time (a task polls the bus until its instant
    # appears): how many DFS operations and messages that takes depends on how time passes
    "dfs_ops": "counts that depend on how long polls wait",
    "dfs_ops_per_checkpoint": "counts that depend on how long polls wait",
    "dfs_ops_by_component": "counts that depend on how long polls wait",
    "dfs_per_checkpoint_by_component": "counts that depend on how long polls wait",
    "rpcs": "counts that depend on how long polls wait",
    "mails": "counts that depend on how long polls wait",
    "counters": "byte and poll counts",
}


def _cfg(**kw: Any) -> JobConfig:
    base = dict(
        source="generator",
        protocol="message-bus",
        writers=2,
        checkpoints=4,
        records=2_000,
        bucket_flush_rows=200,
        checkpoint_timeout_s=4.0,
        faults=[FaultSpec("task.in_snapshot", 2, 1)],  # writer-1 crashes in checkpoint 2's snapshot
    )
    base.update(kw)
    return JobConfig(**base)


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """The record without host-only and excluded fields; inside fields, what names a time, an
    instant (a timestamp), a pid or a host's own wording of the same failure is dropped."""
    out = {k: v for k, v in result.items() if k not in HOST_ONLY and k not in EXCLUDED}
    out["commits"] = [(c["checkpoint"], c["rows"]) for c in result["commits"]]  # instants are timestamps
    out["rolled_back"] = len(result["rolled_back"])  # instants
    # why: an attempt's failure, which each host words its own way (a dead actor, a crashed env)
    out["rollbacks"] = [r["reason"].split(",")[0] for r in result["rollbacks"]]
    out["faults_fired"] = [{k: v for k, v in f.items() if k != "at"} for f in result["faults_fired"]]
    # the error of a failover: how the host saw the crash (a dead actor, a crashed env); both name the task
    out["failovers"] = [
        {k: v for k, v in f.items() if k not in ("at", "at_virtual_s", "error", "down_s")} for f in result["failovers"]
    ]
    detail = result["checkpoints"]["detail"]
    out["checkpoints"] = {
        **{k: v for k, v in result["checkpoints"].items() if k != "detail"},
        "detail": {k: c["status"] for k, c in detail.items()},  # a checkpoint's times are times
    }
    out["config"] = {k: v for k, v in result["config"].items() if k != "table"}  # each host's own path
    # the files written are the same; their bytes are not (a compressed file holds the instants,
    # which are timestamps) nor are the input bytes (counted as sources emit, a crashed
    # process's count lost with it on Ray, kept in the simulator)
    out["data_written"] = {
        k: v for k, v in result["data_written"].items() if "bytes" not in k and k != "write_amplification"
    }
    eo = result["exactly_once"]
    out["exactly_once"] = {k: eo.get(k) for k in ("verified", "expected", "actual", "lost", "duplicated")}
    return out


def test_one_job_gives_the_same_record_on_ray_and_in_the_simulator(ray_session, tmp_path):
    on_ray = run_job(_cfg(table=str(tmp_path / "ray" / "table")), None).to_json()  # the result.json each host writes
    simulated = simulate(_cfg(), seed=1, workdir=str(tmp_path / "sim")).to_json()
    assert on_ray["status"] == simulated["status"] == "finished", (on_ray["error"], simulated["error"])
    # the same fields on both hosts, apart from what only one host can report
    assert set(on_ray) - HOST_ONLY == set(simulated) - HOST_ONLY
    assert [f["point"] for f in simulated["faults_fired"]] == ["task.in_snapshot"]
    assert all("writer-1" in f["error"] for f in on_ray["failovers"] + simulated["failovers"])
    ray_view, sim_view = _comparable(on_ray), _comparable(simulated)
    assert set(ray_view) == set(sim_view)
    for field in sorted(ray_view):
        assert ray_view[field] == sim_view[field], field
