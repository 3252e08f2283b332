"""Human-readable output of a run: the progress bar and the summary table."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypedDict

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from runtime.core import roles
from runtime.lab.deadlock import SHOWN_LONGEST, longest_waits
from runtime.lab.results import JobResult, RunFigures
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix, ExactlyOnce

if TYPE_CHECKING:
    from runtime.lab.audit_findings import Audit


class JobProgress(TypedDict, total=False):
    """What a running job reports to its command's progress bar, about twice a second: the
    checkpoint under way, how many completed, of how many (empty: the job manager did not answer)."""

    checkpoint: int
    completed: int
    total: int


ProgressCallback = Callable[[JobProgress], None]


# The progress bars leave sys.stdout and sys.stderr alone: redirected, they would print what Ray's
# and Spark's threads write there (a raylet's warning, a worker's error) on the terminal, which
# the command line sends to the engines' log instead (runtime.cli.terminal.engines_to_log).
@contextmanager
def checkpoint_progress(console: Console, total: int, label: str, enabled: bool = True) -> Iterator[ProgressCallback]:
    """A progress bar over checkpoints; yields the callback a job run reports progress to."""
    if not enabled:
        yield lambda _p: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} checkpoints"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        redirect_stdout=False,  # see the note above checkpoint_progress
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(label, total=total)

        def update(p: JobProgress) -> None:
            if p:
                progress.update(
                    task,
                    completed=min(p.get("completed", 0), total),
                    description=f"{label} (checkpoint {p.get('checkpoint', 0)})",
                )

        yield update


class PhaseLog:
    """Long start-up and wind-down, phase by phase: a line when each phase begins, with the time
    since the command started, so how long each took reads off the next line."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.phases: list[tuple[str, float]] = []  # (phase, seconds since the start)

    def __call__(self, phase: str) -> None:
        at = time.monotonic() - self.t0
        self.phases.append((phase, round(at, 3)))
        if self.enabled:
            self.console.print(f"[dim][{at:6.1f} s][/dim] {escape(phase)}", highlight=False)


@contextmanager
def runs_progress(
    console: Console, total: int, unit: str, enabled: bool = True
) -> Iterator[Callable[[int, str], None]]:
    """A progress bar over the runs of a compare or a fault matrix; yields ``update(done, what)``."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} " + unit),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
        redirect_stdout=False,  # see the note above checkpoint_progress
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(unit, total=total)
        yield lambda done, what: progress.update(task, completed=done, description=what)


def summary_table(result: JobResult) -> Table:
    t = Table(
        title=f"commitlab run: {result.protocol}, {result.writers} writers",
        show_header=False,
        title_justify="left",
    )
    t.add_column("what", style="bold")
    t.add_column("value")
    t.add_row("status", _status(result.status))
    if result.error:
        t.add_row("error", str(result.error))
    t.add_row("rows in", _rows_in(result))
    t.add_row("checkpoints", checkpoints_line(result))
    for label, text in _recovery_rows(result):
        t.add_row(label, text)
    commits = result.commits
    t.add_row(
        "commits",
        f"{len(commits)}: "
        + ", ".join(f"{c['instant']} (ckp {c['checkpoint']}, {c['rows']:,} rows)" for c in commits[:6])
        + (" ..." if len(commits) > 6 else ""),
    )
    if result.empty_rounds:
        t.add_row("empty rounds", empty_rounds_line(result.empty_rounds))
    timing = result.timing
    t.add_row("time", f"{timing['run_s']:.2f}s run + {timing['setup_s']:.2f}s set-up; {result.rows_per_s:,.0f} rows/s")
    for label, text in dfs_rows(result.figures):
        t.add_row(label, text)
    t.add_row("RPCs (whole run)", ", ".join(f"{k} {v}" for k, v in sorted(result.figures.rpcs.items())))
    blocked = result.figures.writer_blocked_s
    if blocked:
        t.add_row("blocked", blocked_line(blocked))
    if result.exactly_once is None:
        t.add_row("exactly-once", "not checked (the run did not finish)")
    else:
        t.add_row("exactly-once", verdict_line(result.exactly_once))
    if result.committed_prefix is not None:
        t.add_row("committed prefix", prefix_line(result.committed_prefix))
    return t


# what each role's DFS row counts, where the role's name alone could be misread
ROLE_NOTES = {"writer": "protocol", "writer.data": "writing files"}


def dfs_rows(figures: RunFigures) -> list[tuple[str, str]]:
    """DFS operations per checkpoint by role (every role of the job: the protocol's and the write
    tasks' data work) and by part of the table; both add up to the same total, said in a row of its
    own with what neither counts (the driver's set-up and verification)."""
    # no checkpoint completed or aborted: the figures are the whole run's, and say so
    per = "ckp" if figures.checkpoints.completed + figures.checkpoints.aborted else "run (no checkpoint)"
    rows = []
    for role, ops in figures.dfs_per_checkpoint_by_role().items():
        label = f"{role}: {ROLE_NOTES[role]}" if role in ROLE_NOTES else role
        rows.append((f"DFS ops/{per} ({label})", ", ".join(f"{op} {n:g}" for op, n in ops.items())))
    driver = sum(figures.dfs_ops.get(roles.DRIVER, {}).values())
    by_component = figures.dfs_per_checkpoint_by_component
    total = f"{figures.dfs_total_per_checkpoint():g} = the rows above" + (" = the parts below" if by_component else "")
    if driver:
        total += f"; the driver's {driver:,} ops (set-up, verify) are in neither"
    rows.append((f"DFS ops/{per}, all roles", total))
    if by_component:
        rows.append((f"DFS ops/{per} by part", ", ".join(f"{c} {n:g}" for c, n in by_component.items())))
    return rows


def empty_rounds_line(empty: list[int]) -> str:
    """How many checkpoints completed without data, and which (checkpoint ids, not a count)."""
    which = "checkpoint" if len(empty) == 1 else "checkpoints"
    return f"{len(empty)} ({which} {', '.join(map(str, empty))} completed without data)"


def checkpoints_line(result: JobResult) -> str:
    """The checkpoints by outcome, the pending ones too (a run stopped mid-checkpoint has one)."""
    ckp = result.figures.checkpoints
    pending = [k for k, c in ckp.detail.items() if c["status"] == "pending"]
    line = f"{ckp.completed} completed, {ckp.aborted} aborted"
    if pending:
        line += f", {len(pending)} pending ({', '.join(pending)})"
    return line + f", of {ckp.requested} requested"


def blocked_line(blocked_s: dict[str, float]) -> str:
    """How many writers waited for an instant, and how long: every one when few, else the longest."""
    noun = "writer" if len(blocked_s) == 1 else "writers"
    if len(blocked_s) > SHOWN_LONGEST:
        shown, which = longest_waits(blocked_s), "; the longest: "
    else:
        shown, which = sorted(blocked_s.items()), ": "
    return f"{len(blocked_s)} {noun} blocked" + which + ", ".join(f"{k} {v:.2f}s" for k, v in shown)


def prefix_line(prefix: CommittedPrefix) -> str:
    """What a run that did not finish committed, checked: its commits must hold exactly ``prefix``."""
    if prefix.verified is None:
        return escape(prefix.prefix)
    if prefix.error:
        return f"[red]not verified[/red]: {escape(prefix.error)}"
    if prefix.lost is None:  # checked on the timeline (a run stopped in its start-up), not record by record
        return f"the table holds {escape(prefix.prefix)}: verified"
    return f"the table holds {escape(prefix.prefix)}: " + verdict_line(prefix)


def _rows_in(result: JobResult) -> str:
    rows_in, records = result.figures.rows_in, result.records
    if not result.failovers:
        return f"{rows_in:,} of {records:,}"
    resumed = result.failovers[-1].resumed_round
    return f"{rows_in:,} read by the last attempt (it resumed at round {resumed}); {records:,} in the stream"


def _recovery_rows(result: JobResult) -> list[tuple[str, str]]:
    """Failovers, rollbacks and faults: what a run went through, never hidden."""
    rows = []
    for n, f in enumerate(result.failovers, start=1):
        down = f" (down {f.down_s:.1f}s)" if f.down_s is not None else ""
        rows.append(
            (
                f"failover {n}",
                f"{f.strategy}, restored checkpoint {f.restored_checkpoint}{down}: {escape(str(f.error))}",
            )
        )
    for r in result.rollbacks:
        rows.append(("rolled back", f"{r['instant']}: {escape(r['reason'])}"))
    if result.faults_armed:
        fired = [f"{f['point']} in {f['role']}" for f in result.faults_fired]
        text = f"armed {', '.join(result.faults_armed)}; fired: {', '.join(fired) or 'none'}"
        if result.faults_not_fired:
            text += f"; [red]never fired: {', '.join(result.faults_not_fired)}[/red] (the run did not test them)"
        rows.append(("faults", text))
    return rows


def verdict_line(eo: ExactlyOnce | CommittedPrefix) -> str:
    head = "[green]verified[/green]" if eo.verified else "[red]VIOLATED[/red]"
    if eo.error:
        return f"{head}: {eo.error}"
    line = (
        f"{head}: expected {eo.expected or 0:,}, actual {eo.actual or 0:,}, lost {eo.lost}, "
        f"duplicated {eo.duplicated}, unexpected {eo.unexpected}, "
        f"mismatched {eo.mismatched or 0}"
    )
    if isinstance(eo, ExactlyOnce) and eo.commits_checked is not None:
        bad = len(eo.commit_problems or [])
        line += f"; {eo.commits_checked} commits' incremental reads " + (
            "match their metadata" if not bad else f"[red]{bad} differ from their metadata[/red]"
        )
    return line


def why_not_verified(eo: ExactlyOnce) -> str:
    """The verdict in plain text with the first reasons a commit's incremental read differed
    (what a failed check should print in one line)."""
    line = Text.from_markup(verdict_line(eo)).plain
    reasons = [r for p in (eo.commit_problems or [])[:3] for r in p.get("reasons", [])]
    samples = {k: v for k, v in eo.samples.items() if v}
    return line + (f"; {reasons}" if reasons else "") + (f"; samples {samples}" if samples else "")


def verdict_table(eo: ExactlyOnce, title: str) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    t.add_row("exactly-once", verdict_line(eo))
    for kind, keys in eo.samples.items():
        if keys:
            t.add_row(f"{kind} (sample)", ", ".join(map(str, keys)))
    if eo.identity:
        t.add_row("record identity", eo.identity)
    for p in eo.commit_problems or []:
        t.add_row(f"commit {p['instant']}", escape("; ".join(p.get("reasons") or [str(p)])))
    return t


def audit_table_view(audit: Audit) -> Table:
    """The findings of :func:`runtime.lab.table_audit.audit_table`, errors first."""
    # "consistent" is verify's headline alone, once every check ran (verify_headline)
    head = "[green]no error[/green]" if audit.ok else f"[red]{len(audit.errors)} error(s)[/red]"
    t = Table(title=f"table check {audit.table}: {head}", show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    t.add_row(
        "timeline",
        f"{len(audit.completed)} completed commit(s), {len(audit.pending)} pending"
        + (f" ({', '.join(audit.pending[:5])})" if audit.pending else ""),
    )
    t.add_row("snapshot", f"{audit.snapshot_rows:,} rows in {audit.file_groups} file group(s)")
    colour = {"error": "red", "warning": "yellow", "info": "cyan"}
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(audit.findings, key=lambda f: order.get(f.severity, 3)):
        c = colour.get(f.severity, "white")
        t.add_row(f"[{c}]{f.severity}[/{c}] {f.kind}", escape(f.message))
    return t


def verify_headline(table: str, audit: Audit, problems: int, verified: bool) -> str:
    """verify's last line: "consistent" exactly when every check passed (exit 0), else what failed."""
    if audit.ok and verified:
        return f"verify {table}: [green]consistent[/green]"
    failed = [f"{len(audit.errors)} table error(s)"] if audit.errors else []
    failed += [f"{problems} commit(s) with a problem"] if problems else []
    if not failed:
        failed = ["the table does not hold what was written"]
    return f"verify {table}: [red]NOT consistent[/red]: {', '.join(failed)}"


_STATUS_COLOUR = {Status.FINISHED: "green", Status.DEADLOCKED: "red", Status.FAILED: "red", Status.TIMED_OUT: "red"}


def _status(status: Status) -> str:
    colour = _STATUS_COLOUR.get(status, "yellow")
    return f"[{colour}]{status.value}[/{colour}]"
