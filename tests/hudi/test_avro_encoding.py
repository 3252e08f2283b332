"""A merge-on-read log block's records, encoded a column at a time, are byte for byte what
fastavro's ``schemaless_writer`` writes record by record (the reference), for every column type a
Hudi table holds, nulls, empty and unicode strings, extreme integers and non-finite floats."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import io
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.hudi.client.compaction import arrow_schema
from runtime.hudi.formats.avro_encoding import avro_values
from runtime.hudi.formats.log_format import (
    META_FIELDS,
    SCHEMA,
    LogBlock,
    LogFormatError,
    avro_block_content,
    avro_data_block,
    avro_records,
    avro_table,
    read_blocks,
    record_schema,
)
from runtime.hudi.table.base_files import avro_schema_json

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, float("inf"), float("-inf")])
TEXT = st.text(max_size=20) | st.sampled_from(["", "é", "日本語", "\U0001f600" * 40, "x" * 200])
BLOBS = st.binary(max_size=200)
MOMENTS = st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30))
DAYS = st.dates()

# (Arrow type, the values a column of it holds): every flat type, and types encoded per value
COLUMN_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "long": (pa.int64(), INT64),
    "int": (pa.int32(), INT32),
    "small": (pa.int8(), st.integers(-128, 127)),
    "unsigned": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "unsigned_small": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "double": (pa.float64(), FLOATS),
    "float": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "flag": (pa.bool_(), st.booleans()),
    "text": (pa.string(), TEXT),
    "large_text": (pa.large_string(), TEXT),
    "blob": (pa.binary(), BLOBS),
    "day": (pa.date32(), DAYS),
    "moment_utc": (pa.timestamp("us", tz="UTC"), MOMENTS.map(lambda t: t.replace(tzinfo=dt.timezone.utc))),
    "moment_local": (pa.timestamp("us"), MOMENTS),
    "moment_ms": (pa.timestamp("ms"), MOMENTS.map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
    "moment_s": (pa.timestamp("s", tz="UTC"), MOMENTS.map(lambda t: t.replace(microsecond=0, tzinfo=dt.timezone.utc))),
    # encoded value by value by fastavro
    "price": (pa.decimal128(12, 3), st.decimals(-(10**8), 10**8, places=3, allow_nan=False, allow_infinity=False)),
    "tags": (pa.list_(pa.string()), st.lists(st.none() | TEXT, max_size=3)),
    "point": (pa.struct([("x", pa.int64()), ("y", pa.string())]), st.fixed_dictionaries({"x": INT64, "y": TEXT})),
    "attrs": (pa.map_(pa.string(), pa.int64()), st.lists(st.tuples(TEXT, INT64), max_size=3, unique_by=lambda t: t[0])),
}


def fastavro_block_content(schema: dict[str, Any], records: pa.Table) -> bytes:
    """The reference: ``HoodieAvroDataBlock.serializeRecords`` with fastavro writing each record."""
    parsed = fastavro.parse_schema(schema)
    names = [f["name"] for f in schema["fields"]]
    out = [struct.pack(">ii", 3, records.num_rows)]
    columns = [avro_values(records.column(n)) for n in names]
    for row in zip(*columns, strict=True):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, dict(zip(names, row, strict=True)))
        out.append(struct.pack(">i", buf.tell()) + buf.getvalue())
    return b"".join(out)


@st.composite
def tables(draw: Any) -> pa.Table:
    rows = draw(st.integers(0, 12))
    names = draw(st.lists(st.sampled_from(sorted(COLUMN_TYPES)), min_size=1, max_size=6, unique=True))
    column = st.lists(st.none() | TEXT, min_size=rows, max_size=rows)
    meta = {n: pa.array(draw(column), pa.string()) for n in META_FIELDS}
    data = {}
    for name in names:
        arrow, values = COLUMN_TYPES[name]
        data[name] = pa.array(draw(st.lists(st.none() | values, min_size=rows, max_size=rows)), arrow)
    return pa.table({**meta, **data})


def _schema(records: pa.Table) -> dict[str, Any]:
    return record_schema(avro_schema_json(records.schema, "encoding"))


@settings(max_examples=300, deadline=None)
@given(tables())
def test_a_block_is_byte_for_byte_fastavros_for_every_column_type(records):
    schema = _schema(records)
    assert avro_block_content(schema, records) == fastavro_block_content(schema, records)


def test_extreme_values_and_every_varint_width_encode_as_fastavro_encodes_them():
    longs = [-(2**63), 2**63 - 1, 0, -1, 1, 63, -64, 64, -65] + [s * 2**k for k in range(0, 63, 7) for s in (1, -1)]
    n = len(longs)
    floats = [float("nan"), float("inf"), float("-inf"), -0.0, 5e-324, 1.7976931348623157e308]
    records = pa.table(
        {
            **{m: pa.array([None if i % 3 == 0 else f"{m}-{i}" for i in range(n)]) for m in META_FIELDS},
            "long": pa.array(longs, pa.int64()),
            "int": pa.array([max(-(2**31), min(2**31 - 1, v)) for v in longs], pa.int32()),
            "double": pa.array((floats * n)[:n], pa.float64()),
            "text": pa.array([("é" * i) if i % 2 else "" for i in range(n)]),
            "empty": pa.nulls(n),  # a column null throughout: a string column
        }
    )
    schema = _schema(records)
    assert avro_block_content(schema, records) == fastavro_block_content(schema, records)


def test_a_chunked_column_of_many_rows_encodes_as_fastavro_encodes_it():
    rng = np.random.default_rng(5)
    n = 3000
    records = pa.table(
        {
            **{m: pa.chunked_array([[f"{m}{i}" for i in range(n // 2)], [None] * (n - n // 2)]) for m in META_FIELDS},
            "ts": pa.array(rng.integers(-(2**62), 2**62, n)),
            "price": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(9, 2)),
        }
    )
    schema = _schema(records)
    assert avro_block_content(schema, records) == fastavro_block_content(schema, records)


def _block(records: pa.Table) -> tuple[LogBlock, pa.Schema]:
    schema = _schema(records)
    (block,) = read_blocks(avro_data_block("20260101000000001", schema, records))
    return block, arrow_schema(block.header[SCHEMA])


@settings(max_examples=200, deadline=None)
@given(tables())
def test_a_block_reads_back_a_column_at_a_time_as_fastavro_reads_it(records):
    """Compaction reads log blocks a column at a time: the table is the one fastavro's records make."""
    block, schema = _block(records)
    expected = pa.Table.from_pylist(avro_records(block), schema=schema)
    got = avro_table(block, schema)
    assert got.schema.equals(expected.schema)
    for name in schema.names:
        assert _nan_as_value(got.column(name)).equals(_nan_as_value(expected.column(name))), name


def _nan_as_value(column: pa.ChunkedArray) -> pa.ChunkedArray | pa.Table:
    """A float column's NaNs as a value that compares equal (a mask beside the column)."""
    if not pa.types.is_floating(column.type):
        return column
    nan = pc.is_nan(column)
    return pa.table({"nan": nan, "value": pc.if_else(nan, 0, column)})


def test_a_block_whose_records_do_not_decode_is_refused():
    records = pa.table({**{m: pa.array(["x" * 20, "y"]) for m in META_FIELDS}, "ts": pa.array([1, 2])})
    block, schema = _block(records)
    cut = dataclasses.replace(block, content=block.content[:-3])  # the last record's last bytes
    with pytest.raises(LogFormatError, match="run past"):
        avro_table(cut, schema)
    shorter = bytearray(block.content)
    assert shorter[12:14] == bytes([2, 40])  # the first record's commit time: not null, 20 bytes
    shorter[13] = 38  # 19 bytes: its fields no longer end where the record's length says
    with pytest.raises(LogFormatError, match="do not decode"):
        avro_table(dataclasses.replace(block, content=bytes(shorter)), schema)
    bad_utf8 = bytearray(block.content)
    bad_utf8[12 + 2] = 0xFF  # a byte of the first record's commit time
    with pytest.raises(LogFormatError, match="do not decode"):
        avro_table(dataclasses.replace(block, content=bytes(bad_utf8)), schema)
