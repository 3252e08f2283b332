"""The control topic as the protocol sees it: a port with two implementations.

:mod:`runtime.protocols.control_topic` (Hudi's Connect coordinator and participants) produces and
consumes through a :class:`ControlTopicPort`, never through a transport. Two implement it:

- :class:`ModelPort`, the default (``--control-topic model``) and the simulator's only one: the
  topic is a role of the job (:class:`runtime.kafka.topic.ControlTopic`), reached with the host's
  calls, so a seeded simulation delivers, loses and delays its messages like any other;
- :class:`runtime.kafka.broker_client.BrokerPort` (``--control-topic kafka://HOST:PORT``): a real
  Kafka broker through ``confluent-kafka``, with the settings of Hudi's ``KafkaConnectControlAgent``
  and ``KafkaControlProducer`` (that module's docstring names them).

Either way a consumer starts at the end of the topic (Hudi's agent: ``auto.offset.reset=latest``,
"consumers only process messages that are sent after they come online") and a poll returns
:class:`~runtime.kafka.topic.TopicRecord` s in offset order.
"""

from __future__ import annotations

from typing import Protocol

from runtime.core.env import Env
from runtime.kafka.topic import DEFAULT_TOPIC, ControlMessage, TopicConsumer, TopicRecord, publish


class ControlConsumer(Protocol):
    """One consumer of the control topic (the coordinator's, or one participant's)."""

    name: str

    async def open(self) -> int:
        """Positions the consumer at the end of the topic; returns that offset."""
        ...

    async def poll(self, max_records: int = 100, timeout_s: float = 0.0) -> list[TopicRecord]:
        """The records after the position (at most ``max_records``), waiting up to ``timeout_s``
        for the first; advances past them."""
        ...

    async def close(self) -> None: ...


class ControlTopicPort(Protocol):
    """Produces to and makes consumers of one control topic."""

    def consumer(self, name: str) -> ControlConsumer: ...

    async def publish(self, message: ControlMessage) -> int:
        """Appends ``message``; returns its offset. Bounded: a message not acknowledged in time
        fails the producer (Kafka's delivery timeout)."""
        ...

    async def close(self) -> None: ...


class ModelPort:
    """The control topic modelled as a role of the job (:mod:`runtime.kafka.topic`)."""

    def __init__(self, env: Env, rpc_timeout_s: float, topic: str = DEFAULT_TOPIC) -> None:
        self.env = env
        self.rpc_timeout_s = rpc_timeout_s
        self.topic = topic

    def consumer(self, name: str) -> ControlConsumer:
        return TopicConsumer(self.env, name, self.topic, rpc_timeout_s=self.rpc_timeout_s)

    async def publish(self, message: ControlMessage) -> int:
        return await publish(self.env, message, self.topic, timeout=self.rpc_timeout_s)

    async def close(self) -> None:
        return None
