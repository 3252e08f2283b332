"""The driver's watch on its Ray cluster's head: a run that lost it ends with its record.

Ray (2.52.1) ends a driver whose core worker cannot reach the GCS for
``gcs_rpc_server_reconnect_timeout_s`` (``src/ray/common/ray_config_def.h``, 60 s by default): a
check in its GCS RPC client fails with "Failed to connect to GCS within N seconds" and the process
ends from C++, with no Python code run, so a run would leave no ``result.json``. Nothing in Ray's
API tells a driver its GCS is gone before then (``ray.is_initialized()`` stays True; an actor call
on a live worker still answers). So the driver asks the GCS itself, through the GCS client its
``ray.init`` made (``ray._private.worker.global_worker.gcs_client``, ``ray._raylet.GcsClient``):
an internal KV read of a key nothing writes, bounded by its own timeout (:data:`PROBE_TIMEOUT_S`;
past it Ray raises ``RpcError``), one a second (:data:`PROBE_PERIOD_S`), on a thread of its own,
so that the driver's loop never waits for it, nor the watch for the loop. When no probe has been
answered for ``--cluster-lost-after`` seconds since one went out unanswered, and at least
:data:`MIN_UNANSWERED` timed out, the cluster is lost (:class:`~runtime.lab.results.ClusterLost`).
A local Ray whose GCS or raylet process exited (:func:`~actors.ray_session.local_ray_ended`) is
lost at once: without GCS fault tolerance nothing starts them again.

A head that is only slow (a loaded machine) answers within the probe's timeout or a later probe
does: the silence is counted from the first unanswered probe and needs several to have timed out.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import ray

from actors.ray_session import local_ray_ended
from runtime.core.config import ConfigError, flag_of
from runtime.lab.results import ClusterLost

log = logging.getLogger(__name__)

PROBE_PERIOD_S = 1.0  # one probe a second at most: each costs the GCS one KV read
PROBE_TIMEOUT_S = 2.0  # a probe's own bound (the GCS client's timeout); it then counts as unanswered
MIN_UNANSWERED = 3  # probes left unanswered before a silence counts: one slow probe is no silence
# Ray's own bound, which ends a driver that lost its GCS (ray_config_def.h), as the driver's
# environment sets it (RAY_<setting>); a value a cluster's own system config sets is not seen here
RECONNECT_SETTING, RAY_RECONNECT_DEFAULT_S = "gcs_rpc_server_reconnect_timeout_s", 60.0
# how long the watch leaves a lost cluster to the driver's loop, which polls every 0.25 s, before it
# takes the run's end over (the loop is stuck in a call to the GCS); seconds of Ray's minute
TAKEOVER_S = 3.0
PROBE_KEY, PROBE_NAMESPACE = b"commitlab-cluster-probe", b"commitlab"


class ClusterWatch:
    """Probes the GCS at most once per ``period_s`` and judges: :meth:`observe` is one step (a
    probe when one is due, bounded by its own timeout), :meth:`start` runs the steps on a thread of
    their own, so that a driver's loop stuck in a call that waits for the GCS (a failover's named
    actor creation or name lookup: Ray waits there until it ends the process) is no stuck watch.
    ``probe`` returns once the GCS answered and raises ``ray.exceptions.RpcError`` when it did not;
    any other error means the probe does not work here (another Ray), and the watch then only
    watches the local processes."""

    def __init__(
        self,
        lost_after_s: float,
        address: str,
        probe: Callable[[], Any] | None,
        *,
        ended: Callable[[], str | None] = local_ray_ended,
        clock: Callable[[], float] = time.monotonic,
        period_s: float = PROBE_PERIOD_S,
    ) -> None:
        self.lost_after_s = lost_after_s
        self.address = address
        self.probe = probe
        self.ended = ended
        self.clock = clock
        self.period_s = period_s
        self.unanswered_since: float | None = None  # when the first probe since the last answer went out
        self.unanswered = 0  # probes since the last answer that got none
        self.last_error = ""
        self._probed_at = -math.inf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _probe_once(self) -> None:
        """One bounded probe; an answer clears the silence."""
        assert self.probe is not None
        try:
            self.probe()
        except ray.exceptions.RpcError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.unanswered += 1
            return
        except Exception as exc:  # noqa: BLE001 - logged: a probe that cannot work here is switched off
            log.warning(
                "the GCS probe does not work with this Ray (%s: %s); only the local processes are watched",
                type(exc).__name__,
                exc,
            )
            self.probe = None
        self.unanswered_since, self.unanswered = None, 0

    def observe(self) -> ClusterLost | None:
        """One step: the lost cluster, once it is; else the next probe when one is due."""
        if self.probe is not None and self.clock() - self._probed_at >= self.period_s:
            self._probed_at = self.clock()
            if self.unanswered_since is None:
                self.unanswered_since = self._probed_at
            self._probe_once()
        now = self.clock()
        silent = now - self.unanswered_since if self.unanswered_since is not None else 0.0
        ended = self.ended()
        if ended is not None:
            return ClusterLost(self.address, round(silent, 1), ended)
        if silent >= self.lost_after_s and self.unanswered >= MIN_UNANSWERED:
            seen = (
                f"it did not answer {self.unanswered} probes in {silent:.1f} s "
                f"({flag_of('cluster_lost_after_s')} {self.lost_after_s:g}; last: {self.last_error})"
            )
            return ClusterLost(self.address, round(silent, 1), seen)
        return None

    def start(self, on_lost: Callable[[ClusterLost], None], poll_s: float) -> None:
        """Steps every ``poll_s`` on a daemon thread until :meth:`stop`; ``on_lost`` runs on it once."""

        def watch() -> None:
            while not self._stop.wait(poll_s):
                lost = self.observe()
                if lost is not None and not self._stop.is_set():
                    on_lost(lost)
                    return

        self._thread = threading.Thread(target=watch, name="commitlab-cluster-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """No step after this one (a probe under way ends within its timeout, unwaited)."""
        self._stop.set()


class EndClaim:
    """Who ends a run that lost its cluster, once: the driver's loop, at its next poll, or, when
    that loop does not claim it within :data:`TAKEOVER_S` (stuck in a call that waits for the GCS
    until Ray ends the process), the watch's thread, which then makes the record itself."""

    LOOP, WATCH = "the driver's loop", "the cluster watch"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = threading.Event()
        self.by: str | None = None

    def claim(self, who: str) -> bool:
        """True for the first claimant, and for it alone."""
        with self._lock:
            if self.by is None:
                self.by = who
                self._claimed.set()
        return self.by == who

    def left_to_the_watch(self, wait_s: float = 0.0) -> bool:
        """On the watch's thread: waits (at most ``wait_s``) for the loop's claim; True when the
        loop made none, so the watch ends the run."""
        self._claimed.wait(wait_s)
        return self.claim(self.WATCH)


def cluster_watch(lost_after_s: float) -> ClusterWatch:
    """The watch of the cluster this driver's ``ray.init`` joined or started."""
    gcs: Any = getattr(ray._private.worker.global_worker, "gcs_client", None)
    if gcs is None:
        return ClusterWatch(lost_after_s, "?", None)
    return ClusterWatch(
        lost_after_s, str(gcs.address), lambda: gcs.internal_kv_get(PROBE_KEY, PROBE_NAMESPACE, timeout=PROBE_TIMEOUT_S)
    )


def lost_error(lost: ClusterLost, table: str) -> str:
    """The run's error: what happened, what the table keeps, what to do."""
    return (
        f"lost the Ray cluster: its head (GCS at {lost.gcs_address}) is gone: {lost.seen}; the run ended with its "
        "record made from what the driver holds and from the table, which keeps the commits made before; start "
        f"the cluster again and run again; `commitlab verify --table {table}` checks the table"
    )


def check_cluster_lost_after(lost_after_s: float, environ: dict[str, str] | None = None) -> None:
    """``--cluster-lost-after`` must leave the record time before Ray ends the driver: at most half
    of ``gcs_rpc_server_reconnect_timeout_s`` as this driver's environment sets it (60 s by
    default); ConfigError (exit 2) otherwise, before Ray starts."""
    env = os.environ if environ is None else environ
    given = env.get(f"RAY_{RECONNECT_SETTING}", "")
    try:
        reconnect = float(given) if given else RAY_RECONNECT_DEFAULT_S
    except ValueError:
        reconnect = RAY_RECONNECT_DEFAULT_S  # Ray's own parsing decides; the default is the bound here
    if lost_after_s > reconnect / 2:
        flag = flag_of("cluster_lost_after_s")
        raise ConfigError(
            f"{flag} {lost_after_s:g}: Ray ends a driver {reconnect:g} s after it lost the cluster's head "
            f"({RECONNECT_SETTING}{', RAY_' + RECONNECT_SETTING + ' here' if given else ', its default'}), and the "
            f"run's record must be written before; give {flag} {reconnect / 2:g} or less"
        )
