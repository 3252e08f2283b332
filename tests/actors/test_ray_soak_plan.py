"""``commitlab soak --host ray``'s plan and arithmetic, without Ray: the long job's faults every few
minutes, and the slopes and ranges of what the sampler saw."""

from __future__ import annotations

from actors.soak import MIB, slope_per_hour, soak_config, summary
from runtime.core.config import JobConfig


def test_the_long_job_has_a_fault_every_few_minutes_and_room_to_recover_from_each():
    cfg = soak_config(JobConfig(protocol="coordination-rpc", writers=2), minutes=30, fault_every_min=5)
    assert cfg.checkpoints == 900 and cfg.checkpoint_interval_s == 2.0
    assert [f.checkpoint for f in cfg.faults] == [150, 300, 450, 600, 750]
    assert [f.point for f in cfg.faults][:4] == [
        "task.in_snapshot",
        "coordinator.before_commit_file",
        "dfs.transient_error",
        "task.after_flush_before_event",
    ]
    assert cfg.max_restarts > len(cfg.faults) and cfg.job_timeout_s > 30 * 60
    assert cfg.records == 900 * 2 * 200


def test_slopes_are_per_hour_after_the_warm_up():
    # 1 MiB a minute after a first sample far off: 60 MiB an hour
    points = [(0.0, 900.0)] + [(60.0 * i, 100.0 + i) for i in range(1, 30)]
    assert abs(slope_per_hour(points) - 60.0) < 1e-6


def test_the_summary_gives_each_process_and_the_tables_bounded_parts():
    samples = [
        {
            "at_s": 10.0 * i,
            "processes": {"7": [(100 + (i % 2)) * MIB, None]},
            "timeline_files": 40 + i % 3,
            "metadata_slices": 5,
        }
        for i in range(20)
    ]
    doc = summary(samples, {7: "raylet"})
    assert doc["processes"]["7"]["name"] == "raylet" and doc["processes"]["7"]["max_mib"] == 101.0
    assert doc["timeline_files"]["min"] == 40 and doc["timeline_files"]["max"] == 42
    assert doc["metadata_slices"]["slope_per_hour"] == 0.0
