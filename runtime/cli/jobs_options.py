"""The options of several jobs on one table (``--jobs``, ``--jobs-overlap``, ``--jobs-start``,
``--writer-guard``), shared by the commands that take them, and the output of such a run."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.core.config import ConfigError, JobConfig
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
    for name in ("concurrency_mode", "lock_provider", "instant_times", "table_type"):
        value = getattr(args, name, None)
        if value is None:
            continue
        if value != getattr(defaults, name) or (name == "concurrency_mode" and jobs > 1):
            out.append((name, str(value)))
    return tuple(out)


def jobs_from(args: argparse.Namespace, cfg: JobConfig) -> tuple[JobConfig, JobsSpec]:
    """The jobs of the arguments (``--jobs``, or a scenario of two jobs), validated."""
    from runtime.faults.scenarios import JOBS_SCENARIOS

    spec = jobs_spec_from(args, cfg)
    scenario = JOBS_SCENARIOS.get(getattr(args, "scenario", "none"))
    if scenario is None:
        return cfg, spec
    cfg, jobs = scenario(cfg)
    spec = dataclasses.replace(jobs, overlap=spec.overlap, writer_guard=spec.writer_guard)
    return cfg, spec.validate(concurrency_mode(cfg))


def simulate_jobs_command(
    args: argparse.Namespace, console: Console, cfg: JobConfig, spec: JobsSpec, out: str, kwargs: dict[str, Any]
) -> int:
    """``simulate --jobs 2``: every job on the one table, the verdict of both streams."""
    from runtime.lab.run_output import remove_result, write_result_doc
    from runtime.sim.multi_job import simulate_jobs
    from runtime.sim.recorder import write_jsonl

    if args.check_determinism:
        raise ConfigError("--check-determinism runs one job; drop it with --jobs 2 (compare two runs' trace sha256)")
    remove_result(out)
    result = simulate_jobs(cfg, spec, seed=args.schedule_seed, workdir=out, trace=args.trace, **kwargs)
    sim = result.simulation
    if args.trace and sim is not None and sim.trace is not None:
        write_jsonl(os.path.join(out, "trace.jsonl"), sim.trace)
    write_result_doc(out, result.to_json())
    print_jobs(console, result, out, None if result.verified else replay_line(args, spec, cfg))
    return jobs_exit(result)


def replay_line(args: argparse.Namespace, spec: JobsSpec, cfg: JobConfig) -> str:
    """The command that runs these jobs again (the flags that made them; a scenario's name)."""
    cmd = f"commitlab simulate --protocol {args.protocol} --seed {args.schedule_seed}"
    if args.scenario != "none":
        cmd += f" --scenario {args.scenario}"
    else:
        cmd += f" --jobs {spec.jobs}" + (f" --jobs-start {args.jobs_start}" if args.jobs_start else "")
    if spec.overlap != "none":
        cmd += f" --jobs-overlap {spec.overlap}"
    cmd += f" --concurrency-mode {cfg.concurrency_mode}"  # the mode decides the verdict: always shown
    for flag in ("lock_provider", "instant_times", "writers", "checkpoints", "records", "table_type"):
        default = getattr(JobConfig(), flag)
        if getattr(args, flag, default) not in (None, default):
            cmd += f" --{flag.replace('_', '-')} {getattr(args, flag)}"
    return cmd + (f" --storage {args.storage}" if args.storage != "disk" else "")
