"""The local Ray cluster a command starts: its start (its head processes in process groups of their
own, the command's SIGTERM handler kept through ``ray.init``), the mark that says this project
started it, and the reaping of what a predecessor killed with ``kill -9`` left behind.

Ray ties its head processes (GCS, raylet, monitor, dashboard head, log monitor) to the driver that
started them (the kernel's parent-death signal), but the raylet's agents (the dashboard agent, the
runtime-env agent) outlive it. The next local start finds the sessions this project marked whose
driver is gone, and ends the processes that still name that session's directory. A cluster given
by ``RAY_ADDRESS`` (or any session without the mark, such as a ``ray start`` cluster) is never
touched.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import ray

# Ray's command-line logger runs colorama.init() when first imported (during ray.init), and
# colorama resets at exit whatever standard output was then. Imported here, before the command
# line moves standard output into the engines' log, it holds the real one, not a stream that is
# closed by exit time ("Exception ignored in atexit callback ... I/O operation on closed file").
import ray.autoscaler._private.cli_logger  # noqa: F401
from ray._private import auto_init_hook
from ray._private import services as ray_services
from ray._private import utils as ray_utils

log = logging.getLogger(__name__)

DRIVER_MARK = "commitlab-driver.json"  # in the session directory of a cluster this project started
REAP_TIMEOUT_S = 5.0  # a process that ignores SIGTERM this long is killed


_RAY_INIT_LOCK = threading.Lock()  # the fault matrix runs jobs from two threads
_LOST: list[str] = []  # the head's GCS this driver lost (actors.cluster_watch): Ray is not asked to shut down


def mark_cluster_lost(gcs_address: str) -> None:
    """The driver lost its cluster's head: :func:`end_own_ray` ends a local Ray's processes and
    does not ask Ray to shut down, which would wait on a GCS that is gone or stopped."""
    _LOST.append(gcs_address)


def ensure_ray(num_cpus: int | None = None) -> bool:
    """Connects to ``RAY_ADDRESS`` if set, else starts a local Ray. Returns True if started here.
    Either way Ray's processes do not print on the driver's terminal (``log_to_driver=False``):
    their lines stay in the session's log files."""
    with _RAY_INIT_LOCK:
        if ray.is_initialized():
            return False
        address = os.environ.get("RAY_ADDRESS")
        # Ray's future default (no accelerator variables overridden on CPUs), without its warning
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        # no implicit ray.init in Ray's processes (they inherit this): an actor whose raylet a
        # signal ended would otherwise start a whole new local Ray of its own, left running
        os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
        kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
        with _sigterm_kept():
            if address:
                ray.init(address=address, **kwargs)
            else:
                # a new embedded Ray, even when a `ray start` cluster runs on this machine
                start_local_ray(num_cpus or os.cpu_count() or 2, **kwargs)
        return True


@contextlib.contextmanager
def _sigterm_kept() -> Iterator[None]:
    """The command's SIGTERM handler (a stopped run writes its record) answers throughout
    ``ray.init``. Ray 2.50.1 replaces it twice: ``ray._private.worker.init`` first sets
    ``sys.exit(15)`` and the head node's start ``sys.exit(1)`` (both through
    ``ray._private.utils.set_sigterm_handler``, a no-op here meanwhile); then the driver's core
    worker (``ray._raylet.CoreWorker``) installs absl's failure signal handler, which passes a
    SIGTERM on to the handler it found but arms a 3 s alarm that aborts the process (SIGABRT), so
    the command's handler is set again the moment the core worker exists (and disarms that alarm:
    :func:`runtime.cli.terminal.interruptible`)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread sets handlers, Ray's init included
        return
    mine = signal.getsignal(signal.SIGTERM)
    raylet: Any = ray._raylet  # a compiled module: its attributes are not typed
    setter, core_worker = ray_utils.set_sigterm_handler, raylet.CoreWorker

    def core_worker_keeping_mine(*args: Any, **kwargs: Any) -> Any:
        try:
            return core_worker(*args, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, mine)

    ray_utils.set_sigterm_handler = _keep_sigterm_handler
    raylet.CoreWorker = core_worker_keeping_mine
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler, raylet.CoreWorker = setter, core_worker
        signal.signal(signal.SIGTERM, mine)


def _keep_sigterm_handler(_handler: Callable[[int, Any], object]) -> None:
    """Ray's ``set_sigterm_handler`` while ``ray.init`` runs: the command's handler stays."""


class _OwnGroupPopen(ray_services.ConsolePopen):
    """How Ray starts its head processes (GCS, raylet, dashboard, log monitor) while this driver
    starts a local Ray: each in a process group of its own (the raylet's workers and agents join
    the raylet's). A signal to the terminal's process group (Ctrl-C, SIGTERM to a service's group,
    SIGHUP) then reaches the driver alone, which stops the job, writes its record from live actors
    and ends Ray (:func:`end_own_ray`); before, it ended the GCS and the raylet under a driver still
    connecting to them, whose calls then hung until Ray ended it (exit 1 after a minute)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("process_group", 0)
        super().__init__(*args, **kwargs)


@contextlib.contextmanager
def _ray_in_own_groups() -> Iterator[None]:
    services: Any = ray_services  # the class it names is replaced while Ray starts
    started_with = services.ConsolePopen
    services.ConsolePopen = _OwnGroupPopen
    try:
        yield
    finally:
        services.ConsolePopen = started_with


def start_local_ray(num_cpus: int, **kwargs: Any) -> list[int]:
    """A new local Ray cluster for this driver, after reaping the leftovers of dead predecessors;
    returns the process ids reaped."""
    reaped = reap_orphaned_sessions()
    with _ray_in_own_groups():
        ray.init(address="local", num_cpus=num_cpus, **kwargs)
    mark_session(_session_dir())
    return reaped


@contextlib.contextmanager
def ray_scope() -> Iterator[None]:
    """Shuts Ray down on exit only if it was not running on entry (as :func:`actors.spark.spark_scope`
    does for Spark): inside the command's engines' log, so what Ray prints as it stops goes there
    rather than to the terminal after the command's last line."""
    owned = not ray.is_initialized()
    try:
        yield
    finally:
        if owned:
            end_own_ray()


def end_own_ray() -> None:
    """Shuts down the Ray this driver started, then ends what the shutdown left: the processes
    naming its session (the raylet's agents outlive a raylet a signal ended) and every process
    this driver started that still runs (a start a signal interrupted: Ray's, Spark's). A second
    signal's interruption (a KeyboardInterrupt, one per command) does not cut this short: each
    step is done, then the interruption goes on."""
    started = [p for p in psutil.Process().children(recursive=True) if _an_engine(p)]
    session = own_session_dir()
    # the session its processes name, known before the driver's mark (a stop while ray.init ran):
    # the raylet's agents it spawned after ``started`` was listed outlive it, orphaned
    named = session_names(started)
    # a call after the shutdown (RayDP's start, still under way in its thread after a signal)
    # must not start a new local Ray, which would print on the terminal and outlive the command
    auto_init_hook.enable_auto_connect = False
    ending: list[Callable[[], object]] = [lambda: _end_processes([p for p in started if p.is_running()])]
    if session:
        ending.insert(0, lambda: _end_processes_naming(session))
    ending += [functools.partial(_end_processes_naming, name) for name in sorted(named)]
    shutdown: list[Callable[[], object]] = [ray.shutdown] if ray.is_initialized() and not _LOST else []
    # a Ray whose GCS or raylet a signal ended is ended first: its shutdown waits on them, and Ray
    # may end the driver meanwhile (a minute after its GCS went)
    steps = shutdown + ending if local_ray_alive() else ending + shutdown
    interrupted: KeyboardInterrupt | None = None
    for step in steps:
        try:
            step()
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted is not None:
        for step in ending:  # once more: the interruption may have cut one short
            step()
        raise interrupted


def own_session_dir() -> str | None:
    """The session directory of the local Ray this driver started (marked by it), else None (a
    cluster given by ``RAY_ADDRESS``, or Ray not running)."""
    try:
        session = _session_dir()
        owner = json.loads(Path(session, DRIVER_MARK).read_text())
    except (AttributeError, OSError, ValueError):
        return None
    return session if owner.get("pid") == os.getpid() else None


def local_ray_alive() -> bool:
    """False once the local Ray this driver started lost its GCS or raylet (killed, or ended by a
    signal sent to them: a signal to the terminal's process group no longer reaches them, see
    :class:`_OwnGroupPopen`): then no actor can answer and a call would wait for its bound. True for
    a cluster given by ``RAY_ADDRESS`` (not ours to judge)."""
    return local_ray_ended() is None


def local_ray_ended() -> str | None:
    """Which of the local Ray's GCS and raylet this driver started has exited, in words, or None
    (:func:`local_ray_alive`). Without GCS fault tolerance nothing starts them again."""
    node: Any = getattr(ray._private.worker, "_global_node", None)
    if node is None or own_session_dir() is None:
        return None
    for kind in ("gcs_server", "raylet"):
        for info in node.all_processes.get(kind, []):
            code = info.process.poll() if info.process is not None else None
            if code is not None:
                return f"its {kind} process (pid {info.process.pid}) exited (status {code})"
    return None


def mark_session(session_dir: str) -> None:
    """Records this driver (its pid and start time) as the owner of ``session_dir``."""
    me = psutil.Process()
    Path(session_dir, DRIVER_MARK).write_text(json.dumps({"pid": me.pid, "started": me.create_time()}))


def reap_orphaned_sessions(temp_dir: str | None = None) -> list[int]:
    """Ends the processes of every marked session under Ray's temp directory whose driver is dead."""
    root = Path(temp_dir or _ray_temp_dir())
    reaped: list[int] = []
    for mark in sorted(root.glob(f"session_*/{DRIVER_MARK}")):
        if mark.parent.is_symlink() or _driver_alive(mark):  # session_latest names another session
            continue
        try:  # claimed first, so two starting drivers do not both reap it
            mark.rename(mark.with_suffix(".reaped"))
        except OSError:
            continue
        session_dir = str(mark.parent)
        pids = _end_processes_naming(session_dir)
        if pids:
            log.warning("ended %d process(es) left by a dead driver of %s: %s", len(pids), session_dir, pids)
        reaped += pids
    return reaped


def _driver_alive(mark: Path) -> bool:
    try:
        owner = json.loads(mark.read_text())
        proc = psutil.Process(int(owner["pid"]))
        # the same pid with another start time is another process: the driver is gone
        same_process = abs(proc.create_time() - float(owner["started"])) < 1.0
        return same_process and bool(proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, OSError, ValueError, KeyError, TypeError):
        return False


def _end_processes_naming(session_dir: str) -> list[int]:
    """SIGTERM, then SIGKILL after :data:`REAP_TIMEOUT_S`, to this user's processes whose command
    line names ``session_dir`` (the flag every Ray process of the session is started with)."""
    procs = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = proc.info.get("cmdline") or []
        except psutil.Error:
            continue
        if proc.pid != os.getpid() and any(session_dir in arg for arg in cmdline):
            procs.append(proc)
    return _end_processes(procs)


def session_names(procs: list[psutil.Process]) -> set[str]:
    """The Ray sessions ``procs`` run in (``--session-name``, a flag of the GCS, the raylet and the
    agents): unique names, one per ``ray.init`` that started a node."""
    names: set[str] = set()
    for proc in procs:
        try:
            names.update(arg.split("=", 1)[1] for arg in proc.cmdline() if arg.startswith("--session-name=session_"))
        except psutil.Error:
            continue
    return names


def _an_engine(proc: psutil.Process) -> bool:
    """A process of Ray's (its head processes, workers, agents) or a JVM (Spark's)."""
    try:
        cmdline = " ".join(proc.cmdline())
        return proc.name() == "java" or "/ray/" in cmdline or cmdline.startswith("ray::")
    except psutil.Error:
        return False


def _end_processes(procs: list[psutil.Process]) -> list[int]:
    """SIGTERM, then SIGKILL to what is left after :data:`REAP_TIMEOUT_S`."""
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=REAP_TIMEOUT_S)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return [p.pid for p in procs]


def _ray_temp_dir() -> str:
    """Where Ray keeps its sessions: ``$RAY_TMPDIR/ray``, else ``$TMPDIR/ray``, else ``/tmp/ray``
    (ray._common.utils.get_ray_temp_dir)."""
    return os.path.join(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp", "ray")


def _session_dir() -> str:
    node: Any = ray._private.worker._global_node  # the node this driver started
    return str(node.get_session_dir_path())
