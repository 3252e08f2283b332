"""The figures of a run that every host reports the same way (Ray, the simulator)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runtime.core.dfs import DfsCounters
from runtime.core.metrics import Metrics
from runtime.lab.latency import percentiles, unblock_latencies

DATA_ROLES = ("writer.data", "driver")  # DFS traffic that is not the commit protocol's


def run_figures(
    metric_parts: Iterable[dict[str, Any]],
    driver_dfs_ops: dict[str, dict[str, int]],
    coordinator: dict[str, Any],
    checkpoints: dict[str, Any],
    dumps: dict[str, dict[str, Any]],
    requested_checkpoints: int,
) -> dict[str, Any]:
    """Counters, checkpoints, latencies of a run from its roles' metrics, the coordinator's and job
    manager's descriptions and the write tasks' dumps."""
    parts = [m for m in metric_parts if "error" not in m]
    dfs_ops = DfsCounters.merge([m.get("dfs_ops", {}) for m in parts] + [driver_dfs_ops])
    merged = Metrics.merge(parts)
    latencies = unblock_latencies(
        [tuple(r) for r in coordinator.get("releases", [])], [w for d in dumps.values() for w in d.get("waits", [])]
    )
    completed = sum(1 for c in checkpoints.values() if c["status"] == "completed")
    aborted = sum(1 for c in checkpoints.values() if c["status"] in ("aborted", "timed-out"))
    n_ckp = max(1, completed + aborted)
    return {
        "rows_in": sum(d.get("rows_in", 0) for d in dumps.values()),
        "checkpoints": {
            "completed": completed,
            "aborted": aborted,
            "requested": requested_checkpoints,
            "detail": checkpoints,
        },
        "dfs_ops": dfs_ops,
        "dfs_ops_per_checkpoint": {
            r: {op: round(n / n_ckp, 2) for op, n in ops.items()} for r, ops in dfs_ops.items() if r not in DATA_ROLES
        },
        "rpcs": merged["rpcs"],
        "mails": merged["mails"],
        "writer_blocked_s": {k: round(v, 3) for k, v in merged["blocked_s"].items()},
        "commit_to_unblock_s": percentiles(latencies),
        "commit_to_unblock_samples": [round(x, 5) for x in latencies],
        "counters": merged.get("counters", {}),
    }
