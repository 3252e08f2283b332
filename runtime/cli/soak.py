"""``commitlab soak``: many simulated checkpoints with random faults, every run verified, the
simulator's memory sampled (:mod:`runtime.sim.soak`)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.cli.options import PROTOCOLS_HELP, CommandParser, add_config_option, check_writable_dir, protocol_specs
from runtime.core.config import ConfigError

PROGRESS_EVERY_S = 5.0


def cmd_soak(args: argparse.Namespace, console: Console) -> int:
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
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_soak)
