"""The type Spark reads a parquet column as, for the files pandas, pyarrow and Polars write.

A parquet footer holds the Arrow schema of the writer (``ARROW:schema``): pyarrow reads back a
categorical as a dictionary, a ``large_string`` as large, a timestamp in the unit and zone it was
written with. Spark 3.5 reads the parquet types themselves (``ParquetToSparkSchemaConverter``):

* a dictionary (pandas' categorical, any dictionary-encoded column): its values' type (the
  dictionary is an encoding; Spark reads the values);
* ``large_string`` / ``large_binary`` / ``large_list``: string, binary, array;
* unsigned integers (``UINT_8``/``16``/``32``/``64``): ``short``, ``int``, ``bigint`` and
  ``decimal(20,0)`` (SPARK-34817, Spark 3.2);
* ``TIMESTAMP(MILLIS|MICROS, isAdjustedToUTC=true)``: ``timestamp`` (an instant; the writer's zone
  name, kept only in the Arrow metadata, is not read: UTC); ``isAdjustedToUTC=false`` (a naive
  pandas datetime) too, its wall clock read as UTC: Spark reads it so with
  ``spark.sql.parquet.inferTimestampNTZ.enabled=false`` (its behaviour before 3.4, set by the Spark
  job), as a CSV's or JSON's zone-less timestamp is read. Spark 3.5's default, ``timestamp_ntz``,
  becomes Avro ``local-timestamp-micros``, which the official reader (hudi-rs 0.5) cannot read;
* ``TIMESTAMP(NANOS, *)`` (pandas' default unit): Spark refuses it (``Illegal Parquet type: INT64
  (TIMESTAMP(NANOS,true))``) unless ``spark.sql.legacy.parquet.nanosAsLong`` reads it as the
  nanoseconds' ``bigint``. Hudi's Spark writer holds at most microseconds (Avro
  ``timestamp-micros``), so a top-level nanosecond column is read as that ``bigint`` and turned
  into microseconds (:data:`NANOS_PER_MICRO`), the same instant; a value with nanoseconds below
  a microsecond is refused by the pre-check (it would be truncated). A nanosecond timestamp inside
  a struct or list is refused (Spark would read it as a bare number).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

NANOS_PER_MICRO = 1000
TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
# what the Spark job sets before reading parquet (module docstring)
SPARK_READ_CONF = {"spark.sql.parquet.inferTimestampNTZ.enabled": "false"}


@dataclass
class SparkRead:
    """What Spark's reading of one parquet schema needs: the top-level nanosecond timestamp columns
    and the nested ones (refused)."""

    nanos: list[str] = field(default_factory=list)
    nested_nanos: list[str] = field(default_factory=list)


def spark_schema(schema: pa.Schema, read: SparkRead) -> pa.Schema:
    """``schema`` (a parquet footer's, as pyarrow reads it) with the types Spark reads; notes the
    nanosecond timestamp columns in ``read``."""
    fields = []
    for f in schema:
        t = spark_type(f.type, f.name, read, top=True)
        fields.append(pa.field(f.name, t))
    return pa.schema(fields)


def spark_type(t: pa.DataType, column: str, read: SparkRead, *, top: bool = False) -> pa.DataType:
    """The type Spark reads a column of Arrow type ``t`` as (module docstring)."""
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type, column, read, top=top)
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            (read.nanos if top else read.nested_nanos).append(column)
        return TIMESTAMP_UTC
    unsigned = {
        pa.uint8(): pa.int16(),
        pa.uint16(): pa.int32(),
        pa.uint32(): pa.int64(),
        pa.uint64(): pa.decimal128(20, 0),
    }
    if t in unsigned:
        return unsigned[t]
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(spark_type(t.value_type, column, read))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, spark_type(f.type, column, read)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(spark_type(t.key_type, column, read), spark_type(t.item_type, column, read))
    return t
