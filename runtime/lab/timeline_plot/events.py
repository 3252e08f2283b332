"""Trace events as the picture reads them: :class:`TraceEvent`, with names instead of numbers and
times in seconds from the start, from a written trace or a role's raw events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.lab.timeline_plot.trace_format import is_int, is_number


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
    body = [e for e in evs if e.get("ph") != "M" and is_number(e.get("ts"))]
    written = bool(procs or threads) or all(is_int(e.get("pid")) for e in body if "pid" in e)
    origin = 0.0
    if body and not (written and min(e["ts"] for e in body) >= 0):
        origin = min(e["ts"] for e in body)
    out = []
    for e in body:
        pid, tid = e.get("pid", "?"), e.get("tid", "main")
        process = procs.get(pid, str(pid))
        thread = threads.get((pid, tid), str(tid))
        dur = e.get("dur", 0.0) if e.get("ph") == "X" and is_number(e.get("dur")) else 0.0
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
