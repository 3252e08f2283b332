"""Every column type Spark writes reaches a Hudi table with its Avro type (Spark's
``SchemaConverters.toAvroType``, as Hudi's writer calls it), and the official reader (PyPI ``hudi``)
returns the same Arrow types and values, from a base file and from a merge-on-read log block."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from runtime.core.dfs import open_dfs
from runtime.core.messages import WriteStat
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.avro_schema import UnsupportedColumn, avro_schema, check_columns, min_bytes_for_precision
from runtime.hudi.table.base_files import avro_schema_json, base_file_name, file_group_id
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_writer import append_log_file, list_partition
from runtime.hudi.table.merge import log_records, merge_file_group
from runtime.hudi.table.table_config import META_COLUMNS, TableProps

I1 = "20240101000000001"
NESTED = pa.list_(pa.struct([("n", pa.list_(pa.decimal128(5, 2))), ("tag", pa.map_(pa.string(), pa.int32()))]))
COLUMNS: dict[str, tuple[pa.DataType, list[object]]] = {
    "key": (pa.string(), ["a", "b"]),
    "partition": (pa.string(), ["p0", "p0"]),
    "ts": (pa.int64(), [1, 2]),
    "i": (pa.int32(), [1, None]),
    "f": (pa.float32(), [1.5, 2.5]),
    "d": (pa.float64(), [1.25, None]),
    "flag": (pa.bool_(), [True, False]),
    "text": (pa.string(), ['two\nlines, "quoted"', None]),
    "raw": (pa.binary(), [b"x", b"\x00y"]),
    "price": (pa.decimal128(10, 2), [Decimal("12.34"), Decimal("-0.01")]),
    "wide": (pa.decimal128(38, 10), [Decimal("1234567890123456789012345678.0123456789"), None]),
    "day": (pa.date32(), [dt.date(2024, 1, 1), dt.date(1969, 12, 31)]),
    "at": (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, 1, 2, 3, 456789, tzinfo=dt.UTC), None]),
    "tags": (pa.list_(pa.int32()), [[1, 2], [None]]),
    "addr": (pa.struct([("city", pa.string()), ("zip", pa.int64())]), [{"city": "x", "zip": 1}, None]),
    "counts": (pa.map_(pa.string(), pa.int32()), [[("a", 1)], []]),
    "nested": (NESTED, [[{"n": [Decimal("1.00")], "tag": [("k", 2)]}], None]),
}


def _data() -> pa.Table:
    return pa.table({name: pa.array(values, t) for name, (t, values) in COLUMNS.items()})


def _table(path: Path, table_type: str = "COPY_ON_WRITE") -> HudiTable:
    dfs, base = open_dfs(str(path))
    props = TableProps("types", "key", "partition", "ts", num_buckets=1, table_type=table_type)
    return HudiTable.create_or_open(dfs, base, props)


def _read(table: HudiTable) -> pa.Table:
    out = pa.Table.from_batches(HudiTableBuilder.from_base_uri(table.base_path).build().read())
    return out.drop_columns(list(META_COLUMNS)).sort_by("key")


def _write_base_file(table: HudiTable, data: pa.Table) -> WriteStat:
    fid = file_group_id("types", "p0", 0)
    name = base_file_name(fid, "0-0-0", I1)
    table.ensure_partition("p0", I1)
    merged = merge_file_group(
        None, data, instant=I1, partition="p0", file_name=name, key="key", precombine="ts", partition_id=0
    )
    size = table.write_base_file(f"p0/{name}", merged.table)
    return WriteStat(fid, f"p0/{name}", "p0", "null", 2, 2, 0, size, size, 2)


def _write_log_file(table: HudiTable, data: pa.Table) -> WriteStat:
    fid = file_group_id("types", "p0", 0)
    table.ensure_partition("p0", I1)
    slice_ = list_partition(table, "p0", table.timeline(), {}).slice_for(fid, I1)
    rows = log_records(
        data, instant=I1, partition="p0", file_id=fid, key="key", precombine="ts", partition_id=0, seqno=1
    )
    stat, _ = append_log_file(table, "p0", fid, slice_, I1, rows, "0-0-0")
    return stat


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_column_type_round_trips_through_the_official_reader(tmp_path, table_type):
    data = _data()
    table = _table(tmp_path / "t", table_type)
    table.start_instant(I1)
    write = _write_base_file if table_type == "COPY_ON_WRITE" else _write_log_file
    WriteClient(table).commit(I1, [write(table, data)], {"schema": avro_schema_json(data.schema, "types")})
    got = _read(table)
    assert got.schema.types == data.schema.types
    assert got.to_pylist() == data.to_pylist()


def test_decimals_dates_timestamps_and_containers_have_their_avro_types():
    fields = {f["name"]: f["type"][0] for f in avro_schema(_data().schema, "types")["fields"]}
    assert fields["price"] == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.types.types_record.price",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    assert fields["wide"]["size"] == 16
    assert fields["day"] == {"type": "int", "logicalType": "date"}
    assert fields["at"] == {"type": "long", "logicalType": "timestamp-micros"}
    assert fields["tags"] == {"type": "array", "items": ["int", "null"]}
    assert fields["counts"] == {"type": "map", "values": ["int", "null"]}
    assert fields["addr"]["type"] == "record" and fields["addr"]["namespace"] == "hoodie.types.types_record"


def test_min_bytes_for_precision_is_sparks():
    # DecimalType.minBytesForPrecision: 9 digits in 4 bytes, 18 in 8, 38 in 16
    assert [min_bytes_for_precision(p) for p in (1, 2, 9, 10, 18, 19, 38)] == [1, 1, 4, 5, 8, 9, 16]


@pytest.mark.parametrize(
    "column",
    [
        pa.field("ids", pa.map_(pa.int32(), pa.string())),
        pa.field("span", pa.duration("s")),
        pa.field("clock", pa.time64("us")),
        pa.field("big", pa.uint64()),
        pa.field("huge", pa.decimal256(40, 2)),
    ],
)
def test_a_type_hudi_cannot_hold_is_refused_naming_the_column(column):
    with pytest.raises(UnsupportedColumn, match=f"column '{column.name}'"):
        check_columns(pa.schema([pa.field("key", pa.string()), column]))
