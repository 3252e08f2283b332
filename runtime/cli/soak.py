"""``commitlab soak``: many simulated checkpoints with random faults, every run verified, the
simulator's memory sampled (:mod:`runtime.sim.soak`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.cli.options import PROTOCOLS_HELP, CommandParser, add_config_option, check_writable_dir, protocol_specs
from runtime.core.config import ConfigError, JobConfig

PROGRESS_EVERY_S = 5.0
RAY_DEFAULT_MINUTES = 30.0


def cmd_soak(args: argparse.Namespace, console: Console) -> int:
    if args.host == "ray":
        return _ray_soak(args, console)
    from runtime.sim.schedule import SCENARIOS
    from runtime.sim.soak import SoakRecord, soak, write_record

    if args.checkpoints < 1:
        raise ConfigError(f"--checkpoints must be >= 1, got {args.checkpoints}")
    if args.minutes is not None and args.minutes <= 0:
        raise ConfigError(f"--minutes must be > 0, got {args.minutes:g}")
    if args.scenario not in SCENARIOS:
        raise ConfigError(f"--scenario {args.scenario!r}: choose one of {', '.join(SCENARIOS)}")
    out = check_writable_dir(args.out, "--out")
    protocols = protocol_specs(args.protocols)
    limit = f"{args.checkpoints:,} checkpoints" + (f" or {args.minutes:g} min" if args.minutes else "")
    console.print(f"soak: {args.scenario} schedules under {', '.join(protocols)}, until {limit}", highlight=False)
    last = [0.0]

    def progress(record: SoakRecord) -> None:
        if args.quiet or record.wall_s - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = record.wall_s
        console.print(_line(record), highlight=False)

    record = soak(
        protocols, checkpoints=args.checkpoints, minutes=args.minutes, scenario=args.scenario, on_run=progress
    )
    console.print(_line(record), highlight=False)
    path = write_record(record, out)  # before the failures print: it writes the schedules they replay
    slope = record.slope_mib_per_1000()
    console.print(
        f"RSS {record.rss[0].rss_bytes / 2**20:.1f} -> {record.rss[-1].rss_bytes / 2**20:.1f} MiB; slope after the "
        f"warm-up: {'-' if slope is None else f'{slope:+.3f}'} MiB per 1,000 checkpoints; results: {path}",
        highlight=False,
    )
    for failure in record.failures[:10]:
        console.print(f"[red]{failure['outcome']}[/red] {failure['detail']}: {failure['replay']}", highlight=False)
    return ExitCode.FAILED if record.violations else ExitCode.OK


def _ray_soak(args: argparse.Namespace, console: Console) -> int:
    """One long job on Ray (:mod:`actors.soak`), its processes and table sampled as it runs."""
    from actors.ray_session import ray_scope
    from actors.soak import ray_soak
    from runtime.cli.terminal import engine_log, engines_to_log
    from runtime.job.prepare import prepare_job

    minutes = args.minutes if args.minutes is not None else RAY_DEFAULT_MINUTES
    if minutes <= 0 or args.fault_every <= 0 or args.sample_every <= 0:
        raise ConfigError("--minutes, --fault-every and --sample-every must be > 0")
    protocol = args.protocols or "coordination-rpc"
    if "," in protocol:
        raise ConfigError(f"--host ray runs one job: --protocols names one protocol, got {protocol!r}")
    out = check_writable_dir(args.out, "--out")
    base = JobConfig(protocol=protocol_specs(protocol)[0], writers=args.writers, table=os.path.join(out, "table"))
    prepare_job(base)  # the options, before Ray starts
    console.print(
        f"soak on Ray: {protocol}, {args.writers} writers, a checkpoint every 2 s for {minutes:g} min, a fault "
        f"every {args.fault_every:g} min; memory and the table sampled every {args.sample_every:g} s",
        highlight=False,
    )

    def sampled(sample: Any) -> None:
        if not args.quiet:
            rss = sum(r for r, _ in sample["processes"].values()) / 2**20
            console.print(
                f"  {sample['at_s']:6.0f}s  {len(sample['processes'])} processes, RSS {rss:,.0f} MiB; timeline "
                f"{sample['timeline_files']} files; metadata slices {sample['metadata_slices']}",
                highlight=False,
            )

    with engines_to_log(engine_log(args, out)), ray_scope():
        doc, result = ray_soak(
            base,
            out,
            minutes=minutes,
            fault_every_min=args.fault_every,
            sample_every_s=args.sample_every,
            on_sample=sampled,
        )
    total = doc["all_processes_rss_mib"]
    console.print(
        f"{doc['status']}, exactly-once {'verified' if doc['exactly_once'] else 'NOT verified'}; "
        f"{doc['checkpoints_completed']} checkpoints, {doc['commits']} commits, {doc['failovers']} failovers "
        f"({len(doc['faults_fired'])} faults fired)\n"
        f"RSS of the job's processes {total['first']} -> {total['last']} MiB (slope {total['slope_per_hour']} MiB/h); "
        f"active timeline {doc['timeline_files']['min']}..{doc['timeline_files']['max']} files "
        f"(slope {doc['timeline_files']['slope_per_hour']}/h); metadata slices {doc['metadata_slices']['min']}.."
        f"{doc['metadata_slices']['max']}; trace {doc['trace_bytes_per_checkpoint']} bytes per checkpoint\n"
        f"results: {os.path.join(out, 'soak-ray.json')}",
        highlight=False,
    )
    return ExitCode.OK if doc["exactly_once"] and doc["status"] == "finished" else ExitCode.FAILED


def _line(record: Any) -> str:
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(record.outcomes.items()))
    rss = record.rss[-1].rss_bytes / 2**20 if record.rss else 0.0
    return (
        f"  {record.wall_s:6.0f}s  {record.runs:,} runs, {record.checkpoints:,} checkpoints ({outcomes}); "
        f"RSS {rss:.1f} MiB"
    )


def add_command(sub: Any) -> None:
    helptext = "simulate thousands of checkpoints with random faults, verify every run, watch the memory"
    p: CommandParser = sub.add_parser("soak", help=helptext, description=helptext)
    p.add_argument("--protocols", default="", help=PROTOCOLS_HELP)
    p.add_argument("--checkpoints", type=int, default=5_000, help="stop after this many checkpoints (default: 5000)")
    p.add_argument("--minutes", type=float, default=None, help="stop after this many minutes too (default: none)")
    p.add_argument(
        "--scenario", default="random", help="the exploration scenario each seed draws from (default: random)"
    )
    p.add_argument("--out", default="commitlab-soak", help="directory for soak.json (default: commitlab-soak)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--host",
        choices=("sim", "ray"),
        default="sim",
        help="sim: simulated seeds (default); ray: one long job on a local Ray (--minutes, default "
        f"{RAY_DEFAULT_MINUTES:g}), a fault every --fault-every minutes, each process's memory sampled",
    )
    p.add_argument("--writers", type=int, default=2, help="--host ray: write tasks (default: 2)")
    p.add_argument("--fault-every", type=float, default=5.0, help="--host ray: minutes between faults (default: 5)")
    p.add_argument("--sample-every", type=float, default=10.0, help="--host ray: seconds between samples (default: 10)")
    p.add_argument("--verbose", action="store_true", help="--host ray: show Ray's own output")
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_soak)
