"""Launches one job on Ray: creates the role actors, supervises the run, gathers the results.

The driver only supervises: it starts the actors, waits for the job manager's loop with a bound,
polls every write task's introspection for the deadlock watchdog, and at the end collects counters,
commits and traces, verifies the table with the official reader and writes ``result.json``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray

from actors import cluster_info
from actors.placement import Placement
from actors.role_actor import RoleActor
from actors.stream_plan import plan_stream
from runtime.core import codec
from runtime.core.config import JobConfig
from runtime.core.dfs import DfsCounters, open_dfs
from runtime.core.storage import redact
from runtime.core.trace import write_trace
from runtime.flink.state_backend import StateBackend
from runtime.hudi.table import HudiTable, TableProps
from runtime.lab.deadlock import find_deadlock, find_stalls
from runtime.lab.results import run_figures
from runtime.lab.verify import verify_run
from runtime.protocols import PROTOCOLS
from runtime.writer.failover import region_failover_applies, resume_checkpoint_id, resume_plan, resume_summary

POLL_S = 0.25


_RAY_INIT_LOCK = threading.Lock()  # the fault matrix runs jobs from two threads


def ensure_ray(num_cpus: int | None = None) -> bool:
    """Connects to ``RAY_ADDRESS`` if set, else starts a local Ray. Returns True if started here."""
    with _RAY_INIT_LOCK:
        return _init_ray(num_cpus)


def _init_ray(num_cpus: int | None) -> bool:
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
    if address:
        ray.init(address=address, **kwargs)
    else:
        # "local": a new embedded Ray, even when a `ray start` cluster runs on this machine
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 2, **kwargs)
    return True


class JobRun:
    """One run of a job; ``run()`` returns the result record."""

    def __init__(
        self,
        cfg: JobConfig,
        out_dir: str | None = None,
        *,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        trace_path: str | None = None,
        timeline: bool = True,
    ) -> None:
        self.cfg = cfg.validate(list(PROTOCOLS))
        self.out_dir = out_dir
        self.on_progress = on_progress
        self.trace_path = trace_path
        self.timeline = timeline  # timeline.png in out_dir (it needs every role's trace events)
        self.namespace = f"commitlab-{uuid.uuid4().hex[:8]}"
        self.task_names = [f"writer-{i}" for i in range(cfg.writers)]
        self.source_names = [f"source-{i}" for i in range(cfg.writers)]
        self.actors: dict[str, Any] = {}
        self._fresh: set[str] = set()
        self.placement: Placement | None = None

    def _create(self, kind: str, name: str, props: TableProps, extra: dict[str, Any]) -> Any:
        extra_opts = self.placement.options(name) if self.placement else {}
        actor = RoleActor.options(name=name, namespace=self.namespace, **extra_opts).remote(
            kind, name, codec.encode(self.cfg), props.__dict__, extra
        )
        self.actors[name] = actor
        self._fresh.add(name)
        return actor

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.time()
        counters = DfsCounters()
        endpoint_before = cluster_info.endpoint_counts(cfg.table)  # what an S3 endpoint serves
        dfs, base = open_dfs(cfg.table, role="driver", counters=counters)
        cluster_info.check_storage(dfs, cfg.table)  # an unreachable endpoint or missing bucket
        props = TableProps(cfg.table_name, cfg.key_field, cfg.partition_field, cfg.precombine_field)
        HudiTable.check_compatible(dfs, base, props)  # a foreign or mismatched table: fail early
        plan = plan_stream(cfg)  # bad input fails here, before anything is written
        table = HudiTable.create_or_open(dfs, base, props)
        self.cfg = cfg = plan.config
        self.plan, self.props, self.table = plan, props, table
        self.state_backend = StateBackend(dfs, base)
        self.state_backend.clear()  # checkpoints of an earlier job on this table are not ours
        self._clear_fault_markers(dfs, base)
        self.commits_before = set(table.timeline().completed_commits())
        self.prior_metrics: list[dict[str, Any]] = []
        self.prior_checkpoints: dict[str, Any] = {}
        self.failovers: list[dict[str, Any]] = []
        self.stacks_at_timeout: dict[str, Any] = {}  # filled when the job times out
        self.last_triggered = 0

        t_started = time.time()
        self.t_actors_up: float | None = None
        deadline = time.time() + cfg.job_timeout_s
        self.placement = Placement(cfg.placement, cfg.writers)
        error: str | None = None
        while True:
            try:
                if error is None:
                    self._launch(restore=None)
                else:
                    self._failover(error, region=self._region_failover_possible())
                status, error, deadlock, stalls = self._supervise(deadline)
            except (
                ray.exceptions.RayTaskError,
                ray.exceptions.RayActorError,
                ray.exceptions.GetTimeoutError,
            ) as exc:  # a role failed while starting
                status, error, deadlock, stalls = "failed", _root_cause(exc), None, []
            if status == "failed" and len(self.failovers) < cfg.max_restarts:
                continue
            break
        t_end = time.time()
        if status == "finished":
            # let the sources push end-of-input so every mailbox loop ends cleanly
            ray.get([self.actors[n].source_done.remote(5.0) for n in self.source_names], timeout=30)

        result = self._collect(status, error, deadlock, stalls, counters, t0, t_started, t_end)
        placed = cluster_info.run_placement(self.actors, cfg.placement, self.t_actors_up, t_started)
        result["timing"]["actors_up_s"] = placed.pop("actors_up_s")
        result.update(placed)
        result["dfs_endpoint"] = cluster_info.endpoint_served(cfg.table, endpoint_before)
        if status == "finished":
            result["exactly_once"] = verify_run(_reader_uri(cfg.table), self.plan.expected, cfg.key_field)
        else:
            result["exactly_once"] = None
        self._shutdown()
        if self.out_dir:
            os.makedirs(self.out_dir, exist_ok=True)
            if self.trace_events:
                from runtime.lab.timeline_plot import plot_timeline

                try:  # a picture must never fail a run
                    result["timeline"] = plot_timeline(
                        self.trace_events,
                        os.path.join(self.out_dir, "timeline.png"),
                        title=f"{cfg.protocol}, {cfg.writers} writers: {result['status']}",
                        deadlock=result["deadlock"],
                        checkpoints=result["checkpoints"],
                    )
                except Exception as exc:
                    result["timeline_error"] = f"{type(exc).__name__}: {exc}"
            with open(os.path.join(self.out_dir, "result.json"), "w") as f:
                json.dump(result, f, indent=2, default=str)
        return result

    def _clear_fault_markers(self, dfs, base: str) -> None:
        from runtime.faults.injector import faults_path

        if dfs.exists(faults_path(base)):
            dfs.delete(faults_path(base), recursive=True)

    def _launch(self, restore: Any) -> None:
        """Creates and starts the roles; ``restore`` is the completed checkpoint to resume from
        after a failover (None: a fresh start, or a failover before any checkpoint completed)."""
        cfg, plan, props = self.cfg, self.plan, self.props
        trace = self.trace_path is not None or (self.out_dir is not None and self.timeline)
        faults = codec.encode(cfg.faults) if cfg.faults else b""
        common = {"trace": trace, "faults": faults}
        resume = {}
        protocol = PROTOCOLS[cfg.protocol]
        if self.failovers:
            restore, resume = resume_plan(cfg, self.last_triggered, restore)
        for kind in protocol.extra_roles:  # protocol roles first: the coordinator may call them
            if kind not in self.actors:  # they outlive a failover (the control topic is Kafka)
                self._create(kind, kind, props, dict(common))
        if "coordinator" not in self.actors:  # a region failover keeps it
            self._create(
                "coordinator",
                "coordinator",
                props,
                {
                    **common,
                    "schema_json": plan.schema_json,
                    "resume_checkpoint_id": resume.get("resume_checkpoint_id", 0),
                },
            )
        coord = self.actors["coordinator"]
        jm = self._create(
            "job-manager",
            "job-manager",
            props,
            {**common, **{k: v for k, v in resume.items() if k.startswith("start_")}},
        )
        states = restore.states if restore is not None else {}
        for i, name in enumerate(self.task_names):
            extra = {**common, "task_id": i}
            if self.failovers:
                extra["resume_checkpoint_id"] = resume["resume_checkpoint_id"]
                extra["restored_state"] = states.get(name)
            self._create("writer", name, props, extra)
        for i, name in enumerate(self.source_names):
            extra = {**common, "task_id": i, "writer": self.task_names[i], **plan.shard_args[i]}
            if self.failovers:
                src_state = states.get(name)
                offset = codec.decode(src_state).offset if src_state else 0
                extra.update(start_round=resume["start_round"], start_offset=offset)
            self._create("source", name, props, extra)
        handles = dict(self.actors)
        start_timeout = max(60.0, cfg.rpc_timeout_s)
        names = (self.task_names, self.source_names)
        ray.get(
            [self.actors[k].start.remote(handles, *names) for k in protocol.extra_roles if k in self._fresh],
            timeout=start_timeout,
        )
        if "coordinator" in self._fresh:
            ray.get(coord.start.remote(handles, *names), timeout=start_timeout)
        else:  # kept through a region failover: it must reach the new tasks
            ray.get(coord.rebind.remote(handles), timeout=start_timeout)
        ray.get(jm.start.remote(handles, *names), timeout=start_timeout)
        if "coordinator" in self._fresh:
            ray.get([self.actors[n].start.remote(handles, *names) for n in self.task_names], timeout=start_timeout)
            self.jm_ref = jm.run.remote()
            ray.get([self.actors[n].start.remote(handles, *names) for n in self.source_names], timeout=start_timeout)
        else:
            # a region failover deploys the region's tasks together, as Flink does: a source may
            # feed its task while another task has not bootstrapped yet (the HUDI-6194 window)
            tasks = [self.actors[n].start.remote(handles, *names) for n in self.task_names]
            self.jm_ref = jm.run.remote()
            sources = [self.actors[n].start.remote(handles, *names) for n in self.source_names]
            ray.get(tasks + sources, timeout=start_timeout)
        self._fresh = set()
        self.t_actors_up = self.t_actors_up or time.time()

    def _supervise(self, deadline: float) -> tuple[str, str | None, Any, list[dict[str, Any]]]:
        """Waits for the job manager's loop, watching for deadlocks, dead actors and the time limit."""
        cfg = self.cfg
        stalls: list[dict[str, Any]] = []
        last_progress = 0.0
        while True:
            ready, _ = ray.wait([self.jm_ref], timeout=POLL_S)
            if ready:
                try:
                    ray.get(self.jm_ref)
                    return "finished", None, None, stalls
                except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
                    return "failed", _root_cause(exc), None, stalls
            dumps = self._dumps()
            dead = sorted(n for n, d in dumps.items() if str(d.get("state", "")).startswith("unreachable"))
            if dead:
                return "failed", f"{', '.join(dead)} died ({dumps[dead[0]]['state']})", None, stalls
            deadlock = find_deadlock(dumps, cfg.deadlock_threshold_s)
            if deadlock is not None:
                return "deadlocked", None, deadlock, stalls
            stalls = find_stalls(dumps, cfg.deadlock_threshold_s)
            if time.time() > deadline:
                waiting = self._describe("job-manager").get("waiting_for") or "?"
                self.stacks_at_timeout = self._stacks(("job-manager", "coordinator"))
                return (
                    "timed-out",
                    f"the job did not finish within job_timeout_s={cfg.job_timeout_s}s; "
                    f"the job manager was waiting for {waiting}; stalled tasks: {stalls or 'none'}",
                    None,
                    stalls,
                )
            if self.on_progress and time.time() - last_progress > 0.5:
                last_progress = time.time()
                self.on_progress(self._progress())

    def _region_failover_possible(self) -> bool:
        if self.cfg.failover != "region":
            return False
        try:
            coord = ray.get(self.actors["coordinator"].describe.remote(), timeout=5)
        except Exception:
            return False  # the coordinator died with the tasks: restart everything
        return region_failover_applies(self.cfg, coordinator_sound=not coord.get("error"))

    def _failover(self, error: str | None, *, region: bool = False) -> None:
        """Restarts from the last completed checkpoint. Global (Flink's restart-all strategy):
        every task, source, the coordinator and the job manager. Region: the write tasks, their
        sources and the job manager's checkpointing; the coordinator keeps running, is told to
        reset, and re-initialises once every task has bootstrapped again."""
        restore = self.state_backend.latest()
        try:
            jm = ray.get(self.actors["job-manager"].describe.remote(), timeout=5)
            self.last_triggered = max([self.last_triggered, jm.get("current", 0)] + [int(k) for k in jm["checkpoints"]])
            self.prior_checkpoints.update({str(k): v for k, v in jm["checkpoints"].items()})
        except Exception:
            pass
        self.failovers.append(
            {
                "error": error,
                "at": time.time(),
                "strategy": "region" if region else "global",
                **resume_summary(self.cfg, self.last_triggered, restore),
            }
        )
        self._delete_bus_if_armed()
        keep = set(PROTOCOLS[self.cfg.protocol].extra_roles) | ({"coordinator"} if region else set())
        for name, actor in list(self.actors.items()):
            if name in keep:
                continue
            try:
                self.prior_metrics.append(ray.get(actor.metrics.remote(), timeout=5))
            except Exception:
                pass  # a dead actor's counters are lost with it
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
            del self.actors[name]
        self._wait_names_free([n for n in self._role_names() if n not in keep])
        if region:
            from runtime.core.codec import from_wire, to_wire
            from runtime.core.messages import TasksReset

            notice = TasksReset(resume_checkpoint_id(self.last_triggered, restore), error or "")
            reply = ray.get(
                self.actors["coordinator"].deliver.remote("reset_tasks", to_wire(notice), "driver"),
                timeout=max(30.0, self.cfg.rpc_timeout_s),
            )
            self.failovers[-1]["coordinator_reset"] = from_wire(reply)
        self._launch(restore)

    def _role_names(self) -> list[str]:
        return self.task_names + self.source_names + ["coordinator", "job-manager"]

    def _delete_bus_if_armed(self) -> None:
        """The bus.deleted_between_restarts fault: once its task crash fired, the message bus is
        removed while the job is down (#8060, #8120), before anything restarts."""
        from runtime.faults.injector import FaultInjector
        from runtime.hudi.dfs_message_bus import message_bus_path

        specs = [s for s in self.cfg.faults if s.point == "bus.deleted_between_restarts"]
        if not specs or any("deleted" in f for f in self.failovers[:-1]):
            return  # not armed, or the bus went at an earlier failover already
        dfs, base = self.table.dfs, self.table.base_path
        path = message_bus_path(base)
        if FaultInjector(specs, "driver", dfs, base).has_fired(specs[0]) and dfs.exists(path):
            dfs.delete(path, recursive=True)
            self.failovers[-1]["deleted"] = path[len(base) :].lstrip("/")  # relative: results travel

    def _wait_names_free(self, names: list[str], timeout: float = 30.0) -> None:
        """Killed named actors release their names asynchronously; wait (bounded) before reuse."""
        end = time.time() + timeout
        for name in names:
            while time.time() < end:
                try:
                    ray.get_actor(name, namespace=self.namespace)
                except ValueError:
                    break
                time.sleep(0.05)
            else:
                raise TimeoutError(f"the killed actor {name!r} still holds its name after {timeout}s")

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
        coord = self._describe("coordinator")
        jm = self._describe("job-manager")
        dumps = self._dumps()
        checkpoints = {**self.prior_checkpoints, **{str(k): v for k, v in jm.get("checkpoints", {}).items()}}
        figures = run_figures(
            [m for m in metrics.values() if "error" not in m] + self.prior_metrics,
            driver_counters.snapshot(),
            coord,
            checkpoints,
            dumps,
            cfg.checkpoints,
        )
        rows_in = figures["rows_in"]
        self.trace_events: list[dict[str, Any]] = []
        if self.trace_path or (self.out_dir and self.timeline):
            for n in names:
                try:
                    self.trace_events += ray.get(self.actors[n].trace_events.remote(), timeout=10)
                except Exception:
                    pass
        if self.trace_path:
            write_trace(self.trace_path, self.trace_events)
        return {
            **figures,
            "protocol": cfg.protocol,
            "writers": cfg.writers,
            "source": cfg.source,
            "table": redact(cfg.table),
            "status": status,
            "error": error,
            "records": cfg.records,
            "commits": self._commits_of_this_job(),
            "empty_rounds": coord.get("empty_rounds", []),
            "failovers": self.failovers,
            "faults_fired": self._fired_faults(),
            "rolled_back": coord.get("rolled_back", []),
            # what the coordinator lived through: region failovers, a deleted bus, protocol state
            "coordinator": {k: coord.get(k) for k in ("resets", "deleted_by_fault", "protocol")},
            "deadlock": deadlock.to_result() if deadlock else None,
            "stalls": stalls,
            "timing": {
                **self.plan.timings,
                "setup_s": round(t_started - t0, 3),
                "run_s": round(t_end - t_started, 3),
                "total_s": round(time.time() - t0, 3),
            },
            "rows_per_s": round(rows_in / max(1e-9, t_end - t_started), 1),
            "tasks": {
                n: {k: d.get(k) for k in ("state", "error", "flushes", "protocol", "rows_in")} for n, d in dumps.items()
            },
            "send_errors": [e for m in metrics.values() for e in m.get("send_errors", [])],
            # a timed-out job: where the job manager's and the coordinator's coroutines waited
            **({"stacks_at_timeout": self.stacks_at_timeout} if self.stacks_at_timeout else {}),
        }

    def _stacks(self, names: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            try:
                out[name] = ray.get(self.actors[name].stacks.remote(), timeout=10)
            except Exception as exc:
                out[name] = {"error": f"{name} unreachable: {type(exc).__name__}"}
        return out

    def _describe(self, name: str) -> dict[str, Any]:
        try:
            return ray.get(self.actors[name].describe.remote(), timeout=10)
        except Exception as exc:
            return {"error": f"{name} unreachable: {type(exc).__name__}"}

    def _commits_of_this_job(self) -> list[dict[str, Any]]:
        """The commits this job made, read from the table itself: they survive any failover."""
        return self.table.commit_summaries(skip=self.commits_before)

    def _fired_faults(self) -> list[dict[str, Any]]:
        """Every fault that fired, in order, from the markers the injectors left on the DFS."""
        from runtime.faults.injector import faults_path

        path = faults_path(self.table.base_path)
        try:
            entries = self.table.dfs.list_dir(path)
        except Exception:
            return []
        fired = []
        fs = self.table.dfs.fs
        for e in entries:
            info = fs.get_file_info(e.path)
            with fs.open_input_stream(e.path) as f:
                role = f.read().decode(errors="replace").split(" ")[0]
            key = e.name.rsplit(".", 1)[0]  # point@checkpoint#task[:target]
            key, _, target = key.partition(":")
            point, _, rest = key.partition("@")
            ckp, _, task = rest.partition("#")
            fired.append(
                {
                    "point": point,
                    "role": role,
                    "checkpoint": int(ckp),
                    "task": int(task),
                    "at": info.mtime.timestamp() if info.mtime else 0.0,
                    **({"target": target} if target else {}),
                }
            )
        return sorted(fired, key=lambda f: f["at"])

    def _shutdown(self) -> None:
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        self.actors.clear()
        if self.placement is not None:
            self.placement.remove()


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
    return {
        "p50_s": round(float(np.percentile(a, 50)), 6),
        "p99_s": round(float(np.percentile(a, 99)), 6),
        "samples": n,
    }


def run_job(cfg: JobConfig, out_dir: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """Runs a job on the current Ray cluster (starting a local one if needed)."""
    ensure_ray()
    return JobRun(cfg, out_dir, **kwargs).run()
