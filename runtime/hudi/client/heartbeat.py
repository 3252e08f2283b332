"""Per-instant heartbeats of a writer under a multi-writer mode (the LAZY failed-writes policy).

What is modelled (Hudi 0.14 - 1.1, ``hudi-client/hudi-client-common``):

* ``client/heartbeat/HoodieHeartbeatClient``: ``start(instantTime)`` writes the heartbeat file
  ``<table>/.hoodie/.heartbeat/<instant>`` at once and renews it every
  ``hoodie.client.heartbeat.interval_in_ms`` from a timer (``updateHeartbeat``); ``stop(instantTime)``
  cancels the timer and deletes the file (``HeartbeatUtils.deleteHeartbeatFile``); ``close``
  (``stopHeartbeatTimers``) cancels every timer and leaves the files, which then expire.
  ``BaseHoodieWriteClient.startCommit`` starts it when the failed-writes policy is LAZY; Hudi's
  Flink coordinator stops the old instant's heartbeat when it starts a new one and starts it
  again for a recommit (``StreamWriteOperatorCoordinator.initInstant``: "Recommit should start
  heartbeat for lazy failed writes clean policy to avoid aborting for heartbeat expired").
* ``HoodieHeartbeatUtils.isHeartbeatExpired`` / ``getLastHeartbeatTime``: expired when the last
  heartbeat is older than interval x ``hoodie.client.heartbeat.tolerable.misses``; an instant
  with no heartbeat file has a last heartbeat time of 0, so it is expired.
* ``BaseHoodieTableServiceClient.getInstantsToRollback`` with LAZY
  (``getInstantsToRollbackForLazyCleanPolicy``): the pending writers' instants of the commits
  timeline (compactions and clustering left out) whose heartbeat expired, kept only if still
  pending on a timeline reloaded after the check (:func:`expired_instants`).
* ``HeartbeatUtils.abortIfHeartbeatExpired``, called by ``BaseHoodieWriteClient.commitStats``
  before the commit: a writer whose own heartbeat expired must not commit (:class:`HeartbeatExpired`).

What differs, and why: the heartbeat file holds a small typed document
(:class:`InstantHeartbeat`: the instant, when it was renewed by the writer's clock, by whom)
where Hudi's is empty and judged by its modification time. The simulator's disk stamps files with
the real clock while its roles live on virtual time, so the time is read from the content, which
every host writes from the clock its roles use (:meth:`runtime.core.env.Env.wall_time`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass

from runtime.core.dfs import Dfs, DfsError, DfsNotFound
from runtime.core.env import Env
from runtime.hudi.client.lock import Heartbeat
from runtime.hudi.table.table_config import TableError
from runtime.hudi.timeline.active_timeline import Timeline

log = logging.getLogger(__name__)

HEARTBEAT_FOLDER = (".hoodie", ".heartbeat")  # HoodieHeartbeatClient.getHeartbeatFolderPath


class HeartbeatExpired(TableError):
    """``HeartbeatUtils.abortIfHeartbeatExpired``: "Heartbeat for instant ... has expired"."""


@dataclass(frozen=True)
class InstantHeartbeat:
    """The heartbeat file's content: the instant, the writer's time of the last renewal, who renews it."""

    instant: str
    renewed_at: float  # seconds since the epoch, by the writer's clock
    writer: str
    renewals: int = 0

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> InstantHeartbeat | None:
        """The document; None for content this module did not write (Hudi's own empty file)."""
        try:
            doc = json.loads(data)
            return cls(str(doc["instant"]), float(doc["renewed_at"]), str(doc["writer"]), int(doc.get("renewals", 0)))
        except (ValueError, KeyError, TypeError):
            return None


def heartbeat_path(base_path: str, instant: str) -> str:
    return Dfs.join(base_path, *HEARTBEAT_FOLDER, instant)


def last_heartbeat_time(dfs: Dfs, base_path: str, instant: str) -> float:
    """``HoodieHeartbeatUtils.getLastHeartbeatTime``: 0 when there is no heartbeat file (expired);
    a file this lab cannot read counts as renewed at its modification time, as Hudi reads it."""
    path = heartbeat_path(base_path, instant)
    try:
        doc = InstantHeartbeat.from_bytes(dfs.read_bytes(path))
        return doc.renewed_at if doc is not None else dfs.modified(path)
    except DfsNotFound:
        return 0.0


def is_expired(dfs: Dfs, base_path: str, instant: str, heartbeat: Heartbeat, now: float) -> bool:
    """``HoodieHeartbeatUtils.isHeartbeatExpired``: the last heartbeat older than interval x misses."""
    return now - last_heartbeat_time(dfs, base_path, instant) > heartbeat.expiry_s


def expired_instants(dfs: Dfs, base_path: str, timeline: Timeline, heartbeat: Heartbeat, now: float) -> list[str]:
    """The instants the LAZY policy rolls back (``getInstantsToRollbackForLazyCleanPolicy``): the
    writers' pending instants whose heartbeat expired, oldest first. (The caller rolls them back
    from this timeline; Hudi reloads it once more to drop one another writer completed meanwhile,
    which here cannot happen between the listing and this check under the transaction lock.)"""
    return [i for i in timeline.pending_commits() if is_expired(dfs, base_path, i, heartbeat, now)]


class HeartbeatClient:
    """One writer's heartbeats (``HoodieHeartbeatClient``): a timer per instant on the role's clock
    (a timer of the simulator's virtual time, an asyncio task on Ray). ``writer`` names the writer
    in each file."""

    def __init__(self, env: Env, dfs: Dfs, base_path: str, heartbeat: Heartbeat, writer: str) -> None:
        self.env, self.dfs, self.base_path = env, dfs, base_path
        self.heartbeat = heartbeat
        self.writer = writer
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._renewals: dict[str, int] = {}
        self.missed = 0  # renewals that failed (a DFS error): a missed beat
        self._folder_made = False

    def running(self) -> list[str]:
        """The instants whose heartbeat this writer renews."""
        return sorted(self._timers)

    def _write(self, instant: str) -> None:
        if not self._folder_made:  # Hadoop's create makes the parent folders
            self.dfs.mkdirs(Dfs.join(self.base_path, *HEARTBEAT_FOLDER))
            self._folder_made = True
        renewals = self._renewals.get(instant, 0)
        doc = InstantHeartbeat(instant, self.env.wall_time(), self.writer, renewals)
        self.dfs.write_bytes(heartbeat_path(self.base_path, instant), doc.to_bytes())
        self._renewals[instant] = renewals + 1

    async def start(self, instant: str) -> None:
        """``start``: the file written now, then renewed every interval until :meth:`stop`."""
        if instant in self._timers:
            return
        await self.env.io(self._write, instant)
        self._timers[instant] = self.env.spawn(self._beat(instant), f"heartbeat-{instant}")

    async def _beat(self, instant: str) -> None:
        while True:
            await self.env.sleep(self.heartbeat.interval_s)
            if instant not in self._timers:
                return
            try:
                await self.env.io(self._write, instant)
            except DfsError as exc:  # a missed beat; the next one tries again
                self.missed += 1
                log.warning("the heartbeat of %s failed: %s", instant, exc)

    def _cancel(self, instant: str) -> None:
        timer = self._timers.pop(instant, None)
        self._renewals.pop(instant, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def stop(self, instant: str) -> None:
        """``stop``: the timer cancelled and the file deleted (the instant completed or was given up)."""
        self._cancel(instant)
        try:
            await self.env.io(self.dfs.delete, heartbeat_path(self.base_path, instant))
        except DfsError as exc:  # the file then expires on its own
            log.warning("could not delete the heartbeat of %s: %s", instant, exc)

    def close(self) -> None:
        """``stopHeartbeatTimers``: every timer cancelled, the files left to expire."""
        for instant in list(self._timers):
            self._cancel(instant)

    async def abort_if_expired(self, instant: str) -> None:
        """``HeartbeatUtils.abortIfHeartbeatExpired`` before a commit."""
        expired = await self.env.io(is_expired, self.dfs, self.base_path, instant, self.heartbeat, self.env.wall_time())
        if expired:
            raise HeartbeatExpired(
                f"Heartbeat for instant {instant} has expired (no renewal for more than {self.heartbeat.expiry_s:g} s, "
                "--heartbeat-interval x --heartbeat-tolerable-misses): another writer may roll it back, so it is "
                "not committed"
            )
