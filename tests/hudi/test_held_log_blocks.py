"""A compaction takes the records of a log file this process wrote instead of decoding its block
(runtime.hudi.table.held_log_blocks): it still reads the file (counted; a missing one fails), takes
them only when the file holds the very bytes written, and writes the bytes a decoding compaction
writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from runtime.core.dfs import DfsNotFound
from runtime.hudi.client import compaction
from runtime.hudi.formats.log_format import avro_table
from runtime.hudi.table import held_log_blocks
from runtime.hudi.table.held_log_blocks import HELD_LOG_FILES
from runtime.hudi.table.hudi_table import HudiTable
from runtime.lab.verify import read_snapshot
from tests.hudi.test_avro_encoding import _block, _nan_as_value, tables
from tests.hudi.test_compaction import _compact, _write
from tests.hudi.test_merge_on_read import _mor_table, _records

T1, T2, C = "20260101000000001", "20260101000000002", "20260101000000003"


@settings(max_examples=200, deadline=None)
@given(tables())
def test_a_block_decodes_to_the_records_it_encodes_when_they_have_its_schemas_types(records):
    """What taking the held records instead of decoding rests on."""
    block, schema = _block(records)
    if records.schema.equals(schema):
        decoded = avro_table(block, schema)
        for name in schema.names:
            assert _nan_as_value(decoded.column(name)).equals(_nan_as_value(records.column(name))), name


def _two_writes(path: Path) -> tuple[HudiTable, list[str]]:
    table = _mor_table(path)
    stats = [
        _write(table, T1, _records([f"k{i:04d}" for i in range(3000)], [1] * 3000)),
        _write(table, T2, _records([f"k{i:04d}" for i in range(2000, 4000)], [2] * 2000)),
    ]
    return table, [str(Path(table.base_path, s.path)) for s in stats]


def _logs_held(paths: list[str]) -> list[bool]:
    return [p in HELD_LOG_FILES._files for p in paths]


def test_a_compaction_of_held_log_files_writes_the_bytes_of_one_that_decodes_them(tmp_path, monkeypatch):
    held_table, held_logs = _two_writes(tmp_path / "held")
    assert _logs_held(held_logs) == [True, True]
    (held,) = _compact(held_table, C)
    assert _logs_held(held_logs) == [False, False]  # taken
    monkeypatch.setattr(held_log_blocks, "HELD_LOG_BYTES", 0)  # nothing held: every block is decoded
    decoded_table, decoded_logs = _two_writes(tmp_path / "decoded")
    assert _logs_held(decoded_logs) == [False, False]
    (decoded,) = _compact(decoded_table, C)

    assert held.path == decoded.path
    written = [Path(t.base_path, s.path).read_bytes() for t, s in ((held_table, held), (decoded_table, decoded))]
    assert written[0] == written[1]
    assert held_table.dfs.counters.snapshot() == decoded_table.dfs.counters.snapshot()


def test_a_log_file_whose_bytes_changed_since_it_was_written_is_decoded(tmp_path):
    table, logs = _two_writes(tmp_path / "t")
    data = bytearray(Path(logs[1]).read_bytes())
    at = data.rindex(b"v-k3999-2")
    data[at : at + 9] = b"v-k3999-X"  # the same length: still a block that decodes
    Path(logs[1]).write_bytes(bytes(data))
    _compact(table, C)
    values = read_snapshot(table.base_path).column("value").to_pylist()
    assert "v-k3999-X" in values and "v-k3999-2" not in values


def test_a_held_log_file_that_is_gone_still_fails_the_compaction(tmp_path):
    table, logs = _two_writes(tmp_path / "t")
    (op,) = compaction.generate_plan(table, table.timeline())
    Path(logs[0]).unlink()
    with pytest.raises(DfsNotFound):
        compaction.compact_file_group(table, op, C, table.timeline(), task_id=0)
