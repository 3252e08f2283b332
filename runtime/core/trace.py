"""Trace events in Chrome's trace-event format (viewable in Perfetto).

Each role records complete events ("X") for every mail and default-action step, flush, RPC and
commit, instant events ("i") for notable moments and flow events ("s"/"f") for messages. The
driver gathers every role's events into one JSON file. Recording is cheap and bounded.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from typing import TypedDict

from runtime.core import trace_events
from runtime.core.json_doc import JsonObject

_MAX_EVENTS = 200_000  # per role: a long run keeps its first events, never unbounded memory


class TraceEvent(TypedDict, total=False):
    """One event of Chrome's trace-event format: its phase (``X`` complete, ``i`` instant, ``s``/``f``
    a flow's ends, ``M`` a track's name), name, category, time and duration in microseconds, process
    and thread (names while recorded, numbers in the file), and what it carries (``args``, open)."""

    ph: str
    name: str
    cat: str
    ts: float
    dur: float
    pid: str | int
    tid: str | int
    s: str  # an instant's scope (``t``: its thread)
    id: int  # a flow's
    bp: str  # a flow end's binding point (``e``: the enclosing slice)
    args: JsonObject


class Tracer:
    def __init__(self, process: str, *, enabled: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.process = process
        self.enabled = enabled
        self.clock = clock
        self.events: list[TraceEvent] = []
        self.dropped = 0

    def _us(self, t: float) -> float:
        return round(t * 1e6, 1)

    def _add(self, ev: TraceEvent) -> None:
        if not self.enabled:
            return
        if len(self.events) >= _MAX_EVENTS:
            self.dropped += 1
            return
        ev.setdefault("pid", self.process)
        self.events.append(ev)

    def complete(
        self,
        name: str,
        start: float,
        end: float,
        *,
        thread: str = "main",
        cat: str = "",
        args: JsonObject | None = None,
    ) -> None:
        self._add(
            {
                "ph": "X",
                "name": name,
                "cat": cat or trace_events.RUN,
                "ts": self._us(start),
                "dur": self._us(max(0.0, end - start)),
                "tid": thread,
                "args": args or {},
            }
        )

    def instant(
        self,
        name: str,
        *,
        thread: str = "main",
        cat: str = "",
        args: JsonObject | None = None,
        at: float | None = None,
    ) -> None:
        self._add(
            {
                "ph": "i",
                "s": "t",
                "name": name,
                "cat": cat or trace_events.EVENT,
                "ts": self._us(self.clock() if at is None else at),
                "tid": thread,
                "args": args or {},
            }
        )

    def flow(self, name: str, flow_id: int, *, start: bool, thread: str = "main", at: float | None = None) -> None:
        ev: TraceEvent = {
            "ph": "s" if start else "f",
            "name": name,
            "cat": trace_events.MESSAGE,
            "id": flow_id,
            "ts": self._us(self.clock() if at is None else at),
            "tid": thread,
        }
        if not start:
            ev["bp"] = "e"
        self._add(ev)

    def drain(self) -> list[TraceEvent]:
        out, self.events = self.events, []
        return out


def write_trace(path: str, events: Iterable[TraceEvent], *, time_origin: float | None = None) -> None:
    """Writes the events of every role as one trace file. Process and thread names become
    metadata events so Perfetto shows readable track names."""
    events = sorted(events, key=lambda e: e.get("ts", 0))
    origin = time_origin if time_origin is not None else (events[0]["ts"] if events else 0)
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    out: list[TraceEvent] = []
    for ev in events:
        proc = str(ev.get("pid", "?"))
        pid = pids.setdefault(proc, len(pids) + 1)
        thread = str(ev.get("tid", "main"))
        tid = tids.setdefault((proc, thread), len(tids) + 1)
        e: TraceEvent = {**ev, "pid": pid, "tid": tid, "ts": round(ev.get("ts", 0) - origin, 1)}
        out.append(e)
    meta: list[TraceEvent] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}} for name, pid in pids.items()
    ]
    meta += [
        {"ph": "M", "name": "thread_name", "pid": pids[p], "tid": tid, "args": {"name": t}}
        for (p, t), tid in tids.items()
    ]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"traceEvents": meta + out, "displayTimeUnit": "ms"}, f)
