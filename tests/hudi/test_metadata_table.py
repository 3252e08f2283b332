"""The metadata table's ``files`` partition, merged from its base HFile and its logs' HFile data
blocks, lists exactly the data files on storage, with their sizes, of the tables Hudi wrote (v8 and v9)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from runtime.core.dfs import open_dfs
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import open_metadata_table, read_files_partition

TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-rs-tables"


def _files_view(tmp_path: Path, fixture: str):
    with zipfile.ZipFile(TABLES / f"{fixture}.zip") as z:
        z.extractall(tmp_path)
    root = next(d for d in tmp_path.iterdir() if d.is_dir() and not d.name.startswith("__MACOSX"))
    dfs, base = open_dfs(str(root), role="verifier")
    mdt = open_metadata_table(HudiTable.open(dfs, base))
    assert mdt is not None
    on_disk = {
        str(p.relative_to(root)): p.stat().st_size
        for p in root.rglob("*")
        if ".hoodie" not in p.parts and (p.suffix == ".parquet" or ".log." in p.name)
    }
    return read_files_partition(mdt), on_disk


@pytest.mark.parametrize(
    "fixture",
    [
        "quickstart_trips_table__mor__avro__v8_trips_8i3u1d",
        "sample_table__cow__v9_txns_simple_meta",
        "sample_table__mor__avro__v9_txns_nonpart_meta",
    ],
)
def test_the_files_partition_lists_the_files_on_storage(tmp_path, fixture):
    view, on_disk = _files_view(tmp_path, fixture)
    assert not view.problems
    assert view.files() == on_disk  # the files and their sizes


def test_a_delta_commit_completed_after_the_compaction_started_is_in_the_compacted_slice(tmp_path):
    # 20260307162449244 was requested before the metadata table's compaction 20260307162449278
    # and completed after it: its log file belongs to the compacted slice (table version 8+)
    view, _ = _files_view(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    assert any(name.endswith("_20260307162449244.parquet") for name in view.partitions["region=eu"])
