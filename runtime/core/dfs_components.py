"""What a DFS operation touches: the part of a Hudi table its path lies in.

The cost of a commit is more than its data files: Hudi's writer also reads and writes the timeline,
the metadata table, markers, heartbeats and, for the DFS-polling protocols, checkpoint messages.
Every counted operation is filed under one :class:`Component`, from its path alone, so the lab's
counts and those of Hudi's own writer (the ``conformance/`` harness counts Hadoop ``FileSystem`` calls
with the same rule) compare part by part.

The rule, first match wins, on the path relative to the table's base (Hudi 0.14-1.1 layout:
``HoodieTableMetaClient.METAFOLDER_NAME``, ``METADATA_TABLE_FOLDER_PATH``, ``TEMPFOLDER_NAME``,
``AUXILIARYFOLDER_NAME``, ``HoodieHeartbeatClient.getHeartbeatFolderPath``, ``ARCHIVELOG_FOLDER``
(version 6) and ``timeline/history`` (the LSM timeline, version 8+))::

    .hoodie/metadata/...                  metadata     the metadata table
    .hoodie/.temp/...                     markers
    .hoodie/.aux/ckp_meta/...             messages     checkpoint messages (ckp-meta, timeline-server)
    .hoodie/.aux/message_bus/...          messages     checkpoint messages (message-bus)
    .hoodie/.aux/commitlab/...            lab          the lab's stand-in for Flink's checkpoint storage
                                                       and its fault markers: Flink keeps those apart
    .hoodie/.aux/lock                     lock         FileSystemBasedLockProvider's lock file
    .hoodie/.heartbeat/...                heartbeat
    .hoodie/archived/..., timeline/history/...  archive
    .hoodie[/timeline]/<t>[_<c>].clean[.requested|.inflight]  clean  the cleaner's instants
    .hoodie[/timeline]/<t>[_<c>].rollback[.requested|.inflight]  rollback  rollback instants
    .hoodie/.aux/... (anything else)      aux
    .hoodie, anything else under it       timeline     instants, hoodie.properties
    anything else                         data         base files, log files, partition metadata
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache


class Component(StrEnum):
    DATA = "data"
    TIMELINE = "timeline"
    METADATA = "metadata"
    MARKERS = "markers"
    MESSAGES = "messages"
    HEARTBEAT = "heartbeat"
    ARCHIVE = "archive"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    LOCK = "lock"
    AUX = "aux"
    LAB = "lab"


_HOODIE = "/.hoodie"

# Prefixes under ``.hoodie``, in the order the rule tries them.
_UNDER_HOODIE: tuple[tuple[str, Component], ...] = (
    ("/metadata/", Component.METADATA),
    ("/.temp/", Component.MARKERS),
    ("/.aux/ckp_meta/", Component.MESSAGES),
    ("/.aux/message_bus/", Component.MESSAGES),
    ("/.aux/commitlab/", Component.LAB),
    ("/.aux/lock", Component.LOCK),
    ("/.heartbeat/", Component.HEARTBEAT),
    ("/archived/", Component.ARCHIVE),
    ("/timeline/history/", Component.ARCHIVE),
    ("/.aux/", Component.AUX),
)


# a clean or rollback instant's file in the active timeline (layout 1 or 2): HoodieTimeline.CLEAN_ACTION,
# ROLLBACK_ACTION; what a rollback deletes counts under the part it lies in
_SERVICE_INSTANT = re.compile(r"^/(?:timeline/)?\d{14,17}(?:_\d{14,17})?\.(clean|rollback)(?:\.requested|\.inflight)?$")


# every counted DFS operation files its path: the same paths (instants, messages, markers' folders)
# come back all run long, and a look-up is cheaper than the rule
@lru_cache(maxsize=1 << 14)
def component_of(path: str) -> Component:
    """The component an absolute (or base-relative, ``/``-separated) path belongs to."""
    if path.startswith(".hoodie"):  # relative to the table's base
        path = "/" + path
    at = path.find(_HOODIE)
    if at < 0:
        return Component.DATA
    rest = path[at + len(_HOODIE) :]
    if not rest:
        return Component.TIMELINE
    if rest[0] != "/":  # ``.hoodie_partition_metadata`` is a data file
        return Component.DATA
    for prefix, component in _UNDER_HOODIE:
        if rest.startswith(prefix) or rest == prefix.rstrip("/"):
            return component
    service = _SERVICE_INSTANT.match(rest)
    if service:
        return Component(service.group(1))
    return Component.TIMELINE
