"""Messages between roles in one process: what Ray's bytes decode to, chosen delays, FIFO per pair.

A message is copied where it is sent into exactly what decoding its wire bytes gives the receiver
(:func:`runtime.core.codec.delivered`: a codec message becomes a fresh equal dataclass, or its
msgpack bytes, as ``actors/ray_env.py`` puts them on the wire, where the copy could differ; Arrow
data travels by reference as Ray would pass an object), delivered after a delay the run's chooser
draws for the sender (:mod:`runtime.sim.chooser`), and read where it arrives. Ray starts an
actor's calls from one caller in submission order; here each (sender, destination) pair is a
lane whose deliveries never overtake each other, whatever the delays say. The destination's
method must be one of its ``RPC_METHODS``; a coroutine result is awaited; the reply (or the
error) travels back after another delay.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import random
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from runtime.core.codec import delivered, from_wire
from runtime.core.env import bounded, rpc_handler
from runtime.core.roles import JOB_MANAGER_PROCESS
from runtime.sim.chooser import ChoicePoint, Chooser, RandomChooser
from runtime.sim.recorder import DROPPED, TraceRecorder

DelayModel = Callable[[random.Random], float]


# -- delay distributions ---------------------------------------------------------------------------


class Delay:
    """A named delay distribution (seconds), drawn from a role's random source."""

    def __init__(
        self,
        name: str,
        draw: DelayModel,
        bind: Callable[[random.Random], Callable[[], float]] | None = None,
    ) -> None:
        self.name = name
        self._draw = draw
        self._bind = bind

    def __call__(self, rng: random.Random) -> float:
        return max(0.0, self._draw(rng))

    def sampler(self, rng: random.Random) -> Callable[[], float]:
        """``lambda: self(rng)``: the same numbers from the same calls on ``rng``, in one call
        (the network draws one per message and one per reply: about 12,000 a run)."""
        if self._bind is not None:
            return self._bind(rng)
        draw = self._draw
        return lambda: max(0.0, draw(rng))

    def __repr__(self) -> str:
        return self.name

    @staticmethod
    def uniform(lo: float, hi: float) -> Delay:
        if not 0 <= lo <= hi:
            raise ValueError(f"uniform delay needs 0 <= lo <= hi, got {lo}, {hi}")
        span = hi - lo

        def bind(rng: random.Random) -> Callable[[], float]:
            # never below 0 (lo >= 0, span >= 0): ``max(0.0, ...)`` would return the same float
            uniform = rng.random
            return lambda: lo + span * uniform()

        # ``r.uniform(lo, hi)`` is ``lo + (hi - lo) * r.random()``: the same float, one call less a message
        return Delay(f"uniform:{lo:g}:{hi:g}", lambda r: lo + span * r.random(), bind)

    @staticmethod
    def fixed(seconds: float) -> Delay:
        if seconds < 0:
            raise ValueError(f"a delay cannot be negative, got {seconds}")
        return Delay(f"fixed:{seconds:g}", lambda r: seconds)

    @staticmethod
    def exponential(mean: float, cap: float) -> Delay:
        """Mostly fast, sometimes slow (a long tail, cut at ``cap``)."""
        if mean <= 0 or cap < 0:
            raise ValueError(f"exponential delay needs mean > 0 and cap >= 0, got {mean}, {cap}")
        return Delay(f"exp:{mean:g}:{cap:g}", lambda r: min(cap, r.expovariate(1.0 / mean)))

    @staticmethod
    def parse(text: str) -> Delay:
        """``uniform:LO:HI``, ``fixed:S`` or ``exp:MEAN:CAP`` (seconds)."""
        kind, *args = text.split(":")
        try:
            nums = [float(a) for a in args]
            if kind == "uniform" and len(nums) == 2:
                return Delay.uniform(*nums)
            if kind == "fixed" and len(nums) == 1:
                return Delay.fixed(*nums)
            if kind == "exp" and len(nums) == 2:
                return Delay.exponential(*nums)
        except ValueError as exc:
            raise ValueError(f"bad delay {text!r}: {exc}") from None
        raise ValueError(f"bad delay {text!r}: use uniform:LO:HI, fixed:S or exp:MEAN:CAP (seconds)")


DEFAULT_DELAY = Delay.uniform(0.0002, 0.002)


# the wire: the same rules as on Ray (runtime.core.codec.to_wire / from_wire)


def message_kind(msg: Any) -> str:
    """What the trace says a message is: its type, and the checkpoint or round it belongs to."""
    if msg is None:  # most replies: no look-ups
        return "NoneType"
    name = type(msg).__name__
    ckp = getattr(msg, "checkpoint_id", None)
    if isinstance(ckp, int):
        return f"{name}(ckp={ckp})"
    records = getattr(msg, "records", None)
    if records is not None and hasattr(records, "num_rows"):
        return f"{name}(round={getattr(msg, 'round', '?')},rows={records.num_rows})"
    if isinstance(records, list):
        return f"{name}(records={len(records)})"
    inner = getattr(msg, "message", None)
    kind = getattr(inner if inner is not None else msg, "kind", None)
    if isinstance(kind, str):
        return f"{name}({kind})"
    return name


# -- the network ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Envelope:
    call_id: int
    sender: str
    dest: str
    method: str
    payload: Any
    kind: str
    reply: asyncio.Future[Any] | None  # None for a one-way send
    on_error: Callable[[str], None] | None = None
    incarnation: int = 0  # of the destination when sent: a message to a dead role fails


@dataclass
class _Lane:
    """One (sender, destination) pair: deliveries in order, never before ``last_at``."""

    queue: deque[_Envelope] = field(default_factory=deque)
    last_at: float = 0.0


class _Handling:
    """The calls a role is handling, in the order they started. Finished ones are dropped when
    the set has doubled since the last sweep, not by a done-callback per call (one fewer
    callback per message); ``kill`` cancels the unfinished ones either way."""

    __slots__ = ("tasks", "_sweep_at")

    def __init__(self) -> None:
        self.tasks: dict[asyncio.Task[Any], None] = {}
        self._sweep_at = 64

    def add(self, task: asyncio.Task[Any]) -> None:
        tasks = self.tasks
        if len(tasks) >= self._sweep_at:
            for done in [t for t in tasks if t.done()]:
                del tasks[done]
            self._sweep_at = max(64, 2 * len(tasks))
        tasks[task] = None


_Known = tuple[Any, Callable[[Any], Any] | None, bool]  # SimNetwork._learn_handler

START_WAIT_S = 60.0  # as the Ray host: how long a message waits for its role to finish starting


class RoleNotStarted(RuntimeError):
    pass


class RoleDied(RuntimeError):
    """The role a message was sent to (or from) has died (a failover restarted it)."""


class SimNetwork:
    """Delivers calls and sends between the roles registered with :meth:`add`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        seed: int,
        recorder: TraceRecorder,
        delay: Delay = DEFAULT_DELAY,
        *,
        chooser: Chooser | None = None,
    ) -> None:
        self.loop = loop
        # ``loop.create_future``: asyncio's, a future of ``loop``, is made here without its frame
        # (a call's reply: some 7,000 a run)
        plain = getattr(type(loop), "create_future", None) is asyncio.BaseEventLoop.create_future
        self._new_future: Callable[[], asyncio.Future[Any]] = (
            functools.partial(asyncio.Future, loop=loop) if plain else loop.create_future
        )
        self.seed = seed
        # every delay is the chooser's decision (the seeded random one unless the run names another)
        self.chooser: Chooser = chooser if chooser is not None else RandomChooser(seed)
        self.recorder = recorder
        self.delay = delay
        self.roles: dict[str, Any] = {}
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._ids = itertools.count(1)
        self.messages = 0
        self.replies = 0
        # observers of every successful reply (replier, its incarnation, caller, method, wire
        # value): invariants that need what was said, without touching role code
        self.reply_probes: list[Callable[[str, int, str, str, Any], None]] = []
        self.incarnations: dict[str, int] = {}  # name -> restarts so far (0: never restarted)
        # calls each role is handling now, in the order they started (cancelled in that order)
        self._handling: dict[str, _Handling] = {}
        self._starting: dict[str, asyncio.Event] = {}  # roles bound but not started yet
        # (role, method) -> (the role object, its handler, whether that is a plain function)
        self._handlers: dict[tuple[str, str], _Known] = {}
        # each sender's delay draws, when the chooser is the seeded one (:meth:`_draw`)
        self._draws: dict[str, Callable[[], float]] = {}

    def add(self, name: str) -> None:
        """Registers a role by name (messages to it fail until :meth:`bind`)."""
        self.roles.setdefault(name, None)

    def bind(self, name: str, role: Any, *, starting: bool = False) -> None:
        """``starting``: the role is still initialising; messages to it wait (bounded) until
        :meth:`started`, as the Ray host's actors hold input for a task still starting."""
        self.roles[name] = role
        if starting:
            self._starting[name] = asyncio.Event()
        else:
            self._starting.pop(name, None)

    def started(self, name: str) -> None:
        event = self._starting.pop(name, None)
        if event is not None:
            event.set()

    def knows(self, name: str) -> bool:
        return name in self.roles

    def _draw(self, who: str) -> float:
        """The delay of a message ``who`` sends (a reply: ``who`` replies), the chooser's decision."""
        draw = self._draws.get(who)
        if draw is not None:
            return draw()
        if type(self.chooser) is RandomChooser:
            # the seeded strategy's draw is ``delay(source)``: its source, kept by sender, is
            # drawn from directly (the same calls on the same ``random.Random``)
            draw = self._draws[who] = self.delay.sampler(self.chooser.source(ChoicePoint.MESSAGE_DELAY, who))
            return draw()
        return self.chooser.draw(ChoicePoint.MESSAGE_DELAY, who, self.delay)

    def post(
        self,
        sender: str,
        dest: str,
        method: str,
        msg: Any,
        *,
        want_reply: bool,
        on_error: Callable[[str], None] | None = None,
        late_s: float = 0.0,
    ) -> asyncio.Future[Any] | None:
        """Puts a message on the (sender, dest) lane; returns the reply's future for a call.
        ``late_s`` (a ``message.delayed`` fault) delays it and, the lane being FIFO, every
        message sent after it on the lane (head-of-line, as on a TCP connection). A message of a
        method the chooser names lossy may be lost (a search's deviation): it never arrives, and a
        caller's reply never comes (its own bound, or Flink's ask timeout, notices)."""
        loop = self.loop
        reply = self._new_future() if want_reply else None
        self.messages += 1
        if (
            method in self.chooser.lossy
            and not (sender in JOB_MANAGER_PROCESS and dest in JOB_MANAGER_PROCESS)
            and self.chooser.choose(ChoicePoint.MESSAGE_LOSS, 2, sender)
        ):
            self.recorder.add(DROPPED, sender, dest, method)
            return reply
        env = _Envelope(
            next(self._ids),
            sender,
            dest,
            method,
            delivered(msg),
            message_kind(msg),
            reply,
            on_error,
            self.incarnations.get(dest, 0),
        )
        lane = self._lanes.get((sender, dest))
        if lane is None:
            lane = self._lanes[(sender, dest)] = _Lane()
        draw = self._draws.get(sender)  # :meth:`_draw`, its common case without the call
        at = loop.time() + (draw() if draw is not None else self._draw(sender)) + late_s
        if at < lane.last_at:
            at = lane.last_at
        lane.last_at = at
        lane.queue.append(env)
        # each timer delivers the lane's head, so equal times can never reorder a lane
        loop.call_at(at, self._deliver_head, lane)
        return reply

    def _deliver_head(self, lane: _Lane) -> None:
        env = lane.queue.popleft()
        if env.incarnation != self.incarnations.get(env.dest, 0):  # sent to a role that died since
            self.recorder.add("lost", env.sender, env.dest, env.method, env.kind, env.call_id)
            self._respond(
                env, ok=False, value=RoleDied(f"{env.dest} died before {env.method} reached it"), kind="RoleDied"
            )
            return
        self.recorder.add_message("deliver", env.sender, env.dest, env.method, env.kind, env.call_id)
        if env.dest not in self._starting:
            role = self.roles.get(env.dest)
            known = self._handlers.get((env.dest, env.method))
            if known is None or known[0] is not role:
                known = self._learn_handler(role, env.dest, env.method)
            if known[2]:
                # the callback runs where the dispatch task's first step would, and a synchronous
                # handler finishes in that step: the same order, without a task per message
                self.loop.call_soon(self._dispatch_now, env, role, known[1])
                return
        self._handle_in_task(env, self.loop.create_task(self._dispatch(env)))

    def _handle_in_task(self, env: _Envelope, task: asyncio.Task[None]) -> None:
        handling = self._handling.get(env.dest)
        if handling is None:
            handling = self._handling[env.dest] = _Handling()
        handling.add(task)

    def kill(self, name: str) -> None:
        """``name`` dies: what is in flight to it fails, the calls it is handling are cancelled,
        and the next role bound under the name is a new incarnation."""
        self.incarnations[name] = self.incarnations.get(name, 0) + 1
        handling = self._handling.pop(name, None)
        for task in list(handling.tasks if handling is not None else ()):
            task.cancel()

    async def _dispatch(self, env: _Envelope, started: Coroutine[Any, Any, Any] | None = None) -> None:
        """Runs ``env``'s handler and replies; ``started``: the coroutine a plain handler
        returned (:meth:`_dispatch_now`), to await instead."""
        try:
            if started is None:
                starting = self._starting.get(env.dest)
                if starting is not None:
                    try:
                        await bounded(starting.wait(), START_WAIT_S)
                    except asyncio.TimeoutError:
                        raise RoleNotStarted(
                            f"{env.dest} received {env.method} but did not finish "
                            f"starting within {START_WAIT_S:.0f} virtual s"
                        ) from None
                role = self.roles.get(env.dest)
                known = self._handlers.get((env.dest, env.method))
                if known is not None and known[0] is role and known[1] is not None:
                    handler = known[1]  # looked up for this role object already (_learn_handler)
                else:
                    if role is None:
                        raise RoleNotStarted(f"{env.dest} received {env.method} before it started")
                    if env.method not in getattr(role, "RPC_METHODS", ()):
                        raise ValueError(f"{env.dest} ({type(role).__name__}) has no RPC method {env.method!r}")
                    handler = rpc_handler(role, env.method)
                result = handler(from_wire(env.payload))
            else:
                result = started
            if asyncio.iscoroutine(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - travels back to the caller, as on Ray
            self._respond(env, ok=False, value=exc, kind=type(exc).__name__)
            return
        self._respond(env, ok=True, value=delivered(result), kind=message_kind(result))

    def _learn_handler(self, role: Any, dest: str, method: str) -> _Known:
        """``role``'s handler of ``method`` (None when looking it up fails: the dispatch task
        reports that, as before) and whether it is a plain function; kept by (dest, method) with
        the role object it belongs to."""
        handler: Callable[[Any], Any] | None = None
        try:
            if role is not None and method in getattr(role, "RPC_METHODS", ()):
                handler = rpc_handler(role, method)
        except Exception:  # noqa: BLE001 - a look-up that fails: the dispatch task reports it
            handler = None
        plain = handler is not None and not inspect.iscoroutinefunction(handler)
        known = self._handlers[(dest, method)] = (role, handler, plain)
        return known

    def _dispatch_now(self, env: _Envelope, role: Any, handler: Callable[[Any], Any] | None) -> None:
        """:meth:`_dispatch` for a synchronous handler (``role``'s when it was delivered), as a
        plain callback. A kill since the delivery skips it, as it cancels a dispatch task that
        has not started."""
        if env.incarnation != self.incarnations.get(env.dest, 0):
            return
        try:
            current = self.roles[env.dest]
            if current is not role or handler is None:  # rebound since the delivery
                handler = rpc_handler(current, env.method)
            result = handler(from_wire(env.payload))
            # a plain function that returned a coroutine (most return None: no ABC check for it)
            if result is not None and asyncio.iscoroutine(result):
                self._handle_in_task(env, self.loop.create_task(self._dispatch(env, result)))
                return
        except Exception as exc:  # noqa: BLE001 - travels back to the caller, as on Ray
            self._respond(env, ok=False, value=exc, kind=type(exc).__name__)
            return
        if result is None:  # most handlers' (what ``delivered`` and ``message_kind`` make of None)
            self._respond(env, ok=True, value=None, kind="NoneType")
        else:
            self._respond(env, ok=True, value=delivered(result), kind=message_kind(result))

    def _respond(self, env: _Envelope, *, ok: bool, value: Any, kind: str) -> None:
        if env.reply is None:
            if not ok and env.on_error is not None:
                # a one-way message that failed: the sender learns it when the error comes back
                self.loop.call_at(self.loop.time() + self._draw(env.dest), self._send_failed, env, value)
            return
        draw = self._draws.get(env.dest)  # :meth:`_draw`, its common case without the call
        delay = draw() if draw is not None else self._draw(env.dest)
        self.loop.call_at(self.loop.time() + delay, self._complete, env, ok, value, kind)

    def _send_failed(self, env: _Envelope, exc: BaseException) -> None:
        self.recorder.add("send-error", env.dest, env.sender, env.method, type(exc).__name__, env.call_id)
        assert env.on_error is not None
        env.on_error(f"{env.dest}.{env.method}: {type(exc).__name__}: {exc}"[:500])

    def _complete(self, env: _Envelope, ok: bool, value: Any, kind: str) -> None:
        fut = env.reply
        assert fut is not None
        self.replies += 1
        if fut.done():  # the caller gave up (timeout) or was cancelled
            self.recorder.add("reply-late", env.dest, env.sender, env.method, kind, env.call_id)
            return
        if ok:
            self.recorder.add_message("reply", env.dest, env.sender, env.method, kind, env.call_id)
            for probe in self.reply_probes:
                probe(env.dest, env.incarnation, env.sender, env.method, value)
            fut.set_result(value)
        else:
            self.recorder.add("reply-error", env.dest, env.sender, env.method, kind, env.call_id)
            fut.set_exception(value)
