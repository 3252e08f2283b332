"""Line by line checks of a user's CSV and JSON Lines files, before Spark reads them.

Spark reads a CSV line with too few or too many fields, or a JSON value whose type changes from
line to line, without complaint: the short line's missing fields become nulls (and the user is
told of "null precombine values" instead of a malformed line), the mixed column becomes a string.
Read as written, each file is checked here once, in one pass, and the first problem is named
with its file and line number:

* CSV (with a header, as :mod:`runtime.data.input_format` reads it): every record has as
  many fields as the header; quoting is Python's ``csv`` module's (RFC 4180, as Spark's default);
* JSON Lines: every non-blank line is one JSON object; a column holds one kind of value
  (a number, a string, a boolean, an object, a list) throughout the file, nulls aside: integers
  and decimals are both numbers (Spark reads them as one type too).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from runtime.data.errors import InputError


@contextmanager
def open_text(path: str) -> Iterator[io.TextIOBase]:
    """A local path or any pyarrow.fs URI, as text."""
    import pyarrow.fs as pafs

    if "://" in path and not path.startswith("file://"):
        fs, inner = pafs.FileSystem.from_uri(path)
        with fs.open_input_stream(inner) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
            yield text
    else:
        local = path[len("file://") :] if path.startswith("file://") else path
        with open(local, encoding="utf-8", newline="") as text:
            yield text


def check_text_file(path: str, fmt: str) -> None:
    """Raises :class:`InputError` naming the first malformed line of a CSV or JSON Lines file."""
    try:
        with open_text(path) as text:
            if fmt == "csv":
                _check_csv(path, text)
            elif fmt == "json":
                _check_json_lines(path, text)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path!r} is not UTF-8 text ({exc.reason}); fix: convert it to UTF-8") from None


def _check_csv(path: str, text: io.TextIOBase) -> None:
    reader = csv.reader(text, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return
        bad, first = 0, None
        for row in reader:
            if row and len(row) != len(header):
                bad += 1
                first = first or (reader.line_num, len(row))
    except csv.Error as exc:
        raise InputError(
            f"{path!r} line {reader.line_num}: not a CSV record ({exc}); fix: quote fields that hold the "
            "separator, a quote or a line break, and double a quote inside a quoted field (RFC 4180; Spark "
            "writes that with .option('escape', '\"'), its default escapes with a backslash)"
        ) from None
    if first is not None:
        line, fields = first
        raise InputError(
            f"{path!r} has {bad} malformed line(s): line {line} has {fields} field(s) where the header has "
            f"{len(header)}; fix: give every line one field per header column (empty fields are allowed)"
        )


_KINDS = ((bool, "a boolean"), ((int, float), "a number"), (str, "a string"), (dict, "an object"), (list, "a list"))


def _kind(value: Any) -> str:
    for types, name in _KINDS:  # bool before int: a boolean is an int to Python
        if isinstance(value, types):
            return name
    return "null"


def _check_json_lines(path: str, text: io.TextIOBase) -> None:
    kinds: dict[str, tuple[str, int]] = {}  # column -> (kind, the line that set it)
    for number, line in enumerate(text, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path!r} line {number} is not JSON ({exc.msg}); fix: write one JSON object per line (JSON Lines)"
            ) from None
        if not isinstance(record, dict):
            raise InputError(
                f"{path!r} line {number} holds {_kind(record)}, not a JSON object; fix: write one object per line"
            )
        for column, value in record.items():
            kind = _kind(value)
            if kind == "null":
                continue
            seen = kinds.setdefault(column, (kind, number))
            if seen[0] != kind:
                raise InputError(
                    f"column {column!r} changes type inside {path!r}: {seen[0]} on line {seen[1]} but {kind} on "
                    f"line {number}; fix: write {column!r} with one type in every line (as across files)"
                )


def input_stream(path: str) -> pa.NativeFile:
    """A local path or any pyarrow.fs URI, as bytes."""
    import pyarrow.fs as pafs

    if "://" in path and not path.startswith("file://"):
        fs, inner = pafs.FileSystem.from_uri(path)
        return fs.open_input_stream(inner)
    return pa.OSFile(path[len("file://") :] if path.startswith("file://") else path)


def csv_header(path: str) -> list[str]:
    with open_text(path) as text:
        header = next(csv.reader(text, strict=True), None)
    return header or []


def csv_batches(path: str, names: list[str]) -> Iterable[pa.RecordBatch]:
    import pyarrow.csv as pcsv

    reader = pcsv.open_csv(
        input_stream(path),
        read_options=pcsv.ReadOptions(column_names=names, skip_rows=1),
        parse_options=pcsv.ParseOptions(newlines_in_values=True),
        convert_options=pcsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            null_values=[""],  # Spark's nullValue: only an empty field (pyarrow would also take NaN, n/a, NULL...)
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    yield from reader
