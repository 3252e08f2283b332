"""P2 ``message-bus`` (HUDI-2677, PR #3915): checkpoint messages on the DFS.

Source: apache/hudi commit dbf8c44 (master, 2021-11-04, PR #3915), module hudi-flink; the bus
files themselves are :mod:`runtime.hudi.timeline.dfs_message_bus`.

Writer side, ``sink/common/AbstractStreamWriteFunction.java``, class ``AbstractStreamWriteFunction``:

- ``checkpointId`` starts at -1 and is not part of the task's state: ``initializeState`` never
  sets it, so after a failover or restore it is -1 again. ``snapshotState`` assigns the barrier's
  id *before* ``flushRemaining`` runs. Here :attr:`MessageBusWriter.checkpoint_id` is set to -1 in
  :meth:`MessageBusWriter.open` and to the barrier's id by the barrier flush.
- ``prevCkp(eagerFlush)`` = ``max(0, eagerFlush ? checkpointId : checkpointId - 1)``: the first
  eager flush after a restore reads message 0; the barrier flush of checkpoint k reads k - 1.
- ``instantToWrite(eagerFlush)`` reads message ``prevCkp`` on every call (``ackInstant``), then
  waits only while ``confirming``: no message -> sleep a tick and re-read (``TimeWait.waitFor``);
  on timeout with ``notInitialCkp`` assume the checkpoint was cancelled silently, stop confirming
  and take ``lastPendingInstant()`` from the timeline; ``canAbort`` (``aborted``, ckp != 0) ->
  stop confirming and take ``lastPendingInstant()``; any other value -> stop confirming and use
  it. A call made when not confirming returns the message as read, so a second eager flush after
  an aborted checkpoint is handed the literal ``aborted`` (the bug of #3915 as shipped), and one
  after a silent cancellation is handed no instant.
- ``StreamWriteFunction.flushRemaining`` sets ``confirming`` back to true after the barrier flush
  (:meth:`MessageBusWriter.on_snapshot`).

Coordinator side, ``sink/StreamWriteOperatorCoordinator.java``, class
``StreamWriteOperatorCoordinator``: ``start`` builds the ``MessageDriver`` (which empties the bus);
``initInstant`` -> ``startInstant()`` -> ``startInstant(MessageBus.INITIAL_CKP_ID)``: the first
instant of every (re)start or re-initialisation is message 0, never the restored id;
``notifyCheckpointComplete`` -> ``startInstant(checkpointId)``; ``startInstant(ckp)`` writes
``commitCkp(ckp, this.instant, newInstant)`` (the previous instant first, "" at a fresh start);
an empty round writes ``commitCkp(ckp, instant, instant)``; ``notifyCheckpointAborted`` ->
``abortCkp(ckp)``; ``close`` closes the driver.

So after a global failover the first barrier of a restored task (checkpoint k) waits for message
k - 1, which the restarted coordinator (its bus emptied at ``start``) never writes, until the
checkpoint timeout, and each restart repeats it: #3915's own stall
(``runtime.lab.fault_matrix.known_stall``).

Differences, each named: ``JobConfig.p2_fix_aborted_reread`` (off by default) makes a call made
when not confirming return the instant the round confirmed, instead of re-reading the message;
a wait for message 0 that reaches its timeout fails the task with a diagnosis, where #3915's
``TimeWait`` (built without ``throwsT``) returns at once on every later call and the loop re-reads
forever (an unbounded busy wait this lab does not run).
"""

from __future__ import annotations

from typing import Any

from runtime.core.config import flag_of
from runtime.core.messages import BlockedWait
from runtime.hudi.timeline import dfs_message_bus as bus
from runtime.protocols.base import (
    CoordinatorContext,
    CoordinatorSide,
    InstantWaitTimeout,
    Protocol,
    WriterContext,
    WriterSide,
)


class MessageBusWriter(WriterSide):
    def __init__(self, ctx: WriterContext) -> None:
        super().__init__(ctx)
        self.confirming = True
        self.checkpoint_id = -1  # AbstractStreamWriteFunction.checkpointId
        self.round_instant: str | None = None  # what the last confirmation settled on
        # MessageClient.getSingleton's map, owned by this task's process (one client per path)
        self.clients = bus.MessageClientRegistry()
        self.client: bus.MessageClient | None = None
        self.silent_cancels = 0  # waits that timed out and assumed a silently cancelled checkpoint
        self.aborts_seen = 0
        self.aborted_handed_out = 0  # flushes given the literal 'aborted' as their instant

    async def open(self) -> None:
        # initializeState: a new function instance, so checkpointId is -1 even on restore
        self.checkpoint_id = -1
        self.confirming = True
        self.client = self.clients.get(self.ctx.table.dfs, self.ctx.table.base_path)

    def prev_ckp(self, eager: bool) -> int:
        ckp = self.checkpoint_id
        return max(0, ckp if eager else ckp - 1)

    async def _message(self, ckp: int) -> bus.CkpMessage | None:
        """``MessageClient.getCkpMessage`` (P3 asks its server here first)."""
        assert self.client is not None
        return await self.ctx.env.io(self.client.get_ckp_message, ckp)

    async def _ack_instant(self, ckp: int) -> str | None:
        msg = await self._message(ckp)
        return msg.inflight_instant if msg is not None else None

    async def _last_pending(self) -> str | None:
        return await self.ctx.env.io(self.ctx.table.last_pending_instant)

    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        if not eager:
            # snapshotState assigns the barrier's id before flushRemaining asks for the instant
            self.checkpoint_id = self.ctx.last_checkpoint_id
        keep_round = self.ctx.config.p2_fix_aborted_reread
        if not self.confirming and keep_round:
            return self.round_instant
        ckp = self.prev_ckp(eager)
        instant = await self._ack_instant(ckp)
        if not self.confirming:
            # #3915: the message is re-read and returned as is, 'aborted' included
            if instant == bus.ABORTED_CKP_INSTANT:
                self.aborted_handed_out += 1
            return instant
        instant = await self._confirm(ckp, instant)
        self.round_instant = instant
        if instant == bus.ABORTED_CKP_INSTANT:
            self.aborted_handed_out += 1
        return instant

    async def _confirm(self, ckp: int, instant: str | None) -> str | None:
        """The ``while (confirming)`` loop of ``instantToWrite``."""
        env, cfg = self.ctx.env, self.ctx.config
        started = env.now()
        blocked = False
        try:
            while self.confirming:
                if instant is None:
                    if env.now() - started >= cfg.instant_wait_timeout:
                        if bus.not_initial_ckp(ckp):
                            # assume the checkpoint was cancelled silently; reuse the last instant
                            self.silent_cancels += 1
                            self.confirming = False
                            instant = await self._last_pending()
                            continue
                        raise InstantWaitTimeout(await self._timeout_message(ckp))
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
        return instant

    async def _timeout_message(self, ckp: int) -> str:
        assert self.client is not None
        env, cfg = self.ctx.env, self.ctx.config
        exists = await env.io(self.client.bus_exists)
        text = (
            f"{env.role}: Timeout({cfg.instant_wait_timeout:.1f}s) while waiting for instant initialize "
            f"({flag_of('instant_wait_timeout_s')}): "
            f"message {ckp} never appeared in {self.client.path}"
        )
        if self.client.last_error:
            text += f" (last read error: {self.client.last_error})"
        if not exists:
            text += " (the message bus directory is missing: was it deleted? Hudi #8060)"
        return text

    def on_snapshot(self, checkpoint_id: int) -> None:
        # flushRemaining: block the next flush until a new instant is confirmed
        self.checkpoint_id = checkpoint_id
        self.confirming = True

    def describe(self) -> dict[str, Any]:
        return {
            "confirming": self.confirming,
            "checkpoint_id": self.checkpoint_id,
            "silent_cancels": self.silent_cancels,
            "aborts_seen": self.aborts_seen,
            "aborted_handed_out": self.aborted_handed_out,
            "read_errors": self.client.read_errors if self.client else 0,
        }


class MessageBusCoordinator(CoordinatorSide):
    driver: bus.MessageDriver

    def __init__(self, ctx: CoordinatorContext) -> None:
        super().__init__(ctx)
        self.instant = ""  # the coordinator's current instant (WriteMetadataEvent.BOOTSTRAP_INSTANT)
        self.initializing = True  # the next instant started is initInstant's: message 0

    async def open(self) -> None:
        self.initializing = True
        self.driver = await self.ctx.env.io(bus.MessageDriver, self.ctx.table.dfs, self.ctx.table.base_path)

    async def on_instant_started(self, checkpoint_id: int, committed: str, new_instant: str) -> None:
        # initInstant -> startInstant() writes INITIAL_CKP_ID whatever checkpoint was restored
        ckp = bus.INITIAL_CKP_ID if self.initializing else checkpoint_id
        await self.ctx.env.io(self.driver.commit_ckp, ckp, self.instant, new_instant)
        self.instant = new_instant

    async def on_all_bootstrapped(self) -> None:
        self.initializing = False

    async def on_tasks_reset(self) -> None:
        # every task bootstraps again, and the coordinator's initInstant runs again
        self.initializing = True

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        await self.ctx.env.io(self.driver.commit_ckp, checkpoint_id, instant, instant)

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        await self.ctx.env.io(self.driver.abort_ckp, checkpoint_id)

    async def delete_dfs_messages(self) -> str | None:
        await self.ctx.env.io(self.driver.delete_all)
        return self.driver.path

    def describe(self) -> dict[str, Any]:
        # a coordinator whose start the run's end cut short (a failover's restart, a search's cut
        # run) has opened no bus yet: its record says so instead of failing the run's collection
        driver = getattr(self, "driver", None)
        return {"bus_recreated": driver.recreated if driver is not None else 0}

    async def close(self) -> None:
        if getattr(self, "driver", None) is not None:  # opened (see describe)
            self.driver.close()


class MessageBusProtocol(Protocol):
    name = "message-bus"
    messages_on_dfs = True
    description = "P2: checkpoint messages as files under .hoodie/.aux/message_bus (HUDI-2677)"
    writer_side = MessageBusWriter
    coordinator_side = MessageBusCoordinator

    @classmethod
    def dfs_message_dirs(cls, base_path: str) -> tuple[str, ...]:
        return (bus.message_bus_path(base_path),)
