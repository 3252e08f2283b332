"""Random schedules for exploration: what a seed makes of a job.

A :class:`SimSchedule` is everything exploration varies, as plain data: the writers, the records
of each round (0: a quiet round), late checkpoint notifications, aborted checkpoints, lost
notifications, slow snapshots, a table lock held by a cleaner, the network's delay distribution
and the flush sizes. :func:`draw` makes one from a scenario name and a seed (the same seed, the
same schedule, on every machine), each open decision drawn from the run's chooser
(:mod:`runtime.sim.chooser`, ``SCHEDULE``); :meth:`SimSchedule.config` turns it into the
:class:`~runtime.core.config.JobConfig` the simulator runs. Nothing here knows which schedule breaks
which protocol: the P1 deadlock (a quiet round, its completion notified late, an eager flush in
the next round) is one corner of the space the draws cover, found by exploration, not written in.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from runtime.core.config import ConfigError, JobConfig, Schedule
from runtime.core.fault_spec import FaultSpec, parse_faults
from runtime.sim.chooser import ChoicePoint, Chooser, RandomChooser

# Bounds of one simulated run: short enough for thousands of seeds, long enough for every
# protocol's timeouts (commit ack 10 s, checkpoint 30 s) to play out.
JOB_TIMEOUT_S = 90.0
DELAYS = ("uniform:0.0002:0.002", "uniform:0.001:0.02", "exp:0.002:0.2", "exp:0.01:0.5")


@dataclass
class SimSchedule:
    writers: int
    rounds: list[int]  # records of round k (1-based: rounds[k-1]); 0 is a quiet round
    notify_delay_s: dict[int, float] = field(default_factory=dict)  # checkpoint -> late completion notice
    abort_checkpoints: list[int] = field(default_factory=list)
    lost_notifications: list[int] = field(default_factory=list)  # checkpoint.notification_lost
    slow_snapshots: list[int] = field(default_factory=list)  # checkpoint.timeout (task 0)
    clean_lock_s: dict[int, float] = field(default_factory=dict)  # checkpoint -> table lock held (#19902)
    # armed fault points in --faults syntax ("point@checkpoint#task=param"): crashes, DFS faults
    # (the name is older than the DFS faults; schedule files keep it)
    crashes: list[str] = field(default_factory=list)
    delay: str = DELAYS[0]  # the network's delay distribution
    bucket_flush_rows: int = 20_000
    source_batch_rows: int = 200
    rpc_timeout_s: float = 10.0
    failover: str = "global"  # or "region": the coordinator lives through a task failover
    hold_bootstraps: bool = True  # False: Hudi before HUDI-6194

    @property
    def checkpoints(self) -> int:
        return len(self.rounds)

    def faults(self) -> list[FaultSpec]:
        return (
            [FaultSpec("checkpoint.notification_lost", c) for c in sorted(self.lost_notifications)]
            + [FaultSpec("checkpoint.timeout", c, 0) for c in sorted(self.slow_snapshots)]
            + parse_faults(",".join(self.crashes))
        )

    def config(self, protocol: str, base: JobConfig | None = None) -> JobConfig:
        """The job this schedule describes, for ``protocol``."""
        records = sum(self.rounds)
        cfg = (base or JobConfig()).replace(
            protocol=protocol,
            source="generator",
            writers=self.writers,
            checkpoints=self.checkpoints,
            records=records,
            keys=max(1, records),
            partitions=2,
            buckets=0,
            bucket_flush_rows=self.bucket_flush_rows,
            source_batch_rows=self.source_batch_rows,
            rpc_timeout_s=self.rpc_timeout_s,
            job_timeout_s=JOB_TIMEOUT_S,
            faults=self.faults(),
            failover=self.failover,
            hold_bootstraps=self.hold_bootstraps,
            schedule=Schedule(
                rounds=list(self.rounds),
                abort_checkpoints=sorted(self.abort_checkpoints),
                notify_delay_s=dict(sorted(self.notify_delay_s.items())),
                clean_lock_s=dict(sorted(self.clean_lock_s.items())),
            ),
        )
        return cfg

    # -- as data ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SimSchedule:
        """Reads :meth:`to_dict`'s form (JSON turns checkpoint keys into strings; they come back)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ConfigError(f"the schedule has unknown fields {unknown}; known: {sorted(known)}")
        d = dict(doc)
        for name in ("notify_delay_s", "clean_lock_s"):
            d[name] = {int(k): float(v) for k, v in (d.get(name) or {}).items()}
        for name in ("abort_checkpoints", "lost_notifications", "slow_snapshots"):
            d[name] = [int(x) for x in d.get(name) or []]
        d["rounds"] = [int(x) for x in d["rounds"]]
        d["crashes"] = [str(x) for x in d.get("crashes") or []]
        parse_faults(",".join(d["crashes"]))  # a bad point fails here, naming it
        return cls(**d)

    @classmethod
    def load(cls, path: str) -> SimSchedule:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the schedule {path}: {exc}") from None
        return cls.from_dict(doc.get("schedule", doc))

    def size(self) -> tuple[int, int, int, int]:
        """What shrinking minimises, most important first: checkpoints, writers, faults, records."""
        n_faults = (
            len(self.notify_delay_s)
            + len(self.abort_checkpoints)
            + len(self.lost_notifications)
            + len(self.slow_snapshots)
            + len(self.clean_lock_s)
            + len(self.crashes)
        )
        return (self.checkpoints, self.writers, n_faults, sum(self.rounds))

    def describe(self) -> str:
        parts = [
            f"{self.writers} writer(s)",
            f"rounds {self.rounds}",
            f"flush {self.bucket_flush_rows} rows",
            f"batch {self.source_batch_rows}",
            f"delay {self.delay}",
        ]
        if self.notify_delay_s:
            parts.append(
                "late notices " + ", ".join(f"ckp {k}: {v:.2f}s" for k, v in sorted(self.notify_delay_s.items()))
            )
        if self.abort_checkpoints:
            parts.append(f"aborted {sorted(self.abort_checkpoints)}")
        if self.lost_notifications:
            parts.append(f"lost notices {sorted(self.lost_notifications)}")
        if self.slow_snapshots:
            parts.append(f"slow snapshots {sorted(self.slow_snapshots)}")
        if self.clean_lock_s:
            parts.append(
                "lock held " + ", ".join(f"after ckp {k}: {v:.2f}s" for k, v in sorted(self.clean_lock_s.items()))
            )
        if self.crashes:
            parts.append(f"faults {self.crashes}")
        if self.failover != "global":
            parts.append(f"{self.failover} failover" + ("" if self.hold_bootstraps else ", bootstraps not held"))
        return "; ".join(parts)


# -- drawing ---------------------------------------------------------------------------------------


def _rounds(rng: random.Random, writers: int, checkpoints: int, quiet_p: float) -> list[int]:
    rounds = [0 if rng.random() < quiet_p else writers * rng.choice((50, 100, 200, 400)) for _ in range(checkpoints)]
    if not any(rounds):  # a job with no data at all says nothing
        rounds[0] = writers * 100
    return rounds


def _late_notices(rng: random.Random, checkpoints: int, p: float) -> dict[int, float]:
    return {c: round(rng.uniform(0.05, 1.5), 3) for c in range(1, checkpoints + 1) if rng.random() < p}


def _base(
    rng: random.Random, *, quiet_p: float, writers: tuple[int, int] = (1, 4), checkpoints: tuple[int, int] = (3, 6)
) -> SimSchedule:
    w = rng.randint(*writers)
    n = rng.randint(*checkpoints)
    return SimSchedule(
        writers=w,
        rounds=_rounds(rng, w, n, quiet_p),
        delay=rng.choice(DELAYS),
        bucket_flush_rows=rng.choice((1, 25, 100, 20_000)),
        source_batch_rows=rng.choice((50, 200, 1_000)),
    )


def _deadlock(rng: random.Random) -> SimSchedule:
    """The family of ``commitlab deadlock``: quiet rounds, late notifications, flush sizes."""
    s = _base(rng, quiet_p=0.35)
    s.notify_delay_s = _late_notices(rng, s.checkpoints, 0.4)
    return s


def _lock_held(rng: random.Random) -> SimSchedule:
    """#19902's family: a cleaner holds the table lock after some commit, for a while."""
    s = _base(rng, quiet_p=0.1, writers=(1, 3), checkpoints=(3, 5))
    s.rpc_timeout_s = 1.0
    s.clean_lock_s = {rng.randint(1, s.checkpoints - 1): round(rng.uniform(0.2, 3.0) * s.rpc_timeout_s, 3)}
    return s


def _checkpoint_abort(rng: random.Random) -> SimSchedule:
    s = _base(rng, quiet_p=0.15)
    s.abort_checkpoints = sorted(rng.sample(range(1, s.checkpoints + 1), rng.randint(1, 2)))
    return s


def _notification_lost(rng: random.Random) -> SimSchedule:
    """Never the last checkpoint's notice (as in ``commitlab faults``): with no later checkpoint
    to commit the backlog, the last round stays uncommitted by design of the runtime."""
    s = _base(rng, quiet_p=0.15)
    s.lost_notifications = [rng.randint(1, s.checkpoints - 1)]
    return s


def _checkpoint_timeout(rng: random.Random) -> SimSchedule:
    s = _base(rng, quiet_p=0.15)
    s.slow_snapshots = [rng.randint(1, s.checkpoints)]
    return s


def _message_delay(rng: random.Random) -> SimSchedule:
    s = _base(rng, quiet_p=0.2)
    s.delay = rng.choice(DELAYS[2:])  # long tails: replies and sends overtake each other across pairs
    s.notify_delay_s = _late_notices(rng, s.checkpoints, 0.3)
    return s


CRASH_POINTS = (
    "task.before_flush",
    "task.after_flush_before_event",
    "task.in_snapshot",
    "task.after_checkpoint_before_commit",
    "coordinator.before_commit_file",
    "coordinator.after_commit_before_next_instant",
)


def _crash(rng: random.Random, s: SimSchedule, points: tuple[str, ...] = CRASH_POINTS) -> str:
    point = rng.choice(points)
    task = f"#{rng.randrange(s.writers)}" if point.startswith("task.") else ""
    return f"{point}@{rng.randint(1, s.checkpoints)}{task}"


def _task_crash(rng: random.Random) -> SimSchedule:
    """A role crashes at a fault point (once or twice): the job fails over from the last completed
    checkpoint, every task at once."""
    s = _base(rng, quiet_p=0.2)
    s.crashes = sorted({_crash(rng, s) for _ in range(rng.randint(1, 2))})
    s.notify_delay_s = _late_notices(rng, s.checkpoints, 0.2)
    return s


def _wrong_instant(rng: random.Random, *, hold_bootstraps: bool = True) -> SimSchedule:
    """HUDI-6194's family: tasks fail over (regionally: the coordinator lives on) around the
    moment the coordinator commits and starts the next instant: every task as the instant starts
    (one of them back late), a task right after a checkpoint or in its snapshot, or the
    coordinator itself between its commit and the next instant (then globally); late notices
    and aborts around it."""
    s = _base(rng, quiet_p=0.25)
    s.failover, s.hold_bootstraps = "region", hold_bootstraps
    if rng.random() < 0.6:
        slow = round(rng.uniform(0.0, 3.0), 3)
        s.crashes = [f"tasks.fail_at_instant_start@{rng.randint(1, s.checkpoints)}" + (f"={slow}" if slow else "")]
    else:
        s.crashes = [
            _crash(
                rng,
                s,
                (
                    "task.after_checkpoint_before_commit",
                    "coordinator.after_commit_before_next_instant",
                    "task.in_snapshot",
                ),
            )
        ]
    s.notify_delay_s = _late_notices(rng, s.checkpoints, 0.4)
    if rng.random() < 0.3:
        s.abort_checkpoints = [rng.randint(1, s.checkpoints)]
    return s


def _wrong_instant_unfixed(rng: random.Random) -> SimSchedule:
    """The same, with the coordinator answering every bootstrap at once (Hudi before HUDI-6194)."""
    return _wrong_instant(rng, hold_bootstraps=False)


def _dfs_fault_specs(rng: random.Random, s: SimSchedule) -> list[str]:
    """A transient error of the coordinator's first DFS write after a checkpoint's trigger (the
    job fails over), a window of slow coordinator DFS operations, or both."""
    pick = rng.random()
    specs = []
    if pick < 0.7:
        specs.append(f"dfs.transient_error@{rng.randint(1, s.checkpoints)}")
    if pick >= 0.4:
        specs.append(f"dfs.latency@{rng.randint(1, s.checkpoints)}={round(rng.uniform(0.05, 1.0), 3)}")
    return specs


def _dfs_faults(rng: random.Random) -> SimSchedule:
    """The coordinator's DFS misbehaves (see :func:`_dfs_fault_specs`), under global or region
    failover, with late notices."""
    s = _base(rng, quiet_p=0.2)
    s.crashes = _dfs_fault_specs(rng, s)
    s.notify_delay_s = _late_notices(rng, s.checkpoints, 0.2)
    if rng.random() < 0.3:
        s.failover = "region"
    return s


def _random(rng: random.Random) -> SimSchedule:
    """A bit of everything, each fault with some probability."""
    s = _base(rng, quiet_p=0.25)
    s.notify_delay_s = _late_notices(rng, s.checkpoints, 0.3)
    if rng.random() < 0.3:
        s.abort_checkpoints = [rng.randint(1, s.checkpoints)]
    if rng.random() < 0.2:
        s.lost_notifications = [rng.randint(1, s.checkpoints - 1)]
    if rng.random() < 0.2:
        s.rpc_timeout_s = 1.0
        s.clean_lock_s = {rng.randint(1, s.checkpoints - 1): round(rng.uniform(0.2, 3.0), 3)}
    if rng.random() < 0.2:
        s.crashes = [_crash(rng, s)]
    if rng.random() < 0.15:
        s.crashes += _dfs_fault_specs(rng, s)
    return s


SCENARIOS: dict[str, tuple[Callable[[random.Random], SimSchedule], str]] = {
    "deadlock": (_deadlock, "quiet rounds, late completion notices, eager flushes (commitlab deadlock's family)"),
    "lock-held": (_lock_held, "a cleaner holds the table lock after a commit (#19902)"),
    "checkpoint-abort": (_checkpoint_abort, "the job manager aborts one or two checkpoints"),
    "notification-lost": (_notification_lost, "a checkpoint-complete notification never reaches the coordinator"),
    "checkpoint-timeout": (_checkpoint_timeout, "a write task's snapshot outlasts the checkpoint timeout"),
    "task-crash": (_task_crash, "a write task or the coordinator crashes at a fault point; global failover"),
    "wrong-instant": (_wrong_instant, "every task fails over while the coordinator starts a new instant (HUDI-6194)"),
    "wrong-instant-unfixed": (_wrong_instant_unfixed, "the same, bootstraps answered at once (Hudi before HUDI-6194)"),
    "dfs-faults": (_dfs_faults, "the coordinator's DFS fails one write after a trigger, or is slow for 5 s"),
    "message-delay": (_message_delay, "long-tailed message delays (cross-pair reordering) and late notices"),
    "random": (_random, "all of the above, each with some probability"),
}


def recorded_seed(path: str) -> int | None:
    """The seed a schedule file written by shrink records beside the schedule (None: a bare
    schedule, or a file that does not read, which :meth:`SimSchedule.load` then names)."""
    try:
        with open(path) as f:
            seed = json.load(f).get("seed")
    except (OSError, ValueError, AttributeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def draw(scenario: str, seed: int, chooser: Chooser | None = None) -> SimSchedule:
    """The schedule of ``seed`` in ``scenario`` (a pure function of both): what the scenario
    leaves open is the chooser's decision (``RandomChooser(seed)`` unless one is given)."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    chooser = chooser if chooser is not None else RandomChooser(seed)
    return SCENARIOS[scenario][0](chooser.source(ChoicePoint.SCHEDULE, scenario))
