"""One Ray actor class is one process of the job: a task manager hosting its slots' write tasks and
sources, or the process of the coordinator, the job manager or a protocol role.

The actor is async, so while a write task's mailbox coroutine is blocked the process still answers
``deliver`` (operator events, notifications queue as mails) and ``dump`` (introspection) for every
role it hosts. Each hosted role has its own environment (counters, tracer, faults) and its own
coroutines; a message between two roles of one process is delivered in the process, as Flink's
local channels do, through the same wire encoding as between processes.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.abc
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

import ray

from actors.channels import InOrder
from actors.ray_env import RayEnv
from actors.source_shard import SourceShard
from runtime.core import codec, roles
from runtime.core.codec import from_wire, to_wire
from runtime.core.config import JobConfig
from runtime.core.dfs import DfsCounters, open_dfs
from runtime.core.env import bounded, rpc_handler, wait_ended
from runtime.core.fault_spec import FaultSpec
from runtime.core.messages import TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.trace import TraceEvent
from runtime.faults.injector import COORDINATOR_DFS_FAULTS, FaultInjector, coordinator_dfs_hook
from runtime.faults.points import ArmedFaultPoints
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.job.roles import RoleNames, RoleSpec, make_role, role_kind, start_role
from runtime.lab.results import ProcessPlace

START_WAIT_S = 60.0  # how long a message waits for its role to finish starting


@dataclass(frozen=True)
class Deployment:
    """What the Ray host adds to a role's spec: whether it traces, the armed faults (encoded
    FaultSpecs, empty for none) and a source's shard."""

    trace: bool = True
    faults: bytes = b""
    shard: SourceShard | None = None


@dataclass(frozen=True)
class RoleRef:
    """Where a role lives: the process actor hosting it and its name there (a role's handle)."""

    actor: Any
    role: str

    @functools.cached_property
    def process_id(self) -> str:
        """The process actor's id: a restarted process is a new actor, so a new channel. Cached:
        every message a role sends asks for it."""
        return str(self.actor._actor_id.hex())

    def deliver(self, method: str, payload: Any, sender: str, channel: str = "", seq: int = -1) -> Any:
        return self.actor.deliver.remote(self.role, method, payload, sender, channel, seq)


class HostedRole:
    """One role inside a process: its environment, its table view, the role object once started."""

    def __init__(self, spec: RoleSpec, config: JobConfig, props: TableProps, deployment: Deployment) -> None:
        self.spec = spec
        self.kind = kind = spec.kind
        self.name = name = spec.name
        self.config = config
        self.deployment = deployment
        dfs, base = open_dfs(config.table, role=kind, counters=DfsCounters())
        self.env = RayEnv(name, dfs, seed=config.seed, trace=deployment.trace)
        self.table = HudiTable(dfs, base, props)
        if deployment.faults:
            specs: list[FaultSpec] = codec.decode(deployment.faults)
            self.env.faults = ArmedFaultPoints(FaultInjector(specs, name, dfs, base), self.env)
            if kind == roles.COORDINATOR and {s.point for s in specs} & set(COORDINATOR_DFS_FAULTS):
                # a slow DFS blocks the I/O thread doing the operation, as a slow NameNode would
                dfs.fault_hook = coordinator_dfs_hook(self.env.faults, time.sleep)
        self.role: Any = None
        self.task: asyncio.Task[Any] | None = None  # a source's emitting loop
        self.started = asyncio.Event()  # set once started: messages wait for it

    async def start(self, handles: dict[str, Any], task_names: list[str], source_names: list[str]) -> None:
        """Builds and starts the role as every host does (:mod:`runtime.job.roles`)."""
        self.env.handles = {k: v for k, v in handles.items() if k != self.name}
        spec, kind, shard = self.spec, role_kind(self.kind), self.deployment.shard
        self.role = make_role(
            spec,
            self.env,
            self.config,
            self.table,
            RoleNames(task_names, source_names),
            shard.open() if shard else None,
        )
        start = start_role(self.role, spec)
        if start is not None:
            await start
        if kind.spawns_loop:
            self.task = asyncio.get_running_loop().create_task(self.role.run())
        self.started.set()

    async def deliver(self, method: str, payload: Any, sender: str) -> Any:
        if not self.started.is_set():
            # tasks of a region are deployed together: input may reach a task still initialising
            # (as Flink buffers it in the input gate); bounded, and named when it gives up
            try:
                await bounded(self.started.wait(), START_WAIT_S)
            except asyncio.TimeoutError:
                raise RuntimeError(
                    f"{self.name} received {method} from {sender or '?'} but did not "
                    f"finish starting within {START_WAIT_S:.0f}s"
                ) from None
        if method not in getattr(self.role, "RPC_METHODS", ()):
            raise ValueError(f"{self.name} ({self.kind}) has no RPC method {method!r}")
        result = rpc_handler(self.role, method)(from_wire(payload))
        if asyncio.iscoroutine(result):
            # a task: its first step is queued now, before the next message of the sender starts
            result = await asyncio.ensure_future(result)
        return to_wire(result)


# the packages whose imports of pandas a role process refuses: the project's own, pyarrow and Ray (a
# conversion pyarrow makes runs in their frames: Cython adds none of its own)
_WITHOUT_PANDAS = frozenset(("runtime", "actors", "pyarrow", "ray"))


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import finder that says pandas is not installed when the project's code or pyarrow asks
    for it (see :func:`without_pandas`); any other module (a researcher's own protocol) gets it."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname != "pandas" and not fullname.startswith("pandas."):
            return None
        if _importer(sys._getframe(1)).partition(".")[0] in _WITHOUT_PANDAS:
            raise ModuleNotFoundError(
                f"{fullname} is not loaded for the project's code in a role process "
                "(actors.process_actor.without_pandas: no role uses pandas)",
                name=fullname,
            )
        return None


def _importer(frame: Any) -> str:
    """The module whose code asked for an import: the first frame outside the import machinery."""
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


def without_pandas() -> None:
    """Runs this process without pandas where nothing needs it. pyarrow imports pandas at its first
    conversion of any kind (``pa.array``, ``to_numpy``: its pandas shim and its C++ pandas data),
    only to recognise pandas objects, which no role holds or makes; that import costs a role
    process about 0.2 s of CPU, paid in the job's start or first round. Told pandas is absent,
    pyarrow converts the same values to the same arrays. A module outside the project (a
    protocol of one's own) still imports pandas; the driver keeps it (the verifier and Spark)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


@ray.remote(num_cpus=0, max_restarts=0)
class ProcessActor:
    def __init__(self, process: str) -> None:
        self.process = process
        without_pandas()
        self.roles: dict[str, HostedRole] = {}
        self._deployed: dict[str, asyncio.Event] = {}
        self._in_order = InOrder()

    async def ready(self) -> str:
        """Answers once the process is up (its imports done): what the host checks before the run."""
        return self.process

    def _role(self, name: str) -> HostedRole:
        try:
            return self.roles[name]
        except KeyError:
            raise LookupError(f"process {self.process} hosts no role {name!r}; it hosts {sorted(self.roles)}") from None

    async def _arrived(self, name: str) -> HostedRole:
        """The role, once deployed: an async actor runs its calls in no guaranteed order, so a
        message (or the start) may come before the deploy that was sent first; bounded."""
        if name not in self.roles:
            try:
                await bounded(self._deployed.setdefault(name, asyncio.Event()).wait(), START_WAIT_S)
            except asyncio.TimeoutError:
                raise LookupError(
                    f"process {self.process} was not given role {name!r} within {START_WAIT_S:.0f}s; "
                    f"it hosts {sorted(self.roles)}"
                ) from None
        return self.roles[name]

    async def deploy(self, spec: bytes, config: bytes, props: TableProps, deployment: Deployment) -> str:
        """A role into this process (a task into a task manager's slot): its encoded
        :class:`~runtime.job.roles.RoleSpec` and job configuration."""
        role = codec.decode(spec, RoleSpec)
        hosted = HostedRole(role, codec.decode(config, JobConfig), props, deployment)
        hosted.env.local = self.roles  # roles of one process talk in the process
        self.roles[role.name] = hosted
        self._deployed.setdefault(role.name, asyncio.Event()).set()
        return role.name

    async def start(self, name: str, handles: dict[str, Any], task_names: list[str], source_names: list[str]) -> str:
        await (await self._arrived(name)).start(handles, task_names, source_names)
        return name

    async def rebind(self, name: str, handles: dict[str, Any]) -> str:
        """New handles for roles that restarted around this one (a region failover)."""
        self._role(name).env.handles = {k: v for k, v in handles.items() if k != name}
        return name

    async def deliver(
        self, name: str, method: str, payload: Any, sender: str = "", channel: str = "", seq: int = -1
    ) -> Any:
        """A message for role ``name``. One numbered by its sender (``channel``, ``seq``) starts
        after the sender's earlier messages to this process (:mod:`actors.channels`)."""
        if not channel:  # the driver's calls: not numbered, each awaited before the next
            return await self._deliver(name, method, payload, sender)
        return await self._in_order.run(channel, seq, lambda: self._deliver(name, method, payload, sender))

    async def _deliver(self, name: str, method: str, payload: Any, sender: str) -> Any:
        return await (await self._arrived(name)).deliver(method, payload, sender)

    async def run(self, name: str) -> Any:
        """The job manager's main loop; its final view, on the wire."""
        hosted = await self._arrived(name)
        await bounded(hosted.started.wait(), START_WAIT_S)  # the host starts it first
        return to_wire(await hosted.role.run())

    async def dump(self, name: str) -> Any:
        """A write task's introspection (:class:`~runtime.core.messages.TaskDump`), on the wire."""
        hosted = self._role(name)
        if hosted.role is None or not hasattr(hosted.role, "dump"):
            return to_wire(TaskDump(name, "not started" if hosted.role is None else "no introspection"))
        return to_wire(hosted.role.dump())

    async def describe(self, name: str) -> Any:
        """The coordinator's or the job manager's view of itself, on the wire; None for a role
        not started or without one."""
        role = self._role(name).role
        if role is None or not hasattr(role, "describe"):
            return None
        return to_wire(role.describe())

    async def stacks(self) -> dict[str, list[str]]:
        """Where each of this process's project coroutines is suspended now, outermost frame first
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

    async def metrics(self, name: str) -> MetricsSnapshot:
        env = self._role(name).env
        return env.metrics.snapshot(env.dfs.counters, env.send_errors)

    async def trace_events(self, name: str) -> list[TraceEvent]:
        return self._role(name).env.tracer.drain()

    async def source_done(self, name: str, timeout: float) -> str:
        """Waits (bounded) for a source's loop to end; returns its state."""
        hosted = self._role(name)
        if hosted.task is not None:
            await wait_ended(hosted.task, timeout)  # its outcome is in the role's state
        return hosted.role.state if hosted.role is not None else "not started"

    async def where(self) -> ProcessPlace:
        """The node and process, the roles it hosts and its memory (RSS; USS when readable)."""
        import psutil

        proc = psutil.Process(os.getpid())
        mem = proc.memory_info()
        try:
            uss = proc.memory_full_info().uss
        except (psutil.Error, AttributeError):
            uss = None
        return ProcessPlace(
            process=self.process,
            roles=sorted(self.roles),
            node_id=ray.get_runtime_context().get_node_id(),
            host=socket.gethostname(),
            pid=os.getpid(),
            rss_bytes=mem.rss,
            uss_bytes=uss,
            # Ray started a sender's later message first this often; the channels put it back in order
            messages_held_for_order=self._in_order.held,
            order_gaps=self._in_order.gaps,
        )

    def end(self) -> None:
        """Ends this process at once, with every role it hosts: the driver lost the Ray cluster's
        head, so ``ray.kill`` (a request to the GCS) does nothing, while a call straight to the
        process still arrives; no role here may go on (commit) under the run's record. The call
        never answers: the caller sees the actor die."""
        os._exit(1)
