"""The result record of a run and the figures every host reports the same way (Ray, the simulator)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from runtime.core import roles
from runtime.core.dfs import DfsCounters
from runtime.core.messages import InstantRelease, TaskDump
from runtime.core.metrics import Metrics
from runtime.lab.latency import percentiles, unblock_latencies

DATA_ROLES = ("writer.data", roles.DRIVER)  # DFS traffic that is not the commit protocol's


def run_figures(
    metric_parts: Iterable[dict[str, Any]],
    driver_dfs_ops: dict[str, dict[str, int]],
    releases: list[InstantRelease],
    checkpoints: dict[str, Any],
    dumps: dict[str, TaskDump],
    requested_checkpoints: int,
) -> dict[str, Any]:
    """Counters, checkpoints, latencies of a run from its roles' metrics, the coordinator's
    instant releases, the job's checkpoints and the write tasks' dumps."""
    parts = [m for m in metric_parts if "error" not in m]
    dfs_ops = DfsCounters.merge([m.get("dfs_ops", {}) for m in parts] + [driver_dfs_ops])
    merged = Metrics.merge(parts)
    latencies = unblock_latencies([(r.instant, r.at) for r in releases], [w for d in dumps.values() for w in d.waits])
    completed = sum(1 for c in checkpoints.values() if c["status"] == "completed")
    aborted = sum(1 for c in checkpoints.values() if c["status"] in ("aborted", "timed-out"))
    n_ckp = max(1, completed + aborted)
    return {
        "rows_in": sum(d.rows_in for d in dumps.values()),
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


@dataclass
class FailoverRecord:
    """One failover of a job: why, when, how (global or region) and where the job resumed."""

    error: str | None
    at: float  # the host's clock: wall-clock seconds on Ray, virtual seconds in the simulator
    strategy: str  # global (restart all) or region (the coordinator lives on)
    restored_checkpoint: int | None
    resumed_round: int
    deleted: str | None = None  # what the bus.deleted_between_restarts fault removed (table-relative)
    down_s: float | None = None  # from the failure until the restarted roles were all up
    coordinator_reset: Any = None  # the coordinator's answer to a region failover's reset
    clock: str = "at"  # the key of ``at`` in result.json: "at" (Ray) or "at_virtual_s" (simulator)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "error": self.error,
            self.clock: round(self.at, 6) if self.clock == "at_virtual_s" else self.at,
            "strategy": self.strategy,
            "restored_checkpoint": self.restored_checkpoint,
            "resumed_round": self.resumed_round,
            "down_s": self.down_s,
        }
        if self.deleted is not None:
            out["deleted"] = self.deleted
        if self.strategy == "region":
            out["coordinator_reset"] = self.coordinator_reset
        return out


@dataclass
class JobResult:
    """The result record of a job on any host; :meth:`to_json` gives ``result.json``'s fields."""

    figures: dict[str, Any]  # :func:`run_figures`
    protocol: str
    writers: int
    source: str
    table: str
    status: str
    error: str | None
    records: int
    commits: list[dict[str, Any]]
    empty_rounds: list[Any]
    failovers: list[FailoverRecord]
    faults_fired: list[dict[str, Any]]
    faults_armed: list[str]  # the --faults specs, as written
    faults_not_fired: list[str]  # armed specs that never fired: the run did not test them
    rolled_back: list[str]
    rollbacks: list[dict[str, str]]  # {instant, reason}: why each instant was rolled back
    coordinator: dict[str, Any]  # what the coordinator lived through: resets, a deleted bus, protocol
    deadlock: dict[str, Any] | None
    stalls: list[dict[str, Any]]
    timing: dict[str, Any]
    rows_per_s: float
    tasks: dict[str, dict[str, Any]]
    send_errors: list[str]
    durations: dict[str, float]  # the time scale and every scaled Hudi/Flink duration the run used
    config: dict[str, Any]  # the effective configuration (JobConfig.record): --config re-runs it
    committed_prefix: dict[str, Any] | None = None  # a run that did not finish: its commits, checked
    # merge-on-read: the compactions the job completed, read from the table (instant, file groups,
    # rows, log files compacted), and those it scheduled / postponed
    compactions: dict[str, Any] = field(default_factory=dict)
    # the data the job's commits and compactions wrote (runtime.hudi.table.files_written), and the write
    # amplification: bytes written / the input records' bytes (the sources' input_bytes counter:
    # what they emitted, replays after a failover included, so a figure for runs without faults)
    data_written: dict[str, Any] = field(default_factory=dict)
    host_fields: dict[str, Any] = field(default_factory=dict)  # what only one host reports

    def to_json(self) -> dict[str, Any]:
        out = {**self.figures}
        for f in fields(self):
            if f.name not in ("figures", "host_fields", "failovers"):
                out[f.name] = getattr(self, f.name)
        out["failovers"] = [f.to_json() for f in self.failovers]
        out.update(self.host_fields)
        return out
