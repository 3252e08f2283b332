"""The simulator's trace: every message delivery and every mail or step, as plain tuples.

An event is ``(t_ns, type, role, *fields)`` with ``t_ns`` the virtual time in integer
nanoseconds and every field a str, int, float, bool or None, so the trace serializes to JSON lines
byte for byte the same on every run with the same seed. Two runs are compared event by event
(:func:`first_divergence`) or by hash (:func:`trace_sha256`). The types:

* ``deliver``: ``from, to, method, kind, id``: a call or send starts at its destination
  (``kind`` is the message's type with its checkpoint or round, e.g. ``Barrier(ckp=2)``);
* ``reply`` / ``reply-error`` / ``reply-late``: ``from, to, method, kind, id``: the answer reaches
  the caller (``reply-late``: the caller had given up); ``send-error``: a one-way message failed;
* ``timeout``: ``caller, dest, method, seconds``: a call's bound fired;
* ``dropped``: ``sender, dest, method``: a message lost in transit (a ``message.dropped`` fault, or
  a search's loss deviation); ``lost``: a message reached a role that had died since;
* ``mail``: ``task, kind``: a mail starts on a task's mailbox thread;
* ``X`` / ``i`` / ``s`` / ``f``: ``role, thread, cat, name, ts_us, dur_us, args``: the role's own
  trace events (every mail and default-action step when it ends, flushes, commits, blocked waits);
* ``host``: ``driver, start|end, ...``: the run's start and its verdict.

What could make two runs differ although nothing in the schedule does is scrubbed here, not in
role code: the table's absolute path (two runs of one seed use two directories) and object
addresses (``0x7f..``) in reprs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from runtime.core import trace_events
from runtime.core.json_doc import JsonObject
from runtime.core.metrics import Metrics
from runtime.core.trace import TraceEvent, Tracer
from runtime.lab.results import Divergence

Event = tuple[Any, ...]  # (t_ns, type, role, *fields): scalar fields of varying arity
DROPPED = "dropped"  # an event type (the module docstring)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_SCALARS = frozenset((int, float, bool))
# json.dumps(value, sort_keys=True, default=str), without building an encoder per call
_FIELD_ENCODER = json.JSONEncoder(sort_keys=True, default=str)
# A string field scrubbed (TraceRecorder._field) is a pure function of the string and the scrub
# map, so the scrubbed names are kept per scrub map for the whole process: the runs of a check
# (hundreds, one table path) name the same roles, methods and messages, and each run scrubbed
# them again. A few maps at most (a map per table path); each map's names bounded.
_SCRUBBED_BY_MAP: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_SCRUBBED_LIMIT = 100_000


class TraceRecorder:
    """Collects events in order. With ``expected`` (a reference run's events) it compares each new
    event as it is recorded and calls ``on_divergence`` at the first difference, so a replay can
    stop right there instead of running to the end."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        scrub: dict[str, str] | None = None,
        expected: Sequence[Event] | None = None,
        on_divergence: Callable[[Divergence], None] | None = None,
    ) -> None:
        self.clock = clock
        self.events: list[Event] = []
        self.scrub = sorted((scrub or {}).items(), key=lambda kv: -len(kv[0]))
        self.expected = expected
        self.on_divergence = on_divergence
        self.divergence: Divergence | None = None
        self.closed = False
        self._scrubbed = _scrubbed_names(tuple(self.scrub))

    def _field(self, value: Any) -> Any:
        if value is None or type(value) in _SCALARS:
            return value
        if type(value) is str:
            # role, method and message names repeat all run long: scrub each once
            done = self._scrubbed.get(value)
            if done is None:
                done = self._scrub_text(value)
                if len(self._scrubbed) < _SCRUBBED_LIMIT:
                    self._scrubbed[value] = done
            return done
        return self._scrub_text(_encode_field(value))

    def _scrub_text(self, text: str) -> str:
        for old, new in self.scrub:
            if old in text:
                text = text.replace(old, new)
        if "0x" in text:
            text = _ADDRESS.sub("0x?", text)
        return text

    def add(self, kind: str, role: str, *fields: Any) -> None:
        if self.closed:
            return
        f, known, scalars = self._field, self._scrubbed, _SCALARS
        # the commonest fields inline: a name seen before, a number, None (this runs for every
        # message and every mail; a call per field would be most of its cost)
        event = (
            round(self.clock() * 1e9),
            kind,
            role,
            *[
                (known.get(x) or f(x)) if type(x) is str else (x if x is None or type(x) in scalars else f(x))
                for x in fields
            ],
        )
        self.events.append(event)
        if self.expected is not None and self.divergence is None:
            self._compare(event)

    def add_message(self, kind: str, role: str, to: str, method: str, what: str, call_id: int) -> None:
        """``add(kind, role, to, method, what, call_id)`` for a message's event (a delivery or a
        reply: most of a trace), its fields plain strings and an int: the same event, without
        the general path's test of each field's type."""
        if self.closed:
            return
        known, f = self._scrubbed, self._field
        event = (
            round(self.clock() * 1e9),
            kind,
            role,
            known.get(to) or f(to),
            known.get(method) or f(method),
            known.get(what) or f(what),
            call_id,
        )
        self.events.append(event)
        if self.expected is not None and self.divergence is None:
            self._compare(event)

    def add_span(
        self, role: str, thread: str, cat: str, name: str, ts_us: float, dur_us: float, args: JsonObject | None
    ) -> None:
        """``add("X", role, thread, cat, name, ts_us, dur_us, args or None)`` for a role's span
        (every mail and step that ends): its names plain strings, its times numbers, without the
        general path's test of each field's type."""
        if self.closed:
            return
        known, f = self._scrubbed, self._field
        event = (
            round(self.clock() * 1e9),
            "X",
            role,
            known.get(thread) or f(thread),
            known.get(cat) or f(cat),
            known.get(name) or f(name),
            ts_us,
            dur_us,
            f(args) if args else None,
        )
        self.events.append(event)
        if self.expected is not None and self.divergence is None:
            self._compare(event)

    def _compare(self, event: Event) -> None:
        index = len(self.events) - 1
        want = self.expected[index] if self.expected is not None and index < len(self.expected) else None
        if want is None or tuple(want) != event:
            self.divergence = {
                "index": index,
                "first": list(want) if want is not None else None,
                "second": list(event),
            }
            if self.on_divergence is not None:
                self.on_divergence(self.divergence)

    def close(self) -> None:
        """Stops recording (the run is over; clean-up must not add events)."""
        self.closed = True


def _scrubbed_names(scrub: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The names scrubbed with ``scrub`` so far in this process (see ``_SCRUBBED_BY_MAP``)."""
    names = _SCRUBBED_BY_MAP.get(scrub)
    if names is None:
        if len(_SCRUBBED_BY_MAP) >= 8:  # another table path per run (runs on disk): start afresh
            _SCRUBBED_BY_MAP.clear()
        names = _SCRUBBED_BY_MAP[scrub] = {}
    return names


_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)


def _chunks(encoder: json.JSONEncoder) -> Callable[[Any, int], Sequence[str]]:
    """``encoder``'s C encoder, built once (``encoder.encode`` builds it on every call): called
    as ``chunks(value, 0)`` it gives the pieces ``encoder.encode(value)`` joins. Same arguments,
    so the same bytes (no circular-reference check: events hold plain values)."""
    if _c_make_encoder is None:
        return lambda value, _level: (encoder.encode(value),)
    chunks: Callable[[Any, int], Sequence[str]] = _c_make_encoder(
        None,
        encoder.default,
        json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring,
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )
    return chunks


def _one_shot(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` without its per-call set-up (:func:`_chunks`)."""
    chunks = _chunks(encoder)
    return lambda value: "".join(chunks(value, 0))


_encode_field = _one_shot(_FIELD_ENCODER)
_line_chunks = _chunks(_LINE_ENCODER)
_encode_line = _one_shot(_LINE_ENCODER)


def event_line(event: Event) -> str:
    """One event as a JSON line (without the newline): what ``trace.jsonl`` holds and the hash covers."""
    return _encode_line(event)


def trace_sha256(events: Iterable[Event]) -> str:
    """The hash of the trace's JSON lines (:func:`event_line`, each ending with a newline); the
    encoder is called here directly, with no function call of ours per event."""
    join, chunks = "".join, _line_chunks
    lines = [join(chunks(ev, 0)) for ev in events]
    lines.append("")  # every line ends with a newline
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def write_jsonl(path: str, events: Iterable[Event]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for ev in events:
            f.write(event_line(ev))
            f.write("\n")


def first_divergence(a: Sequence[Event], b: Sequence[Event]) -> Divergence | None:
    """The first index where two traces differ, with both events (None for a missing one)."""
    for i in range(min(len(a), len(b))):
        if tuple(a[i]) != tuple(b[i]):
            return {"index": i, "first": list(a[i]), "second": list(b[i])}
    if len(a) != len(b):
        i = min(len(a), len(b))
        return {"index": i, "first": list(a[i]) if i < len(a) else None, "second": list(b[i]) if i < len(b) else None}
    return None


class SimTracer(Tracer):
    """The role's Chrome-trace tracer, also feeding every event to the simulator's trace (mail and
    step ends, flushes, commits, blocked waits). Chrome events are kept only when ``enabled``."""

    def __init__(self, process: str, recorder: TraceRecorder, *, enabled: bool, clock: Callable[[], float]) -> None:
        super().__init__(process, enabled=enabled, clock=clock)
        self.recorder = recorder
        # the last span's start and its microseconds: a role's spans often start at one instant
        # (a step and the mails it ran), and ``round(t, 1)`` costs a microsecond (a pure function
        # of the float: an equal start has the same microseconds)
        self._start: float | None = None
        self._start_us = 0.0

    def _add(self, ev: TraceEvent) -> None:
        self.recorder.add(
            ev.get("ph", "?"),
            self.process,
            ev.get("tid", ""),
            ev.get("cat", ""),
            ev.get("name", ""),
            ev.get("ts"),
            ev.get("dur"),
            ev.get("args") or None,
        )
        super()._add(ev)

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
        if self.enabled:
            super().complete(name, start, end, thread=thread, cat=cat, args=args)
            return
        # the commonest event (every mail and step), straight to the trace: the same fields as
        # ``_add`` would take from the Chrome event, without building it. Most spans last no
        # virtual time (inline work): their duration is 0.0 without a ``round`` to one decimal,
        # the dearest call here (``round(max(0.0, d) * 1e6, 1)`` is 0.0 for every d not above 0)
        span = end - start
        if start != self._start or not start:  # (0.0 and -0.0 are equal, their texts are not)
            self._start, self._start_us = start, round(start * 1e6, 1)  # ``_us`` inline
        self.recorder.add_span(
            self.process,
            thread,
            cat or trace_events.RUN,
            name,
            self._start_us,
            round(span * 1e6, 1) if span > 0 else 0.0,
            args,
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
        if self.enabled:
            super().instant(name, thread=thread, cat=cat, args=args, at=at)
            return
        # as ``complete``: the fields ``_add`` would take from the Chrome event (an instant has
        # no duration; empty args are None), without building it
        t = self.clock() if at is None else at
        self.recorder.add(
            "i", self.process, thread, cat or trace_events.EVENT, name, round(t * 1e6, 1), None, args or None
        )


class SimMetrics(Metrics):
    """The role's counters; a mail that starts on a task's mailbox thread is also a trace event."""

    def __init__(self, role: str, recorder: TraceRecorder) -> None:
        super().__init__()
        self._role = role
        self._recorder = recorder

    def mail(self, kind: str) -> None:
        self._recorder.add("mail", self._role, kind)
        super().mail(kind)
