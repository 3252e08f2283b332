"""The ``commitlab`` command line (also ``python -m runtime``): one parser, the dispatch, and the
one place bad input becomes exit status 2."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from runtime.cli import check, conformance, experiments, explore, jobs, kafka, report, s3_endpoint, simulator, soak
from runtime.cli.exits import ExitCode
from runtime.cli.options import CommandParser, apply_config_file
from runtime.cli.terminal import StoppedBeforeTheJob, console_width, terminal
from runtime.core.errors import UserError


def build_parser() -> tuple[CommandParser, dict[str, CommandParser]]:
    """The parser and each command's sub-parser (a --config file sets a sub-parser's defaults)."""
    parser = CommandParser(
        prog="commitlab", description="Runs Hudi's Flink-writer commit protocols on Ray and checks what they commit."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    jobs.add_run_commands(sub)
    experiments.add_commands(sub)
    conformance.add_command(sub)
    jobs.add_verify_command(sub)
    report.add_command(sub)
    simulator.add_commands(sub)
    explore.add_commands(sub)
    check.add_command(sub)
    s3_endpoint.add_command(sub)
    kafka.add_command(sub)
    soak.add_command(sub)
    return parser, dict(sub.choices)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; with ``--config FILE`` the file's values are the defaults flags override
    (and a value the file gives is no longer required on the command line)."""
    parser, commands = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    command, config = _command_and_config(argv)
    if config and command in commands:
        apply_config_file(commands[command], config, command)
    return parser.parse_args(argv)


def _command_and_config(argv: list[str]) -> tuple[str | None, str | None]:
    command = next((a for a in argv if not a.startswith("-")), None)
    config = None
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            config = argv[i + 1]
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
    return command, config


def main(argv: list[str] | None = None) -> int:
    out = terminal()
    try:
        return _main(argv, Console(file=out, width=console_width(out)))
    finally:
        if out is not sys.stdout:
            out.close()  # the console's own copy of the terminal


def _main(argv: list[str] | None, console: Console) -> int:
    try:
        args = parse_args(argv)
        code: int = args.func(args, console)  # the chosen command's handler, set by its sub-parser
        return code
    except UserError as exc:  # bad input: its message, no traceback
        console.print(f"[red]{exc.title()}:[/red] {exc}", highlight=False)
        return ExitCode.USAGE
    except StoppedBeforeTheJob as exc:  # after the modules loaded, before a job's own handlers
        console.print(f"[yellow]{exc}: stopped before the job started (no result.json)[/yellow]", highlight=False)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # a second stopping signal (StopNow), or one outside a job
        console.print("[yellow]interrupted[/yellow]")
        return int(getattr(exc, "exit_code", ExitCode.INTERRUPTED))
