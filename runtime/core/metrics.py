"""Counters every role keeps and the driver adds up: RPCs and mails by kind, blocked time.

DFS operations are counted by :class:`runtime.core.dfs.DfsCounters`; everything else is here. Each
process keeps its own :class:`Metrics`; the driver merges the snapshots.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from runtime.core.dfs import DfsCounters


@dataclass
class MetricsSnapshot:
    """One role's counters at a moment (:meth:`Metrics.snapshot`), with what its host adds: its
    DFS operations by role and operation, and the messages it could not send. What each host
    gathers of every role, and what the result's figures are added up from. Its DFS operations come
    by role and operation, and by role, component (:mod:`runtime.core.dfs_components`) and operation."""

    rpcs: dict[str, int]
    mails: dict[str, int]
    blocked_s: dict[str, float]
    samples: dict[str, list[float]]
    values: dict[str, float]
    counters: dict[str, int]
    dfs_ops: dict[str, dict[str, int]] = field(default_factory=dict)  # role, op
    dfs_components: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # role, component, op
    send_errors: list[str] = field(default_factory=list)


class Metrics:
    def __init__(self) -> None:
        self.rpcs: dict[str, int] = defaultdict(int)
        self.mails: dict[str, int] = defaultdict(int)
        self.blocked_s: dict[str, float] = defaultdict(float)  # role -> seconds blocked on an instant
        self.samples: dict[str, list[float]] = defaultdict(list)  # named latency samples
        self.values: dict[str, float] = {}
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

    def snapshot(self, dfs: DfsCounters | None = None, send_errors: list[str] | None = None) -> MetricsSnapshot:
        """The counters now; a host adds the role's DFS operations and failed sends."""
        return MetricsSnapshot(
            rpcs=dict(self.rpcs),
            mails=dict(self.mails),
            blocked_s=dict(self.blocked_s),
            samples={k: list(v) for k, v in self.samples.items()},
            values=dict(self.values),
            counters=dict(self.counters),
            dfs_ops=dfs.snapshot() if dfs else {},
            dfs_components=dfs.by_component() if dfs else {},
            send_errors=list(send_errors or []),
        )

    @staticmethod
    def merge(parts: Iterable[MetricsSnapshot]) -> MetricsSnapshot:
        """The snapshots of several roles added up (their DFS operations and failed sends are
        not: :meth:`runtime.core.dfs.DfsCounters.merge` adds those)."""
        rpcs: dict[str, int] = defaultdict(int)
        mails: dict[str, int] = defaultdict(int)
        blocked_s: dict[str, float] = defaultdict(float)
        counters: dict[str, int] = defaultdict(int)
        samples: dict[str, list[float]] = defaultdict(list)
        values: dict[str, float] = {}
        for part in parts:
            for total, add in ((rpcs, part.rpcs), (mails, part.mails), (counters, part.counters)):
                for k, n in add.items():
                    total[k] += n
            for k, v in part.blocked_s.items():
                blocked_s[k] += v
            for k, xs in part.samples.items():
                samples[k].extend(xs)
            values.update(part.values)
        return MetricsSnapshot(dict(rpcs), dict(mails), dict(blocked_s), dict(samples), values, dict(counters))
