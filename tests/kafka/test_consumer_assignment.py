"""Where a control-topic consumer reads from when its partition is assigned, without a broker:
the first assignment at the end the topic had at open, a later one (the group rejoined after a
broker restart) at the group's committed offset, as Kafka's consumer does for Hudi's agent."""

from __future__ import annotations

from types import SimpleNamespace

from runtime.kafka.address import BrokerAddress
from runtime.kafka.broker_client import BrokerConsumer, _Client
from runtime.kafka.client_thread import ClientThread

UNSET = -1001  # librdkafka's OFFSET_INVALID: the committed offset, else auto.offset.reset


class _Consumer:
    def __init__(self) -> None:
        self.assigned: list[list[int]] = []

    def assign(self, parts: list[SimpleNamespace]) -> None:
        self.assigned.append([p.offset for p in parts])


def test_only_the_first_assignment_is_moved_to_the_end_at_open() -> None:
    consumer = BrokerConsumer(SimpleNamespace(), "writer-0", BrokerAddress("127.0.0.1", 9092), "/t", 1.0)
    kafka = _Consumer()
    client = _Client(kafka, ClientThread("t"), "g", 42)  # 42: the topic's end when open began
    consumer._on_assign(client, kafka, [SimpleNamespace(offset=UNSET)])
    consumer._on_assign(client, kafka, [SimpleNamespace(offset=UNSET)])  # rejoined: resume where committed
    assert kafka.assigned == [[42], [UNSET]]
    assert client.assigned  # open's wait for the join is over
