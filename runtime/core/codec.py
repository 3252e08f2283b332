"""Wire and state encoding: small dataclasses to msgpack bytes and back.

Every control message, task state and bus record is a dataclass registered with :func:`message`.
The bytes are the same on Ray and in the simulator, so a trace or a state file from one host
replays in the other. Nested registered dataclasses and lists of them are supported.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
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
    _REGISTERED.add(cls)
    return cls


# the registered classes themselves: ``type(msg) in _REGISTERED`` is ``_REGISTRY.get(name) is type(msg)``
# (a name is registered once), without the name's look-up; every message sent asks it
_REGISTERED: set[type] = set()


# field names per dataclass, looked up once: ``dataclasses.fields`` is slow, and encoding runs for
# every message a role sends
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_PLAIN_SCALARS = frozenset((str, int, float, bool, bytes, type(None)))  # exact types


_NOT_DATACLASSES: set[type] = set()  # (lists and dicts are asked about as often as messages)


def _field_names(cls: type) -> tuple[str, ...] | None:
    """The fields of a dataclass type, or None for any other type."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        if cls in _NOT_DATACLASSES:
            return None
        if not dataclasses.is_dataclass(cls):
            _NOT_DATACLASSES.add(cls)
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
    plainer = _PLAINERS.get(cls)
    if plainer is not None:
        return plainer(obj)
    names = _field_names(cls)
    if names is not None:
        plainer = _PLAINERS[cls] = _plainer(cls, names)
        return plainer(obj)
    if isinstance(obj, (list, tuple)):
        return [x if type(x) in _PLAIN_SCALARS else _to_plain(x) for x in obj]
    if isinstance(obj, dict):
        # sorted keys: equal messages are equal bytes, whatever order a dict was filled in
        return {k: _to_plain(obj[k]) for k in sorted(obj, key=lambda k: (str(type(k)), k))}
    return obj


# a converter per dataclass, written out field by field (as :func:`_copier` is): a task's state
# (its write statuses, 17 fields each) is encoded at every checkpoint, a loop of ``getattr`` a field
_PLAINERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _plainer(cls: type, names: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """``{"@t": name, field: value, ...}`` of an instance, fields in order: a field's value as it
    is when its type is a plain scalar, else ``_to_plain`` of it."""
    items = ", ".join([f"{_TYPE_KEY!r}: {cls.__name__!r}"] + [f"{name!r}: v{i}" for i, name in enumerate(names)])
    return _field_by_field(
        names,
        lambda v: [f"    if type({v}) not in _PLAIN_SCALARS:", f"        {v} = _to_plain({v})"],
        f"{{{items}}}",
        {"_to_plain": _to_plain, "_PLAIN_SCALARS": _PLAIN_SCALARS},
    )


def _field_by_field(
    names: tuple[str, ...], convert: Callable[[str], list[str]], result: str, scope: dict[str, Any]
) -> Callable[[Any], Any]:
    """A function of an instance ``obj`` written out field by field: ``v<i> = obj.<name>``, then
    the lines ``convert(f"v<i>")`` gives, then ``return <result>`` (names defined in ``scope``)."""
    lines = ["def convert(obj):"]
    for i, name in enumerate(names):
        lines += [f"    v{i} = obj.{name}", *convert(f"v{i}")]
    lines.append(f"    return {result}")
    exec("\n".join(lines), scope)  # noqa: S102 - code written here from a dataclass's field names
    function: Callable[[Any], Any] = scope["convert"]
    return function


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
    if type(msg) in _REGISTERED:
        return encode(msg)
    return msg


def from_wire(payload: Any) -> Any:
    return decode(payload) if isinstance(payload, bytes) else payload


# -- in one process: what the receiver decodes, without the bytes -------------------------------

_MSGPACK_INTS = (-(2**63), 2**64)  # msgpack's integer range: others fail to encode
_COPYABLE: dict[type, bool] = {}  # registered classes whose every field goes through __init__


class _NeedsBytes(Exception):
    """A value whose round trip through msgpack is not plainly a copy: take the bytes."""


def _copyable(cls: type) -> bool:
    ok = _COPYABLE.get(cls)
    if ok is None:
        ok = _COPYABLE[cls] = _REGISTRY.get(cls.__name__) is cls and all(f.init for f in dataclasses.fields(cls))
    return ok


_LO, _HI = _MSGPACK_INTS
_AS_THEY_ARE = frozenset((float, bool, bytes, type(None)))  # exact types msgpack gives back equal


def _copy(obj: Any) -> Any:
    """``_from_plain(unpackb(packb(_to_plain(obj))))`` for what it plainly copies (registered
    dataclasses, lists, tuples, dicts, exact scalars in msgpack's range); raises otherwise. The
    scalar tests are inline: this runs for every field of every message."""
    cls = type(obj)
    if cls is str:
        if obj.isascii():  # a lone surrogate does not encode: the bytes say so
            return obj
        raise _NeedsBytes
    if cls is int:
        if _LO <= obj < _HI:
            return obj
        raise _NeedsBytes
    if cls in _AS_THEY_ARE:
        return obj
    if cls is list or cls is tuple:
        return _copy_sequence(obj)
    copier = _COPIERS.get(cls)
    if copier is not None:
        return copier(obj)
    names = _field_names(cls)
    if names is not None:
        if not _copyable(cls):
            raise _NeedsBytes
        copier = _COPIERS[cls] = _copier(cls, names)
        return copier(obj)
    if cls is dict:
        if _TYPE_KEY in obj:  # read back as a message
            raise _NeedsBytes
        out = {}
        for k in sorted(obj, key=lambda k: (str(type(k)), k)):
            if type(k) not in _PLAIN_SCALARS or type(k) is bytes:
                raise _NeedsBytes
            out[_copy(k)] = _copy(obj[k])
        return out
    raise _NeedsBytes


# a copier per registered dataclass, written out field by field (as ``dataclasses`` writes an
# ``__init__``): the fields of every message, without a loop, a ``getattr`` and a dict of kwargs
_COPIERS: dict[type, Callable[[Any], Any]] = {}


def _copier(cls: type, names: tuple[str, ...]) -> Callable[[Any], Any]:
    """``cls(**{name: copy of obj.name})`` for an instance ``obj``: a field's value as it is when
    it is a scalar msgpack gives back equal (the tests of :func:`_copy`), else ``_copy`` of it."""
    return _field_by_field(
        names,
        lambda v: [
            f"    t = type({v})",
            f"    if not (t is str and {v}.isascii() or t is int and _LO <= {v} < _HI or t in _AS_THEY_ARE):",
            f"        {v} = _copy({v})",
        ],
        f"cls({', '.join(f'{name}=v{i}' for i, name in enumerate(names))})",
        {"cls": cls, "_copy": _copy, "_LO": _LO, "_HI": _HI, "_AS_THEY_ARE": _AS_THEY_ARE},
    )


def _copy_sequence(obj: list[Any] | tuple[Any, ...]) -> list[Any]:
    """A list or tuple as a list; a column of plain strings or ints (a file listing's names and
    sizes) is checked in one pass each, not an item at a time."""
    if not obj:
        return []
    first = type(obj[0])  # (a list of messages is not asked twice whether it holds only strings or ints)
    if first is str and all(type(x) is str for x in obj):
        if "".join(obj).isascii():
            return list(obj)
        raise _NeedsBytes
    if first is int and all(type(x) is int for x in obj):
        if _LO <= min(obj) and max(obj) < _HI:
            return list(obj)
        raise _NeedsBytes
    return [_copy(x) for x in obj]


def delivered(msg: Any) -> Any:
    """What a receiver in this process gets of ``msg``: ``to_wire(msg)`` for the receiver's
    ``from_wire``, as an object equal to what decoding the bytes gives (a fresh registered
    dataclass, tuples as lists, dicts in sorted key order) when that is plainly a copy, or else
    the bytes themselves (which fail to encode or decode where they always did). The simulator
    needs no bytes between two roles of one process; the decoded message is the same."""
    cls = type(msg)
    if cls not in _REGISTERED:
        return msg
    try:
        copier = _COPIERS.get(cls)  # (what ``_copy`` does with a registered class it has seen)
        return copier(msg) if copier is not None else _copy(msg)
    except Exception:  # noqa: BLE001 - the bytes raise it again, where they always did
        return encode(msg)
