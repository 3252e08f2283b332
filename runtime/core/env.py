"""The environment a role talks to: clock, waits, DFS, messaging, randomness, trace, metrics.

Roles (job manager, coordinator, write task, source) are plain asyncio code that never imports Ray.
A host gives each role an :class:`Env`: the Ray host (``actors/``) with real time, actor calls and
a real file system; a simulation host with virtual time and seeded delivery. Same role code, both.
"""

from __future__ import annotations

import abc
import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from runtime.core.config import flag_of
from runtime.core.dfs import Dfs
from runtime.core.fault_points import NO_FAULTS, FaultPoints
from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """A bounded wait gave up. The message says what was awaited, for how long, from whom, and
    which option sets the bound."""


# the option that bounds a call between roles unless the caller names another (the transport deadline)
RPC_TIMEOUT_FLAG = flag_of("rpc_timeout_s")


def waited_text(role: str, timeout: float, what: str, option: str) -> str:
    """One line: ``<role> waited <t>s for <what> (<option>)``, the option a user raises."""
    return f"{role} waited {timeout:.1f}s for {what} ({option})"


class _Expiry:
    """A bounded wait's timer callback: cancels the waiting task and remembers that it did."""

    __slots__ = ("task", "expired")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.expired = False

    def __call__(self) -> None:
        self.task.cancel()
        self.expired = True


async def bounded(aw: Awaitable[T], timeout: float) -> T:
    """``await aw`` for at most ``timeout`` seconds, else ``asyncio.TimeoutError``.

    Like ``asyncio.wait_for`` but without the task 3.11's ``wait_for`` wraps a coroutine in, or
    the waiter future it wraps a future in: one timer per wait. Waits are the commonest thing
    roles do (polls, calls), so this is most of the event loop's work in the simulator: it is
    ``async with asyncio.timeout(timeout)`` (3.11's ``asyncio.timeouts.Timeout``) step for step,
    the same timer set at the same moment and the same cancel and uncancel, without the context
    manager's object, its state enum and its two extra coroutines.
    """
    loop = asyncio.get_running_loop()
    now = loop.time()
    when = now + timeout
    task = asyncio.current_task(loop)
    if task is None:
        raise RuntimeError("Timeout should be used inside a task")
    cancelling = task.cancelling()
    expiry = _Expiry(task)
    timer = loop.call_soon(expiry) if when <= now else loop.call_at(when, expiry)
    try:
        result = await aw
    except BaseException as exc:
        if not expiry.expired:
            timer.cancel()
        elif task.uncancel() <= cancelling and type(exc) is asyncio.CancelledError:
            raise TimeoutError from exc
        raise
    if expiry.expired:
        task.uncancel()
    else:
        timer.cancel()
    return result


async def wait_ended(task: asyncio.Task[Any], timeout: float) -> bool:
    """Waits at most ``timeout`` seconds for ``task`` to end, without cancelling it (unlike
    ``bounded``); True if it ended. Its outcome is taken, so an error it ended with (already
    reported by the role that ran it) is not logged again as never retrieved."""
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if done and not task.cancelled():
        task.exception()
    return bool(done)


def rpc_handler(role: Any, method: str) -> Callable[[Any], Any]:
    """The handler a host runs for RPC ``method`` of ``role``: it must be one of the role's
    ``RPC_METHODS`` (its declared wire names); a role that routes some of them elsewhere (the
    coordinator, to its protocol side) gives the handler through ``rpc_handler(method)``."""
    if method not in getattr(role, "RPC_METHODS", ()):
        raise ValueError(f"{type(role).__name__} has no RPC method {method!r}")
    route = getattr(role, "rpc_handler", None)
    handler: Callable[[Any], Any] = route(method) if route is not None else getattr(role, method)
    return handler


class Env(abc.ABC):
    """What a role may use of the outside world."""

    role: str
    dfs: Dfs
    rng: random.Random
    tracer: Tracer
    metrics: Metrics
    # the fault points the host armed for this role (runtime.faults.points); none by default
    faults: FaultPoints = NO_FAULTS

    def crash(self, reason: str) -> None:
        """Ends this role as a crash would (a fault point that fired, or a failure it causes). A
        host capability, not fault policy: what a crash is depends on the host. The Ray host exits
        the process; others raise."""
        from runtime.core.fault_spec import InjectedCrash

        raise InjectedCrash(reason)

    @abc.abstractmethod
    def now(self) -> float:
        """Seconds on this host's clock (monotonic on Ray, virtual in the simulator)."""

    def wall_time(self) -> float:
        """Seconds since the epoch (instant times are derived from it)."""
        import time

        return time.time()

    @abc.abstractmethod
    async def sleep(self, seconds: float) -> None: ...

    @abc.abstractmethod
    async def call(
        self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None, option: str = RPC_TIMEOUT_FLAG
    ) -> Any:
        """Request/response to another role; raises WaitTimeout naming ``dest.method`` and ``option``,
        the flag that set ``timeout``."""

    @abc.abstractmethod
    def send(self, dest: str, method: str, msg: Any = None) -> None:
        """One-way message; delivered in order per (sender, destination)."""

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
        """Flink's ``OperatorEventGateway.sendEventToCoordinator`` (as ``RpcTaskOperatorEventGateway``
        does it, Flink 1.14+): the message goes out now, in order with this sender's other messages
        and calls to ``dest``, and the sender does not wait; if it is not acknowledged within
        ``timeout`` (lost, or its handler failed) ``on_failure`` is called with the reason (Flink
        fails the task: "an OperatorEvent ... was lost"). A host without delivery acknowledgement
        sends one-way and never calls ``on_failure``."""
        self.send(dest, method, msg)

    @abc.abstractmethod
    async def io(self, fn: Callable[..., T], *args: Any) -> T:
        """Runs blocking I/O (DFS, parquet) without stalling the role's other coroutines."""

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(coro, name=name)  # type: ignore[arg-type]

    async def wait_for(self, aw: Awaitable[T], timeout: float, what: str, *, option: str) -> T:
        """Awaits with a bound; on timeout raises WaitTimeout("<role> waited <t>s for <what> (<option>)")."""
        try:
            return await bounded(aw, timeout)
        except asyncio.TimeoutError as exc:
            raise WaitTimeout(waited_text(self.role, timeout, what, option)) from exc
