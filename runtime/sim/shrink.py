"""Shrinking: a failing schedule made smaller while it still fails the same way.

Greedy delta debugging over the schedule description (:class:`~runtime.sim.schedule.SimSchedule`):
try each smaller variant (drop a round, drop a writer, drop a fault or a late notice, halve the
records, a calmer network), keep the first that still fails with the same outcome and invariant,
and start over from it until no variant does. Every candidate is strictly smaller by
:meth:`SimSchedule.size` or calmer, so the loop ends; ``max_runs`` bounds it anyway. The seed
stays fixed: it drives the network, so a candidate is a deterministic run too.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from runtime.core.config import JobConfig
from runtime.core.fault_spec import parse_faults
from runtime.sim.explore import run_schedule
from runtime.sim.judge import Verdict
from runtime.sim.schedule import DELAYS, SimSchedule

MAX_RUNS = 200


def _drop_checkpoint(s: SimSchedule, k: int) -> SimSchedule:
    """Without round ``k`` (1-based): later checkpoints move one down, with their faults."""

    def shift(c: int) -> int | None:
        return None if c == k else (c - 1 if c > k else c)

    t = copy.deepcopy(s)
    t.rounds = s.rounds[: k - 1] + s.rounds[k:]
    t.notify_delay_s = {n: v for c, v in s.notify_delay_s.items() if (n := shift(c)) is not None}
    t.clean_lock_s = {n: v for c, v in s.clean_lock_s.items() if (n := shift(c)) is not None}
    for name in ("abort_checkpoints", "lost_notifications", "slow_snapshots"):
        setattr(t, name, [shift(c) for c in getattr(s, name) if shift(c) is not None])
    t.crashes = []
    for spec in parse_faults(",".join(s.crashes)):  # the checkpoint moves like the others
        moved = shift(spec.checkpoint) if spec.checkpoint >= 0 else spec.checkpoint
        if moved is not None:
            t.crashes.append(dataclasses.replace(spec, checkpoint=moved).text())
    # a lock held after the last checkpoint never matters; keep the schedule valid
    t.clean_lock_s = {c: v for c, v in t.clean_lock_s.items() if c < t.checkpoints}
    return t


def candidates(s: SimSchedule) -> Iterator[tuple[str, SimSchedule]]:
    """Smaller variants of ``s``, the biggest cuts first."""
    if s.checkpoints > 1:
        for k in range(s.checkpoints, 0, -1):
            t = _drop_checkpoint(s, k)
            if any(t.rounds):
                yield f"drop round {k}", t
    if s.writers > 1:
        t = copy.deepcopy(s)
        t.writers = s.writers - 1
        t.rounds = [r // s.writers * t.writers for r in s.rounds]
        # a crash of the writer that no longer exists cannot happen
        t.crashes = [c for c in s.crashes if parse_faults(c)[0].task < t.writers]
        if any(t.rounds):
            yield f"{t.writers} writer(s)", t
    for name in ("notify_delay_s", "clean_lock_s"):
        for c in sorted(getattr(s, name)):
            t = copy.deepcopy(s)
            del getattr(t, name)[c]
            yield f"no {name} at {c}", t
    for name in ("abort_checkpoints", "lost_notifications", "slow_snapshots", "crashes"):
        for c in getattr(s, name):
            t = copy.deepcopy(s)
            getattr(t, name).remove(c)
            yield f"no {name} at {c}", t
    for i, r in enumerate(s.rounds):
        if r >= 2 * s.writers and r // 2 // s.writers * s.writers > 0:
            t = copy.deepcopy(s)
            t.rounds[i] = r // 2 // s.writers * s.writers
            yield f"halve round {i + 1}", t
    if s.delay != DELAYS[0]:
        t = copy.deepcopy(s)
        t.delay = DELAYS[0]
        yield "calm network", t


@dataclass
class ShrinkResult:
    original: SimSchedule
    schedule: SimSchedule
    verdict: Verdict
    runs: int
    steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "original": self.original.to_dict(),
            "schedule": self.schedule.to_dict(),
            "original_size": list(self.original.size()),
            "size": list(self.schedule.size()),
            "outcome": self.verdict.outcome,
            "invariant": self.verdict.invariant,
            "detail": self.verdict.detail,
            "runs": self.runs,
            "steps": self.steps,
        }


def shrink(
    schedule: SimSchedule,
    protocol: str,
    seed: int,
    *,
    storage: str = "memory",
    max_runs: int = MAX_RUNS,
    on_step: Callable[[str, SimSchedule], None] | None = None,
    base: JobConfig | None = None,
) -> ShrinkResult:
    """The smallest schedule found that fails like ``schedule`` does (same outcome and invariant).

    Raises ValueError when ``schedule`` does not fail in the first place."""
    verdict, _ = run_schedule(schedule, protocol, seed, storage=storage, base=base)
    if verdict.outcome == "passed":
        raise ValueError(
            f"seed {seed} passes for {protocol}: there is nothing to shrink "
            "(shrink a failing or known-failure seed from explore.json)"
        )
    want = verdict.kind
    current, runs, steps = schedule, 1, []
    progress = True
    while progress and runs < max_runs:
        progress = False
        for what, cand in candidates(current):
            if runs >= max_runs:
                break
            v, _ = run_schedule(cand, protocol, seed, storage=storage, base=base)
            runs += 1
            if v.kind == want:
                current, verdict, progress = cand, v, True
                steps.append(what)
                if on_step is not None:
                    on_step(what, cand)
                break
    return ShrinkResult(schedule, current, verdict, runs, steps)
