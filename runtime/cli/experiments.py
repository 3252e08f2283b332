"""``commitlab compare`` and ``faults``: many jobs on Ray, one per protocol (and table type) or
per protocol x fault point x seed, each checked for exactly-once."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console

from runtime.cli import exits
from runtime.cli.kafka import add_broker_timeout, control_topic_for
from runtime.cli.options import (
    PROTOCOLS_HELP,
    check_writable_dir,
    job_command,
    job_config,
    names_option,
    protocol_names,
    protocol_specs,
)
from runtime.cli.terminal import engine_log, engines_to_log
from runtime.core.config import ConfigError, JobConfig
from runtime.core.job_options import TABLE_TYPES


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from actors.job import run_job
    from actors.ray_session import ray_scope
    from actors.rpc_round_trip import measure_rpc_round_trip
    from runtime.faults.scenarios import with_quiet_round
    from runtime.lab.compare import compare_tables, plot_compare, run_compare, run_count
    from runtime.lab.report import runs_progress

    out = check_writable_dir(args.out, "--out")
    names = protocol_specs(args.protocols)
    table_types = list(TABLE_TYPES) if args.table_type == "both" else [args.table_type]
    args.table_type = table_types[0]
    base = job_config(args, out)
    if args.schedule == "quiet-round":
        base = with_quiet_round(base)
    base.validate(protocol_names())
    runs = run_count(base, names) * len(table_types)
    with (
        control_topic_for(base, console, args.broker_timeout) as base,  # a broker row: reached, or exit 2
        engines_to_log(engine_log(args, out)),
        ray_scope(),
        runs_progress(console, runs, "runs", enabled=not args.quiet) as update,
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
        update(runs, "done")
    plots = plot_compare(doc, out)
    for table in compare_tables(doc):
        console.print(table)
    console.print(f"results: {os.path.join(out, 'compare.json')}; plots: {', '.join(plots)}")
    bad = [n for n, r in doc["protocols"].items() if not r["deadlock"] and r["exactly_once"] is not True]
    if bad:
        console.print(f"[red]not verified: {', '.join(bad)}[/red]")
    return exits.of_compare(bad)


def cmd_faults(args: argparse.Namespace, console: Console) -> int:
    from actors.job import run_job
    from actors.ray_session import ray_scope
    from runtime.core.fault_spec import FAULT_POINTS
    from runtime.lab.fault_matrix import (
        OUTCOMES,
        SCENARIO_FAULTS,
        earlier_cells,
        outcome_table,
        plot_heatmap,
        run_matrix,
    )
    from runtime.lab.report import runs_progress

    known = list(FAULT_POINTS) + list(SCENARIO_FAULTS)
    if args.list:
        for name in known:
            console.print(f"{name:45s} {FAULT_POINTS.get(name) or SCENARIO_FAULTS[name]}")
        return exits.ExitCode.OK
    out = check_writable_dir(args.out, "--out")
    earlier = earlier_cells(out)
    if earlier:
        raise ConfigError(
            f"--out {out} holds {len(earlier)} run folder(s) of an earlier fault matrix (e.g. {earlier[0]}): "
            "their tables would take this run's writes and their rows would count in its verdicts; "
            "give a new --out, or remove that folder first"
        )
    protocols = protocol_specs(args.protocols)
    faults = names_option(args.faults, known, "--faults")
    base = job_config(args, out, arm_faults=False)  # here --faults names the matrix's columns
    base.validate(protocol_names())
    total = len(protocols) * len(faults) * args.seeds
    with (
        engines_to_log(engine_log(args, out)),
        ray_scope(),
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
    return exits.of_faults(counts)


def add_commands(sub: Any) -> None:
    """Registers ``compare`` and ``faults``."""
    cmp = job_command(
        sub,
        "compare",
        "run the same workload under every protocol",
        JobConfig(writers=4),
        out="commitlab-compare",
        more_choices={"table_type": (["both"], "both: every protocol on each, side by side")},  # compare alone
    )
    cmp.add_argument("--protocols", default="", help=PROTOCOLS_HELP)
    cmp.add_argument(
        "--schedule",
        choices=["quiet-round", "even"],
        default="quiet-round",
        help="quiet-round: round 2 carries no data and its completion arrives late (a quiet period in the "
        "stream; exposes P1's deadlock); even: data in every round (default: quiet-round)",
    )
    add_broker_timeout(cmp)
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
    flt = job_command(
        sub,
        "faults",
        "protocols x fault points x seeds, each run checked for exactly-once",
        matrix_defaults,
        out="commitlab-faults",
        exclude=("faults",),
    )
    flt.add_argument("--protocols", default="", help=PROTOCOLS_HELP)
    flt.add_argument("--faults", default="", help="comma-separated fault points and scenarios (default: all)")
    flt.add_argument("--seeds", type=int, default=1, help="runs per cell (default: 1)")
    flt.add_argument(
        "--parallel", type=int, default=2, help="runs at a time (default 2: one run's waits overlap the other's work)"
    )
    flt.add_argument("--list", action="store_true", help="list the fault points and exit")
    flt.set_defaults(func=cmd_faults, protocol="message-bus", trace=None)
