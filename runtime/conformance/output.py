"""What a conformance check shows: a table per comparison, ``conformance.json`` and a picture of
DFS calls per checkpoint by component, the lab beside Hudi's own writer."""

from __future__ import annotations

import json
import os

from rich import box
from rich.table import Table

from runtime.conformance.comparison import RATIO_BAND, Comparison, Ratio
from runtime.conformance.scenario_run import ScenarioComparison
from runtime.core.json_doc import JsonObject


def _ratio_text(r: Ratio) -> str:
    ratio = r.ratio
    text = "-" if ratio is None else f"{ratio:g}"
    return text if r.conforms else f"[yellow]{text}[/yellow]"


def comparison_table(c: Comparison) -> Table:
    """The lab against Hudi's writer for one table type: one row per figure, lab | Hudi | lab/Hudi."""
    title = f"{c.protocol} on {c.table_type}: the lab against Hudi {c.release}'s Flink writer"
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, col in enumerate(["figure", "lab", "Hudi", "lab/Hudi"]):
        t.add_column(col, no_wrap=i == 0, justify="left" if i == 0 else "right")
    contents = c.contents
    verdict = "[green]equal[/green]" if contents.equal else "[red]differ[/red]"
    t.add_row("rows (official reader)", f"{contents.rows_lab:,}", f"{contents.rows_real:,}", verdict)
    t.add_row("commits", str(c.lab_timeline.write_instants), str(c.real_timeline.write_instants), "")
    t.add_row(
        "files / commit", f"{c.files_per_commit.lab:g}", f"{c.files_per_commit.real:g}", _ratio_text(c.files_per_commit)
    )
    t.add_row(
        "bytes / commit",
        f"{c.bytes_per_commit.lab:,.0f}",
        f"{c.bytes_per_commit.real:,.0f}",
        _ratio_text(c.bytes_per_commit),
    )
    for group, ratios in (("part", c.per_checkpoint), ("role", c.per_role), ("op", c.by_op)):
        for name, r in ratios.items():
            t.add_row(f"DFS calls/ckp, {group} {name}", f"{r.lab:g}", f"{r.real:g}", _ratio_text(r))
    lat = c.real_commit_latency_s
    if lat:
        t.add_row("checkpoint -> commit (s)", "-", f"{sorted(lat)[len(lat) // 2]:.3f}", "")
    lo, hi = RATIO_BAND
    t.caption = f"a ratio outside {lo:g}-{hi:g} is yellow: docs/FIDELITY.md explains it or the model is wrong"
    return t


def differences_lines(c: Comparison) -> list[str]:
    """The verdict's reasons: contents, unexplained and named timeline differences."""
    lines = []
    if not c.contents.equal:
        lines.append(f"[red]the tables differ[/red]: {'; '.join(c.contents.examples) or 'row counts differ'}")
    lines += [f"[red]timeline differs[/red]: {d}" for d in c.timeline_differences]
    lines += [f"named difference: {d}" for d in c.named_differences]
    for part, r in c.per_checkpoint.items():
        callers = c.real_callers.get(part)
        if callers and not r.conforms:
            made = ", ".join(f"{m} {n:g}" for m, n in callers[:3])
            lines.append(f"{part}: Hudi's calls per checkpoint come from {made}")
    return lines


def write_conformance(out: str, comparisons: list[Comparison], extra: JsonObject) -> str:
    """``out/conformance.json``: every comparison of the check and what it ran."""
    path = os.path.join(out, "conformance.json")
    doc = {**extra, "conforms": all(c.conforms for c in comparisons), "checks": [c.to_json() for c in comparisons]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def plot_components(out: str, comparisons: list[Comparison]) -> str:
    """``out/conformance.png``: DFS calls per checkpoint by component, lab beside Hudi, per table type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(comparisons), figsize=(6 * len(comparisons), 4), squeeze=False)
    for ax, c in zip(axes[0], comparisons, strict=True):
        names = list(c.per_checkpoint)
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [c.per_checkpoint[n].lab for n in names], 0.4, label="lab")
        ax.bar([x + 0.2 for x in xs], [c.per_checkpoint[n].real for n in names], 0.4, label=f"Hudi {c.release}")
        ax.set_xticks(list(xs), names, rotation=30)
        ax.set_ylabel("DFS calls per checkpoint")
        ax.set_title(f"{c.protocol}, {c.table_type}")
        ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "conformance.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scenario_table(c: ScenarioComparison) -> Table:
    """A scenario's outcomes, the lab beside Hudi's writer: one row per figure."""
    title = f"{c.scenario}: {c.protocol} on {c.table_type}, the lab against Hudi {c.release}'s Flink writer"
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, col in enumerate(["", "lab", f"Hudi {c.release}"]):
        t.add_column(col, no_wrap=i == 0, overflow="fold")
    lab, real = c.lab, c.real

    def count(v: int | None) -> str:
        return "-" if v is None else f"{v:,}"

    verdict = "[green]agree[/green]" if c.verdicts_agree else "[red]differ[/red]"
    t.add_row(f"verdict ({verdict})", lab.verdict, real.verdict)
    t.add_row("job", lab.status, real.status)
    t.add_row("failovers", str(lab.failovers), str(real.failovers))
    t.add_row("rollbacks", str(len(lab.rollbacks)), str(len(real.rollbacks)))
    t.add_row("pending instants", str(len(lab.pending)), str(len(real.pending)))
    t.add_row("rows lost", count(lab.lost), count(real.lost))
    t.add_row("rows duplicated", count(lab.duplicated), count(real.duplicated))
    if lab.blocked or real.blocked:
        t.add_row("blocked in", lab.blocked or "-", real.blocked or "-")
    if c.contents is not None:
        t.add_row("tables (official reader)", f"{c.contents.rows_lab:,} rows", f"{c.contents.rows_real:,} rows")
    return t


def scenario_lines(c: ScenarioComparison) -> list[str]:
    """Why the check passes or fails, beyond the table."""
    lines = []
    if c.contents is not None and not c.contents.equal:
        lines.append(f"[red]the tables differ[/red]: {'; '.join(c.contents.examples) or 'row counts differ'}")
    if not c.verdicts_agree:
        lines.append(
            f"named difference: {c.named}"
            if c.named
            else f"[red]the verdicts differ[/red]: lab {c.lab.verdict}, Hudi {c.real.verdict} ({c.real.detail[:200]})"
        )
    elif c.real.detail:
        lines.append(f"Hudi's job: {c.real.detail[:300]}")
    return lines


def write_scenarios(out: str, comparisons: list[ScenarioComparison], extra: JsonObject) -> str:
    """``out/conformance.json`` of a scenario check: per table type, ``outcomes.lab`` and ``outcomes.real``."""
    path = os.path.join(out, "conformance.json")
    doc = {**extra, "agrees": all(c.agrees for c in comparisons), "checks": [c.to_json() for c in comparisons]}
    if len(comparisons) == 1:
        doc["outcomes"] = comparisons[0].to_json()["outcomes"]
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path
