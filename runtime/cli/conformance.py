"""``commitlab conformance``: a protocol in the lab and Hudi's own Flink writer of the release it
models, on the same records, compared part by part (``runtime.conformance``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console

if TYPE_CHECKING:
    from runtime.conformance.releases import Release
    from runtime.lab.report import PhaseLog

from runtime.cli import exits
from runtime.cli.options import CommandParser, add_config_option, check_writable_dir
from runtime.conformance.scenarios import HAPPY_PATH, SCENARIOS
from runtime.core.config import ConfigError, JobConfig
from runtime.core.job_options import TABLE_TYPES

DEFAULT_RECORDS = 4_000


def cmd_conformance(args: argparse.Namespace, console: Console) -> int:
    from runtime.conformance.output import comparison_table, differences_lines, plot_components, write_conformance
    from runtime.conformance.releases import ConformanceUnavailable, check_built, java_command, release_for
    from runtime.conformance.run import run_check
    from runtime.lab.report import PhaseLog

    # everything that can stop the check is looked at before anything runs
    release = release_for(args.protocol, args.release)
    if args.scenario == HAPPY_PATH and release.table_version < 6:
        raise ConformanceUnavailable(
            f"--release {release.hudi} writes table version {release.table_version}, which neither the official "
            f"reader nor the lab's table model reads, so the happy path's table-by-table comparison cannot run on "
            f"it: use --scenario {', '.join(s for s in SCENARIOS if s != HAPPY_PATH)}, or a 0.14 release"
        )
    java_command()
    check_built(release)
    out = check_writable_dir(args.out, "--out")
    table_type = args.table_type or ("both" if args.scenario == HAPPY_PATH else TABLE_TYPES[0])
    configs = [_config(args, t) for t in (TABLE_TYPES if table_type == "both" else [table_type])]
    for cfg in configs:  # both tables are written fresh: Hudi's writer would append to an old one
        if os.path.isdir(os.path.join(out, cfg.table_type)) and os.listdir(os.path.join(out, cfg.table_type)):
            raise ConfigError(
                f"--out {out} already holds a {cfg.table_type} check ({os.path.join(out, cfg.table_type)}): "
                "choose another --out or remove that folder"
            )
    phases = PhaseLog(console, enabled=not args.quiet)
    if args.scenario != HAPPY_PATH:
        return _scenario_check(args, console, release, out, configs, phases)
    comparisons = _each_table_type(
        configs,
        console,
        lambda cfg: run_check(cfg, release, out, seed=args.seed, timeout_s=args.timeout, on_phase=phases),
    )
    if comparisons is None:
        return exits.ExitCode.FAILED
    for c in comparisons:
        console.print(comparison_table(c))
        for line in differences_lines(c):
            console.print(line, highlight=False)
    ran = {"protocol": args.protocol, "release": release.hudi, "flink": release.flink, "writers": args.writers}
    path = write_conformance(out, comparisons, {**ran, "checkpoints": args.checkpoints, "records": args.records})
    console.print(f"results: {path}; picture: {plot_components(out, comparisons)}")
    return exits.of_conformance([c.conforms for c in comparisons])


T = TypeVar("T")


def _each_table_type(configs: list[JobConfig], console: Console, run: Callable[[JobConfig], T]) -> list[T] | None:
    """``run`` for each table type's configuration, in order; None (the harness's error printed)
    when the harness fails on one: the ones after it are not run."""
    from runtime.conformance.harness import HarnessError

    try:
        return [run(cfg) for cfg in configs]
    except HarnessError as exc:
        console.print(f"[red]{exc}[/red]", highlight=False)
        return None


def _scenario_check(
    args: argparse.Namespace, console: Console, release: Release, out: str, configs: list[JobConfig], phases: PhaseLog
) -> int:
    """``--scenario``: the lab's outcome beside the real release's, per table type."""
    from runtime.conformance.output import scenario_lines, scenario_table, write_scenarios
    from runtime.conformance.scenario_run import run_scenario
    from runtime.conformance.scenarios import scenario

    comparisons = _each_table_type(
        configs,
        console,
        lambda cfg: run_scenario(
            scenario(args.scenario, cfg), release, out, seed=args.seed, timeout_s=args.timeout, on_phase=phases
        ),
    )
    if comparisons is None:
        return exits.ExitCode.FAILED
    for c in comparisons:
        console.print(scenario_table(c))
        for line in scenario_lines(c):
            console.print(line, highlight=False)
    ran = {"protocol": args.protocol, "release": release.hudi, "flink": release.flink, "scenario": args.scenario}
    path = write_scenarios(out, comparisons, {**ran, "writers": args.writers})
    console.print(f"results: {path}")
    return exits.of_conformance([c.agrees for c in comparisons])


def _config(args: argparse.Namespace, table_type: str) -> JobConfig:
    return JobConfig(
        protocol=args.protocol,
        source="generator",
        writers=args.writers,
        checkpoints=args.checkpoints,
        records=args.records,
        table_type=table_type,
        seed=args.data_seed,
        allow_empty_commit=args.allow_empty_commit,
    ).validate()


def add_command(sub: Any) -> None:
    p: CommandParser = sub.add_parser(
        "conformance",
        help="run a protocol in the lab and Hudi's own Flink writer on the same records; compare them",
        description="Runs the protocol on the simulator and the Hudi release it models (the conformance/ "
        "harness: Hudi's Flink bundle in a Flink MiniCluster) on the same records, the same write tasks and "
        "checkpoints; compares the tables (official reader), the timelines, files and bytes per commit and "
        "DFS calls per checkpoint by component, role and operation. Exit 1 when the tables or the timelines "
        "differ beyond what docs/FIDELITY.md names.",
    )
    p.add_argument(
        "--protocol",
        default="ckp-meta",
        help="the protocol: ckp-meta (Hudi 0.14.0; 0.12.3, 0.13.1 and 0.14.1 with --release) or operator-event "
        "(Hudi 0.10.1), the ones whose releases run here",
    )
    p.add_argument("--release", default=None, help="the Hudi release to run instead of the protocol's own")
    p.add_argument(
        "--scenario",
        choices=list(SCENARIOS),
        default=HAPPY_PATH,
        help="what both sides run: "
        + "; ".join(f"{k}: {v}" for k, v in SCENARIOS.items())
        + f" (default: {HAPPY_PATH})",
    )
    p.add_argument(
        "--table-type",
        choices=[*TABLE_TYPES, "both"],
        default=None,
        help=f"default: both for {HAPPY_PATH}, {TABLE_TYPES[0]} for the other scenarios",
    )
    p.add_argument("--writers", type=int, default=2, help="write tasks (default: 2)")
    p.add_argument("--checkpoints", type=int, default=4, help="checkpoints (default: 4)")
    p.add_argument("--records", type=int, default=DEFAULT_RECORDS, help=f"records (default: {DEFAULT_RECORDS})")
    p.add_argument(
        "--allow-empty-commit",
        choices=["release", "true", "false"],
        default="release",
        help="Hudi hoodie.allow.empty.commit on both sides (the Flink writer reads it from 0.14); "
        "release: each side's default (default: release)",
    )
    p.add_argument("--data-seed", type=int, default=0, help="the generator's seed (default: 0)")
    p.add_argument("--seed", type=int, default=0, help="the simulator's schedule seed (default: 0)")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds Hudi's job may run before it is cancelled (default: 300)"
    )
    p.add_argument("--out", default="commitlab-conformance", help="where to write (default: commitlab-conformance)")
    p.add_argument("--quiet", action="store_true", help="no phase lines")
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_conformance)
