"""Avro binary encoding of a table's records, a column at a time.

The Avro specification's binary encoding (what Hudi's ``HoodieAvroDataBlock.serializeRecords``
writes through ``BinaryEncoder``, and ``fastavro.schemaless_writer`` writes per record): a record
is the concatenation of its fields' encodings, in schema order, nothing between them. So each
field is encoded for every record at once, with numpy, into one Arrow binary array (a value per
record), and a record is those arrays joined row by row (:func:`join_rows`).

* ``int``, ``long`` (and the ``date``, ``timestamp-micros`` and ``local-timestamp-micros`` logical
  types over them): the zig-zag varint of the value (7 bits a byte, low group first, the top bit
  set on every byte but the last).
* ``string``, ``bytes``: the byte length as a ``long``, then the bytes (a string's UTF-8).
* ``double``, ``float``: 8 or 4 bytes, little-endian IEEE 754; ``boolean``: one byte, 0 or 1.
* a union (every field Hudi writes: ``["null", T]`` for the meta fields, ``[T, "null"]`` for the
  data fields Spark's ``SchemaConverters`` converts): the branch's index as a ``long`` (one byte,
  0 or 2), then the branch's value (nothing for null).

Columns encoded one value at a time by fastavro instead (the bytes are the same, only slower):
a decimal (``fixed`` with the ``decimal`` logical type), a list, a map, a struct, a timestamp in
nanoseconds, a ``date64``, a union of more than two branches, and a non-union field with nulls
(where fastavro raises its own error).

Back (compaction reading a block, :func:`decode_records`): the same encodings read a field at a
time for every record at once, the strings as Arrow binary views over the block's bytes, gathered
into one array (its UTF-8 checked there); a block with any field of the types above is left to
fastavro, record by record.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.avro_schema import arrow_type

_BYTES = pa.large_binary()
_TIMESTAMP_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_FIXED_WIDTH = {"double": (pa.float64(), 8), "float": (pa.float32(), 4), "boolean": (pa.uint8(), 1)}


def record_fields(schema: JsonObject, records: pa.Table) -> list[pa.Array]:
    """Each field of ``schema`` (a record) encoded for every row of ``records``: one or two
    ``large_binary`` arrays per field, no nulls; joined row by row they are the records' Avro
    binary encodings."""
    out: list[pa.Array] = []
    for field in schema["fields"]:
        column = records.column(field["name"])
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        out.extend(_field(field["type"], array))
    return out


def join_rows(arrays: list[pa.Array]) -> pa.Array:
    """The arrays' values concatenated row by row (Arrow's ``binary_join_element_wise``)."""
    return pc.binary_join_element_wise(*arrays, pa.scalar(b"", _BYTES))


def byte_lengths(array: pa.Array) -> npt.NDArray[np.int64]:
    """Each value's byte length (a ``large_binary`` array without nulls)."""
    offsets = np.frombuffer(array.buffers()[1], np.int64, len(array) + 1, array.offset * 8)
    return np.diff(offsets)


def fixed_width_values(data: npt.NDArray[Any]) -> pa.Array:
    """A ``large_binary`` array of the rows of ``data`` (a 2-d uint8 array: every value as wide)."""
    n, width = data.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    payload = np.ascontiguousarray(data).tobytes()
    return pa.Array.from_buffers(_BYTES, n, [None, pa.py_buffer(offsets), pa.py_buffer(payload)])


def _field(avro: Any, array: pa.Array) -> list[pa.Array]:
    """The field's encoding: the union branch and the value, as one array or two."""
    present = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if isinstance(avro, list):
        if len(avro) != 2 or "null" not in avro:
            return [_fastavro_column(avro, array)]
        value_type = avro[1 - avro.index("null")]
        branch = np.where(present, 2 * (1 - avro.index("null")), 2 * avro.index("null")).astype(np.uint8)
    elif bool(present.all()):
        value_type, branch = avro, None
    else:
        return [_fastavro_column(avro, array)]  # nulls in a field that cannot hold one: fastavro's error
    kind = _kind(value_type, array.type)
    if kind in ("string", "bytes"):
        values = pc.fill_null(array.cast(_BYTES), pa.scalar(b"", _BYTES))
        lengths = np.where(present, byte_lengths(values), 0)
        return [_varints(_zigzag(lengths), branch, present), values]
    if kind in ("int", "long"):
        return [_varints(_zigzag(_integers(array)), branch, present)]
    if kind in _FIXED_WIDTH:
        arrow_type, width = _FIXED_WIDTH[kind]
        raw = pc.fill_null(array.cast(arrow_type), 0).to_numpy(zero_copy_only=False)
        return [_with_branch(np.ascontiguousarray(raw).view(np.uint8).reshape(-1, width), branch, present)]
    return [_fastavro_column(avro, array)]


def _kind(avro: Any, arrow: pa.DataType) -> str | None:
    """The encoding of a non-union Avro type for values of ``arrow``; None: fastavro's, per value."""
    logical = avro.get("logicalType") if isinstance(avro, dict) else None
    base = avro if isinstance(avro, str) else avro.get("type") if isinstance(avro, dict) else None
    if pa.types.is_null(arrow):
        return "bytes" if base in ("string", "bytes") else None
    if logical == "date":
        return "int" if pa.types.is_date32(arrow) else None
    if logical in ("timestamp-micros", "local-timestamp-micros"):
        return "long" if pa.types.is_timestamp(arrow) and arrow.unit in _TIMESTAMP_MICROS else None
    if logical is not None or not isinstance(base, str):
        return None
    checks = {
        "string": lambda: pa.types.is_string(arrow) or pa.types.is_large_string(arrow),
        "bytes": lambda: pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow),
        "int": lambda: pa.types.is_integer(arrow),
        "long": lambda: pa.types.is_integer(arrow) and arrow != pa.uint64(),
        "double": lambda: pa.types.is_floating(arrow),
        "float": lambda: pa.types.is_floating(arrow),
        "boolean": lambda: pa.types.is_boolean(arrow),
    }
    check = checks.get(base)
    return base if check is not None and check() else None


def _integers(array: pa.Array) -> npt.NDArray[np.int64]:
    """The values as int64 (nulls as 0): a date's days, a timestamp's microseconds."""
    if pa.types.is_timestamp(array.type):
        scale = _TIMESTAMP_MICROS[array.type.unit]
    else:
        scale = 1
        array = array.cast(pa.int32()) if pa.types.is_date32(array.type) else array
    values = np.asarray(pc.fill_null(array.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return values * np.int64(scale) if scale != 1 else values


def _zigzag(values: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Avro's zig-zag: 0, -1, 1, -2 ... as 0, 1, 2, 3 ..."""
    v = values.astype(np.int64)
    return (v << np.int64(1)).view(np.uint64) ^ (v >> np.int64(63)).view(np.uint64)


def _varints(
    zz: npt.NDArray[np.uint64], branch: npt.NDArray[np.uint8] | None, present: npt.NDArray[np.bool_]
) -> pa.Array:
    """Each row's varint of ``zz`` (none where not ``present``), after its union branch byte."""
    n = len(zz)
    if n and bool(present.all()):
        width = _varint_width(int(zz.max()))
        if _varint_width(int(zz.min())) == width:  # every row as wide (a short string's length, a time)
            shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
            groups = ((zz[:, None] >> shifts[None, :]) & np.uint64(0x7F)).astype(np.uint8)
            groups[:, :-1] |= np.uint8(0x80)
            return _with_branch(groups, branch, present)
    counts = np.ones(n, dtype=np.int64)
    for group in range(1, 10):  # a uint64 takes at most 10 groups of 7 bits
        more = zz >= np.uint64(1 << (7 * group))
        if not more.any():
            break
        counts += more
    width = int(counts.max()) if n else 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = ((zz[:, None] >> shifts[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    column = np.arange(width)[None, :]
    groups |= (column < counts[:, None] - 1).astype(np.uint8) << np.uint8(7)
    keep = (column < counts[:, None]) & present[:, None]
    return _with_branch(groups, branch, present, keep)


def _varint_width(value: int) -> int:
    """The bytes of ``value``'s varint: a byte per 7 bits, at least one."""
    return max(1, -(-value.bit_length() // 7))


def _with_branch(
    data: npt.NDArray[np.uint8],
    branch: npt.NDArray[np.uint8] | None,
    present: npt.NDArray[np.bool_],
    keep: npt.NDArray[np.bool_] | None = None,
) -> pa.Array:
    """The rows of ``data`` (the bytes ``keep`` marks; by default all of a present row), each
    after its union branch byte when there is one."""
    if keep is None:
        keep = np.broadcast_to(present[:, None], data.shape)
    if branch is not None:
        data = np.concatenate([branch[:, None], data], axis=1)
        keep = np.concatenate([np.ones((len(data), 1), dtype=bool), keep], axis=1)
    if bool(keep.all()):
        return fixed_width_values(data)
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    payload = data[keep].tobytes()
    return pa.Array.from_buffers(_BYTES, len(data), [None, pa.py_buffer(offsets), pa.py_buffer(payload)])


def _fastavro_column(avro: Any, array: pa.Array) -> pa.Array:
    """The column's values encoded one by one by fastavro (the types not encoded a column at a time)."""
    parsed = fastavro.parse_schema(avro)
    buf = io.BytesIO()
    offsets = [0]
    for value in avro_values(array):
        fastavro.schemaless_writer(buf, parsed, value)
        offsets.append(buf.tell())
    data = buf.getvalue()
    return pa.Array.from_buffers(
        _BYTES, len(array), [None, pa.py_buffer(np.asarray(offsets, dtype=np.int64)), pa.py_buffer(data)]
    )


def avro_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column's values as fastavro writes them: an Arrow map's (key, value) pairs as a dict."""
    return [_avro_value(v, array.type) for v in array.to_pylist()]


def _avro_value(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: _avro_value(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_avro_value(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {f.name: _avro_value(value[f.name], f.type) for f in t}
    return value


# -- back: the records of a block, a column at a time ----------------------------------------------


class AvroDecodeError(ValueError):
    """Bytes that are not records of the schema (the message says which field and why)."""


def decode_records(
    schema: JsonObject, content: bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> pa.Table | None:
    """The records ``content[starts[i]:ends[i]]`` of ``schema`` as a table of its Arrow types
    (:func:`runtime.hudi.formats.avro_schema.arrow_type`), decoded a field at a time for every record at
    once; None when a field is of a type decoded only by fastavro (the list in the module
    docstring). Raises :class:`AvroDecodeError` when the bytes do not decode, or a record's
    fields do not end where its length says."""
    if len(content) >= 2**31:  # a string view's offset is an int32
        return None
    buf = np.frombuffer(content + bytes(16), np.uint8)  # the padding: 8-byte reads near the end
    source = pa.py_buffer(content)
    pos = starts.astype(np.int64, copy=True)
    columns: list[pa.Array] = []
    for field in schema["fields"]:
        column = _decode_field(field, buf, source, pos, ends)
        if column is None:
            return None
        columns.append(column)
    if bool((pos != ends).any()):
        at = int(np.flatnonzero(pos != ends)[0])
        raise AvroDecodeError(f"record {at} ends at byte {int(pos[at])}, its length says {int(ends[at])}")
    return pa.Table.from_arrays(columns, names=[f["name"] for f in schema["fields"]])


def _decode_field(
    field: JsonObject, buf: npt.NDArray[np.uint8], source: pa.Buffer, pos: npt.NDArray[np.int64], ends: Any
) -> pa.Array | None:
    """One field of every record, ``pos`` moved past it; None when fastavro alone decodes it."""
    avro, name = field["type"], field["name"]
    valid = np.ones(len(pos), dtype=bool)
    if isinstance(avro, list):
        if len(avro) != 2 or "null" not in avro:
            return None
        null_branch = avro.index("null")
        avro = avro[1 - null_branch]
        valid = _union_branch(buf, pos, ends, name) != null_branch
    kind = _decoded_kind(avro)
    if kind is None:
        return None
    arrow = arrow_type(avro)
    every = bool(valid.all())  # (no null: every record's value, no gather of the positions)
    rows = np.flatnonzero(valid)
    at, until = (pos, ends) if every else (pos[rows], ends[rows])
    if kind in ("string", "bytes"):
        lengths = _read_longs(buf, at, until, name)
        if bool(((lengths < 0) | (at + lengths > until)).any()):
            raise AvroDecodeError(f"field {name!r}: a length past its record's end")
        values = _views(buf, source, at, lengths, kind)
        at += lengths
    elif kind in ("int", "long"):
        values = pa.array(_read_longs(buf, at, until, name))
    else:
        arrow_width, width = _FIXED_WIDTH[kind]
        if bool((at + width > until).any()):
            raise AvroDecodeError(f"field {name!r}: a value past its record's end")
        word = _words(buf)[at] & np.uint64((1 << (8 * width)) - 1)
        values = pa.array(word.astype(f"<u{width}").view(arrow_width.to_pandas_dtype()))
        at += width
    if not every:
        pos[rows] = at
    return _spread(values, valid, arrow, name)


def _decoded_kind(avro: Any) -> str | None:
    if isinstance(avro, str):
        return avro if avro in ("string", "bytes", "int", "long", *_FIXED_WIDTH) else None
    logical = avro.get("logicalType")
    if logical in ("date", "timestamp-micros", "local-timestamp-micros"):
        return str(avro["type"])
    return None


def _spread(values: pa.Array, valid: npt.NDArray[np.bool_], arrow: pa.DataType, name: str) -> pa.Array:
    """The valid rows' ``values`` as a column of ``arrow`` with nulls elsewhere."""
    try:
        if pa.types.is_boolean(arrow):
            values = pc.not_equal(values, 0)
        values = values.cast(pa.int32()).cast(arrow) if pa.types.is_date(arrow) else values.cast(arrow)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise AvroDecodeError(f"field {name!r}: {exc}") from None
    if bool(valid.all()):
        return values
    if not bool(valid.any()):
        return pa.nulls(len(valid), arrow)
    where = np.cumsum(valid) - 1
    return values.take(pa.array(np.where(valid, where, 0), mask=~valid))


def _first_bytes(
    buf: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], name: str
) -> npt.NDArray[np.uint8]:
    """The byte at each ``pos``, a number's first (none at its record's end)."""
    if bool((pos >= ends).any()):
        raise AvroDecodeError(f"field {name!r}: a number past its record's end")
    return buf[pos]


def _union_branch(
    buf: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], name: str
) -> npt.NDArray[np.int64]:
    """Each record's branch of a two-branch union (0 or 1), ``pos`` moved past it."""
    byte = _first_bytes(buf, pos, ends, name)
    if bool(((byte == 0) | (byte == 2)).all()):  # (the one-byte zig-zags of 0 and 1: every writer's)
        pos += 1
        return (byte >> np.uint8(1)).astype(np.int64)
    branch = _unzigzag(_read_varints(buf, pos, ends, name))
    if bool(((branch != 0) & (branch != 1)).any()):
        raise AvroDecodeError(f"field {name!r}: a union branch out of range")
    return branch


def _read_longs(
    buf: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], name: str
) -> npt.NDArray[np.int64]:
    """The zig-zag varint at each ``pos`` as a signed number (``pos`` moved past it, in place)."""
    byte = _first_bytes(buf, pos, ends, name)
    if bool((byte < 0x80).all()):  # one byte each (a short string's length): no wider arithmetic
        pos += 1
        half = (byte >> np.uint8(1)).astype(np.int64)
        return np.where(byte & np.uint8(1), ~half, half)
    return _unzigzag(_read_varints(buf, pos, ends, name))


def _read_varints(
    buf: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], name: str
) -> npt.NDArray[np.uint64]:
    """The varint at each ``pos`` (moved past it, in place), none reaching its record's end."""
    byte = _first_bytes(buf, pos, ends, name)
    value = (byte & np.uint8(0x7F)).astype(np.uint64)
    pos += 1
    active = np.flatnonzero(byte >= 0x80)  # (a union's branch, a short string's length: none)
    for group in range(1, 10):
        if not len(active):
            return value
        at = pos[active]
        if bool((at >= ends[active]).any()):
            raise AvroDecodeError(f"field {name!r}: a number past its record's end")
        byte = buf[at]
        value[active] |= (byte & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * group)
        pos[active] = at + 1
        active = active[byte >= 0x80]
    if len(active):
        raise AvroDecodeError(f"field {name!r}: a number longer than 10 bytes")
    return value


def _unzigzag(zz: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    return (zz >> np.uint64(1)).view(np.int64) ^ -(zz & np.uint64(1)).view(np.int64)


def _words(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """The little-endian uint64 starting at every byte of ``buf`` (a view: ``buf`` ends in 8 zero bytes)."""
    return np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, offset=0, strides=(1,))


def _views(
    buf: npt.NDArray[np.uint8], source: pa.Buffer, at: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], kind: str
) -> pa.Array:
    """The values where they lie in ``source``: binary views (each the length, 4 bytes, then a
    value of up to 12 bytes inline, zero-padded, or a longer value's first 4 bytes, its buffer, 0,
    and its offset), a string's gathered into a string array."""
    words = _words(buf)
    first = words[at]
    size = lengths.astype(np.uint64)
    views = np.empty((len(at), 2), dtype="<u8")
    if len(at) and int(lengths.min()) > 12:  # (every value long: no inline bytes to mask)
        views[:, 0] = size | (first << np.uint64(32))
        views[:, 1] = at.astype(np.uint64) << np.uint64(32)
    else:
        rest = words[at + 8] & np.uint64(0xFFFFFFFF)
        # the bytes past a short value's end are zero in its view
        first &= np.where(
            size >= 8, ~np.uint64(0), (np.uint64(1) << (np.uint64(8) * np.minimum(size, 7))) - np.uint64(1)
        )
        tail = np.clip(size, 8, 12) - np.uint64(8)
        rest &= (np.uint64(1) << (np.uint64(8) * tail)) - np.uint64(1)
        views[:, 0] = size | ((first & np.uint64(0xFFFFFFFF)) << np.uint64(32))
        inline = (first >> np.uint64(32)) | (rest << np.uint64(32))  # bytes 4 to 11
        views[:, 1] = np.where(lengths <= 12, inline, at.astype(np.uint64) << np.uint64(32))  # buffer 0, offset
    array = pa.Array.from_buffers(pa.binary_view(), len(at), [None, pa.py_buffer(views), source])
    if kind == "bytes":
        return array
    # a string's bytes are UTF-8: checked once they lie together (faster than view by view)
    gathered = array.cast(pa.binary()).view(pa.string())
    try:
        gathered.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise AvroDecodeError(f"a {kind} that does not decode: {exc}") from None
    return gathered
