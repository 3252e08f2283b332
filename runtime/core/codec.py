"""Wire and state encoding: small dataclasses to msgpack bytes and back.

Every control message, task state and bus record is a dataclass registered with :func:`message`.
The bytes are the same on Ray and in the simulator, so a trace or a state file from one host
replays in the other. Nested registered dataclasses and lists of them are supported.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, TypeVar

import msgpack

_REGISTRY: dict[str, type] = {}
T = TypeVar("T")

_TYPE_KEY = "@t"


class CodecError(ValueError):
    """Bytes that are not a known message, or a message with missing/unknown fields."""


def message(cls: type[T]) -> type[T]:
    """Class decorator: makes ``cls`` a frozen-by-convention dataclass known to the codec."""
    if not dataclasses.is_dataclass(cls):
        cls = dataclasses.dataclass(cls)
    name = cls.__name__
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise TypeError(f"two message classes are named {name}")
    _REGISTRY[name] = cls
    return cls


# field names per dataclass, looked up once: ``dataclasses.fields`` is slow, and encoding runs for
# every message a role sends
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_PLAIN_SCALARS = frozenset((str, int, float, bool, bytes, type(None)))  # exact types


def _field_names(cls: type) -> tuple[str, ...] | None:
    """The fields of a dataclass type, or None for any other type."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(cls):
            return None
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_FIELD_SETS: dict[type, frozenset[str]] = {}


def _field_set(cls: type) -> frozenset[str]:
    names = _FIELD_SETS.get(cls)
    if names is None:
        names = _FIELD_SETS[cls] = frozenset(_field_names(cls) or ())
    return names


def _to_plain(obj: Any) -> Any:
    cls = type(obj)
    if cls in _PLAIN_SCALARS:
        return obj
    names = _field_names(cls)
    if names is not None:
        out = {_TYPE_KEY: cls.__name__}
        for name in names:
            value = getattr(obj, name)
            # most fields are scalars: no call for them (this runs for every message)
            out[name] = value if type(value) in _PLAIN_SCALARS else _to_plain(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [x if type(x) in _PLAIN_SCALARS else _to_plain(x) for x in obj]
    if isinstance(obj, dict):
        # sorted keys: equal messages are equal bytes, whatever order a dict was filled in
        return {k: _to_plain(obj[k]) for k in sorted(obj, key=lambda k: (str(type(k)), k))}
    return obj


def _from_plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        if _TYPE_KEY in obj:
            name = obj[_TYPE_KEY]
            cls = _REGISTRY.get(name)
            if cls is None:
                raise CodecError(f"unknown message type {name!r}")
            kwargs = {k: v if type(v) in _PLAIN_SCALARS else _from_plain(v) for k, v in obj.items() if k != _TYPE_KEY}
            if not kwargs.keys() <= _field_set(cls):
                unknown = set(kwargs).difference(_field_set(cls))
                raise CodecError(f"{name} has no fields {sorted(unknown)}")
            try:
                return cls(**kwargs)
            except TypeError as exc:
                raise CodecError(f"cannot build {name}: {exc}") from exc
        return {k: _from_plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [x if type(x) in _PLAIN_SCALARS else _from_plain(x) for x in obj]
    return obj


def encode(obj: Any) -> bytes:
    """Encodes a registered dataclass (or plain data containing them) to msgpack bytes."""
    return msgpack.packb(_to_plain(obj), use_bin_type=True)


def decode(data: bytes, expected: type[T] | None = None) -> T:
    """Decodes bytes from :func:`encode`; with ``expected``, checks the type."""
    try:
        plain = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise CodecError(f"not a msgpack message ({len(data)} bytes): {exc}") from exc
    obj = _from_plain(plain)
    if expected is not None and not isinstance(obj, expected):
        raise CodecError(f"expected {expected.__name__}, got {type(obj).__name__}")
    return typing.cast(T, obj)


def roundtrip(obj: T) -> T:
    """Encode then decode: what a message looks like after crossing any host boundary."""
    return decode(encode(obj))


def to_wire(msg: Any) -> Any:
    """What a host sends: control messages as msgpack bytes (the same on every host), anything
    else (Arrow data batches) as it is, for the host to pass by reference."""
    if _REGISTRY.get(type(msg).__name__) is type(msg):
        return encode(msg)
    return msg


def from_wire(payload: Any) -> Any:
    return decode(payload) if isinstance(payload, bytes) else payload
