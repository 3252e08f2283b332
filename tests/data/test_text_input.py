"""Malformed CSV lines and JSON columns that change type inside a file are refused by line number,
before Spark reads anything (Spark would read them as nulls or as strings without a word)."""

from __future__ import annotations

import re

import pytest

from runtime.data.errors import InputError
from runtime.data.text_input import check_text_file


def _check(tmp_path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    check_text_file(str(path), "csv" if name.endswith(".csv") else "json")


def test_a_good_csv_and_a_good_json_lines_file_pass(tmp_path):
    _check(tmp_path, "a.csv", 'id,region,seq\n1,eu,3\n2,"us, east",4\n3,,5\n')
    _check(tmp_path, "a.json", '{"id": 1, "seq": 3}\n\n{"id": 2, "seq": 4.5, "x": null}\n{"id": 3, "x": "a"}\n')


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "id,region,seq\n1,eu,3\n2,us\n3,eu,5,9\n",
            "2 malformed line(s): line 3 has 2 field(s) where the header has 3",
        ),
        ('id,region,seq\n1,"eu,3\n', "line 2: not a CSV record"),
    ],
)
def test_a_malformed_csv_line_is_named_by_its_number(tmp_path, text, message):
    with pytest.raises(InputError, match=re.escape(message)):
        _check(tmp_path, "in.csv", text)


@pytest.mark.parametrize(
    "text,message",
    [
        (
            '{"id": 1, "seq": 3}\n{"id": "two", "seq": 4}\n',
            "column 'id' changes type inside .*: a number on line 1 but a string on line 2",
        ),
        (
            '{"id": 1, "ok": true}\n{"id": 2, "ok": 1}\n',
            "column 'ok' changes type .*a boolean on line 1 but a number on line 2",
        ),
        ('{"id": 1}\n{"id": 2\n', "line 2 is not JSON"),
        ('{"id": 1}\n[1, 2]\n', "line 2 holds a list, not a JSON object"),
    ],
)
def test_a_json_lines_problem_is_named_by_its_line(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        _check(tmp_path, "in.json", text)


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(b"id,seq\n1,\xff\n")
    with pytest.raises(InputError, match="not UTF-8"):
        check_text_file(str(path), "csv")
