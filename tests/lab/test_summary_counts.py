"""The run summary stays a table at scale: a row about writers counts them and names the few
longest, so a run of 256 writers prints "256 writers blocked", not 256 names."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from rich.console import Console

from runtime.core.config import JobConfig
from runtime.lab.report import blocked_line, empty_rounds_line, summary_table
from runtime.lab.results import JobResult
from runtime.sim import simulate


def _text(result) -> str:
    console = Console(width=400, record=True, color_system=None)
    console.print(summary_table(result))
    return console.export_text()


def test_the_blocked_row_counts_writers_and_names_the_longest():
    blocked = {f"writer-{i}": i / 100 for i in range(256)}
    line = blocked_line(blocked)
    assert line == "256 writers blocked; the longest: writer-255 2.55s, writer-254 2.54s, writer-253 2.53s"
    assert blocked_line({"writer-1": 0.2, "writer-0": 0.1}) == "2 writers blocked: writer-0 0.10s, writer-1 0.20s"
    assert blocked_line({"writer-0": 0.1}) == "1 writer blocked: writer-0 0.10s"


def test_a_run_of_many_writers_prints_a_count_not_every_name():
    cfg = JobConfig(source="generator", writers=64, checkpoints=2, records=6_400, protocol="coordination-rpc-async")
    result = simulate(cfg, seed=1, storage="memory")
    blocked = result.figures.writer_blocked_s
    assert len(blocked) == 64  # every writer polls for its instant
    text = _text(result)
    assert f"{len(blocked)} writers blocked; the longest: " in text
    assert sum(f"writer-{i} " in text for i in range(64)) == 3


# -- the DFS rows add up ---------------------------------------------------------------------------

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "results"


def _row_sums(text: str) -> tuple[float, float, float]:
    """The summary's DFS rows read back: the role rows' sum, the parts' sum, the stated total."""
    roles_sum = parts_sum = total = 0.0
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) != 2:
            continue
        label, value = cells
        numbers = [float(n) for n in re.findall(r"[a-z_.]+ (\d+(?:\.\d+)?)", value)]
        if not label.startswith("DFS ops/"):
            continue
        if label.endswith(" by part"):
            parts_sum += sum(numbers)
        elif label.endswith(", all roles"):
            total = float(value.split(" ", 1)[0])
        else:
            roles_sum += sum(numbers)
    return roles_sum, parts_sum, total


def _assert_rows_add_up(result: JobResult) -> None:
    figures = result.figures
    counts = {r: sum(ops.values()) for r, ops in figures.dfs_ops.items() if r != "driver"}
    parts = {r: sum(sum(c.values()) for c in comps.values()) for r, comps in figures.dfs_ops_by_component.items()}
    parts.pop("driver", None)
    assert counts == parts  # every operation of every role is filed under one part
    roles_sum, parts_sum, total = _row_sums(_text(result))
    rows = sum(len(ops) for ops in figures.dfs_per_checkpoint_by_role().values())
    assert total == figures.dfs_total_per_checkpoint() > 0
    assert abs(roles_sum - total) <= 0.005 * rows + 1e-9  # the rows are rounded to 2 places each
    assert abs(parts_sum - total) <= 0.005 * len(figures.dfs_per_checkpoint_by_component) + 1e-9
    assert "writer.data" in figures.dfs_per_checkpoint_by_role()  # the write tasks' data work is a row


@pytest.mark.parametrize(
    "protocol, table_type",
    [("message-bus", "copy-on-write"), ("coordination-rpc", "merge-on-read"), ("control-topic", "copy-on-write")],
)
def test_the_role_rows_add_up_to_the_parts(protocol, table_type, tmp_path):
    cfg = JobConfig(
        source="generator", writers=2, checkpoints=4, records=2_000, protocol=protocol, table_type=table_type
    )
    storage = "memory" if table_type == "copy-on-write" else "disk"  # the simulated disk reads base files only
    result = simulate(cfg, seed=3, storage=storage, workdir=str(tmp_path))
    _assert_rows_add_up(result)
    text = _text(result)
    assert "DFS ops/ckp (writer.data: writing files)" in text
    assert "the driver's" in text and "(set-up, verify) are in neither" in text


@pytest.mark.parametrize("name", ["deadlocked", "region", "failed"])
def test_the_rows_of_a_recorded_result_add_up(name):
    doc = json.loads((FIXTURES / f"{name}.json").read_text())
    _assert_rows_add_up(JobResult.from_json(doc))


def test_empty_rounds_are_named_as_checkpoints_with_their_count():
    assert empty_rounds_line([2]) == "1 (checkpoint 2 completed without data)"
    assert empty_rounds_line([2, 5]) == "2 (checkpoints 2, 5 completed without data)"
    result = JobResult.from_json(json.loads((FIXTURES / "deadlocked.json").read_text()))
    assert result.empty_rounds == [2]
    text = _text(result)
    assert "1 (checkpoint 2 completed without data)" in text
    assert "2 completed, 0 aborted, of 3 requested" in text or "pending" in text


def test_a_run_without_a_checkpoint_says_its_dfs_rows_are_the_whole_run():
    doc = json.loads((FIXTURES / "failed.json").read_text())
    result = JobResult.from_json(doc)
    result.figures.checkpoints.aborted = 0  # as a run stopped before its first checkpoint ended
    text = _text(result)
    assert "DFS ops/ckp" not in text and "DFS ops/run (no checkpoint), all roles" in text
    whole_run = sum(sum(ops.values()) for role, ops in result.figures.dfs_ops.items() if role != "driver")
    assert whole_run == 5_811 and f"{whole_run} = the rows above" in text  # the counts, not divided
    assert "DFS ops/ckp (writer.data: writing files)" in _text(JobResult.from_json(doc))
