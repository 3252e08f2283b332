"""Hudi's instants: their actions and states, the names of their files on the timeline, and the
instant times (``HoodieInstant``, ``InstantFileNameParserV1/V2``, ``HoodieInstantTimeGenerator``:
``yyyyMMddHHmmssSSS`` in UTC).

Layout 1 names an instant's file ``<ts>.<action>[.<state>]``; layout 2 names a completed instant's
file ``<ts>_<completion>.<action>`` (:mod:`runtime.hudi.timeline.table_version`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from dataclasses import dataclass

COMMIT, DELTA_COMMIT, COMPACTION = "commit", "deltacommit", "compaction"
# HoodieActiveTimeline.getCommitsTimeline: the actions whose instants write data. A pending
# compaction's action is "compaction", so it is never among them (filterPendingExcludingCompaction);
# a completed one is a "commit" (HoodieInstant.getComparableAction maps compaction to commit)
WRITE_ACTIONS = (COMMIT, DELTA_COMMIT)

HOODIE = ".hoodie"
AUX = ".aux"
REQUESTED, INFLIGHT, COMPLETED = "requested", "inflight", "completed"


# layout 1: <ts>.<action>[.<state>]; layout 2 names a completed instant <ts>_<completion>.<action>
# a metadata table's compaction and rollback times carry a 3-digit suffix on version 6 (20 digits)
_INSTANT_FILE = re.compile(r"^(\d{14,20})(?:_(\d{14,17}))?\.([a-z_]+)(?:\.(requested|inflight))?$")


@dataclass(frozen=True)
class Instant:
    ts: str
    action: str  # "commit", "rollback", ...
    state: str  # requested / inflight / completed
    completion: str | None = None  # a completed instant's completion time (timeline layout 2)


def format_instant(t: float) -> str:
    """Hudi instant time ``yyyyMMddHHmmssSSS`` in UTC."""
    d = _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc)
    return d.strftime("%Y%m%d%H%M%S") + f"{d.microsecond // 1000:03d}"


def bump_instant(ts: str) -> str:
    """The instant one millisecond later (keeps instants strictly increasing)."""
    d = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.timezone.utc)
    d += _dt.timedelta(milliseconds=int(ts[14:17] or 0) + 1)
    return d.strftime("%Y%m%d%H%M%S") + f"{d.microsecond // 1000:03d}"


@functools.lru_cache(maxsize=4096)
def instant_of_file(name: str) -> Instant | None:
    """The instant a timeline file stands for (None: not an instant file). Cached: the coordinator
    lists the timeline at every instant, and the names repeat."""
    m = _INSTANT_FILE.match(name)
    if not m:
        return None
    ts, completion, action, state = m.group(1), m.group(2), m.group(3), m.group(4)
    if completion is not None and state is not None:
        return None  # only a completed instant carries its completion time
    if action == "inflight" and state is None:  # <ts>.inflight is a commit's inflight
        return Instant(ts, "commit", INFLIGHT)
    return Instant(ts, action, state or COMPLETED, completion)
