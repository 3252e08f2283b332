"""The ``commitlab`` command line (also ``python -m runtime``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from rich.console import Console

from runtime.core.config import UNSET, ConfigError, JobConfig, Schedule
from runtime.core.fault_spec import FaultSpec

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEADLOCK = 0, 1, 2, 3


def _protocol_names() -> list[str]:
    from runtime.protocols import PROTOCOLS

    return list(PROTOCOLS)


def _add_job_options(p: argparse.ArgumentParser, *, defaults: JobConfig) -> None:
    g = p.add_argument_group("workload")
    g.add_argument("--writers", type=int, default=defaults.writers, help="write tasks (and sources)")
    g.add_argument("--checkpoints", type=int, default=defaults.checkpoints)
    g.add_argument("--records", type=int, default=defaults.records)
    g.add_argument("--keys", type=int, default=defaults.keys, help="distinct keys (0: records/2)")
    g.add_argument("--partitions", type=int, default=defaults.partitions)
    g.add_argument("--buckets", type=int, default=defaults.buckets, help="buckets per partition (0: 2 per writer)")
    g.add_argument("--payload-bytes", type=int, default=defaults.payload_bytes)
    g.add_argument("--seed", type=int, default=defaults.seed)
    g.add_argument(
        "--source",
        choices=["spark", "generator"],
        default=defaults.source,
        help="spark: PySpark on Ray (RayDP) generates or reads the stream; generator: "
        "a built-in Python generator (fast, for tests)",
    )
    g.add_argument("--input", default="", help="parquet, CSV or JSON file or directory read by Spark")
    g.add_argument("--input-format", default="", choices=["", "parquet", "csv", "json"])
    g.add_argument("--key", default=defaults.key_field, help="record key column")
    g.add_argument("--partition-field", default=defaults.partition_field)
    g.add_argument(
        "--precombine-field", default=defaults.precombine_field, help="ordering column: the larger value wins an upsert"
    )
    g.add_argument(
        "--update-ratio",
        type=float,
        default=defaults.update_ratio,
        help="fraction of generated records that update a seen key",
    )
    g.add_argument("--skew", choices=["uniform", "zipf"], default=defaults.skew)
    g.add_argument("--zipf-s", type=float, default=defaults.zipf_s)
    g.add_argument("--spark-executors", type=int, default=defaults.spark_executors)
    g.add_argument("--spark-executor-cores", type=int, default=defaults.spark_executor_cores)
    g.add_argument("--spark-executor-memory", default=defaults.spark_executor_memory)
    g.add_argument("--table", default=None, help="table path or pyarrow.fs URI (default: OUT/table)")
    g.add_argument("--table-name", default=defaults.table_name)
    t = p.add_argument_group("write path and timing")
    t.add_argument("--source-batch-rows", type=int, default=defaults.source_batch_rows)
    t.add_argument(
        "--bucket-flush-rows", type=int, default=defaults.bucket_flush_rows, help="Hudi write.batch.size, in rows"
    )
    t.add_argument(
        "--task-buffer-rows", type=int, default=defaults.task_buffer_rows, help="Hudi write.task.max.size, in rows"
    )
    t.add_argument(
        "--time-scale",
        type=float,
        default=defaults.time_scale,
        help="multiplies every Hudi/Flink default duration (1 = production values; "
        f"default {defaults.time_scale:g}); an explicit duration flag wins",
    )
    t.add_argument(
        "--checkpoint-interval", type=float, default=UNSET, help="seconds (Flink: user-set; 4 s x time scale)"
    )
    t.add_argument("--checkpoint-timeout", type=float, default=UNSET, help="seconds (Flink: 10 min x time scale)")
    t.add_argument(
        "--wait-tick",
        type=float,
        default=UNSET,
        help="a writer's poll interval while waiting for an instant (Hudi: 1 s x time scale)",
    )
    t.add_argument("--commit-ack-timeout", type=float, default=UNSET, help="seconds (Hudi: the checkpoint timeout)")
    t.add_argument(
        "--max-concurrent-checkpoints",
        type=int,
        default=defaults.max_concurrent_checkpoints,
        help="checkpoints in flight at once (Flink's default: 1)",
    )
    t.add_argument("--deadlock-threshold", type=float, default=defaults.deadlock_threshold_s)
    t.add_argument("--job-timeout", type=float, default=defaults.job_timeout_s)
    t.add_argument("--abort-checkpoints", default="", help="comma-separated checkpoint ids to abort")
    t.add_argument(
        "--faults",
        default="",
        help="fault points to arm: point[:target][@checkpoint][#task][=param],... (see commitlab faults --list)",
    )
    t.add_argument(
        "--rpc-timeout",
        type=float,
        default=UNSET,
        help="seconds an RPC between roles may take (Flink's ask timeout: 10 s x time scale)",
    )
    t.add_argument(
        "--max-restarts",
        type=int,
        default=defaults.max_restarts,
        help="failovers from the last completed checkpoint before the job gives up",
    )
    t.add_argument(
        "--no-hold-bootstraps",
        dest="hold_bootstraps",
        action="store_false",
        help="after a region failover, answer each task's bootstrap at once, as Hudi did "
        "before HUDI-6194 (reproduces writes into a rolled-back instant)",
    )
    t.add_argument(
        "--p2-fix-aborted-reread",
        action="store_true",
        help="message-bus only: a later flush of a round keeps the instant the round confirmed "
        "(PR #3915 re-reads the message and hands a second eager flush after an abort the "
        "literal 'aborted'); other protocols ignore it",
    )
    t.add_argument(
        "--failover",
        choices=["global", "region"],
        default=defaults.failover,
        help="global: a task failure restarts every role; region: the tasks, sources and "
        "checkpointing restart, the coordinator keeps running (falls back to global "
        "when the coordinator itself failed)",
    )
    t.add_argument(
        "--control-topic-interval",
        choices=["wall", "checkpoint"],
        default=defaults.control_topic_interval,
        help="control-topic: what ends a commit; wall: the commit interval after START_COMMIT, "
        "as Hudi's Kafka Connect coordinator; checkpoint: each checkpoint trigger",
    )
    t.add_argument(
        "--kafka-commit-interval",
        type=float,
        default=defaults.kafka_commit_interval_s,
        help="control-topic: seconds from START_COMMIT to END_COMMIT with --control-topic-interval "
        "wall (Hudi hoodie.kafka.commit.interval.secs: 60 s)",
    )
    t.add_argument(
        "--placement",
        choices=["spread", "pack", "strict-spread", "none"],
        default=defaults.placement,
        help="how role actors spread over a Ray cluster's nodes (a placement group; none: Ray's default scheduling)",
    )


def _config_from(args: argparse.Namespace, out: str, *, arm_faults: bool = True) -> JobConfig:
    aborts = [int(x) for x in args.abort_checkpoints.split(",") if x.strip()] if args.abort_checkpoints else []
    return JobConfig(
        protocol=args.protocol,
        writers=args.writers,
        checkpoints=args.checkpoints,
        records=args.records,
        keys=args.keys,
        partitions=args.partitions,
        buckets=args.buckets,
        payload_bytes=args.payload_bytes,
        seed=args.seed,
        source=args.source,
        input_path=args.input,
        input_format=args.input_format,
        key_field=args.key,
        partition_field=args.partition_field,
        precombine_field=args.precombine_field,
        update_ratio=args.update_ratio,
        skew=args.skew,
        zipf_s=args.zipf_s,
        spark_executors=args.spark_executors,
        spark_executor_cores=args.spark_executor_cores,
        spark_executor_memory=args.spark_executor_memory,
        table=args.table or os.path.join(out, "table"),
        table_name=args.table_name,
        source_batch_rows=args.source_batch_rows,
        bucket_flush_rows=args.bucket_flush_rows,
        task_buffer_rows=args.task_buffer_rows,
        time_scale=args.time_scale,
        checkpoint_interval_s=args.checkpoint_interval,
        checkpoint_timeout_s=args.checkpoint_timeout,
        wait_tick_s=args.wait_tick,
        commit_ack_timeout_s=args.commit_ack_timeout,
        max_concurrent_checkpoints=args.max_concurrent_checkpoints,
        deadlock_threshold_s=args.deadlock_threshold,
        job_timeout_s=args.job_timeout,
        schedule=Schedule(abort_checkpoints=aborts),
        faults=_parse_faults(args.faults) if arm_faults else [],
        max_restarts=args.max_restarts,
        failover=args.failover,
        rpc_timeout_s=args.rpc_timeout,
        hold_bootstraps=args.hold_bootstraps,
        p2_fix_aborted_reread=args.p2_fix_aborted_reread,
        placement=args.placement,
        control_topic_interval=args.control_topic_interval,
        kafka_commit_interval_s=args.kafka_commit_interval,
    )


def _parse_faults(text: str) -> list[FaultSpec]:
    from runtime.core.fault_spec import parse_faults

    try:
        return parse_faults(text)
    except ValueError as exc:
        raise ConfigError(f"--faults: {exc}") from None


def _run_and_report(
    cfg: JobConfig, out: str, console: Console, *, quiet: bool, trace: str | None, label: str
) -> dict[str, Any]:
    from actors.job import run_job
    from actors.spark import spark_scope
    from runtime.lab.report import checkpoint_progress, summary_table

    if cfg.source == "spark":
        console.print("preparing the stream in Spark on Ray (RayDP): starting Spark takes ~15 s")
    with spark_scope(), checkpoint_progress(console, cfg.checkpoints, label, enabled=not quiet) as progress:
        result = run_job(cfg, out, on_progress=progress, trace_path=trace)
    console.print(summary_table(result))
    if result.get("deadlock"):
        console.print(f"[red]{result['deadlock']['explanation']}[/red]", highlight=False)
    console.print(
        f"result: {os.path.join(out, 'result.json')}"
        + (f"; trace: {trace}" if trace else "")
        + (f"; timeline: {result['timeline']}" if result.get("timeline") else "")
    )
    return result


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    out = os.path.abspath(args.out)
    cfg = _config_from(args, out).validate(_protocol_names())
    from runtime.hudi.layout import resolve_layout

    cfg = resolve_layout(cfg)  # the table's bucket count; options that disagree with the table: exit 2
    result = _run_and_report(
        cfg, out, console, quiet=args.quiet, trace=args.trace, label=f"{cfg.protocol}: {cfg.records:,} records"
    )
    if result["status"] == "deadlocked":
        return EXIT_DEADLOCK
    eo = result.get("exactly_once")
    return EXIT_OK if result["status"] == "finished" and eo and eo["verified"] else EXIT_FAILED


def cmd_deadlock(args: argparse.Namespace, console: Console) -> int:
    from runtime.faults.scenarios import deadlock_config

    out = os.path.abspath(args.out)
    base = JobConfig(
        protocol=args.protocol,
        writers=args.writers,
        source="generator",
        table=args.table or os.path.join(out, "table"),
        deadlock_threshold_s=args.deadlock_threshold,
        commit_ack_timeout_s=args.commit_ack_timeout,
    )
    cfg = deadlock_config(base).validate(_protocol_names())
    console.print(
        f"schedule: round 1 with data, round 2 empty, round 3 with data; checkpoint 2's "
        f"completion reaches the coordinator 0.5s late ({cfg.protocol}, {cfg.writers} writers)"
    )
    result = _run_and_report(
        cfg, out, console, quiet=args.quiet, trace=args.trace, label=f"deadlock schedule: {cfg.protocol}"
    )
    if result["status"] == "deadlocked":
        return EXIT_OK if args.expect != "commits" else EXIT_FAILED
    ok = result["status"] == "finished" and bool(result["commits"])
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
    return EXIT_OK if verdict["verified"] and audit.ok else EXIT_FAILED


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
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from actors.job import measure_rpc_round_trip, run_job
    from runtime.faults.scenarios import with_quiet_round
    from runtime.lab.compare import compare_table, dfs_table, plot_compare, run_compare

    out = os.path.abspath(args.out)
    names = [p.strip() for p in args.protocols.split(",") if p.strip()] or _protocol_names()
    unknown = sorted(set(names) - set(_protocol_names()))
    if unknown:
        raise ConfigError(f"unknown protocol(s) {unknown}; choose from {', '.join(_protocol_names())}")
    base = _config_from(args, out)
    if args.schedule == "quiet-round":
        base = with_quiet_round(base)
    base.validate(_protocol_names())
    rtt = measure_rpc_round_trip()
    console.print(f"one actor RPC round trip: p50 {rtt['p50_s'] * 1000:.2f} ms, p99 {rtt['p99_s'] * 1000:.2f} ms")
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} protocols"),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet,
    ) as progress:
        bar = progress.add_task("compare", total=len(names))

        def on_start(name: str, i: int) -> None:
            progress.update(bar, completed=i, description=f"running {name}")

        doc = run_compare(base, names, out, run=lambda cfg, sub: run_job(cfg, sub), rtt=rtt, on_start=on_start)
        progress.update(bar, completed=len(names), description="done")
    plots = plot_compare(doc, out)
    console.print(compare_table(doc))
    console.print(dfs_table(doc))
    console.print(f"results: {os.path.join(out, 'compare.json')}; plots: {', '.join(plots)}")
    bad = [n for n, r in doc["protocols"].items() if not r["deadlock"] and r["exactly_once"] is not True]
    if bad:
        console.print(f"[red]not verified: {', '.join(bad)}[/red]")
    return EXIT_FAILED if bad else EXIT_OK


def cmd_faults(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from actors.job import run_job
    from runtime.core.fault_spec import FAULT_POINTS
    from runtime.lab.fault_matrix import (
        FAILED,
        KNOWN,
        NOT_APPLICABLE,
        NOT_FIRED,
        PASSED,
        SCENARIO_FAULTS,
        VIOLATION,
        outcome_table,
        plot_heatmap,
        run_matrix,
    )

    known = list(FAULT_POINTS) + list(SCENARIO_FAULTS)
    if args.list:
        for name in known:
            console.print(f"{name:45s} {FAULT_POINTS.get(name) or SCENARIO_FAULTS[name]}")
        return EXIT_OK
    out = os.path.abspath(args.out)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()] or _protocol_names()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()] or known
    for name, pool in (("protocol", _protocol_names()), ("fault", known)):
        bad = sorted(set(protocols if name == "protocol" else faults) - set(pool))
        if bad:
            raise ConfigError(f"unknown {name}(s) {bad}; choose from {', '.join(pool)}")
    base = _config_from(args, out, arm_faults=False)  # here --faults names the matrix's columns
    base.validate(_protocol_names())
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet,
    ) as progress:
        bar = progress.add_task("faults", total=len(protocols) * len(faults) * args.seeds)
        # no per-run timeline.png: plotting would cost a fifth of each run
        doc = run_matrix(
            base,
            protocols,
            faults,
            args.seeds,
            out,
            run=lambda cfg, sub: run_job(cfg, sub, timeline=False),
            parallel=args.parallel,
            on_run=lambda i, n, what: progress.update(bar, completed=i, description=what),
        )
        progress.update(bar, completed=len(doc["runs"]), description="done")
    heat = plot_heatmap(doc, out)
    console.print(outcome_table(doc))
    counts = {
        o: sum(1 for r in doc["runs"] if r["outcome"] == o)
        for o in (PASSED, KNOWN, VIOLATION, FAILED, NOT_FIRED, NOT_APPLICABLE)
    }
    console.print(", ".join(f"{o}: {n}" for o, n in counts.items()))
    console.print(f"results: {os.path.join(out, 'faults.json')}; heat map: {heat}")
    return EXIT_FAILED if counts[VIOLATION] or counts[FAILED] else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    defaults = JobConfig()
    parser = argparse.ArgumentParser(
        prog="commitlab", description="Runs Hudi's Flink-writer commit protocols on Ray and checks what they commit."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a streaming write job and verify exactly-once")
    run.add_argument("--protocol", default=defaults.protocol, choices=_protocol_names())
    run.add_argument("--out", default="commitlab-out", help="directory for result.json and the table")
    run.add_argument("--trace", default=None, help="write a Chrome trace-event file (Perfetto)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_job_options(run, defaults=defaults)
    run.set_defaults(func=cmd_run)

    dl = sub.add_parser("deadlock", help="run the schedule that deadlocks P1 (operator events)")
    dl.add_argument("--protocol", default="operator-event", choices=_protocol_names())
    dl.add_argument("--writers", type=int, default=2)
    dl.add_argument("--out", default="commitlab-deadlock")
    dl.add_argument("--table", default=None)
    dl.add_argument("--trace", default=None)
    dl.add_argument("--quiet", action="store_true")
    dl.add_argument("--deadlock-threshold", type=float, default=2.0)
    dl.add_argument("--commit-ack-timeout", type=float, default=20.0)
    dl.add_argument(
        "--expect",
        choices=["any", "deadlock", "commits"],
        default="any",
        help="exit non-zero unless the run deadlocks / commits",
    )
    dl.set_defaults(func=cmd_deadlock)

    cmp = sub.add_parser("compare", help="run the same workload under every protocol")
    cmp.add_argument("--protocols", default="", help="comma-separated (default: all)")
    cmp.add_argument("--out", default="commitlab-compare")
    cmp.add_argument(
        "--schedule",
        choices=["quiet-round", "even"],
        default="quiet-round",
        help="quiet-round: round 2 carries no data and its completion arrives late "
        "(a quiet period in the stream; exposes P1's deadlock); even: data in every round",
    )
    cmp.add_argument("--quiet", action="store_true")
    _add_job_options(cmp, defaults=JobConfig(writers=4))
    cmp.set_defaults(func=cmd_compare, protocol="message-bus", trace=None)

    flt = sub.add_parser("faults", help="protocols x fault points x seeds, each run checked for exactly-once")
    flt.add_argument("--protocols", default="", help="comma-separated (default: all)")
    flt.add_argument("--seeds", type=int, default=1)
    flt.add_argument(
        "--parallel", type=int, default=2, help="runs at a time (default 2: one run's waits overlap the other's work)"
    )
    flt.add_argument("--out", default="commitlab-faults")
    flt.add_argument("--list", action="store_true", help="list the fault points and exit")
    flt.add_argument("--quiet", action="store_true")
    _add_job_options(
        flt,
        defaults=JobConfig(
            source="generator",
            writers=2,
            checkpoints=4,
            records=4_000,
            bucket_flush_rows=500,
            checkpoint_timeout_s=4.0,
            rpc_timeout_s=4.0,
        ),
    )
    flt.set_defaults(func=cmd_faults, protocol="message-bus", trace=None)

    ver = sub.add_parser(
        "verify",
        help="check a Hudi table: against itself (timeline, files, metadata, unique records) and, "
        "with --input or --result, against what was written",
    )
    ver.add_argument("--table", default="", help="table path or URI (default with --result: the run's table)")
    ver.add_argument(
        "--result",
        default="",
        help="a generator run's result.json: re-derive its expected state and committed instants from it",
    )
    ver.add_argument("--input", default="", help="the input the table was written from (parquet, CSV, JSON)")
    ver.add_argument("--input-format", default="", choices=["", "parquet", "csv", "json"])
    ver.add_argument("--key", default=defaults.key_field)
    ver.add_argument("--partition-field", default=defaults.partition_field)
    ver.add_argument("--precombine-field", default=defaults.precombine_field)
    ver.set_defaults(func=cmd_verify)

    from runtime.sim.commands import add_commands as add_sim_commands

    add_sim_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # a pipe or a CI log gets wide tables rather than folded ones
    console = Console(width=None if sys.stdout.isatty() else 150)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args, console)  # the chosen command's handler, set by its sub-parser
        return code
    except ConfigError as exc:
        console.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        return EXIT_USAGE
    except Exception as exc:
        from actors.placement import PlacementError
        from runtime.core.storage import StorageError
        from runtime.data.workload import InputError
        from runtime.hudi.table import TableError

        if isinstance(exc, (InputError, TableError, StorageError, PlacementError)):
            console.print(f"[red]{type(exc).__name__}:[/red] {exc}", highlight=False)
            return EXIT_USAGE
        raise
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
