"""The control topic a run's ``--control-topic`` names: the in-process model
(:class:`runtime.kafka.port.ModelPort`) or a real broker (:class:`runtime.kafka.broker_client.BrokerPort`).
Above both ports, so that neither imports the other."""

from __future__ import annotations

from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.kafka.address import broker_address
from runtime.kafka.port import ControlTopicPort, ModelPort


def control_topic_port(env: Env, config: JobConfig, job_key: str) -> ControlTopicPort:
    """The port ``--control-topic`` names: the model, or a broker. ``job_key`` tells this job's
    messages from another's on a shared broker topic (Hudi tells them by the sink's topic name)."""
    address = broker_address(config.control_topic)
    if address is None:
        return ModelPort(env, config.rpc_timeout_s)
    from runtime.kafka.broker_client import BrokerPort  # confluent-kafka only where a broker is used

    return BrokerPort(env, address, job_key=job_key, timeout_s=config.rpc_timeout_s)
