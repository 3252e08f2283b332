"""P4 ``coordination-rpc`` (HUDI-9381, Hudi 1.1, PR #13285) and its async fix (PR #19960).

A writer asks the coordinator directly: ``InstantTimeRequest(ckp)`` -> instant. The reply comes
back on the RPC's future, not through the mailbox, so a task blocked waiting for it cannot be
waiting on its own mailbox. One checkpoint id maps to one instant, created once, on request. On
``notify_checkpoint_complete(n)`` the coordinator commits every instant whose key is below ``n``
in ascending order; an abort does nothing, and the next success commits the backlog.

``sync`` (Hudi 1.1) creates the instant inside the request, under the table lock: if a cleaning
action holds the lock longer than the RPC timeout, the request fails and the job restarts
(#19902). ``async`` replies PENDING at once and creates the instant in the background; the writer
polls with backoff (50 ms doubling to 1 s, with jitter) under one deadline.

The request key follows the message bus's rule: data written after barrier k-1 (eager flushes and
the flush at barrier k) goes to the instant of key k-1, i.e. ``max(0, ckp if eager else ckp - 1)``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from runtime.core import codec
from runtime.core.env import BlockedWait, WaitTimeout
from runtime.protocols.base import CoordinatorSide, InstantWaitTimeout, Protocol, WriterSide

OK, PENDING = "OK", "PENDING"
BACKOFF_START_S, BACKOFF_MAX_S = 0.05, 1.0


@codec.message
@dataclass
class InstantTimeRequest:
    task_id: int
    checkpoint_id: int


@codec.message
@dataclass
class InstantTimeReply:
    checkpoint_id: int
    status: str
    instant: str = ""


class CoordinationRpcWriter(WriterSide):
    mode = "sync"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.instants: dict[int, str] = {}  # checkpoint key -> instant (one per checkpoint)
        self.requests = 0
        self.pending_replies = 0

    def request_key(self, eager: bool) -> int:
        ckp = self.ctx.last_checkpoint_id
        return max(0, ckp if eager else ckp - 1)

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        key = self.request_key(eager)
        if key in self.instants:
            return self.instants[key]
        env = self.ctx.env
        started = env.now()
        self.ctx.set_blocked(
            BlockedWait(
                what="instant request",
                waiting_on=f"the coordinator's reply to InstantTimeRequest(ckp={key}) (an RPC future, not a mail)",
                since=started,
                releasing_mail=None,
                checkpoint_id=key,
            )
        )
        try:
            instant = await (self._request_sync(key) if self.mode == "sync" else self._request_async(key))
        finally:
            self.ctx.set_blocked(None)
        env.metrics.sample("instant_request_s", env.now() - started)
        self.instants = {k: v for k, v in self.instants.items() if k >= key - 2}
        self.instants[key] = instant
        return instant

    async def _ask(self, key: int) -> InstantTimeReply:
        self.requests += 1
        return await self.ctx.env.call(
            "coordinator",
            "instant_time_request",
            InstantTimeRequest(self.ctx.task_id, key),
            timeout=self.ctx.config.rpc_timeout_s,
        )

    async def _request_sync(self, key: int) -> str:
        try:
            reply = await self._ask(key)
        except WaitTimeout as exc:
            raise InstantWaitTimeout(
                f"{self.ctx.env.role}: InstantTimeRequest(ckp={key}) timed out after "
                f"{self.ctx.config.rpc_timeout_s:.1f}s with no reply: the coordinator creates the "
                "instant inside the request, under the table lock, so a lock held longer than the "
                "RPC timeout (Hudi #19902), like a lost request, ends here; the task fails and the "
                f"job restarts ({exc})"
            ) from exc
        return reply.instant

    async def _request_async(self, key: int) -> str:
        env, cfg = self.ctx.env, self.ctx.config
        deadline = env.now() + cfg.instant_wait_timeout
        backoff = BACKOFF_START_S
        while True:
            reply = await self._ask(key)
            if reply.status == OK:
                return reply.instant
            self.pending_replies += 1
            remaining = deadline - env.now()
            if remaining <= 0:
                raise InstantWaitTimeout(
                    f"{env.role}: the instant of checkpoint {key} was still PENDING after "
                    f"{cfg.instant_wait_timeout:.1f}s of polling"
                )
            # jitter keeps writers from polling in step; the last sleep ends at the deadline,
            # where one more poll is made
            await env.sleep(min(remaining, backoff * (0.5 + env.rng.random())))
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "requests": self.requests,
            "pending_replies": self.pending_replies,
            "instants": dict(self.instants),
        }


class CoordinationRpcCoordinator(CoordinatorSide):
    RPC_METHODS = ("instant_time_request",)
    eager_instants = False
    mode = "sync"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.instants: dict[int, str] = {}  # checkpoint key -> instant, pending commit
        self.creating: dict[int, asyncio.Task] = {}
        self.created = 0
        self.failures: list[str] = []
        self.epoch = 0  # bumped by a region failover

    async def _create(self, key: int) -> str:
        epoch = self.epoch
        try:
            instant = await self.ctx.create_instant(key)  # takes the table lock
        except Exception as exc:
            # forget the attempt so the next request tries again, and say why this one failed
            self.creating.pop(key, None)
            self.failures.append(f"checkpoint {key}: {type(exc).__name__}: {exc}"[:300])
            self.ctx.env.metrics.count("instant_creation_failures")
            raise
        if epoch != self.epoch:
            return instant  # created across a region failover: rolled back, never handed out again
        self.instants[key] = instant
        self.ctx.release(instant)
        self.created += 1
        self.creating.pop(key, None)
        return instant

    def _creation(self, key: int) -> asyncio.Task:
        task = self.creating.get(key)
        if task is None:
            task = self.ctx.env.spawn(self._create(key), f"create-instant-{key}")
            self.creating[key] = task
        return task

    async def instant_time_request(self, req: InstantTimeRequest) -> InstantTimeReply:
        key = req.checkpoint_id
        if key in self.instants:
            return InstantTimeReply(key, OK, self.instants[key])
        task = self._creation(key)  # one checkpoint id, one instant, created once
        if self.mode == "async":
            if task.done() and task.exception() is not None:
                self.creating.pop(key, None)
            return InstantTimeReply(key, PENDING)
        instant = await asyncio.shield(task)
        return InstantTimeReply(key, OK, instant)

    async def on_checkpoint_complete(self, checkpoint_id: int) -> dict[str, Any]:
        committed = []
        for key in sorted(k for k in self.instants if k < checkpoint_id):
            instant = self.instants.pop(key)
            rec = await self.ctx.commit_instant(instant, checkpoint_id)
            if rec is not None:
                committed.append(instant)
            else:  # requested at a barrier without data: nothing to commit, take it off the timeline
                await self.ctx.env.io(self.ctx.table.rollback, instant, [])
        if not committed:
            self.ctx.empty_rounds.append(checkpoint_id)
        return {"committed": bool(committed), "instants": committed}

    async def on_tasks_reset(self) -> None:
        # the pending instants are rolled back at re-initialisation: new requests get new ones;
        # a creation still running belongs to the old epoch and is not recorded
        self.epoch += 1
        self.creating.clear()
        self.instants.clear()

    def describe(self) -> dict[str, Any]:
        return {"pending": dict(self.instants), "created": self.created, "failures": self.failures[-5:]}


class CoordinationRpcProtocol(Protocol):
    name = "coordination-rpc"
    description = "P4: writers ask the coordinator by RPC; the instant is created in the request (Hudi 1.1)"
    writer_side = CoordinationRpcWriter
    coordinator_side = CoordinationRpcCoordinator


class AsyncCoordinationRpcWriter(CoordinationRpcWriter):
    mode = "async"


class AsyncCoordinationRpcCoordinator(CoordinationRpcCoordinator):
    mode = "async"


class AsyncCoordinationRpcProtocol(Protocol):
    name = "coordination-rpc-async"
    description = (
        "P4 with PR #19960: the coordinator replies PENDING and creates the instant in "
        "the background; writers poll with backoff"
    )
    writer_side = AsyncCoordinationRpcWriter
    coordinator_side = AsyncCoordinationRpcCoordinator
