"""Tests of runtime.kafka.topic: P5's single-partition control topic with Kafka semantics.

No Ray: the simulator's network (tests/harness.py) delivers each call to the ControlTopic with
the request and the reply encoded, so every message really survives encoding, on virtual time: a
long poll's wait costs no real time, and one that hangs fails instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness import TestEnv, active, now

from runtime.core import codec
from runtime.core.messages import WriteStat
from runtime.kafka.topic import (
    ACK_COMMIT,
    DEFAULT_TOPIC,
    END_COMMIT,
    KINDS,
    OFFSET_OUT_OF_RANGE,
    START_COMMIT,
    WRITE_STATUS,
    AppendRequest,
    ControlMessage,
    ControlTopic,
    FetchRequest,
    FetchResponse,
    OffsetCommit,
    OffsetOutOfRange,
    TopicConsumer,
    TopicRecord,
    publish,
    raise_for_error,
)


def make(**kwargs: Any) -> tuple[ControlTopic, TestEnv]:
    """A topic under the default topic name on the test's simulated network, and a participant's
    env that reaches it (every request and reply goes through the codec, as on Ray)."""
    world = active()
    topic = world.register(DEFAULT_TOPIC, ControlTopic(world.env(DEFAULT_TOPIC), **kwargs))
    env = world.env("participant-0")
    env.tracer.enabled = True  # keeps its trace events, which a test reads
    return topic, env


def msg(i: int, kind: str = START_COMMIT) -> ControlMessage:
    return ControlMessage(kind=kind, commit_time=f"2024010100000{i % 10}000", sender="coordinator", seq=i)


def stat(file_id: str) -> WriteStat:
    return WriteStat(
        file_id=file_id,
        path=f"p0/{file_id}_0-1-0_1.parquet",
        partition="p0",
        prev_commit="null",
        num_writes=10,
        num_inserts=10,
        num_update_writes=0,
        total_write_bytes=1234,
        file_size=1234,
        keys_written=10,
    )


async def fill(env: TestEnv, n: int) -> list[int]:
    return [await publish(env, msg(i)) for i in range(n)]


# -- log and offsets ------------------------------------------------------------------------------


def test_offsets_are_consecutive_from_zero(sim):
    async def body():
        topic, env = make()
        assert await fill(env, 5) == [0, 1, 2, 3, 4]
        d = await env.call(DEFAULT_TOPIC, "describe_topic")
        assert (d["log_start_offset"], d["high_watermark"], d["records"], d["appends"]) == (0, 5, 5, 5)
        assert d["appends_by_kind"] == {START_COMMIT: 5}

    sim.run(body(), 3.0)


def test_fetch_returns_records_in_order_and_respects_max_records(sim):
    async def body():
        topic, env = make()
        await fill(env, 10)
        reply = await env.call(DEFAULT_TOPIC, "fetch", FetchRequest("c", offset=3, max_records=4))
        assert isinstance(reply, FetchResponse) and reply.error == ""
        assert [r.offset for r in reply.records] == [3, 4, 5, 6]
        assert [r.message.seq for r in reply.records] == [3, 4, 5, 6]
        assert reply.next_offset == 7 and reply.high_watermark == 10 and reply.log_start_offset == 0
        rest = await env.call(DEFAULT_TOPIC, "fetch", FetchRequest("c", offset=7))
        assert [r.offset for r in rest.records] == [7, 8, 9] and rest.next_offset == 10
        assert all(isinstance(r, TopicRecord) and r.appended_at > 0 for r in rest.records)
        assert topic.describe_topic()["records_delivered"] == 7

    sim.run(body(), 3.0)


def test_fetch_above_high_watermark_is_empty_not_an_error(sim):
    async def body():
        topic, env = make()
        await fill(env, 3)
        for offset in (3, 50):
            reply = await env.call(DEFAULT_TOPIC, "fetch", FetchRequest("c", offset=offset))
            assert reply.records == [] and reply.error == ""
            assert reply.next_offset == offset and reply.high_watermark == 3

    sim.run(body(), 3.0)


def test_bad_requests_are_refused_with_clear_messages(sim):
    topic, _ = make()
    with pytest.raises(ValueError, match="unknown control message kind 'START'"):
        ControlMessage(kind="START", commit_time="1", sender="c")
    with pytest.raises(ValueError, match="max_records must be >= 1"):
        sim.run(topic.fetch(FetchRequest("c", offset=0, max_records=0)))
    with pytest.raises(ValueError, match="retention_records"):
        ControlTopic(sim.env("topic-2"), retention_records=0)
    with pytest.raises(ValueError, match="negative"):
        topic.commit_offset("c", -1)


def test_two_consumers_read_independently(sim):
    async def body():
        topic, env = make()
        await fill(env, 6)
        a = TopicConsumer(env, "participant-0")
        b = TopicConsumer(env, "participant-1", start_offset=4)
        assert [r.offset for r in await a.poll(max_records=2)] == [0, 1]
        assert [r.offset for r in await b.poll()] == [4, 5]
        assert [r.offset for r in await a.poll()] == [2, 3, 4, 5]
        assert (a.position, b.position) == (6, 6)
        assert await b.poll() == [] and b.position == 6
        await publish(env, msg(6, END_COMMIT))
        assert [r.message.kind for r in await a.poll()] == [END_COMMIT]
        assert [r.message.kind for r in await b.poll()] == [END_COMMIT]
        consumers = topic.describe_topic()["consumers"]
        assert consumers["participant-0"]["records"] == 7
        assert consumers["participant-1"]["records"] == 3
        assert consumers["participant-1"]["fetches"] == 3

    sim.run(body(), 3.0)


# -- long poll ------------------------------------------------------------------------------------


def test_long_poll_returns_as_soon_as_a_record_is_appended(sim):
    async def body():
        topic, env = make()
        consumer = TopicConsumer(env, "participant-0")
        other = TopicConsumer(env, "participant-1")
        start = now()
        polls = [asyncio.create_task(consumer.poll(timeout_s=2.0)), asyncio.create_task(other.poll(timeout_s=2.0))]
        await asyncio.sleep(0.05)
        assert not any(p.done() for p in polls), "a long poll returned before anything was appended"
        assert await publish(env, msg(0)) == 0
        got = await asyncio.gather(*polls)
        elapsed = now() - start
        assert [[r.offset for r in recs] for recs in got] == [[0], [0]]
        assert elapsed < 0.5, f"long poll took {elapsed:.2f}s to see an append"
        d = topic.describe_topic()
        assert d["long_poll_waits"] == 2 and d["long_poll_timeouts"] == 0

    sim.run(body(), 3.0)


def test_long_poll_times_out_empty_instead_of_hanging(sim):
    async def body():
        topic, env = make()
        await fill(env, 2)
        consumer = TopicConsumer(env, "participant-0", start_offset=2)
        start = now()
        assert await consumer.poll(timeout_s=0.15) == []
        elapsed = now() - start
        assert 0.1 <= elapsed < 1.0
        assert consumer.position == 2
        d = topic.describe_topic()
        assert d["long_poll_waits"] == 1 and d["long_poll_timeouts"] == 1
        assert d["consumers"]["participant-0"]["long_poll_timeouts"] == 1
        # with records available a long poll does not wait at all
        start = now()
        assert [r.offset for r in await TopicConsumer(env, "x").poll(timeout_s=2.0)] == [0, 1]
        assert now() - start < 0.5

    sim.run(body(), 3.0)


# -- retention ------------------------------------------------------------------------------------


def test_retention_by_count_advances_log_start_and_old_offsets_are_out_of_range(sim):
    async def body():
        topic, env = make(retention_records=5)
        assert await fill(env, 8) == list(range(8))
        d = topic.describe_topic()
        assert (d["log_start_offset"], d["high_watermark"], d["records"], d["records_expired"]) == (3, 8, 5, 3)
        reply = await env.call(DEFAULT_TOPIC, "fetch", FetchRequest("late", offset=1))
        assert reply.error == OFFSET_OUT_OF_RANGE and reply.records == []
        assert (reply.next_offset, reply.log_start_offset, reply.high_watermark) == (3, 3, 8)
        with pytest.raises(OffsetOutOfRange, match=r"fetch offset 1 .* log start offset 3"):
            raise_for_error(reply, 1)
        assert topic.describe_topic()["consumers"]["late"]["out_of_range"] == 1

    sim.run(body(), 3.0)


def test_consumer_resets_to_log_start_and_counts_it(sim):
    async def body():
        topic, env = make(retention_records=5)
        consumer = TopicConsumer(env, "participant-2")
        await fill(env, 8)
        records = await consumer.poll()
        assert [r.offset for r in records] == [3, 4, 5, 6, 7]
        assert (consumer.resets, consumer.skipped, consumer.position) == (1, 3, 8)
        assert consumer.log_start_offset == 3 and consumer.high_watermark == 8
        assert any(e["name"] == "topic.offset_reset" for e in env.tracer.events)
        # an in-range consumer never resets
        await publish(env, msg(8))
        assert [r.offset for r in await consumer.poll()] == [8] and consumer.resets == 1

    sim.run(body(), 3.0)


def test_consumer_also_handles_a_raised_offset_out_of_range(sim):
    """A host that raises (the exception, or a wrapper with ``cause``) instead of the marker."""

    class Wrapped(Exception):
        def __init__(self, cause: Exception) -> None:
            super().__init__(str(cause))
            self.cause = cause

    async def body():
        topic, env = make(retention_records=2)
        await fill(env, 4)
        real_fetch = topic.fetch

        async def raising_fetch(req: FetchRequest) -> FetchResponse:
            reply = await real_fetch(req)
            if reply.error:
                raise Wrapped(OffsetOutOfRange(req.offset, reply.log_start_offset, reply.high_watermark))
            return reply

        topic.fetch = raising_fetch  # type: ignore[method-assign]
        consumer = TopicConsumer(env, "p")
        assert [r.offset for r in await consumer.poll()] == [2, 3]
        assert (consumer.resets, consumer.skipped) == (1, 2)

    sim.run(body(), 3.0)


def test_retention_by_age_advances_log_start(sim):
    async def body():
        topic, env = make(retention_s=0.2)
        await fill(env, 3)
        await asyncio.sleep(0.3)
        assert await publish(env, msg(3)) == 3
        assert await publish(env, msg(4)) == 4
        d = topic.describe_topic()
        assert (d["log_start_offset"], d["high_watermark"], d["records"]) == (3, 5, 2)
        reply = await env.call(DEFAULT_TOPIC, "fetch", FetchRequest("c", offset=0))
        assert reply.error == OFFSET_OUT_OF_RANGE and reply.next_offset == 3
        # with no appends at all, age still expires records (checked on fetch): log start == HW
        await asyncio.sleep(0.3)
        consumer = TopicConsumer(env, "c2", start_offset=3)
        assert await consumer.poll() == []
        assert (consumer.resets, consumer.position) == (1, 5)
        assert topic.describe_topic()["records"] == 0

    sim.run(body(), 3.0)


# -- consumer-group offsets -----------------------------------------------------------------------


def test_committed_offsets_are_kept_per_consumer(sim):
    async def body():
        topic, env = make()
        await fill(env, 5)
        a = TopicConsumer(env, "participant-0")
        b = TopicConsumer(env, "participant-1")
        assert await a.committed() is None
        await a.poll(max_records=3)
        await a.commit()
        await b.poll()
        await b.commit()
        assert await env.call(DEFAULT_TOPIC, "committed_offset", "participant-0") == 3
        assert await env.call(DEFAULT_TOPIC, "committed_offset", "participant-1") == 5
        await env.call(DEFAULT_TOPIC, "commit_offset", OffsetCommit("participant-1", 4))
        assert topic.committed_offset("participant-1") == 4
        topic.commit_offset("coordinator", 2)  # the local form
        assert topic.committed_offset("coordinator") == 2
        assert topic.committed_offset("nobody") is None
        # a restarted consumer resumes from its committed offset
        restarted = TopicConsumer(env, "participant-0")
        assert await restarted.seek_to_committed() == 3
        assert [r.offset for r in await restarted.poll()] == [3, 4]
        d = topic.describe_topic()
        assert d["committed_offsets"] == {"participant-0": 3, "participant-1": 4, "coordinator": 2}
        assert d["consumers"]["participant-1"]["commits"] == 2

    sim.run(body(), 3.0)


# -- codec ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_roundtrips_through_the_codec(sim, kind):
    message = ControlMessage(
        kind=kind,
        commit_time="20240101000000123",
        sender="participant-3",
        partition=3,
        offsets={0: 17, 3: 42, 11: 0},
        write_stats=[stat("f-3-0"), stat("f-3-1")],
        last_offset=41,
        seq=9,
    )
    back = codec.roundtrip(message)
    assert back == message
    assert all(isinstance(k, int) for k in back.offsets) and back.offsets[11] == 0
    assert all(isinstance(s, WriteStat) for s in back.write_stats)
    record = TopicRecord(offset=5, message=message, appended_at=12.5)
    assert codec.roundtrip(record) == record
    assert codec.roundtrip(AppendRequest(message)) == AppendRequest(message)
    response = FetchResponse(records=[record], next_offset=6, log_start_offset=0, high_watermark=6)
    assert codec.roundtrip(response) == response


def test_request_and_marker_messages_roundtrip(sim):
    for m in (
        FetchRequest("c", 4, 10, 0.5),
        OffsetCommit("c", 7),
        FetchResponse([], 3, 3, 8, error=OFFSET_OUT_OF_RANGE),
        ControlMessage(kind=ACK_COMMIT, commit_time="1", sender="coordinator"),
    ):
        assert codec.roundtrip(m) == m
    # defaults are not shared between instances
    a, b = (ControlMessage(kind=WRITE_STATUS, commit_time="1", sender="p") for _ in range(2))
    a.offsets[0] = 1
    a.write_stats.append(stat("x"))
    assert b.offsets == {} and b.write_stats == []


def test_rpc_methods_exist(sim):
    topic, _ = make()
    for name in ControlTopic.RPC_METHODS:
        assert callable(getattr(topic, name)), name
    assert topic.describe() == topic.describe_topic()
