"""Fault injection: named points in the role code, armed from the command line or a scenario.

A point fires at most ``times`` times per job, across restarts: before a point fires, a marker is
created on the DFS (``.hoodie/.aux/commitlab/faults``), so a task that crashed and restarted does
not crash again at the same place. Every firing is recorded (time, point, role, checkpoint).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

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
    "dfs.transient_error": "one DFS operation of the coordinator fails once",
}


@codec.message
@dataclass
class FaultSpec:
    point: str
    checkpoint: int = -1  # fire at this checkpoint id (-1: the first time the point is reached)
    task: int = -1  # only in this write task (-1: any)
    times: int = 1
    param: float = 0.0  # e.g. the delay of a timeout fault, in seconds

    def key(self) -> str:
        return f"{self.point}@{self.checkpoint}#{self.task}"


def parse_faults(text: str) -> list[FaultSpec]:
    """``point[@checkpoint][#task]`` items, comma-separated: ``task.in_snapshot@2#0``."""
    specs = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        point, ckp, task = item, -1, -1
        if "#" in point:
            point, t = point.split("#", 1)
            task = int(t)
        if "@" in point:
            point, c = point.split("@", 1)
            ckp = int(c)
        if point not in FAULT_POINTS:
            raise ValueError(f"unknown fault point {point!r}; known: {', '.join(FAULT_POINTS)}")
        specs.append(FaultSpec(point, ckp, task))
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

    def armed(self, point: str) -> bool:
        return any(s.point == point for s in self.specs)

    def hit(self, point: str, *, checkpoint: int = -1, task: int = -1) -> FaultSpec | None:
        for spec in self.specs:
            if spec.point != point:
                continue
            if spec.checkpoint >= 0 and checkpoint >= 0 and spec.checkpoint != checkpoint:
                continue
            if spec.task >= 0 and task >= 0 and spec.task != task:
                continue
            if not self._claim(spec):
                continue
            self.fired.append({"point": point, "role": self.role, "checkpoint": checkpoint,
                               "task": task, "at": time.time()})
            return spec
        return None

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
        return False


def crash(role: str, point: str) -> None:
    """Ends the role: raises InjectedCrash (the host turns it into a process exit)."""
    raise InjectedCrash(f"{role}: injected crash at {point}")
