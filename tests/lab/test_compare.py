"""commitlab compare's bookkeeping, with the simulator as the job runner: one row per protocol
from its real result, one commit cadence for every protocol, the table and the plots."""

from __future__ import annotations

import json
import os

import pytest
from rich.console import Console

from runtime.core.config import JobConfig
from runtime.faults.scenarios import with_quiet_round
from runtime.lab.compare import compare_tables, one_commit_cadence, plot_compare, run_compare
from runtime.protocols import PROTOCOLS as ALL_PROTOCOLS
from runtime.sim import simulate

PROTOCOLS = ["operator-event", "message-bus", "coordination-rpc-async", "control-topic"]


def _compare(tmp_path, base: JobConfig, protocols: list[str] = PROTOCOLS) -> tuple[dict, list[JobConfig]]:
    ran: list[JobConfig] = []

    def run(cfg: JobConfig, sub: str) -> dict:
        ran.append(cfg)
        return simulate(cfg, seed=1, storage="memory", max_real_s=120.0)

    doc = run_compare(base, protocols, str(tmp_path), run=run, rtt={"p50_s": 0.002, "p99_s": 0.004})
    return doc, ran


def test_one_row_per_protocol_from_its_run_at_one_commit_cadence(tmp_path):
    base = with_quiet_round(JobConfig(source="generator", writers=2, checkpoints=4, records=3_000))
    doc, ran = _compare(tmp_path, base)
    assert [c.protocol for c in ran] == PROTOCOLS
    assert {c.kafka_commit_interval_s for c in ran} == {base.checkpoint_interval_s}
    assert doc["commit_cadence"] == "every protocol commits once a checkpoint interval"
    rows = doc["protocols"]
    assert rows["operator-event"]["deadlock"] and rows["operator-event"]["exactly_once"] is None
    assert rows["message-bus"]["exactly_once"] is True and rows["message-bus"]["commits"] == 3  # round 2 is quiet
    assert rows["control-topic"]["exactly_once"] is True and rows["control-topic"]["commits"] >= 3
    assert rows["message-bus"]["dfs_ops_per_checkpoint_total"] > 0
    on_disk = json.loads((tmp_path / "compare.json").read_text())
    assert on_disk["protocols"].keys() == rows.keys()
    # the caption says the RPC ask timeout was kept at its floor, not scaled to 0.5 s
    assert on_disk["not_scaled"][-1] == "--rpc-timeout below 10 s"
    paths = plot_compare(doc, str(tmp_path))
    assert all(os.path.getsize(p) > 1000 for p in paths)


def test_an_explicit_connect_interval_is_kept(tmp_path):
    base = JobConfig(source="generator", kafka_commit_interval_s=1.5)
    assert one_commit_cadence(base).kafka_commit_interval_s == 1.5
    assert (
        one_commit_cadence(JobConfig(source="generator")).kafka_commit_interval_s == JobConfig().checkpoint_interval_s
    )


def test_the_tables_read_at_80_columns(tmp_path):
    base = with_quiet_round(JobConfig(source="generator", writers=2, checkpoints=4, records=2_000))
    doc, _ = _compare(tmp_path, base, list(ALL_PROTOCOLS))  # every column a real run fills
    console = Console(width=80, record=True, color_system=None)
    for table in compare_tables(doc):
        console.print(table)
    text = console.export_text()
    assert "…" not in text, text  # rich shortens a cell with an ellipsis when the width is short
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for name in ALL_PROTOCOLS:  # a protocol's row: its name whole, its verdict beside it
        row = next(ln for ln in lines if ln.strip().startswith(name) and ("verified" in ln or "writer-" in ln))
        assert row, name


def test_both_table_types_side_by_side(tmp_path):
    """--table-type both: every protocol on each table type, under out/<type>/<protocol>; the rows
    say what each wrote (copy-on-write rewrites base files, merge-on-read appends log files and
    compacts), the table reads at 80 columns and the plot is drawn."""
    ran: list[JobConfig] = []

    def run(cfg: JobConfig, sub: str) -> dict:
        ran.append(cfg)
        return simulate(cfg, workdir=sub, seed=1, storage="disk", max_real_s=120.0)

    base = JobConfig(source="generator", writers=2, checkpoints=4, records=3_000, compaction_delta_commits=2)
    names = ["message-bus", "coordination-rpc"]
    doc = run_compare(base, names, str(tmp_path), run=run, table_types=["copy-on-write", "merge-on-read"])
    assert [(c.table_type, c.protocol) for c in ran] == [
        (t, n) for t in ("copy-on-write", "merge-on-read") for n in names
    ]
    assert ran[0].table == str(tmp_path / "copy-on-write" / "message-bus" / "table")
    cow, mor = doc["table_types"]["copy-on-write"], doc["table_types"]["merge-on-read"]
    assert doc["protocols"] == cow
    for name in names:
        assert cow[name]["exactly_once"] is True and mor[name]["exactly_once"] is True
        assert cow[name]["base_files_per_checkpoint"] > 0 and cow[name]["log_files_per_checkpoint"] == 0
        assert mor[name]["log_files_per_checkpoint"] > 0 and mor[name]["base_files_per_checkpoint"] == 0
        assert mor[name]["compactions"] >= 1 and mor[name]["compaction_base_files_per_checkpoint"] > 0
        assert cow[name]["write_amplification"] > 0 and mor[name]["write_amplification"] > 0
    console = Console(width=80, record=True, color_system=None)
    console.print(compare_tables(doc)[-1])
    text = console.export_text()
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines()), text
    assert os.path.getsize(plot_compare(doc, str(tmp_path))[-1]) > 1000


def test_compare_alone_takes_both_table_types_on_the_command_line():
    from runtime.cli.command import build_parser

    parser, commands = build_parser()
    assert parser.parse_args(["compare", "--table-type", "both"]).table_type == "both"
    assert "both" in commands["compare"].format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--table-type", "both"])  # a run writes one table


def _row(ops: dict[str, float], amp: float, rows_s: float) -> dict:
    return {
        "commit_to_unblock_samples": [0.01, 0.02],
        "deadlock": False,
        "dfs_ops_per_checkpoint": ops,
        "write_amplification": amp,
        "rows_per_s": rows_s,
    }


def test_no_legend_covers_a_bar(tmp_path, monkeypatch):
    """Tall bars under every label (where a legend inside the plot would sit): each legend's box
    is drawn clear of every bar."""
    import runtime.lab.compare as compare

    ops = {op: 10.0 for op in ("create", "delete", "exists", "list", "mkdir", "read", "stat", "write")}
    rows = {name: _row(ops, 300.0, 1600.0) for name in ("message-bus", "ckp-meta", "operator-event")}
    doc = {
        "workload": {"writers": 2, "checkpoints": 3, "records": 1000},
        "protocols": rows,
        "table_types": {"copy-on-write": rows, "merge-on-read": rows},
    }
    figures = []
    save = compare._save
    monkeypatch.setattr(compare, "_save", lambda fig, *a, **kw: (figures.append(fig), save(fig, *a, **kw))[1])
    plot_compare(doc, str(tmp_path))
    checked = 0
    for fig in figures:
        fig.canvas.draw()
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
        for legend in legends:
            box = legend.get_window_extent()
            for ax in fig.axes:
                for bar in ax.patches:
                    assert not box.overlaps(bar.get_window_extent()), (fig, bar)
                    checked += 1
    assert checked == 36  # the DFS chart's 24 bars, the table-type chart's 12
