"""A control topic just created is listed with no partition until its leader is elected: the check
of the topic asks again instead of refusing the run (seen on a loaded machine: "has 0 partitions")."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from runtime.core.config import ConfigError  # noqa: E402
from runtime.kafka.address import BrokerAddress  # noqa: E402
from runtime.kafka.broker_client import ensure_control_topic  # noqa: E402

TOPIC = "hudi-control-topic"


class _Admin:
    """An admin client whose broker lists the topic with ``empty_lists`` partition-less answers
    after creating it, then with one partition."""

    def __init__(self, empty_lists: int) -> None:
        self.empty_lists = empty_lists
        self.created = False
        self.lists = 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.lists += 1
        if not self.created:
            return SimpleNamespace(topics={})
        if self.empty_lists > 0:
            self.empty_lists -= 1
            return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions={})})
        return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions={0: object()})})

    def create_topics(self, topics: list[Any]) -> dict[str, Any]:
        self.created = True
        return {TOPIC: SimpleNamespace(result=lambda timeout: None)}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> _Admin:
    import confluent_kafka.admin

    made = _Admin(empty_lists=3)
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", lambda conf: made)
    return made


def test_a_topic_listed_without_partitions_just_after_its_creation_is_asked_for_again(admin: _Admin) -> None:
    assert ensure_control_topic(BrokerAddress("127.0.0.1", 9092, TOPIC), 5.0) == 1
    assert admin.lists == 5  # before the creation, three answers without a partition, then one


def test_a_topic_never_listed_with_a_partition_is_refused_naming_the_wait(admin: _Admin) -> None:
    admin.empty_lists = 10**9
    with pytest.raises(ConfigError, match="no partition for 0.3s.*--broker-timeout"):
        ensure_control_topic(BrokerAddress("127.0.0.1", 9092, TOPIC), 0.3)
