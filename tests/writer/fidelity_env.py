"""A fake Env for the writer fidelity tests: real asyncio time (nothing here sleeps long),
inline I/O, and recorded calls and sends (nothing is delivered unless a test does it)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from runtime.core.env import Env
from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer


class RecordingEnv(Env):
    def __init__(self, dfs: Any, role: str) -> None:
        self.role = role
        self.dfs = dfs
        self.rng = random.Random(0)
        self.tracer = Tracer(role, enabled=False)
        self.metrics = Metrics()
        self.calls: list[tuple[str, str, Any]] = []
        self.sent: list[tuple[str, str, Any]] = []
        self.events: list[tuple[str, str, Any, Callable[[str], None]]] = []
        self.call_gate: asyncio.Event | None = None  # when set, every call waits for it

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def call(self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None) -> Any:
        self.calls.append((dest, method, msg))
        if self.call_gate is not None:
            await self.call_gate.wait()
        return None

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        self.sent.append((dest, method, msg))

    def send_event(
        self, dest: str, method: str, msg: Any, *, timeout: float, on_failure: Callable[[str], None]
    ) -> None:
        self.events.append((dest, method, msg, on_failure))

    async def io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)
