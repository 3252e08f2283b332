"""Direct write markers (runtime.hudi.table.markers): where a marker lies and what it is called, how a
rollback finds them in nested partitions, and the DFS calls that delete an instant's folder
(Hudi 0.14's ``FSUtils.deleteDir``: what the commit costs)."""

from __future__ import annotations

from runtime.core.dfs import open_dfs
from runtime.hudi.table.markers import APPEND, CREATE, MERGE, DirectWriteMarkers, data_file_of, marker_name, markers_on

INSTANT = "20260101000000001"


def test_a_marker_is_named_after_its_data_file_and_io_type():
    assert marker_name("f1_0-0-0_1.parquet", MERGE) == "f1_0-0-0_1.parquet.marker.MERGE"
    assert data_file_of("2024/01/f1_0-0-0_1.parquet.marker.CREATE") == ("2024/01/f1_0-0-0_1.parquet", CREATE)


def test_markers_of_nested_partitions_are_found_and_a_second_create_is_refused(tmp_path):
    dfs, base = open_dfs(str(tmp_path / "t"))
    markers = DirectWriteMarkers(dfs, base, INSTANT)
    assert markers.all_markers() == []  # no folder: no markers, no error
    assert markers.create_if_not_exists("2024/01", "a.parquet", CREATE)
    assert markers.create_if_not_exists("2024/02", "b.parquet", APPEND)
    assert not markers.create_if_not_exists("2024/01", "a.parquet", CREATE)
    assert (tmp_path / "t" / ".hoodie" / ".temp" / INSTANT / "2024" / "01" / "a.parquet.marker.CREATE").is_file()
    assert markers.all_markers() == ["2024/01/a.parquet.marker.CREATE", "2024/02/b.parquet.marker.APPEND"]


def test_deleting_the_folder_lists_it_once_and_deletes_each_entry_then_the_folder(tmp_path):
    dfs, base = open_dfs(str(tmp_path / "t"))
    markers = DirectWriteMarkers(dfs, base, INSTANT)
    for partition in ("p0", "p1"):
        markers.create_if_not_exists(partition, "a.parquet", CREATE)
    calls: list[str] = []
    dfs.fault_hook = lambda role, op, path: calls.append(op)
    markers.delete_folder()
    assert calls == ["exists", "list", "delete", "delete", "delete"]
    assert not (tmp_path / "t" / ".hoodie" / ".temp" / INSTANT).exists()
    calls.clear()
    markers.delete_folder()  # quietly: nothing there
    assert calls == ["exists"]


def test_only_none_turns_markers_off():
    assert markers_on("release") and markers_on("direct") and not markers_on("none")
