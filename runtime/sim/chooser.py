"""The one place where a simulated run chooses: every nondeterministic decision asks a :class:`Chooser`.

A simulated run is a pure function of its inputs and the decisions the simulator makes where the
real system would be free to go either way. Those decisions, by kind (:class:`ChoicePoint`):

* ``READY_ORDER``: which of several callbacks ready at the same virtual time runs next (the loop,
  :mod:`runtime.sim.loop`). Timers due at the same instant join the ready queue in the order they
  were set, so a timer against a message delivered at that instant is this choice too;
* ``MESSAGE_DELAY``: when a message or a reply arrives, relative to the others (the network,
  :mod:`runtime.sim.network`; a (sender, destination) lane never overtakes itself, whatever is
  drawn), per sender;
* ``MESSAGE_LOSS``: whether a request or one-way message is lost in transit, asked only for the
  methods a search names lossy (``Chooser.lossy``: none by default, so no run asks), per sender;
* ``IO_DELAY``: how long a role's inline I/O call takes in virtual time, when the run asks for it;
* ``ROLE_DRAW``: a role's own random numbers (``env.rng``: a retry's jitter), per role incarnation;
* ``SCHEDULE``: what a scenario of ``commitlab explore`` leaves open (:mod:`runtime.sim.schedule`):
  which crash point is armed and when, which checkpoints abort, which notices are late or lost.

Why one place: a later strategy that searches the schedules (PCT, a bounded depth-first search)
must see, and be able to steer, every one of these decisions, and a run it found must replay from
the decisions alone. :class:`RandomChooser` is the default and the seeded random strategy of
today: it makes exactly the draws the simulator made before the chooser existed (the same calls
on the same ``random.Random``, each seeded by the same string, in the same order), so the trace
bytes of a seed do not change; it takes the ready queue in FIFO order, which draws nothing.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from typing import Protocol

__all__ = ["ChoicePoint", "Chooser", "RandomChooser"]


class ChoicePoint(enum.Enum):
    """The kind of a decision (see the module docstring)."""

    READY_ORDER = "ready-order"
    MESSAGE_DELAY = "message-delay"
    MESSAGE_LOSS = "message-loss"
    IO_DELAY = "io-delay"
    ROLE_DRAW = "role-draw"
    SCHEDULE = "schedule"


class Chooser(Protocol):
    """What the simulator asks at each decision. ``stream`` names who decides (a sender, a role
    incarnation, a scenario), so that decisions of one stream do not shift another's."""

    # False: ``choose(READY_ORDER, n)`` is always 0 (FIFO); the loop then does not ask at all
    orders_ready: bool
    # the RPC methods whose messages may be lost (``MESSAGE_LOSS``); the network asks for no other
    lossy: frozenset[str]

    def choose(self, point: ChoicePoint, n: int, stream: str = "") -> int:
        """One of ``n`` alternatives, ``0 <= result < n``; index 0 is the default schedule's."""
        ...

    def draw(self, point: ChoicePoint, stream: str, model: Callable[[random.Random], float]) -> float:
        """A number (a delay) that ``model`` draws from ``stream``'s random source."""
        ...

    def source(self, point: ChoicePoint, stream: str) -> random.Random:
        """The random source of ``stream``, for a decision drawn by code that takes one (a role's
        ``env.rng``, a scenario's generator): a search strategy hands out one that asks it."""
        ...


# How each kind of decision seeds its sources: the strings the simulator used before the chooser
# (string seeds hash with SHA-512, so they are the same in every process, unlike ``hash()``).
_SEED_FORMATS: dict[ChoicePoint, str] = {
    ChoicePoint.MESSAGE_DELAY: "commitlab-sim/{seed}/net/{stream}",
    ChoicePoint.MESSAGE_LOSS: "commitlab-sim/{seed}/loss/{stream}",
    ChoicePoint.IO_DELAY: "commitlab-sim/{seed}/io/{stream}",
    ChoicePoint.ROLE_DRAW: "commitlab-sim/{seed}/role/{stream}",
    ChoicePoint.SCHEDULE: "commitlab-explore/{stream}/{seed}",
    ChoicePoint.READY_ORDER: "commitlab-sim/{seed}/ready/{stream}",
}


class RandomChooser:
    """The seeded random strategy (the default): one ``random.Random`` per (kind, stream),
    seeded from ``seed``; the ready queue in FIFO order."""

    orders_ready = False
    lossy: frozenset[str] = frozenset()  # nothing is lost unless a search strategy says so

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._sources: dict[tuple[ChoicePoint, str], random.Random] = {}

    def source(self, point: ChoicePoint, stream: str) -> random.Random:
        rng = self._sources.get((point, stream))
        if rng is None:
            rng = self._sources[(point, stream)] = random.Random(
                _SEED_FORMATS[point].format(seed=self.seed, stream=stream)
            )
        return rng

    def draw(self, point: ChoicePoint, stream: str, model: Callable[[random.Random], float]) -> float:
        return model(self.source(point, stream))

    def choose(self, point: ChoicePoint, n: int, stream: str = "") -> int:
        if n < 1:
            raise ValueError(f"a choice needs at least one alternative, got {n}")
        if point is ChoicePoint.READY_ORDER or point is ChoicePoint.MESSAGE_LOSS or n == 1:
            return 0  # FIFO, as asyncio runs them; nothing lost: no draw
        return self.source(point, stream).randrange(n)
