"""A real Kafka broker for the tests here: one per module (``broker``), or the check alone
(``kafka_ready``) for a test that starts and restarts its own. Skipped, saying why, without Java,
the broker's jars or confluent-kafka."""

from __future__ import annotations

import pytest

from runtime.kafka.broker import missing_requirement, running_broker


def _skip_without_a_broker() -> None:
    why = missing_requirement()
    if why:
        pytest.skip(why)
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (scripts/setup.sh installs it)")


@pytest.fixture
def kafka_ready() -> None:
    _skip_without_a_broker()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    _skip_without_a_broker()
    from runtime.kafka.broker_client import ensure_control_topic

    with running_broker(data_dir=str(tmp_path_factory.mktemp("kafka"))) as b:
        ensure_control_topic(b.address, 30.0)
        yield b
