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
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.core.dfs import Dfs
from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer

if TYPE_CHECKING:
    from runtime.core.fault_spec import FaultSpec

T = TypeVar("T")

LOST_REQUEST_WAIT_S = 30.0  # how long a call with no timeout of its own waits for a lost request


class WaitTimeout(TimeoutError):
    """A bounded wait gave up. The message says what was awaited, for how long, and from whom."""


if hasattr(asyncio, "timeout"):  # Python 3.11+

    async def bounded(aw: Awaitable[T], timeout: float) -> T:
        """``await aw`` for at most ``timeout`` seconds, else ``asyncio.TimeoutError``.

        Like ``asyncio.wait_for`` but without the task 3.11's ``wait_for`` wraps a coroutine in, or
        the waiter future it wraps a future in: one timer per wait. Waits are the commonest thing
        roles do (polls, calls), so this is most of the event loop's work in the simulator.
        """
        async with asyncio.timeout(timeout):
            return await aw

else:  # pragma: no cover - Python 3.10

    async def bounded(aw: Awaitable[T], timeout: float) -> T:
        return await asyncio.wait_for(aw, timeout)


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
    faults: Any = None  # a runtime.faults.injector.FaultInjector when faults are armed
    # (extra seconds per DFS operation, until when on this host's clock): the dfs.latency fault
    dfs_slow: tuple[float, float] | None = None
    dfs_fail_next = False  # the dfs.transient_error fault: the next DFS write or create fails

    def fault(self, point: str, *, checkpoint: int = -1, task: int = -1) -> Any:
        """The armed fault spec if ``point`` fires now, else None."""
        if self.faults is None:
            return None
        spec = self.faults.hit(point, checkpoint=checkpoint, task=task)
        if spec is not None:
            self.tracer.instant(f"fault {point}", cat="fault", args={"checkpoint": checkpoint})
        return spec

    def slow_dfs(self, seconds_per_op: float, window_s: float) -> None:
        """From now on, for ``window_s``, each DFS operation of this role takes ``seconds_per_op``
        longer (the host's DFS hook applies it)."""
        self.dfs_slow = (seconds_per_op, self.now() + window_s)

    def dfs_delay(self) -> float:
        """The extra latency of a DFS operation now (0 outside a dfs.latency window)."""
        if self.dfs_slow is None or self.now() >= self.dfs_slow[1]:
            return 0.0
        return self.dfs_slow[0]

    def message_fault(self, dest: str, method: str, msg: Any) -> FaultSpec | None:
        """The armed messaging fault (``message.dropped`` / ``message.delayed``) that hits this
        message now, or None. The checkpoint is the message's own; the task is the write task at
        either end."""
        if self.faults is None or not self.faults.specs:  # (every message asks: the cheap test first)
            return None
        from runtime.core.fault_spec import MESSAGE_FAULTS

        if not any(self.faults.armed(p) for p in MESSAGE_FAULTS):
            return None
        ckp = getattr(msg, "checkpoint_id", -1)
        task = getattr(msg, "task_id", None)
        if not isinstance(task, int):
            end = dest if dest.startswith("writer-") else self.role
            task = int(end.rsplit("-", 1)[1]) if end.startswith("writer-") else -1
        for point in MESSAGE_FAULTS:
            spec: FaultSpec | None = self.faults.hit(
                point, checkpoint=ckp if isinstance(ckp, int) else -1, task=task, target=method, strict=True
            )
            if spec is not None:
                self.tracer.instant(
                    f"fault {point}: {dest}.{method}", cat="fault", args={"checkpoint": ckp, "delay_s": spec.value}
                )
                return spec
        return None

    async def apply_call_fault(self, dest: str, method: str, msg: Any, timeout: float | None) -> None:
        """A host calls this before a request goes out. A lost request ends in the caller's own
        timeout (WaitTimeout, as a real one would); a delayed one leaves late."""
        fault = self.message_fault(dest, method, msg)
        if fault is None:
            return
        if fault.point == "message.dropped":
            wait = timeout or LOST_REQUEST_WAIT_S
            self.note_dropped(dest, method)
            await self.sleep(wait)
            raise WaitTimeout(
                f"{self.role} waited {wait:.1f}s for the reply of {dest}.{method}: "
                "no reply (the request was lost in transit)"
            )
        await self.sleep(fault.value)

    def send_fault_delay(self, dest: str, method: str, msg: Any) -> float | None:
        """A host calls this before a one-way message goes out: seconds to hold it back (0 for
        none; messages sent after it overtake it), or None when it is lost."""
        fault = self.message_fault(dest, method, msg)
        if fault is None:
            return 0.0
        if fault.point == "message.dropped":
            self.note_dropped(dest, method)
            return None
        return float(fault.value)

    def note_dropped(self, dest: str, method: str) -> None:  # noqa: B027 - an optional hook, empty by default
        """Hook: a host that records deliveries records the loss too."""

    def crash(self, reason: str) -> None:
        """Ends this role as a crash would. The Ray host exits the process; others raise."""
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
    async def call(self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None) -> Any:
        """Request/response to another role; raises WaitTimeout naming ``dest.method``."""

    @abc.abstractmethod
    def send(self, dest: str, method: str, msg: Any = None) -> None:
        """One-way message; delivered in order per (sender, destination)."""

    def send_event(
        self, dest: str, method: str, msg: Any, *, timeout: float, on_failure: Callable[[str], None]
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

    async def wait_for(self, aw: Awaitable[T], timeout: float, what: str) -> T:
        """Awaits with a bound; on timeout raises WaitTimeout("<role> waited <t>s for <what>")."""
        try:
            return await bounded(aw, timeout)
        except asyncio.TimeoutError as exc:
            raise WaitTimeout(f"{self.role} waited {timeout:.1f}s for {what}") from exc
