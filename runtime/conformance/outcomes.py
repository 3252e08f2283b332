"""What a scenario did, on each side, in the same words: the verdict (``exactly-once``,
``deadlock``, ``stall``, ``loss``, ``duplicate``), failovers, rollbacks, pending instants, rows lost
or duplicated, and for a deadlock the frame the write task was blocked in.

The lab's outcome comes from its run record (the watchdog's wait-for chain, the exactly-once
check); the real one from the harness's record of Hudi's job (its final status, its restarts, the
thread dump of a write task that stopped in Hudi, the timeline's instants) and from the official
reader on its table against the records' expected state. Nothing is inferred from the other side.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from runtime.conformance.real_run import RealRun
from runtime.core.json_doc import JsonObject
from runtime.lab.results import JobResult
from runtime.lab.verdicts import ExactlyOnce

VERDICTS = ("exactly-once", "deadlock", "stall", "loss", "duplicate")
_DATA_ACTIONS = ("commit", "deltacommit")
# a real task blocked in one of these waits for an instant its own mailbox would release
_INSTANT_WAITS = ("AbstractStreamWriteFunction.instantToWrite", "StreamWriteFunction.instantToWrite")


@dataclass
class Outcome:
    verdict: str
    status: str
    failovers: int
    rollbacks: list[str]  # instants a .rollback undid
    pending: list[str]  # writers' instants neither completed nor rolled back at the end
    lost: int | None = None
    duplicated: int | None = None
    blocked: str | None = None  # a deadlock's or stall's blocked frame (real: thread dump; lab: wait-for chain)
    detail: str = ""
    frames: list[str] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return asdict(self)


def _verdict_of(check: ExactlyOnce | None) -> str:
    if check is None or check.lost is None:
        return "stall"
    if check.lost:
        return "loss"
    if check.duplicated:
        return "duplicate"
    return "exactly-once" if check.verified else "loss"


def lab_outcome(result: JobResult) -> Outcome:
    """The lab run's outcome (a simulator run with its table on disk)."""
    rollbacks, pending = table_instants(result.table)
    out = Outcome(
        verdict=_verdict_of(result.exactly_once),
        status=result.status.value,
        failovers=len(result.failovers),
        rollbacks=rollbacks,
        pending=pending,
        lost=result.exactly_once.lost if result.exactly_once else None,
        duplicated=result.exactly_once.duplicated if result.exactly_once else None,
        detail=result.error or "",
    )
    if result.deadlock is not None:
        d = result.deadlock
        out.verdict = "deadlock"
        out.blocked = f"{d.task}: {d.running_mail}, waiting for {d.waiting_for}"
        out.frames = [
            d.running_mail,
            f"released by {d.releasing_mail} at position {d.mailbox_position} of its own mailbox",
        ]
        out.detail = d.explanation
    elif result.exactly_once is None and result.stalls:
        s = result.stalls[0]
        out.verdict = "stall"
        out.blocked = f"{s.task}: {s.what} ({s.waiting_on})"
    return out


def real_outcome(real: RealRun, table_check: ExactlyOnce | None, table_path: str) -> Outcome:
    """Hudi's job's outcome: ``table_check`` is its table at ``table_path`` against the expected
    state (None when the job did not commit every round with data)."""
    rollbacks, pending = table_instants(table_path)
    out = Outcome(
        verdict=_verdict_of(table_check) if real.job_status == "COMMITTED" else "stall",
        status=real.job_status,
        failovers=real.failovers,
        rollbacks=rollbacks,
        pending=pending,
        lost=table_check.lost if table_check else None,
        duplicated=table_check.duplicated if table_check else None,
        detail=real.error or "",
    )
    b = real.blocked
    if b is not None and real.job_status != "COMMITTED":
        out.blocked = f"{b.thread}: {' <- '.join(b.frames)} ({b.state}, {b.waited_ms / 1000:.1f} s)"
        out.frames = list(b.frames)
        # a mailbox thread waiting for an instant inside processElement: what releases it (the
        # coordinator's event or a new instant) can only run on that same thread
        if any(f in b.frames for f in _INSTANT_WAITS) and "MailboxProcessor.runMailboxLoop" in b.frames:
            out.verdict = "deadlock"
    return out


def table_instants(table_path: str) -> tuple[list[str], list[str]]:
    """The completed ``.rollback`` instants, and the writers' instants left pending, from the
    instant files of the table's timeline (any table version: 0.10 writes 3, 0.12 and 0.13 write 5,
    which the lab's table model does not open; layout 1 in ``.hoodie``, layout 2 in
    ``.hoodie/timeline`` with ``<requested>_<completed>`` names)."""
    hoodie = os.path.join(table_path, ".hoodie")
    folder = os.path.join(hoodie, "timeline") if os.path.isdir(os.path.join(hoodie, "timeline")) else hoodie
    if not os.path.isdir(folder):
        return [], []
    completed: set[tuple[str, str]] = set()
    started: set[tuple[str, str]] = set()
    for name in os.listdir(folder):
        parts = name.split(".")
        if not parts[0][:1].isdigit() or len(parts) < 2:
            continue
        ts = parts[0].split("_")[0]
        if parts[-1] in ("requested", "inflight"):
            action = parts[1] if len(parts) == 3 else "commit"  # <ts>.inflight: a commit's
            started.add((ts, action))
        else:
            completed.add((ts, parts[1]))
    rollbacks = sorted(ts for ts, action in completed if action == "rollback")
    pending = sorted(ts for ts, action in started - completed if action in _DATA_ACTIONS)
    return rollbacks, pending
