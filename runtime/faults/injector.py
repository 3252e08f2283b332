"""Fault injection: named points in the role code, armed from the command line or a scenario.

A point fires at most ``times`` times per job, across restarts: before a point fires, a marker is
created on the DFS (``runtime.faults.markers``), so a task that crashed and restarted does
not crash again at the same place. Every firing is recorded (time, point, role, checkpoint).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from runtime.core.dfs import Dfs, DfsError
from runtime.core.fault_points import FaultPoints
from runtime.core.fault_spec import DEFAULT_MESSAGE_TARGET, FaultSpec, InjectedCrash
from runtime.faults.markers import FaultMarker, faults_path


class InjectedDfsError(DfsError):
    """A transient DFS error injected at a fault point."""


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

    def hit(
        self, point: str, *, checkpoint: int = -1, task: int = -1, target: str = "", strict: bool = False
    ) -> FaultSpec | None:
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
            self.fired.append(
                {
                    "point": point,
                    "role": self.role,
                    "checkpoint": checkpoint,
                    "task": task,
                    "at": time.time(),
                    **({"target": target} if target else {}),
                }
            )
            return spec
        return None

    def has_fired(self, spec: FaultSpec) -> bool:
        """Whether ``spec`` fired in this job, in any role or earlier attempt (its first marker)."""
        if self.dfs is None:
            return any(f["point"] == spec.point for f in self.fired)
        kind: str = self.dfs.fs.get_file_info(Dfs.join(self.path, FaultMarker.of(spec, 0).file_name())).type.name
        return kind != "NotFound"

    def _claim(self, spec: FaultSpec) -> bool:
        """Atomically takes one of the spec's firings (a marker file per firing)."""
        if self.dfs is None:
            return True
        for n in range(spec.times):
            marker = Dfs.join(self.path, FaultMarker.of(spec, n).file_name())
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


def coordinator_dfs_hook(faults: FaultPoints, wait: Callable[[float], None]) -> Callable[[str, str, str], None]:
    """The coordinator's DFS fault hook, the same on every host: inside a ``dfs.latency`` window
    each operation is slower by the window's latency (``wait(seconds)`` is how the host spends it:
    a sleep in the I/O thread on Ray, virtual time in the simulator), and once
    ``dfs.transient_error`` fired (at its checkpoint's trigger) the next write or create fails."""

    def hook(role: str, op: str, path: str) -> None:
        delay = faults.dfs_delay()
        if delay:
            wait(delay)
        if op in ("write", "create") and faults.take_dfs_failure():
            raise InjectedDfsError(f"injected transient DFS error on {op} {path}")

    return hook


def crash(role: str, point: str) -> None:
    """Ends the role: raises InjectedCrash (the host turns it into a process exit)."""
    raise InjectedCrash(f"{role}: injected crash at {point}")
