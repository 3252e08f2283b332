"""P3 ``timeline-server`` (RFC-50, HUDI-6336): writers ask an embedded timeline server.

The coordinator writes the state to the DFS as in P2 and then tells the server to refresh. Writers
ask the server (one RPC) instead of reading the DFS. The server rescans the DFS on a cache miss
(at most once per wait tick, so N writers polling for the same missing message cost one scan) and
after every ``timeline_refresh_requests`` requests, so a lost refresh cannot block writers forever.
Any error on the writer side falls back to reading the DFS directly, and is counted.

RFC-50's claim, which the scaling benchmark tests: DFS requests per checkpoint stop growing with
the number of writers, because only the server touches the DFS.
"""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.core.config import JobConfig
from runtime.core.dfs import DfsError, DfsNotFound
from runtime.core.env import Env, WaitTimeout
from runtime.hudi import dfs_message_bus as bus
from runtime.hudi.table import HudiTable, TableError
from runtime.protocols.base import Protocol
from runtime.protocols.message_bus import MessageBusCoordinator, MessageBusWriter

SERVER = "timeline-server"


class TimelineServer:
    """Caches the message bus and the timeline's last pending instant for one table."""

    RPC_METHODS = ("get_ckp_message", "last_pending_instant", "refresh", "reset", "describe")

    def __init__(self, env: Env, config: JobConfig, table: HudiTable) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.path = bus.message_bus_path(table.base_path)
        self.messages: dict[int, bus.CkpMessage] = {}
        self.last_pending: str | None = None
        self.requests = 0
        self.scans = {"refresh": 0, "miss": 0, "threshold": 0, "start": 0}
        self.misses = 0
        self.last_scan = float("-inf")
        self.scan_errors: list[str] = []
        self._scan_lock = asyncio.Lock()  # one scan at a time: a slow stale scan never overwrites a fresh one

    async def start(self) -> None:
        await self._scan("start")

    async def _scan(self, why: str) -> None:
        async with self._scan_lock:
            self.scans[why] += 1
            self.last_scan = self.env.now()
            try:
                messages, pending = await self.env.io(self._scan_blocking)
            except (DfsError, TableError, bus.MessageBusError) as exc:
                self.scan_errors.append(f"{why}: {exc}"[:300])
                return
            self.messages = messages
            self.last_pending = pending

    def _scan_blocking(self) -> tuple[dict[int, bus.CkpMessage], str | None]:
        """One listing of the bus (reading only files it has not cached) and one of the timeline."""
        found: dict[int, bus.CkpMessage] = {}
        try:
            entries = self.table.dfs.list_dir(self.path)
        except DfsNotFound:
            entries = []
        for e in entries:
            stem, _, suffix = e.name.partition(".")
            if not stem.isdigit() or suffix not in ("commit", "aborted"):
                continue
            ckp = int(stem)
            cached = self.messages.get(ckp)
            if cached is not None and cached.committed == (suffix == "commit"):
                found[ckp] = cached
            elif suffix == "commit":
                found[ckp] = bus.CkpMessage.from_bytes(ckp, self.table.dfs.read_bytes(e.path), path=e.path)
            else:
                found.setdefault(ckp, bus.CkpMessage.aborted(ckp))
        return found, self.table.last_pending_instant()

    async def _count_request(self) -> None:
        self.requests += 1
        if self.requests % self.config.timeline_refresh_requests == 0:
            await self._scan("threshold")

    async def get_ckp_message(self, ckp: int) -> bus.CkpMessage | None:
        await self._count_request()
        if ckp not in self.messages:
            self.misses += 1
            if self.env.now() - self.last_scan >= self.config.wait_tick_s:
                await self._scan("miss")
        return self.messages.get(ckp)

    async def last_pending_instant(self, _msg: Any = None) -> str | None:
        await self._count_request()
        return self.last_pending

    async def refresh(self, _msg: Any = None) -> None:
        await self._scan("refresh")

    async def reset(self, _msg: Any = None) -> None:
        """Forgets the cache and rescans: the coordinator recreated the bus (a new job on the
        same table), so a cached file name may now hold another message."""
        async with self._scan_lock:
            self.messages = {}
        await self._scan("refresh")

    def describe(self, _msg: Any = None) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "scans": dict(self.scans),
            "misses": self.misses,
            "cached_messages": sorted(self.messages),
            "scan_errors": self.scan_errors[-5:],
        }


class TimelineServerWriter(MessageBusWriter):
    """P2's wait loop, with every read asked of the server first."""

    as_shipped_in_pr3915 = False
    fallbacks = 0

    async def _ask(self, method: str, arg: Any) -> Any:
        return await self.ctx.env.call(SERVER, method, arg, timeout=self.ctx.config.rpc_timeout_s)

    def _fallback(self, what: str, exc: BaseException) -> None:
        self.fallbacks += 1
        self.ctx.env.metrics.count("timeline_server_fallbacks")
        self.last_fallback = f"{what}: {type(exc).__name__}: {exc}"[:300]

    async def _message(self, ckp: int) -> bus.CkpMessage | None:
        try:
            return await self._ask("get_ckp_message", ckp)
        except (WaitTimeout, Exception) as exc:  # any error: read the DFS directly
            self._fallback("get_ckp_message", exc)
            return await super()._message(ckp)

    async def _last_pending(self) -> str | None:
        try:
            return await self._ask("last_pending_instant", None)
        except (WaitTimeout, Exception) as exc:
            self._fallback("last_pending_instant", exc)
            return await super()._last_pending()

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"fallbacks": self.fallbacks}


class TimelineServerCoordinator(MessageBusCoordinator):
    """Writes the bus as in P2, then asks the server to refresh."""

    as_shipped_in_pr3915 = False

    async def open(self) -> None:
        await super().open()  # recreates the bus directory
        await self.ctx.env.call(SERVER, "reset", None, timeout=self.ctx.config.rpc_timeout_s)

    def _refresh(self) -> None:
        self.ctx.env.send(SERVER, "refresh", None)

    async def on_instant_started(self, checkpoint_id: int, committed: str, new_instant: str) -> None:
        await super().on_instant_started(checkpoint_id, committed, new_instant)
        self._refresh()

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        await super().on_empty_round(checkpoint_id, instant)
        self._refresh()

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        await super().on_checkpoint_aborted(checkpoint_id, instant)
        self._refresh()


class TimelineServerProtocol(Protocol):
    name = "timeline-server"
    messages_on_dfs = True
    description = "P3: writers ask an embedded timeline server that caches the instant state (RFC-50)"
    writer_side = TimelineServerWriter
    coordinator_side = TimelineServerCoordinator
    extra_roles = (SERVER,)

    @classmethod
    def make_role(cls, kind, env, config, table, task_names):
        if kind != SERVER:
            return super().make_role(kind, env, config, table, task_names)
        return TimelineServer(env, config, table)
