"""Search strategies behind the :class:`~runtime.sim.chooser.Chooser`: a scripted one for the
bounded systematic search, and PCT.

The search discretises the run's decisions into choice points with a few alternatives each,
index 0 being the default schedule's (the seeded random run of ``seed``):

* ``READY_ORDER``: which of the ``n`` callbacks ready at one virtual instant runs next (the loop
  asks only a chooser that ``orders_ready``): ``n`` alternatives, 0 = FIFO;
* ``MESSAGE_DELAY``: 2 alternatives: the seed's draw, or that draw plus ``late_s`` (the message,
  or reply, arrives late: later messages of other lanes overtake it; a lane never overtakes
  itself, the network sees to that). This is delay-bounding (Emmi, Qadeer, Rakamaric 2011): a
  deviation delays one event past others;
* ``MESSAGE_LOSS``: 2 alternatives for a request or one-way message of a method named lossy
  (``commitlab check --lose``): delivered, or lost in transit (the caller's bound, or the sender's
  ack timeout for an operator event, notices; nothing is resent). Asked for no other message (nor
  between the job manager and the coordinator, one process in Flink), so a search without
  ``--lose`` meets the same choice points as before;
* ``IO_DELAY``, ``ROLE_DRAW`` and ``SCHEDULE`` are not searched: the seed's draws, as
  :class:`~runtime.sim.chooser.RandomChooser` makes them (the job's faults and schedule are fixed
  by the check's options, not by the search).

:class:`ScriptedChooser` follows a sparse list of deviations (choice index -> alternative), takes
the default everywhere else, and records every choice point it met (its number of alternatives and
the state's fingerprint before the decision): the run is a function of its deviations, which is
what replays it. Given ``covered``, it stops the run at the first choice point whose state the
search reports as explored already (the loop aborts at its next iteration).
:class:`PCTChooser` is probabilistic concurrency testing (Burckhardt et al.,
ASPLOS 2010) over the senders of messages: each sender gets a random priority, a message from a
sender of rank ``r`` (0 the highest) arrives ``r * late_s / senders`` late, and at ``depth - 1``
change points drawn among the first ``events`` messages the sender of that message drops to the
lowest priority. The guarantee of 1/(n k^(d-1)) is the original's for threads with strict
priorities; here priorities become delays, so it is the algorithm, not the proof.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from runtime.sim.chooser import ChoicePoint, RandomChooser
from runtime.sim.fingerprint import StateFingerprint
from runtime.sim.network import SimNetwork
from runtime.sim.recorder import TraceRecorder

__all__ = ["Choice", "ScriptedChooser", "PCTChooser", "DEFAULT_LATE_S", "parse_deviations", "format_deviations"]

DEFAULT_LATE_S = 0.5  # a late message: well past the default delays (ms), well inside the 4 s interval

Deviations = tuple[tuple[int, int], ...]  # (choice index, alternative), ascending indices


class Choice(NamedTuple):
    """One choice point met by a run: its kind, its alternatives, the state before it. A tuple, not
    a frozen dataclass: a check makes one at every choice point of every run (some 20,000 in a
    one-writer search at bound 2), and a tuple is made in half the time."""

    point: ChoicePoint
    alternatives: int
    fingerprint: int
    stream: str = ""  # who decides (a message's sender); empty for the ready queue
    # a ready-queue choice: how many times the run had asked about its ready queue, this time
    # included (most asks are no choice point: nothing may move); -1 for a message's
    ask: int = -1


class ScriptedChooser(RandomChooser):
    """Follows ``deviations`` and takes the default (index 0) elsewhere; records the choice points."""

    orders_ready = True

    def __init__(
        self,
        seed: int,
        deviations: Deviations = (),
        *,
        late_s: float = DEFAULT_LATE_S,
        fingerprint: StateFingerprint | None = None,
        ready_order: bool = True,
        covered: Callable[[int, int], bool] | None = None,
        lossy: frozenset[str] = frozenset(),
        branch: Callable[[int, int, int], int] | None = None,
        known: Sequence[Choice] = (),
    ) -> None:
        super().__init__(seed)
        self.lossy = lossy
        # the first choice points, known from the run this one shares them with (its parent in
        # the search): their states are not fingerprinted again (see :meth:`_state`), and those
        # it takes the default at are not worked out again either (see :meth:`_repeated`)
        self.known = known
        last = max(dict(deviations), default=-1)
        self._repeats = 0 if branch is not None else len(known) if covered is None else min(len(known), last + 1)
        self._asks = 0  # the ready queue's asks so far (see Choice.ask)
        # (choice index, state) -> True when the rest of the run is known already: the run stops
        self.covered = covered
        # (choice index, state, alternatives) -> the alternative to take from here on (0: the
        # default): the fork search's walk (runtime.sim.fork_search), which may fork the run here
        self.branch = branch
        self.cut_at: int | None = None  # the choice point the run stopped at (None: it ran out)
        # False: the ready queue runs FIFO and is no choice point (only messages deviate)
        self.orders_ready = ready_order
        self.deviations = dict(deviations)
        self.late_s = late_s
        self.fingerprint = fingerprint if fingerprint is not None else StateFingerprint()
        self.choices: list[Choice] = []
        self.unmet: list[int] = []  # deviations whose choice point had fewer alternatives

    def attach(self, recorder: TraceRecorder, network: SimNetwork) -> None:
        """The host hands over the run's trace and network (what the fingerprint reads)."""
        self.fingerprint.attach(recorder, network)
        self._loop = network.loop
        self._role_names = network.roles

    _loop: object = None
    _role_names: dict[str, object] = {}  # noqa: RUF012 - replaced per run by attach

    def _decide(self, point: ChoicePoint, n: int, stream: str = "") -> int:
        if self.cut_at is not None:
            return 0  # stopping: the loop ends the run at its next iteration
        index = len(self.choices)
        if index < self._repeats and index not in self.deviations:
            self.choices.append(self.known[index])
            return 0
        state = self._state(index, point, n, stream)
        self.choices.append(Choice(point, n, state, stream, self._asks if point is ChoicePoint.READY_ORDER else -1))
        if self.branch is not None:
            self._branch(index, state, n)
        if self.covered is not None and self.covered(index, state):
            self.cut_at = index
            getattr(self._loop, "abort")(f"the state at choice {index} was explored before")  # noqa: B009
            return 0
        alt = self.deviations.get(index, 0)
        if alt >= n:
            self.unmet.append(index)
            return 0
        return alt

    def _state(self, index: int, point: ChoicePoint, n: int, stream: str) -> int:
        """The state's fingerprint before the decision at ``index``. A run that shares its first
        choice points with an earlier one (the same decisions before them: the simulator is
        deterministic, so the same states) takes those states from ``known`` and skips computing
        them; the fingerprint's running hashes fold the skipped events at its next call, in the
        same order, so every later state is the one computed at every step."""
        if index < len(self.known):
            return self.known[index].fingerprint
        # what is decided is part of the state: the same roles' state, asked about another sender
        return hash((point, n, self.fingerprint.mask(stream), self.fingerprint()))

    def _branch(self, index: int, state: int, n: int) -> None:
        """Asks the walk; a forked child takes its alternative here. The time a parent spends
        waiting for its children is not its run's: the real-time guard moves on by as much."""
        assert self.branch is not None
        t0 = time.monotonic()
        taken = self.branch(index, state, n)
        if taken:
            self.deviations[index] = taken
        getattr(self._loop, "extend_real_time_guard")(time.monotonic() - t0)  # noqa: B009

    def choose(self, point: ChoicePoint, n: int, stream: str = "") -> int:
        if point is ChoicePoint.MESSAGE_LOSS:
            return self._decide(point, n, stream)
        if point is not ChoicePoint.READY_ORDER or n < 2 or self.cut_at is not None:
            # a run cut short runs FIFO to its end (its clean-up included): the callbacks that may
            # move are not worked out (two fifths of them were, each a look into a coroutine)
            return super().choose(point, n, stream)
        self._asks += 1
        index = len(self.choices)
        if index < self._repeats and index not in self.deviations:
            return self._repeated(index)
        movable = self._movable(n)
        if len(movable) < 2:
            return 0  # no faithful alternative: not a choice point
        return movable[self._decide(point, len(movable))]

    def _repeated(self, index: int) -> int:
        """An ask of the ready queue before the run's last deviation, where it takes the default:
        the run so far is the one it shares these choice points with (the same decisions: the
        simulator is deterministic), so whether this ask is the next choice point, and its
        state, is what that run recorded, not worked out again (a look at every ready callback's
        coroutine; a check's run asks a dozen times or more a writer, most of them in a prefix)."""
        known = self.known[index]
        if known.point is ChoicePoint.READY_ORDER and known.ask == self._asks:
            self.choices.append(known)
        return 0  # the default (FIFO), whether a choice point or not

    def _movable(self, n: int) -> list[int]:
        """The ready callbacks (indices among the first ``n``) that may run first without breaking
        an order the real system keeps: one role's callbacks run in FIFO order on its own event
        loop, and a (sender, destination) lane delivers and starts its calls in order (Ray's
        per-caller actor task order). A callback whose owner is unknown stays in place, and
        nothing moves ahead of one."""
        ready = list(getattr(self._loop, "_ready", ()))[:n]
        keys = [ready_key(h, self._role_names) for h in ready]
        out = [0]
        for k in range(1, len(keys)):
            if keys[k - 1] is None:
                break
            if keys[k] is not None and keys[k] not in keys[:k]:
                out.append(k)
        return out

    def draw(self, point: ChoicePoint, stream: str, model: Callable[[random.Random], float]) -> float:
        value = super().draw(point, stream, model)
        if point is not ChoicePoint.MESSAGE_DELAY:
            return value
        return value + self.late_s if self._decide(point, 2, stream) else value


def ready_key(handle: asyncio.Handle, roles: dict[str, object]) -> tuple[str, ...] | None:
    """What orders a ready callback: its (sender, destination) lane for a delivery or a call's
    start, a reply of its own, or the role whose coroutine it resumes; None when unknown."""
    cb: Any = getattr(handle, "_callback", None)
    owner = getattr(cb, "__self__", None)
    name = getattr(cb, "__name__", "")
    args: tuple[Any, ...] = getattr(handle, "_args", ())
    if isinstance(owner, SimNetwork):
        if name == "_deliver_head" and args and args[0].queue:
            env = args[0].queue[0]
            return ("lane", env.sender, env.dest)
        if name in ("_complete", "_send_failed") and args:
            return ("reply", str(args[0].call_id))
        return None
    if not isinstance(owner, asyncio.Task):
        return None
    coro: Any = owner.get_coro()
    frame = getattr(coro, "cr_frame", None)
    if frame is None:
        return None
    local = frame.f_locals
    if getattr(coro, "__qualname__", "") == "SimNetwork._dispatch" and "env" in local:
        return ("lane", local["env"].sender, local["env"].dest)
    me = local.get("self")
    role = next((r for r, obj in roles.items() if obj is me), None) if me is not None else None
    return ("role", role) if role is not None else None


class PCTChooser(RandomChooser):
    """PCT with ``depth`` over message senders (see the module docstring); ``events``: the number
    of messages a default run sends (the change points are drawn among them)."""

    def __init__(self, seed: int, *, depth: int, events: int, late_s: float = DEFAULT_LATE_S) -> None:
        super().__init__(seed)
        self.late_s = late_s
        self._pct = random.Random(f"commitlab-pct/{seed}/{depth}/{events}")
        k = max(1, events)
        self.change_points = sorted(self._pct.sample(range(1, k + 1), min(k, max(0, depth - 1))))
        self._priority: dict[str, float] = {}
        self._low = 0.0  # the lowest priority handed out so far (change points go below it)
        self._messages = 0

    def draw(self, point: ChoicePoint, stream: str, model: Callable[[random.Random], float]) -> float:
        value = super().draw(point, stream, model)
        if point is not ChoicePoint.MESSAGE_DELAY:
            return value
        self._messages += 1
        prio = self._priority.get(stream)
        if prio is None:
            prio = self._priority[stream] = self._pct.random() + 1.0  # initial priorities in [1, 2)
        if self._messages in self.change_points:
            self._low -= 1.0
            prio = self._priority[stream] = self._low
        ranks = sorted(self._priority.values(), reverse=True)
        return value + ranks.index(prio) * self.late_s / max(1, len(ranks))


def parse_deviations(text: str) -> Deviations:
    """``INDEX:ALT,INDEX:ALT`` (as :func:`format_deviations` writes them); empty: none."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        index, sep, alt = part.partition(":")
        if not sep or not index.isdigit() or not alt.isdigit() or int(alt) < 1:
            raise ValueError(f"bad deviation {part!r}: write CHOICE:ALTERNATIVE, e.g. 12:1 (alternative >= 1)")
        out.append((int(index), int(alt)))
    return tuple(sorted(out))


def format_deviations(deviations: Deviations) -> str:
    return ",".join(f"{i}:{a}" for i, a in deviations)
