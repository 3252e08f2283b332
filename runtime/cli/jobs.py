"""``commitlab run``, ``deadlock`` and ``verify``: one job on Ray, checked; any table, checked."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from runtime.cli import exits
from runtime.cli.jobs_options import add_jobs_options, jobs_exit, jobs_spec_from, print_jobs
from runtime.cli.kafka import add_broker_timeout, control_topic_for
from runtime.cli.options import (
    CommandParser,
    add_config_option,
    check_writable_dir,
    job_command,
    job_config,
    protocol_option,
)
from runtime.cli.terminal import defer_stops_to_the_job, engine_log, engines_to_log, exit_code_of, interruptible
from runtime.core.config import ConfigError, JobConfig
from runtime.core.job_options import IN_PROCESS_LOCK
from runtime.core.jobs_spec import JobsSpec
from runtime.hudi.client.concurrency import hold_for_run, is_multi_writer
from runtime.hudi.client.lock import command_line
from runtime.job.prepare import ResolvedJob, prepare_job
from runtime.lab.results import JobResult
from runtime.lab.status import Status

if TYPE_CHECKING:
    import pyarrow as pa

    from runtime.data.input_format import CheckedInput
    from runtime.lab.audit_findings import Audit
    from runtime.lab.verify import RecordedRun


def run_and_report(
    job: ResolvedJob, out: str, console: Console, args: argparse.Namespace, label: str
) -> tuple[JobResult, int]:
    """Runs the prepared job with its phases, progress bar, signals and the engines' log; prints its
    summary. Returns the result and, for a job a signal stopped, the exit code of that signal."""
    quiet, trace, engines_log = args.quiet, args.trace, engine_log(args, out)
    cfg = job.config
    say_stop_wait(console)
    with interruptible(console) as stop:
        # Ray's and Spark's modules load under the command's handlers (a second or more on busy
        # cores): a stop meanwhile is a stop in the start-up, with its record
        from actors.job import run_job
        from actors.ray_session import end_own_ray, ray_scope
        from actors.spark import spark_scope
        from runtime.lab.report import PhaseLog, checkpoint_progress

        phases = PhaseLog(console, enabled=not quiet)
        with (
            # single-writer: one writer per table, taken before Ray and Spark start, released however
            # the run ends (a multi-writer --concurrency-mode holds none: its commits take the lock)
            hold_for_run(cfg, command_line(), on_take_over=_say(console)) as lock,
            engines_to_log(engines_log),
            ray_scope(),
            spark_scope(),
            checkpoint_progress(console, job.config.checkpoints, label, enabled=not quiet) as progress,
        ):

            def lost_while_waiting(record: JobResult) -> None:
                """The run lost its Ray cluster while this command's thread waits on the GCS in a
                call Ray answers only by ending the process (exit 1, a minute on): the cluster
                watch's thread made the record; the command reports it, ends what it started and
                exits 4 now (actors/cluster_watch.py)."""
                report_run(console, record, out, trace, lambda: phases("done"))
                if lock is not None:
                    lock.release()
                end_own_ray()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(exits.ExitCode.CLUSTER_LOST)

            result = run_job(
                job,
                out,
                on_progress=progress,
                on_phase=phases,
                trace_path=trace,
                stop=stop,
                table_lock=lock,
                on_lost_record=lost_while_waiting,
            )
            stop.ending = True  # the record is made; Spark and Ray are stopped next
    done = "done" + (f"; Ray's and Spark's own output is in {engines_log}" if engines_log else "")
    report_run(console, result, out, trace, lambda: phases(done))
    return result, exit_code_of(stop.signal)


def report_run(console: Console, result: JobResult, out: str, trace: str | None, done: Callable[[], None]) -> None:
    """The run's last lines: ``done`` (its phase), the summary, why it deadlocked or lost its Ray
    cluster, and where its record is."""
    from runtime.lab.report import summary_table

    done()
    console.print(summary_table(result))
    if result.deadlock:
        console.print(f"[red]{result.deadlock.explanation}[/red]", highlight=False)
    if result.ray is not None and result.ray.cluster_lost is not None and result.status == Status.FAILED:
        console.print(f"[red]{escape(str(result.error))}[/red]", highlight=False)
    console.print(
        f"result: {os.path.join(out, 'result.json')}"
        + (f"; trace: {trace}" if trace else "")
        + (f"; timeline: {result.timeline}" if result.timeline else "")
    )


def say_stop_wait(console: Console) -> None:
    """A run submitted as a Ray job whose ``ray job stop`` would SIGKILL it before a stop's
    record is checked says so as it starts, with the fix (:mod:`actors.submitted_job`)."""
    from actors.submitted_job import submitted_job

    job = submitted_job()
    warning = job.stop_warning() if job is not None else None
    if warning:
        console.print(f"[yellow]{warning}[/yellow]", highlight=False)


def _say(console: Console) -> Callable[[str], None]:
    return lambda line: console.print(f"[yellow]{line}[/yellow]", highlight=False)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    defer_stops_to_the_job()  # a stop from here on leaves the job's record
    out = check_writable_dir(args.out, "--out")
    cfg = job_config(args, out)
    spec = jobs_spec_from(args, cfg)
    if spec.several:
        return run_jobs_command(console, cfg, spec, out, args)
    if "://" not in cfg.table:
        check_writable_dir(cfg.table, "--table")
    if cfg.control_topic != "model" and cfg.protocol != "control-topic":
        raise ConfigError(
            f"--control-topic {cfg.control_topic} is the control-topic protocol's option: add --protocol control-topic"
        )
    # the broker, when --control-topic names one, before Ray and Spark: started or reached, or exit 2
    with control_topic_for(cfg, console, args.broker_timeout) as cfg:
        # checked once, before Ray or Spark start: the options, the faults against the protocol, and
        # the table's layout (options that disagree with an existing table: exit 2)
        job = prepare_job(cfg)
        cfg = job.config
        for note in job.input.notes if job.input else ():  # the value scan's bound, when it cut the scan
            console.print(f"[yellow]{note}[/yellow]", highlight=False)
        result, stopped_by = run_and_report(job, out, console, args, f"{cfg.protocol}: {cfg.records:,} records")
    return exits.of_run(result, stopped_by)


def run_jobs_command(console: Console, cfg: JobConfig, spec: JobsSpec, out: str, args: argparse.Namespace) -> int:
    """``run --jobs 2``: every job on Ray in one session, sharing the table, verified once against
    both streams merged (:mod:`actors.multi_job`)."""
    from actors.multi_job import run_jobs
    from actors.ray_session import ensure_ray, ray_scope
    from runtime.lab.report import PhaseLog
    from runtime.lab.run_output import remove_result, write_result_doc

    for given, flag in ((cfg.input_path, "--input"), (cfg.from_checkpoint, "--from-checkpoint")):
        if given:
            raise ConfigError(
                f"{flag} with --jobs {spec.jobs}: each job writes a stream of its own, made by the built-in "
                f"generator (--jobs-overlap says what they share); drop {flag}, or run one job"
            )
    if cfg.control_topic != "model":
        raise ConfigError(
            f"--control-topic {cfg.control_topic} with --jobs {spec.jobs}: one broker's topic would carry both "
            "jobs' events; drop --control-topic (the modelled topic is each job's own)"
        )
    if "://" not in cfg.table:
        check_writable_dir(cfg.table, "--table")
    given_source = cfg.source
    # the options and the table's layout checked before Ray starts; each job's stream is the generator's
    cfg = prepare_job(cfg.replace(source="generator")).config
    if given_source == "spark":
        console.print(
            f"[yellow]--jobs {spec.jobs}: each job's stream is the built-in generator's, made the job's own "
            "(runtime/data/job_streams.py); Spark is not started[/yellow]",
            highlight=False,
        )
    if cfg.lock_provider == IN_PROCESS_LOCK and is_multi_writer(cfg):
        console.print(
            "[yellow]--lock-provider in-process: each job's coordinator runs in a process of its own (a Flink "
            "job's JobManager JVM), so Hudi's InProcessLockProvider excludes nothing between the two jobs, as "
            "between two Flink deployments; --lock-provider filesystem is the lock they share[/yellow]",
            highlight=False,
        )
    remove_result(out)
    say_stop_wait(console)
    phases = PhaseLog(console, enabled=not args.quiet)
    engines_log = engine_log(args, out)
    with (
        interruptible(console) as stop,
        hold_for_run(cfg, command_line(), on_take_over=_say(console)) as lock,  # single-writer: one for the command
        engines_to_log(engines_log),
        ray_scope(),
    ):
        with stop.start_up():
            phases("starting Ray")
            ensure_ray()
        result = run_jobs(cfg, spec, on_phase=phases, stop=stop, table_lock=lock)
        stop.ending = True
    write_result_doc(out, result.to_json())
    print_jobs(console, result, out)
    if result.status == Status.INTERRUPTED:
        return exit_code_of(stop.signal)
    return int(jobs_exit(result))


def cmd_deadlock(args: argparse.Namespace, console: Console) -> int:
    from runtime.faults.scenarios import deadlock_config

    defer_stops_to_the_job()  # a stop from here on leaves the job's record
    out = check_writable_dir(args.out, "--out")
    job = prepare_job(deadlock_config(job_config(args, out)))
    cfg = job.config
    console.print(
        f"schedule: round 1 with data, round 2 empty, round 3 with data; checkpoint 2's "
        f"completion reaches the coordinator 0.5s late ({cfg.protocol}, {cfg.writers} writers)"
    )
    result, stopped_by = run_and_report(job, out, console, args, f"deadlock schedule: {cfg.protocol}")
    return stopped_by if result.status == Status.INTERRUPTED else exits.of_deadlock(result, args.expect)


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    """Checks any Hudi table: against itself (timeline, files, metadata, unique records), and
    against an input (``--input``) or a run's recorded configuration (``--result``)."""
    from runtime.lab.report import audit_table_view, verdict_table, verify_headline
    from runtime.lab.table_audit import audit_table
    from runtime.lab.verify import RecordedRun, VerifyError, verify_commits, verify_run

    input_checked = None
    if args.input:  # an input mistake is refused before any work, as by run
        from runtime.data.input_format import check_input

        input_checked = check_input(
            args.input, args.input_format or None, args.key, args.partition_field, args.precombine_field
        )
    expected, source, run = None, args.result, _recorded(args)
    commits = run.commits if run is not None else None
    if not args.table:
        raise ConfigError("verify needs --table TABLE (or --result DIR/result.json, whose run names its table)")
    table = args.table if "://" in args.table else os.path.abspath(args.table)
    if input_checked is not None:  # read with the types the table holds, as the run wrote them
        from runtime.job.table_schema import reconcile

        input_checked = reconcile(input_checked, table, args.key, args.partition_field, "")
    audit = audit_table(table, expected_commits=commits)
    console.print(audit_table_view(audit))
    if not audit.is_table:  # the user's mistake, named by the finding: exit 2
        console.print(verify_headline(table, audit, 0, False), highlight=False)
        from runtime.hudi.table.table_config import TableError

        raise TableError(audit.errors[0].message)
    if not audit.reader_opens:
        console.print("no commit's incremental read checked: the official reader cannot open the table")
        return _verified(console, table, audit, 0, False)
    if isinstance(run, RecordedRun) and not run.finished and not args.input:
        return _verified_prefix(console, table, audit, run)
    if isinstance(run, RecordedRun):
        try:
            expected = _expected_of_run(run, table, console)
        except VerifyError as exc:
            console.print(f"[red]not verified[/red]: {exc}", highlight=False)
            return _verified(console, table, audit, 0, False)
    if args.input:
        with _engines_quiet(console, args.input):
            expected = _expected_from_input(args, input_checked)
        source = args.input
    if expected is None:
        checked = _commits_or_error(table, verify_commits)
        for p in checked["problems"]:
            console.print(f"[red]commit {p['instant']}[/red]: " + "; ".join(p["reasons"]), highlight=False)
        console.print(_commits_line(checked))
        return _verified(console, table, audit, len(checked["problems"]), checked["verified"])
    partition = args.partition_field if args.input else None  # --result: the table's own field
    key = run.config.key_field if run is not None and not args.input else args.key
    verdict = verify_run(table, expected, key, partition)
    console.print(verdict_table(verdict, title=f"verify {table} against {source}"))
    return _verified(console, table, audit, len(verdict.commit_problems or []), verdict.verified)


def _verified_prefix(console: Console, table: str, audit: Audit, run: RecordedRun) -> int:
    """``verify --result`` of a run that did not finish: its committed prefix, checked as the run
    checks it (the record says what it committed; a stop may have ended the run before its own
    check). The stream is regenerated: the built-in generator's only (Spark keeps no copy)."""
    from runtime.data import generator
    from runtime.lab.prefix import verify_recorded_prefix
    from runtime.lab.report import prefix_line

    if not run.from_generator:
        console.print(
            f"committed prefix of the {run.status} run not checked: its stream was Spark's, which keeps no "
            "copy; verify --table with --input checks the table against the input",
            highlight=False,
        )
        return _verified(console, table, audit, 0, False)
    prefix = verify_recorded_prefix(run, table, generator.generate(run.config))
    console.print(f"committed prefix of the {run.status} run: {prefix_line(prefix)}", highlight=False)
    return _verified(console, table, audit, 0, prefix.verified is True)


def _commits_line(checked: dict[str, Any]) -> str:
    n, unreadable = checked["commits"], checked.get("unreadable", 0)
    if checked.get("no_meta_fields"):
        no_meta = "rows carry no _hoodie_* columns (hoodie.populate.meta.fields=false)"
        return f"{n} commits' incremental reads not checked: {no_meta}"
    line = f"{n - unreadable} of {n} commits' incremental reads checked against their metadata"
    return line + (f"; [red]{unreadable} could not be read[/red]" if unreadable else "")


def _verified(console: Console, table: str, audit: Audit, problems: int, verified: bool) -> int:
    """Prints verify's headline, which follows its exit code; returns the exit code."""
    from runtime.lab.report import verify_headline

    console.print(verify_headline(table, audit, problems, verified), highlight=False)
    return exits.of_verify(audit.ok, verified)


def _recorded(args: argparse.Namespace) -> RecordedRun | None:
    """The run ``--result`` names (None without it); its table is the default ``--table``."""
    from runtime.lab.verify import VerifyError, recorded_run

    if not args.result:
        return None
    try:
        run = recorded_run(args.result)
    except VerifyError as exc:
        raise ConfigError(str(exc)) from None
    args.table = args.table or run.table
    return run


def _expected_of_run(run: RecordedRun, table: str, console: Console) -> pa.Table:
    """The expected state of a recorded run: its stream (the generator's regenerated, or Spark's
    recomputed in Spark from the recorded input or workload), merged into the table as the run
    found it (``table_before``, read back by time travel)."""
    from runtime.lab.verify import generator_state, with_table_before

    cfg = run.config
    if run.from_generator:
        state = generator_state(cfg)
    else:
        with _engines_quiet(
            console, cfg.input_path or f"the Spark workload ({cfg.records:,} records, seed {cfg.seed})"
        ):
            state = _spark_state(cfg, table)
    return with_table_before(table, state, run)


@contextmanager
def _engines_quiet(console: Console, what: str) -> Iterator[None]:
    """Ray and Spark started to read ``what``, their own output (log lines, progress) in a file."""
    from actors.ray_session import ray_scope

    engines_log = os.path.join(tempfile.mkdtemp(prefix="commitlab-verify-"), "ray-and-spark.log")
    console.print(
        f"reading {what} with Spark on Ray to compute the expected state "
        f"(Ray's and Spark's own output goes to {engines_log})"
    )
    with engines_to_log(engines_log), ray_scope():
        yield


def _spark_state(cfg: JobConfig, table: str) -> pa.Table:
    """The expected state of a Spark run's stream, as the run computed it (one row per identity;
    an input read with the types ``table`` holds, as the run cast it)."""
    import pyarrow as pa

    from actors.spark import spark_scope, start_spark
    from actors.stream_plan import spark_stream
    from runtime.data import workload as wl
    from runtime.job.prepare import check_input_of

    checked = check_input_of(cfg.replace(table=table))
    with spark_scope():
        df = spark_stream(start_spark(), cfg, checked)
        state = wl.expected_state(df, cfg.key_field, cfg.precombine_field, cfg.partition_field)
        return pa.Table.from_batches(state._collect_as_arrow())


def _commits_or_error(table: str, check: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """verify_commits, with a reader failure as a problem rather than a traceback."""
    from runtime.lab.verify import VerifyError

    try:
        result = check(table)
    except VerifyError as exc:
        reason = f"no commit checked: {exc}"
        return {"verified": False, "commits": 0, "problems": [{"instant": "(table)", "reasons": [reason]}]}
    return result


def _expected_from_input(args: argparse.Namespace, checked: CheckedInput | None) -> pa.Table:
    """The expected state of ``--input``, computed in Spark on Ray: one row per (partition, key)."""
    import pyarrow as pa

    from actors.spark import spark_scope, start_spark
    from runtime.data import workload as wl

    with spark_scope():
        spark = start_spark()
        df = wl.read_input(
            spark,
            args.input,
            args.key,
            args.partition_field,
            args.precombine_field,
            args.input_format or None,
            checked=checked,
        )
        state = wl.expected_state(df, args.key, args.precombine_field, args.partition_field)
        return pa.Table.from_batches(state._collect_as_arrow())


def add_run_commands(sub: Any) -> None:
    run = job_command(sub, "run", "run a streaming write job and verify exactly-once", JobConfig(), out="commitlab-out")
    protocol_option(run, JobConfig().protocol)
    run.add_argument("--trace", default=None, help="write a Chrome trace-event file for Perfetto (default: none)")
    add_broker_timeout(run)
    add_jobs_options(run)
    run.set_defaults(func=cmd_run)

    dl = job_command(
        sub,
        "deadlock",
        "run the schedule that deadlocks P1 (operator events): a quiet round, then data",
        JobConfig(source="generator", commit_ack_timeout_s=20.0),
        out="commitlab-deadlock",
    )
    protocol_option(dl, "operator-event")
    dl.add_argument("--trace", default=None, help="write a Chrome trace-event file for Perfetto (default: none)")
    dl.add_argument(
        "--expect",
        choices=["any", "deadlock", "commits"],
        default="any",
        help="exit non-zero unless the run deadlocks / commits (default: any)",
    )
    dl.set_defaults(func=cmd_deadlock)


def add_verify_command(sub: Any) -> None:
    defaults = JobConfig()
    ver: CommandParser = sub.add_parser(
        "verify",
        help="check a Hudi table: against itself (timeline, files, metadata, unique records) and, "
        "with --input or --result, against what was written",
        description="Checks a Hudi table of table version 6, 8 or 9 (copy-on-write or merge-on-read, with or "
        "without meta fields). It reads the timeline's commit, deltacommit, replacecommit/clustering (replaced "
        "file groups leave the snapshot), compaction and logcompaction instants, parses clean, rollback, "
        "restore, savepoint and indexing instants and the archived timeline (LSM history from version 8), "
        "compares the metadata table's timeline with the data "
        "timeline both ways and its files partition (HFile base files and HFile log blocks) with the storage "
        "listing, and decodes Avro, parquet, HFile and CDC log data blocks (delete and command blocks are framed). "
        "Notes, not errors: a key written twice by an INSERT or BULK_INSERT instant (Hudi keeps both rows), "
        "pending instants of a write awaiting rollback, rollbacks and the instants they undid, files of "
        "pending or rolled-back instants the metadata table does not list.",
    )
    ver.add_argument("--table", default="", help="table path or URI (default with --result: the run's table)")
    ver.add_argument(
        "--result",
        default="",
        help="a run's result.json: re-derive its expected state (the table before the run merged with its "
        "stream) and committed instants from it (default: none)",
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
