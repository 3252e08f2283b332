"""The run summary stays a table at scale: a row about writers counts them and names the few
longest, so a run of 256 writers prints "256 writers blocked", not 256 names."""

from __future__ import annotations

from rich.console import Console

from runtime.core.config import JobConfig
from runtime.lab.report import blocked_line, summary_table
from runtime.sim import simulate


def _text(result) -> str:
    console = Console(width=150, record=True, color_system=None)
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
