"""A cheap fingerprint of a simulated run's state at a choice point, for the bounded search.

What it covers: the messages and replies in flight, in the order they will arrive (sender,
destination, method, kind; not when), the other pending timers and the ready callbacks (which
coroutine, at which line), and each role's *local history* so far, as the trace records it
(:mod:`runtime.sim.recorder`): the messages and replies that reached it, in the order they reached
it (kind, method, sender; not the call ids, which count globally), the mails its mailbox thread
started, the calls whose bound fired, and its own trace events by name (mail and step names,
flushes, commits). A role
is deterministic code, so its local history determines its state; the messages still in flight are
what the others' histories say was sent and its own does not show received. Two interleavings of
independent steps (two deliveries to different roles, swapped) therefore reach the same
fingerprint, which is what lets the search skip the second (the partial-order effect).

Where it is an approximation (a pruned schedule might have behaved differently):

* virtual time is left out: a role's own timer (a sleep, a call's bound) due at another instant,
  or an instant time (Hudi's instants are timestamps) minted at another moment, is not told apart;
* a coroutine's local variables are not read: a role's state is what its history says;
* the shared table (the simulated DFS) is seen only through the roles' own events (commits,
  flushes), not file by file;
* a trace event's arguments are left out (they carry times and sizes), and an instant time in an
  event's name (``start instant 20260101000001288``, a control topic's commit id) is replaced by
  its rank among the instants the run met: a late message that shifts when the coordinator mints
  an instant shifts its timestamp, not what follows from it, since Hudi compares instants only
  with each other (ordering the timeline), and ranks keep their order. Without it, every state
  after a shifted instant differed from every state of a run that minted it at another
  millisecond, and the search could not prune there (a fifth fewer runs and a third fewer states
  on a one-writer message-bus job at bound 2);
* with ``symmetry``, the write tasks' histories are compared as a multiset with their names
  masked: two states that differ only by which write task is where count as one. The tasks write
  different records, so this is symmetry up to the data, as Stateright's symmetry reduction
  assumes of interchangeable actors.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from runtime.core.roles import writer_index
from runtime.sim.network import SimNetwork
from runtime.sim.recorder import Event, TraceRecorder

__all__ = ["StateFingerprint"]

_MESSAGE_EVENTS = frozenset(("deliver", "reply", "reply-error", "reply-late", "send-error", "lost"))
_ROLE_EVENTS = frozenset(("X", "i", "s", "f"))
_TASK_NAME = re.compile(r"\b(writer|source)-\d+\b")
_INSTANT = re.compile(r"\d{14,}")  # an instant time (yyyyMMddHHmmss[SSS]): minted from virtual time
# What an event contributes (:meth:`StateFingerprint._local`) is a pure function of its fields
# 1..5 and of ``symmetry``, except for a role event whose name holds an instant time (its rank is
# the run's): that one is never kept. A check folds some 70 events per choice point, nearly all
# seen in an earlier run, so they are computed once per process, not once per run.
_LOCAL_LIMIT = 200_000
_LOCALS: dict[bool, dict[tuple[Any, ...], tuple[str, tuple[Any, ...]]]] = {True: {}, False: {}}


class StateFingerprint:
    """Per-role running hashes over the trace, updated incrementally at each :meth:`__call__`."""

    def __init__(self, *, symmetry: bool = True) -> None:
        self.symmetry = symmetry
        self._events: list[Event] | None = None
        self._network: SimNetwork | None = None
        self._seen = 0
        self._hashes: dict[str, int] = {}
        self._instants: dict[str, str] = {}  # instant time -> its rank in the run
        self._masked: dict[str, str] = {}  # a name -> it masked (names repeat at every choice point)

    def attach(self, recorder: TraceRecorder, network: SimNetwork | None = None) -> None:
        """Follows ``recorder``'s events (the run's trace) and ``network``'s messages in flight."""
        self._events = recorder.events
        self._network = network
        self._seen = 0
        self._hashes = {}
        self._instants = {}

    def _instant(self, match: re.Match[str]) -> str:
        """An instant time as its rank among those the run met, in the order it met them."""
        return self._instants.setdefault(match.group(), f"#{len(self._instants)}")

    def mask(self, value: Any) -> Any:
        if not self.symmetry or type(value) is not str:
            return value
        masked = self._masked.get(value)
        if masked is None:
            masked = _TASK_NAME.sub(r"\1-*", value) if "writer-" in value or "source-" in value else value
            if len(self._masked) < 100_000:
                self._masked[value] = masked
        return masked

    def _local(self, ev: Event) -> tuple[str, tuple[Any, ...]]:
        """Whose history ``ev`` belongs to, and what of it counts."""
        kind = ev[1]
        if kind in _MESSAGE_EVENTS and len(ev) >= 6:
            # (t, kind, from, to, method, kind, id): the receiving side's history
            return str(ev[3]), (kind, self.mask(ev[2]), ev[4], self.mask(ev[5]))
        if kind in _ROLE_EVENTS and len(ev) >= 6:
            name = ev[5]
            if type(name) is str and _INSTANT.search(name):
                name = _INSTANT.sub(self._instant, name)
            return str(ev[2]), (kind, ev[3], ev[4], self.mask(name))
        return str(ev[2]), (kind, *(self.mask(x) for x in ev[3:5]))

    def _local_kept(self, ev: Event, fields: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
        """:meth:`_local`, kept under ``fields`` (``ev[1:6]``) unless it ranked an instant time."""
        local = self._local(ev)
        ranked = ev[1] in _ROLE_EVENTS and len(ev) >= 6 and type(ev[5]) is str and _INSTANT.search(ev[5])
        kept = _LOCALS[self.symmetry]
        if not ranked and len(kept) < _LOCAL_LIMIT:
            kept[fields] = local
        return local

    def __call__(self) -> int:
        events = self._events
        if events is None:
            return 0
        hashes = self._hashes
        kept = _LOCALS[self.symmetry]
        for ev in events[self._seen :]:
            fields = ev[1:6]
            local = kept.get(fields)
            owner, key = local if local is not None else self._local_kept(ev, fields)
            hashes[owner] = hash((hashes.get(owner, 0), key))
        self._seen = len(events)
        flight = self._in_flight()
        if not self.symmetry:
            return hash((tuple(sorted(hashes.items())), flight))
        tasks = sorted(h for r, h in hashes.items() if _is_task(r))
        others = sorted((r, h) for r, h in hashes.items() if not _is_task(r))
        return hash((tuple(others), tuple(tasks), flight))

    def _in_flight(self) -> tuple[tuple[Any, ...], ...]:
        """The network's pending deliveries and replies, in arrival order (the loop's timer heap:
        a delivery timer hands over its lane's head, so a lane's k-th timer is its k-th message)."""
        net = self._network
        if net is None:
            return ()
        scheduled: list[Any] = getattr(net.loop, "_scheduled", [])
        out: list[tuple[Any, ...]] = []
        taken: dict[int, int] = {}
        m = self.mask
        for _when, _seq, timer in sorted(e for e in scheduled if not e[2]._cancelled):
            fn = getattr(timer._callback, "__func__", None)
            if fn is _DELIVER:
                lane = timer._args[0]
                k = taken[id(lane)] = taken.get(id(lane), -1) + 1
                if k < len(lane.queue):
                    env = lane.queue[k]
                    out.append(("deliver", m(env.sender), m(env.dest), env.method, m(env.kind)))
            elif fn is _COMPLETE or fn is _SEND_FAILED:
                env = timer._args[0]
                out.append((fn.__name__, m(env.sender), m(env.dest), env.method))
            else:  # a role's sleep or a call's bound: which coroutine, not when
                out.append(("timer", _describe(timer._callback)))
        out.extend(("ready", _describe(h._callback)) for h in getattr(net.loop, "_ready", ()) if not h._cancelled)
        return tuple(out)


_DELIVER = SimNetwork._deliver_head
_COMPLETE = SimNetwork._complete
_SEND_FAILED = SimNetwork._send_failed


def _describe(callback: Any) -> tuple[Any, ...]:
    """A callback as where it will resume: a task's coroutine and its line, else its name.

    The line is counted from the coroutine function's first line, and the function named with its
    module: an edit elsewhere in the module then changes no state's hash, so two commits' sets of
    distinct states can be compared (``bench_check.py --baseline``)."""
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro: Any = owner.get_coro()
        frame = getattr(coro, "cr_frame", None)
        if frame is None:
            return (getattr(coro, "__qualname__", "?"), -1)
        code = frame.f_code
        return (frame.f_globals.get("__name__"), code.co_qualname, frame.f_lineno - code.co_firstlineno)
    if isinstance(owner, asyncio.Future):
        return ("future", len(owner._callbacks or ()))
    return (getattr(callback, "__qualname__", "?"),)


_TASK_ROLES: dict[str, bool] = {}


def _is_task(role: str) -> bool:
    found = _TASK_ROLES.get(role)
    if found is None:
        found = writer_index(role) is not None or role.startswith("source-")
        if len(_TASK_ROLES) < 100_000:
            _TASK_ROLES[role] = found
    return found
