"""The trace-event format's check: :func:`validate_trace` reads a trace document against the format
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU) and returns the
problems it found (empty: valid)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

#: Every phase of the trace-event format: duration (B/E), complete (X), instant (i, and the
#: deprecated I), counter (C), async (b/n/e nestable; S/T/p/F legacy), flow (s/t/f), sample (P),
#: object (N/O/D), metadata (M), memory dump (V/v), mark (R), clock sync (c), context ( and ).
PHASES = frozenset("B E X i I C b n e S T p F s t f P N O D M V v R c ( )".split())
_METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
_INSTANT_SCOPES = {"g", "p", "t"}
_ID_PHASES = set("bneSTpFstfNOD")  # events that need an id (async, flow, object)
_MAX_PROBLEMS = 200


def is_number(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_int(v: Any) -> bool:
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
        elif not is_number(ts):
            bad(f"{where}: ts must be a finite number, not {ts!r}")
        elif ts < 0:
            bad(f"{where}: negative ts {ts}")
    for key in ("tts", "tdur"):
        if key in ev and not (is_number(ev[key]) and ev[key] >= 0):
            bad(f"{where}: {key} must be a non-negative number, not {ev[key]!r}")
    needs_tid = ph not in ("C", "N", "O", "D") and not (ph == "M" and str(name).startswith("process"))
    for key, required in (("pid", True), ("tid", needs_tid)):
        if key not in ev:
            if required:
                bad(f"{where}: no {key}")
        elif not (is_int(ev[key]) and ev[key] >= 0):
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
        elif not is_number(dur):
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
        if isinstance(args, Mapping) and not all(is_number(v) for v in args.values()):
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
        if not is_int(args.get("sort_index")):
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
    elif not (is_int(fid) or isinstance(fid, str)):
        bad(f"{where}: id must be an integer or a string, not {fid!r}")
    elif ph in ("s", "t", "f"):
        ts = ev.get("ts")
        flows.append((ts if is_number(ts) else 0.0, i, ph, (ev.get("cat"), fid), where))
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
