"""``commitlab simulate``: one job under the deterministic simulator (no Ray).

``runtime/cli.py`` registers it with :func:`add_commands`; ``python -m runtime.sim.cli`` runs it
alone. ``--seed`` is the schedule's seed (message delays, the roles' random sources);
``--data-seed`` the generated stream's. ``--check-determinism`` runs twice and stops the second
run at the first event that differs, naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any

from rich.console import Console

from runtime.config import ConfigError, JobConfig, Schedule

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEADLOCK = 0, 1, 2, 3


def _protocol_names() -> list[str]:
    from runtime.protocols import PROTOCOLS

    return list(PROTOCOLS)


def add_commands(subparsers: Any) -> None:
    """Registers ``simulate`` on the ``commitlab`` sub-command parser."""
    d = JobConfig()
    p = subparsers.add_parser("simulate", help="run a job under the deterministic simulator "
                                               "(virtual time, one process, a seed; no Ray)")
    p.add_argument("--protocol", default=d.protocol, choices=_protocol_names())
    p.add_argument("--seed", type=int, default=0, help="the schedule's seed: message delays, random sources")
    p.add_argument("--out", default="commitlab-sim", help="directory for result.json and the table")
    p.add_argument("--scenario", choices=["none", "deadlock", "lock-held"], default="none",
                   help="a named schedule from runtime.scenarios (deadlock: P1's CommitAckEvent deadlock; "
                        "lock-held: a cleaner holds the table lock, #19902)")
    p.add_argument("--check-determinism", action="store_true",
                   help="run twice with the seed and stop at the first event that differs")
    p.add_argument("--trace", action="store_true",
                   help="write OUT/trace.jsonl (the simulator's events) and OUT/trace.json (Perfetto)")
    p.add_argument("--delay", default="uniform:0.0002:0.002",
                   help="message delay: uniform:LO:HI, fixed:S or exp:MEAN:CAP (seconds)")
    p.add_argument("--io-delay", default="", help="virtual time each DFS call takes (same forms; default none)")
    p.add_argument("--max-virtual", type=float, default=None,
                   help="stop at this virtual time (default: the job timeout)")
    p.add_argument("--max-real", type=float, default=600.0, help="real-time guard of one run, seconds")
    p.add_argument("--no-verify", action="store_true", help="skip the exactly-once check with the official reader")
    p.add_argument("--quiet", action="store_true")
    g = p.add_argument_group("workload")
    g.add_argument("--writers", type=int, default=d.writers)
    g.add_argument("--checkpoints", type=int, default=d.checkpoints)
    g.add_argument("--records", type=int, default=d.records)
    g.add_argument("--keys", type=int, default=d.keys, help="distinct keys (0: records/2)")
    g.add_argument("--partitions", type=int, default=d.partitions)
    g.add_argument("--buckets", type=int, default=d.buckets, help="buckets per partition (0: 2 per writer)")
    g.add_argument("--data-seed", type=int, default=d.seed, help="the generated stream's seed")
    g.add_argument("--source-batch-rows", type=int, default=d.source_batch_rows)
    g.add_argument("--bucket-flush-rows", type=int, default=d.bucket_flush_rows)
    g.add_argument("--task-buffer-rows", type=int, default=d.task_buffer_rows)
    g.add_argument("--checkpoint-interval", type=float, default=d.checkpoint_interval_s)
    g.add_argument("--wait-tick", type=float, default=d.wait_tick_s)
    g.add_argument("--commit-ack-timeout", type=float, default=d.commit_ack_timeout_s)
    g.add_argument("--deadlock-threshold", type=float, default=d.deadlock_threshold_s)
    g.add_argument("--job-timeout", type=float, default=d.job_timeout_s)
    g.add_argument("--abort-checkpoints", default="", help="comma-separated checkpoint ids to abort")
    p.set_defaults(func=cmd_simulate)


def config_from(args: argparse.Namespace) -> JobConfig:
    """The JobConfig of the arguments, with the scenario applied."""
    from runtime.scenarios import SCENARIOS

    aborts = [int(x) for x in args.abort_checkpoints.split(",") if x.strip()]
    cfg = JobConfig(
        protocol=args.protocol, writers=args.writers, checkpoints=args.checkpoints, records=args.records,
        keys=args.keys, partitions=args.partitions, buckets=args.buckets, seed=args.data_seed,
        source="generator", source_batch_rows=args.source_batch_rows,
        bucket_flush_rows=args.bucket_flush_rows, task_buffer_rows=args.task_buffer_rows,
        checkpoint_interval_s=args.checkpoint_interval, wait_tick_s=args.wait_tick,
        commit_ack_timeout_s=args.commit_ack_timeout, deadlock_threshold_s=args.deadlock_threshold,
        job_timeout_s=args.job_timeout, schedule=Schedule(abort_checkpoints=aborts))
    if args.scenario != "none":
        cfg = SCENARIOS[args.scenario](cfg)
    return cfg


def _fresh_table(workdir: str, console: Console, quiet: bool) -> None:
    """A simulation writes a fresh table: a previous run's under OUT is removed (never anything
    that is not a Hudi table)."""
    table = os.path.join(workdir, "table")
    if os.path.isfile(os.path.join(table, ".hoodie", "hoodie.properties")):
        if not quiet:
            console.print(f"removing the previous run's table {table}")
        shutil.rmtree(table)


def _delay(text: str) -> Any:
    from runtime.sim.network import Delay

    if not text:
        return None
    try:
        return Delay.parse(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _exit_code(result: dict[str, Any]) -> int:
    if result["status"] == "deadlocked":
        return EXIT_DEADLOCK
    eo = result.get("exactly_once")
    verified = eo is None or eo.get("verified")  # --no-verify: the status decides
    return EXIT_OK if result["status"] == "finished" and verified else EXIT_FAILED


def cmd_simulate(args: argparse.Namespace, console: Console) -> int:
    from runtime.report import summary_table
    from runtime.sim.host import simulate
    from runtime.sim.trace import write_jsonl

    out = os.path.abspath(args.out)
    cfg = config_from(args)
    os.makedirs(out, exist_ok=True)
    _fresh_table(out, console, args.quiet)
    kwargs = dict(max_virtual_s=args.max_virtual, delay=_delay(args.delay), io_delay=_delay(args.io_delay),
                  max_real_s=args.max_real, verify=not args.no_verify)
    result = simulate(cfg, seed=args.seed, workdir=out, trace=args.trace or args.check_determinism,
                      chrome_trace_path=os.path.join(out, "trace.json") if args.trace else None, **kwargs)
    events = result.pop("trace", None)
    code = _exit_code(result)
    if args.check_determinism:
        replay_dir = os.path.join(out, ".determinism")
        shutil.rmtree(replay_dir, ignore_errors=True)
        try:
            replay = simulate(cfg, seed=args.seed, workdir=replay_dir, expect_trace=events,
                              **{**kwargs, "verify": False})
        finally:
            shutil.rmtree(replay_dir, ignore_errors=True)
        div = replay["divergence"]
        if div is None and replay["trace_events"] != result["trace_events"]:
            div = {"index": replay["trace_events"], "first": None, "second": None}
        result["determinism"] = {"identical": div is None, "events": result["trace_events"],
                                 "sha256": result["trace_sha256"], "replay_sha256": replay["trace_sha256"],
                                 "divergence": div}
        if div is not None:
            code = EXIT_FAILED
    if args.trace and events is not None:
        write_jsonl(os.path.join(out, "trace.jsonl"), events)
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)

    console.print(summary_table(result))
    if result.get("deadlock"):
        console.print(f"[red]{result['deadlock']['explanation']}[/red]", highlight=False)
    console.print(f"simulated {result['virtual_s']:.3f} virtual s in {result['wall_s']:.2f} real s "
                  f"(seed {args.seed}, {result['sim']['messages']} messages, delay {result['sim']['delay']}); "
                  f"trace: {result['trace_events']} events, sha256 {result['trace_sha256'][:16]}", highlight=False)
    det = result.get("determinism")
    if det is not None:
        if det["identical"]:
            console.print(f"[green]deterministic[/green]: the replay gave the same {det['events']} events",
                          highlight=False)
        else:
            d = det["divergence"]
            console.print(f"[red]NOT deterministic[/red]: the traces differ at event {d['index']}\n"
                          f"  first run:  {d['first']}\n  second run: {d['second']}", highlight=False)
    console.print(f"result: {os.path.join(out, 'result.json')}"
                  + (f"; trace: {os.path.join(out, 'trace.jsonl')}, {os.path.join(out, 'trace.json')}"
                     if args.trace else ""), highlight=False)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="commitlab")
    add_commands(parser.add_subparsers(dest="command", required=True))
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["simulate"]:  # python -m runtime.sim.cli --protocol ... works too
        argv = ["simulate", *argv]
    args = parser.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 150)
    try:
        return args.func(args, console)
    except ConfigError as exc:
        console.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
