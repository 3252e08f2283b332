"""``commitlab simulate``: a job under the deterministic simulator (virtual time, one process, no
Ray).

``--seed`` is the schedule's seed (message delays, the roles' random sources); ``--data-seed`` the
generated stream's. ``--check-determinism`` runs twice and stops the second run at the first event
that differs, naming it. The table a simulation writes, and its record, are handled here for the
commands that re-run seeds too (:mod:`runtime.cli.explore`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from typing import TYPE_CHECKING, Any

from rich.console import Console

from runtime.cli import exits
from runtime.cli.jobs_options import (
    add_jobs_options,
    jobs_from,
    simulate_jobs_command,
)
from runtime.cli.options import (
    CommandParser,
    add_config_option,
    add_job_options,
    check_writable_dir,
    config_from_args,
    protocol_help,
    protocol_spec,
)
from runtime.core.config import ConfigError, JobConfig
from runtime.core.json_doc import JsonObject
from runtime.hudi.client.lock import Heartbeat, check_free

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

# what a simulation does not take: it generates its stream in Python and runs in one process
NOT_SIMULATED = (
    "source",
    "input_path",
    "input_format",
    "key_field",
    "partition_field",
    "precombine_field",
    "spark_executors",
    "spark_executor_cores",
    "spark_executor_memory",
    "placement",
)


def add_commands(subparsers: Any) -> None:
    """Registers ``simulate`` on the ``commitlab`` sub-command parser."""
    p: CommandParser = subparsers.add_parser(
        "simulate", help="run a job under the deterministic simulator (virtual time, one process, a seed; no Ray)"
    )
    p.add_argument(
        "--protocol",
        default=JobConfig().protocol,
        type=protocol_spec,
        help=protocol_help(f"the protocol (default: {JobConfig().protocol})"),
    )
    p.add_argument(
        "--seed",
        dest="schedule_seed",
        type=int,
        default=0,
        help="the schedule's seed: message delays, random sources (default: 0)",
    )
    p.add_argument(
        "--out", default="commitlab-sim", help="directory for result.json and the table (default: commitlab-sim)"
    )
    p.add_argument(
        "--scenario",
        choices=["none", "deadlock", "lock-held", "job-restart-overlap"],
        default="none",
        help="a named schedule from runtime.faults.scenarios (deadlock: P1's CommitAckEvent deadlock; "
        "lock-held: a cleaner holds the table lock, #19902; job-restart-overlap: two jobs, the old one's "
        "coordinator commits after the restarted one started, #19357; default: none)",
    )
    _add_simulation_options(p)
    add_jobs_options(p)
    add_config_option(p, job=True)
    add_job_options(p, JobConfig(), exclude=NOT_SIMULATED, flags={"seed": "--data-seed"})
    p.set_defaults(func=cmd_simulate, table=None)


def _add_simulation_options(p: CommandParser) -> None:
    p.add_argument(
        "--check-determinism",
        action="store_true",
        help="run twice with the seed and stop at the first event that differs",
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="write OUT/trace.jsonl (the simulator's events) and OUT/trace.json (Perfetto)",
    )
    p.add_argument(
        "--delay",
        default="uniform:0.0002:0.002",
        help="message delay: uniform:LO:HI, fixed:S or exp:MEAN:CAP, seconds (default: uniform:0.0002:0.002)",
    )
    p.add_argument("--io-delay", default="", help="virtual time each DFS call takes (same forms; default none)")
    p.add_argument(
        "--max-virtual",
        type=float,
        default=None,
        help="stop at this virtual time, seconds (default: the job timeout)",
    )
    p.add_argument("--max-real", type=float, default=600.0, help="real-time guard of one run, seconds (default: 600)")
    p.add_argument("--no-verify", action="store_true", help="skip the exactly-once check with the official reader")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.add_argument(
        "--storage",
        choices=["disk", "memory"],
        default="disk",
        help="disk: real parquet, verified by the official reader (default); memory: the "
        "simulated disk, verified by the project's own snapshot reader (fast)",
    )


def config_from(args: argparse.Namespace, table: str) -> JobConfig:
    """The JobConfig of the arguments, with the scenario applied."""
    from runtime.faults.scenarios import SCENARIOS

    cfg = config_from_args(args, table=table, source="generator")
    if args.scenario in SCENARIOS:
        cfg = SCENARIOS[args.scenario](cfg)
    return cfg


def fresh_table(workdir: str, console: Console, quiet: bool, heartbeat: Heartbeat | None = None) -> None:
    """A simulation writes a fresh table: a previous simulation's under OUT is removed; any other
    table there (a job's, a user's) is refused, never touched, and so is one a live run holds."""
    table = os.path.join(workdir, "table")
    if not os.path.exists(table):
        return
    check_free(table, heartbeat or Heartbeat.of(JobConfig()))  # TableLocked: exit 2, the table untouched
    if not _written_by_a_simulation(workdir):
        raise ConfigError(
            f"{table} exists and no simulation under {workdir} wrote it (its result.json has no simulator "
            "record): a simulation removes the table it writes; give another --out"
        )
    if not quiet:
        console.print(f"removing the previous simulation's table {table}")
    shutil.rmtree(table)


def _written_by_a_simulation(workdir: str) -> bool:
    try:
        with open(os.path.join(workdir, "result.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("sim"), dict)


def _delay(text: str) -> Any:
    from runtime.sim.network import Delay

    if not text:
        return None
    try:
        return Delay.parse(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def cmd_simulate(args: argparse.Namespace, console: Console) -> int:
    from runtime.sim.host import simulate

    out = check_writable_dir(args.out, "--out")
    cfg, spec = jobs_from(args, config_from(args, os.path.join(out, "table")))
    os.makedirs(out, exist_ok=True)
    fresh_table(out, console, args.quiet, Heartbeat.of(cfg))
    kwargs = _simulation_kwargs(args)
    if spec.several:
        return simulate_jobs_command(args, console, cfg, spec, out, kwargs)
    record = simulate(
        cfg,
        seed=args.schedule_seed,
        workdir=out,
        trace=args.trace or args.check_determinism,
        chrome_trace_path=os.path.join(out, "trace.json") if args.trace else None,
        **kwargs,
    )
    events, record.sim.trace = record.sim.trace, None
    determinism = None
    if args.check_determinism:
        determinism = _replay_for_determinism(cfg, args.schedule_seed, out, kwargs, events, record)
    write_simulation(out, record, events if args.trace else None, determinism)
    _print_simulation(console, record, determinism, out, args.trace)
    return exits.of_simulation(record, determinism)


def _simulation_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return dict(
        max_virtual_s=args.max_virtual,
        delay=_delay(args.delay),
        io_delay=_delay(args.io_delay),
        max_real_s=args.max_real,
        verify=not args.no_verify,
        storage=args.storage,
    )


def _replay_for_determinism(
    cfg: JobConfig, seed: int, out: str, kwargs: dict[str, Any], events: Any, result: JobResult
) -> dict[str, Any]:
    """Runs the seed again, stopping at the first event that differs from ``events``."""
    from runtime.sim.host import simulate

    replay_dir = os.path.join(out, ".determinism")
    shutil.rmtree(replay_dir, ignore_errors=True)
    try:
        replay = simulate(cfg, seed=seed, workdir=replay_dir, expect_trace=events, **{**kwargs, "verify": False})
    finally:
        shutil.rmtree(replay_dir, ignore_errors=True)
    first, second = result.sim, replay.sim
    div = second.divergence
    if div is None and second.trace_events != first.trace_events:
        div = {"index": second.trace_events, "first": None, "second": None}
    return {
        "identical": div is None,
        "events": first.trace_events,
        "sha256": first.trace_sha256,
        "replay_sha256": second.trace_sha256,
        "divergence": div,
    }


def write_simulation(out: str, record: JobResult, events: Any, determinism: JsonObject | None = None) -> None:
    """OUT/result.json; with the trace, OUT/trace.jsonl and the picture, as a run on Ray draws it."""
    from runtime.lab.run_output import draw_timeline, write_result
    from runtime.sim.recorder import write_jsonl

    if events is not None:
        write_jsonl(os.path.join(out, "trace.jsonl"), events)
        draw_timeline(out, record)
    write_result(out, record, {"determinism": determinism} if determinism is not None else None)


def _print_simulation(console: Console, result: JobResult, det: dict[str, Any] | None, out: str, traced: bool) -> None:
    from runtime.lab.report import summary_table

    console.print(summary_table(result))
    if result.deadlock:
        console.print(f"[red]{result.deadlock.explanation}[/red]", highlight=False)
    sim = result.sim
    console.print(
        f"simulated {sim.virtual_s:.3f} virtual s in {sim.wall_s:.2f} real s "
        f"(seed {sim.seed}, {sim.sim['messages']} messages, delay {sim.sim['delay']}); "
        f"trace: {sim.trace_events} events, sha256 {sim.trace_sha256[:16]}",
        highlight=False,
    )
    if det is not None and det["identical"]:
        console.print(f"[green]deterministic[/green]: the replay gave the same {det['events']} events", highlight=False)
    elif det is not None:
        d = det["divergence"]
        console.print(
            f"[red]NOT deterministic[/red]: the traces differ at event {d['index']}\n"
            f"  first run:  {d['first']}\n  second run: {d['second']}",
            highlight=False,
        )
    traces = f"; trace: {os.path.join(out, 'trace.jsonl')}, {os.path.join(out, 'trace.json')}" if traced else ""
    console.print(f"result: {os.path.join(out, 'result.json')}{traces}", highlight=False)
