"""The fault points of one role when faults are armed: the injector, and what a fired fault leaves
behind (a slow DFS window, a DFS write that must fail). A host builds one per role env and attaches
it as ``env.faults``; roles call ``env.faults.fire(point, checkpoint=..., task=...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.core import roles, trace_events
from runtime.core.env import Env, WaitTimeout
from runtime.core.fault_points import FaultPoints
from runtime.core.fault_spec import MESSAGE_FAULTS, FaultSpec
from runtime.faults.injector import FaultInjector

LOST_REQUEST_WAIT_S = 30.0  # how long a call with no timeout of its own waits for a lost request


class ArmedFaultPoints(FaultPoints):
    """The armed faults of the role ``env`` belongs to. Firings are traced on the role's tracer;
    ``on_dropped(dest, method)`` is the host's record of a message lost in transit, if it keeps one."""

    def __init__(
        self, injector: FaultInjector, env: Env, *, on_dropped: Callable[[str, str], None] | None = None
    ) -> None:
        self.injector = injector
        self.specs = injector.specs
        self.arms_messages = any(s.point in MESSAGE_FAULTS for s in self.specs)
        self.env = env
        self.on_dropped = on_dropped
        # (extra seconds per DFS operation, until when on this host's clock): the dfs.latency fault
        self.dfs_slow: tuple[float, float] | None = None
        self.dfs_fail_next = False  # the dfs.transient_error fault: the next DFS write or create fails

    def fire(self, point: str, *, checkpoint: int = -1, task: int = -1) -> FaultSpec | None:
        spec = self.injector.hit(point, checkpoint=checkpoint, task=task)
        if spec is not None:
            self.env.tracer.instant(f"fault {point}", cat=trace_events.FAULT, args={"checkpoint": checkpoint})
        return spec

    def has_fired(self, spec: FaultSpec) -> bool:
        return self.injector.has_fired(spec)

    def slow_dfs(self, seconds_per_op: float, window_s: float) -> None:
        self.dfs_slow = (seconds_per_op, self.env.now() + window_s)

    def dfs_delay(self) -> float:
        if self.dfs_slow is None or self.env.now() >= self.dfs_slow[1]:
            return 0.0
        return self.dfs_slow[0]

    def fail_next_dfs_write(self) -> None:
        self.dfs_fail_next = True

    def take_dfs_failure(self) -> bool:
        failing, self.dfs_fail_next = self.dfs_fail_next, False
        return failing

    def message_fault(self, dest: str, method: str, msg: Any) -> FaultSpec | None:
        """The checkpoint is the message's own; the task is the write task at either end."""
        faults = self.injector
        if not faults.specs:  # (every message asks: the cheap test first)
            return None
        if not any(faults.armed(p) for p in MESSAGE_FAULTS):
            return None
        ckp = getattr(msg, "checkpoint_id", -1)
        task = getattr(msg, "task_id", None)
        if not isinstance(task, int):
            at = roles.writer_index(dest)
            task = at if at is not None else roles.writer_index(self.env.role)
            task = -1 if task is None else task
        for point in MESSAGE_FAULTS:
            spec = faults.hit(
                point, checkpoint=ckp if isinstance(ckp, int) else -1, task=task, target=method, strict=True
            )
            if spec is not None:
                self.env.tracer.instant(
                    f"fault {point}: {dest}.{method}",
                    cat=trace_events.FAULT,
                    args={"checkpoint": ckp, "delay_s": spec.value},
                )
                return spec
        return None

    async def apply_call_fault(
        self, dest: str, method: str, msg: Any, timeout: float | None, option: str = ""
    ) -> float:
        fault = self.message_fault(dest, method, msg)
        if fault is None:
            return 0.0
        if fault.point == "message.dropped":
            wait = timeout or LOST_REQUEST_WAIT_S
            self._dropped(dest, method)
            await self.env.sleep(wait)
            bound = f" ({option})" if option and timeout else ""
            raise WaitTimeout(
                f"{self.env.role} waited {wait:.1f}s for the reply of {dest}.{method}{bound}: "
                "no reply (the request was lost in transit)"
            )
        return float(fault.value)

    def send_fault_delay(self, dest: str, method: str, msg: Any) -> float | None:
        fault = self.message_fault(dest, method, msg)
        if fault is None:
            return 0.0
        if fault.point == "message.dropped":
            self._dropped(dest, method)
            return None
        return float(fault.value)

    def _dropped(self, dest: str, method: str) -> None:
        if self.on_dropped is not None:
            self.on_dropped(dest, method)
