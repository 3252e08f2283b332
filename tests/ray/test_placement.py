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
