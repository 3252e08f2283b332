"""The Kafka offsets a control-topic commit and its control messages carry.

Hudi 0.10+ hudi-kafka-connect: ``ConnectTransactionCoordinator.KAFKA_OFFSET_KEY`` (the commit's
extra metadata ``kafka.commit.offsets``, written by ``endCommit`` and read back by
``initializeGlobalCommittedKafkaOffsets``) and ``ConnectTransactionParticipant.syncKafkaOffsetWithLeader``
(a missing or negative leader offset is ignored).
"""

from __future__ import annotations

from runtime.kafka.topic import ControlMessage

OFFSETS_KEY = "kafka.commit.offsets"  # ConnectTransactionCoordinator.KAFKA_OFFSET_KEY


def format_offsets(offsets: dict[int, int]) -> str:
    return ",".join(f"{p}={o}" for p, o in sorted(offsets.items()))


def parse_offsets(text: str) -> dict[int, int]:
    out = {}
    for part in filter(None, (text or "").split(",")):
        p, _, o = part.partition("=")
        out[int(p)] = int(o)
    return out


def leader_offset(msg: ControlMessage, partition: int) -> int | None:
    """The coordinator's committed offset for ``partition`` in ``msg`` (syncKafkaOffsetWithLeader
    ignores a missing or negative one)."""
    offset = msg.offsets.get(partition)
    return offset if offset is not None and offset >= 0 else None
