"""Fault markers: the file a firing leaves on the DFS reads back as the firing it records."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from runtime.core.dfs import Dfs
from runtime.core.fault_spec import FaultSpec
from runtime.faults.injector import FaultInjector
from runtime.faults.markers import FaultMarker, fired_faults


@pytest.mark.parametrize(
    "marker",
    [
        FaultMarker("task.in_snapshot", 2, 0, firing=1),
        FaultMarker("checkpoint.abort"),  # any checkpoint, any task
        FaultMarker("message.dropped", 3, -1, "operator_event"),
        FaultMarker("message.delayed", 4, 1, "ns.method:v2.x", firing=12),  # a target with '.' and ':'
    ],
)
def test_a_marker_reads_back_from_its_file_name(marker: FaultMarker) -> None:
    assert FaultMarker.parse(marker.file_name()) == marker


def test_a_marker_file_name_is_the_documented_format() -> None:
    name = FaultMarker("message.dropped", 3, 1, "write_metadata", 0).file_name()
    assert name == "message.dropped@3#1:write_metadata.0"
    with pytest.raises(ValueError, match="not a fault marker"):
        FaultMarker.parse("task.in_snapshot@2.0")


def test_the_run_reads_back_every_fault_the_injectors_fired() -> None:
    dfs = Dfs(pafs._MockFileSystem())
    spec = FaultSpec("message.delayed", 2, 1, times=2, target="rpc.v2:write_metadata")
    injector = FaultInjector([spec, FaultSpec("task.in_snapshot")], "writer-1", dfs, "/t")
    assert injector.hit("message.delayed", checkpoint=2, task=1, target="rpc.v2:write_metadata") is spec
    assert injector.hit("task.in_snapshot", checkpoint=3, task=0) is not None
    assert injector.has_fired(spec)
    fired = fired_faults(dfs, "/t")
    assert sorted((f["point"], f["role"], f["checkpoint"], f["task"], f.get("target")) for f in fired) == [
        ("message.delayed", "writer-1", 2, 1, "rpc.v2:write_metadata"),
        ("task.in_snapshot", "writer-1", -1, -1, None),  # the spec's checkpoint and task: any
    ]
