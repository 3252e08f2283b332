"""The options of several jobs on one table (``--jobs``, ``--jobs-overlap``, ``--jobs-start``,
``--writer-guard``), shared by the commands that take them, and the output of such a run."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.core.config import JobConfig
from runtime.core.jobs_spec import MAX_JOBS, OVERLAPS, WRITER_GUARDS, JobsSpec, concurrency_mode, parse_start


def add_jobs_options(p: Any) -> None:
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help=f"whole Flink jobs writing the one table, each with its own stream (1 or {MAX_JOBS}; default: 1)",
    )
    p.add_argument(
        "--jobs-overlap",
        choices=OVERLAPS,
        default="none",
        help="what the jobs' streams share: none (distinct keys and partitions, so distinct file groups), "
        "file-groups (distinct keys, same partitions and buckets), keys (both update the same keys) (default: none)",
    )
    p.add_argument(
        "--jobs-start",
        default="",
        help="seconds after the command each job starts, comma-separated (default: all at 0)",
    )
    p.add_argument(
        "--writer-guard",
        choices=WRITER_GUARDS,
        default="none",
        help="none: under single-writer both jobs run, as Hudi lets them; lab-lock: the lab's run-wide "
        "table lock refuses the second job (default: none)",
    )


def jobs_spec_from(args: argparse.Namespace, cfg: JobConfig) -> JobsSpec:
    """The validated spec of the arguments (a ConfigError names the flag: exit 2 before anything starts)."""
    spec = JobsSpec(
        jobs=args.jobs, overlap=args.jobs_overlap, start_s=parse_start(args.jobs_start), writer_guard=args.writer_guard
    )
    return spec.validate(concurrency_mode(cfg))


def print_jobs(console: Console, result: Any, out: str, again: str | None = None) -> None:
    from runtime.lab.jobs_result import jobs_table

    console.print(jobs_table(result))
    colour = "green" if result.verified else "red"
    console.print(f"[{colour}]{result.verdict_line()}[/{colour}]", highlight=False)
    sim = result.simulation
    if sim is not None:
        console.print(
            f"simulated {sim.virtual_s:.3f} virtual s in {sim.wall_s:.2f} real s (seed {sim.seed}); "
            f"trace: {sim.trace_events} events, sha256 {sim.trace_sha256[:16]}",
            highlight=False,
        )
    if again:
        console.print(f"replay: {again}", highlight=False)
    console.print(f"result: {os.path.join(out, 'result.json')}", highlight=False)


def jobs_exit(result: Any) -> ExitCode:
    return ExitCode.OK if result.verified else ExitCode.FAILED


def add_table_jobs_options(p: Any) -> None:
    """``--table-jobs`` and ``--jobs-overlap`` of explore, replay and check, whose ``--jobs`` is
    their worker processes: each run puts that many whole jobs on its table."""
    p.add_argument(
        "--table-jobs",
        type=int,
        default=1,
        help=f"whole Flink jobs on each run's table, each with its own stream (1 or {MAX_JOBS}; default: 1)",
    )
    p.add_argument(
        "--jobs-overlap",
        choices=OVERLAPS,
        default="none",
        help="what the jobs' streams share with --table-jobs 2 (as simulate's; default: none)",
    )


def table_jobs_from(args: argparse.Namespace, cfg: JobConfig) -> JobsSpec | None:
    """The validated jobs of ``--table-jobs`` (None: one job, the single-job path unchanged)."""
    spec = JobsSpec(jobs=args.table_jobs, overlap=args.jobs_overlap).validate(concurrency_mode(cfg))
    return spec if spec.several else None


def base_options(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The base configuration's options explore, replay and check pass to every run
    (:data:`runtime.sim.explore.OPTION_FIELDS`): those given, and the mode always with
    ``--table-jobs 2`` (it decides what two jobs do to the table)."""
    defaults = JobConfig()
    jobs = getattr(args, "table_jobs", 1)
    out = []
    for name in ("concurrency_mode", "lock_provider", "table_type"):
        value = getattr(args, name, None)
        if value is None:
            continue
        if value != getattr(defaults, name) or (name == "concurrency_mode" and jobs > 1):
            out.append((name, str(value)))
    return tuple(out)
