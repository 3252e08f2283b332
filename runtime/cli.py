"""The ``commitlab`` command line (also ``python -m runtime``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console

from runtime.core.config import TABLE_TYPES, ConfigError, JobConfig
from runtime.core.options import (
    add_config_option,
    add_job_options,
    apply_config_file,
    check_writable_dir,
    config_from_args,
)
from runtime.lab.status import Status

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEADLOCK, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _protocol_names() -> list[str]:
    from runtime.protocols import PROTOCOLS

    return list(PROTOCOLS)


def _config_from(args: argparse.Namespace, out: str, *, arm_faults: bool = True) -> JobConfig:
    """The job configuration of a command's arguments; the table defaults to OUT/table."""
    return config_from_args(args, table=args.table or os.path.join(out, "table"), arm_faults=arm_faults)


@contextlib.contextmanager
def interruptible(console: Console) -> Iterator[threading.Event]:
    """SIGTERM is Ctrl-C. The first one asks the running job to stop (it stops at the watchdog's
    next poll and still writes its record); a second one interrupts at once."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        console.print(f"[yellow]{signal.Signals(signum).name}: stopping the job and writing its record[/yellow]")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def engines_to_log(path: str | None) -> Iterator[None]:
    """Ray's and Spark's own output (the JVM's log lines, Ray's worker warnings, Python warnings)
    goes to ``path`` instead of the terminal, at the file-descriptor level, so processes Ray and
    Spark start inherit it too; the console keeps its own copy of the terminal (:func:`terminal`).
    ``None`` (``--verbose``) leaves everything where it is."""
    if path is None:
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    streams = sys.stdout, sys.stderr
    with open(path, "a", buffering=1) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        sys.stdout = sys.stderr = log
        try:
            yield
        finally:
            log.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sys.stdout, sys.stderr = streams


def terminal() -> Any:
    """What the console writes to: a copy of standard output's descriptor, so that
    :func:`engines_to_log` can move descriptor 1 without moving the console; standard output
    itself when it has no descriptor (a captured stream)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stdout
    return os.fdopen(os.dup(fd), "w", buffering=1, encoding=getattr(sys.stdout, "encoding", None) or "utf-8")


def _engine_log(args: argparse.Namespace, out: str) -> str | None:
    return None if getattr(args, "verbose", False) else os.path.join(out, "logs", "ray-and-spark.log")


def _run_and_report(cfg: JobConfig, out: str, console: Console, args: argparse.Namespace, label: str) -> JobResult:
    """Runs the job with its phases, progress bar, signals and the engines' log; prints its summary."""
    from actors.job import run_job
    from actors.spark import spark_scope
    from runtime.lab.report import PhaseLog, checkpoint_progress, summary_table

    quiet, trace, engine_log = args.quiet, args.trace, _engine_log(args, out)
    phases = PhaseLog(console, enabled=not quiet)
    with (
        interruptible(console) as stop,
        engines_to_log(engine_log),
        spark_scope(),
        checkpoint_progress(console, cfg.checkpoints, label, enabled=not quiet) as progress,
    ):
        result = run_job(cfg, out, on_progress=progress, on_phase=phases, trace_path=trace, stop=stop)
    phases("done" + (f"; Ray's and Spark's own output is in {engine_log}" if engine_log else ""))
    console.print(summary_table(result))
    if result.deadlock:
        console.print(f"[red]{result.deadlock.explanation}[/red]", highlight=False)
    console.print(
        f"result: {os.path.join(out, 'result.json')}"
        + (f"; trace: {trace}" if trace else "")
        + (f"; timeline: {result.timeline}" if result.timeline else "")
    )
    return result


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from runtime.writer.topology import validate_job

    out = check_writable_dir(args.out, "--out")
    cfg = validate_job(_config_from(args, out))
    if "://" not in cfg.table:
        check_writable_dir(cfg.table, "--table")
    from runtime.hudi.layout import resolve_layout

    cfg = resolve_layout(cfg)  # the table's bucket count; options that disagree with the table: exit 2
    result = _run_and_report(cfg, out, console, args, f"{cfg.protocol}: {cfg.records:,} records")
    if result.status == Status.DEADLOCKED:
        return EXIT_DEADLOCK
    if result.status == Status.INTERRUPTED:
        return EXIT_INTERRUPTED
    eo = result.exactly_once
    return EXIT_OK if result.status == Status.FINISHED and eo and eo.verified else EXIT_FAILED


def cmd_deadlock(args: argparse.Namespace, console: Console) -> int:
    from runtime.faults.scenarios import deadlock_config

    out = check_writable_dir(args.out, "--out")
    cfg = deadlock_config(_config_from(args, out)).validate(_protocol_names())
    console.print(
        f"schedule: round 1 with data, round 2 empty, round 3 with data; checkpoint 2's "
        f"completion reaches the coordinator 0.5s late ({cfg.protocol}, {cfg.writers} writers)"
    )
    result = _run_and_report(cfg, out, console, args, f"deadlock schedule: {cfg.protocol}")
    if result.status == Status.DEADLOCKED:
        return EXIT_OK if args.expect != "commits" else EXIT_FAILED
    ok = result.status == Status.FINISHED and bool(result.commits)
    if args.expect == "deadlock":
        return EXIT_FAILED
    return EXIT_OK if ok else EXIT_FAILED


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    """Checks any Hudi table: against itself (timeline, files, metadata, unique records), and
    against an input (``--input``) or a generator run's recorded configuration (``--result``)."""
    from runtime.lab.report import audit_table_view, verdict_table
    from runtime.lab.table_audit import audit_table
    from runtime.lab.verify import verify_commits, verify_run

    expected, commits, source = None, None, ""
    if args.result:
        from runtime.lab.verify import VerifyError, expected_from_result

        try:
            expected, commits, table_of_run = expected_from_result(args.result)
        except VerifyError as exc:
            raise ConfigError(str(exc)) from None
        args.table = args.table or table_of_run
        source = args.result
    if not args.table:
        raise ConfigError("verify needs --table TABLE (or --result DIR/result.json, whose run names its table)")
    table = args.table if "://" in args.table else os.path.abspath(args.table)
    audit = audit_table(table, expected_commits=commits)
    console.print(audit_table_view(audit))
    if args.input:
        console.print(f"reading {args.input} with Spark on Ray to compute the expected state")
        expected = _expected_from_input(args)
        source = args.input
    if expected is None:
        checked = _commits_or_error(table, verify_commits)
        for p in checked["problems"]:
            console.print(f"[red]commit {p['instant']}[/red]: " + "; ".join(p["reasons"]), highlight=False)
        console.print(f"{checked['commits']} commits' incremental reads checked against their metadata")
        return EXIT_OK if audit.ok and checked["verified"] else EXIT_FAILED
    partition = args.partition_field if args.input else None  # --result: the table's own field
    verdict = verify_run(table, expected, args.key, partition)
    console.print(verdict_table(verdict, title=f"verify {table} against {source}"))
    return EXIT_OK if verdict.verified and audit.ok else EXIT_FAILED


def _commits_or_error(table: str, check: Any) -> dict[str, Any]:
    """verify_commits, with a reader failure as a problem rather than a traceback."""
    from runtime.lab.verify import VerifyError

    try:
        result: dict[str, Any] = check(table)
    except VerifyError as exc:
        return {"verified": False, "commits": 0, "problems": [{"instant": "(reader)", "reasons": [str(exc)]}]}
    return result


def _expected_from_input(args: argparse.Namespace) -> Any:
    """The expected state of ``--input``, computed in Spark on Ray: one row per (partition, key)."""
    import pyarrow as pa

    from actors.spark import spark_scope, start_spark
    from runtime.data import workload as wl

    with spark_scope():
        spark = start_spark()
        df = wl.read_input(
            spark, args.input, args.key, args.partition_field, args.precombine_field, args.input_format or None
        )
        state = wl.expected_state(df, args.key, args.precombine_field, args.partition_field)
        return pa.Table.from_batches(state._collect_as_arrow())


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from actors.job import measure_rpc_round_trip, run_job
    from runtime.faults.scenarios import with_quiet_round
    from runtime.lab.compare import compare_tables, plot_compare, run_compare
    from runtime.lab.report import runs_progress

    out = check_writable_dir(args.out, "--out")
    names = _names(args.protocols, _protocol_names(), "--protocols")
    table_types = list(TABLE_TYPES) if args.table_type == "both" else [args.table_type]
    args.table_type = table_types[0]
    base = _config_from(args, out)
    if args.schedule == "quiet-round":
        base = with_quiet_round(base)
    base.validate(_protocol_names())
    with (
        engines_to_log(_engine_log(args, out)),
        runs_progress(console, len(names) * len(table_types), "runs", enabled=not args.quiet) as update,
    ):
        update(0, "measuring one actor RPC round trip")
        rtt = measure_rpc_round_trip()
        console.print(f"one actor RPC round trip: p50 {rtt['p50_s'] * 1000:.2f} ms, p99 {rtt['p99_s'] * 1000:.2f} ms")
        doc = run_compare(
            base,
            names,
            out,
            run=lambda cfg, sub: run_job(cfg, sub),
            rtt=rtt,
            on_start=lambda name, i: update(i, f"running {name}"),
            table_types=table_types,
        )
        update(len(names) * len(table_types), "done")
    plots = plot_compare(doc, out)
    for table in compare_tables(doc):
        console.print(table)
    console.print(f"results: {os.path.join(out, 'compare.json')}; plots: {', '.join(plots)}")
    bad = [n for n, r in doc["protocols"].items() if not r["deadlock"] and r["exactly_once"] is not True]
    if bad:
        console.print(f"[red]not verified: {', '.join(bad)}[/red]")
    return EXIT_FAILED if bad else EXIT_OK


def cmd_faults(args: argparse.Namespace, console: Console) -> int:
    from actors.job import run_job
    from runtime.core.fault_spec import FAULT_POINTS
    from runtime.lab.fault_matrix import OUTCOMES, SCENARIO_FAULTS, outcome_table, plot_heatmap, run_matrix
    from runtime.lab.report import runs_progress

    known = list(FAULT_POINTS) + list(SCENARIO_FAULTS)
    if args.list:
        for name in known:
            console.print(f"{name:45s} {FAULT_POINTS.get(name) or SCENARIO_FAULTS[name]}")
        return EXIT_OK
    out = check_writable_dir(args.out, "--out")
    protocols = _names(args.protocols, _protocol_names(), "--protocols")
    faults = _names(args.faults, known, "--faults")
    base = _config_from(args, out, arm_faults=False)  # here --faults names the matrix's columns
    base.validate(_protocol_names())
    total = len(protocols) * len(faults) * args.seeds
    with (
        engines_to_log(_engine_log(args, out)),
        runs_progress(console, total, "runs", enabled=not args.quiet) as update,
    ):
        # no per-run timeline.png: plotting would cost a fifth of each run
        doc = run_matrix(
            base,
            protocols,
            faults,
            args.seeds,
            out,
            run=lambda cfg, sub: run_job(cfg, sub, timeline=False),
            parallel=args.parallel,
            on_run=lambda i, n, what: update(i, what),
        )
        update(len(doc["runs"]), "done")
    heat = plot_heatmap(doc, out)
    console.print(outcome_table(doc))
    counts = {o: sum(1 for r in doc["runs"] if r["outcome"] == o) for o in OUTCOMES}
    console.print(", ".join(f"{o}: {n}" for o, n in counts.items()))
    console.print(f"results: {os.path.join(out, 'faults.json')}; heat map: {heat}")
    return EXIT_FAILED if counts["VIOLATION"] or counts["FAILED"] else EXIT_OK


def _names(text: str, known: list[str], flag: str) -> list[str]:
    """A comma-separated selection from ``known`` (empty: all of them)."""
    names = [n.strip() for n in text.split(",") if n.strip()] or list(known)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return names


def _job_command(
    sub: Any, name: str, help: str, defaults: JobConfig, *, out: str, exclude: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """A command that runs jobs: --out, --trace, --quiet, --config and the job options."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    p.add_argument(
        "--out", default=out, help=f"directory for the results and, without --table, the table (default: {out})"
    )
    p.add_argument("--table", default=None, help="table path or pyarrow.fs URI (default: OUT/table)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--verbose", action="store_true", help="show Ray's and Spark's own output (default: OUT/logs/ray-and-spark.log)"
    )
    add_config_option(p, job=True)
    add_job_options(p, defaults, exclude=exclude)
    return p


def _protocol_option(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--protocol", default=default, choices=_protocol_names(), help=f"the protocol (default: {default})")


def _add_run_commands(sub: Any) -> None:
    run = _job_command(
        sub, "run", "run a streaming write job and verify exactly-once", JobConfig(), out="commitlab-out"
    )
    _protocol_option(run, JobConfig().protocol)
    run.add_argument("--trace", default=None, help="write a Chrome trace-event file for Perfetto (default: none)")
    run.set_defaults(func=cmd_run)

    dl = _job_command(
        sub,
        "deadlock",
        "run the schedule that deadlocks P1 (operator events): a quiet round, then data",
        JobConfig(source="generator", commit_ack_timeout_s=20.0),
        out="commitlab-deadlock",
    )
    _protocol_option(dl, "operator-event")
    dl.add_argument("--trace", default=None, help="write a Chrome trace-event file for Perfetto (default: none)")
    dl.add_argument(
        "--expect",
        choices=["any", "deadlock", "commits"],
        default="any",
        help="exit non-zero unless the run deadlocks / commits (default: any)",
    )
    dl.set_defaults(func=cmd_deadlock)


def _add_experiment_commands(sub: Any) -> None:
    cmp = _job_command(
        sub, "compare", "run the same workload under every protocol", JobConfig(writers=4), out="commitlab-compare"
    )
    cmp.add_argument("--protocols", default="", help="comma-separated protocols (default: all)")
    cmp.add_argument(
        "--schedule",
        choices=["quiet-round", "even"],
        default="quiet-round",
        help="quiet-round: round 2 carries no data and its completion arrives late (a quiet period in the "
        "stream; exposes P1's deadlock); even: data in every round (default: quiet-round)",
    )
    for action in cmp._actions:  # compare alone takes both table types
        if action.dest == "table_type":
            action.choices = [*TABLE_TYPES, "both"]
            action.metavar = "{" + ",".join(action.choices) + "}"
            action.help = f"{action.help}; both: every protocol on each, side by side"
    cmp.set_defaults(func=cmd_compare, protocol="message-bus", trace=None)

    matrix_defaults = JobConfig(
        source="generator",
        writers=2,
        checkpoints=4,
        records=4_000,
        bucket_flush_rows=500,
        checkpoint_timeout_s=4.0,
        rpc_timeout_s=4.0,
    )
    flt = _job_command(
        sub,
        "faults",
        "protocols x fault points x seeds, each run checked for exactly-once",
        matrix_defaults,
        out="commitlab-faults",
        exclude=("faults",),
    )
    flt.add_argument("--protocols", default="", help="comma-separated protocols (default: all)")
    flt.add_argument("--faults", default="", help="comma-separated fault points and scenarios (default: all)")
    flt.add_argument("--seeds", type=int, default=1, help="runs per cell (default: 1)")
    flt.add_argument(
        "--parallel", type=int, default=2, help="runs at a time (default 2: one run's waits overlap the other's work)"
    )
    flt.add_argument("--list", action="store_true", help="list the fault points and exit")
    flt.set_defaults(func=cmd_faults, protocol="message-bus", trace=None)


def _add_verify_command(sub: Any) -> None:
    defaults = JobConfig()
    ver = sub.add_parser(
        "verify",
        help="check a Hudi table: against itself (timeline, files, metadata, unique records) and, "
        "with --input or --result, against what was written",
    )
    ver.add_argument("--table", default="", help="table path or URI (default with --result: the run's table)")
    ver.add_argument(
        "--result",
        default="",
        help="a generator run's result.json: re-derive its expected state and committed instants from it "
        "(default: none)",
    )
    ver.add_argument(
        "--input", default="", help="the input the table was written from: parquet, CSV, JSON (default: none)"
    )
    ver.add_argument(
        "--input-format",
        default="",
        choices=["", "parquet", "csv", "json"],
        help="format of --input (default: from the file names)",
    )
    ver.add_argument("--key", default=defaults.key_field, help=f"record key column (default: {defaults.key_field})")
    ver.add_argument(
        "--partition-field",
        default=defaults.partition_field,
        help=f"partition path column (default: {defaults.partition_field})",
    )
    ver.add_argument(
        "--precombine-field",
        default=defaults.precombine_field,
        help=f"ordering column: the larger value wins an upsert (default: {defaults.precombine_field})",
    )
    add_config_option(ver, job=False)
    ver.set_defaults(func=cmd_verify)


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from runtime.lab.html_report import write_report

    if not os.path.isdir(args.dir):
        raise ConfigError(f"report: {args.dir} is not a directory; give the --out directory of a command")
    try:
        path = write_report(args.dir, args.html)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    console.print(f"report: {path}")
    return EXIT_OK


def _add_report_command(sub: Any) -> None:
    rep = sub.add_parser(
        "report",
        help="one self-contained HTML page of a run, a compare, a fault matrix or an exploration",
    )
    rep.add_argument("dir", help="the --out directory of a run, deadlock, compare, faults, simulate or explore")
    rep.add_argument("--html", default=None, help="where to write the page (default: DIR/report.html)")
    add_config_option(rep, job=False)
    rep.set_defaults(func=cmd_report)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser and each command's sub-parser (a --config file sets a sub-parser's defaults)."""
    parser = argparse.ArgumentParser(
        prog="commitlab", description="Runs Hudi's Flink-writer commit protocols on Ray and checks what they commit."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_commands(sub)
    _add_experiment_commands(sub)
    _add_verify_command(sub)
    _add_report_command(sub)
    from runtime.sim.commands import add_commands as add_sim_commands

    add_sim_commands(sub)
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
        # a pipe or a CI log gets wide tables rather than folded ones
        return _main(argv, Console(file=out, width=None if out.isatty() else 150))
    finally:
        if out is not sys.stdout:
            out.close()  # the console's own copy of the terminal


def _main(argv: list[str] | None, console: Console) -> int:
    try:
        args = parse_args(argv)
        code: int = args.func(args, console)  # the chosen command's handler, set by its sub-parser
        return code
    except ConfigError as exc:
        console.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        return EXIT_USAGE
    except Exception as exc:
        from actors.placement import PlacementError
        from runtime.core.storage import StorageError
        from runtime.data.errors import InputError
        from runtime.hudi.table import TableError

        if isinstance(exc, (InputError, TableError, StorageError, PlacementError)):
            console.print(f"[red]{type(exc).__name__}:[/red] {exc}", highlight=False)
            return EXIT_USAGE
        raise
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
