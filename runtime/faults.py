"""Fault injection: named points in the role code, armed from the command line or a scenario.

A point fires at most ``times`` times per job, across restarts: before a point fires, a marker is
created on the DFS (``.hoodie/.aux/commitlab/faults``), so a task that crashed and restarted does
not crash again at the same place. Every firing is recorded (time, point, role, checkpoint).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from runtime import codec
from runtime.dfs import Dfs, DfsError


class InjectedCrash(RuntimeError):
    """A fault point crashed the role (the process exits when the host can make it)."""


class InjectedDfsError(DfsError):
    """A transient DFS error injected at a fault point."""


# id -> what happens there. Ids are stable: scenarios and results refer to them.
FAULT_POINTS: dict[str, str] = {
    "task.before_flush": "a write task crashes just before a flush writes its base file",
    "task.after_flush_before_event": "a write task crashes after a flush, before its WriteMetadataEvent",
    "task.in_snapshot": "a write task crashes inside the barrier snapshot, after flushing, before acking",
    "task.after_checkpoint_before_commit": "a write task crashes after acking a checkpoint, before its commit",
    "coordinator.before_commit_file": "the coordinator crashes before writing the commit file",
    "coordinator.after_commit_before_next_instant": "the coordinator crashes after the commit, before the next instant",
    "checkpoint.abort": "the job manager aborts a checkpoint",
    "checkpoint.timeout": "a write task acks a checkpoint too late: it times out",
    "checkpoint.notification_lost": "the checkpoint-complete notification never reaches the coordinator",
    "dfs.transient_error": "the coordinator's first DFS write or create after the checkpoint's trigger fails",
    "dfs.latency": "the coordinator's DFS operations each take `param` s longer (default 0.2) for 5 s",
    "bus.deleted": "the message-bus directory is deleted while the job runs (#8060; P2, P3)",
    "bus.deleted_between_restarts": "a write task crashes and the message-bus directory is deleted "
                                    "before the job restarts (#8060, #8120; P2, P3)",
    "message.dropped": "one message to `target` is lost in transit (a request: the caller times out)",
    "message.delayed": "one message to `target` arrives `param` s late (default 2)",
    "tasks.fail_at_instant_start": "every write task fails over at once while the coordinator "
                                   "starts a new instant (HUDI-6194); `param`: seconds the last "
                                   "task takes to come back",
}

# the message a messaging fault hits when the spec names none: the task's write metadata event
DEFAULT_MESSAGE_TARGET = "write_metadata"
MESSAGE_FAULTS = ("message.dropped", "message.delayed")
DEFAULT_PARAM = {"dfs.latency": 0.2, "message.delayed": 2.0}
DFS_LATENCY_WINDOW_S = 5.0


@codec.message
@dataclass
class FaultSpec:
    point: str
    checkpoint: int = -1  # fire at this checkpoint id (-1: the first time the point is reached)
    task: int = -1  # only in this write task (-1: any)
    times: int = 1
    param: float = 0.0  # e.g. the delay of a timeout fault, in seconds
    target: str = ""  # the RPC method a messaging fault hits (e.g. write_metadata, operator_event)

    def key(self) -> str:
        return f"{self.point}@{self.checkpoint}#{self.task}" + (f":{self.target}" if self.target else "")

    @property
    def value(self) -> float:
        """``param``, or the point's default when unset."""
        return self.param or DEFAULT_PARAM.get(self.point, 0.0)

    def text(self) -> str:
        """The ``--faults`` spelling of this spec (``parse_faults`` reads it back)."""
        out = self.point + (f":{self.target}" if self.target else "")
        out += (f"@{self.checkpoint}" if self.checkpoint >= 0 else "") + (f"#{self.task}" if self.task >= 0 else "")
        return out + (f"={self.param:g}" if self.param else "")


_SPEC = re.compile(r"^(?P<point>[a-z_.]+)(?::(?P<target>\w+))?(?:@(?P<ckp>\d+))?(?:#(?P<task>\d+))?"
                   r"(?:=(?P<param>\d+(?:\.\d*)?))?$")


def parse_faults(text: str) -> list[FaultSpec]:
    """``point[:target][@checkpoint][#task][=param]`` items, comma-separated:
    ``task.in_snapshot@2#0``, ``message.dropped:operator_event@3``, ``dfs.latency=0.5``."""
    specs = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        m = _SPEC.match(item)
        if m is None:
            raise ValueError(f"cannot read fault {item!r}: write point[:target][@checkpoint][#task][=param], "
                             "e.g. task.in_snapshot@2#0 or message.delayed:write_metadata@2=1.5")
        point = m["point"]
        if point not in FAULT_POINTS:
            raise ValueError(f"unknown fault point {point!r}; known: {', '.join(FAULT_POINTS)}")
        if m["target"] and point not in MESSAGE_FAULTS:
            raise ValueError(f"{item!r}: only {' and '.join(MESSAGE_FAULTS)} take a :target")
        specs.append(FaultSpec(point, int(m["ckp"]) if m["ckp"] else -1, int(m["task"]) if m["task"] else -1,
                               param=float(m["param"]) if m["param"] else 0.0, target=m["target"] or ""))
    return specs


def faults_path(table_base: str) -> str:
    return Dfs.join(table_base, ".hoodie", ".aux", "commitlab", "faults")


class FaultInjector:
    """The armed faults of one role. ``hit`` returns the spec when the point fires."""

    def __init__(self, specs: list[FaultSpec], role: str, dfs: Dfs | None, table_base: str) -> None:
        self.specs = list(specs)
        self.role = role
        # markers must not count as protocol traffic: a private, uncounted view of the file system
        self.dfs = Dfs(dfs.fs, role="faults") if dfs is not None else None
        self.path = faults_path(table_base)
        self.fired: list[dict[str, Any]] = []
        self._spent: set[str] = set()  # specs whose every firing is taken: no more marker checks

    def armed(self, point: str) -> bool:
        return any(s.point == point for s in self.specs)

    def hit(self, point: str, *, checkpoint: int = -1, task: int = -1, target: str = "",
            strict: bool = False) -> FaultSpec | None:
        """The spec of ``point`` that fires now, if any. An unknown checkpoint or task (-1) matches
        any, unless ``strict``: then a spec naming one fires only there (a message without a
        checkpoint id must not take a fault meant for checkpoint 3)."""
        for spec in self.specs:
            if spec.point != point or spec.key() in self._spent:
                continue
            if target and (spec.target or DEFAULT_MESSAGE_TARGET) != target:
                continue
            if spec.checkpoint >= 0 and (checkpoint >= 0 or strict) and spec.checkpoint != checkpoint:
                continue
            if spec.task >= 0 and (task >= 0 or strict) and spec.task != task:
                continue
            if not self._claim(spec):
                continue
            self.fired.append({"point": point, "role": self.role, "checkpoint": checkpoint,
                               "task": task, "at": time.time(), **({"target": target} if target else {})})
            return spec
        return None

    def has_fired(self, spec: FaultSpec) -> bool:
        """Whether ``spec`` fired in this job, in any role or earlier attempt (its first marker)."""
        if self.dfs is None:
            return any(f["point"] == spec.point for f in self.fired)
        return self.dfs.fs.get_file_info(Dfs.join(self.path, f"{spec.key()}.0")).type.name != "NotFound"

    def _claim(self, spec: FaultSpec) -> bool:
        """Atomically takes one of the spec's firings (a marker file per firing)."""
        if self.dfs is None:
            return True
        for n in range(spec.times):
            marker = Dfs.join(self.path, f"{spec.key()}.{n}")
            try:
                self.dfs.fs.create_dir(self.path, recursive=True)
                if self.dfs.fs.get_file_info(marker).type.name != "NotFound":
                    continue
                with self.dfs.fs.open_output_stream(marker) as f:
                    f.write(f"{self.role} {os.getpid()}".encode())
                return True
            except OSError:
                return False
        self._spent.add(spec.key())
        return False


COORDINATOR_DFS_FAULTS = ("dfs.transient_error", "dfs.latency")


def coordinator_dfs_hook(env: Any, wait: Callable[[float], None]) -> Callable[[str, str, str], None]:
    """The coordinator's DFS fault hook, the same on every host: inside a ``dfs.latency`` window
    each operation is slower by the window's latency (``wait(seconds)`` is how the host spends it:
    a sleep in the I/O thread on Ray, virtual time in the simulator), and once
    ``dfs.transient_error`` fired (at its checkpoint's trigger) the next write or create fails."""

    def hook(role: str, op: str, path: str) -> None:
        delay = env.dfs_delay()
        if delay:
            wait(delay)
        if op in ("write", "create") and env.dfs_fail_next:
            env.dfs_fail_next = False
            raise InjectedDfsError(f"injected transient DFS error on {op} {path}")

    return hook


def crash(role: str, point: str) -> None:
    """Ends the role: raises InjectedCrash (the host turns it into a process exit)."""
    raise InjectedCrash(f"{role}: injected crash at {point}")
