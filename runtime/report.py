"""Human-readable output of a run: the progress bar and the summary table."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


@contextmanager
def checkpoint_progress(console: Console, total: int, label: str,
                        enabled: bool = True) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A progress bar over checkpoints; yields the callback a job run reports progress to."""
    if not enabled:
        yield lambda _p: None
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} checkpoints"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)

        def update(p: dict[str, Any]) -> None:
            if p:
                progress.update(task, completed=min(p.get("completed", 0), total),
                                description=f"{label} (checkpoint {p.get('checkpoint', 0)})")

        yield update


def summary_table(result: dict[str, Any]) -> Table:
    t = Table(title=f"commitlab run: {result['protocol']}, {result['writers']} writers",
              show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    ckp = result["checkpoints"]
    t.add_row("status", _status(result))
    if result.get("error"):
        t.add_row("error", str(result["error"]))
    t.add_row("rows in", f"{result['rows_in']:,} of {result['records']:,}")
    t.add_row("checkpoints", f"{ckp['completed']} completed, {ckp['aborted']} aborted")
    commits = result["commits"]
    t.add_row("commits", f"{len(commits)}: " + ", ".join(
        f"{c['instant']} (ckp {c['checkpoint']}, {c['rows']:,} rows)" for c in commits[:6])
        + (" ..." if len(commits) > 6 else ""))
    if result.get("empty_rounds"):
        t.add_row("empty rounds", ", ".join(map(str, result["empty_rounds"])))
    timing = result["timing"]
    t.add_row("time", f"{timing['run_s']:.2f}s run + {timing['setup_s']:.2f}s set-up; "
                      f"{result['rows_per_s']:,.0f} rows/s")
    for role, ops in sorted(result.get("dfs_ops_per_checkpoint", {}).items()):
        t.add_row(f"DFS ops/ckp ({role})", ", ".join(f"{op} {n:g}" for op, n in sorted(ops.items())))
    t.add_row("RPCs", ", ".join(f"{k} {v}" for k, v in sorted(result["rpcs"].items())))
    blocked = result.get("writer_blocked_s") or {}
    if blocked:
        t.add_row("writers blocked", ", ".join(f"{k} {v:.2f}s" for k, v in sorted(blocked.items())))
    eo = result.get("exactly_once")
    if eo is None:
        t.add_row("exactly-once", "not checked (the run did not finish)")
    else:
        verdict = "[green]verified[/green]" if eo["verified"] else "[red]VIOLATED[/red]"
        t.add_row("exactly-once", f"{verdict}: expected {eo['expected']:,}, actual {eo['actual']:,}, "
                                  f"lost {eo['lost']}, duplicated {eo['duplicated']}, "
                                  f"unexpected {eo['unexpected']}, mismatched {eo.get('mismatched', 0)}")
    return t


def _status(result: dict[str, Any]) -> str:
    s = result["status"]
    colour = {"finished": "green", "deadlocked": "red", "failed": "red", "timed-out": "red"}.get(s, "yellow")
    return f"[{colour}]{s}[/{colour}]"
