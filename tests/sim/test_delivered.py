"""The simulator hands a receiver what decoding the wire bytes would give it, without the bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from runtime.core.codec import CodecError, delivered, encode, from_wire, message, to_wire
from runtime.core.messages import CheckpointAck, CheckpointNotice, ControlMessage, WriteMetadataEvent, WriteStat


@message
@dataclass
class _Holder:
    """A test message whose one field takes any value."""

    value: Any = None


@dataclass
class _Unregistered:
    x: int = 0


def _stat(n: int) -> WriteStat:
    return WriteStat(f"f{n}", f"p/f{n}.parquet", "p", "null", n, n, 0, 100 * n, 100 * n, log_files=[f"l{n}"])


WIRE_EQUAL = [
    CheckpointNotice(3, "aborted"),
    CheckpointAck("writer-1", 4, b"\x00state"),
    WriteMetadataEvent(1, 2, "20260101000000000", [_stat(1), _stat(2)], last_batch=True),
    ControlMessage("START_COMMIT", "001", "coordinator", offsets={2: 5, 1: 7}, write_stats=[_stat(3)]),
    _Holder((1, 2.5, None, True, b"b", "s")),
    _Holder({"b": [1, (2, 3)], "a": {"z": 1, "y": 2}, 3: None}),
    _Holder([_Holder(1), [_Holder("x")]]),
    _Holder(2**64 - 1),
    _Holder(-(2**63)),
    _Holder(["a", "b", "c"]),  # columns of one scalar type: a file listing's names and sizes
    _Holder((0, 2**64 - 1, -(2**63))),
]


@pytest.mark.parametrize("msg", WIRE_EQUAL, ids=lambda m: type(m).__name__)
def test_the_receiver_gets_what_the_bytes_decode_to_as_a_fresh_object(msg):
    got, want = delivered(msg), from_wire(to_wire(msg))
    assert not isinstance(got, bytes)
    assert got == want and type(got) is type(want) and got is not msg
    # the same containers in the same order: tuples as lists, dicts in sorted key order
    assert repr(got) == repr(want)


@pytest.mark.parametrize(
    "msg",
    [
        _Holder("ünïcode"),
        _Holder(2**64),
        _Holder(-(2**63) - 1),
        _Holder({"@t": "x"}),
        _Holder(_Unregistered()),
        _Holder(["a", "ü"]),
        _Holder([1, 2**64]),
    ],
    ids=["non-ascii", "too-big", "too-small", "type-key", "unregistered", "non-ascii-column", "too-big-column"],
)
def test_what_is_not_plainly_a_copy_travels_as_its_bytes(msg):
    try:
        want = encode(msg)
    except Exception as exc:  # noqa: BLE001 - the same error from delivered
        with pytest.raises(type(exc)):
            delivered(msg)
        return
    assert delivered(msg) == want


def test_a_message_the_receiver_cannot_build_fails_where_it_arrives():
    got = delivered(_Holder(_Unregistered(1)))
    assert isinstance(got, bytes)
    with pytest.raises(CodecError):
        from_wire(got)


def test_plain_data_and_none_pass_as_they_are():
    batch = object()
    assert delivered(batch) is batch and delivered(None) is None
