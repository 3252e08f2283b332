"""Counters every role keeps and the driver adds up: RPCs and mails by kind, blocked time.

DFS operations are counted by :class:`runtime.core.dfs.DfsCounters`; everything else is here. Each
process keeps its own :class:`Metrics`; the driver merges the snapshots.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any


class Metrics:
    def __init__(self) -> None:
        self.rpcs: dict[str, int] = defaultdict(int)
        self.mails: dict[str, int] = defaultdict(int)
        self.blocked_s: dict[str, float] = defaultdict(float)  # role -> seconds blocked on an instant
        self.samples: dict[str, list[float]] = defaultdict(list)  # named latency samples
        self.values: dict[str, Any] = {}
        self.counters: dict[str, int] = defaultdict(int)  # named events: fallbacks, retries, ...

    def rpc(self, kind: str, n: int = 1) -> None:
        self.rpcs[kind] += n

    def mail(self, kind: str) -> None:
        self.mails[kind] += 1

    def blocked(self, role: str, seconds: float) -> None:
        self.blocked_s[role] += seconds

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def sample(self, name: str, value: float) -> None:
        self.samples[name].append(value)

    def snapshot(self) -> dict[str, Any]:
        return {
            "rpcs": dict(self.rpcs),
            "mails": dict(self.mails),
            "blocked_s": dict(self.blocked_s),
            "samples": {k: list(v) for k, v in self.samples.items()},
            "values": dict(self.values),
            "counters": dict(self.counters),
        }

    @staticmethod
    def merge(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rpcs": defaultdict(int),
            "mails": defaultdict(int),
            "blocked_s": defaultdict(float),
            "samples": defaultdict(list),
            "values": {},
            "counters": defaultdict(int),
        }
        for part in parts:
            for key in ("rpcs", "mails", "blocked_s", "counters"):
                for k, v in part.get(key, {}).items():
                    out[key][k] += v
            for k, v in part.get("samples", {}).items():
                out["samples"][k].extend(v)
            out["values"].update(part.get("values", {}))
        return {k: dict(v) for k, v in out.items()}
