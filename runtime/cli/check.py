"""``commitlab check``: a bounded systematic search over one simulated job's schedules
(:mod:`runtime.sim.search`), or the seeded random / PCT strategies on the same job for comparison.

The job is fixed by the options (writers, checkpoints, quiet rounds, late notices, aborted
checkpoints, faults) or by ``--schedule FILE`` (explore's, shrink's or a check.json); the search
varies only the interleaving. It writes ``OUT/check.json``: the certificate, or the shortest
counterexample with the command that replays it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console

from runtime.cli import exits
from runtime.cli.jobs_options import add_table_jobs_options, base_options, table_jobs_from
from runtime.cli.options import (
    CommandParser,
    add_config_option,
    add_job_options,
    check_writable_dir,
    protocol_help,
    protocol_spec,
)
from runtime.core.config import ConfigError, JobConfig

if TYPE_CHECKING:
    from runtime.sim.schedule import SimSchedule
    from runtime.sim.search import BoundedSearch, CheckJob, CheckRun, SearchStats

STRATEGIES = ("dfs", "pct", "random")
SEARCHES = ("fork", "rerun")  # how the dfs strategy reaches a schedule (runtime.sim.fork_search)


def add_command(subparsers: Any) -> None:
    p: CommandParser = subparsers.add_parser(
        "check",
        help="every schedule of a simulated job within a bound of deviations: a certificate or a counterexample",
    )
    p.add_argument("--protocol", type=protocol_spec, required=True, help=protocol_help("the protocol to check"))
    _add_job_options(p)
    p.add_argument("--bound", type=int, default=2, help="most deviations from the default schedule (default: 2)")
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="dfs",
        help="dfs: every schedule within --bound; pct: PCT with --depth, --runs seeds; random: --runs seeds of "
        "random delays (default: dfs)",
    )
    p.add_argument("--depth", type=int, default=3, help="PCT's bug depth d (default: 3)")
    p.add_argument("--runs", type=int, default=100, help="seeds for --strategy pct or random (default: 100)")
    p.add_argument("--seed", type=int, default=0, help="the default schedule's seed (its message delays; default: 0)")
    p.add_argument(
        "--late-s", type=float, default=0.5, help="how late a delayed message arrives, virtual s (default: 0.5)"
    )
    p.add_argument(
        "--messages-only",
        action="store_true",
        help="deviate only by late messages; the ready queue stays FIFO (asyncio's order)",
    )
    p.add_argument(
        "--lose",
        default="",
        metavar="METHOD[,METHOD]",
        help="RPC methods whose messages a deviation may also lose in transit, e.g. write_metadata "
        "(default: none: messages are only late)",
    )
    p.add_argument("--no-symmetry", action="store_true", help="tell write tasks apart in the state fingerprint")
    p.add_argument("--first", action="store_true", help="bounds 0, 1, ... --bound, stopping at the first failure")
    p.add_argument("--max-runs", type=int, default=None, help="stop after this many runs (partial certificate)")
    p.add_argument("--max-seconds", type=float, default=None, help="stop after this real time (partial certificate)")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes sharing the search (each takes a share of the first deviations; default: 1)",
    )
    p.add_argument(
        "--search",
        choices=SEARCHES,
        default="rerun",
        help="rerun: every schedule is run from the start; fork: the simulator forks at a choice point and "
        "each alternative goes on from there (the same certificate; on this project's 2-core VM no faster: "
        "benchmarks/bench_check.py; default: rerun)",
    )
    p.add_argument("--replay", default=None, help="run one schedule: its deviations CHOICE:ALT,... (check.json)")
    p.add_argument("--out", default="commitlab-check", help="directory for check.json (default: commitlab-check)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_table_jobs_options(p)
    add_job_options(p, JobConfig(), only=("concurrency_mode", "lock_provider", "instant_times", "table_type"))
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_check)


def _add_job_options(p: CommandParser) -> None:
    from runtime.sim.schedule import SCENARIOS

    p.add_argument("--schedule", default=None, help="a schedule JSON file (explore, shrink, check.json); else:")
    p.add_argument(
        "--scenario",
        choices=list(SCENARIOS),
        default=None,
        help="the schedule commitlab explore draws for --scenario-seed in this scenario; else the options below",
    )
    p.add_argument("--scenario-seed", type=int, default=0, help="the explore seed of --scenario (default: 0)")
    p.add_argument("--writers", type=int, default=2, help="write tasks (default: 2)")
    p.add_argument("--checkpoints", type=int, default=3, help="checkpoints, one round of records each (default: 3)")
    p.add_argument("--records", type=int, default=100, help="records per writer per round (default: 100)")
    p.add_argument("--quiet-rounds", default="", help="rounds with no records, e.g. 2 or 2,3")
    p.add_argument("--late-notices", default="", help="late completion notices CKP:SECONDS, e.g. 2:0.5")
    p.add_argument("--abort", default="", help="checkpoints the job manager aborts, e.g. 2")
    p.add_argument("--faults", default="", help="armed fault points, as commitlab faults takes them")
    p.add_argument("--failover", choices=("global", "region"), default="global", help="(default: global)")
    p.add_argument("--flush-rows", type=int, default=20_000, help="a bucket's flush size in rows (default: 20000)")
    p.add_argument("--rpc-timeout-s", type=float, default=10.0, help="RPC / ack timeout, virtual s (default: 10)")
    p.add_argument("--no-hold-bootstraps", action="store_true", help="Hudi before HUDI-6194")


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} takes checkpoint numbers separated by commas, got {text!r}") from None


def _late_notices(text: str) -> dict[int, float]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        ckp, sep, secs = part.partition(":")
        try:
            out[int(ckp)] = float(secs)
        except ValueError:
            raise ConfigError(f"--late-notices takes CKP:SECONDS, e.g. 2:0.5; got {part!r}") from None
        if not sep:
            raise ConfigError(f"--late-notices takes CKP:SECONDS, e.g. 2:0.5; got {part!r}")
    return out


def schedule_from(args: argparse.Namespace) -> SimSchedule:
    """The job the check runs: ``--schedule`` or the job options."""
    from runtime.sim.schedule import SimSchedule, draw

    if args.schedule:
        return SimSchedule.load(args.schedule)
    if args.scenario:
        return draw(args.scenario, args.scenario_seed)
    if args.writers < 1 or args.checkpoints < 1 or args.records < 1:
        raise ConfigError("--writers, --checkpoints and --records must be at least 1")
    quiet = set(_ints(args.quiet_rounds, "--quiet-rounds"))
    rounds = [0 if k in quiet else args.writers * args.records for k in range(1, args.checkpoints + 1)]
    if not any(rounds):
        raise ConfigError("--quiet-rounds leaves no round with records: keep at least one")
    schedule = SimSchedule(
        writers=args.writers,
        rounds=rounds,
        notify_delay_s=_late_notices(args.late_notices),
        abort_checkpoints=_ints(args.abort, "--abort"),
        crashes=[f for f in args.faults.split(",") if f.strip()],
        bucket_flush_rows=args.flush_rows,
        rpc_timeout_s=args.rpc_timeout_s,
        failover=args.failover,
        hold_bootstraps=not args.no_hold_bootstraps,
    )
    return SimSchedule.from_dict(schedule.to_dict())  # checks the fault specs, naming a bad one


def _check_args(args: argparse.Namespace) -> None:
    if args.bound < 0:
        raise ConfigError(f"--bound must be 0 or more, got {args.bound}")
    if args.late_s <= 0:
        raise ConfigError(f"--late-s must be positive, got {args.late_s}")
    if args.runs < 1 or args.depth < 1:
        raise ConfigError("--runs and --depth must be at least 1")
    if args.jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {args.jobs}")


def _lossy(text: str, protocol: str) -> tuple[str, ...]:
    """``--lose``'s methods, each an RPC method of some role of a ``protocol`` job."""
    from runtime.job.prepare import rpc_methods

    names = tuple(sorted({m.strip() for m in text.split(",") if m.strip()}))
    known = rpc_methods(protocol)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise ConfigError(
            f"--lose {','.join(unknown)}: no role of a {protocol} job has such an RPC method; "
            f"name some of {', '.join(sorted(known))}"
        )
    return names


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    from runtime.sim.search import CheckJob

    _check_args(args)
    options = base_options(args)
    out = check_writable_dir(args.out, "--out")
    job = CheckJob(
        schedule_from(args),
        args.protocol,
        args.seed,
        args.late_s,
        not args.no_symmetry,
        ready_order=not args.messages_only,
        lossy=_lossy(args.lose, args.protocol),
        jobs=table_jobs_from(args, JobConfig().replace(**dict(options)).validate()),
        options=options,
    )
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "check.json")
    if args.replay is not None:
        return _replay(job, args.replay, path, console)
    if args.strategy != "dfs":
        doc = _sample(job, args, console)
        _write(path, doc)
        console.print(f"{args.strategy}: {doc['runs']} run(s), first hit at run {doc['first_hit_run']}; {path}")
        return exits.of_check(doc["failures"])
    search = _search(job, args, console)
    return _report(search, path, console)


def _search(job: CheckJob, args: argparse.Namespace, console: Console) -> BoundedSearch:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from runtime.sim.fork_search import ForkSearch
    from runtime.sim.search import BoundedSearch

    kind = ForkSearch if args.search == "fork" else BoundedSearch
    bounds = range(args.bound + 1) if args.first else (args.bound,)
    runs_before = 0
    started = time.perf_counter()
    search: BoundedSearch | None = None
    # refreshed by the search, not by a thread of its own: the fork search forks a one-thread process
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        TextColumn("{task.fields[figures]}"),
        TimeElapsedColumn(),
        console=console,
        transient=not console.is_terminal,
        disable=args.quiet,
        auto_refresh=False,
    ) as progress:
        task = progress.add_task(f"check {job.protocol}", figures="")
        shown = [0.0]

        def show(text: str) -> None:
            progress.update(task, figures=text)
            if time.perf_counter() - shown[0] >= _REFRESH_S:
                shown[0] = time.perf_counter()
                progress.refresh()

        for bound in bounds:

            def on_run(run: CheckRun, s: SearchStats, bound: int = bound, before: int = runs_before) -> None:
                show(_figures(bound, before + s.runs, s))

            max_runs = None if args.max_runs is None else max(0, args.max_runs - runs_before)
            if args.jobs > 1:
                search = _in_processes(job, bound, args, max_runs, show)
            else:
                search = kind(
                    job, bound, max_runs=max_runs, max_s=args.max_seconds, stop_at_first=args.first, on_run=on_run
                ).run()
            runs_before += search.stats.runs
            if not search.complete or search.failures or search.known:
                break  # found, or out of budget
    assert search is not None
    search.stats.runs, search.stats.started = runs_before, started  # --first: the figures of every bound
    return search


def _in_processes(
    job: CheckJob, bound: int, args: argparse.Namespace, max_runs: int | None, show: Callable[[str], None]
) -> BoundedSearch:
    from runtime.sim.parallel_search import parallel_search

    def on_progress(runs: int, states: int, depth: int) -> None:
        show(f"bound {bound}: {runs} runs in {args.jobs} processes, {states} states, depth {depth}")

    return parallel_search(
        job, bound, args.jobs, max_runs=max_runs, max_s=args.max_seconds, stop_at_first=args.first,
        on_progress=on_progress, fork=args.search == "fork",
    )  # fmt: skip


_REFRESH_S = 0.1  # the progress line's refresh period


def _figures(bound: int, runs: int, s: SearchStats) -> str:
    return f"bound {bound}: {runs} runs, {len(s.states)} states, depth {s.max_depth}, {s.pruned} pruned"


def _report(search: BoundedSearch, path: str, console: Console) -> int:
    from runtime.sim.certificate import certificate
    from runtime.sim.search import INTERRUPTED

    doc = certificate(search, path)
    _write(path, doc)
    cert = doc["certificate"]
    head = "complete" if cert["complete"] else f"PARTIAL ({cert['stopped']})"
    console.print(
        f"[bold]{search.job.protocol}[/bold], bound {cert['bound']}: {head}; {cert['runs']} runs, "
        f"{cert['distinct_states']} distinct states, {cert['transitions']} transitions, max depth "
        f"{cert['max_depth']}, {cert['real_s']}s",
        highlight=False,
    )
    for name, verdict in cert["invariants"].items():
        style = {"violated": "red", "known failure": "yellow"}.get(verdict, "green")
        console.print(f"  {name}: [{style}]{verdict}[/{style}]", highlight=False)
    if cert["recovered_by_timeout"]:
        console.print(f"  {cert['recovered_by_timeout']} run(s) finished only after a call's timeout fired")
    for key in ("counterexample", "known_failure"):
        if key in doc:
            _print_run(console, key.replace("_", " "), doc[key])
    for name, rec in doc.get("counterexamples_by_invariant", {}).items():
        _print_run(console, f"shortest counterexample of {name}", rec)
    console.print(f"check.json: {path}")
    return exits.of_check(cert["failures"], interrupted=search.stopped == INTERRUPTED)


def _print_run(console: Console, what: str, rec: dict[str, Any]) -> None:
    devs = "; ".join(f"#{d['choice']}: {d['what']}" for d in rec["deviations"]) or "none"
    console.print(f"[bold]{what}[/bold]: {rec['outcome']} {rec['invariant'] or ''}: {rec['detail']}", highlight=False)
    console.print(f"  deviations: {devs}; {rec['events']} events", highlight=False)
    if "wait_for" in rec:
        console.print(f"  wait-for: {rec['wait_for'].get('explanation', '')}", highlight=False)
    console.print(f"  replay: {rec['replay']}", highlight=False)
    for line in rec["trace_excerpt"][-12:]:
        console.print(f"    {line}", highlight=False, markup=False)


def _replay(job: CheckJob, text: str, path: str, console: Console) -> int:
    from runtime.sim.certificate import run_record
    from runtime.sim.search import run_deviations
    from runtime.sim.strategies import parse_deviations

    try:
        deviations = parse_deviations(text)
    except ValueError as exc:
        raise ConfigError(f"--replay: {exc}") from None
    run = run_deviations(job, deviations)
    rec = run_record(job, run, path)
    _write(path, {"protocol": job.protocol, "schedule": job.schedule.to_dict(), "seed": job.seed, "replay": rec})
    _print_run(console, "replay", rec)
    return exits.of_replay(run.verdict.failing)


def _sample(job: CheckJob, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """--strategy random / pct: ``--runs`` seeds on the same job; the first seed that fails."""
    from runtime.lab.fault_matrix import PASSED
    from runtime.sim.explore import run_schedule
    from runtime.sim.search import run_deviations
    from runtime.sim.strategies import PCTChooser

    events = sum(1 for c in run_deviations(job).choices if c.point.value == "message-delay")
    first: dict[str, Any] | None = None
    failures = 0
    outcomes: dict[str, int] = {}
    for seed in range(job.seed, job.seed + args.runs):
        chooser = (
            PCTChooser(seed, depth=args.depth, events=events, late_s=job.late_s) if args.strategy == "pct" else None
        )
        verdict, _ = run_schedule(job.schedule, job.protocol, seed, chooser=chooser)
        outcomes[verdict.outcome] = outcomes.get(verdict.outcome, 0) + 1
        failures += verdict.failing
        if verdict.outcome != PASSED and first is None:
            first = {"seed": seed, "run": seed - job.seed + 1, "outcome": verdict.outcome, "detail": verdict.detail}
            if not args.quiet:
                console.print(f"first hit: seed {seed}: {verdict.outcome}: {verdict.detail}", highlight=False)
    return {
        "protocol": job.protocol,
        "strategy": args.strategy,
        "depth": args.depth if args.strategy == "pct" else None,
        "messages_per_run": events,
        "runs": args.runs,
        "outcomes": outcomes,
        "failures": failures,
        "first_hit_run": first["run"] if first else None,
        "first_hit": first,
        "schedule": job.schedule.to_dict(),
    }


def _write(path: str, doc: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
