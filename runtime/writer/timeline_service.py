"""The embedded timeline server the coordinator's write client starts (Hudi's ``EmbeddedTimelineService``).

Source: Apache Hudi 0.14.0, ``hudi-client-common/.../client/embedded/EmbeddedTimelineService.java``,
started by ``FlinkWriteClients.createWriteClient(conf)`` for the coordinator's client; the write
tasks ask its file-system view through ``RemoteHoodieTableFileSystemView`` when
``--file-system-view`` is ``remote`` (:mod:`runtime.hudi.table.file_system_view` models the view,
the server's requests and syncs; docs/FIDELITY.md, the file-system view row).
"""

from __future__ import annotations

import asyncio

from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.messages import FileSliceRequest, PartitionFiles
from runtime.hudi.table.file_system_view import EmbeddedViewServer, tasks_use_remote_view
from runtime.hudi.table.hudi_table import HudiTable
from runtime.protocols.base import Protocol
from runtime.protocols.timeline_server import SERVER as TIMELINE_SERVER


class EmbeddedTimelineService:
    """The embedded timeline server the coordinator's write client starts: its file-system view,
    on its own thread (a lock of its own, not the coordinator's executor); its DFS calls are the
    timeline server's, as Hudi's are."""

    def __init__(self, env: Env, table: HudiTable) -> None:
        self.env = env
        self.server = EmbeddedViewServer(table.with_dfs(env.dfs.for_role(TIMELINE_SERVER)))
        self._lock = asyncio.Lock()

    @classmethod
    def of(
        cls, env: Env, config: JobConfig, table: HudiTable, protocol: type[Protocol]
    ) -> EmbeddedTimelineService | None:
        """The server whose view the write tasks ask, or None when they list partitions themselves."""
        remote = tasks_use_remote_view(config.file_system_view, protocol.release_file_system_view)
        return cls(env, table) if remote else None

    async def latest_file_slices(self, request: FileSliceRequest) -> PartitionFiles:
        async with self._lock:
            return await self.env.io(self.server.latest_file_slices, request)
