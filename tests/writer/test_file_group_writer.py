"""The file-group writers a write task flushes through (runtime.writer.file_group_writer): after a
commit is abandoned and rolled back, each forgets exactly what it wrote into the dead instant, so
the next flush writes onto what was committed (copy-on-write: the committed base file; merge-on-read:
a log version after the rollback's)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from runtime.core.dfs import open_dfs
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.formats.parquet_format import ParquetWriteOptions
from runtime.hudi.table.base_files import avro_schema_json
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.writer.file_group_writer import CopyOnWriteWriter, MergeOnReadWriter, file_group_writer

T1, T2, T3 = "20260101000000001", "20260101000000002", "20260101000000003"


def _records(keys: list[str], ts: int) -> pa.Table:
    return pa.table(
        {
            "key": keys,
            "partition": ["p0"] * len(keys),
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "value": [f"{k}@{ts}" for k in keys],
        }
    )


def _table(path: Path, table_type: str) -> HudiTable:
    dfs, base = open_dfs(str(path))
    props = TableProps("t", "key", "partition", "ts", num_buckets=2, table_type=table_type)
    return HudiTable.create_or_open(dfs, base, props)


def _writer(table: HudiTable) -> CopyOnWriteWriter | MergeOnReadWriter:
    writer = file_group_writer(table, 0, ParquetWriteOptions())
    assert isinstance(writer, CopyOnWriteWriter | MergeOnReadWriter)
    return writer


def _commit(table: HudiTable, instant: str, stats: list, sample: pa.Table) -> None:
    WriteClient(table).commit(instant, stats, {"schema": avro_schema_json(sample.schema, table.props.table_name)})


def test_copy_on_write_forgets_only_the_rolled_back_version(tmp_path):
    table = _table(tmp_path / "cow", "COPY_ON_WRITE")
    writer = _writer(table)
    assert isinstance(writer, CopyOnWriteWriter)
    table.start_instant(T1)
    first = [writer.write("p0", 0, T1, _records(["a", "b"], 1)), writer.write("p0", 1, T1, _records(["c"], 1))]
    _commit(table, T1, first, _records(["a"], 1))
    table.start_instant(T2)
    dead = writer.write("p0", 0, T2, _records(["a"], 2))  # abandoned: rolled back, never committed
    WriteClient(table).rollback(T2, [dead.path])

    assert writer.forget_uncommitted(table.timeline()) == 1  # bucket 1's committed version is kept

    table.start_instant(T3)
    again = writer.write("p0", 0, T3, _records(["b"], 3))
    other = writer.write("p0", 1, T3, _records(["d"], 3))
    assert (again.prev_commit, other.prev_commit) == (T1, T1)
    rows = table.read_base_file(again.path).sort_by("key")
    assert rows.column("value").to_pylist() == ["a@1", "b@3"]  # not the dead instant's a@2
    assert table.read_base_file(other.path).num_rows == 2


def test_copy_on_write_with_nothing_written_has_nothing_to_forget(tmp_path):
    writer = _writer(_table(tmp_path / "cow", "COPY_ON_WRITE"))
    assert not writer.remembers_writes()


def test_merge_on_read_lists_its_slices_again_after_a_rollback(tmp_path):
    table = _table(tmp_path / "mor", "MERGE_ON_READ")
    writer = _writer(table)
    assert isinstance(writer, MergeOnReadWriter)
    table.start_instant(T1)
    _commit(table, T1, [writer.write("p0", 0, T1, _records(["a"], 1))], _records(["a"], 1))
    table.start_instant(T2)
    dead = writer.write("p0", 0, T2, _records(["a"], 2))
    assert LogFileName.parse(dead.path.rsplit("/", 1)[-1]).version == 2
    WriteClient(table).rollback(T2, [dead.path])  # a rollback block in log version 3
    assert writer.remembers_writes()

    assert writer.forget_uncommitted(table.timeline()) == 1

    # nothing of the dead instant is kept, even for a flush under its instant time again: a
    # remembered slice would write log version 3 over the rollback block
    table.start_instant(T2)
    after = writer.write("p0", 0, T2, _records(["b"], 3))
    assert LogFileName.parse(after.path.rsplit("/", 1)[-1]).version == 4
