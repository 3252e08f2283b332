"""The judge of one simulated run: the invariants :mod:`runtime.sim.explore` checks on its result
(exactly-once, no deadlock, one instant per checkpoint, ascending commits, liveness), each verdict
with the role and the moment it is about. One module below explore and the searches, so the
judging of several jobs' runs (:mod:`runtime.sim.jobs_explore`) uses it without importing them."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from runtime.core import roles, trace_events
from runtime.lab.fault_matrix import (
    COMMIT_ACK_DEADLOCK,
    FAILED,
    KNOWN,
    PASSED,
    RECOMMITTED_COMPLETED,
    VIOLATION,
    known_failure,
    known_loss,
    known_stall,
)
from runtime.lab.results import JobResult
from runtime.lab.status import Status

MAX_REAL_S = 120.0  # one run's real-time guard
# the protocols whose coordinator maps one checkpoint id to one instant (PROTOCOLS.md, P4)
ONE_INSTANT_PER_CHECKPOINT = {"coordination-rpc", "coordination-rpc-async"}
# what a failover caused by an injected crash says (those failovers are the schedule's own)
INJECTED = ("InjectedCrash", "injected crash", "injected failure", "InjectedDfsError", "injected transient DFS error")


@dataclass
class Verdict:
    outcome: str  # passed / known failure / VIOLATION / FAILED
    invariant: str | None  # the invariant that failed (None: passed, or a liveness failure)
    detail: str
    role: str | None = None  # the role the failure is about, when there is one (trace excerpt)
    at_failover: bool = False  # the failure is what made the job fail over: the excerpt ends there

    @property
    def failing(self) -> bool:
        return self.outcome in (VIOLATION, FAILED)

    @property
    def kind(self) -> str:
        """What "still fails the same way" means when shrinking."""
        return f"{self.outcome}/{self.invariant}"


class InstantProbe:
    """Collects, from the simulated network, the instant the coordinator handed out for each
    checkpoint key (coordination-rpc's ``InstantTimeReply``): the protocol promises one per
    key. A failover, global or region, rolls the pending instants back and the coordinator hands
    out new ones, so keys are counted per failover epoch (the host calls :meth:`on_failover`;
    a lost or misplaced write across the failover is the exactly-once check's to find)."""

    def __init__(self) -> None:
        self.by_key: dict[int, set[str]] = {}
        self._seen: dict[tuple[int, int], set[str]] = {}
        self.epoch = 0  # failovers so far

    def on_failover(self) -> None:
        self.epoch += 1

    def __call__(self, replier: str, incarnation: int, caller: str, method: str, value: Any) -> None:
        if method != "instant_time_request":
            return
        from runtime.core.codec import from_wire

        reply = from_wire(value)
        if getattr(reply, "status", None) == "OK" and getattr(reply, "instant", ""):
            key = int(reply.checkpoint_id)
            seen = self._seen.setdefault((self.epoch, key), set())
            seen.add(reply.instant)
            if len(seen) > len(self.by_key.get(key, ())):
                self.by_key[key] = set(seen)


def judge(
    protocol: str, result: JobResult, instants_by_key: dict[int, set[str]] | None = None, *, lost: int = 0
) -> Verdict:
    """The invariants on one simulated run's result (``instants_by_key``: what an
    :class:`InstantProbe` saw, for the protocols that promise one instant per checkpoint;
    ``lost``: messages the run lost in transit, whose failovers count as injected)."""
    status = result.status
    commits = result.commits
    if protocol in ONE_INSTANT_PER_CHECKPOINT:
        twice = {k: sorted(v) for k, v in (instants_by_key or {}).items() if len(v) > 1}
        if twice:
            k = min(twice)
            return Verdict(
                VIOLATION,
                "one-instant-per-checkpoint",
                f"the writers of checkpoint {k} were given instants {', '.join(twice[k])}",
            )
    recommitted = _commit_order(protocol, result)
    if isinstance(recommitted, Verdict):
        return recommitted
    d = result.deadlock
    if status == Status.DEADLOCKED and d is not None:
        text = (
            f"{d.task} blocked {d.blocked_s:.1f}s in {d.running_mail} waiting for "
            f"{d.releasing_mail}, which sits in its own mailbox"
        )
        if protocol in COMMIT_ACK_DEADLOCK:
            return Verdict(KNOWN, "no-deadlock", f"P1's deadlock: {text}", d.task)
        return Verdict(VIOLATION, "no-deadlock", text, d.task)
    error = str(result.error or "")
    known = known_failure(protocol, error) if status == Status.FAILED else known_stall(protocol, result)
    if known is not None:
        return Verdict(KNOWN, None, f"{known}: {error[:300]}")
    if status != Status.FINISHED:
        return Verdict(FAILED, None, f"{status.value}: {error}")
    eo = result.exactly_once
    if eo is not None and not eo.verified:
        detail = (
            f"lost {eo.lost}, duplicated {eo.duplicated}, unexpected {eo.unexpected}, mismatched {eo.mismatched} "
            f"{eo.error or ''}"
        ).strip()
        loss = known_loss(protocol, None, result)
        if loss is not None:
            return Verdict(KNOWN, "exactly-once", f"{loss}: {detail}")
        return Verdict(VIOLATION, "exactly-once", detail)
    survived = None if lost else _unexpected_failover(protocol, result)
    if survived is not None:
        return survived
    if recommitted is not None:
        return Verdict(KNOWN, "ascending-commits", recommitted)
    return Verdict(PASSED, None, f"{len(commits)} commit(s), exactly-once")


def _commit_order(protocol: str, result: JobResult) -> Verdict | str | None:
    """The ascending-commits invariant: a violation, or Hudi 1.1's second commit of a restored
    instant (the only disorder found, a known failure named once the rest is judged), or None."""
    commits = result.commits
    order = [int(c["checkpoint"]) for c in commits]
    instants = [c["instant"] for c in commits]
    if _ascending(order) and _ascending(instants):
        return None
    again = committed_twice(result) if protocol in RECOMMITTED_COMPLETED else set()
    rest = [c for c in commits if c["instant"] not in again]
    if again and _ascending([int(c["checkpoint"]) for c in rest]) and _ascending([c["instant"] for c in rest]):
        return f"{RECOMMITTED_COMPLETED[protocol]}: {', '.join(sorted(again))}; checkpoint order {order}"
    if not _ascending(order):
        return Verdict(VIOLATION, "ascending-commits", f"commits landed in checkpoint order {order}")
    return Verdict(VIOLATION, "ascending-commits", f"commit instants out of order: {instants}")


def _unexpected_failover(protocol: str, result: JobResult) -> Verdict | None:
    """A failover nothing injected: a failure the job only survived by restarting (a run that
    lost a message may fail over for it, Flink failing a task whose ask timed out: not asked then)."""
    for f in result.failovers:
        cause = str(f.error or "")
        if any(m in cause for m in INJECTED):
            continue
        known = known_failure(protocol, cause)
        if known is None:
            return Verdict(FAILED, None, f"recovered only by an unexpected failover: {cause[:300]}", at_failover=True)
        return Verdict(KNOWN, None, f"{known}, then a failover recovered it: {cause[:240]}", at_failover=True)
    return None


def _ascending(values: list[Any]) -> bool:
    return all(a <= b for a, b in pairwise(values))


def committed_twice(result: JobResult) -> set[str]:
    """The instants the coordinator committed more than once in the run (its ``commit`` spans in
    the trace, across its incarnations: the table keeps one completed instant per time)."""
    seen: set[str] = set()
    twice: set[str] = set()
    for ev in (result.simulation.trace if result.simulation is not None else None) or ():
        if len(ev) > 5 and ev[1] == "X" and ev[4] == trace_events.COMMIT and ev[2] == roles.COORDINATOR:
            instant = str(ev[5]).removeprefix("commit ")
            (twice if instant in seen else seen).add(instant)
    return twice


# -- the trace around a failure ---------------------------------------------------------------------
