"""``commitlab explore``, ``replay`` and ``shrink``: many seeds of a scenario under the deterministic
simulator (:mod:`runtime.sim.explore`), each run's invariants checked; one seed re-run with its
verdict and trace excerpt; a failing seed's schedule shrunk (:mod:`runtime.sim.shrink`). A run on
real parquet writes its table as ``commitlab simulate`` does (:mod:`runtime.cli.simulator`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from typing import TYPE_CHECKING, Any

from rich.console import Console

from runtime.cli import exits
from runtime.cli.exits import ExitCode
from runtime.cli.jobs_options import add_table_jobs_options, base_options, table_jobs_from
from runtime.cli.options import (
    CommandParser,
    add_config_option,
    add_job_options,
    check_writable_dir,
    protocol_help,
    protocol_names,
    protocol_spec,
)
from runtime.cli.simulator import fresh_table, write_simulation
from runtime.core.config import ConfigError, JobConfig

if TYPE_CHECKING:
    from runtime.lab.results import JobResult
    from runtime.sim.explore import SeedRun
    from runtime.sim.judge import Verdict


def add_commands(subparsers: Any) -> None:
    """Registers ``explore``, ``replay`` and ``shrink`` on the ``commitlab`` sub-command parser."""
    from runtime.sim.schedule import SCENARIOS

    scen_help = "; ".join(f"{k}: {v[1]}" for k, v in SCENARIOS.items())
    p: CommandParser = subparsers.add_parser(
        "explore",
        help="many seeds of a scenario under the simulator, a random schedule each, invariants checked after every run",
    )
    p.add_argument("--scenario", required=True, choices=list(SCENARIOS), help=scen_help)
    p.add_argument("--seeds", type=int, default=100, help="how many seeds, from --first-seed (default: 100)")
    p.add_argument("--first-seed", type=int, default=0, help="the first seed (default: 0)")
    p.add_argument(
        "--protocol",
        type=protocol_spec,
        default=None,
        help=protocol_help("one protocol (default: every protocol, --seeds each)"),
    )
    p.add_argument("--out", default="commitlab-explore", help="directory for explore.json (default: commitlab-explore)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes running seeds side by side; the results do not depend on it (default: one per "
        "CPU, one for fewer than 8 runs)",
    )
    p.add_argument(
        "--real-parquet",
        action="store_true",
        help="write real parquet under OUT and verify with the official reader (slow)",
    )
    p.add_argument(
        "--shrink",
        action="store_true",
        help="shrink the first failure (or known failure) of each protocol; OUT/shrunk-*.json",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_table_jobs_options(p)
    _allow_empty_commit_option(p)
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_explore)
    _add_replay_commands(subparsers)


def _add_replay_commands(subparsers: Any) -> None:
    from runtime.sim.schedule import SCENARIOS

    for name, helptext in (
        ("replay", "re-run one explored seed and print its verdict and trace excerpt"),
        ("shrink", "reduce a failing seed's schedule to a smaller one that fails the same way"),
    ):
        q: CommandParser = subparsers.add_parser(name, help=helptext)
        q.add_argument(
            "--seed",
            type=int,
            default=None,
            help="the seed to run (explore prints it; default with --schedule: the seed the file records)",
        )
        q.add_argument("--protocol", type=protocol_spec, required=True, help=protocol_help("the protocol to run"))
        src = q.exclusive_group(required=True)
        src.add_argument(
            "--scenario",
            choices=list(SCENARIOS),
            help="draw the seed's schedule from this scenario (required: this or --schedule)",
        )
        src.add_argument(
            "--schedule", help="a schedule JSON file, e.g. written by shrink (required: this or --scenario)"
        )
        q.add_argument(
            "--real-parquet", action="store_true", help="real parquet, verified by the official reader (needs --out)"
        )
        q.add_argument(
            "--out",
            default=None,
            help="directory for the table (--real-parquet) or shrink's schedule file (default: none; shrink: .)",
        )
        q.add_argument("--trace-events", type=int, default=24, help="events in the trace excerpt (default: 24)")
        if name == "shrink":
            q.add_argument("--max-runs", type=int, default=200, help="bound on the simulations tried (default: 200)")
        else:
            add_table_jobs_options(q)
        _allow_empty_commit_option(q)
        add_config_option(q, job=False)
        q.set_defaults(func=cmd_replay if name == "replay" else cmd_shrink)


def _base(args: argparse.Namespace) -> JobConfig:
    """The job options explore, replay and shrink take beside the schedule (checked: exit 2)."""
    return JobConfig(allow_empty_commit=args.allow_empty_commit).replace(**dict(base_options(args))).validate()


def _allow_empty_commit_option(p: CommandParser) -> None:
    from runtime.sim.explore import OPTION_FIELDS

    add_job_options(p, JobConfig(), only=("allow_empty_commit", *OPTION_FIELDS))


def _storage(args: argparse.Namespace) -> str:
    return "disk" if getattr(args, "real_parquet", False) else "memory"


def _schedule_of(args: argparse.Namespace) -> Any:
    """The schedule to run; sets ``args.seed`` from the schedule file when --seed is not given."""
    from runtime.sim.schedule import SimSchedule, draw, recorded_seed

    if args.seed is None:
        args.seed = recorded_seed(args.schedule) if args.schedule else None
    if args.seed is None:
        where = f"the schedule file {args.schedule} records none" if args.schedule else "--scenario draws from it"
        raise ConfigError(f"--seed is needed ({where}); fix: pass --seed N, the seed explore printed")
    return SimSchedule.load(args.schedule) if args.schedule else draw(args.scenario, args.seed)


def _workdir(args: argparse.Namespace, what: str) -> str | None:
    if _storage(args) == "memory":
        return None
    if not args.out:
        raise ConfigError(f"--real-parquet writes a table: give --out DIR for {what}")
    out = check_writable_dir(args.out, "--out")
    os.makedirs(out, exist_ok=True)
    fresh_table(out, Console(quiet=True), True)
    return out


def _outcome_style(outcome: str) -> str:
    return {"passed": "green", "known failure": "yellow"}.get(outcome, "red")


def _explore_with_progress(
    args: argparse.Namespace, console: Console, seeds: list[int], protocols: list[str], workdir: str | None
) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from runtime.sim.explore import explore

    tally = {"passed": 0, "known failure": 0, "VIOLATION": 0, "FAILED": 0}
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeRemainingColumn(),
        console=console,
        transient=not console.is_terminal,
        disable=args.quiet,
    ) as progress:
        task = progress.add_task(f"explore {args.scenario}", total=len(seeds) * len(protocols), tally="")

        def on_run(rec: SeedRun) -> None:
            tally[rec["outcome"]] += 1
            progress.update(task, advance=1, tally=", ".join(f"{k} {v}" for k, v in tally.items() if v))

        return explore(
            args.scenario,
            seeds,
            protocols,
            storage=_storage(args),
            workdir=workdir,
            jobs=args.jobs,
            on_run=on_run,
            allow_empty_commit=args.allow_empty_commit,
            table_jobs=table_jobs_from(args, _base(args)),
            options=base_options(args),
        )


def _shrink_first_failures(
    doc: dict[str, Any], scenario: str, protocols: list[str], out: str, base: JobConfig
) -> list[dict[str, Any]]:
    """Shrinks the first failure (or known failure) of each protocol; writes ``shrunk-P-S.json``."""
    from runtime.sim.explore import replay_command
    from runtime.sim.schedule import SimSchedule
    from runtime.sim.shrink import shrink

    shrunk = []
    for protocol in protocols:
        first = next((r for r in doc["failures"] + doc["known_failures"] if r["protocol"] == protocol), None)
        if first is None:
            continue
        res = shrink(
            SimSchedule.from_dict(first["schedule_json"]), protocol, first["seed"], storage="memory", base=base
        )
        path = os.path.join(out, f"shrunk-{protocol}-{first['seed']}.json")
        with open(path, "w") as f:
            json.dump({"seed": first["seed"], "protocol": protocol, **res.to_dict()}, f, indent=2)
        shrunk.append(
            {
                "protocol": protocol,
                "seed": first["seed"],
                "file": os.path.basename(path),
                "from": res.original.describe(),
                "to": res.schedule.describe(),
                "runs": res.runs,
                "replay": replay_command(
                    scenario, first["seed"], protocol, schedule_file=path, allow_empty_commit=base.allow_empty_commit
                ),
            }
        )
    return shrunk


def _print_exploration(console: Console, doc: dict[str, Any], path: str) -> None:
    for protocol, c in doc["counts"].items():
        console.print(
            f"{protocol:<24} "
            + ", ".join(f"[{_outcome_style(k)}]{k} {v}[/{_outcome_style(k)}]" for k, v in c.items() if v),
            highlight=False,
        )
    known = doc["known_failures"]
    if known:
        k = known[0]
        console.print(
            f"\n[yellow]known failure[/yellow] found on its own, e.g. {k['protocol']} seed "
            f"{k['seed']}: {k['detail']}\n  schedule: {k['schedule']}\n  replay: {k['replay']}",
            highlight=False,
        )
    for r in doc["failures"][:10]:
        style = _outcome_style(r["outcome"])
        console.print(
            f"\n[{style}]{r['outcome']}[/{style}] {r['protocol']} seed {r['seed']}"
            f"{' (' + r['invariant'] + ')' if r['invariant'] else ''}: {r['detail']}\n"
            f"  schedule: {r['schedule']}\n  replay: {r['replay']}",
            highlight=False,
        )
        for line in r["trace_excerpt"][-10:]:
            console.print(f"    {line}", highlight=False, markup=False)
    if len(doc["failures"]) > 10:
        console.print(f"... and {len(doc['failures']) - 10} more failures in explore.json")
    for s in doc.get("shrunk", []):
        console.print(
            f"\nshrunk {s['protocol']} seed {s['seed']} in {s['runs']} runs:\n  from {s['from']}\n"
            f"  to   {s['to']}\n  replay: {s['replay']}",
            highlight=False,
        )
    t = doc["timing"]
    console.print(
        f"\n{t['runs']} runs in {t['real_s']:.1f} real s ({t['jobs']} process(es), "
        f"{t['per_run_s_mean']:.3f} s per run); results: {path}",
        highlight=False,
    )


def cmd_explore(args: argparse.Namespace, console: Console) -> int:
    if args.seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {args.seeds}")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {args.jobs}")
    protocols = [args.protocol] if args.protocol else protocol_names()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if table_jobs_from(args, _base(args)) is not None and args.shrink:
        raise ConfigError("--shrink shrinks one job's schedule; drop it with --table-jobs 2 (replay the seed instead)")
    out = check_writable_dir(args.out, "--out")
    os.makedirs(out, exist_ok=True)
    workdir = os.path.join(out, "tables") if _storage(args) == "disk" else None
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    doc = _explore_with_progress(args, console, seeds, protocols, workdir)
    if args.shrink:
        doc["shrunk"] = _shrink_first_failures(doc, args.scenario, protocols, out, _base(args))
    path = os.path.join(out, "explore.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    _print_exploration(console, doc, path)
    return exits.of_exploration(doc["failures"])


def _print_verdict(console: Console, verdict: Verdict, result: JobResult, n: int) -> None:
    from runtime.sim.explore import excerpt

    style = _outcome_style(verdict.outcome)
    console.print(
        f"[{style}]{verdict.outcome}[/{style}]"
        f"{' (' + verdict.invariant + ')' if verdict.invariant else ''}: {verdict.detail}",
        highlight=False,
    )
    sim = result.sim
    console.print(
        f"status {result.status.value}, commits at checkpoints "
        f"{[c['checkpoint'] for c in result.commits]}, {sim.virtual_s:.3f} virtual s, "
        f"trace {sim.trace_events} events, sha256 {sim.trace_sha256[:16]}",
        highlight=False,
    )
    if result.deadlock:
        console.print(result.deadlock.explanation, highlight=False, markup=False)
    console.print("trace excerpt:")
    for line in excerpt(sim.trace or [], verdict.role, n, at_failover=verdict.at_failover):
        console.print(f"  {line}", highlight=False, markup=False)


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from runtime.sim.explore import run_schedule

    schedule = _schedule_of(args)
    console.print(f"{args.protocol}, seed {args.seed}: {schedule.describe()}", highlight=False)
    workdir = _workdir(args, "replay")
    jobs = table_jobs_from(args, _base(args))
    verdict, result = run_schedule(
        schedule, args.protocol, args.seed, storage=_storage(args), workdir=workdir, base=_base(args), jobs=jobs
    )
    if workdir is not None and jobs is None:  # the table's record: a later replay into OUT may replace the table
        write_simulation(workdir, result, None)
    _print_verdict(console, verdict, result, args.trace_events)
    return exits.of_replay(verdict.failing)


def cmd_shrink(args: argparse.Namespace, console: Console) -> int:
    from runtime.sim.explore import replay_command, run_schedule
    from runtime.sim.shrink import shrink

    schedule = _schedule_of(args)
    out = check_writable_dir(args.out or ".", "--out")  # before the shrink's many runs, not after them
    console.print(f"shrinking {args.protocol}, seed {args.seed}: {schedule.describe()}", highlight=False)
    try:
        res = shrink(
            schedule,
            args.protocol,
            args.seed,
            max_runs=args.max_runs,
            on_step=lambda what, s: console.print(f"  {what}: {s.describe()}", highlight=False),
            base=_base(args),
        )
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]", highlight=False)
        return ExitCode.USAGE  # the schedule does not fail: nothing to shrink
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"shrunk-{args.protocol}-{args.seed}.json")
    with open(path, "w") as f:
        json.dump({"seed": args.seed, "protocol": args.protocol, **res.to_dict()}, f, indent=2)
    console.print(
        f"{res.runs} runs; size (checkpoints, writers, faults, records) {res.original.size()} -> {res.schedule.size()}",
        highlight=False,
    )
    verdict, result = run_schedule(res.schedule, args.protocol, args.seed, base=_base(args))
    _print_verdict(console, verdict, result, args.trace_events)
    replay = replay_command(
        "", args.seed, args.protocol, schedule_file=path, allow_empty_commit=args.allow_empty_commit
    )
    console.print(f"schedule: {path}\nreplay: {replay}", highlight=False)
    return ExitCode.OK
