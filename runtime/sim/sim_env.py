"""The simulator's :class:`~runtime.core.env.Env`: virtual time, an in-process network, inline I/O.

A role cannot tell it is simulated: ``now`` is the loop's virtual clock, ``wall_time`` a fixed
epoch plus that clock (so Hudi instant times, and with them every file name, repeat from run to
run), ``call``/``send`` go through :class:`~runtime.sim.network.SimNetwork` with the same encoding
as on Ray, and ``io`` runs the blocking function inline: the simulator has one thread, and a
thread pool would be a source of nondeterminism.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import random
from collections.abc import Callable
from typing import Any, TypeVar

from runtime.core.codec import from_wire
from runtime.core.dfs import Dfs
from runtime.core.env import RPC_TIMEOUT_FLAG, Env, WaitTimeout, waited_text
from runtime.sim.chooser import ChoicePoint
from runtime.sim.network import DEFAULT_DELAY, Delay, RoleDied, SimNetwork
from runtime.sim.recorder import DROPPED, SimMetrics, SimTracer, TraceRecorder

T = TypeVar("T")

# 2026-01-01T00:00:00Z: virtual time 0 is this wall-clock time, so instant times are stable
SIM_EPOCH = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc).timestamp()

__all__ = ["SimEnv", "SimNetwork", "Delay", "DEFAULT_DELAY", "SIM_EPOCH"]


class _ReplyTimeout(asyncio.TimeoutError):
    """A call's reply did not come within its bound."""


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(_ReplyTimeout())


class SimEnv(Env):
    """One role's environment inside the simulator."""

    def __init__(
        self,
        role: str,
        dfs: Dfs,
        network: SimNetwork,
        *,
        seed: int,
        recorder: TraceRecorder,
        chrome_trace: bool = False,
        io_delay: Delay | None = None,
        incarnation: int = 0,
    ) -> None:
        self.role = role
        self.dfs = dfs
        self.network = network
        self._loop = network.loop
        # a restarted role draws new numbers, as a new process would
        self.incarnation = incarnation
        key = role if incarnation == 0 else f"{role}#{incarnation}"
        self._rng: random.Random | None = None  # the role's draws: see rng
        self._io_key = key
        self.alive = True
        self.crashed: str | None = None  # why an injected crash ended this role
        self.tasks: list[asyncio.Task[Any]] = []  # what this role runs: cancelled when it dies
        self.io_delay = io_delay
        self._deferred_io_s = 0.0  # slow-DFS time owed by the current inline I/O call
        # the loop's clock itself, not ``now`` around it: every trace event reads it
        self.tracer = SimTracer(role, recorder, enabled=chrome_trace, clock=self._loop.time)
        self.metrics = SimMetrics(role, recorder)
        self.recorder = recorder
        self.send_errors: list[str] = []
        network.add(role)

    @property
    def rng(self) -> random.Random:
        """The role's draws: the network's chooser's decisions (seeded by the run's seed and the
        role's name), its source taken at the first draw: most roles never draw, and seeding a
        source from its name was half of making a role's env (a check makes thousands)."""
        rng = self._rng
        if rng is None:
            rng = self._rng = self.network.chooser.source(ChoicePoint.ROLE_DRAW, self._io_key)
        return rng

    @rng.setter
    def rng(self, rng: random.Random) -> None:  # a test's own draws
        self._rng = rng

    def now(self) -> float:
        # inside an inline I/O call a slowed DFS operation has taken its time already (paid on
        # return, :meth:`io`): a slow-DFS window closes mid-call, as it does in real time
        return self._loop.time() + self._deferred_io_s

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = self._loop.create_task(coro, name=name)
        self.tasks.append(task)
        return task

    def kill(self) -> None:
        """The role's process dies: everything it runs is cancelled, nothing more is sent."""
        self.alive = False
        for task in self.tasks:
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # died with the role: nobody else will look at it
        self.tasks.clear()

    def crash(self, reason: str) -> None:
        """An injected crash: on Ray the process exits; here the role is marked dead for the
        supervisor (which fails the job over, as the Ray driver does for a dead actor) and the
        crashing coroutine ends."""
        self.crashed = reason
        super().crash(reason)

    def _check_alive(self) -> None:
        if not self.alive:
            raise RoleDied(f"{self.role} (incarnation {self.incarnation}) is dead")

    def wall_time(self) -> float:
        return SIM_EPOCH + self._loop.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def _check_dest(self, dest: str) -> None:
        if not self.network.knows(dest):
            known = sorted(n for n in self.network.roles if n != self.role)
            raise LookupError(f"{self.role} has no handle for {dest!r}; known: {known}")

    async def call(
        self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None, option: str = RPC_TIMEOUT_FLAG
    ) -> Any:
        if not self.alive or dest not in self.network.roles:  # the two checks, a call only when one fails
            self._check_alive()
            self._check_dest(dest)
        self.metrics.rpc(method)
        faults = self.faults
        late = 0.0
        if faults.arms_messages:  # (every call: nothing armed costs one test, no coroutine)
            late = await faults.apply_call_fault(dest, method, msg, timeout, option)
        fut = self.network.post(self.role, dest, method, msg, want_reply=True, late_s=late)
        assert fut is not None
        if not timeout:
            return from_wire(await fut)
        # the bound is a timer on the reply itself (what ``bounded`` does, minus its context
        # manager and task bookkeeping: calls are most of what roles await)
        timer = self._loop.call_at(self._loop.time() + timeout, _expire, fut)
        try:
            reply = await fut
        except _ReplyTimeout as exc:
            self.recorder.add("timeout", self.role, dest, method, timeout)
            raise WaitTimeout(waited_text(self.role, timeout, f"the reply of {dest}.{method}", option)) from exc
        finally:
            timer.cancel()
        return from_wire(reply)

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        if not self.alive or dest not in self.network.roles:  # the two checks, a call only when one fails
            self._check_alive()
            self._check_dest(dest)
        self.metrics.rpc(method)
        faults = self.faults  # nothing armed: one test per message
        delay = faults.send_fault_delay(dest, method, msg) if faults.arms_messages else 0.0
        if delay is None:
            return  # lost in transit
        self.network.post(
            self.role, dest, method, msg, want_reply=False, on_error=self.send_errors.append, late_s=delay
        )

    def send_event(
        self,
        dest: str,
        method: str,
        msg: Any,
        *,
        timeout: float,
        on_failure: Callable[[str], None],
        option: str = RPC_TIMEOUT_FLAG,
    ) -> None:
        """A call whose caller does not wait (Flink's operator event gateway): posted now on the
        (sender, dest) lane; a failed or missing acknowledgement calls ``on_failure``."""
        if not self.alive or dest not in self.network.roles:  # the two checks, a call only when one fails
            self._check_alive()
            self._check_dest(dest)
        self.metrics.rpc(method)
        loop = self.network.loop
        delay = self.faults.send_fault_delay(dest, method, msg) if self.faults.arms_messages else 0.0
        what = f"{self.role}: the acknowledgement of {dest}.{method}"
        if delay is None:  # lost in transit: the sender learns it when its ask times out
            loop.call_later(
                timeout, on_failure, f"{what} did not come within {timeout:.1f}s (the message was lost; {option})"
            )
            return

        fut = self.network.post(self.role, dest, method, msg, want_reply=True, late_s=delay)
        assert fut is not None
        timer = loop.call_later(timeout, _expire, fut)  # the ask's timeout runs from the send

        def done(f: asyncio.Future[Any]) -> None:
            timer.cancel()
            if f.cancelled():
                return
            exc = f.exception()
            if isinstance(exc, _ReplyTimeout):
                on_failure(f"{what} did not come within {timeout:.1f}s ({option})")
            elif exc is not None:
                on_failure(f"{what} failed: {type(exc).__name__}: {exc}"[:500])

        fut.add_done_callback(done)

    def note_dropped(self, dest: str, method: str) -> None:
        """Records a message lost in transit (the fault points' ``on_dropped``)."""
        self.recorder.add(DROPPED, self.role, dest, method)

    def defer_io_delay(self, seconds: float) -> None:
        """Work inside an inline I/O call that should have taken ``seconds`` (a slow DFS
        operation): the call's caller waits that long, in virtual time, when it returns."""
        self._deferred_io_s += seconds

    async def io(self, fn: Callable[..., T], *args: Any) -> T:
        """Runs ``fn`` inline: blocking work takes no virtual time, unless ``io_delay`` says it
        should (drawn from this role's seeded source after the work is done) or the work was
        slowed by a fault (:meth:`defer_io_delay`)."""
        self._check_alive()
        try:
            result = fn(*args)
        finally:
            slowed, self._deferred_io_s = self._deferred_io_s, 0.0
            if slowed:
                await asyncio.sleep(slowed)
        if self.io_delay is not None:
            await asyncio.sleep(self.network.chooser.draw(ChoicePoint.IO_DELAY, self._io_key, self.io_delay))
        return result
