"""The table's Avro schema (a commit's ``extraMetadata.schema``, a log block's header) from the
Arrow schema of the records written, and back.

Hudi's Spark writer converts the DataFrame's schema with ``AvroConversionUtils.convertStructTypeToAvroSchema``
(record ``<table>_record`` in namespace ``hoodie.<table>``), which calls
``HoodieSparkAvroSchemaConverters.toAvroType`` and so Spark's ``org.apache.spark.sql.avro.SchemaConverters.toAvroType``
(Spark 3.5): boolean, int (byte, short, int), long, float, double, string, bytes; ``date`` as int with
the ``date`` logical type; ``timestamp`` as long with ``timestamp-micros`` (``timestamp_ntz``:
``local-timestamp-micros``); a decimal as ``fixed`` of ``minBytesForPrecision(precision)`` bytes,
named ``<namespace>.<field>.fixed``, with the ``decimal`` logical type; an array as an Avro ``array``,
a map with string keys as an Avro ``map``, a struct as a ``record`` named after its field in the
namespace ``<namespace>.<record>``; a nullable type as the union ``[type, "null"]``. Any other type
(a map whose keys are not strings, an interval, a time of day, an unsigned 64-bit integer) raises
``IncompatibleSchemaException`` there: here :class:`UnsupportedColumn`, naming the column, before any
work starts.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa

from runtime.core.errors import UserError
from runtime.core.json_doc import JsonObject


class UnsupportedColumn(UserError, ValueError):
    """A column whose type a Hudi table cannot hold; the message names the column and the fix."""


def min_bytes_for_precision(precision: int) -> int:
    """Spark's ``DecimalType.minBytesForPrecision``: the bytes of a two's complement integer of ``precision`` digits."""
    size = 1
    while math.pow(2.0, 8 * size - 1) < math.pow(10.0, precision):
        size += 1
    return size


def _atomic(t: pa.DataType) -> Any:
    """The Avro type of an atomic Arrow type, or None when it has none."""
    checks: tuple[tuple[Any, Any], ...] = (
        (lambda: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
        (lambda: pa.types.is_boolean(t), "boolean"),
        (lambda: pa.types.is_int64(t) or pa.types.is_uint32(t), "long"),
        (lambda: pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t), "int"),
        (lambda: pa.types.is_uint8(t) or pa.types.is_uint16(t), "int"),
        (lambda: pa.types.is_float32(t), "float"),
        (lambda: pa.types.is_float64(t), "double"),
        (lambda: pa.types.is_binary(t) or pa.types.is_large_binary(t), "bytes"),
        (lambda: pa.types.is_date(t), {"type": "int", "logicalType": "date"}),
    )
    for check, avro in checks:
        if check():
            return avro
    if pa.types.is_timestamp(t):
        logical = "timestamp-micros" if t.tz else "local-timestamp-micros"
        return {"type": "long", "logicalType": logical}
    return None


def _avro_type(t: pa.DataType, name: str, namespace: str, column: str) -> Any:
    """``SchemaConverters.toAvroType(t, nullable=false, recordName=name, nameSpace=namespace)``."""
    atomic = _atomic(t)
    if atomic is not None:
        return atomic
    if pa.types.is_decimal(t):
        fixed = f"{namespace}.{name}" if namespace else name
        size = min_bytes_for_precision(t.precision)
        return {"type": "fixed", "name": "fixed", "namespace": fixed, "size": size, **_decimal(t, column)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": _nullable(t.value_type, name, namespace, column)}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise _unsupported(column, t, "Avro map keys are strings")
        return {"type": "map", "values": _nullable(t.item_type, name, namespace, column)}
    if pa.types.is_struct(t):
        child = f"{namespace}.{name}" if namespace else name
        fields = [{"name": f.name, "type": _nullable(f.type, f.name, child, column)} for f in t]
        return {"type": "record", "name": name, "namespace": namespace, "fields": fields}
    raise _unsupported(column, t, "Spark's SchemaConverters.toAvroType has no Avro type for it")


def _decimal(t: pa.DataType, column: str) -> JsonObject:
    if t.precision > 38:  # Spark's DecimalType.MAX_PRECISION
        raise _unsupported(column, t, "Spark's decimals hold at most 38 digits")
    return {"logicalType": "decimal", "precision": t.precision, "scale": t.scale}


def _nullable(t: pa.DataType, name: str, namespace: str, column: str) -> Any:
    """Spark marks every field it writes nullable (the input's columns are): ``[type, "null"]``. A column
    null throughout is a string, as Spark infers one from CSV or JSON."""
    if pa.types.is_null(t):
        t = pa.string()
    return [_avro_type(t, name, namespace, column), "null"]


def _unsupported(column: str, t: pa.DataType, why: str) -> UnsupportedColumn:
    return UnsupportedColumn(
        f"column {column!r} has type {t}, which a Hudi table cannot hold ({why}); "
        "fix: cast it to a supported type (string, number, decimal, date, timestamp, list, struct, "
        "map with string keys) or drop it"
    )


def record_names(table_name: str) -> tuple[str, str]:
    """``AvroConversionUtils.getAvroRecordNameAndNamespace``: (``<table>_record``, ``hoodie.<table>``)."""
    rec = table_name.replace("-", "_")
    return f"{rec}_record", f"hoodie.{rec}"


def avro_schema(schema: pa.Schema, table_name: str, skip: tuple[str, ...] = ()) -> JsonObject:
    """The Avro record of ``schema``'s columns (those in ``skip`` left out); raises
    :class:`UnsupportedColumn` naming the first column Hudi cannot hold."""
    name, namespace = record_names(table_name)
    child = f"{namespace}.{name}"
    fields = [{"name": f.name, "type": _nullable(f.type, f.name, child, f.name)} for f in schema if f.name not in skip]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def check_columns(schema: pa.Schema) -> None:
    """Raises :class:`UnsupportedColumn` naming the first column a Hudi table cannot hold."""
    avro_schema(schema, "check")


# -- back: the Arrow type of an Avro type (compaction reads log blocks with it) ----------------------

_SIMPLE = {
    "string": pa.string(),
    "long": pa.int64(),
    "int": pa.int32(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "bytes": pa.binary(),
}


def arrow_type(avro: Any) -> pa.DataType:
    """The Arrow type of an Avro type written by :func:`avro_schema` (a nullable union: its type)."""
    if isinstance(avro, list):
        return arrow_type(next(t for t in avro if t != "null"))
    if isinstance(avro, str):
        if avro not in _SIMPLE:
            raise ValueError(f"Avro type {avro!r} has no Arrow type here")
        return _SIMPLE[avro]
    logical, kind = avro.get("logicalType"), avro["type"]
    logical_types = {
        "timestamp-micros": pa.timestamp("us", tz="UTC"),
        "local-timestamp-micros": pa.timestamp("us"),
        "date": pa.date32(),
    }
    if logical in logical_types:
        return logical_types[logical]
    if logical == "decimal":
        return pa.decimal128(avro["precision"], avro.get("scale", 0))
    if kind == "array":
        return pa.list_(arrow_type(avro["items"]))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(avro["values"]))
    if kind == "record":
        return pa.struct([pa.field(f["name"], arrow_type(f["type"])) for f in avro["fields"]])
    return arrow_type(kind)


def avro_schema_json(schema: pa.Schema, table_name: str, skip: tuple[str, ...] = ()) -> str:
    """:func:`avro_schema` as the JSON a commit's metadata holds."""
    return json.dumps(avro_schema(schema, table_name, skip), separators=(",", ":"))
