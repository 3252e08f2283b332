"""P5 ``control-topic`` (RFC-32, Hudi's Kafka Connect sink): commits ride a control topic.

Modelled on hudi-kafka-connect (the ``ControlMessage`` proto version, Hudi 0.10 on):
``org.apache.hudi.connect.transaction.ConnectTransactionCoordinator`` and
``ConnectTransactionParticipant``, ``KafkaConnectTransactionServices`` and ``KafkaConnectConfigs``.

One single-partition topic carries every control message. Its concepts, a module each:
``offsets`` (the Kafka offsets a commit and its messages carry), ``transaction_coordinator``
(``ConnectTransactionCoordinator``'s state machine, in the coordinator role) and ``participant``
(``ConnectTransactionParticipant`` and its control agent, on each write task's mailbox); the topic
itself, model or broker, is ``runtime.kafka``'s. This module is the protocol behind
``runtime/protocols/base.py``: its roles and its checks of the configuration.
"""

from __future__ import annotations

from typing import Any

from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.hudi.client.table_services import WRITE_CLIENT_DEFAULTS
from runtime.hudi.table.hudi_table import HudiTable
from runtime.kafka.address import broker_address
from runtime.kafka.topic import ControlTopic
from runtime.protocols.base import Protocol
from runtime.protocols.control_topic.offsets import OFFSETS_KEY, format_offsets, leader_offset, parse_offsets
from runtime.protocols.control_topic.participant import ControlTopicParticipant, TaskContext
from runtime.protocols.control_topic.transaction_coordinator import (
    RESTART_COMMIT_DELAY_S,
    START_COMMIT_INIT_DELAY_S,
    ControlTopicCoordinator,
    CoordinatorSideContext,
)

__all__ = [
    "OFFSETS_KEY",
    "RESTART_COMMIT_DELAY_S",
    "START_COMMIT_INIT_DELAY_S",
    "TOPIC",
    "ControlTopicCoordinator",
    "ControlTopicParticipant",
    "ControlTopicProtocol",
    "CoordinatorSideContext",
    "TaskContext",
    "format_offsets",
    "leader_offset",
    "parse_offsets",
]

TOPIC = "control-topic"


class ControlTopicProtocol(Protocol):
    name = "control-topic"
    description = "P5: a single-partition control topic carries START/END/WRITE_STATUS/ACK (RFC-32)"
    writer_side = ControlTopicParticipant
    coordinator_side = ControlTopicCoordinator
    extra_roles = (TOPIC,)
    extra_rpc_methods = ControlTopic.RPC_METHODS
    # the Connect sink's Java write client cleans and archives with HoodieWriteConfig's defaults
    table_service_defaults = WRITE_CLIENT_DEFAULTS
    # each participant's write client runs its own embedded timeline server: no coordinator's view
    release_file_system_view = "direct"

    @classmethod
    def check_config(cls, config: JobConfig) -> None:
        broker_address(config.control_topic)  # model or kafka://HOST:PORT[/TOPIC], else ConfigError

    @classmethod
    def roles_for(cls, config: JobConfig) -> tuple[str, ...]:
        """The topic is a role of the job only when it is the model; a broker is outside the job."""
        return cls.extra_roles if broker_address(config.control_topic) is None else ()

    @classmethod
    def make_role(cls, kind: str, env: Env, config: JobConfig, table: HudiTable, task_names: list[str]) -> Any:
        if kind != TOPIC:
            return super().make_role(kind, env, config, table, task_names)
        return ControlTopic(env, retention_records=config.topic_retention_records)
