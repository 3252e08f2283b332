"""What one source actor reads: its shard of the job's stream, by reference, opened inside its actor.

The driver plans the stream (:mod:`actors.stream_plan`) and hands each source actor a
:class:`SourceShard`; the actor opens it where it runs. Kept apart from the planning, which
imports the generator, Spark and the verifier: a role process imports only this side.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from runtime.data.columns import OFFSET
from runtime.flink.source import InMemoryShard


@dataclass(frozen=True)
class SourceShard:
    """What one source actor reads, by reference: its rounds put in Ray's object store (the
    generator), or its Spark shard and the stream offsets where each round starts."""

    rounds: list[Any] = field(default_factory=list)  # object refs, one per round
    spark_shard: Any = None
    bounds: list[int] = field(default_factory=list)

    def open(self) -> StreamShardRounds | InMemoryShard:
        """The source's ``Shard``, inside its actor."""
        if self.spark_shard is not None:
            return StreamShardRounds(self.spark_shard, self.bounds)
        return InMemoryShard(self.rounds)


class StreamShardRounds:
    """A Spark shard read round by round inside a source actor (the Source's ``Shard``)."""

    def __init__(self, shard: Any, bounds: list[int]) -> None:
        self.shard = shard
        self.bounds = bounds
        self._table: pa.Table | None = None
        self._offsets: NDArray[np.int64] | None = None

    async def batches(self, round_no: int, batch_rows: int) -> AsyncIterator[pa.Table]:
        if self._table is None or self._offsets is None:
            loaded: pa.Table = await asyncio.to_thread(self.shard.table)
            self._table = loaded
            self._offsets = loaded.column(OFFSET).to_numpy() if loaded.num_rows else np.array([], dtype=np.int64)
        table: pa.Table = self._table
        offsets = self._offsets
        lo = int(offsets.searchsorted(self.bounds[round_no - 1], side="left"))
        hi = int(offsets.searchsorted(self.bounds[round_no], side="left"))
        for off in range(lo, hi, batch_rows):
            yield table.slice(off, min(batch_rows, hi - off))
