"""Where the control topic lives: ``--control-topic`` parsed.

``model`` (the default) is the in-process model of :mod:`runtime.kafka.topic`, a role of the job;
``kafka://HOST:PORT[/TOPIC]`` a real Kafka broker reached through ``confluent-kafka``
(:mod:`runtime.kafka.broker_client`); ``kafka`` asks the command to start a single-node broker on
loopback for the run (:mod:`runtime.kafka.broker`) and becomes that broker's address before any
role sees it. The topic defaults to Hudi's ``hoodie.kafka.control.topic`` default,
``hudi-control-topic`` (``KafkaConnectConfigs.CONTROL_TOPIC_NAME``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.core.config import ConfigError

MODEL = "model"
START_BROKER = "kafka"  # start a broker on loopback for this run
SCHEME = "kafka://"
FLAG = "--control-topic"
HUDI_CONTROL_TOPIC = "hudi-control-topic"  # KafkaConnectConfigs: hoodie.kafka.control.topic's default
_ADDRESS = re.compile(
    r"^kafka://(?P<host>[A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})(?:/(?P<topic>[A-Za-z0-9._\-]+))?/?$"
)


@dataclass(frozen=True)
class BrokerAddress:
    """A Kafka broker and the control topic on it."""

    host: str
    port: int
    topic: str = HUDI_CONTROL_TOPIC

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{SCHEME}{self.host}:{self.port}/{self.topic}"


def broker_address(value: str) -> BrokerAddress | None:
    """The broker ``--control-topic`` names, or None for the model. Raises ConfigError for a value
    that is neither ``model`` nor ``kafka://HOST:PORT[/TOPIC]`` (``kafka``, which a command resolves
    before any role starts, is refused here: a role cannot start a broker)."""
    if value == MODEL:
        return None
    m = _ADDRESS.match(value)
    if m is None or not 0 < int(m["port"]) < 65536:
        hint = (
            "only a command can start a broker for its run (commitlab run and compare)"
            if value == START_BROKER
            else "expected model, kafka (start a broker on loopback for the run) or kafka://HOST:PORT[/TOPIC]"
        )
        raise ConfigError(f"{FLAG} {value!r}: {hint}")
    return BrokerAddress(m["host"], int(m["port"]), m["topic"] or HUDI_CONTROL_TOPIC)
