"""Placement of the role actors on the session's single-node Ray (the multi-node cases are in
test_multinode.py)."""

from __future__ import annotations

import pytest


def test_bundles_follow_the_roles_and_strict_spread_on_one_node_names_the_fix(ray_session):
    from actors.placement import Placement, PlacementError

    p = Placement("spread", 3, timeout_s=30)  # on one node SPREAD still places every bundle
    try:
        assert [p.bundle_of(n) for n in ("coordinator", "job-manager", "writer-0", "source-0", "writer-2")] == [
            0,
            0,
            1,
            1,
            3,
        ]
        assert "scheduling_strategy" in p.options("writer-2")
    finally:
        p.remove()
    assert Placement("none", 3).options("writer-0") == {}
    with pytest.raises(PlacementError, match="strict-spread needs 4 nodes .* use --placement spread"):
        Placement("strict-spread", 3, timeout_s=2)
