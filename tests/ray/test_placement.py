"""Placement of the job's processes on the session's single-node Ray (the multi-node cases are in
test_multinode.py)."""

from __future__ import annotations

import pytest


def test_bundles_follow_the_processes_and_strict_spread_on_one_node_names_the_fix(ray_session):
    from actors.layout import ProcessLayout
    from actors.placement import Placement, PlacementError

    layout = ProcessLayout(writers=6, slots=2)
    p = Placement("spread", layout.task_managers, timeout_s=30)  # on one node SPREAD still places every bundle
    try:
        processes = ("coordinator", "job-manager", "taskmanager-0", "taskmanager-2")
        assert [layout.bundle_of(n) for n in processes] == [None, None, 0, 2]
        assert p.options(layout.bundle_of("coordinator")) == {}  # the job manager's side: Ray's default
        assert "scheduling_strategy" in p.options(layout.bundle_of("taskmanager-2"))
    finally:
        p.remove()
    assert Placement("none", 3).options(1) == {}
    with pytest.raises(PlacementError, match="strict-spread needs 3 nodes .* use --placement spread"):
        Placement("strict-spread", 3, timeout_s=2)


def test_the_placement_group_leaves_every_cpu_to_other_work(ray_session):
    """The group is made while Spark prepares the stream (the job's processes start then): a task
    asking for every CPU of the node (as a one-CPU Ray Data task does beside a one-CPU Spark
    executor on two CPUs) must still be scheduled while it is held. A token share of a CPU in each
    bundle left it waiting for ever."""
    import ray

    from actors.placement import Placement

    free = ray.available_resources().get("CPU", 0.0)  # less what a Spark session of the suite holds
    assert free >= 1, f"the test needs a free CPU; the session's Ray has {free}"
    p = Placement("spread", 4, timeout_s=30)
    try:
        every_free_cpu = ray.remote(num_cpus=free)(lambda: "ran")
        assert ray.get(every_free_cpu.remote(), timeout=30) == "ran"
    finally:
        p.remove()
