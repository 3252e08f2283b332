"""Shared pieces of the benchmark scripts: Ray start, the writer-memory sampler, run helpers.

Nothing here changes what a job does: the memory sampler watches the role actors from outside
(it asks each actor process for its PID once, through Ray's built-in ``__ray_call__``, then reads
its RSS with psutil in a background thread).
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

ROOT = Path(__file__).resolve().parents[1]
# The project as installed (editable) or as found on PYTHONPATH wins: ``PYTHONPATH=<a checkout of
# another commit>`` measures that commit (Ray workers inherit PYTHONPATH). Otherwise this checkout.
if importlib.util.find_spec("runtime") is None and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")

T = TypeVar("T")
MiB = 1024 * 1024


def console():
    """A rich console; wide when the output is a file (a background run), so tables do not wrap."""
    from rich.console import Console

    c = Console()
    if not c.is_terminal:
        c = Console(width=200, force_terminal=False)
    return c


def start_ray() -> float:
    """Starts a local Ray (or connects to ``RAY_ADDRESS``) once per script; returns the seconds taken."""
    import ray

    t = time.monotonic()
    kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"], **kwargs)
    else:
        ray.init(address="local", num_cpus=os.cpu_count() or 2, **kwargs)
    return time.monotonic() - t


@contextmanager
def checkout_of(rev: str, scratch: str) -> Iterator[str]:
    """A temporary git worktree of ``rev`` under ``scratch`` (for a benchmark of this checkout
    against another commit, side by side); removed on the way out."""
    path = os.path.join(scratch, "baseline")
    made = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", path, rev], capture_output=True, text=True, timeout=120
    )
    if made.returncode != 0:
        why = (made.stderr.strip().splitlines() or ["no reason given"])[-1]
        print(
            f"--baseline {rev}: git cannot check it out ({why}); fix: name a commit of this repository", file=sys.stderr
        )
        raise SystemExit(2)
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", path], capture_output=True, timeout=120
        )


def compile_project() -> dict[str, Any]:
    """Writes the bytecode of the project's packages (``runtime``, ``actors``) before Ray starts, as
    an installed package has it. Where ``PYTHONDONTWRITEBYTECODE`` is set no process writes
    ``__pycache__``, so every role process of every run would compile the project's sources as it
    starts (about 0.1 s of CPU each, inside the measured start of the job's processes); Python still
    reads bytecode that is there. What the environment record says about it."""
    import compileall

    import runtime

    project = Path(runtime.__file__).resolve().parents[1]
    t = time.monotonic()
    ok = all([compileall.compile_dir(str(project / pkg), quiet=1) for pkg in ("runtime", "actors")])  # both, always
    seconds = round(time.monotonic() - t, 3)
    return {"project_bytecode": "precompiled" if ok else "not all compiled", "precompile_s": seconds}


def add_workload_args(ap: Any) -> None:
    """The data-plane benchmarks' workload options, at the issue's defaults: 1M records, 4 writers,
    10 checkpoints (``ap``: an ``argparse.ArgumentParser``)."""
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--checkpoints", type=int, default=10)


def bounded(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Runs a blocking call in a thread and waits at most ``timeout_s`` for it."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    th = threading.Thread(target=body, name=f"bounded-{what[:20]}", daemon=True)
    th.start()
    th.join(timeout_s)
    if th.is_alive():
        raise TimeoutError(f"{what} did not finish within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def environment() -> dict[str, Any]:
    """Where the figures were measured: machine, versions, commit, and concurrent Ray sessions (no
    path of this machine: the results are committed)."""
    import psutil
    import pyarrow
    import ray

    import runtime

    project = str(Path(runtime.__file__).resolve().parents[1])
    try:
        rev = subprocess.run(
            ["git", "-C", project, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "-C", project, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        )
    except Exception:  # noqa: BLE001
        rev, dirty = "", None
    raylets = 0
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
            if cmd and os.path.basename(cmd[0]) == "raylet":
                raylets += 1
        except psutil.Error:
            pass
    return {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": rev or os.environ.get("COMMITLAB_COMMIT", ""),  # a git-archive snapshot has no .git
        "uncommitted_changes": dirty if rev else None,
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "python": platform.python_version(),
        "ray": ray.__version__,
        "pyarrow": pyarrow.__version__,
        "raylets_on_machine": raylets,  # > 1: another Ray session shared the cores
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
    }


def write_json(path: str, doc: Any) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2, default=str)
    os.replace(tmp, path)


class ActorMemorySampler(threading.Thread):
    """Samples the RSS and CPU time of a :class:`actors.job.JobRun`'s processes while it runs.

    It watches ``job_run.processes`` (filled as the job creates them), asks each new actor for its
    PID once (``__ray_call__``, answered by the actor's event loop even while a write task's
    mailbox is blocked), then reads ``memory_info()`` of every known PID every ``interval_s``.
    Per process: the first RSS seen (the idle worker), the peak RSS, and the peak of RSS minus
    shared pages (private memory; shared pages are the interpreter's libraries and objects
    mapped from Ray's object store); and its CPU seconds (user + system) at every sample, so a
    caller counts the CPU a span of the run took (:meth:`cpu_between`), which moves less with the
    machine's load than the span's wall time. ``record_cpu``: the report also has ``cpu_series``,
    the processes' CPU seconds summed at each sample (:func:`cpu_in_span` reads a span of it).
    """

    def __init__(
        self, job_run: Any, interval_s: float = 0.1, kinds: Iterable[str] | None = None, record_cpu: bool = False
    ) -> None:
        super().__init__(name="actor-memory-sampler", daemon=True)
        self.job_run = job_run
        self.interval_s = interval_s
        self.prefixes = tuple(kinds) if kinds else None
        self._halt = threading.Event()
        self._procs: dict[str, Any] = {}
        self._pending: dict[str, Any] = {}
        self.pids: dict[str, int] = {}
        self.first_rss: dict[str, int] = {}
        self.peak_rss: dict[str, int] = {}
        self.peak_private: dict[str, int] = {}
        self.samples = 0
        self.errors: list[str] = []
        self.cpu: dict[str, list[tuple[float, float]]] = {}  # name -> (epoch s, CPU s so far) per sample
        # the sum over the processes at each sample (a process that ended keeps its last)
        self.cpu_series: list[tuple[float, float]] = []
        self.record_cpu = record_cpu  # the report carries cpu_series

    def _wanted(self, name: str) -> bool:
        return self.prefixes is None or name.startswith(self.prefixes)

    def run(self) -> None:
        import psutil
        import ray

        while not self._halt.is_set():
            try:
                actors = dict(self.job_run.processes)
            except RuntimeError:  # resized while copied: next tick
                actors = {}
            for name, handle in actors.items():
                if self._wanted(name) and name not in self.pids and name not in self._pending:
                    try:
                        self._pending[name] = handle.__ray_call__.remote(lambda _self: os.getpid())
                    except Exception as e:  # noqa: BLE001
                        self.errors.append(f"{name}: {e}")
                        self.pids[name] = -1
            if self._pending:
                refs = list(self._pending.values())
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                ready_set = set(ready)
                for name, ref in list(self._pending.items()):
                    if ref in ready_set:
                        del self._pending[name]
                        try:
                            pid = int(ray.get(ref, timeout=1))
                            self.pids[name] = pid
                            self._procs[name] = psutil.Process(pid)
                        except Exception as e:  # noqa: BLE001 - a killed actor
                            self.errors.append(f"{name}: {type(e).__name__}")
                            self.pids[name] = -1
            for name, proc in list(self._procs.items()):
                try:
                    mi = proc.memory_info()
                    ct = proc.cpu_times()
                    self.cpu.setdefault(name, []).append((time.time(), ct.user + ct.system))
                except psutil.Error:
                    del self._procs[name]
                    continue
                private = mi.rss - getattr(mi, "shared", 0)
                self.first_rss.setdefault(name, mi.rss)
                self.peak_rss[name] = max(self.peak_rss.get(name, 0), mi.rss)
                self.peak_private[name] = max(self.peak_private.get(name, 0), private)
            self.cpu_series.append((time.time(), sum(series[-1][1] for series in self.cpu.values())))
            self.samples += 1
            self._halt.wait(self.interval_s)

    def stop(self, timeout_s: float = 5.0) -> dict[str, Any]:
        self._halt.set()
        self.join(timeout_s)
        return self.report()

    def cpu_between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds each sampled process spent from epoch ``start`` to ``end``: from its last
        sample at or before ``start`` (its first sample when it came up later) to its first sample
        at or after ``end`` (its last when it ended before), so within a sample interval each side."""
        out = {}
        for name, series in self.cpu.items():
            before = [c for t, c in series if t <= start]
            after = [c for t, c in series if t >= end]
            out[name] = round((after[0] if after else series[-1][1]) - (before[-1] if before else series[0][1]), 3)
        return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))

    def report(self) -> dict[str, Any]:
        def mib(d: dict[str, int]) -> dict[str, float]:
            return {k: round(v / MiB, 1) for k, v in sorted(d.items(), key=lambda kv: _natural(kv[0]))}

        managers = {k: v for k, v in self.peak_rss.items() if k.startswith("taskmanager-")}
        managers_private = {k: v for k, v in self.peak_private.items() if k.startswith("taskmanager-")}
        out: dict[str, Any] = {
            "interval_s": self.interval_s,
            "samples": self.samples,
            "peak_rss_mib": mib(self.peak_rss),
            "peak_private_mib": mib(self.peak_private),
            "first_rss_mib": mib(self.first_rss),
        }
        if managers:
            vals = list(managers.values())
            out["task_manager_peak_rss_mib"] = mib(managers)
            out["task_manager_peak_rss_mean_mib"] = round(sum(vals) / len(vals) / MiB, 1)
            out["task_manager_peak_rss_max_mib"] = round(max(vals) / MiB, 1)
            pv = list(managers_private.values())
            out["task_manager_peak_private_mean_mib"] = round(sum(pv) / len(pv) / MiB, 1)
            firsts = [self.first_rss[k] for k in managers if k in self.first_rss]
            if firsts:
                out["task_manager_first_rss_mean_mib"] = round(sum(firsts) / len(firsts) / MiB, 1)
        if self.errors:
            out["errors"] = self.errors[:20]
        if self.record_cpu:
            out["cpu_series"] = [(round(t, 3), round(c, 3)) for t, c in self.cpu_series]
        return out


def cpu_in_span(series: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """From an :class:`ActorMemorySampler` report's ``cpu_series``: the CPU seconds its processes
    spent from epoch ``t0`` to ``t1`` (linear between samples; None when the samples do not span both)."""
    if len(series) < 2 or not series[0][0] <= t0 <= t1 <= series[-1][0]:
        return None

    def at(t: float) -> float:
        for (ta, ca), (tb, cb) in zip(series, series[1:], strict=False):
            if ta <= t <= tb:
                return ca + (cb - ca) * ((t - ta) / (tb - ta) if tb > ta else 1.0)
        return series[-1][1]

    return at(t1) - at(t0)


def _natural(name: str) -> tuple[str, int]:
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)


def run_job_sampled(
    cfg: Any,
    out_dir: str | None = None,
    *,
    interval_s: float = 0.1,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    sample_kinds: Iterable[str] | None = None,
    record_cpu: bool = False,
) -> tuple[JobResult, dict[str, Any], float]:
    """``actors.job.run_job`` with the memory sampler alongside: (result, memory, wall seconds);
    ``memory["run_phase_cpu_s"]``: the CPU seconds of each sampled process in the run phase.

    Same as ``run_job`` (ensure Ray, ``JobRun(prepared(cfg), out_dir).run()``); the JobRun object is built
    here only so the sampler can see its process handles."""
    from actors.job import JobRun, ensure_ray
    from runtime.job.prepare import prepared

    job = JobRun(prepared(cfg), out_dir, on_progress=on_progress)  # the options checked before Ray starts
    ensure_ray()
    sampler = ActorMemorySampler(job, interval_s=interval_s, kinds=sample_kinds, record_cpu=record_cpu)
    sampler.start()
    t, t_epoch = time.monotonic(), time.time()  # (the job's own t0 is taken first thing in run())
    try:
        result = job.run()
    finally:
        wall = time.monotonic() - t
        memory = sampler.stop()
    tm = result.timing
    if tm.get("setup_s") is not None and tm.get("run_s") is not None:
        start = t_epoch + tm["setup_s"]
        memory["run_phase_cpu_s"] = sampler.cpu_between(start, start + tm["run_s"])
    return result, memory, wall


def error_row(exc: BaseException, t0: float) -> dict[str, Any]:
    """A benchmark point that raised (``t0``: its ``time.monotonic()`` start): the error, the end
    of its traceback and its wall time, so one failed point does not lose the others."""
    import traceback

    return {
        "status": "error",
        "error": f"{type(exc).__name__}: {exc}"[:2000],
        "traceback": traceback.format_exc()[-4000:],
        "wall_s": round(time.monotonic() - t0, 3),
    }


def save_figure(fig: Any, path: str, dpi: int = 90) -> str:
    """Lays out, writes and closes a matplotlib figure; returns ``path``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
