"""P2 ``message-bus`` (HUDI-2677, PR #3915): checkpoint messages on the DFS.

The coordinator writes ``<ckp>.commit`` ("committed,inflight") when a checkpoint completes (and
message 0 when the first instant starts) and ``<ckp>.aborted`` when one is aborted. A writer reads
message ``max(0, ckp if eager else ckp - 1)``: no operator event, so no mail of its own mailbox
can be what it waits for.
"""

from __future__ import annotations

from typing import Any

from runtime.core.env import BlockedWait
from runtime.hudi import dfs_message_bus as bus
from runtime.protocols.base import CoordinatorSide, InstantWaitTimeout, Protocol, WriterSide


class MessageBusWriter(WriterSide):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.confirming = True
        self.round_instant: str | None = None
        self.client: bus.MessageClient | None = None
        self.silent_cancels = 0  # waits that timed out and assumed a silently cancelled checkpoint
        self.aborts_seen = 0

    async def open(self) -> None:
        self.client = bus.MessageClient.get_singleton(self.ctx.table.dfs, self.ctx.table.base_path)

    def prev_ckp(self, eager: bool) -> int:
        ckp = self.ctx.last_checkpoint_id
        return max(0, ckp if eager else ckp - 1)

    async def _message(self, ckp: int) -> bus.CkpMessage | None:
        assert self.client is not None
        return await self.ctx.env.io(self.client.get_ckp_message, ckp)

    async def _ack_instant(self, ckp: int) -> str | None:
        msg = await self._message(ckp)
        return msg.inflight_instant if msg is not None else None

    async def _last_pending(self) -> str | None:
        return await self.ctx.env.io(self.ctx.table.last_pending_instant)

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        if not self.confirming:
            # Deviation from PR #3915, which re-reads the message here and would hand out the
            # literal "aborted" to the second flush after an abort: keep the round's instant.
            return self.round_instant
        env, cfg = self.ctx.env, self.ctx.config
        ckp = self.prev_ckp(eager)
        instant = await self._ack_instant(ckp)
        started = env.now()
        blocked = False
        try:
            while self.confirming:
                if instant is None:
                    waited = env.now() - started
                    if waited >= cfg.instant_wait_timeout:
                        if bus.not_initial_ckp(ckp):
                            # assume the checkpoint was cancelled silently; reuse the last instant
                            self.silent_cancels += 1
                            self.confirming = False
                            instant = await self._last_pending()
                            continue
                        exists = await env.io(self.client.bus_exists)  # type: ignore[union-attr]
                        raise InstantWaitTimeout(
                            f"{env.role}: Timeout({cfg.instant_wait_timeout:.1f}s) while waiting for "
                            f"instant initialize: message {ckp} never appeared in "
                            f"{self.client.path}"  # type: ignore[union-attr]
                            + ("" if exists else " (the message bus directory is missing: was it deleted? Hudi #8060)")
                        )
                    if not blocked:
                        blocked = True
                        self.ctx.set_blocked(
                            BlockedWait(
                                what="instant initialize",
                                waiting_on=f"message bus file {ckp}.commit or {ckp}.aborted",
                                since=started,
                                releasing_mail=None,
                                checkpoint_id=ckp,
                            )
                        )
                    await env.sleep(cfg.wait_tick_s)
                    instant = await self._ack_instant(ckp)
                elif bus.can_abort(instant, ckp):
                    self.aborts_seen += 1
                    self.confirming = False
                    instant = await self._last_pending()
                else:
                    self.confirming = False
        finally:
            if blocked:
                self.ctx.set_blocked(None)
        self.round_instant = instant
        return instant

    def on_snapshot(self, checkpoint_id: int) -> None:
        self.confirming = True

    def describe(self) -> dict[str, Any]:
        return {
            "confirming": self.confirming,
            "silent_cancels": self.silent_cancels,
            "aborts_seen": self.aborts_seen,
            "read_errors": self.client.read_errors if self.client else 0,
        }


class MessageBusCoordinator(CoordinatorSide):
    driver: bus.MessageDriver

    async def open(self) -> None:
        self.driver = await self.ctx.env.io(bus.MessageDriver, self.ctx.table.dfs, self.ctx.table.base_path)

    async def on_instant_started(self, checkpoint_id: int, committed: str, new_instant: str) -> None:
        await self.ctx.env.io(self.driver.commit_ckp, checkpoint_id, committed, new_instant)

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        await self.ctx.env.io(self.driver.commit_ckp, checkpoint_id, instant, instant)

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        await self.ctx.env.io(self.driver.abort_ckp, checkpoint_id)

    async def delete_dfs_messages(self) -> str | None:
        await self.ctx.env.io(self.driver.delete_all)
        return self.driver.path

    def describe(self) -> dict[str, Any]:
        return {"bus_recreated": self.driver.recreated}

    async def close(self) -> None:
        self.driver.close()


class MessageBusProtocol(Protocol):
    name = "message-bus"
    messages_on_dfs = True
    description = "P2: checkpoint messages as files under .hoodie/.aux/message_bus (HUDI-2677)"
    writer_side = MessageBusWriter
    coordinator_side = MessageBusCoordinator
