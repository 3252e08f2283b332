"""``commitlab soak``: thousands of simulated checkpoints, seed after seed, with random faults from
the catalogue, every run verified, and the simulator process's memory watched.

Each run is one seed of an exploration scenario (``random`` by default: late notices, aborted and
lost checkpoints, a cleaner holding the table lock, crashes at the fault points, DFS errors and
slowness, each with some probability; :mod:`runtime.sim.schedule`) under the next protocol in
turn, judged as ``commitlab explore`` judges it (exactly-once, or a protocol's documented
failure: :func:`runtime.sim.explore.run_seed`). Under ``control-topic`` a run also arms, with
some probability, the ``control_topic.consumer_restarted`` fault.

After every run the process's resident memory (RSS, after a garbage collection) is sampled. Its
growth is reported as the least-squares slope of RSS against the checkpoints simulated so far,
over the samples after the first tenth of the soak (imports, caches and the allocator's arenas
warm up first): flat means bounded. A slope is a measurement, printed and written, not a verdict
about time; the soak fails (exit 1) on a violation, not on memory.
"""

from __future__ import annotations

import gc
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from runtime.core.json_doc import JsonObject
from runtime.lab.fault_matrix import FAILED, KNOWN, PASSED, VIOLATION
from runtime.sim.explore import replay_command, run_schedule
from runtime.sim.schedule import draw

MIB = 1024 * 1024
WARM_UP_FRACTION = 0.1
CONSUMER_FAULT_P = 0.2  # control-topic runs that also restart a participant's consumer


@dataclass
class RssSample:
    run: int
    checkpoints: int  # simulated so far, this run's included
    rss_bytes: int
    at_s: float


@dataclass
class SoakRecord:
    """What a soak did: its runs by outcome, the failures with their replay commands, the RSS."""

    scenario: str
    protocols: list[str]
    runs: int = 0
    checkpoints: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    faults_fired: dict[str, int] = field(default_factory=dict)
    failures: list[JsonObject] = field(default_factory=list)
    rss: list[RssSample] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def violations(self) -> int:
        return self.outcomes.get(VIOLATION, 0) + self.outcomes.get(FAILED, 0)

    def slope_mib_per_1000(self) -> float | None:
        """RSS growth in MiB per 1,000 checkpoints (least squares, after the warm-up)."""
        kept = self.rss[int(len(self.rss) * WARM_UP_FRACTION) :]
        if len(kept) < 3:
            return None
        xs = [s.checkpoints for s in kept]
        ys = [s.rss_bytes / MIB for s in kept]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mx) ** 2 for x in xs)
        if var == 0:
            return None
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var * 1000

    def to_json(self) -> JsonObject:
        slope = self.slope_mib_per_1000()
        rss = [s.rss_bytes for s in self.rss]
        return {
            "host": "simulator",
            "scenario": self.scenario,
            "protocols": self.protocols,
            "runs": self.runs,
            "checkpoints": self.checkpoints,
            "outcomes": self.outcomes,
            "violations": self.violations,
            "faults_fired": self.faults_fired,
            "failures": self.failures,
            "rss": {
                "first_mib": round(rss[0] / MIB, 1) if rss else None,
                "last_mib": round(rss[-1] / MIB, 1) if rss else None,
                "max_mib": round(max(rss) / MIB, 1) if rss else None,
                "slope_mib_per_1000_checkpoints": None if slope is None else round(slope, 3),
                "warm_up_fraction": WARM_UP_FRACTION,
                "samples": [[s.run, s.checkpoints, s.rss_bytes, round(s.at_s, 2)] for s in self.rss],
            },
            "wall_s": round(self.wall_s, 1),
        }


def soak(
    protocols: list[str],
    *,
    checkpoints: int,
    minutes: float | None = None,
    scenario: str = "random",
    first_seed: int = 0,
    on_run: Callable[[SoakRecord], None] | None = None,
) -> SoakRecord:
    """Runs seeds from ``first_seed`` on, protocols in turn, until ``checkpoints`` checkpoints were
    simulated (or ``minutes`` passed, when given); every run judged, RSS sampled after each."""
    record = SoakRecord(scenario, list(protocols))
    process = psutil.Process()
    started = time.monotonic()
    seed = first_seed
    while record.checkpoints < checkpoints and (minutes is None or time.monotonic() - started < minutes * 60):
        protocol = protocols[record.runs % len(protocols)]
        _one_run(record, scenario, seed, protocol)
        gc.collect()
        record.rss.append(
            RssSample(record.runs, record.checkpoints, process.memory_info().rss, time.monotonic() - started)
        )
        record.wall_s = time.monotonic() - started
        if on_run is not None:
            on_run(record)
        seed += 1
    return record


def _one_run(record: SoakRecord, scenario: str, seed: int, protocol: str) -> None:
    schedule = draw(scenario, seed)
    if protocol == "control-topic" and random.Random(seed).random() < CONSUMER_FAULT_P:
        task, start = random.Random(seed + 1).randrange(schedule.writers), 1 + seed % 2
        schedule.crashes = [*schedule.crashes, f"control_topic.consumer_restarted@{start}#{task}"]
    verdict, result = run_schedule(schedule, protocol, seed)
    record.runs += 1
    record.checkpoints += schedule.checkpoints
    record.outcomes[verdict.outcome] = record.outcomes.get(verdict.outcome, 0) + 1
    for fired in result.faults_fired:
        point = str(fired["point"])
        record.faults_fired[point] = record.faults_fired.get(point, 0) + 1
    if verdict.outcome not in (PASSED, KNOWN):
        record.failures.append(
            {
                "seed": seed,
                "protocol": protocol,
                "outcome": verdict.outcome,
                "detail": verdict.detail,
                "schedule": schedule.to_dict(),
                "replay": replay_command(scenario, seed, protocol),
            }
        )


def write_record(record: SoakRecord, out_dir: str) -> str:
    """soak.json, and each failure's schedule as a file its replay command names (a soak may add
    a fault the scenario's draw does not have)."""
    os.makedirs(out_dir, exist_ok=True)
    for failure in record.failures:
        schedule_path = os.path.join(out_dir, f"failure-{failure['protocol']}-{failure['seed']}.json")
        with open(schedule_path, "w") as f:
            json.dump(failure["schedule"], f, indent=1)
        failure["replay"] = replay_command(
            "", int(failure["seed"]), str(failure["protocol"]), schedule_file=schedule_path
        )
    path = os.path.join(out_dir, "soak.json")
    with open(path, "w") as f:
        json.dump(record.to_json(), f, indent=1)
    return path
