"""The source: emits its shard of the stream to its write task, round by round, with barriers.

Round k is the data before barrier k. The source pushes round k in batches (each push waits while
the task's input queue is full: back-pressure), tells the job manager the round is out, then
waits for the trigger of checkpoint k and injects the barrier. After the last round it keeps
serving triggers (final checkpoints) until the job manager says finish.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any
from typing import Protocol as _TypingProtocol

import pyarrow as pa

from runtime.core import codec, roles
from runtime.core.config import JobConfig, flag_of
from runtime.core.env import Env, bounded
from runtime.core.messages import (
    Barrier,
    CheckpointAck,
    CheckpointTrigger,
    DataBatch,
    EndOfInput,
    RoundEmitted,
    SeekRequest,
    SourceState,
)

# How long a source waiting for its next checkpoint trigger sleeps between looks. Triggers, the end
# of input and seeks all wake it at once; this only keeps the wait bounded.
BARRIER_WAIT_TICK_S = 1.0
_SEEK = object()  # queued with the triggers: a seek came in, replay before waiting on


class Shard(_TypingProtocol):
    """One task's part of the stream, round by round."""

    def batches(self, round_no: int, batch_rows: int) -> AsyncIterator[pa.Table]: ...


class InMemoryShard:
    """A shard whose rounds are Arrow tables (or awaitables that resolve to them)."""

    def __init__(self, rounds: list[Any]) -> None:
        self.rounds = rounds

    async def batches(self, round_no: int, batch_rows: int) -> AsyncIterator[pa.Table]:
        data = self.rounds[round_no - 1]
        if not isinstance(data, pa.Table):
            data = await data
        if 0 < data.num_rows <= batch_rows:  # the round in one batch: the table itself, no slice
            yield data
            return
        for off in range(0, data.num_rows, batch_rows):
            yield data.slice(off, batch_rows)


# a batch's data columns by its column names: every batch of a run has the same ones
_DATA_COLUMNS: dict[tuple[str, ...], list[int]] = {}


# the input bytes of batches met before, by the batch's id with a weak reference (a dead batch's id
# may be reused, and none is kept alive): a simulator's runs of one job emit its rounds' tables
# again, run after run
_BATCH_BYTES: dict[int, tuple[weakref.ref[pa.Table], int]] = {}


def _data_bytes(batch: pa.Table) -> int:
    """``batch.select(<columns not starting with _>).nbytes``, without building the selection."""
    known = _BATCH_BYTES.get(id(batch))
    if known is not None and known[0]() is batch:
        return known[1]
    names = tuple(batch.column_names)
    data = _DATA_COLUMNS.get(names)
    if data is None:
        if len(_DATA_COLUMNS) >= 64:
            _DATA_COLUMNS.clear()
        data = _DATA_COLUMNS[names] = [i for i, c in enumerate(names) if not c.startswith("_")]
    columns = batch.columns
    size: int = sum(columns[i].nbytes for i in data)
    if len(_BATCH_BYTES) >= 8192:
        _BATCH_BYTES.clear()
    _BATCH_BYTES[id(batch)] = (weakref.ref(batch), size)
    return size


class Source:
    """Emits a shard with barriers. Rows carry a position in the shard (the Kafka offset of a
    partition); ``seek`` replays from an earlier position (the control topic's offset repair)."""

    RPC_METHODS = ("trigger_barrier", "finish", "seek")

    def __init__(
        self,
        env: Env,
        config: JobConfig,
        task_id: int,
        shard: Shard,
        *,
        writer: str,
        job_manager: str = roles.JOB_MANAGER,
        start_round: int = 1,
        start_offset: int = 0,
    ) -> None:
        self.env = env
        self.config = config
        self.task_id = task_id
        self.shard = shard
        self.writer = writer
        self.job_manager = job_manager
        self.offset_rows = start_offset  # next shard position to emit (restored after a failover)
        self.start_round = start_round
        self.round = 0
        # checkpoint triggers, None (end of input) and _SEEK (a replay was asked for: wake up)
        self._triggers: asyncio.Queue[Any] = asyncio.Queue()
        self._seeks: list[int] = []
        self._seek_wakeups = 0  # _SEEK markers in the trigger queue
        self._emitted: list[pa.Table] = []  # what was emitted, for replays
        self._emitted_base = start_offset  # shard position of the first emitted row
        self.replayed_rows = 0
        self.state = "created"
        self.error: str | None = None

    def trigger_barrier(self, trigger: CheckpointTrigger) -> None:
        self._triggers.put_nowait(trigger)

    def finish(self, _msg: Any = None) -> None:
        self._triggers.put_nowait(None)

    def seek(self, req: SeekRequest) -> None:
        self._seeks.append(req.offset)
        self._seek_wakeups += 1
        self._triggers.put_nowait(_SEEK)  # a source waiting for its barrier replays now

    async def _push(self, item: Any) -> None:
        # A push waits while the task is back-pressured; a blocked task blocks its source, as in
        # Flink. The bound is the job's: the watchdog or the checkpoint timeout ends a stuck run.
        await self.env.call(
            self.writer, "push_input", item, timeout=self.config.job_timeout_s, option=flag_of("job_timeout_s")
        )

    async def _replay_requested(self) -> None:
        """Serves seeks: emits again the rows from the requested position up to the current one."""
        while self._seeks:
            offset = max(self._emitted_base, self._seeks.pop(0))
            if offset >= self.offset_rows:
                continue
            emitted = pa.concat_tables(self._emitted) if len(self._emitted) > 1 else self._emitted[0]
            rows = emitted.slice(offset - self._emitted_base, self.offset_rows - offset)
            for off in range(0, rows.num_rows, self.config.source_batch_rows):
                await self._push(DataBatch(rows.slice(off, self.config.source_batch_rows), self.round, offset + off))
            self.replayed_rows += rows.num_rows

    async def _barrier(self) -> bool:
        while True:
            try:
                trigger = await bounded(self._triggers.get(), BARRIER_WAIT_TICK_S)
            except asyncio.TimeoutError:
                continue  # the job manager ends a source that waits too long; seeks wake it early
            if trigger is not _SEEK:
                break
            self._seek_wakeups -= 1
            await self._replay_requested()
        if trigger is None:
            return False
        await self._replay_requested()
        await self._push(Barrier(trigger.checkpoint_id))
        state = SourceState(self.task_id, trigger.checkpoint_id, self.offset_rows)
        self.env.send(
            self.job_manager, "ack_checkpoint", CheckpointAck(self.env.role, trigger.checkpoint_id, codec.encode(state))
        )
        return True

    async def run(self) -> None:
        self.state = "running"
        try:
            for r in range(self.start_round, self.config.checkpoints + 1):
                self.round = r
                rows = 0
                async for batch in self.shard.batches(r, self.config.source_batch_rows):
                    await self._replay_requested()
                    await self._push(DataBatch(batch, r, self.offset_rows))
                    self._emitted.append(batch)
                    # the records' own bytes (Arrow's in-memory size, runtime columns left out):
                    # the denominator of a run's write amplification
                    self.env.metrics.count("input_bytes", _data_bytes(batch))
                    self.offset_rows += batch.num_rows
                    rows += batch.num_rows
                self.env.send(self.job_manager, "round_emitted", RoundEmitted(self.env.role, r, rows, self.offset_rows))
                if not await self._barrier():
                    break
            else:
                if self.start_round > self.config.checkpoints:  # restored after the last round
                    self.env.send(
                        self.job_manager,
                        "round_emitted",
                        RoundEmitted(self.env.role, self.config.checkpoints, 0, self.offset_rows),
                    )
                while await self._barrier():
                    pass
            await self._push(EndOfInput())
            self.state = "finished"
        except asyncio.CancelledError:
            self.state = "cancelled"
            raise
        except Exception as exc:
            self.state = "failed"
            self.error = f"{type(exc).__name__}: {exc}"
            raise

    def dump(self) -> dict[str, Any]:
        return {
            "role": self.env.role,
            "state": self.state,
            "round": self.round,
            "rows_emitted": self.offset_rows,
            "rows_replayed": self.replayed_rows,
            "pending_triggers": self._triggers.qsize() - self._seek_wakeups,
            "error": self.error,
        }
