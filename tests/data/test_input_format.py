"""The input as every reader reads it (runtime.data.input_format), and every input mistake refused
by ``commitlab run`` / ``verify`` before Ray or Spark start: exit 2, the flag named, the fix given."""

from __future__ import annotations

import os
import time

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.cli.command import main
from runtime.data.errors import InputError
from runtime.data.input_format import SPARK_OPTIONS, check_input

PANDAS_ROWS = {
    "id": ["a", "b", "a", "c"],
    "region": ["eu", "us", "eu", "eu"],
    "seq": [10, 3, 9, 1],  # as text '10' < '9': the version with 10 must still win
    "note": ["two\nlines", 'say "hi", ok', "a,b,c", ""],
    "at": ["2024-01-01 00:00:00", "2024-01-01 10:00:00", "2024-01-02 00:00:00", None],
}


def test_a_pandas_csv_with_line_breaks_quotes_and_commas_is_read_record_for_record(tmp_path):
    path = tmp_path / "events.csv"
    pd.DataFrame(PANDAS_ROWS).to_csv(path, index=False)
    checked = check_input(str(path), None, "id", "region", "seq")
    assert checked.rows == 4  # not 5: the line break is inside a quoted field
    assert checked.fmt == "csv"
    types = dict(zip(checked.schema.names, checked.schema.types, strict=True))
    assert types["seq"] == pa.int64()  # a number, so 10 > 9
    assert types["note"] == pa.string()
    assert types["at"] == pa.timestamp("us", tz="UTC")


def test_spark_reads_csv_with_rfc_4180_options():
    # the options that make Spark read what the check read: a record may span lines, "" is a quote
    assert SPARK_OPTIONS["csv"]["multiLine"] == "true"
    assert SPARK_OPTIONS["csv"]["escape"] == '"' and SPARK_OPTIONS["csv"]["header"] == "true"


def test_json_lines_with_objects_and_lists_keep_their_types(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(
        '{"id": "a", "region": "eu", "seq": 1, "addr": {"city": "x"}, "tags": [1, 2]}\n'
        '{"id": "b", "region": "eu", "seq": 2.5, "addr": null, "tags": null, "note": null}\n'
    )
    schema = check_input(str(path), None, "id", "region", "seq").schema
    assert schema.field("seq").type == pa.float64()
    assert schema.field("addr").type == pa.struct([("city", pa.string())])
    assert schema.field("tags").type == pa.list_(pa.int64())
    assert schema.field("note").type == pa.string()


GOOD = pa.table({"id": ["a", "b"], "region": ["eu", "us"], "seq": [1, 2]})


def _missing(d):
    return [str(d / "nowhere.parquet")], "--input"


def _empty_file(d):
    (d / "x.parquet").write_bytes(b"")
    return [str(d / "x.parquet")], "--input"


def _no_rows(d):
    pq.write_table(GOOD.slice(0, 0), d / "x.parquet")
    return [str(d / "x.parquet")], "--input"


def _mixed(d):
    pq.write_table(GOOD, d / "a.parquet")
    (d / "b.csv").write_text("id,region,seq\na,eu,1\n")
    return [str(d)], "--input-format"


def _no_key(d):
    pq.write_table(GOOD.drop(["id"]), d / "x.parquet")
    return [str(d)], "--key"


def _text_precombine(d):
    (d / "x.csv").write_text("id,region,seq\na,eu,10\nb,us,nine\n")
    return [str(d)], "--precombine-field"


def _nested_key(d):
    pq.write_table(GOOD.set_column(0, "id", pa.array([{"x": 1}, {"x": 2}])), d / "x.parquet")
    return [str(d)], "--key"


def _unsupported_type(d):
    pq.write_table(GOOD.append_column("span", pa.array([1, 2], pa.duration("s"))), d / "x.parquet")
    return [str(d)], "--input"


def _foreign_table(d):
    pq.write_table(GOOD, d / "x.parquet")
    (d / "table").mkdir()
    (d / "table" / "notes.txt").write_text("not a table")
    return [str(d / "x.parquet")], "--table"


MISTAKES = [_missing, _empty_file, _no_rows, _mixed, _no_key, _text_precombine, _nested_key, _unsupported_type]


@pytest.mark.parametrize("mistake", [*MISTAKES, _foreign_table], ids=lambda f: f.__name__.strip("_"))
def test_an_input_mistake_exits_2_naming_the_flag_before_ray_or_spark(tmp_path, capsys, no_ray, mistake):
    d = tmp_path / "in"
    d.mkdir()
    inputs, flag = mistake(d)
    table = d / "table" if mistake is _foreign_table else tmp_path / "table"
    fields = ["--key", "id", "--partition-field", "region", "--precombine-field", "seq"]
    args = ["run", "--source", "spark", "--input", *inputs, *fields, "--table", str(table)]
    started = time.monotonic()
    code = main([*args, "--quiet", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 2, out
    assert time.monotonic() - started < 5
    assert flag in out and "fix:" in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize("mistake", [_missing, _mixed, _text_precombine], ids=lambda f: f.__name__.strip("_"))
def test_verify_refuses_an_input_mistake_before_spark(tmp_path, capsys, no_ray, mistake):
    d = tmp_path / "in"
    d.mkdir()
    inputs, flag = mistake(d)
    fields = ["--key", "id", "--partition-field", "region", "--precombine-field", "seq"]
    code = main(["verify", "--table", str(tmp_path / "table"), "--input", *inputs, *fields])
    out = capsys.readouterr().out
    assert code == 2, out
    assert flag in out, out


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_named(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("id,region,seq\na,eu,1\n")
    path.chmod(0)
    with pytest.raises(InputError, match="--input.*x.csv"):
        check_input(str(path), None, "id", "region", "seq")


def test_a_csv_column_without_values_is_a_string_and_a_header_only_file_types_nothing(tmp_path):
    (tmp_path / "a.csv").write_text("id,region,seq,empty\n")
    (tmp_path / "b.csv").write_text("id,region,seq,empty\nx,eu,1,\n")
    schema = check_input(str(tmp_path), None, "id", "region", "seq").schema
    assert schema.field("seq").type == pa.int64() and schema.field("empty").type == pa.string()


def test_a_backslash_escaped_quote_is_refused_naming_the_line_and_the_rfc_4180_way(tmp_path):
    # what Spark's CSV writer makes of a quote by default: not RFC 4180, read differently by each reader
    path = tmp_path / "x.csv"
    path.write_text('id,region,seq,note\na,eu,1,"say \\"hi\\", ok"\n')
    with pytest.raises(InputError, match="line 2.*double a quote.*escape"):
        check_input(str(path), None, "id", "region", "seq")
