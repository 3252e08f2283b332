"""The broker's cluster id: one ``kafka-storage format`` accepts on every draw (an id whose text
starts with "-" was read as an option, and the broker did not start, one format in 64)."""

from __future__ import annotations

import base64
import uuid

import pytest

from runtime.kafka import broker


def test_an_id_starting_with_a_dash_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    dash_first = uuid.UUID(bytes=b"\xf8" + bytes(15))  # 0b111110.. is "-" in URL-safe base64
    plain = uuid.UUID(bytes=b"\x01" * 16)
    draws = iter([dash_first, dash_first, plain])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    assert base64.urlsafe_b64encode(dash_first.bytes).decode().startswith("-")
    got = broker.cluster_id()
    assert got == base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()
    assert len(got) == 22  # Kafka's Uuid text: 16 bytes, no padding


def test_ids_are_kafka_uuids_and_differ() -> None:
    ids = {broker.cluster_id() for _ in range(500)}
    assert len(ids) == 500
    for text in ids:
        assert not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16
