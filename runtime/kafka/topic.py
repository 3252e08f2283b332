"""P5's control topic: one Kafka topic with a single partition, hosted as a role.

RFC-32 (Hudi's Kafka Connect sink) carries every coordination message (START_COMMIT, END_COMMIT,
WRITE_STATUS, ACK_COMMIT) on a dedicated control topic with one partition, so that every
participant sees every message in the same order. This module models the Kafka semantics the
protocol relies on, and the ones that make it fail:

- an append-only log, offsets assigned consecutively from 0;
- fetch from any offset (each consumer keeps its own position), optionally long-polling;
- retention by record count and by age, which advances the log start offset; a fetch below it is
  Kafka's OFFSET_OUT_OF_RANGE, after which a consumer resets to the log start (messages it had not
  read are then *missed*: the ``missed-msg`` scenario);
- committed offsets per consumer name, as Kafka's ``__consumer_offsets``.

The wire messages (``ControlMessage``, ``TopicRecord``, ``AppendRequest``, ``FetchRequest``,
``FetchResponse``, ``OffsetCommit``) live in :mod:`runtime.core.messages` with every other wire
message and are re-exported here; this module is the log model.

The role never raises across the wire for an out-of-range fetch (on Ray an exception inside an
actor arrives wrapped in a RayTaskError): :meth:`ControlTopic.fetch` returns a
:class:`FetchResponse` whose ``error`` is ``OFFSET_OUT_OF_RANGE``; :class:`TopicConsumer` handles it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from runtime.core import trace_events
from runtime.core.env import Env, WaitTimeout
from runtime.core.messages import (
    ACK_COMMIT,
    END_COMMIT,
    KINDS,
    OFFSET_OUT_OF_RANGE,
    START_COMMIT,
    WRITE_STATUS,
    AppendRequest,
    ControlMessage,
    FetchRequest,
    FetchResponse,
    OffsetCommit,
    TopicRecord,
)

# the wire messages live in runtime.core.messages (every wire message in one module); they are
# re-exported here with the log model that uses them
__all__ = [
    "ACK_COMMIT",
    "DEFAULT_TOPIC",
    "END_COMMIT",
    "KINDS",
    "OFFSET_OUT_OF_RANGE",
    "START_COMMIT",
    "WRITE_STATUS",
    "AppendRequest",
    "ControlMessage",
    "ControlTopic",
    "FetchRequest",
    "FetchResponse",
    "OffsetCommit",
    "OffsetOutOfRange",
    "TopicConsumer",
    "TopicRecord",
    "publish",
    "raise_for_error",
]

DEFAULT_TOPIC = "control-topic"


class OffsetOutOfRange(LookupError):
    """A fetch asked for an offset retention already removed (Kafka's OFFSET_OUT_OF_RANGE)."""

    def __init__(self, requested: int, log_start_offset: int, high_watermark: int) -> None:
        self.requested = requested
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        super().__init__(
            f"{OFFSET_OUT_OF_RANGE}: fetch offset {requested} is below the log start offset "
            f"{log_start_offset} (high watermark {high_watermark}); records "
            f"{requested}..{log_start_offset - 1} were removed by retention"
        )


def raise_for_error(response: FetchResponse, requested: int) -> FetchResponse:
    """The local API: turns a fetch's error marker back into :class:`OffsetOutOfRange`."""
    if response.error == OFFSET_OUT_OF_RANGE:
        raise OffsetOutOfRange(requested, response.log_start_offset, response.high_watermark)
    if response.error:
        raise RuntimeError(f"fetch from offset {requested} failed: {response.error}")
    return response


@dataclass
class _ConsumerStats:
    fetches: int = 0
    records: int = 0
    long_poll_waits: int = 0
    long_poll_timeouts: int = 0
    out_of_range: int = 0
    last_fetch_offset: int = -1
    commits: int = 0


class ControlTopic:
    """The control topic as a role: one partition, Kafka's offsets, retention and consumer offsets."""

    RPC_METHODS = ("append", "fetch", "committed_offset", "commit_offset", "describe_topic")

    def __init__(self, env: Env, retention_records: int = 10_000, retention_s: float | None = None) -> None:
        if retention_records < 1:
            raise ValueError(f"retention_records must be >= 1, got {retention_records}")
        if retention_s is not None and retention_s <= 0:
            raise ValueError(f"retention_s must be > 0 or None, got {retention_s}")
        self.env = env
        self.retention_records = retention_records
        self.retention_s = retention_s
        self._log: deque[TopicRecord] = deque()
        self.log_start_offset = 0
        self.high_watermark = 0  # one replica: the log end offset, i.e. the next offset to assign
        self._committed: dict[str, int] = {}
        # replaced on every append; long-polling fetches await the current one
        self._appended = asyncio.Event()
        self.appends = 0
        self.appends_by_kind: dict[str, int] = defaultdict(int)
        self.fetches = 0
        self.long_poll_waits = 0
        self.long_poll_timeouts = 0
        self.records_delivered = 0
        self.out_of_range = 0
        self.records_expired = 0
        self._consumers: dict[str, _ConsumerStats] = defaultdict(_ConsumerStats)

    # -- RPC ------------------------------------------------------------------------------------

    def append(self, request: AppendRequest) -> int:
        """Appends one message; returns its offset (consecutive from 0)."""
        msg = request.message if isinstance(request, AppendRequest) else request
        if not isinstance(msg, ControlMessage):
            raise TypeError(f"append takes an AppendRequest(ControlMessage), got {type(request).__name__}")
        offset = self.high_watermark
        self._log.append(TopicRecord(offset=offset, message=msg, appended_at=self.env.now()))
        self.high_watermark += 1
        self.appends += 1
        self.appends_by_kind[msg.kind] += 1
        self._enforce_retention()
        woken, self._appended = self._appended, asyncio.Event()
        woken.set()
        return offset

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        """Records with offset >= ``request.offset``, at most ``max_records``, in offset order.

        Below the log start: an ``OFFSET_OUT_OF_RANGE`` marker (never raised across the wire).
        At or above the high watermark: empty, after long-polling up to ``timeout_s`` for an append.
        """
        if request.max_records < 1:
            raise ValueError(f"{request.consumer}: max_records must be >= 1, got {request.max_records}")
        stats = self._consumers[request.consumer]
        self.fetches += 1
        stats.fetches += 1
        stats.last_fetch_offset = request.offset
        deadline = self.env.now() + max(0.0, request.timeout_s)
        waited = False
        while True:
            self._enforce_retention()
            if request.offset < self.high_watermark:  # the log start is at most the high watermark
                return self._served(request, stats)
            remaining = deadline - self.env.now()
            if remaining <= 0:
                if waited:
                    self.long_poll_timeouts += 1
                    stats.long_poll_timeouts += 1
                return FetchResponse(
                    records=[],
                    next_offset=request.offset,
                    log_start_offset=self.log_start_offset,
                    high_watermark=self.high_watermark,
                )
            if not waited:
                self.long_poll_waits += 1
                stats.long_poll_waits += 1
                waited = True
            try:
                await self.env.wait_for(
                    self._appended.wait(),
                    remaining,
                    f"an append to the control topic (fetch by {request.consumer} from offset {request.offset})",
                    option="the fetch's max wait",
                )
            except WaitTimeout:
                pass  # the loop re-checks and returns empty: a long poll never hangs

    def _served(self, request: FetchRequest, stats: _ConsumerStats) -> FetchResponse:
        """What a fetch below the high watermark gets: its records, or ``OFFSET_OUT_OF_RANGE``
        below the log start."""
        if request.offset < self.log_start_offset:
            self.out_of_range += 1
            stats.out_of_range += 1
            return FetchResponse(
                records=[],
                next_offset=self.log_start_offset,
                log_start_offset=self.log_start_offset,
                high_watermark=self.high_watermark,
                error=OFFSET_OUT_OF_RANGE,
            )
        start = request.offset - self.log_start_offset
        records = list(itertools.islice(self._log, start, start + request.max_records))
        self.records_delivered += len(records)
        stats.records += len(records)
        return FetchResponse(
            records=records,
            next_offset=records[-1].offset + 1,
            log_start_offset=self.log_start_offset,
            high_watermark=self.high_watermark,
        )

    def commit_offset(self, request: OffsetCommit | str, offset: int | None = None) -> None:
        """Stores a consumer's committed offset (``commit_offset(OffsetCommit)`` on the wire,
        ``commit_offset(name, offset)`` locally)."""
        if isinstance(request, OffsetCommit):
            consumer, value = request.consumer, request.offset
        else:
            if offset is None:
                raise TypeError(f"commit_offset({request!r}) needs an offset")
            consumer, value = request, offset
        if value < 0:
            raise ValueError(f"{consumer}: cannot commit negative offset {value}")
        self._committed[consumer] = value
        self._consumers[consumer].commits += 1

    def committed_offset(self, consumer: str | OffsetCommit) -> int | None:
        """The consumer's last committed offset, or None if it never committed."""
        name = consumer.consumer if isinstance(consumer, OffsetCommit) else consumer
        return self._committed.get(name)

    def describe_topic(self, _msg: Any = None) -> dict[str, Any]:
        """Offsets, retention and counters, overall and per consumer (for reports and diagnosis)."""
        self._enforce_retention()
        return {
            "log_start_offset": self.log_start_offset,
            "high_watermark": self.high_watermark,
            "records": len(self._log),
            "retention_records": self.retention_records,
            "retention_s": self.retention_s,
            "records_expired": self.records_expired,
            "appends": self.appends,
            "appends_by_kind": dict(self.appends_by_kind),
            "fetches": self.fetches,
            "long_poll_waits": self.long_poll_waits,
            "long_poll_timeouts": self.long_poll_timeouts,
            "records_delivered": self.records_delivered,
            "out_of_range": self.out_of_range,
            "committed_offsets": dict(self._committed),
            "consumers": {
                name: {
                    "fetches": s.fetches,
                    "records": s.records,
                    "long_poll_waits": s.long_poll_waits,
                    "long_poll_timeouts": s.long_poll_timeouts,
                    "out_of_range": s.out_of_range,
                    "last_fetch_offset": s.last_fetch_offset,
                    "commits": s.commits,
                    "committed_offset": self._committed.get(name),
                    "lag": max(0, self.high_watermark - max(s.last_fetch_offset, 0)),
                }
                for name, s in sorted(self._consumers.items())
            },
        }

    def describe(self) -> dict[str, Any]:
        """What the host's ``dump``/``describe`` show."""
        return self.describe_topic()

    # -- retention ------------------------------------------------------------------------------

    def _enforce_retention(self) -> None:
        """Drops records beyond the count limit and (if set) older than ``retention_s``.

        Applied lazily on every append, fetch and describe, as if Kafka's log cleaner ran then.
        """
        expired = 0
        while len(self._log) > self.retention_records:
            self._log.popleft()
            expired += 1
        if self.retention_s is not None:
            cutoff = self.env.now() - self.retention_s
            while self._log and self._log[0].appended_at < cutoff:
                self._log.popleft()
                expired += 1
        if expired:
            self.records_expired += expired
            self.log_start_offset = self._log[0].offset if self._log else self.high_watermark


# -- client helpers -------------------------------------------------------------------------------


async def publish(env: Env, message: ControlMessage, topic: str = DEFAULT_TOPIC, *, timeout: float = 10.0) -> int:
    """Producer: appends ``message`` to the topic role; returns its offset. Bounded: a lost
    append fails the producer (Kafka's delivery timeout) rather than hanging it."""
    offset: int = await env.call(topic, "append", AppendRequest(message=message), timeout=timeout)
    return offset


class TopicConsumer:
    """A consumer with its own position (participants and the coordinator each have one).

    On OFFSET_OUT_OF_RANGE it resets to the topic's log start (Kafka's ``auto.offset.reset=earliest``)
    and counts the reset and the offsets it skipped, so a missed message is visible, not silent.
    """

    MAX_RESETS_PER_POLL = 3  # retention may advance again between a reset and the next fetch

    def __init__(
        self, env: Env, name: str, topic: str = DEFAULT_TOPIC, start_offset: int = 0, *, rpc_timeout_s: float = 10.0
    ) -> None:
        if start_offset < 0:
            raise ValueError(f"{name}: start_offset must be >= 0, got {start_offset}")
        self.env = env
        self.name = name
        self.topic = topic
        self._position = start_offset
        self.rpc_timeout_s = rpc_timeout_s
        self.resets = 0
        self.skipped = 0  # offsets jumped over by resets: messages this consumer never saw
        self.polls = 0
        self.records_received = 0
        self.high_watermark = 0  # as of the last reply
        self.log_start_offset = 0

    @property
    def position(self) -> int:
        """The next offset this consumer will fetch."""
        return self._position

    def seek(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"{self.name}: cannot seek to negative offset {offset}")
        self._position = offset

    async def poll(self, max_records: int = 100, timeout_s: float = 0.0) -> list[TopicRecord]:
        """Fetches from the current position and advances past what it returns."""
        self.polls += 1
        for _ in range(self.MAX_RESETS_PER_POLL + 1):
            request = FetchRequest(
                consumer=self.name, offset=self._position, max_records=max_records, timeout_s=timeout_s
            )
            try:
                reply: FetchResponse = await self.env.call(
                    self.topic, "fetch", request, timeout=timeout_s + self.rpc_timeout_s
                )
            except Exception as exc:  # a host that raised instead of returning the marker
                cause = exc if isinstance(exc, OffsetOutOfRange) else getattr(exc, "cause", None)
                if not isinstance(cause, OffsetOutOfRange):
                    raise
                self._reset(cause.log_start_offset)
                continue
            self.high_watermark = reply.high_watermark
            self.log_start_offset = reply.log_start_offset
            if reply.error == OFFSET_OUT_OF_RANGE:
                self._reset(reply.log_start_offset)
                continue
            if reply.error:
                raise RuntimeError(
                    f"{self.name}: fetch from {self.topic} at offset {request.offset} failed: {reply.error}"
                )
            if reply.records:
                self._position = reply.next_offset
                self.records_received += len(reply.records)
            return reply.records
        return []

    def _reset(self, log_start_offset: int) -> None:
        self.resets += 1
        self.skipped += max(0, log_start_offset - self._position)
        self.env.tracer.instant(
            "topic.offset_reset",
            cat=trace_events.TOPIC,
            args={"consumer": self.name, "from": self._position, "to": log_start_offset},
        )
        self._position = log_start_offset

    async def commit(self) -> None:
        """Commits the current position as this consumer's offset (Kafka's commitSync)."""
        await self.env.call(
            self.topic,
            "commit_offset",
            OffsetCommit(consumer=self.name, offset=self._position),
            timeout=self.rpc_timeout_s,
        )

    async def committed(self) -> int | None:
        """This consumer's committed offset on the topic, or None."""
        offset: int | None = await self.env.call(self.topic, "committed_offset", self.name, timeout=self.rpc_timeout_s)
        return offset

    async def open(self) -> int:
        """A new consumer starts at the end of the topic (:class:`runtime.kafka.port.ControlConsumer`)."""
        return await self.seek_to_end()

    async def close(self) -> None:
        """Nothing to release: the model's consumer is a position."""

    async def seek_to_end(self) -> int:
        """Skips everything already in the topic (a consumer that starts after a restart: the
        coordinator's next START_COMMIT says where to resume); returns the new position."""
        info = await self.env.call(self.topic, "describe_topic", None, timeout=self.rpc_timeout_s)
        self.seek(int(info["high_watermark"]))
        return self._position

    async def seek_to_committed(self) -> int:
        """After a restart: resume from the committed offset (or stay put if none); returns it."""
        committed = await self.committed()
        if committed is not None:
            self.seek(committed)
        return self._position
