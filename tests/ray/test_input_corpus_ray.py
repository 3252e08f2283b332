"""A sample of the corpus of user inputs (tests/fixtures/inputs) end to end on Ray: what pandas
writes by default (nanosecond, time-zone-aware timestamps; unsigned integers; categoricals) is read
by Spark and written as Hudi's Spark writer stores it, and a second ingest whose CSV types differ
from the table's is cast to the table's types; each table verified against its input."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from actors.job import run_job
from runtime.core.config import JobConfig
from runtime.hudi.table.table_config import META_COLUMNS
from runtime.job.prepare import check_input_of
from runtime.lab.report import why_not_verified

pytestmark = [pytest.mark.ray, pytest.mark.spark]
INPUTS = Path(__file__).parent.parent / "fixtures" / "inputs"


def _cfg(tmp_path, name: str) -> JobConfig:
    return JobConfig(
        source="spark",
        protocol="message-bus",
        writers=2,
        checkpoints=2,
        input_path=str(INPUTS / name),
        key_field="id",
        partition_field="region",
        precombine_field="ts",
        table=str(tmp_path / "table"),
    )


def _run(tmp_path, name: str, out: str | None = None):
    result = run_job(_cfg(tmp_path, name), out)
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    return result


def _read(path) -> pa.Table:
    out = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(path)).build().read())
    return out.drop_columns([c for c in META_COLUMNS if c in out.column_names]).sort_by("id")


def test_pandas_default_parquet_is_written_in_microseconds(spark, tmp_path):
    _run(tmp_path, "pandas_tz_ordering.parquet")
    got = _read(tmp_path / "table")
    assert got.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    # every (region, id) is one record here: the table holds each row, its nanoseconds as microseconds
    want = pd.read_parquet(INPUTS / "pandas_tz_ordering.parquet")["ts"]
    assert sorted(v.value // 1000 for v in want) == sorted(got.column("ts").cast(pa.int64()).to_pylist())


def test_pandas_unsigned_categorical_and_naive_nanos_are_read_as_spark_reads_them(spark, tmp_path):
    _run(tmp_path, "pandas_types.parquet")
    got = _read(tmp_path / "table")
    assert got.schema.field("u64").type == pa.decimal128(20, 0)
    assert got.schema.field("kind").type == pa.string()
    assert got.schema.field("local").type == pa.timestamp("us", tz="UTC")  # the wall clock as UTC
    assert got.column("local").cast(pa.int64()).to_pylist().count(1_704_067_200_000_000) == 1  # 2024-01-01
    assert Decimal(2**64 - 1) in got.column("u64").to_pylist()
    # the pre-check's reading of the file is the table's schema: the same input again needs no cast
    assert check_input_of(_cfg(tmp_path, "pandas_types.parquet")).casts == ()


def test_a_second_ingest_is_cast_to_the_table_types(spark, tmp_path, capfd):
    from runtime.cli import main

    _run(tmp_path, "table_decimal.parquet")
    _run(tmp_path, "reingest_2_decimals.csv", str(tmp_path / "out"))
    got = _read(tmp_path / "table")
    assert got.schema.field("price").type == pa.decimal128(10, 2)
    assert Decimal("5343.80") in got.column("price").to_pylist()
    # verify --result reads the input again with the table's types; Spark's and Ray's lines go to a file
    capfd.readouterr()
    assert main(["verify", "--result", str(tmp_path / "out" / "result.json")]) == 0
    shown = capfd.readouterr()
    assert "ray-and-spark.log" in shown.out
    assert not [line for line in (shown.out + shown.err).splitlines() if " WARN " in line or " INFO " in line]


def test_pyarrow_large_dictionary_and_unsigned_types_verify(spark, tmp_path):
    _run(tmp_path, "pyarrow_types.parquet")
    got = _read(tmp_path / "table")
    assert got.schema.field("big").type == pa.string() and got.schema.field("u16").type == pa.int32()
    assert got.schema.field("nanos").type == pa.timestamp("us", tz="UTC")
    assert check_input_of(_cfg(tmp_path, "pyarrow_types.parquet")).casts == ()
