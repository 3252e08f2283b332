"""``commitlab soak --host ray``: one long job on Ray at a moderate rate, a fault every few minutes,
every process's memory and the table's bounded parts sampled while it runs.

The job: ``--writers`` write tasks, a checkpoint every ``CHECKPOINT_INTERVAL_S`` seconds for
``--minutes``, ``ROWS_PER_TASK_ROUND`` rows per task between checkpoints, and one fault every
``--fault-every`` minutes, in turn a write task crashing in its snapshot, the coordinator crashing
before its commit file, a transient DFS error and a task crashing between its flush and its event
(each a failover from the last completed checkpoint). Exactly-once is verified at the end, as for
every run.

A sampler thread reads, every ``--sample-every`` seconds: the resident and unique memory (RSS, USS
where the kernel lets it be read) of every process of the job's local Ray (the driver's children:
the GCS, the raylet, every worker), the number of files in the table's active timeline, and the
number of file slices of the metadata table's ``files`` partition. The trace file is written once,
at the end: its size per checkpoint is reported. What is bounded is judged on the samples after the
first tenth of the run (the processes start, the archiver's first pass): their least-squares slope
per hour, printed and written to ``soak-ray.json``.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.core.json_doc import JsonObject

CHECKPOINT_INTERVAL_S = 2.0
ROWS_PER_TASK_ROUND = 200
FAULT_POINTS = (
    ("task.in_snapshot", True),
    ("coordinator.before_commit_file", False),
    ("dfs.transient_error", False),
    ("task.after_flush_before_event", True),
)
WARM_UP_FRACTION = 0.1
MIB = 1024 * 1024


def soak_config(base: JobConfig, minutes: float, fault_every_min: float) -> JobConfig:
    """The long job: a checkpoint every 2 s for ``minutes``, a fault every ``fault_every_min``."""
    checkpoints = max(3, int(minutes * 60 / CHECKPOINT_INTERVAL_S))
    every = max(2, int(fault_every_min * 60 / CHECKPOINT_INTERVAL_S))
    faults = []
    for i, ckp in enumerate(range(every, checkpoints - 1, every)):
        point, per_task = FAULT_POINTS[i % len(FAULT_POINTS)]
        faults.append(FaultSpec(point, ckp, i % base.writers if per_task else -1))
    return base.replace(
        source="generator",
        checkpoints=checkpoints,
        records=checkpoints * base.writers * ROWS_PER_TASK_ROUND,
        checkpoint_interval_s=CHECKPOINT_INTERVAL_S,
        faults=faults,
        max_restarts=len(faults) + 2,
        job_timeout_s=minutes * 60 * 2 + 300,
    )


def _files(path: str) -> int:
    try:
        return sum(1 for e in os.scandir(path) if e.is_file())
    except OSError:
        return 0


def timeline_dir(table: str) -> str:
    """The active timeline's folder: ``.hoodie/timeline`` from table version 8, else ``.hoodie``."""
    layout = os.path.join(table, ".hoodie", "timeline")
    return layout if os.path.isdir(layout) else os.path.join(table, ".hoodie")


def _short_name(title: str) -> str:
    """A process's name for the report: a Ray worker's title, else its program and module."""
    if title.startswith("ray::"):
        return title.split()[0][:60]
    parts = title.split()
    program = os.path.basename(parts[0]) if parts else ""
    module = next((a for a in parts[1:] if a.endswith(".py") or a.startswith("ray.")), "")
    return f"{program} {os.path.basename(module)}".strip()[:60]


class Sampler(threading.Thread):
    """Samples the driver's child processes and the table until stopped."""

    def __init__(self, table: str, every_s: float, on_sample: Callable[[JsonObject], None] | None = None) -> None:
        super().__init__(daemon=True, name="soak-sampler")
        self.table = table
        self.every_s = every_s
        self.on_sample = on_sample
        self.samples: list[JsonObject] = []
        self.names: dict[int, str] = {}
        self._stop_event = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            sample = self.sample()
            self.samples.append(sample)
            if self.on_sample is not None:
                self.on_sample(sample)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(self.every_s + 5)

    def sample(self) -> JsonObject:
        procs: dict[str, list[int | None]] = {}
        for p in psutil.Process().children(recursive=True):
            try:
                mem = p.memory_info()
                try:
                    uss: int | None = p.memory_full_info().uss
                except (psutil.AccessDenied, psutil.ZombieProcess):
                    uss = None
                title = " ".join(p.cmdline())
                # a Ray worker's title names its actor once it hosts one (ray::IDLE before)
                if p.pid not in self.names or not title.startswith("ray::IDLE"):
                    self.names[p.pid] = _short_name(title) or p.name()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            procs[str(p.pid)] = [mem.rss, uss]
        gc.collect()
        me = psutil.Process().memory_info().rss
        return {
            "at_s": round(time.monotonic() - self.started_at, 1),
            "driver_rss": me,
            "processes": procs,
            "timeline_files": _files(timeline_dir(self.table)),
            "metadata_slices": _files(os.path.join(self.table, ".hoodie", "metadata", "files")),
        }


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) per hour, after the warm-up."""
    kept = points[int(len(points) * WARM_UP_FRACTION) :]
    if len(kept) < 3:
        return None
    mx = sum(x for x, _ in kept) / len(kept)
    my = sum(y for _, y in kept) / len(kept)
    var = sum((x - mx) ** 2 for x, _ in kept)
    if var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in kept) / var * 3600


def summary(samples: list[JsonObject], names: dict[int, str]) -> JsonObject:
    """Per process: first, last and max RSS and its slope (MiB per hour); the timeline's and the
    metadata table's file counts: range after the warm-up and slope (files per hour)."""
    per_pid: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for pid, (rss, _uss) in s["processes"].items():
            per_pid.setdefault(pid, []).append((s["at_s"], rss / MIB))
    processes = {}
    for pid, pts in per_pid.items():
        slope = slope_per_hour(pts)
        processes[pid] = {
            "name": names.get(int(pid), "?"),
            "samples": len(pts),
            "first_mib": round(pts[0][1], 1),
            "last_mib": round(pts[-1][1], 1),
            "max_mib": round(max(v for _, v in pts), 1),
            "slope_mib_per_hour": None if slope is None else round(slope, 2),
        }
    warm = samples[int(len(samples) * WARM_UP_FRACTION) :] or samples

    def counted(key: str) -> JsonObject:
        values = [s[key] for s in warm]
        slope = slope_per_hour([(s["at_s"], float(s[key])) for s in samples])
        return {
            "min": min(values, default=None),
            "max": max(values, default=None),
            "slope_per_hour": None if slope is None else round(slope, 2),
        }

    total = [(s["at_s"], sum(r for r, _ in s["processes"].values()) / MIB) for s in samples]
    total_slope = slope_per_hour(total)
    return {
        "processes": processes,
        "all_processes_rss_mib": {
            "first": round(total[0][1], 1) if total else None,
            "last": round(total[-1][1], 1) if total else None,
            "slope_per_hour": None if total_slope is None else round(total_slope, 2),
        },
        "timeline_files": counted("timeline_files"),
        "metadata_slices": counted("metadata_slices"),
    }


def ray_soak(
    base: JobConfig,
    out_dir: str,
    *,
    minutes: float,
    fault_every_min: float,
    sample_every_s: float,
    on_sample: Callable[[JsonObject], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[JsonObject, Any]:
    """Runs the long job with the sampler beside it; returns (soak-ray.json's document, the result)."""
    from actors.job import run_job

    cfg = soak_config(base, minutes, fault_every_min)
    trace = os.path.join(out_dir, "trace.json")
    sampler = Sampler(cfg.table, sample_every_s, on_sample)
    sampler.start()
    try:
        result = run_job(cfg, out_dir, trace_path=trace, on_phase=on_phase)
    finally:
        sampler.stop()
    samples = sampler.samples + [sampler.sample()]
    trace_bytes = os.path.getsize(trace) if os.path.exists(trace) else None
    completed = result.figures.checkpoints.completed
    doc: JsonObject = {
        "host": "ray",
        "protocol": cfg.protocol,
        "minutes": minutes,
        "writers": cfg.writers,
        "checkpoints": cfg.checkpoints,
        "checkpoints_completed": completed,
        "faults": [f.text() for f in cfg.faults],
        "faults_fired": [str(f["point"]) for f in result.faults_fired],
        "failovers": len(result.failovers),
        "status": result.status.value,
        "exactly_once": None if result.exactly_once is None else result.exactly_once.verified,
        "commits": len(result.commits),
        "trace_bytes": trace_bytes,
        "trace_bytes_per_checkpoint": None if not trace_bytes or not completed else round(trace_bytes / completed),
        **summary(samples, sampler.names),
        "samples": samples,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "soak-ray.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return doc, result
