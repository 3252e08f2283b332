"""One Ray actor class hosts any role: it gives the role a process, a name and an RPC face.

The actor is async, so while a write task's mailbox coroutine is blocked the actor still answers
``deliver`` (operator events, notifications queue as mails) and ``dump`` (introspection).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from actors.ray_env import RayEnv
from actors.stream_plan import StreamShardRounds
from runtime.core import codec
from runtime.core.codec import from_wire, to_wire
from runtime.core.config import JobConfig
from runtime.core.dfs import DfsCounters, open_dfs
from runtime.core.env import bounded, rpc_handler, wait_ended
from runtime.core.fault_spec import FaultSpec
from runtime.core.messages import TaskDump
from runtime.faults.injector import COORDINATOR_DFS_FAULTS, FaultInjector, coordinator_dfs_hook
from runtime.flink.source import InMemoryShard
from runtime.hudi.table import HudiTable, TableProps
from runtime.writer.topology import RoleNames, RoleSpec, make_role, start_role

START_WAIT_S = 60.0  # how long a message waits for its role to finish starting
# what the Ray host adds to a role's arguments: tracing, armed faults, the source's shard
TRANSPORT_ARGS = ("trace", "faults", "stream_shard", "bounds", "rounds")


@ray.remote(num_cpus=0, max_restarts=0)
class RoleActor:
    def __init__(
        self, kind: str, name: str, config: bytes, props: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> None:
        self.kind = kind
        self.name = name
        self.config: JobConfig = codec.decode(config, JobConfig)
        self.extra = extra or {}
        counters = DfsCounters()
        dfs, base = open_dfs(self.config.table, role=kind, counters=counters)
        self.env = RayEnv(name, dfs, seed=self.config.seed, trace=self.extra.get("trace", True))
        self.table = HudiTable(dfs, base, TableProps(**props))
        if self.extra.get("faults"):
            specs: list[FaultSpec] = codec.decode(self.extra["faults"])
            self.env.faults = FaultInjector(specs, name, dfs, base)
            if kind == "coordinator" and {s.point for s in specs} & set(COORDINATOR_DFS_FAULTS):
                # a slow DFS blocks the I/O thread doing the operation, as a slow NameNode would
                dfs.fault_hook = coordinator_dfs_hook(self.env, time.sleep)
        self.role: Any = None
        self._task: asyncio.Task[Any] | None = None
        self._started = asyncio.Event()  # set once start() returned: messages wait for it

    async def start(self, handles: dict[str, Any], task_names: list[str], source_names: list[str]) -> str:
        """Builds and starts the role as every host does (:mod:`runtime.writer.topology`)."""
        self.env.handles = {k: v for k, v in handles.items() if k != self.name}
        args = {k: v for k, v in self.extra.items() if k not in TRANSPORT_ARGS}
        spec = RoleSpec(self.name, self.kind, args)
        shard: StreamShardRounds | InMemoryShard | None = None
        if self.kind == "source":
            if "stream_shard" in self.extra:
                shard = StreamShardRounds(self.extra["stream_shard"], self.extra["bounds"])
            else:
                shard = InMemoryShard(self.extra["rounds"])
        self.role = make_role(spec, self.env, self.config, self.table, RoleNames(task_names, source_names), shard)
        await start_role(self.role, spec)
        if self.kind == "source":
            self._task = asyncio.get_running_loop().create_task(self.role.run())
        self._started.set()
        return self.name

    async def rebind(self, handles: dict[str, Any]) -> str:
        """New handles for roles that restarted around this one (a region failover)."""
        self.env.handles = {k: v for k, v in handles.items() if k != self.name}
        return self.name

    async def deliver(self, method: str, payload: Any, sender: str = "") -> Any:
        if not self._started.is_set():
            # tasks of a region are deployed together: input may reach a task still initialising
            # (as Flink buffers it in the input gate); bounded, and named when it gives up
            try:
                await bounded(self._started.wait(), START_WAIT_S)
            except asyncio.TimeoutError:
                raise RuntimeError(
                    f"{self.name} received {method} from {sender or '?'} but did not "
                    f"finish starting within {START_WAIT_S:.0f}s"
                ) from None
        if method not in getattr(self.role, "RPC_METHODS", ()):
            raise ValueError(f"{self.name} ({self.kind}) has no RPC method {method!r}")
        result = rpc_handler(self.role, method)(from_wire(payload))
        if asyncio.iscoroutine(result):
            result = await result
        return to_wire(result)

    async def run(self) -> Any:
        """The job manager's main loop (only for kind job-manager); its final view, on the wire."""
        return to_wire(await self.role.run())

    async def dump(self) -> Any:
        """A write task's introspection (:class:`~runtime.core.messages.TaskDump`), on the wire."""
        if self.role is None or not hasattr(self.role, "dump"):
            return to_wire(TaskDump(self.name, "not started" if self.role is None else "no introspection"))
        return to_wire(self.role.dump())

    async def describe(self) -> Any:
        """The coordinator's or the job manager's view of itself, on the wire; None for a role
        not started or without one."""
        if self.role is None or not hasattr(self.role, "describe"):
            return None
        return to_wire(self.role.describe())

    async def stacks(self) -> dict[str, list[str]]:
        """Where each of this actor's project coroutines is suspended now, outermost frame first
        and down the chain of awaits: what a timed-out job reports, so a hang names the await it
        is stuck in and the task state ("cancelling" for a cancellation that did not land)."""
        out: dict[str, list[str]] = {}
        for task in asyncio.all_tasks():
            frames: list[str] = []
            coro: Any = task.get_coro()  # a coroutine, or a generator-based one: walked by duck typing
            while coro is not None and getattr(coro, "cr_frame", None) is not None:
                code = coro.cr_frame.f_code
                where = "/".join(code.co_filename.rsplit("/", 2)[-2:])
                frames.append(f"{where}:{coro.cr_frame.f_lineno} {code.co_name}")
                coro = coro.cr_await
            if any(fr.startswith(("runtime/", "protocols/", "sim/", "actors/")) for fr in frames):
                state = "cancelling" if getattr(task, "cancelling", lambda: 0)() else "pending"
                out[f"{task.get_name()} ({state}, {id(task):x})"] = frames
        return out

    async def metrics(self) -> dict[str, Any]:
        snap = self.env.metrics.snapshot()
        snap["dfs_ops"] = self.env.dfs.counters.snapshot()
        snap["send_errors"] = list(self.env.send_errors)
        return snap

    async def trace_events(self) -> list[dict[str, Any]]:
        return self.env.tracer.drain()

    async def source_done(self, timeout: float) -> str:
        """Waits (bounded) for a source's loop to end; returns its state."""
        if self._task is not None:
            await wait_ended(self._task, timeout)  # its outcome is in the role's state
        return self.role.state if self.role is not None else "not started"

    async def where(self) -> dict[str, Any]:
        """The node and process this role runs in, and its memory (RSS; USS when readable)."""
        import os
        import socket

        import psutil

        proc = psutil.Process(os.getpid())
        mem = proc.memory_info()
        try:
            uss = proc.memory_full_info().uss
        except (psutil.Error, AttributeError):
            uss = None
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "rss_bytes": mem.rss,
            "uss_bytes": uss,
        }
