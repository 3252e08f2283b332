"""Every DFS operation is filed under the part of the table its path lies in: the rule the lab and
the conformance harness share (runtime.core.dfs_components)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from runtime.core.dfs import Dfs, DfsCounters
from runtime.core.dfs_components import Component, component_of

BASE = "/data/lake/orders"


@pytest.mark.parametrize(
    ("relative", "component"),
    [
        ("p1/f1_0-1-0_20240101000000000.parquet", Component.DATA),
        ("p1/.hoodie_partition_metadata", Component.DATA),
        (".f1_20240101000000000.log.1_0-1-0", Component.DATA),
        (".hoodie", Component.TIMELINE),
        (".hoodie/hoodie.properties", Component.TIMELINE),
        (".hoodie/20240101000000000.commit", Component.TIMELINE),
        (".hoodie/timeline/20240101000000000_20240101000001000.commit", Component.TIMELINE),
        (".hoodie/metadata/files/files-0000_0-1-0_00000000000000.hfile", Component.METADATA),
        (".hoodie/metadata/.hoodie/20240101000000000.deltacommit", Component.METADATA),
        (".hoodie/.temp/20240101000000000/p1/f1.parquet.marker.CREATE", Component.MARKERS),
        (".hoodie/.aux/ckp_meta/20240101000000000.INFLIGHT", Component.MESSAGES),
        (".hoodie/.aux/message_bus/3.commit", Component.MESSAGES),
        (".hoodie/.aux/commitlab/checkpoints/3", Component.LAB),
        (".hoodie/.aux/lock", Component.LOCK),
        (".hoodie/.heartbeat/20240101000000000", Component.HEARTBEAT),
        (".hoodie/archived/.commits_.archive.1_1-0-1", Component.ARCHIVE),
        (".hoodie/timeline/history/manifest_1", Component.ARCHIVE),
        (".hoodie/.aux/.bootstrap/x", Component.AUX),
        (".hoodie/20240101000000000.clean.requested", Component.CLEAN),
        (".hoodie/20240101000000000.rollback.requested", Component.ROLLBACK),
        (".hoodie/20240101000000000.rollback.inflight", Component.ROLLBACK),
        (".hoodie/timeline/20240101000000000_20240101000001000.rollback", Component.ROLLBACK),
    ],
)
def test_a_path_belongs_to_one_part_of_the_table(relative, component):
    assert component_of(f"{BASE}/{relative}") == component
    assert component_of(relative) == component


def test_the_counters_keep_the_part_beside_the_role_and_the_operation(tmp_path):
    base = str(tmp_path)
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / "p1").mkdir()
    counters = DfsCounters()
    dfs = Dfs(pafs.LocalFileSystem(), role="writer", counters=counters)
    dfs.write_bytes(f"{base}/.hoodie/20240101000000000.commit.requested", b"")
    dfs.exists(f"{base}/.hoodie/hoodie.properties")
    dfs.write_bytes(f"{base}/p1/f1.parquet", b"x")
    dfs.for_role("coordinator").exists(f"{base}/.hoodie/.aux/ckp_meta/1.INFLIGHT")
    assert counters.snapshot() == {"writer": {"write": 2, "exists": 1}, "coordinator": {"exists": 1}}
    assert counters.by_component() == {
        "writer": {"timeline": {"write": 1, "exists": 1}, "data": {"write": 1}},
        "coordinator": {"messages": {"exists": 1}},
    }
    merged = DfsCounters.merge_components([counters.by_component(), counters.by_component()])
    assert merged["writer"]["timeline"] == {"write": 2, "exists": 2}
