"""A control-topic consumer whose librdkafka client stops reaching the broker is replaced, on a
real broker: librdkafka (issue #5301) can drop every broker it knew after a broker restart, and
then its polls return nothing and its synchronous commit never returns. Each test stands such a
client in for the real one after the consumer opened, and checks that the consumer goes on
within --rpc-timeout with nothing lost and nothing handed over twice. Skipped, saying why,
without Java, the broker's jars or confluent-kafka."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from runtime.core.metrics import Metrics
from runtime.core.trace import Tracer
from runtime.kafka.topic import START_COMMIT, ControlMessage

TIMEOUT_S = 3.0  # the ports' --rpc-timeout: the bound of every client call and of a silence


def _env(role: str) -> SimpleNamespace:
    return SimpleNamespace(role=role, metrics=Metrics(), tracer=Tracer(role, enabled=True))


class _BrokerLost:
    """A librdkafka consumer that lost every broker: polls return nothing, the topic's end cannot
    be read, a synchronous commit never returns (until released, at the test's end)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.released = threading.Event()
        self.commits = 0

    def poll(self, timeout: float) -> None:
        self.released.wait(timeout)

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> Any:
        from confluent_kafka import KafkaError, KafkaException

        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "no broker available"))

    def commit(self, asynchronous: bool = True) -> None:
        self.commits += 1
        self.released.wait()

    def close(self) -> None:
        self.real.close()


class _CommitNeverReturns(_BrokerLost):
    """Polls as the real client does (the broker went away after this poll), but its commit never
    returns."""

    def poll(self, timeout: float) -> Any:
        return self.real.poll(timeout)

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return self.real.consume(num_messages=num_messages, timeout=timeout)


async def _until(consumer, want: set[str], polls: int = 100) -> list:
    got: list = []
    for _ in range(polls):  # bounded: 100 polls of 0.2 s, and every poll bounded by TIMEOUT_S
        got += await asyncio.wait_for(consumer.poll(timeout_s=0.2), 2 * TIMEOUT_S + 1)
        if {r.message.commit_time for r in got} >= want:
            break
    return got


def _scenario(broker, stand_in: type[_BrokerLost]) -> tuple[list[str], list[str], Any, SimpleNamespace]:
    from runtime.kafka.broker_client import BrokerPort

    async def run():
        coordinator = BrokerPort(_env("coordinator"), broker.address, job_key="/t", timeout_s=TIMEOUT_S)
        env = _env("writer-0")
        participant = BrokerPort(env, broker.address, job_key="/t", timeout_s=TIMEOUT_S)
        consumer = participant.consumer("writer-0")
        await consumer.open()
        client = consumer._client
        lost = stand_in(client.consumer)
        client.consumer = lost
        try:
            await coordinator.publish(ControlMessage(START_COMMIT, "001", "coordinator"))
            before = await _until(consumer, {"001"})
            for t in ("002", "003"):
                await coordinator.publish(ControlMessage(START_COMMIT, t, "coordinator"))
            after = await _until(consumer, {"002", "003"})
            after += await consumer.poll(timeout_s=1.0)  # anything replayed behind them
        finally:
            lost.released.set()
            await consumer.close()
            for port in (coordinator, participant):
                await port.close()
        return [r.message.commit_time for r in before], [r.message.commit_time for r in after], consumer, env

    return asyncio.run(run())


def test_a_consumer_whose_commit_never_returns_is_replaced_and_loses_nothing(broker):
    before, after, consumer, env = _scenario(broker, _CommitNeverReturns)
    assert before == ["001"]  # what the stuck commit's poll returned is handed over
    assert after == ["002", "003"]  # the new client starts after it: nothing twice, nothing lost
    assert consumer.replaced == 1
    assert env.metrics.counters["control_topic_consumer_replaced"] == 1
    (why,) = [e["args"]["why"] for e in env.tracer.events if e["name"] == "kafka consumer replaced"]
    assert "its offset commit" in why and "--rpc-timeout" in why


def test_a_consumer_that_lost_every_broker_is_replaced_and_loses_nothing(broker):
    before, after, consumer, env = _scenario(broker, _BrokerLost)
    assert before + after == ["001", "002", "003"]
    assert consumer.replaced == 1
    (why,) = [e["args"]["why"] for e in env.tracer.events if e["name"] == "kafka consumer replaced"]
    assert "received nothing" in why and "--rpc-timeout" in why and "end could not be read" in why


def test_a_call_that_never_returns_is_bounded_and_names_its_option() -> None:
    from runtime.kafka.client_thread import ClientStuck, ClientThread

    release = threading.Event()

    async def run() -> str:
        thread = ClientThread("kafka-writer-0")
        with pytest.raises(ClientStuck) as stuck:
            await thread.run(release.wait, timeout_s=0.2, what="its offset commit", option="--rpc-timeout")
        thread.shutdown()
        fresh = ClientThread("kafka-writer-0")
        assert await fresh.run(lambda: 7, timeout_s=1.0, what="x", option="--rpc-timeout") == 7
        fresh.shutdown()
        return str(stuck.value)

    try:
        message = asyncio.run(run())
    finally:
        release.set()
    assert message == "kafka-writer-0 waited 0.2s for its offset commit (--rpc-timeout)"
