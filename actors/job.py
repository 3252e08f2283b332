"""Launches one job on Ray: creates the role actors, supervises the run, gathers the results.

The driver only supervises: it starts the actors, waits for the job manager's loop with a bound,
polls every write task's introspection for the deadlock watchdog, and at the end collects counters,
commits and traces, verifies the table with the official reader and writes ``result.json``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any, Callable

import ray

from actors.role_actor import RoleActor
from actors.stream_plan import plan_stream
from runtime import codec
from runtime.config import JobConfig
from runtime.deadlock import find_deadlock, find_stalls
from runtime.dfs import DfsCounters, open_dfs
from runtime.latency import percentiles, unblock_latencies
from runtime.metrics import Metrics
from runtime.protocols import PROTOCOLS
from runtime.table import HudiTable, TableProps
from runtime.trace import write_trace
from runtime.verify import verify_run

POLL_S = 0.25


def ensure_ray(num_cpus: int | None = None) -> bool:
    """Connects to ``RAY_ADDRESS`` if set, else starts a local Ray. Returns True if started here."""
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus or os.cpu_count() or 2, **kwargs)
    return True


class JobRun:
    """One run of a job; ``run()`` returns the result record."""

    def __init__(self, cfg: JobConfig, out_dir: str | None = None, *,
                 on_progress: Callable[[dict[str, Any]], None] | None = None,
                 trace_path: str | None = None) -> None:
        self.cfg = cfg.validate(list(PROTOCOLS))
        self.out_dir = out_dir
        self.on_progress = on_progress
        self.trace_path = trace_path
        self.namespace = f"commitlab-{uuid.uuid4().hex[:8]}"
        self.task_names = [f"writer-{i}" for i in range(cfg.writers)]
        self.source_names = [f"source-{i}" for i in range(cfg.writers)]
        self.actors: dict[str, Any] = {}

    def _create(self, kind: str, name: str, props: TableProps, extra: dict[str, Any]) -> Any:
        actor = RoleActor.options(name=name, namespace=self.namespace).remote(
            kind, name, codec.encode(self.cfg), props.__dict__, extra)
        self.actors[name] = actor
        return actor

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.time()
        counters = DfsCounters()
        dfs, base = open_dfs(cfg.table, role="driver", counters=counters)
        props = TableProps(cfg.table_name, cfg.key_field, cfg.partition_field, cfg.precombine_field)
        HudiTable.check_compatible(dfs, base, props)  # a foreign or mismatched table: fail early
        plan = plan_stream(cfg)  # bad input fails here, before anything is written
        HudiTable.create_or_open(dfs, base, props)
        self.cfg = cfg = plan.config
        self.plan = plan
        trace = self.trace_path is not None

        protocol = PROTOCOLS[cfg.protocol]
        for kind in protocol.extra_roles:  # protocol roles first: the coordinator may call them
            self._create(kind, kind, props, {"trace": trace})
        coord = self._create("coordinator", "coordinator", props,
                             {"schema_json": plan.schema_json, "trace": trace})
        jm = self._create("job-manager", "job-manager", props, {"trace": trace})
        for i, name in enumerate(self.task_names):
            self._create("writer", name, props, {"task_id": i, "trace": trace})
        for i, name in enumerate(self.source_names):
            self._create("source", name, props, {"task_id": i, "writer": self.task_names[i],
                                                 "trace": trace, **plan.shard_args[i]})
        handles = dict(self.actors)
        start_timeout = max(60.0, cfg.rpc_timeout_s)
        ray.get([self.actors[k].start.remote(handles, self.task_names, self.source_names)
                 for k in protocol.extra_roles], timeout=start_timeout)
        ray.get(coord.start.remote(handles, self.task_names, self.source_names), timeout=start_timeout)
        ray.get(jm.start.remote(handles, self.task_names, self.source_names), timeout=start_timeout)
        ray.get([self.actors[n].start.remote(handles, self.task_names, self.source_names)
                 for n in self.task_names], timeout=start_timeout)
        t_started = time.time()
        jm_ref = jm.run.remote()
        ray.get([self.actors[n].start.remote(handles, self.task_names, self.source_names)
                 for n in self.source_names], timeout=start_timeout)

        deadlock = None
        stalls: list[dict[str, Any]] = []
        status, error = "running", None
        deadline = time.time() + cfg.job_timeout_s
        last_progress = 0.0
        while True:
            ready, _ = ray.wait([jm_ref], timeout=POLL_S)
            if ready:
                try:
                    ray.get(jm_ref)
                    status = "finished"
                except ray.exceptions.RayTaskError as exc:
                    status, error = "failed", _root_cause(exc)
                break
            dumps = self._dumps()
            deadlock = find_deadlock(dumps, cfg.deadlock_threshold_s)
            if deadlock is not None:
                status = "deadlocked"
                break
            stalls = find_stalls(dumps, cfg.deadlock_threshold_s)
            if time.time() > deadline:
                status = "timed-out"
                error = (f"the job did not finish within job_timeout_s={cfg.job_timeout_s}s; "
                         f"stalled tasks: {stalls or 'none'}")
                break
            if self.on_progress and time.time() - last_progress > 0.5:
                last_progress = time.time()
                self.on_progress(self._progress())
        t_end = time.time()
        if status == "finished":
            # let the sources push end-of-input so every mailbox loop ends cleanly
            ray.get([self.actors[n].source_done.remote(5.0) for n in self.source_names], timeout=30)

        result = self._collect(status, error, deadlock, stalls, counters, t0, t_started, t_end)
        if status == "finished":
            result["exactly_once"] = verify_run(_reader_uri(cfg.table), self.plan.expected, cfg.key_field)
        else:
            result["exactly_once"] = None
        self._shutdown()
        if self.out_dir:
            os.makedirs(self.out_dir, exist_ok=True)
            with open(os.path.join(self.out_dir, "result.json"), "w") as f:
                json.dump(result, f, indent=2, default=str)
        return result

    # -- supervision ---------------------------------------------------------------------------

    def _dumps(self) -> dict[str, dict[str, Any]]:
        refs = {n: self.actors[n].dump.remote() for n in self.task_names}
        out = {}
        for name, ref in refs.items():
            try:
                out[name] = ray.get(ref, timeout=5.0)
            except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as exc:
                out[name] = {"role": name, "state": f"unreachable: {type(exc).__name__}"}
        return out

    def _progress(self) -> dict[str, Any]:
        try:
            jm = ray.get(self.actors["job-manager"].describe.remote(), timeout=5.0)
        except Exception:
            return {}
        done = sum(1 for c in jm["checkpoints"].values() if c["status"] == "completed")
        return {"checkpoint": jm["current"], "completed": done, "total": self.cfg.checkpoints}

    def _collect(self, status, error, deadlock, stalls, driver_counters, t0, t_started, t_end) -> dict[str, Any]:
        cfg = self.cfg
        names = list(self.actors)
        metrics = {}
        for n in names:
            try:
                metrics[n] = ray.get(self.actors[n].metrics.remote(), timeout=10)
            except Exception as exc:
                metrics[n] = {"error": str(exc)}
        coord = ray.get(self.actors["coordinator"].describe.remote(), timeout=10)
        jm = ray.get(self.actors["job-manager"].describe.remote(), timeout=10)
        dumps = self._dumps()
        dfs_ops = DfsCounters.merge([m.get("dfs_ops", {}) for m in metrics.values()]
                                    + [driver_counters.snapshot()])
        merged = Metrics.merge(m for m in metrics.values() if "error" not in m)
        latencies = unblock_latencies([tuple(r) for r in coord.get("releases", [])],
                                      [w for d in dumps.values() for w in d.get("waits", [])])
        ckps = jm["checkpoints"]
        completed = sum(1 for c in ckps.values() if c["status"] == "completed")
        aborted = sum(1 for c in ckps.values() if c["status"] in ("aborted", "timed-out"))
        rows_in = sum(d.get("rows_in", 0) for d in dumps.values())
        n_ckp = max(1, completed + aborted)
        protocol_roles = {r: ops for r, ops in dfs_ops.items() if r not in ("writer.data", "driver")}
        if self.trace_path:
            events = []
            for n in names:
                try:
                    events += ray.get(self.actors[n].trace_events.remote(), timeout=10)
                except Exception:
                    pass
            write_trace(self.trace_path, events)
        return {
            "protocol": cfg.protocol,
            "writers": cfg.writers,
            "source": cfg.source,
            "table": cfg.table,
            "status": status,
            "error": error,
            "rows_in": rows_in,
            "records": cfg.records,
            "checkpoints": {"completed": completed, "aborted": aborted, "requested": cfg.checkpoints,
                            "detail": ckps},
            "commits": [{"instant": c["instant"], "checkpoint": c["checkpoint"], "rows": c["rows"]}
                        for c in coord["commits"]],
            "empty_rounds": coord["empty_rounds"],
            "deadlock": deadlock.to_result() if deadlock else None,
            "stalls": stalls,
            "dfs_ops": dfs_ops,
            "dfs_ops_per_checkpoint": {r: {op: round(n / n_ckp, 2) for op, n in ops.items()}
                                       for r, ops in protocol_roles.items()},
            "rpcs": merged["rpcs"],
            "mails": merged["mails"],
            "writer_blocked_s": {k: round(v, 3) for k, v in merged["blocked_s"].items()},
            "commit_to_unblock_s": percentiles(latencies),
            "commit_to_unblock_samples": [round(x, 5) for x in latencies],
            "counters": merged.get("counters", {}),
            "timing": {**self.plan.timings,
                       "setup_s": round(t_started - t0, 3), "run_s": round(t_end - t_started, 3),
                       "total_s": round(time.time() - t0, 3)},
            "rows_per_s": round(rows_in / max(1e-9, t_end - t_started), 1),
            "tasks": {n: {k: d.get(k) for k in ("state", "error", "flushes", "protocol", "rows_in")}
                      for n, d in dumps.items()},
            "send_errors": [e for m in metrics.values() for e in m.get("send_errors", [])],
        }

    def _shutdown(self) -> None:
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        self.actors.clear()


def _root_cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {cause}".splitlines()[0][:2000]


def _reader_uri(table: str) -> str:
    return table if "://" in table else os.path.abspath(table)


@ray.remote(num_cpus=0)
class _Echo:
    async def ping(self) -> int:
        return 0


def measure_rpc_round_trip(n: int = 200) -> dict[str, float]:
    """One actor call's round trip on this cluster (async actor, awaited one at a time): the
    floor any coordination protocol on Ray pays."""
    import numpy as np

    ensure_ray()
    echo = _Echo.remote()
    ray.get(echo.ping.remote(), timeout=60)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        ray.get(echo.ping.remote(), timeout=10)
        samples.append(time.perf_counter() - t)
    ray.kill(echo)
    a = np.asarray(samples)
    return {"p50_s": round(float(np.percentile(a, 50)), 6), "p99_s": round(float(np.percentile(a, 99)), 6),
            "samples": n}


def run_job(cfg: JobConfig, out_dir: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """Runs a job on the current Ray cluster (starting a local one if needed)."""
    ensure_ray()
    return JobRun(cfg, out_dir, **kwargs).run()
