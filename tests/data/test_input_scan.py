"""The pre-check's bounded value scan (runtime/data/input_scan.py): the first bad value named by its
file and data row, exact conversions to a table's type, and a scan the time bound cuts says so."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.data.errors import InputError
from runtime.data.input_format import check_input
from runtime.data.input_scan import ColumnCheck, check_values, first_inexact, first_null

NEVER = ColumnCheck("k", first_null, "{column} null at {where}", "fill it")


@pytest.mark.parametrize(
    ("values", "target", "first"),
    [
        ([1.25, 0.1, 5343.8034], pa.decimal128(10, 2), 2),  # rounded: a cast alone would not say
        ([1.0, 2.5], pa.decimal128(10, 2), None),
        ([1, 2**53 + 1], pa.float64(), 1),  # a double cannot hold it
        (["1.5", "n/a"], pa.float64(), 1),
        (["2024-01-31", "31/01/2024"], pa.date32(), 1),
        ([12345678901, 1], pa.decimal128(10, 2), 0),  # overflows the precision
        ([3, 4], pa.string(), None),
    ],
)
def test_the_first_value_that_does_not_convert_exactly(values, target, first):
    assert first_inexact(target)(pa.array(values)) == first


def test_a_second_file_names_its_own_row(tmp_path):
    pq.write_table(pa.table({"k": ["a", "b"]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"k": ["c", None, None]}), tmp_path / "2.parquet")
    files = [str(tmp_path / "1.parquet"), str(tmp_path / "2.parquet")]
    with pytest.raises(InputError, match=r"k null at '.*2.parquet' data row 2"):
        check_values(files, "parquet", pa.schema([("k", pa.string())]), [NEVER])


def test_a_scan_cut_by_its_bound_says_where_it_stopped(tmp_path):
    pq.write_table(pa.table({"k": ["a"] * 200_000 + [None]}), tmp_path / "1.parquet")
    scan = check_values([str(tmp_path / "1.parquet")], "parquet", pa.schema([("k", pa.string())]), [NEVER], 0.0)
    assert scan.cut is not None and scan.rows < 200_000  # stopped after its first batch, before the null
    note = scan.note(0.0)
    assert note is not None and "stopped after 0 s" in note and "1.parquet" in note


def test_a_csv_reads_only_an_empty_field_as_null_as_spark_does(tmp_path):
    (tmp_path / "x.csv").write_text("k,p,ts,v\na,x,1,NA\nb,x,2,null\n")
    checked = check_input(str(tmp_path / "x.csv"), None, "k", "p", "ts")
    assert checked.schema.field("v").type == pa.string()  # pyarrow's default would make NA and null nulls
