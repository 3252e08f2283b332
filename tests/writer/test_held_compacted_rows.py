"""A compaction task holds the base file it wrote into a file group (runtime.writer.compaction): the
group's next compaction by the same task still reads the file, as Hudi's merge handle does
(counted, opened; a missing file fails), extends its keys' bloom filter, and writes the very bytes
a compaction onto the decoded file writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.config import JobConfig
from runtime.core.dfs import DfsNotFound
from runtime.hudi.client import compaction
from runtime.hudi.table.hudi_table import HudiTable
from runtime.writer import compaction as compaction_roles
from runtime.writer import file_group_writer
from tests.hudi.test_compaction import SCHEMA, _write
from tests.hudi.test_merge_on_read import _mor_table, _records

T1, C1, T2, C2 = (f"2026010100000000{i}" for i in range(1, 5))


def _compact(table: HudiTable, task: compaction_roles.CompactOperator, instant: str) -> str:
    """A compaction of every file group by ``task``; the base file it wrote."""
    compaction.save_plan(table, instant, compaction.generate_plan(table, table.timeline()))
    plan = compaction.start_compaction(table, instant)
    stats = [task._compact_blocking(op, instant) for op in plan.operations]
    compaction.commit_compaction(table, instant, stats, SCHEMA)
    (stat,) = stats
    return stat.path


def _two_compactions(path: Path) -> tuple[HudiTable, compaction_roles.CompactOperator, list[str]]:
    """A compaction of new keys, then one of updates and new keys onto its base file."""
    table = _mor_table(path)
    task = compaction_roles.CompactOperator(None, JobConfig(), table, 0)  # type: ignore[arg-type]
    keys = [f"k{k:05d}" for k in range(9000)]
    _write(table, T1, _records(keys[:5000], [1] * 5000))
    paths = [_compact(table, task, C1)]
    _write(table, T2, _records(keys[3000:], [2] * 6000))
    paths.append(_compact(table, task, C2))
    return table, task, paths


def test_a_compaction_onto_a_held_base_file_writes_the_bytes_of_one_onto_the_decoded_file(tmp_path, monkeypatch):
    held_table, held_task, held_paths = _two_compactions(tmp_path / "held")
    (held,) = held_task._held.values()
    assert held.rows is not None and held.key_filter is not None and held.rel_path == held_paths[1]
    monkeypatch.setattr(file_group_writer, "HELD_ROWS_BYTES", 0)  # nothing held: the base file is decoded
    monkeypatch.setattr(file_group_writer, "KEEP_FILTER_FROM_KEYS", 10**9)  # and its filter worked out anew
    decoded_table, decoded_task, decoded_paths = _two_compactions(tmp_path / "decoded")
    (decoded,) = decoded_task._held.values()
    assert decoded.rows is None and decoded.key_filter is None

    assert held_paths == decoded_paths
    for rel in held_paths:
        assert Path(held_table.base_path, rel).read_bytes() == Path(decoded_table.base_path, rel).read_bytes()
    # the compaction's read of the base file is made and counted alike
    assert held_table.dfs.counters.snapshot() == decoded_table.dfs.counters.snapshot()


def test_a_held_base_file_that_is_gone_still_fails_the_compaction(tmp_path):
    table, task, paths = _two_compactions(tmp_path / "t")
    _write(table, "20260101000000005", _records(["k00001"], [3]))
    (op,) = compaction.generate_plan(table, table.timeline())
    assert f"p0/{op.base_file}" == paths[1] == next(iter(task._held.values())).rel_path
    Path(table.base_path, paths[1]).unlink()
    with pytest.raises(DfsNotFound):
        task._compact_blocking(op, "20260101000000006")
