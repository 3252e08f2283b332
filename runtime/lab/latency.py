"""Commit-to-unblock latency: how long after the coordinator made an instant known a blocked
writer went on writing. Only waits that were under way when the instant was released count:
a writer that asked later never waited for it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

import numpy as np

from runtime.core.messages import InstantWait


def unblock_latencies(releases: Iterable[tuple[str, float]], waits: Iterable[InstantWait]) -> list[float]:
    by_instant: dict[str, list[float]] = {}
    for instant, at in releases:
        by_instant.setdefault(instant, []).append(at)
    out = []
    for w in waits:
        times = [t for t in by_instant.get(w.instant, []) if w.since <= t <= w.until]
        if times:
            out.append(w.until - max(times))
    return out


class Percentiles(TypedDict):
    p50: float | None
    p99: float | None
    max: float | None
    samples: int


def percentiles(samples: list[float]) -> Percentiles:
    if not samples:
        return {"p50": None, "p99": None, "max": None, "samples": 0}
    a = np.asarray(samples)
    return {
        "p50": round(float(np.percentile(a, 50)), 5),
        "p99": round(float(np.percentile(a, 99)), 5),
        "max": round(float(a.max()), 5),
        "samples": int(a.size),
    }
