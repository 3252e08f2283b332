"""A run's timeline as a picture, and a checker for Chrome trace-event files.

:func:`plot_timeline` draws the trace events of a run (what ``--trace FILE`` or
``simulate(..., chrome_trace_path=...)`` writes, or the raw per-role events before
:func:`runtime.core.trace.write_trace` numbers them) as one PNG: a lane per write task, then the
coordinator and the job manager, time in seconds from the start on the x axis.

* write tasks: every mail and default-action step on the mailbox thread is a thin grey bar in the
  upper half of the lane, every flush (the ``io`` thread) a blue bar in the lower half, every
  blocked wait (complete events with ``cat="blocked"``) a red bar over the mailbox row;
* a deadlock (the ``deadlock`` record of ``result.json``) is the wait that never ended, so it is in
  no trace: it is drawn as a red bar over the whole lane, from the start of the wait to the end of
  the run, labelled ``DEADLOCK: waits for <releasing mail> in its own mailbox``;
* checkpoints are vertical dashed lines: ``ckp k`` where the first write task takes barrier k
  (its ``snapshotState``; a ``checkpoint k triggered`` instant of the job manager wins when the
  trace has one), ``ckp k done`` where the job manager records the completion, ``ckp k aborted``
  where it records an abort;
* commits are green diamonds on the coordinator lane.

:func:`validate_trace` checks a trace document against the trace-event format
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU) and returns
the problems it found (empty: valid).

``python -m runtime.lab.timeline_plot TRACE.json OUT.png [--result result.json]`` draws a trace file.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

__all__ = [
    "TraceEvent",
    "TimelinePlot",
    "normalize_events",
    "plot_timeline",
    "render_timeline",
    "plot_trace_file",
    "validate_trace",
    "PHASES",
]

# -- the trace-event format ---------------------------------------------------------------------

#: Every phase of the trace-event format: duration (B/E), complete (X), instant (i, and the
#: deprecated I), counter (C), async (b/n/e nestable; S/T/p/F legacy), flow (s/t/f), sample (P),
#: object (N/O/D), metadata (M), memory dump (V/v), mark (R), clock sync (c), context ( and ).
PHASES = frozenset("B E X i I C b n e S T p F s t f P N O D M V v R c ( )".split())
_METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
_INSTANT_SCOPES = {"g", "p", "t"}
_ID_PHASES = set("bneSTpFstfNOD")  # events that need an id (async, flow, object)
_MAX_PROBLEMS = 200


def _is_number(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_Flow = tuple[float, int, str, tuple[Any, Any], str]  # (ts, order, ph, (cat, id), where)


def validate_trace(doc: Any) -> list[str]:
    """Checks a trace document (the JSON object format: ``{"traceEvents": [...], ...}``); returns
    one line per problem, empty when the document is valid.

    Checked: the top-level object and its ``traceEvents`` list (``displayTimeUnit`` in ms/ns when
    present); every event is an object with a known ``ph``; ``ts`` is a finite, non-negative
    number (required on every event but metadata); ``pid``/``tid`` are non-negative integers
    (Perfetto's and chrome://tracing's track keys) and present where the phase needs them;
    ``X`` has a ``name`` and a ``dur`` >= 0; instants have ``s`` in {g, p, t} when present;
    ``M`` events carry a known metadata name and the value in ``args``; ``B``/``E`` pair up per
    thread; async, flow and object events carry an ``id``; flow events (``s``/``t``/``f``, keyed
    by category and id) start before they step or finish, every start finishes, a finish comes
    no earlier than its start, and ``bp`` is ``"e"`` when present; ``args`` is an object.
    """
    if not isinstance(doc, Mapping):
        return [f"the top level must be a JSON object with traceEvents, not {type(doc).__name__}"]
    events = doc.get("traceEvents")
    if "traceEvents" not in doc:
        return ["the top level has no traceEvents"]
    if not isinstance(events, list):
        return [f"traceEvents must be a list, not {type(events).__name__}"]
    problems: list[str] = []
    unit = doc.get("displayTimeUnit")
    if unit is not None and unit not in ("ms", "ns"):
        problems.append(f"displayTimeUnit must be 'ms' or 'ns', not {unit!r}")

    open_b: dict[tuple[Any, Any], int] = {}
    flows: list[_Flow] = []
    for i, ev in enumerate(events):
        _check_event(i, ev, problems, open_b, flows)
    _check_flows(flows, problems)
    if len(problems) > _MAX_PROBLEMS:
        problems = problems[:_MAX_PROBLEMS] + [f"... and {len(problems) - _MAX_PROBLEMS} more"]
    return problems


def _check_event(i: int, ev: Any, problems: list[str], open_b: dict[tuple[Any, Any], int], flows: list[_Flow]) -> None:
    """One event: its phase, the fields every event has, the fields of its phase, its id."""
    where = f"event {i}"
    if not isinstance(ev, Mapping):
        problems.append(f"{where}: not an object ({type(ev).__name__})")
        return
    ph = ev.get("ph")
    name = ev.get("name")
    if isinstance(name, str):
        where = f"event {i} ({ph} {name[:60]!r})"
    if ph is None:
        problems.append(f"{where}: no ph")
        return
    if ph not in PHASES:
        problems.append(f"{where}: unknown ph {ph!r}")
        return
    _check_common_fields(ev, ph, name, where, problems)
    _check_phase_fields(ev, ph, name, where, problems, open_b)
    if ph in _ID_PHASES:
        _check_id(i, ev, ph, where, problems, flows)


def _check_common_fields(ev: Mapping[str, Any], ph: str, name: Any, where: str, problems: list[str]) -> None:
    """Timestamps, process and thread, args and cat."""
    bad = problems.append
    if "ts" in ev or ph != "M":
        ts = ev.get("ts")
        if ts is None:
            bad(f"{where}: no ts")
        elif not _is_number(ts):
            bad(f"{where}: ts must be a finite number, not {ts!r}")
        elif ts < 0:
            bad(f"{where}: negative ts {ts}")
    for key in ("tts", "tdur"):
        if key in ev and not (_is_number(ev[key]) and ev[key] >= 0):
            bad(f"{where}: {key} must be a non-negative number, not {ev[key]!r}")
    needs_tid = ph not in ("C", "N", "O", "D") and not (ph == "M" and str(name).startswith("process"))
    for key, required in (("pid", True), ("tid", needs_tid)):
        if key not in ev:
            if required:
                bad(f"{where}: no {key}")
        elif not (_is_int(ev[key]) and ev[key] >= 0):
            bad(f"{where}: {key} must be a non-negative integer, not {ev[key]!r}")
    if "args" in ev and not isinstance(ev["args"], Mapping):
        bad(f"{where}: args must be an object, not {type(ev['args']).__name__}")
    if ph != "M" and "cat" in ev and not isinstance(ev["cat"], str):
        bad(f"{where}: cat must be a string")


def _check_phase_fields(
    ev: Mapping[str, Any], ph: str, name: Any, where: str, problems: list[str], open_b: dict[tuple[Any, Any], int]
) -> None:
    """What each phase needs: a name, a complete event's dur, an instant's scope, a metadata value,
    a counter's numbers, B/E pairs per thread."""
    bad = problems.append
    if ph in ("X", "B", "i", "I", "C", "b", "n", "S") and not isinstance(name, str):
        bad(f"{where}: no name")
    if ph == "X":
        dur = ev.get("dur")
        if dur is None:
            bad(f"{where}: a complete event needs dur")
        elif not _is_number(dur):
            bad(f"{where}: dur must be a finite number, not {dur!r}")
        elif dur < 0:
            bad(f"{where}: negative dur {dur}")
    elif ph in ("i", "I"):
        if "s" in ev and ev["s"] not in _INSTANT_SCOPES:
            bad(f"{where}: instant scope s must be one of g, p, t, not {ev['s']!r}")
    elif ph == "M":
        _check_metadata(ev, name, where, problems)
    elif ph == "C":
        args = ev.get("args")
        if isinstance(args, Mapping) and not all(_is_number(v) for v in args.values()):
            bad(f"{where}: a counter's args must all be numbers")
    elif ph in ("B", "E"):
        key = (ev.get("pid"), ev.get("tid"))
        if ph == "B":
            open_b[key] = open_b.get(key, 0) + 1
        elif open_b.get(key, 0) == 0:
            bad(f"{where}: an E event with no open B on pid {key[0]} tid {key[1]}")
        else:
            open_b[key] -= 1


def _check_metadata(ev: Mapping[str, Any], name: Any, where: str, problems: list[str]) -> None:
    bad = problems.append
    if name not in _METADATA_NAMES:
        bad(f"{where}: unknown metadata name {name!r}")
        return
    raw_args = ev.get("args")
    args: Mapping[str, Any] = raw_args if isinstance(raw_args, Mapping) else {}
    if name.endswith("_name"):
        if not isinstance(args.get("name"), str):
            bad(f"{where}: {name} needs args.name (a string)")
    elif name.endswith("_sort_index"):
        if not _is_int(args.get("sort_index")):
            bad(f"{where}: {name} needs args.sort_index (an integer)")
    elif name == "process_labels" and not isinstance(args.get("labels"), str):
        bad(f"{where}: process_labels needs args.labels (a string)")


def _check_id(i: int, ev: Mapping[str, Any], ph: str, where: str, problems: list[str], flows: list[_Flow]) -> None:
    """Async, flow and object events carry an id; a flow event is kept for :func:`_check_flows`."""
    bad = problems.append
    fid = ev.get("id", ev.get("id2"))
    if fid is None:
        bad(f"{where}: a {ph!r} event needs an id")
    elif isinstance(fid, Mapping):
        if not ({"local", "global"} & set(fid)):
            bad(f"{where}: id2 must have 'local' or 'global'")
    elif not (_is_int(fid) or isinstance(fid, str)):
        bad(f"{where}: id must be an integer or a string, not {fid!r}")
    elif ph in ("s", "t", "f"):
        ts = ev.get("ts")
        flows.append((ts if _is_number(ts) else 0.0, i, ph, (ev.get("cat"), fid), where))
    if ph in ("s", "t", "f") and "bp" in ev and ev["bp"] != "e":
        bad(f"{where}: bp must be 'e' when present, not {ev['bp']!r}")


def _check_flows(flows: list[_Flow], problems: list[str]) -> None:
    """In time order, every step and finish follows a start with the same category and id."""
    bad = problems.append
    opened: dict[tuple[Any, Any], tuple[float, str]] = {}
    for ts, _, ph, key, where in sorted(flows, key=lambda f: (f[0], "stf".index(f[2]), f[1])):
        if ph == "s":
            if key in opened:
                bad(f"{where}: flow {key[1]!r} (cat {key[0]!r}) starts again before it finished")
            opened[key] = (ts, where)
        elif key not in opened:
            bad(f"{where}: flow {'step' if ph == 't' else 'end'} with no start (id {key[1]!r}, cat {key[0]!r})")
        elif ph == "f":
            del opened[key]
    for key, (_, where) in opened.items():
        bad(f"{where}: flow {key[1]!r} (cat {key[0]!r}) starts but never finishes")


# -- normalizing events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceEvent:
    """One trace event with names instead of numbers and times in seconds (from the start)."""

    process: str
    thread: str
    ph: str
    name: str
    cat: str
    t: float  # seconds from the start of the run
    dur: float  # seconds (0 for anything but complete events)
    args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> float:
        return self.t + self.dur


def _events_of(events: Any) -> list[Mapping[str, Any]]:
    if isinstance(events, Mapping):
        events = events.get("traceEvents", [])
    return [e for e in events if isinstance(e, Mapping)]


def normalize_events(events: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[TraceEvent]:
    """Events as :func:`~runtime.core.trace.write_trace` writes them (integer pid/tid named by ``M``
    events, ``ts`` already relative to the run's start) or as a role's tracer records them
    (pid = role name, tid = thread name, ``ts`` on the role's clock) become :class:`TraceEvent`
    records, sorted by time. A written trace keeps its time origin; raw events are shifted so the
    earliest is at 0. A trace document (``{"traceEvents": [...]}``) is accepted too."""
    evs = _events_of(events)
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in evs:
        if e.get("ph") != "M":
            continue
        label = (e.get("args") or {}).get("name")
        if label is None:
            continue
        if e.get("name") == "process_name":
            procs[e.get("pid")] = str(label)
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str(label)
    body = [e for e in evs if e.get("ph") != "M" and _is_number(e.get("ts"))]
    written = bool(procs or threads) or all(_is_int(e.get("pid")) for e in body if "pid" in e)
    origin = 0.0
    if body and not (written and min(e["ts"] for e in body) >= 0):
        origin = min(e["ts"] for e in body)
    out = []
    for e in body:
        pid, tid = e.get("pid", "?"), e.get("tid", "main")
        process = procs.get(pid, str(pid))
        thread = threads.get((pid, tid), str(tid))
        dur = e.get("dur", 0.0) if e.get("ph") == "X" and _is_number(e.get("dur")) else 0.0
        out.append(
            TraceEvent(
                process,
                thread,
                str(e.get("ph")),
                str(e.get("name", "")),
                str(e.get("cat", "")),
                (e["ts"] - origin) / 1e6,
                max(0.0, dur) / 1e6,
                dict(e.get("args") or {}),
            )
        )
    out.sort(key=lambda ev: (ev.t, ev.process, ev.thread))
    return out


# -- the picture ----------------------------------------------------------------------------------

COLORS = {
    "step": "#c4c4c4",  # a default-action step on the mailbox thread
    "mail": "#6b6b6b",  # a mail (operator event, checkpoint notification, resume)
    "snapshot": "#3d3d3d",  # snapshotState (the barrier)
    "flush": "#1f6fd1",  # a flush on the io thread
    "blocked": "#e00000",  # a blocked wait: pure-ish red, nothing else uses it
    "other": "#9a9a9a",
    "commit": "#1e9e3a",
    "instant": "#7a7a7a",
    "trigger": "#555555",
    "complete": "#1e7a34",
    "abort": "#d97a00",
    "fault": "#d97a00",
    "alarm": "#b00000",  # text about the deadlock: dark red, so pure red stays the bars' alone
    "failover": "#7b2cbf",  # a failover: the job failed here, and was down until the shade ends
}
_LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.6}
_WRITER = re.compile(r"^writer-(\d+)$")
_CKP_DONE = re.compile(r"^checkpoint (\d+) complete")
_CKP_ABORT = re.compile(r"^checkpoint (\d+) (?:aborted|timed.out)")
_CKP_TRIGGER = re.compile(r"^checkpoint (\d+) triggered")
_SNAPSHOT = re.compile(r"^snapshotState\(ckp=(\d+)\)")


@dataclass
class TimelinePlot:
    """What :func:`render_timeline` drew: the file, the lanes top to bottom, how many shapes of
    each kind, the deadlock label (None: no deadlock), and where each lane and the time axis are
    in the PNG (pixel rows ``(top, bottom)`` and columns ``(left, right)``)."""

    path: str
    lanes: list[str]
    counts: dict[str, int]
    duration_s: float
    deadlock_label: str | None = None
    checkpoint_marks: list[dict[str, Any]] = field(default_factory=list)
    lane_pixels: dict[str, tuple[int, int]] = field(default_factory=dict)
    x_pixels: tuple[int, int] = (0, 0)
    x_range_s: tuple[float, float] = (0.0, 1.0)  # the seconds at x_pixels' two ends
    size_px: tuple[int, int] = (0, 0)  # (width, height)

    def time_of(self, column: int) -> float:
        """The time (seconds from the start) at a PNG column."""
        (c0, c1), (s0, s1) = self.x_pixels, self.x_range_s
        return s0 + (column - c0) / (c1 - c0) * (s1 - s0)


def _natural(name: str) -> tuple[int | str, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _lanes(evs: list[TraceEvent], deadlock_task: str | None) -> list[str]:
    procs = {e.process for e in evs if e.cat != "failover"}  # failovers span every lane
    if deadlock_task:
        procs.add(deadlock_task)
    writers = {p for p in procs if _WRITER.match(p)}
    writers |= {e.process for e in evs if e.thread == "mailbox"}
    lanes = sorted(writers, key=_natural)
    lanes += ["coordinator", "job-manager"]
    lanes += sorted(procs - set(lanes), key=_natural)
    return lanes


def _checkpoint_int(d: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
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


def _place_labels(marks: list[dict[str, Any]], x0: float, x1: float, width_in: float, fontsize: float) -> int:
    """Assigns each mark's label a row above the axes so no two labels overlap; returns rows."""
    char_frac = (fontsize * 0.62 / 72.0) / max(1e-9, width_in)  # a character's width, axes fraction
    row_ends: list[float] = []
    for m in sorted(marks, key=lambda m: m["t"]):
        xf = (m["t"] - x0) / max(1e-12, x1 - x0)
        width = char_frac * (len(m["label"]) + 1)
        m["ha"] = "left" if xf + width <= 1.03 else "right"  # near the right edge: to the left
        left, right = (xf - char_frac, xf + width) if m["ha"] == "left" else (xf - width, xf + char_frac)
        for r, end in enumerate(row_ends):
            if left > end:
                row_ends[r] = right
                m["row"] = r
                break
        else:
            row_ends.append(right)
            m["row"] = len(row_ends) - 1
    return len(row_ends)


def _label_deadlock(fig: Any, ax: Any, span: tuple[float, float], y: float, head: str, detail: str) -> None:
    """Writes the deadlock label inside its bar, in the largest font that fits: one line, else
    the head wrapped on two; the detail line goes when there is no room. A bar too short for any
    of it gets the label beside it, on a white box."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (xa, ya), (xb, yb) = ax.transData.transform([(span[0], y - 0.46), (span[1], y + 0.46)])
    room_w, room_h = abs(xb - xa) - 12, abs(yb - ya) - 6
    wrapped = head.replace(" in its own", "\nin its own", 1)
    for text, size, with_detail in [
        (head, 10, True),
        (head, 9, True),
        (wrapped, 10, True),
        (wrapped, 9, True),
        (head, 8, False),
        (wrapped, 8, False),
    ]:
        t = ax.text(
            span[0],
            y,
            "",
            fontsize=size,
            fontweight="bold",
            color="white",
            va="center",
            ha="left",
            zorder=8,
            linespacing=1.05,
        )
        t.set_text(text)
        box = t.get_window_extent(renderer)
        sub_h = 11.0 if with_detail else 0.0
        if box.width <= room_w and box.height + sub_h <= room_h:
            break
        t.remove()
    else:  # no room inside: beside the bar, readable over whatever is there
        ax.text(
            span[0],
            y,
            head + "  ",
            fontsize=9,
            fontweight="bold",
            color=COLORS["alarm"],
            va="center",
            ha="right",
            zorder=9,
            bbox={"facecolor": "white", "edgecolor": COLORS["alarm"], "pad": 2.0},
        )
        return
    _centre_deadlock_label(fig, ax, t, box, (span[0], y), detail if with_detail else None, room_w)


def _centre_deadlock_label(
    fig: Any, ax: Any, t: Any, box: Any, at: tuple[float, float], detail: str | None, room_w: float
) -> None:
    """Centres the block vertically in the bar: the head above, the detail line (shortened to fit) below."""
    renderer = fig.canvas.get_renderer()
    span0, y = at
    pad = 6 * 72.0 / fig.dpi  # points
    if detail is None:
        t.set_position((span0, y))
        t.set_transform(ax.transData + _offset(fig, pad, 0))
        return
    head_pt = box.height * 72.0 / fig.dpi
    t.set_transform(ax.transData + _offset(fig, pad, 5.5))  # the block (head, gap, detail) centred
    sub = ax.text(
        span0,
        y,
        detail,
        fontsize=7.5,
        color="white",
        va="center",
        ha="left",
        zorder=8,
        transform=ax.transData + _offset(fig, pad, 5.5 - head_pt / 2 - 6.5),
    )
    while sub.get_window_extent(renderer).width > room_w and len(sub.get_text()) > 20:
        sub.set_text(sub.get_text()[:-6].rstrip(" .…") + "…")


def _offset(fig: Any, dx_pt: float, dy_pt: float) -> Any:
    from matplotlib.transforms import ScaledTranslation

    return ScaledTranslation(dx_pt / 72.0, dy_pt / 72.0, fig.dpi_scale_trans)


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

# writer lanes: the mailbox row on top, the io row below; blocked waits over the mailbox row
_ROWS_OF = {
    "step": (-0.36, 0.36),
    "mail": (-0.36, 0.36),
    "snapshot": (-0.36, 0.36),
    "flush": (0.06, 0.30),
    "blocked": (-0.42, 0.46),
    "other": (-0.25, 0.5),
}


@dataclass
class _Sorted:
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
    failovers: list[TraceEvent] = field(default_factory=list)  # the driver's "failover n" / "restarted n"


@dataclass
class _Frame:
    """The figure and where things go in it."""

    fig: Any
    ax: Any
    x0: float
    x1: float
    min_w: float  # the narrowest bar drawn (seconds): a zero-length bar stays visible
    y_of: dict[str, int]
    writers: list[str]
    left: float
    right: float
    height_in: float
    axes_in: float
    label_fs: float


def _deadlock_span(
    evs: list[TraceEvent], deadlock: Mapping[str, Any], dl_task: str, t_start: float, t_end: float
) -> tuple[float, float]:
    """The deadlocked wait: it never ended, so no event records it. It began after the task's last
    mailbox event (the step it blocks in is still running) and had lasted blocked_s at detection."""
    blocked_s = float(deadlock.get("blocked_s") or 0.0)
    last = max((e.end for e in evs if e.process == dl_task and e.thread != "io"), default=t_start)
    since = max(last, t_end - blocked_s, t_start)
    return (since, since + blocked_s)


def _sort_span(e: TraceEvent, out: _Sorted) -> None:
    """A complete event: a bar of its lane, a commit or an instant marker."""
    if e.cat == "blocked":
        kind = "blocked"
    elif e.cat == "flush" or e.thread == "io":
        kind = "flush"
    elif e.cat == "commit":
        out.commits.append(e)
        out.counts["commit"] += 1
        return
    elif e.thread == "mailbox":
        kind = {"mail": "mail", "checkpoint": "snapshot"}.get(e.cat, "step")
        m = _SNAPSHOT.match(e.name)
        if m:
            k = int(m.group(1))
            out.snapshots[k] = min(out.snapshots.get(k, e.t), e.t)
    elif e.cat == "instant":  # the coordinator starting an instant: a marker
        out.points.append(("instant", e))
        out.counts["instant"] += 1
        return
    else:
        kind = "other"
    out.bars.setdefault((e.process, kind), []).append((e.t, e.dur))
    out.counts[kind] += 1


def _sort_instant(e: TraceEvent, writers: list[str], out: _Sorted) -> None:
    """An instant event: a checkpoint's trigger, completion or abort, a fault, or a marker."""
    if m := _CKP_TRIGGER.match(e.name):
        out.triggers.setdefault(int(m.group(1)), e.t)
    elif e.process == "job-manager" and (m := _CKP_DONE.match(e.name)):
        out.completes.setdefault(int(m.group(1)), e.t)
    elif e.process == "job-manager" and (m := _CKP_ABORT.match(e.name)):
        out.aborts.setdefault(int(m.group(1)), e.t)
    elif _CKP_DONE.match(e.name) and e.process in writers:
        return  # the writer's notifyCheckpointComplete mail already shows it
    elif e.cat == "fault":
        out.points.append(("fault", e))
        out.counts["fault"] += 1
    elif e.cat == "failover":
        out.failovers.append(e)
        out.counts["failover"] += e.name.startswith("failover")
    else:
        out.points.append(("instant", e))
        out.counts["instant"] += 1


def _sort_events(evs: list[TraceEvent], writers: list[str]) -> _Sorted:
    out = _Sorted()
    for e in evs:
        if e.ph == "X":
            _sort_span(e, out)
        elif e.ph in ("i", "I", "R"):
            _sort_instant(e, writers, out)
    out.traced_triggers = set(out.triggers)
    for k, t in out.snapshots.items():
        out.triggers.setdefault(k, t)
    return out


def _checkpoint_marks(srt: _Sorted, statuses: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The dashed lines of the checkpoints, each with its label; counts them in ``srt.counts``."""
    marks: list[dict[str, Any]] = []
    for k, t in sorted(srt.triggers.items()):
        st = statuses.get(k, {}).get("status")
        suffix = "" if st in (None, "completed", "aborted", "timed-out") or k in srt.completes else f" ({st})"
        if st is None and statuses and k not in srt.completes and k not in srt.aborts:
            suffix = " (never completed)"
        marks.append({"kind": "trigger", "checkpoint": k, "t": t, "label": f"ckp {k}{suffix}"})
    for k, t in sorted(srt.completes.items()):
        marks.append({"kind": "complete", "checkpoint": k, "t": t, "label": f"ckp {k} done"})
    for k, t in sorted(srt.aborts.items()):
        marks.append({"kind": "abort", "checkpoint": k, "t": t, "label": f"ckp {k} aborted"})
    counts = srt.counts
    counts["ckp_trigger"], counts["ckp_complete"], counts["ckp_abort"] = (
        len(srt.triggers),
        len(srt.completes),
        len(srt.aborts),
    )
    return marks


def _open_frame(
    lanes: list[str],
    writers: list[str],
    marks: list[dict[str, Any]],
    x_range: tuple[float, float],
    title: str,
    dpi: int,
) -> _Frame:
    """The figure, sized for the lanes and the rows of checkpoint labels above them (inches)."""
    import matplotlib.pyplot as plt

    x0, x1 = x_range
    width_in = 14.0
    label_fs = 8.0
    rows = _place_labels(marks, x0, x1, width_in * 0.86, label_fs) if marks else 0
    lane_in = 0.62
    top_in = 0.75 + (0.22 if title else 0.0) + 0.2 * rows
    bottom_in = 1.15
    height_in = top_in + bottom_in + lane_in * len(lanes)
    fig = plt.figure(figsize=(width_in, height_in), dpi=dpi)
    left, right = 0.09, 0.955
    ax = fig.add_axes((left, bottom_in / height_in, right - left, lane_in * len(lanes) / height_in))
    ax.set_xlim(x0, x1)
    ax.set_ylim(len(lanes) - 0.5, -0.5)  # the first lane on top
    return _Frame(
        fig=fig,
        ax=ax,
        x0=x0,
        x1=x1,
        min_w=(x1 - x0) / (width_in * (right - left) * dpi) * 1.2,
        y_of={name: i for i, name in enumerate(lanes)},
        writers=writers,
        left=left,
        right=right,
        height_in=height_in,
        axes_in=lane_in * len(lanes),
        label_fs=label_fs,
    )


def _draw_lanes(fr: _Frame, bars: dict[tuple[str, str], list[tuple[float, float]]]) -> None:
    """Striped lanes, then the bars of each kind, then which half of a writer lane is which thread."""
    from matplotlib.transforms import blended_transform_factory

    ax = fr.ax
    for i in range(len(fr.y_of)):
        if i % 2 == 0:
            ax.axhspan(i - 0.5, i + 0.5, color="#f4f6f9", zorder=0, lw=0)
        if i:
            ax.axhline(i - 0.5, color="#d5d9de", lw=0.8, zorder=1)
    for kind in ("step", "mail", "snapshot", "other", "flush", "blocked"):
        for (proc, k), spans in bars.items():
            if k != kind:
                continue
            y = fr.y_of[proc]
            off, h = _ROWS_OF[kind]
            if proc not in fr.writers and kind == "flush":
                off, h = -0.25, 0.5
            xr = [(t, max(d, fr.min_w)) for t, d in spans]
            ax.broken_barh(
                xr,
                (y + off, h),
                facecolors=COLORS[kind],
                edgecolors="none",
                zorder={"blocked": 4, "flush": 3}.get(kind, 2),
            )
    hint_tf = blended_transform_factory(ax.transAxes, ax.transData)
    for w in fr.writers:  # a hint of which half is which thread
        for dy, text in ((-0.18, "mailbox"), (0.18, "io")):
            ax.text(
                1.002,
                fr.y_of[w] + dy,
                text,
                transform=hint_tf,
                fontsize=6.5,
                color="#777777",
                va="center",
                ha="left",
                clip_on=False,
            )


def _draw_commits(fr: _Frame, commits: list[TraceEvent]) -> None:
    """Commits: green diamonds on the coordinator lane, each labelled with its checkpoint."""
    if not commits:
        return
    ax, yc = fr.ax, fr.y_of["coordinator"]
    ax.scatter(
        [c.t for c in commits],
        [yc - 0.08] * len(commits),
        marker="D",
        s=70,
        color=COLORS["commit"],
        edgecolors="#0d5a1f",
        linewidths=0.8,
        zorder=6,
    )
    for c in commits:
        ckp = c.args.get("checkpoint")
        flip = (c.t - fr.x0) / (fr.x1 - fr.x0) > 0.88
        ax.annotate(
            f"commit{'' if ckp is None else f' (ckp {ckp})'}",
            (c.t, yc - 0.08),
            xytext=(-9 if flip else 9, 4),
            textcoords="offset points",
            fontsize=7.5,
            color="#0d5a1f",
            va="bottom",
            ha="right" if flip else "left",
            zorder=6,
            bbox=_LABEL_BOX,
        )


def _draw_points(fr: _Frame, points: list[tuple[str, TraceEvent]]) -> None:
    """Faults as crosses, new instants as small triangles, other instants as ticks."""
    ax, yc = fr.ax, fr.y_of["coordinator"]
    for kind, e in points:
        y = fr.y_of.get(e.process, yc)
        if kind == "fault":
            ax.scatter([e.t], [y], marker="X", s=60, color=COLORS["fault"], zorder=6)
            ax.annotate(
                e.name,
                (e.t, y),
                xytext=(5, -10),
                textcoords="offset points",
                fontsize=7,
                color=COLORS["fault"],
                zorder=6,
            )
        elif e.cat == "instant" and e.name.startswith("start instant"):
            ax.scatter([e.t], [y + 0.28], marker="^", s=22, color=COLORS["instant"], zorder=5)
        else:
            ax.scatter([e.t], [y + 0.28], marker="|", s=60, color=COLORS["instant"], zorder=5)
            if e.process == "coordinator":
                text = e.name.split(",")[0][:40]
                flip = (e.t - fr.x0) / (fr.x1 - fr.x0) > 0.85
                ax.annotate(
                    text,
                    (e.t, y + 0.28),
                    xytext=(-4 if flip else 4, -2),
                    textcoords="offset points",
                    fontsize=7,
                    color="#555555",
                    va="center",
                    ha="right" if flip else "left",
                    zorder=5,
                    bbox=_LABEL_BOX,
                )


def _draw_checkpoints(fr: _Frame, marks: list[dict[str, Any]], traced_triggers: set[int]) -> None:
    """Checkpoints: dashed lines over every lane, labels in rows above the axes; the job manager's
    lane marks where it recorded each one."""
    from matplotlib.transforms import blended_transform_factory

    ax = fr.ax
    label_tf = blended_transform_factory(ax.transData, ax.transAxes)
    yj = fr.y_of["job-manager"]
    for m in marks:
        color = COLORS[m["kind"]]
        if m["kind"] != "trigger" or m["checkpoint"] in traced_triggers:
            ax.scatter([m["t"]], [yj], marker="o" if m["kind"] == "complete" else "s", s=28, color=color, zorder=6)
        ax.axvline(m["t"], color=color, ls=(0, (4, 3)), lw=1.1, zorder=3.5, alpha=0.9)
        ax.text(
            m["t"],
            1.0 + (0.04 + 0.2 * m["row"]) / fr.axes_in,
            m["label"],
            transform=label_tf,
            fontsize=fr.label_fs,
            color=color,
            ha=m["ha"],
            va="bottom",
            clip_on=False,
            fontweight="bold" if m["kind"] != "trigger" else "normal",
        )


def _draw_failovers(fr: _Frame, failovers: list[TraceEvent]) -> None:
    """A failover: a line over every lane where the job failed, its name under the axis, and the
    time until every restarted role was up shaded (the attempts before and after it both show)."""
    from matplotlib.transforms import blended_transform_factory

    ax = fr.ax
    tf = blended_transform_factory(ax.transData, ax.transAxes)
    failed = {e.name.split(" ")[1].rstrip(":"): e for e in failovers if e.name.startswith("failover ")}
    for e in failovers:
        if e.name.startswith("restarted ") and (start := failed.get(e.name.split(" ")[1])) is not None:
            ax.axvspan(start.t, max(e.t, start.t + fr.min_w), color=COLORS["failover"], alpha=0.12, zorder=1)
    for e in failed.values():
        ax.axvline(e.t, color=COLORS["failover"], lw=1.6, zorder=6)
        ax.text(
            e.t,
            0.01,
            " " + e.name.split(":")[0],
            transform=tf,
            fontsize=fr.label_fs,
            color=COLORS["failover"],
            ha="left",
            va="bottom",
            fontweight="bold",
            zorder=7,
            bbox=_LABEL_BOX,
        )


def _draw_deadlock(fr: _Frame, deadlock: Mapping[str, Any], dl_task: str, dl_span: tuple[float, float]) -> str:
    """The deadlock: the wait that never ended, over the whole lane, to the end of the run; returns its label."""
    y = fr.y_of[dl_task]
    s0, s1 = dl_span
    fr.ax.broken_barh(
        [(s0, max(s1 - s0, fr.min_w))],
        (y - 0.46, 0.92),
        facecolors=COLORS["blocked"],
        edgecolors="#7a0000",
        linewidth=1.2,
        zorder=7,
    )
    releasing = deadlock.get("releasing_mail") or "a mail"
    label = f"DEADLOCK: waits for {releasing} in its own mailbox"
    detail = f"{dl_task}'s mailbox thread blocked {float(deadlock.get('blocked_s') or 0):.1f} s"
    if deadlock.get("running_mail"):
        detail += f" in {deadlock['running_mail']}"
    _label_deadlock(fr.fig, fr.ax, (s0, s1), y, label, detail)
    return label


def _style_axes(fr: _Frame, lanes: list[str], dl_task: str | None) -> None:
    ax = fr.ax
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=9)
    for lbl in ax.get_yticklabels():
        if lbl.get_text() == dl_task:
            lbl.set_color(COLORS["alarm"])
            lbl.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("seconds from the start of the run", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#e3e6ea", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _draw_header(
    fr: _Frame,
    srt: _Sorted,
    statuses: dict[int, dict[str, Any]],
    checkpoints: Mapping[str, Any] | None,
    title: str,
    deadlock_in: str | None,
) -> None:
    """The title and one line of facts: write tasks, commits, checkpoints, blocked waits, a deadlock."""
    counts = srt.counts
    n_ckp = statuses or {k: {"status": "completed"} for k in srt.completes}
    done = sum(1 for v in n_ckp.values() if v.get("status") == "completed")
    aborted = sum(1 for v in n_ckp.values() if v.get("status") in ("aborted", "timed-out"))
    facts = [
        f"{len(fr.writers)} write task{'s' if len(fr.writers) != 1 else ''}",
        f"{counts['commit']} commit{'s' if counts['commit'] != 1 else ''}",
        f"checkpoints: {done} completed" + (f", {aborted} aborted" if aborted else ""),
    ]
    requested = checkpoints.get("requested") if isinstance(checkpoints, Mapping) else None
    if isinstance(requested, int):
        facts[-1] += f" of {requested} requested"
    if counts["blocked"]:
        facts.append(f"{counts['blocked']} blocked wait{'s' if counts['blocked'] != 1 else ''}")
    if deadlock_in:
        facts.append(f"DEADLOCK in {deadlock_in}")
    title_y = 1.0 - 0.12 / fr.height_in
    if title:
        fr.fig.text(fr.left, title_y, title, fontsize=12.5, fontweight="bold", va="top", ha="left")
        title_y -= 0.26 / fr.height_in
    fr.fig.text(
        fr.left,
        title_y,
        "  ·  ".join(facts),
        fontsize=9,
        color=COLORS["alarm"] if deadlock_in else "#333333",
        va="top",
        ha="left",
    )


def _draw_legend(fr: _Frame, srt: _Sorted, with_deadlock: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=COLORS["step"], label="default-action step (mailbox)"),
        Patch(color=COLORS["mail"], label="mail / snapshotState (mailbox)"),
        Patch(color=COLORS["flush"], label="flush (io thread)"),
        Patch(color=COLORS["blocked"], label="blocked wait" + (" / deadlock" if with_deadlock else "")),
        Line2D([], [], marker="D", ls="", color=COLORS["commit"], label="commit"),
        Line2D([], [], marker="^", ls="", color=COLORS["instant"], label="new instant"),
        Line2D([], [], color=COLORS["trigger"], ls="--", label="ckp k: first barrier"),
        Line2D([], [], color=COLORS["complete"], ls="--", label="ckp k done"),
    ]
    if srt.aborts:
        handles.append(Line2D([], [], color=COLORS["abort"], ls="--", label="ckp k aborted"))
    if srt.counts["fault"]:
        handles.append(Line2D([], [], marker="X", ls="", color=COLORS["fault"], label="fault"))
    if srt.failovers:
        handles.append(Patch(facecolor=COLORS["failover"], alpha=0.35, label="failover: down until restarted"))
    fr.fig.legend(
        handles=handles,
        loc="lower center",
        ncol=min(len(handles), 5),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5 * (fr.left + fr.right), 0.0),
        handlelength=1.8,
        columnspacing=1.6,
    )


def _pixel_layout(fr: _Frame) -> tuple[dict[str, tuple[int, int]], tuple[int, int], tuple[int, int]]:
    """Where things are in the PNG (rows from the top), for whoever checks the picture: each lane's
    rows, the x axis' two end columns, the size."""
    fr.fig.canvas.draw()
    w_px, h_px = fr.fig.canvas.get_width_height()
    lane_pixels = {}
    for name, i in fr.y_of.items():
        (_, ya), (_, yb) = fr.ax.transData.transform([(fr.x0, i - 0.5), (fr.x0, i + 0.5)])
        top, bottom = sorted((h_px - ya, h_px - yb))
        lane_pixels[name] = (int(math.ceil(top)), int(math.floor(bottom)))
    (xa, _), (xb, _) = fr.ax.transData.transform([(fr.x0, 0), (fr.x1, 0)])
    return lane_pixels, (int(round(xa)), int(round(xb))), (w_px, h_px)


def _time_range(
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


def render_timeline(
    events: Iterable[Mapping[str, Any]] | Mapping[str, Any],
    out_png: str,
    *,
    title: str = "",
    deadlock: Mapping[str, Any] | None = None,
    checkpoints: Mapping[str, Any] | None = None,
    dpi: int = 110,
) -> TimelinePlot:
    """Draws the timeline of a run into ``out_png``; returns what it drew (see :func:`plot_timeline`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evs = normalize_events(events)
    deadlock = dict(deadlock) if deadlock else None
    dl_task = str(deadlock.get("task")) if deadlock and deadlock.get("task") else None
    lanes = _lanes(evs, dl_task)
    writers = [n for n in lanes if _WRITER.match(n) or any(e.process == n and e.thread == "mailbox" for e in evs)]
    t_start, t_end, dl_span = _time_range(evs, deadlock, dl_task)
    span = max(t_end - t_start, 1e-3)
    srt = _sort_events(evs, writers)
    statuses = _checkpoint_int(checkpoints)
    marks = _checkpoint_marks(srt, statuses)

    fr = _open_frame(lanes, writers, marks, (t_start, t_end + 0.02 * span), title, dpi)
    _draw_lanes(fr, srt.bars)
    _draw_commits(fr, srt.commits)
    _draw_points(fr, srt.points)
    _draw_checkpoints(fr, marks, srt.traced_triggers)
    _draw_failovers(fr, srt.failovers)
    deadlock_label = None
    if deadlock and dl_task and dl_span is not None:
        deadlock_label = _draw_deadlock(fr, deadlock, dl_task, dl_span)
        srt.counts["blocked"] += 1
    _style_axes(fr, lanes, dl_task)
    _draw_header(fr, srt, statuses, checkpoints, title, dl_task if deadlock_label else None)
    _draw_legend(fr, srt, deadlock_label is not None)
    if not evs and not dl_task:
        fr.ax.text(0.5, 0.5, "no trace events", transform=fr.ax.transAxes, ha="center", va="center", color="#888888")

    lane_pixels, x_pixels, size_px = _pixel_layout(fr)
    os.makedirs(os.path.dirname(os.path.abspath(out_png)), exist_ok=True)
    fr.fig.savefig(out_png, dpi=dpi)
    plt.close(fr.fig)
    return TimelinePlot(
        path=out_png,
        lanes=lanes,
        counts=srt.counts,
        duration_s=round(t_end - t_start, 6),
        deadlock_label=deadlock_label,
        checkpoint_marks=[{k: v for k, v in m.items() if k != "row"} for m in marks],
        lane_pixels=lane_pixels,
        x_pixels=x_pixels,
        x_range_s=(fr.x0, fr.x1),
        size_px=size_px,
    )


def plot_timeline(
    events: Iterable[Mapping[str, Any]] | Mapping[str, Any],
    out_png: str,
    *,
    title: str = "",
    deadlock: Mapping[str, Any] | None = None,
    checkpoints: Mapping[str, Any] | None = None,
) -> str:
    """Draws a run's timeline as a PNG at ``out_png`` and returns the path.

    ``events``: the run's trace events, written (integer pid/tid plus ``M`` metadata, a whole
    ``{"traceEvents": ...}`` document too) or raw (pid = role, tid = thread).
    ``deadlock``: ``result["deadlock"]`` (task, blocked_s, releasing_mail, running_mail): the wait
    that never ended, drawn in red to the end. ``checkpoints``: ``result["checkpoints"]`` or its
    ``detail``, for the statuses. :func:`render_timeline` takes the same arguments and also
    returns what it drew (:class:`TimelinePlot`)."""
    return render_timeline(events, out_png, title=title, deadlock=deadlock, checkpoints=checkpoints).path


def plot_trace_file(
    trace_path: str, out_png: str, *, result: Mapping[str, Any] | str | None = None, title: str | None = None
) -> TimelinePlot:
    """Draws a trace file; ``result`` (a result record or the path of ``result.json``) supplies the
    deadlock, the checkpoints and a default title."""
    import json

    with open(trace_path) as f:
        doc = json.load(f)
    record: Mapping[str, Any]
    if isinstance(result, str):
        with open(result) as f:
            record = json.load(f) or {}
    else:
        record = result or {}
    if title is None:
        title = (
            f"{record.get('protocol', '')}: {record.get('status', '')}".strip(": ")
            if record
            else os.path.basename(trace_path)
        )
    return render_timeline(
        doc, out_png, title=title, deadlock=record.get("deadlock"), checkpoints=record.get("checkpoints")
    )


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(
        prog="python -m runtime.lab.timeline_plot", description="Draw a run's trace as a timeline PNG; validate it."
    )
    p.add_argument("trace", help="a Chrome trace-event file (--trace FILE, or the simulator's)")
    p.add_argument("out", help="the PNG to write")
    p.add_argument("--result", help="the run's result.json (deadlock, checkpoints, title)")
    p.add_argument("--title", default=None)
    args = p.parse_args(argv)
    with open(args.trace) as f:
        problems = validate_trace(json.load(f))
    for line in problems:
        print(f"trace: {line}")
    plot = plot_trace_file(args.trace, args.out, result=args.result, title=args.title)
    print(
        f"{plot.path}: {len(plot.lanes)} lanes, {plot.counts}"
        + (f"; {plot.deadlock_label}" if plot.deadlock_label else "")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
