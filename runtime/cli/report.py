"""``commitlab report``: one self-contained HTML page of a command's ``--out`` directory."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.cli.options import CommandParser, add_config_option
from runtime.core.config import ConfigError


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from runtime.lab.html_report import write_report

    if not os.path.isdir(args.dir):
        raise ConfigError(f"report: {args.dir} is not a directory; give the --out directory of a command")
    try:
        path = write_report(args.dir, args.html)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    console.print(f"report: {path}")
    return ExitCode.OK


def add_command(sub: Any) -> None:
    rep: CommandParser = sub.add_parser(
        "report",
        help="one self-contained HTML page of a run, a compare, a fault matrix or an exploration",
    )
    rep.add_argument("dir", help="the --out directory of a run, deadlock, compare, faults, simulate or explore")
    rep.add_argument("--html", default=None, help="where to write the page (default: DIR/report.html)")
    add_config_option(rep, job=False)
    rep.set_defaults(func=cmd_report)
