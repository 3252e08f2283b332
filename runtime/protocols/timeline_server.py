"""P3 ``timeline-server`` (RFC-50, HUDI-6336, PR #9651): ckp-meta read through the timeline server.

Hudi 0.14.1 to 1.0:

- ``sink/meta/TimelineBasedCkpMetadata extends CkpMetadata``: the coordinator writes the same
  ckp_meta files (:mod:`runtime.protocols.ckp_meta`), and after each ``startInstant``,
  ``commitInstant`` and ``abortInstant`` POSTs ``/v1/hoodie/instantstate/refresh/`` for the
  directory; a failed refresh is logged, not raised ("the server will also do auto refresh").
  Writers' ``fetchCkpMessages`` GETs ``/v1/hoodie/instantstate/all`` for the directory and, on
  ANY error, reads the directory on the DFS instead. Requests go through
  ``HttpRequestClient.executeRequestWithRetry``: up to
  ``hoodie.filesystem.view.remote.retry.max_numbers`` (3) attempts, each bounded by the remote
  timeout (here ``rpc_timeout_s``). The writers' wait loop is ckp-meta's (P1's).
- ``timeline/service/handlers/InstantStateHandler``: instant states cached per directory path;
  ``getAllInstantStates`` counts the request and, once ``requestCount >=
  instantStateForceRefreshRequestNumber`` (100), refreshes that path first; a path not cached
  yet is scanned (``computeIfAbsent``); a cached path is served as it is, whatever the writer is
  waiting for: the server never rescans on a miss. ``refresh(path)`` rescans and resets the
  request count (a failed scan returns false and keeps the old cache). A scan is one ``exists``
  and one listing (HUDI-5915); one DTO per file.
- The server is embedded in the coordinator's write client: the coordinator's (re)start resets it
  (an empty cache), modelled by a ``reset`` call from the coordinator's ``open``.

RFC-50's claim, which the scaling benchmark tests: DFS requests per checkpoint stop growing with
the number of writers, because only the server lists the directory.
"""

from __future__ import annotations

from typing import Any

from runtime.core.config import JobConfig
from runtime.core.dfs import DfsError, DfsNotFound
from runtime.core.env import Env, WaitTimeout
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.ckp_meta import CkpMessage, CkpMetaError, last_pending_instant, reduce_messages
from runtime.protocols.base import CoordinatorContext, WriterContext
from runtime.protocols.ckp_meta import CkpMetaCoordinator, CkpMetaProtocol, CkpMetaWriter

SERVER = "timeline-server"
# FileSystemViewStorageConfig REMOTE_MAX_RETRY_NUMBERS default (HttpRequestClient's attempts)
REMOTE_MAX_RETRY = 3


class TimelineServer:
    """``InstantStateHandler``: the instant states of each ckp_meta path, cached."""

    RPC_METHODS = ("get_all_instant_states", "refresh", "reset", "describe")

    def __init__(self, env: Env, config: JobConfig, table: HudiTable) -> None:
        self.env = env
        self.config = config
        self.table = table
        self.cache: dict[str, list[str]] = {}  # path -> file names (one InstantStateDTO each)
        self.request_count = 0  # GETs since the last successful refresh (AtomicLong requestCount)
        self.requests = 0  # GETs in all
        self.refreshes = 0  # POSTs
        self.scans = {"first": 0, "refresh": 0, "threshold": 0}
        self.refresh_failures: list[str] = []

    async def get_all_instant_states(self, path: str) -> list[str]:
        self.requests += 1
        self.request_count += 1
        if self.request_count >= self.config.timeline_refresh_requests:
            # "Do refresh for every N requests to ensure the writers won't be blocked forever"
            await self._refresh(path, "threshold")
        if path not in self.cache:
            self.cache[path] = await self._scan(path, "first")  # an error reaches the writer
        return list(self.cache[path])

    async def refresh(self, path: str) -> bool:
        self.refreshes += 1
        return await self._refresh(path, "refresh")

    async def reset(self, _msg: Any = None) -> None:
        """The coordinator (re)started, and with it its embedded server: an empty cache."""
        self.cache = {}
        self.request_count = 0

    async def _refresh(self, path: str, why: str) -> bool:
        try:
            self.cache[path] = await self._scan(path, why)
        except DfsError as exc:  # Hudi: "Failed to load instant states", returns false
            self.refresh_failures.append(f"{why}: {exc}"[:300])
            del self.refresh_failures[:-20]
            return False
        self.request_count = 0
        return True

    async def _scan(self, path: str, why: str) -> list[str]:
        self.scans[why] += 1
        return await self.env.io(self._scan_blocking, path)

    def _scan_blocking(self, path: str) -> list[str]:
        if not self.table.dfs.exists(path):  # HUDI-5915
            return []
        try:
            return sorted(e.name for e in self.table.dfs.list_dir(path) if not e.is_dir)
        except DfsNotFound:
            return []

    def describe(self, _msg: Any = None) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "refreshes": self.refreshes,
            "request_count": self.request_count,
            "scans": dict(self.scans),
            "cached_paths": sorted(self.cache),
            "refresh_failures": self.refresh_failures[-5:],
        }


async def request_with_retry(env: Env, method: str, arg: Any, timeout_s: float) -> Any:
    """``HttpRequestClient.executeRequestWithRetry``: REMOTE_MAX_RETRY attempts, then fail."""
    errors: list[str] = []
    for _ in range(REMOTE_MAX_RETRY):
        try:
            return await env.call(SERVER, method, arg, timeout=timeout_s)
        except (WaitTimeout, Exception) as exc:  # noqa: BLE001 - any failure of an attempt is retried, as Hudi's
            errors.append(f"{type(exc).__name__}: {exc}")
    raise TimelineServerError(f"Failed to execute timeline server request ({method}): " + " | ".join(errors)[:400])


class TimelineServerError(RuntimeError):
    """Every attempt of a request to the timeline server failed (Hudi: HoodieException)."""


class TimelineServerWriter(CkpMetaWriter):
    """ckp-meta's wait loop; each poll asks the server, and reads the DFS on any error."""

    instant_source = "a new INFLIGHT instant in ckp_meta, asked of the timeline server"

    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.fallbacks = 0
        self.last_fallback = ""

    async def fetch_messages(self) -> list[CkpMessage]:
        env = self.ctx.env
        try:
            names = await request_with_retry(
                env, "get_all_instant_states", self.ckp_meta.path, self.ctx.config.rpc_timeout_s
            )
            return [CkpMessage.parse(n) for n in names]
        except (TimelineServerError, CkpMetaError) as exc:
            # "Failed to execute scan ckp metadata, fall back to read from file system..."
            self.fallbacks += 1
            env.metrics.count("timeline_server_fallbacks")
            self.last_fallback = f"{type(exc).__name__}: {exc}"[:300]
            return await env.io(self.ckp_meta.fetch_messages)

    async def last_pending_instant(self) -> str | None:
        return last_pending_instant(reduce_messages(await self.fetch_messages()))

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"fallbacks": self.fallbacks}


class TimelineServerCoordinator(CkpMetaCoordinator):
    """Writes ckp_meta as ckp-meta does, then POSTs a refresh for the directory."""

    def __init__(self, ctx: CoordinatorContext) -> None:
        super().__init__(ctx)
        self.refresh_failures = 0

    async def open(self) -> None:
        await super().open()  # CkpMetadata.bootstrap: no refresh (as Hudi)
        try:
            await self.ctx.env.call(SERVER, "reset", None, timeout=self.ctx.config.rpc_timeout_s)
        except (WaitTimeout, Exception) as exc:  # noqa: BLE001 - recorded; the server rescans on its own
            self._refresh_failed("reset", exc)

    async def _refresh(self) -> None:
        try:
            ok = await request_with_retry(self.ctx.env, "refresh", self.ckp_meta.path, self.ctx.config.rpc_timeout_s)
        except TimelineServerError as exc:  # "Do not propagate: the server will also auto refresh"
            self._refresh_failed("refresh", exc)
            return
        if not ok:
            self._refresh_failed("refresh", RuntimeError("Timeline server responses with failed refresh"))

    def _refresh_failed(self, what: str, exc: BaseException) -> None:
        self.refresh_failures += 1
        self.ctx.env.metrics.count("timeline_server_refresh_failures")
        self.ctx.env.tracer.instant(f"{what} failed: {type(exc).__name__}: {exc}"[:200], thread="coordinator")

    async def on_instant_started(self, checkpoint_id: int, committed: str, new_instant: str) -> None:
        if committed:
            await self.ctx.env.io(self.ckp_meta.commit_instant, committed)
            await self._refresh()
        await self.ctx.env.io(self.ckp_meta.start_instant, new_instant)
        self.instant_started = True
        await self._refresh()

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        written = self.aborts_written
        await super().on_checkpoint_aborted(checkpoint_id, instant)
        if self.aborts_written > written:
            await self._refresh()

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"refresh_failures": self.refresh_failures}


class TimelineServerProtocol(CkpMetaProtocol):
    name = "timeline-server"
    description = "P3: ckp_meta read through the timeline server's instant-state cache (HUDI-6336)"
    writer_side = TimelineServerWriter
    coordinator_side = TimelineServerCoordinator
    extra_roles = (SERVER,)
    extra_rpc_methods = TimelineServer.RPC_METHODS

    @classmethod
    def make_role(cls, kind: str, env: Env, config: JobConfig, table: HudiTable, task_names: list[str]) -> Any:
        if kind != SERVER:
            return super().make_role(kind, env, config, table, task_names)
        return TimelineServer(env, config, table)
