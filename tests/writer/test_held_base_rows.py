"""A copy-on-write writer holds the rows of the versions it wrote (runtime.writer.file_group_writer):
the next merge onto one still reads the file, as Hudi's merge handle does (counted, opened; a
missing file fails), and writes the very bytes a merge onto the decoded file writes."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from runtime.core.dfs import DfsNotFound, open_dfs
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.writer import file_group_writer as fgw

T1, T2, T3 = "20260101000000001", "20260101000000002", "20260101000000003"


def _records(keys: range, ts: int) -> pa.Table:
    return pa.table(
        {
            "key": [f"k{k:05d}" for k in keys],
            "partition": ["p0"] * len(keys),
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "value": [f"v{k}@{ts}" for k in keys],
        }
    )


def _write_three(path: Path) -> tuple[HudiTable, fgw.CopyOnWriteWriter, list[str]]:
    """Three instants into one file group: a create, then two merges (updates and new keys)."""
    dfs, base = open_dfs(str(path))
    table = HudiTable.create_or_open(dfs, base, TableProps("t", "key", "partition", "ts", num_buckets=1))
    writer = fgw.file_group_writer(table, 0, ParquetWriteOptions())
    assert isinstance(writer, fgw.CopyOnWriteWriter)
    paths = []
    for instant, keys in ((T1, range(0, 5000)), (T2, range(3000, 6000)), (T3, range(5500, 9000))):
        table.start_instant(instant)
        paths.append(writer.write("p0", 0, instant, _records(keys, int(instant[-1]))).path)
    return table, writer, paths


def _data_files(table: HudiTable, paths: list[str]) -> list[bytes]:
    return [Path(table.base_path, p).read_bytes() for p in paths]


def test_a_merge_onto_held_rows_writes_the_bytes_of_a_merge_onto_the_decoded_file(tmp_path, monkeypatch):
    held_table, held_writer, held_paths = _write_three(tmp_path / "held")
    assert all(v.rows is not None for v in held_writer.versions.values())
    monkeypatch.setattr(fgw, "HELD_ROWS_BYTES", 0)  # nothing held: every merge decodes its base file
    decoded_table, decoded_writer, decoded_paths = _write_three(tmp_path / "decoded")
    assert all(v.rows is None for v in decoded_writer.versions.values())

    assert _data_files(held_table, held_paths) == _data_files(decoded_table, decoded_paths)
    # the merge handle's reads of the old files are made and counted alike
    assert held_table.dfs.counters.snapshot() == decoded_table.dfs.counters.snapshot()


def test_a_merge_onto_held_rows_fails_when_the_file_is_gone(tmp_path):
    table, writer, paths = _write_three(tmp_path / "t")
    os.remove(Path(table.base_path, paths[-1]))
    table.start_instant("20260101000000004")
    with pytest.raises(DfsNotFound):
        writer.write("p0", 0, "20260101000000004", _records(range(1), 4))
