"""The corpus of user inputs (tests/fixtures/inputs, made by its make_inputs.py) through the pre-check
a run makes before Ray or Spark start: each file accepted, or refused with exit 2's InputError
naming the column, the value and where it is; a second ingest held against the table the first
one made. A sample runs end to end on Ray in tests/ray/test_input_corpus_ray.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.data.errors import InputError
from runtime.data.input_format import check_input
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table.base_files import avro_schema_json
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.job.prepare import check_input_of
from runtime.job.table_schema import reconcile

INPUTS = Path(__file__).parent.parent / "fixtures" / "inputs"
CASES: list[dict[str, Any]] = json.loads((INPUTS / "cases.json").read_text())
I1 = "20240101000000001"


def table_from(path: Path, first: str, case: dict[str, Any]) -> str:
    """A table whose latest commit holds the schema a run writes from ``first`` (key and partition
    as strings, as the Spark job casts them)."""
    checked = check_input(str(INPUTS / first), None, case["key"], case["partition"], case["precombine"])
    strings = (case["key"], case["partition"])
    schema = pa.schema([pa.field(f.name, pa.string() if f.name in strings else f.type) for f in checked.schema])
    dfs, base = open_dfs(str(path))
    props = TableProps("corpus", case["key"], case["partition"], case["precombine"], num_buckets=1)
    client = WriteClient(HudiTable.create_or_open(dfs, base, props))
    client.start_instant(I1)
    client.commit(I1, [], {"schema": avro_schema_json(schema, "corpus")}, empty=True)
    return str(path)


def precheck(case: dict[str, Any], table: str) -> Any:
    cfg = JobConfig(
        source="spark",
        input_path=str(INPUTS / case["input"]),
        key_field=case["key"],
        partition_field=case["partition"],
        precombine_field=case["precombine"],
        table=table,
        table_name="corpus",
    )
    return check_input_of(cfg)


@pytest.mark.parametrize("case", CASES, ids=[c["input"] for c in CASES])
def test_each_input_is_accepted_or_refused_naming_the_value(tmp_path, case):
    table = table_from(tmp_path / "t", case["table_from"], case) if "table_from" in case else str(tmp_path / "t")
    t0 = time.monotonic()
    if case["expect"] == "accept":
        checked = precheck(case, table)
        assert checked.rows > 0
    else:
        with pytest.raises(InputError) as err:
            precheck(case, table)
        assert case["expect"] in str(err.value)
        assert "fix:" in str(err.value)
    assert time.monotonic() - t0 < 5.0


def test_pandas_types_are_read_as_spark_reads_them():
    checked = precheck(next(c for c in CASES if c["input"] == "pandas_types.parquet"), "/nonexistent/t")
    types = {f.name: f.type for f in checked.schema}
    assert types["at"] == pa.timestamp("us", tz="UTC")  # TIMESTAMP(NANOS,true): an instant, in micros
    assert types["local"] == pa.timestamp("us", tz="UTC")  # naive: its wall clock as UTC
    assert (types["u8"], types["u32"], types["u64"]) == (pa.int16(), pa.int64(), pa.decimal128(20, 0))
    assert types["kind"] == pa.string()  # a categorical: its values
    assert set(checked.nanos) == {"at", "local"}


def test_a_reingest_casts_to_the_table_types_hudi_promotes_to(tmp_path):
    case = next(c for c in CASES if c["input"] == "reingest_2_decimals.csv")
    checked = precheck(case, table_from(tmp_path / "t", case["table_from"], case))
    assert dict(checked.casts) == {"price": pa.decimal128(10, 2)}


@pytest.mark.parametrize("name", ["trips", ""], ids=["another table name", "verify's (none)"])
def test_an_input_held_against_its_own_table_needs_no_cast_whatever_the_table_is_named(tmp_path, name):
    """A decimal's ``fixed`` and a struct's ``record`` are named after the writer's table
    (``hoodie.<table>.<table>_record.<field>``): the same types under another table's name, or
    under ``commitlab verify``'s (it names none), are the same types, not a change Hudi refuses."""
    case = {"key": "id", "partition": "region", "precombine": "ts"}
    table = table_from(tmp_path / "t", "pandas_types.parquet", case)  # written as table "corpus"
    checked = check_input(str(INPUTS / "pandas_types.parquet"), None, "id", "region", "ts")
    assert reconcile(checked, table, "id", "region", name).casts == ()
