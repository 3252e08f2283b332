"""The Ray host's environment: real time, actor calls as messages, a real file system.

A message to a role of another process is a call of that process actor's ``deliver``; a message to
a role of the same process (a write task and its source in one task manager) is delivered in the
process, through the same wire encoding, and started at once, in the sender's order. Between
processes Ray starts one submitter's calls in order only on synchronous actors, and the process
actors are async: each message is numbered on its channel (this role to that process), and the
receiving process starts a channel's messages in that order (:mod:`actors.channels`), as Flink's
RPC keeps one sender's order."""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from actors.channels import Outbox
from runtime.core.codec import from_wire, to_wire
from runtime.core.dfs import Dfs
from runtime.core.env import RPC_TIMEOUT_FLAG, Env, WaitTimeout, bounded, waited_text
from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer

T = TypeVar("T")


class RayEnv(Env):
    def __init__(self, role: str, dfs: Dfs, *, seed: int = 0, trace: bool = True) -> None:
        self.role = role
        self.dfs = dfs
        self.rng = random.Random(seed)
        self.tracer = Tracer(role, enabled=trace, clock=time.time)
        self.metrics = Metrics()
        self.handles: dict[str, Any] = {}  # role -> RoleRef (actors.process_actor)
        self.local: dict[str, Any] = {}  # role -> HostedRole: the roles of this process
        self.outbox = Outbox(role)  # numbers this role's messages per receiving process
        self._pending_sends: set[asyncio.Task[Any]] = set()
        self.send_errors: list[str] = []

    def now(self) -> float:
        # wall-clock seconds: comparable across processes and nodes, so traces line up
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def _submit(self, dest: str, method: str, payload: Any, late_s: float = 0.0) -> Any:
        """Hands the message to ``dest`` now, or ``late_s`` seconds from now (a ``message.delayed``
        fault); an awaitable of its reply."""
        local = self.local.get(dest)
        if local is not None:
            # shielded: a caller that stops waiting does not cancel the handler, as between actors
            # (a late message to a role of this process holds up nothing: no channel in between)
            start = functools.partial(local.deliver, method, payload, self.role)
            return asyncio.shield(asyncio.ensure_future(_after(late_s, start) if late_s else start()))
        try:
            handle = self.handles[dest]
        except KeyError:
            raise LookupError(f"{self.role} has no handle for {dest!r}; known: {sorted(self.handles)}") from None
        # numbered now even when late: the receiver starts the ones sent after it only after it
        seq = self.outbox.number(handle.process_id)
        if not late_s:
            return handle.deliver(method, payload, self.role, self.outbox.channel, seq)
        channel = self.outbox.channel
        return asyncio.ensure_future(
            _after(late_s, functools.partial(handle.deliver, method, payload, self.role, channel, seq))
        )

    async def call(
        self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None, option: str = RPC_TIMEOUT_FLAG
    ) -> Any:
        self.metrics.rpc(method)
        late = 0.0
        if self.faults.arms_messages:
            late = await self.faults.apply_call_fault(dest, method, msg, timeout, option)
        ref = self._submit(dest, method, to_wire(msg), late)
        try:
            # not asyncio.wait_for: on 3.11 it swallows a cancellation that arrives as the reply
            # lands, and the cancelled caller runs on (a control-topic job hung on it)
            reply = await (bounded(ref, timeout) if timeout else ref)
        except asyncio.TimeoutError as exc:
            raise WaitTimeout(waited_text(self.role, timeout or 0.0, f"the reply of {dest}.{method}", option)) from exc
        return from_wire(reply)

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        self.metrics.rpc(method)
        delay = self.faults.send_fault_delay(dest, method, msg)
        if delay is None:
            return  # lost in transit: a one-way message has no reply to miss
        # numbered now in this sender's order (the receiver starts them in that order), late or not
        ref = self._submit(dest, method, to_wire(msg), delay)

        async def watch() -> None:
            try:
                await ref
            except Exception as exc:  # noqa: BLE001 - a one-way message that failed: recorded, never raised here
                self.send_errors.append(f"{dest}.{method}: {type(exc).__name__}: {exc}"[:500])

        task = asyncio.get_running_loop().create_task(watch())
        self._pending_sends.add(task)
        task.add_done_callback(self._pending_sends.discard)

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
        """Submitted now (in order with this sender's other messages to ``dest``); the sender does
        not wait; a missing or failed acknowledgement calls ``on_failure`` (Flink fails the task)."""
        self.metrics.rpc(method)
        delay = self.faults.send_fault_delay(dest, method, msg)
        what = f"{self.role}: the acknowledgement of {dest}.{method}"
        ref = None if delay is None else self._submit(dest, method, to_wire(msg), delay)

        async def watch() -> None:
            try:
                if ref is None:  # lost in transit: noticed when the ask times out
                    await asyncio.sleep(timeout)
                    on_failure(f"{what} did not come within {timeout:.1f}s (the message was lost; {option})")
                    return
                await bounded(ref, timeout)
            except asyncio.TimeoutError:
                on_failure(f"{what} did not come within {timeout:.1f}s ({option})")
            except Exception as exc:  # noqa: BLE001 - reported to the sender, which fails
                on_failure(f"{what} failed: {type(exc).__name__}: {exc}"[:500])

        task = asyncio.get_running_loop().create_task(watch())
        self._pending_sends.add(task)
        task.add_done_callback(self._pending_sends.discard)

    async def io(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def crash(self, reason: str) -> None:
        """A real crash: the process exits at once, with every role it hosts (no clean-up, as a
        killed task manager)."""
        import os
        import sys

        print(f"{self.role}: {reason}; exiting the process", file=sys.stderr, flush=True)
        os._exit(1)


async def _after(seconds: float, deliver: Callable[[], Awaitable[Any]]) -> Any:
    """A message that arrives ``seconds`` late (the ``message.delayed`` fault): its reply."""
    await asyncio.sleep(seconds)
    return await deliver()
