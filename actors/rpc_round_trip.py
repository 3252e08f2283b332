"""One actor call's round trip on this Ray cluster: the floor any coordination protocol on Ray pays
(``commitlab compare`` gives latencies as multiples of it)."""

from __future__ import annotations

import time
from typing import Any

import ray

from actors.ray_session import ensure_ray


@ray.remote(num_cpus=0)
class _Echo:
    async def ping(self) -> int:
        return 0


def measure_rpc_round_trip(n: int = 200) -> dict[str, float]:
    """One actor call's round trip on this cluster (async actor, awaited one at a time): the
    floor any coordination protocol on Ray pays."""
    import numpy as np

    ensure_ray()
    echo_class: Any = _Echo  # a Ray actor class: ray.remote gave it remote()
    echo = echo_class.remote()
    ray.get(echo.ping.remote(), timeout=60)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        ray.get(echo.ping.remote(), timeout=10)
        samples.append(time.perf_counter() - t)
    ray.kill(echo)
    a = np.asarray(samples)
    return {
        "p50_s": round(float(np.percentile(a, 50)), 6),
        "p99_s": round(float(np.percentile(a, 99)), 6),
        "samples": n,
    }
