"""``commitlab simulate``, ``explore``, ``replay`` and ``shrink``: jobs under the deterministic
simulator (virtual time, one process, no Ray).

Explore lives here with simulate: it runs seeds under the same simulator, shrinks and replays what
it finds with the commands below, and shares their table and storage handling.

``simulate``: ``--seed`` is the schedule's seed (message delays, the roles' random sources);
``--data-seed`` the generated stream's. ``--check-determinism`` runs twice and stops the second
run at the first event that differs, naming it.
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
from runtime.cli.jobs_options import (
    add_jobs_options,
    add_table_jobs_options,
    base_options,
    jobs_from,
    simulate_jobs_command,
    table_jobs_from,
)
from runtime.cli.options import (
    CommandParser,
    add_config_option,
    add_job_options,
    check_writable_dir,
    config_from_args,
    protocol_help,
    protocol_names,
    protocol_spec,
)
from runtime.core.config import ConfigError, JobConfig
from runtime.core.json_doc import JsonObject
from runtime.hudi.client.lock import Heartbeat, check_free

if TYPE_CHECKING:
    from runtime.lab.results import JobResult
    from runtime.sim.explore import SeedRun
    from runtime.sim.judge import Verdict

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
    """Registers ``simulate``, ``explore``, ``replay`` and ``shrink`` on the ``commitlab``
    sub-command parser."""
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
    _add_explore_commands(subparsers)


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


def _fresh_table(workdir: str, console: Console, quiet: bool, heartbeat: Heartbeat | None = None) -> None:
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
    _fresh_table(out, console, args.quiet, Heartbeat.of(cfg))
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
    _write_simulation(out, record, events if args.trace else None, determinism)
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


def _write_simulation(out: str, record: JobResult, events: Any, determinism: JsonObject | None = None) -> None:
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


# -- explore, replay, shrink ----------------------------------------------------------------------


def _add_explore_commands(subparsers: Any) -> None:
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
    _fresh_table(out, Console(quiet=True), True)
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
        _write_simulation(workdir, result, None)
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
