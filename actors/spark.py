"""Start and stop the one Spark session (PySpark on Ray through RayDP) that prepares the stream.

Spark runs *inside* the current Ray cluster: RayDP starts an app master actor and executor actors,
so a DataFrame can be handed to Ray's object store (``ray.data.from_spark``) without passing
through the driver. Starting it costs 10-20 s on a 2-core box, so a process (a test session, a
benchmark, the CLI) starts it once with :func:`start_spark` and stops it once with
:func:`stop_spark`; repeated calls return the running session.

Java 17 needs ``--add-opens`` flags on the driver, the executors *and* the RayDP app master,
otherwise the first Spark -> Ray transfer kills the app master (see ``STACK.md``); this module
always passes them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported lazily at run time: pyspark/raydp take ~1 s to import
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

JAVA_FIX = "install OpenJDK 17: apt-get install openjdk-17-jre-headless, or set JAVA_HOME to a JDK >= 17"

# Packages of java.base that Spark, Arrow and Ray's Java serializer reflect into (STACK.md).
_OPENS = (
    "java.lang",
    "java.lang.invoke",
    "java.io",
    "java.net",
    "java.nio",
    "java.math",
    "java.text",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
)
JAVA_OPTIONS: str = " ".join(
    ["-XX:+IgnoreUnrecognizedVMOptions"] + [f"--add-opens=java.base/{m}=ALL-UNNAMED" for m in _OPENS]
)

# How long start_spark waits for RayDP (app master + executors + driver JVM) before giving up.
DEFAULT_START_TIMEOUT_S = 180.0


class SparkStartError(RuntimeError):
    """Spark on Ray could not be started; the message names the cause and the fix."""


@dataclass
class SparkConfig:
    """Resources and extra configs of the RayDP Spark cluster (defaults fit a 2-core box).

    ``extra_configs`` override the module's defaults (``spark.*`` keys); the Java options are
    always appended, never replaced, so a user's ``-D`` flag does not drop the ``--add-opens``.
    """

    executors: int = 1
    executor_cores: int = 1
    executor_memory: str = "1G"
    app_name: str = "commitlab"
    extra_configs: dict[str, str] = field(default_factory=dict)


_lock = threading.Lock()
_session: SparkSession | None = None
_session_cfg: SparkConfig | None = None
_last_start_seconds: float | None = None


def _java_binary() -> str:
    """The ``java`` Spark will launch: ``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return os.path.join(java_home, "bin", "java")
    return shutil.which("java") or "java"


def _parse_java_major(text: str) -> int | None:
    """Major version from ``java -version`` output: '1.8.0_292' -> 8, '17.0.15' -> 17, '21' -> 21."""
    m = re.search(r'version "([^"]+)"', text)
    if not m:
        return None
    parts = re.split(r"[._+-]", m.group(1))
    try:
        major = int(parts[0])
        if major == 1 and len(parts) > 1:
            major = int(parts[1])
    except ValueError:
        return None
    return major


def check_java(min_major: int = 17) -> str:
    """Return the Java version string (e.g. ``"17.0.15"``) or raise :class:`SparkStartError`.

    Checked before starting Spark because a missing or old JVM otherwise surfaces as an opaque
    ``JAVA_GATEWAY_EXITED`` or a dead RayDP actor.
    """
    java = _java_binary()
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']}" if os.environ.get("JAVA_HOME") else "PATH"
        raise SparkStartError(f"no java found ({java!r} via {where}); fix: {JAVA_FIX}") from None
    except subprocess.TimeoutExpired:
        raise SparkStartError(f"'{java} -version' did not answer within 30 s; fix: {JAVA_FIX}") from None
    out = (proc.stderr or "") + (proc.stdout or "")
    if proc.returncode != 0:
        raise SparkStartError(
            f"'{java} -version' failed (exit {proc.returncode}): {out.strip()[:300]}; fix: {JAVA_FIX}"
        )
    major = _parse_java_major(out)
    if major is None:
        raise SparkStartError(f"cannot parse the output of '{java} -version': {out.strip()[:300]}; fix: {JAVA_FIX}")
    version = re.search(r'version "([^"]+)"', out).group(1)  # type: ignore[union-attr]
    if major < min_major:
        raise SparkStartError(f"java {version} at {java} is too old (need >= {min_major}); fix: {JAVA_FIX}")
    return version


def spark_configs(cfg: SparkConfig) -> dict[str, str]:
    """The Spark configs passed to ``raydp.init_spark``: defaults for a small box + the Java flags."""
    confs: dict[str, str] = {
        # 2 cores: few shuffle partitions, otherwise 200 near-empty tasks dominate every query.
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": str(max(2, cfg.executors * cfg.executor_cores)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    extra = dict(cfg.extra_configs)
    java_keys = (
        "spark.driver.extraJavaOptions",
        "spark.executor.extraJavaOptions",
        "spark.ray.raydp_app_master.extraJavaOptions",
    )
    for k in java_keys:
        user = extra.pop(k, "").strip()
        confs[k] = f"{JAVA_OPTIONS} {user}".strip()
    confs.update({k: str(v) for k, v in extra.items()})
    return confs


def _alive(session: SparkSession) -> bool:
    from py4j.protocol import Py4JError

    try:
        sc = session.sparkContext
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except (Py4JError, OSError):  # the JVM went away: the gateway raises on any call
        return False


def start_spark(cfg: SparkConfig | None = None, *, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> SparkSession:
    """Start Spark on the current Ray cluster (or return the session this module already started).

    If Ray is not initialised, connects to ``$RAY_ADDRESS`` or starts a local Ray. The start is
    bounded by ``timeout_s``; its duration is logged and kept for :func:`last_start_seconds`.
    """
    global _session, _session_cfg, _last_start_seconds
    cfg = cfg or SparkConfig()
    with _lock:
        if _session is not None:
            if _alive(_session):
                if cfg != _session_cfg:
                    log.warning(
                        "start_spark: Spark already running with %s; ignoring %s "
                        "(call stop_spark() first to change it)",
                        _session_cfg,
                        cfg,
                    )
                return _session
            log.warning("start_spark: the previous Spark session died; starting a new one")
            _session = None
            _stop_raydp_quietly()

        java_version = check_java()
        # Executors start Python workers (createDataFrame from local data, UDFs) with
        # $PYSPARK_PYTHON, default "python3" on PATH, which may lack pyspark: use our interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from actors.ray_session import ensure_ray

        ensure_ray()  # RAY_ADDRESS's cluster, or a local one, as a job starts it
        configs = spark_configs(cfg)
        _check_ray_cpus(cfg, configs, timeout_s)
        t0 = time.monotonic()
        session = _init_spark_bounded(cfg, configs, timeout_s, java_version)
        _last_start_seconds = time.monotonic() - t0
        session.sparkContext.setLogLevel("WARN")
        _session, _session_cfg = session, cfg
        log.info(
            "Spark on Ray started in %.1f s (java %s, %d executor(s) x %d core(s), %s)",
            _last_start_seconds,
            java_version,
            cfg.executors,
            cfg.executor_cores,
            cfg.executor_memory,
        )
        return session


def _check_ray_cpus(cfg: SparkConfig, configs: dict[str, str], timeout_s: float) -> None:
    """Fails when the Ray cluster has fewer CPUs than the executors need; warns when they are busy."""
    import ray

    per_executor = float(configs.get("spark.ray.raydp_spark_executor.actor.resource.cpu", cfg.executor_cores))
    need = cfg.executors * per_executor
    total = ray.cluster_resources().get("CPU", 0.0)
    if need > total:
        raise SparkStartError(
            f"Spark needs {need:g} Ray CPUs ({cfg.executors} executor(s) x {per_executor:g}) but "
            f"the Ray cluster has {total:g}; fix: fewer executors/executor_cores in SparkConfig, "
            "or ray.init(num_cpus=...) with more CPUs"
        )
    free = ray.available_resources().get("CPU", 0.0)
    if need > free:
        log.warning(
            "start_spark: %g Ray CPUs free, Spark executors need %g: the start waits "
            "(up to %.0f s) for running tasks/actors to release CPUs",
            free,
            need,
            timeout_s,
        )


def _init_spark_bounded(cfg: SparkConfig, configs: dict[str, str], timeout_s: float, java_version: str) -> SparkSession:
    """raydp.init_spark in a thread, waited for at most ``timeout_s``; its failure as a SparkStartError."""
    import raydp

    result: dict[str, object] = {}

    def _init() -> None:
        try:
            result["session"] = raydp.init_spark(
                cfg.app_name,
                num_executors=cfg.executors,
                executor_cores=cfg.executor_cores,
                executor_memory=cfg.executor_memory,
                configs=dict(configs),
            )
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = e

    worker = threading.Thread(target=_init, name="raydp-init-spark", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise SparkStartError(
            f"raydp.init_spark did not return within {timeout_s:.0f} s (waiting for the RayDP "
            f"app master and {cfg.executors} executor(s) of {cfg.executor_cores} CPU each); "
            "fix: check free CPUs in ray.available_resources() and the JVM logs "
            "(session_latest/logs/java-worker-*.log under Ray's temp dir)"
        )
    err = result.get("error")
    if isinstance(err, BaseException):
        msg = str(err)
        if "has inited" in msg:
            raise SparkStartError(
                "a RayDP Spark session was started outside actors.spark; "
                "fix: call raydp.stop_spark() first, or use start_spark()/stop_spark() only"
            ) from err
        raise SparkStartError(
            f"raydp.init_spark failed: {type(err).__name__}: {msg[:500]}; fix: check Java "
            f"({java_version}), free CPUs (need {cfg.executors * cfg.executor_cores}) and the "
            "JVM logs (session_latest/logs/java-worker-*.log under Ray's temp dir)"
        ) from err
    session: SparkSession = result["session"]  # type: ignore[assignment]
    return session


def _stop_raydp_quietly() -> None:
    try:
        import raydp

        raydp.stop_spark()
    except Exception as e:  # noqa: BLE001 - teardown must not mask the caller's error
        log.warning("raydp.stop_spark failed: %s", e)


def stop_spark() -> None:
    """Stop the session started by :func:`start_spark` (no-op if none); Ray keeps running."""
    global _session, _session_cfg
    with _lock:
        if _session is None:
            return
        t0 = time.monotonic()
        _session = None
        _session_cfg = None
        _stop_raydp_quietly()
        log.info("Spark on Ray stopped in %.1f s", time.monotonic() - t0)


def spark_running() -> bool:
    """Whether a session started by :func:`start_spark` is running and alive."""
    with _lock:
        return _session is not None and _alive(_session)


@contextlib.contextmanager
def spark_scope() -> Iterator[None]:
    """Stops Spark on exit only if no session was running on entry.

    The CLI's commands run inside one: called from a program (a notebook, a test session) that
    already runs Spark, a command leaves that session running instead of stopping it under its
    owner; called alone, it stops the session it started.
    """
    owned = not spark_running()
    try:
        yield
    finally:
        if owned:
            stop_spark()
            _forget_raydp_exit_hook()


def _forget_raydp_exit_hook() -> None:
    """RayDP stops its Spark context at interpreter exit (``atexit.register(stop_spark)`` in
    ``raydp/context.py``), by then after Ray's shutdown, so a start a signal interrupted (the
    session never reached this module) fails there: "Exception ignored in atexit callback ...
    Can't find actor". The scope that owned Spark stops what RayDP started, unless its start is
    still under way in its thread (RayDP's lock held: stopping would wait for the start), whose
    actors and JVM end with Ray's shutdown (:func:`actors.ray_session.end_own_ray`); the hook has
    nothing left to do."""
    context = sys.modules.get("raydp.context")
    if context is None:
        return
    atexit.unregister(context.stop_spark)
    lock = context._spark_context_lock
    if getattr(context, "_global_spark_context", None) is not None and lock.acquire(blocking=False):
        lock.release()
        _stop_raydp_quietly()  # started after all, though the start was interrupted


def last_start_seconds() -> float | None:
    """Wall time of the last successful :func:`start_spark` (for benchmarks), or None."""
    return _last_start_seconds
