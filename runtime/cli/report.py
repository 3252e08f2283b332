"""``commitlab report``: one self-contained HTML page of a command's ``--out`` directory; ``commitlab
timeline``: a trace file drawn as the timeline picture, and checked."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.cli.options import CommandParser, add_config_option, check_writable_dir
from runtime.core.config import ConfigError


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from runtime.lab.html_report import write_report

    if not os.path.isdir(args.dir):
        raise ConfigError(f"report: {args.dir} is not a directory; give the --out directory of a command")
    # the page's directory, checked before the page is built (DIR itself by default)
    check_writable_dir(os.path.dirname(os.path.abspath(args.html)) if args.html else args.dir, "--html")
    try:
        path = write_report(args.dir, args.html)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    console.print(f"report: {path}")
    return ExitCode.OK


def cmd_timeline(args: argparse.Namespace, console: Console) -> int:
    import json

    from runtime.lab.timeline_plot import plot_trace_file, validate_trace

    try:
        with open(args.trace) as f:
            problems = validate_trace(json.load(f))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"timeline: cannot read the trace file {args.trace}: {exc}") from None
    check_writable_dir(os.path.dirname(os.path.abspath(args.out)), "OUT (the PNG)")
    for line in problems:
        console.print(f"trace: {line}", highlight=False)
    plot = plot_trace_file(args.trace, args.out, result=args.result, title=args.title)
    label = f"; {plot.deadlock_label}" if plot.deadlock_label else ""
    console.print(f"{plot.path}: {len(plot.lanes)} lanes, {plot.counts}{label}", highlight=False)
    return ExitCode.FAILED if problems else ExitCode.OK


def add_command(sub: Any) -> None:
    rep: CommandParser = sub.add_parser(
        "report",
        help="one self-contained HTML page of a run, a compare, a fault matrix or an exploration",
    )
    rep.add_argument("dir", help="the --out directory of a run, deadlock, compare, faults, simulate, explore or check")
    rep.add_argument("--html", default=None, help="where to write the page (default: DIR/report.html)")
    add_config_option(rep, job=False)
    rep.set_defaults(func=cmd_report)
    tl: CommandParser = sub.add_parser("timeline", help="draw a Chrome trace file (--trace FILE) as a timeline PNG")
    tl.add_argument("trace", help="a Chrome trace-event file (a run's --trace FILE, or the simulator's)")
    tl.add_argument("out", help="the PNG to write")
    tl.add_argument("--result", default=None, help="the run's result.json (deadlock, checkpoints, title)")
    tl.add_argument("--title", default=None, help="the picture's title")
    add_config_option(tl, job=False)
    tl.set_defaults(func=cmd_timeline)
