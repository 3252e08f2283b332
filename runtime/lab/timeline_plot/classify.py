"""What each trace event becomes in the picture: a lane, a bar of a kind, a commit, a marker, a
checkpoint's trigger, completion or abort, a failover.

An event is read by its category and its args (``runtime.core.trace_events``), never by its name:
the name is for people, and renaming an event keeps it in the picture."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.core import roles, trace_events
from runtime.lab.timeline_plot.events import TraceEvent

_WRITER = re.compile(r"^writer-(\d+)$")


def _natural(name: str) -> tuple[int | str, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def lanes_of(evs: list[TraceEvent], deadlock_task: str | None) -> list[str]:
    """The lanes top to bottom: the write tasks, the coordinator, the job manager, then the rest."""
    procs = {e.process for e in evs if e.cat != trace_events.FAILOVER}  # failovers span every lane
    if deadlock_task:
        procs.add(deadlock_task)
    writers = {p for p in procs if _WRITER.match(p)}
    writers |= {e.process for e in evs if e.thread == "mailbox"}
    lanes = sorted(writers, key=_natural)
    lanes += [roles.COORDINATOR, roles.JOB_MANAGER]
    lanes += sorted(procs - set(lanes), key=_natural)
    return lanes


def writer_lanes(lanes: list[str], evs: list[TraceEvent]) -> list[str]:
    """The lanes of write tasks: named so, or with a mailbox thread."""
    return [n for n in lanes if _WRITER.match(n) or any(e.process == n and e.thread == "mailbox" for e in evs)]


def checkpoint_statuses(d: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    if not d:
        return {}
    detail = d.get("detail", d) if isinstance(d.get("detail"), Mapping) else d
    out = {}
    for k, v in detail.items():
        try:
            out[int(k)] = dict(v) if isinstance(v, Mapping) else {"status": str(v)}
        except (TypeError, ValueError):
            continue
    return out


_COUNT_KINDS = (
    "step",
    "mail",
    "snapshot",
    "flush",
    "blocked",
    "other",
    "commit",
    "instant",
    "fault",
    "failover",
    "ckp_trigger",
    "ckp_complete",
    "ckp_abort",
)


@dataclass
class Classified:
    """The events of a run sorted by what they become in the picture."""

    bars: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNT_KINDS, 0))
    commits: list[TraceEvent] = field(default_factory=list)
    points: list[tuple[str, TraceEvent]] = field(default_factory=list)  # (kind, event) markers
    triggers: dict[int, float] = field(default_factory=dict)
    snapshots: dict[int, float] = field(default_factory=dict)
    completes: dict[int, float] = field(default_factory=dict)
    aborts: dict[int, float] = field(default_factory=dict)
    traced_triggers: set[int] = field(default_factory=set)  # the job manager's own "checkpoint k triggered"
    failovers: list[FailoverMark] = field(default_factory=list)


@dataclass
class CheckpointMark:
    """A checkpoint's dashed line: a ``trigger``, ``complete`` or ``abort`` at ``t``, and its label,
    whose row above the axes and alignment the frame sets (:func:`runtime.lab.timeline_plot.draw.open_frame`)."""

    kind: str
    checkpoint: int
    t: float
    label: str
    row: int = 0
    ha: str = "left"


@dataclass(frozen=True)
class FailoverMark:
    """A failover of the job: when it failed, what the picture calls it, when every restarted role
    was up (None: never, or not traced)."""

    at: float
    label: str
    back_at: float | None = None


def _deadlock_span(
    evs: list[TraceEvent], deadlock: Mapping[str, Any], dl_task: str, t_start: float, t_end: float
) -> tuple[float, float]:
    """The deadlocked wait: it never ended, so no event records it. It began after the task's last
    mailbox event (the step it blocks in is still running) and had lasted blocked_s at detection."""
    blocked_s = float(deadlock.get("blocked_s") or 0.0)
    last = max((e.end for e in evs if e.process == dl_task and e.thread != "io"), default=t_start)
    since = max(last, t_end - blocked_s, t_start)
    return (since, since + blocked_s)


def _sort_span(e: TraceEvent, out: Classified) -> None:
    """A complete event: a bar of its lane, a commit or an instant marker."""
    if e.cat == trace_events.BLOCKED:
        kind = "blocked"
    elif e.cat == trace_events.FLUSH or e.thread == "io":
        kind = "flush"
    elif e.cat == trace_events.COMMIT:
        out.commits.append(e)
        out.counts["commit"] += 1
        return
    elif e.thread == "mailbox":
        kind = {trace_events.MAIL: "mail", trace_events.SNAPSHOT: "snapshot"}.get(e.cat, "step")
        if (k := _checkpoint_of(e, trace_events.SNAPSHOT_TAKEN)) is not None:
            out.snapshots[k] = min(out.snapshots.get(k, e.t), e.t)
    elif e.cat == trace_events.INSTANT:  # the coordinator starting an instant: a marker
        out.points.append(("new_instant", e))
        out.counts["instant"] += 1
        return
    else:
        kind = "other"
    out.bars.setdefault((e.process, kind), []).append((e.t, e.dur))
    out.counts[kind] += 1


def _checkpoint_of(e: TraceEvent, phase: str) -> int | None:
    """The checkpoint ``e`` is an event of, when it is one in ``phase``."""
    ckp = e.args.get(trace_events.CHECKPOINT_ID)
    if e.args.get(trace_events.CHECKPOINT_PHASE) != phase or not isinstance(ckp, int):
        return None
    return ckp


def _sort_instant(e: TraceEvent, out: Classified, failovers: list[TraceEvent]) -> None:
    """An instant event: a checkpoint's trigger, completion or abort, a fault, or a marker."""
    # the job manager's records of a checkpoint, each a dashed line
    lines = {
        trace_events.TRIGGERED: out.triggers,
        trace_events.COMPLETED: out.completes,
        trace_events.ABORTED: out.aborts,
    }
    phase, ckp = e.args.get(trace_events.CHECKPOINT_PHASE), e.args.get(trace_events.CHECKPOINT_ID)
    if phase in lines and isinstance(ckp, int):
        lines[phase].setdefault(ckp, e.t)
    elif phase == trace_events.NOTIFIED:
        return  # the writer's notifyCheckpointComplete mail already shows it
    elif e.cat == trace_events.FAULT:
        out.points.append(("fault", e))
        out.counts["fault"] += 1
    elif e.cat == trace_events.FAILOVER:
        failovers.append(e)
    else:
        out.points.append(("instant", e))
        out.counts["instant"] += 1


def _failover_marks(events: list[TraceEvent]) -> list[FailoverMark]:
    """The driver's markers, paired by number: where the job failed (labelled with the marker's
    name up to its colon), where every restarted role was back."""

    def of(phase: str) -> dict[Any, TraceEvent]:
        return {
            e.args.get(trace_events.FAILOVER_NUMBER): e
            for e in events
            if e.args.get(trace_events.FAILOVER_PHASE) == phase
        }

    back = of(trace_events.RESTARTED)
    return [
        FailoverMark(e.t, e.name.split(":")[0], back[n].t if n in back else None)
        for n, e in of(trace_events.FAILED).items()
    ]


def classify(evs: list[TraceEvent]) -> Classified:
    """Every event of a run, sorted by what it becomes in the picture."""
    out = Classified()
    failovers: list[TraceEvent] = []
    for e in evs:
        if e.ph == "X":
            _sort_span(e, out)
        elif e.ph in ("i", "I", "R"):
            _sort_instant(e, out, failovers)
    out.failovers = _failover_marks(failovers)
    out.counts["failover"] = len(out.failovers)
    out.traced_triggers = set(out.triggers)
    for k, t in out.snapshots.items():
        out.triggers.setdefault(k, t)
    return out


def checkpoint_marks(srt: Classified, statuses: dict[int, dict[str, Any]]) -> list[CheckpointMark]:
    """The dashed lines of the checkpoints, each with its label; counts them in ``srt.counts``."""
    marks: list[CheckpointMark] = []
    for k, t in sorted(srt.triggers.items()):
        st = statuses.get(k, {}).get("status")
        suffix = "" if st in (None, "completed", "aborted", "timed-out") or k in srt.completes else f" ({st})"
        if st is None and statuses and k not in srt.completes and k not in srt.aborts:
            suffix = " (never completed)"
        marks.append(CheckpointMark("trigger", k, t, f"ckp {k}{suffix}"))
    for k, t in sorted(srt.completes.items()):
        marks.append(CheckpointMark("complete", k, t, f"ckp {k} done"))
    for k, t in sorted(srt.aborts.items()):
        marks.append(CheckpointMark("abort", k, t, f"ckp {k} aborted"))
    counts = srt.counts
    counts["ckp_trigger"], counts["ckp_complete"], counts["ckp_abort"] = (
        len(srt.triggers),
        len(srt.completes),
        len(srt.aborts),
    )
    return marks


def time_range(
    evs: list[TraceEvent], deadlock: Mapping[str, Any] | None, dl_task: str | None
) -> tuple[float, float, tuple[float, float] | None]:
    """(start, end) of the run (the start at 0 or before), and the deadlocked wait, which may end last."""
    t_end = max((e.end for e in evs), default=0.0)
    t_start = min(0.0, min((e.t for e in evs), default=0.0))
    dl_span = None
    if deadlock and dl_task:
        dl_span = _deadlock_span(evs, deadlock, dl_task, t_start, t_end)
        t_end = max(t_end, dl_span[1])
    return t_start, t_end, dl_span
