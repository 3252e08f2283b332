"""The base-file codec and parquet-mr's dictionary decision (runtime/hudi/formats/parquet_format.py); the
files a run writes and the official reader's view of them: tests/sim/test_sim.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from runtime.hudi.formats.parquet_format import ParquetWriteOptions


def test_a_column_keeps_its_dictionary_only_where_parquet_mr_would():
    n = 5_000
    table = pa.table(
        {
            "unique": [f"payload-{i:08x}" for i in range(n)],
            "repeated": [f"p{i % 4}" for i in range(n)],
            "ints": list(range(n)),
            "few_ints": [i % 3 for i in range(n)],
            "flag": [i % 2 == 0 for i in range(n)],
            "key": [f"k{i}" for i in range(n)],
        }
    )
    args = ParquetWriteOptions("gzip").write_table_args(table, distinct=("key",))
    # gzip at zlib's default level, as parquet-mr's GzipCodec compresses (pyarrow's default is 9)
    assert args == {"compression": "gzip", "use_dictionary": ["repeated", "few_ints"], "compression_level": 6}
    assert "compression_level" not in ParquetWriteOptions("snappy").write_table_args(table)
    # one row: a dictionary of one value is as large as the value (the fixture tables' files)
    assert ParquetWriteOptions("snappy").write_table_args(table.slice(0, 1))["use_dictionary"] == []


def test_the_default_codec_is_hudis():
    # HoodieStorageConfig: hoodie.parquet.compression.codec defaults to gzip
    assert ParquetWriteOptions().compression == "gzip"


def test_an_unknown_codec_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="lz4.*gzip"):
        ParquetWriteOptions("lz4")
