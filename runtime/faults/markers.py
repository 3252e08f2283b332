"""The fault markers a job leaves on the DFS: one file per firing of a fault spec, under
``.hoodie/.aux/commitlab/faults``, named ``point@checkpoint#task[:target].n`` and holding
``role pid``. The injector creates them (a firing is taken by creating its marker, so a restarted
task does not fire again); the run's result reads them back (``fired_faults``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from runtime.core.dfs import Dfs, DfsError
from runtime.core.fault_spec import FaultSpec


def faults_path(table_base: str) -> str:
    return Dfs.join(table_base, ".hoodie", ".aux", "commitlab", "faults")


# the point has no ``:`` or ``@``; the target is the rest up to the last ``.`` (it may hold ``.``, ``:``)
_NAME = re.compile(r"^(?P<point>[^@:]+)@(?P<ckp>-?\d+)#(?P<task>-?\d+)(?::(?P<target>.+))?\.(?P<firing>\d+)$")


@dataclass(frozen=True)
class FaultMarker:
    """Firing number ``firing`` (0 .. times-1) of the spec ``point@checkpoint#task[:target]``."""

    point: str
    checkpoint: int = -1
    task: int = -1
    target: str = ""
    firing: int = 0

    @classmethod
    def of(cls, spec: FaultSpec, firing: int) -> FaultMarker:
        return cls(spec.point, spec.checkpoint, spec.task, spec.target, firing)

    def file_name(self) -> str:
        target = f":{self.target}" if self.target else ""
        return f"{self.point}@{self.checkpoint}#{self.task}{target}.{self.firing}"

    @classmethod
    def parse(cls, name: str) -> FaultMarker:
        m = _NAME.match(name)
        if m is None:
            raise ValueError(f"{name!r} is not a fault marker: point@checkpoint#task[:target].n")
        return cls(m["point"], int(m["ckp"]), int(m["task"]), m["target"] or "", int(m["firing"]))


class FiredFault(TypedDict):
    """A fault that fired, from the marker its injector left on the DFS."""

    point: str
    role: str
    checkpoint: int
    task: int
    at: float  # the marker's modification time
    target: NotRequired[str]  # the message or RPC a fault aimed at one names


def fired_faults(dfs: Dfs, table_base: str) -> list[FiredFault]:
    """Every fault that fired in a job, in order, from the markers the injectors left on the DFS."""
    try:
        entries = dfs.list_dir(faults_path(table_base))
    except DfsError:
        return []
    fired = []
    for e in entries:
        info = dfs.fs.get_file_info(e.path)
        with dfs.fs.open_input_stream(e.path) as f:
            role = f.read().decode(errors="replace").split(" ")[0]
        marker = FaultMarker.parse(e.name)
        at = info.mtime.timestamp() if info.mtime else 0.0
        one = FiredFault(point=marker.point, role=role, checkpoint=marker.checkpoint, task=marker.task, at=at)
        if marker.target:
            one["target"] = marker.target
        fired.append(one)
    return sorted(fired, key=lambda f: (f["at"], f["point"], f["checkpoint"], f["task"]))
