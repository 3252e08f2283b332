"""What the harness recorded of Hudi's own writer (its ``real.json``), typed.

The file's keys are the contract in ``conformance/README.md``. Operations arrive in Hadoop's terms
(``create``, ``open``, ``status``, ``mkdirs``, ...) and checkpoint-message files under the name of
their directory (``ckp_meta``); :data:`OPS` and :func:`component` put both sides in one vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from runtime.core.dfs_components import Component
from runtime.core.json_doc import JsonObject

# the lab's operation names (runtime.core.dfs) -> the vocabulary both sides are compared in
OPS = {
    "write": "create",
    "create": "create",
    "append": "create",
    "read": "open",
    "open": "open",
    "list": "list",
    "exists": "status",
    "stat": "status",
    "status": "status",
    "mkdir": "mkdirs",
    "mkdirs": "mkdirs",
    "rename": "rename",
    "delete": "delete",
}


def component(name: str) -> str:
    """A component as the harness names it, in :class:`Component`'s names."""
    return Component.MESSAGES.value if name == "ckp_meta" else name


@dataclass(frozen=True)
class InstantState:
    state: str  # REQUESTED, INFLIGHT, COMPLETED
    time_ms: float


@dataclass(frozen=True)
class RealInstant:
    instant: str
    action: str
    states: list[InstantState]
    files: dict[str, int]  # path relative to the table -> bytes
    records: int

    @property
    def completed(self) -> bool:
        return any(s.state == "COMPLETED" for s in self.states)


@dataclass(frozen=True)
class FsCall:
    role: str
    component: str
    op: str
    count: int
    checkpoint: int | None = None


@dataclass(frozen=True)
class Caller:
    """Which Hudi method made calls of one kind (the innermost Hudi frame outside its file-system
    wrappers): where a count comes from."""

    component: str
    op: str
    role: str
    method: str
    count: int


@dataclass(frozen=True)
class Blocked:
    """A write task's thread the harness's dumps saw in one Hudi wait past the stall time."""

    thread: str
    state: str
    waited_ms: int
    frames: list[str]  # Class.method, innermost first, down to the task's mailbox loop
    stack: list[str]  # the thread's whole stack as the JVM dumped it

    @property
    def frame(self) -> str:
        return self.frames[0] if self.frames else "?"


@dataclass(frozen=True)
class JvmCost:
    """The harness JVM's CPU time (every thread: Hudi, Flink and the harness) and its collectors'
    time at one moment, ms: a write phase's cost whatever else runs on the machine."""

    cpu_ms: float
    gc_ms: float

    @classmethod
    def read(cls, cpu_ms: object, gc_ms: object) -> JvmCost | None:
        if not isinstance(cpu_ms, int | float) or not isinstance(gc_ms, int | float) or cpu_ms < 0:
            return None
        return cls(float(cpu_ms), float(gc_ms))


@dataclass
class RealRun:
    release: str
    flink: str
    table_type: str
    writers: int
    checkpoints: int
    wall_s: float
    options: dict[str, str]
    instants: list[RealInstant]
    metadata_instants: list[RealInstant]
    checkpoint_completed_ms: dict[int, float]
    commit_completed_ms: dict[int, float | None]
    fs_calls: list[FsCall]
    fs_calls_by_checkpoint: list[FsCall] = field(default_factory=list)
    callers: list[Caller] = field(default_factory=list)  # most frequent first
    error: str | None = None
    # what the job did, read from it (the scenarios): its final status (COMMITTED: every round with
    # data committed, then cancelled; FAILED, FINISHED, TIMED_OUT), its restarts, the write task
    # thread a dump found waiting in Hudi past the stall time (None: none), the crashes injected
    job_status: str = "COMMITTED"
    failovers: int = 0
    blocked: Blocked | None = None
    crashes: list[str] = field(default_factory=list)
    # epoch ms of the first record a source handed to the write tasks (None: the harness predates it)
    first_emit_ms: float | None = None
    # the JVM's CPU time (every thread) and collectors' time, ms, at the first record and when the
    # harness saw each checkpoint's commit completed (None: the harness predates them)
    first_emit_cost: JvmCost | None = None
    commit_cost: dict[int, JvmCost] = field(default_factory=dict)
    collectors: list[str] = field(default_factory=list)  # the JVM's garbage collectors

    @classmethod
    def read(cls, path: str) -> RealRun:
        with open(path) as f:
            doc = json.load(f)
        return cls.from_json(doc)

    @classmethod
    def from_json(cls, doc: JsonObject) -> RealRun:
        detail = doc.get("checkpoints_detail") or []
        return cls(
            release=doc["release"],
            flink=doc["flink"],
            table_type=doc["table_type"],
            writers=int(doc["writers"]),
            checkpoints=int(doc["checkpoints"]),
            wall_s=float(doc.get("wall_s") or 0.0),
            options={str(k): str(v) for k, v in (doc.get("options") or {}).items()},
            instants=[_instant(i) for i in doc.get("instants") or []],
            metadata_instants=[_instant(i) for i in doc.get("metadata_table_instants") or []],
            checkpoint_completed_ms={
                int(c["id"]): float(c["completed_ms"]) for c in detail if c.get("completed_ms") is not None
            },
            commit_completed_ms={
                int(c["id"]): None if c.get("commit_completed_ms") is None else float(c["commit_completed_ms"])
                for c in detail
            },
            fs_calls=[_call(c) for c in doc.get("fs_calls") or []],
            fs_calls_by_checkpoint=[_call(c) for c in doc.get("fs_calls_by_checkpoint") or []],
            callers=[_caller(c) for c in doc.get("fs_callers") or []],
            error=doc.get("error"),
            job_status=str(doc.get("job_status") or "COMMITTED"),
            failovers=int(doc.get("failovers") or 0),
            blocked=_blocked(doc.get("blocked")),
            crashes=[str(c) for c in doc.get("crashes") or []],
            first_emit_ms=None if doc.get("first_emit_ms") is None else float(doc["first_emit_ms"]),
            first_emit_cost=JvmCost.read(doc.get("first_emit_cpu_ms"), doc.get("first_emit_gc_ms")),
            commit_cost={
                int(c["id"]): cost
                for c in detail
                if (cost := JvmCost.read(c.get("commit_cpu_ms"), c.get("commit_gc_ms"))) is not None
            },
            collectors=[str(g) for g in (doc.get("jvm") or {}).get("collectors") or []],
        )

    def write_cost(self, checkpoint: int) -> JvmCost | None:
        """What the JVM spent from the first record to ``checkpoint``'s commit: CPU and GC seconds."""
        start, end = self.first_emit_cost, self.commit_cost.get(checkpoint)
        if start is None or end is None:
            return None
        return JvmCost(cpu_ms=end.cpu_ms - start.cpu_ms, gc_ms=end.gc_ms - start.gc_ms)

    def commit_latencies_s(self) -> list[float]:
        """From each checkpoint's completion to the completion of the instant it committed."""
        out = []
        for ckp, done in sorted(self.checkpoint_completed_ms.items()):
            committed = self.commit_completed_ms.get(ckp)
            if committed is not None:
                out.append(max(0.0, committed - done) / 1000.0)
        return out


def _instant(doc: JsonObject) -> RealInstant:
    return RealInstant(
        instant=str(doc["instant"]),
        action=str(doc["action"]),
        states=[InstantState(str(s["state"]), float(s["time_ms"])) for s in doc.get("states") or []],
        files={str(f["path"]): int(f["bytes"]) for f in doc.get("files") or []},
        records=int(doc.get("records") or 0),
    )


def _blocked(doc: JsonObject | None) -> Blocked | None:
    if not doc:
        return None
    return Blocked(
        thread=str(doc["thread"]),
        state=str(doc["state"]),
        waited_ms=int(doc["waited_ms"]),
        frames=[str(f) for f in doc.get("frames") or []],
        stack=[str(f) for f in doc.get("stack") or []],
    )


def _caller(doc: JsonObject) -> Caller:
    call = _call(doc)
    return Caller(call.component, call.op, call.role, str(doc["caller"]), call.count)


def _call(doc: JsonObject) -> FsCall:
    return FsCall(
        role=str(doc["role"]),
        component=component(str(doc["component"])),
        op=OPS.get(str(doc["op"]), str(doc["op"])),
        count=int(doc["count"]),
        checkpoint=int(doc["checkpoint"]) if doc.get("checkpoint") is not None else None,
    )
