"""How a user's ``--input`` is read: one place for every reader of it.

The pre-check (:func:`check_input`, in pyarrow, before Ray or Spark start), the Spark job and the
verifier's expected state (Spark, :func:`runtime.data.workload.read_input`) read the same files with
the same rules, so they see the same records of the same types:

* CSV: RFC 4180 (a quoted field may hold the separator, a doubled quote ``""`` and line breaks), a
  header, UTF-8; Spark reads it with :data:`SPARK_OPTIONS` (``multiLine``, ``escape='"'``) and the
  schema inferred here, never its own: a column is ``bigint`` when every value is an integer,
  ``double`` when a number, ``boolean`` (``true``/``false``), ``date`` (``2024-01-31``), ``timestamp``
  (ISO 8601, UTC unless the value names its zone), else ``string``. An unquoted empty field is null,
  a quoted one ``""`` the empty string (Spark's ``nullValue``/``emptyValue``).
* JSON Lines: one object per line; types as pyarrow infers them over the whole file (integers and
  decimals together are ``double``; an object is a struct, an array a list; an ISO 8601 string a
  timestamp); a column that is null throughout is a string (as Spark infers it).
* parquet: the footers' types as Spark reads them (:mod:`runtime.data.spark_types`: pandas'
  categoricals, unsigned integers, large strings, nanosecond and time-zone-aware timestamps).

The checks name the flag and the fix: ``--input`` not found, unreadable, empty, of an unknown or
mixed format (``--input-format``); a ``--key``, ``--partition-field`` or ``--precombine-field``
column missing, or a precombine field that is neither a number nor a date or timestamp (it orders
the versions of a record). Whether Hudi can hold every column's type is :mod:`runtime.hudi.formats.avro_schema`'s
to say (:func:`runtime.job.prepare.prepare_job` asks it of the schema found here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from runtime.data.columns import INTERNAL_COLUMNS
from runtime.data.errors import InputError
from runtime.data.input_scan import (
    SCAN_BUDGET_S,
    ColumnCheck,
    check_values,
    first_bad_partition,
    first_null,
    first_null_or_nan,
    first_sub_micro,
)
from runtime.data.spark_types import SparkRead, spark_schema
from runtime.data.text_input import check_text_file, csv_batches, csv_header, input_stream

FORMATS = ("parquet", "csv", "json")
EXTENSIONS = {
    ".parquet": "parquet",
    ".parq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
# Spark's reader options per format: with them Spark reads what pyarrow reads here (RFC 4180 CSV)
SPARK_OPTIONS: dict[str, dict[str, str]] = {
    "csv": {"header": "true", "multiLine": "true", "quote": '"', "escape": '"', "mode": "FAILFAST"},
    "json": {"mode": "FAILFAST"},
    "parquet": {"mergeSchema": "true"},
}
TIMESTAMP = pa.timestamp("us", tz="UTC")  # Spark's TimestampType (session time zone UTC)
FLAGS = {"key": "--key", "partition": "--partition-field", "precombine": "--precombine-field"}


@dataclass(frozen=True)
class CheckedInput:
    """An input that passed :func:`check_input`: its data files in stream order, their format,
    the one schema every reader uses, and its row count."""

    path: str
    files: list[str]
    fmt: str
    schema: pa.Schema
    rows: int
    # top-level parquet TIMESTAMP(NANOS) columns: Spark reads them as nanoseconds, turned into microseconds
    nanos: tuple[str, ...] = ()
    # a column whose type the table holds otherwise: cast to the table's type as Hudi's writer does
    # (:mod:`runtime.job.table_schema`)
    casts: tuple[tuple[str, pa.DataType], ...] = ()
    # where the bounded value scan stopped (:mod:`runtime.data.input_scan`), said to the user
    notes: tuple[str, ...] = ()


# -- the files --------------------------------------------------------------------------------------


def list_files(path: str) -> tuple[list[str], list[int]]:
    """Data files under ``path`` (a file or a directory, recursive; hidden ``.``/``_`` names skipped),
    sorted by path, with their sizes. Paths are returned in Spark's spelling."""
    import pyarrow.fs as pafs

    spell: Callable[[str], str]
    if "://" in path and not path.startswith("file://"):
        fs, root = pafs.FileSystem.from_uri(path)
        scheme = path.split("://", 1)[0]
        spell = lambda p: f"{scheme}://{p}"  # noqa: E731
    else:
        fs = pafs.LocalFileSystem()
        root = os.path.abspath(path[len("file://") :] if path.startswith("file://") else path)
        spell = lambda p: p  # noqa: E731
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"--input {path}: no such file or directory; fix: pass an existing file or directory")
    if info.type == pafs.FileType.File:
        return [spell(root)], [info.size or 0]
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except OSError as exc:
        raise InputError(f"--input {path}: cannot list the directory ({exc}); fix: make it readable") from None
    out = []
    for fi in infos:
        rel = fi.path[len(root) :].lstrip("/")
        if fi.type == pafs.FileType.File and not any(part.startswith((".", "_")) for part in rel.split("/")):
            out.append((fi.path, fi.size or 0))
    out.sort()
    return [spell(p) for p, _ in out], [s for _, s in out]


def format_of(files: Sequence[str], fmt: str | None) -> str:
    """The input's one format: ``fmt`` (``--input-format``) when given, else the files' extensions."""
    if fmt:
        f = "json" if fmt.lower() == "jsonl" else fmt.lower()
        if f not in FORMATS:
            raise InputError(
                f"--input-format {fmt}: not a supported format; fix: pass one of {', '.join(FORMATS)} "
                "(or convert the input)"
            )
        return f
    found: dict[str, str] = {}
    for p in files:
        ext = os.path.splitext(p)[1].lower()
        if ext not in EXTENSIONS:
            raise InputError(
                f"--input: cannot tell the format of {p!r} (extension {ext or 'none'!r}); fix: pass "
                f"--input-format ({', '.join(FORMATS)}) or rename the file"
            )
        found.setdefault(EXTENSIONS[ext], p)
    if len(found) > 1:
        desc = ", ".join(f"{f} ({p})" for f, p in found.items())
        raise InputError(
            f"--input mixes formats: {desc}; fix: keep one format per --input path, or pass --input-format "
            "to read every file as one format"
        )
    return next(iter(found))


# -- one file's schema -------------------------------------------------------------------------------


def file_schema(path: str, size: int, fmt: str) -> tuple[pa.Schema, int] | None:
    """(schema, rows) of one data file as every reader reads it; None for an empty CSV/JSON file."""
    if fmt == "parquet":
        return _parquet_schema(path)
    if size == 0:
        return None
    try:
        check_text_file(path, fmt)  # a malformed line is named with its number
        return _csv_schema(path) if fmt == "csv" else _json_schema(path)
    except pa.ArrowInvalid as exc:
        raise InputError(f"--input: {path!r} cannot be read as {fmt} ({exc}); fix: rewrite the file") from None
    except OSError as exc:
        raise InputError(f"--input: cannot read {path!r} ({exc}); fix: make it readable or leave it out") from None


def _parquet_schema(path: str) -> tuple[pa.Schema, int]:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    try:
        if "://" in path:
            fs, p = pafs.FileSystem.from_uri(path)
            meta = pq.read_metadata(fs.open_input_file(p))
        else:
            meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(
            f"--input: {path!r} is not a readable parquet file ({exc}); fix: remove it from the input or rewrite it"
        ) from None
    schema = meta.schema.to_arrow_schema()
    # Spark's old default (INT96, an instant in nanoseconds) pyarrow reads as timestamp[ns]; Spark as a timestamp
    int96 = {c.path for c in (meta.schema.column(i) for i in range(len(meta.schema))) if c.physical_type == "INT96"}
    for i, f in enumerate(schema):
        if f.name in int96:
            schema = schema.set(i, pa.field(f.name, TIMESTAMP))
    return schema, meta.num_rows


# CSV column types, most specific first: the first that holds every value of a column is its type
_CSV_TYPES: tuple[pa.DataType, ...] = (pa.int64(), pa.float64(), pa.bool_(), pa.date32(), pa.timestamp("us"), TIMESTAMP)


def _holds(values: pa.Array, t: pa.DataType) -> bool:
    if pa.types.is_boolean(t):  # Spark reads true/false only; Arrow would take 1/0 too
        return bool(pc.all(pc.is_in(pc.utf8_lower(values), pa.array(["true", "false"]))).as_py())
    try:
        pc.cast(values, t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _csv_schema(path: str) -> tuple[pa.Schema, int]:
    """The CSV's columns typed by :data:`_CSV_TYPES`, read as text in batches (memory stays bounded)."""
    names = csv_header(path)
    candidates: dict[str, list[pa.DataType]] = {n: [] for n in names}  # [] until a value is seen: a string
    seen: set[str] = set()
    rows = 0
    for batch in csv_batches(path, names):
        rows += batch.num_rows
        for name, column in zip(names, batch.columns, strict=True):
            values = column.drop_null()
            if len(values):
                held = candidates[name] if name in seen else list(_CSV_TYPES)
                candidates[name] = [t for t in held if _holds(values, t)]
                seen.add(name)
    fields = [pa.field(n, _csv_type(candidates[n])) for n in names]
    return pa.schema(fields), rows


def _csv_type(candidates: list[pa.DataType]) -> pa.DataType:
    if not candidates:
        return pa.string()
    first = candidates[0]
    return TIMESTAMP if pa.types.is_timestamp(first) else first


def _json_schema(path: str) -> tuple[pa.Schema, int]:
    import pyarrow.json as pj

    table = pj.read_json(input_stream(path))
    return pa.schema([pa.field(f.name, _json_type(f.type)) for f in table.schema]), table.num_rows


def _json_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _json_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_json_type(t.value_type))
    return t


# -- the input ----------------------------------------------------------------------------------------


def check_input(path: str, fmt: str | None, key: str, partition_field: str, precombine_field: str) -> CheckedInput:
    """``--input`` checked as every reader will read it; raises :class:`InputError` naming the flag
    and the fix. Costs the parquet footers, or one pass over each CSV/JSON file; no Spark, no Ray."""
    files, sizes = list_files(path)
    if not files:
        raise InputError(
            f"--input {path} is empty: no data files (names starting with '.' or '_' are skipped); fix: point "
            "--input to the directory holding the data files"
        )
    fmt = format_of(files, fmt)
    schemas = [(f, s) for f, size in zip(files, sizes, strict=True) if (s := file_schema(f, size, fmt)) is not None]
    read = SparkRead()
    if fmt == "parquet":  # as Spark reads the footers' types
        schemas = [(f, (spark_schema(s, read), n)) for f, (s, n) in schemas]
        if read.nested_nanos:
            col = read.nested_nanos[0]
            raise InputError(
                f"--input: column {col!r} holds a nanosecond timestamp inside a struct or list, which Spark "
                "reads as a bare number (and Hudi holds at most microseconds); fix: write it in microseconds "
                "(pandas: df.to_parquet(..., coerce_timestamps='us', allow_truncated_timestamps=False))"
            )
    rows = sum(n for _, (_, n) in schemas)
    if rows == 0:
        raise InputError(f"--input {path} is empty: {len(files)} file(s), 0 rows; fix: point --input to non-empty data")
    required = {"key": key, "partition": partition_field, "precombine": precombine_field}
    # a file without rows has no values to type its columns by (a CSV's header alone: all strings)
    schema = merge_schemas(fmt, [(f, s) for f, (s, n) in schemas if n or fmt == "parquet"], required)
    check_columns(schema, required)
    nanos = tuple(dict.fromkeys(read.nanos))
    scan = check_values(files, fmt, schema, value_checks(required, nanos))
    note = scan.note(SCAN_BUDGET_S)
    return CheckedInput(path, list(files), fmt, schema, rows, nanos, notes=(note,) if note else ())


def value_checks(required: dict[str, str], nanos: Sequence[str]) -> list[ColumnCheck]:
    """The values the pre-check refuses (:mod:`runtime.data.input_scan`): a null key, a null or
    NaN ordering value, a nanosecond timestamp that microseconds would truncate."""
    key, pc_col = required["key"], required["precombine"]
    checks = [
        ColumnCheck(
            key,
            first_null,
            "--key {column}: the record key is null in {where}",
            "drop or fill the rows without a key (Hudi needs a record key for every record), or pass another --key",
        ),
        ColumnCheck(
            pc_col,
            first_null_or_nan,
            "--precombine-field {column}: the ordering value is {value} in {where} (it orders the versions of "
            "a record: the larger wins, and a missing or NaN value has no order; pandas writes a missing float "
            "as null)",
            "fill those values or drop the rows (pandas: Series.fillna, DataFrame.dropna), or pass another "
            "--precombine-field",
        ),
    ]
    checks.append(
        ColumnCheck(
            required["partition"],
            first_bad_partition,
            "--partition-field {column}: {value} in {where} is not a partition path (a directory name, or names "
            "joined by '/': Hudi writes '2024/01' as nested folders; never null or empty, no '\\', no empty "
            "name, no name starting with '.')",
            "clean or map those values, or pass another --partition-field",
        )
    )
    for col in nanos:
        checks.append(
            ColumnCheck(
                col,
                first_sub_micro,
                "--input: column {column} is a nanosecond timestamp and {where} holds {value}, whose "
                "nanoseconds below a microsecond Hudi (Avro timestamp-micros) would truncate",
                "round it to microseconds (pandas: Series.dt.floor('us')) or write the file with "
                "coerce_timestamps='us'",
            )
        )
    return checks


_INTEGRAL = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


def _widened(fmt: str, a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type a column typed ``a`` in one file and ``b`` in another is read as, or None."""
    if a == b:
        return a
    if fmt != "parquet":  # inferred types widen: integers to bigint, numbers to double
        if a in _INTEGRAL and b in _INTEGRAL:
            return pa.int64()
        if pa.types.is_floating(a) and pa.types.is_floating(b):
            return pa.float64()
    return None


def merge_schemas(fmt: str, schemas: list[tuple[str, pa.Schema]], required: dict[str, str]) -> pa.Schema:
    """The one schema of the input's files; raises InputError on a type change, a CSV header change
    or a required column missing from one file."""
    merged: dict[str, pa.DataType] = {}
    first_seen: dict[str, str] = {}
    header0 = (schemas[0][0], schemas[0][1].names)
    for path, schema in schemas:
        if fmt == "csv" and schema.names != header0[1]:
            raise InputError(
                f"--input: the CSV header of {path!r} {schema.names} differs from {header0[0]!r} {header0[1]} "
                "(CSV columns are matched by position); fix: give all CSV files the same header"
            )
        for field in schema:
            if field.name not in merged:
                merged[field.name], first_seen[field.name] = field.type, path
                continue
            widened = _widened(fmt, merged[field.name], field.type)
            if widened is None:
                raise InputError(
                    f"--input: column {field.name!r} changes type between files: {merged[field.name]} in "
                    f"{first_seen[field.name]!r} but {field.type} in {path!r}; fix: rewrite the files with one "
                    f"type for {field.name!r} (e.g. cast it) or read them separately"
                )
            merged[field.name] = widened
    for path, schema in schemas:
        for role, col in required.items():
            if col in merged and col not in schema.names:
                raise InputError(
                    f"{FLAGS[role]} {col}: the column is missing from {path!r} (present in {first_seen[col]!r}); "
                    "fix: add it to every input file"
                )
    return pa.schema([pa.field(n, t) for n, t in merged.items()])


def missing_column(role: str, col: str, available: Sequence[str]) -> InputError:
    near = [c for c in available if c.lower() == col.lower()]
    hint = f" (did you mean {near[0]!r}? names are case-sensitive)" if near else ""
    flag = FLAGS.get(role, role)
    return InputError(
        f"{flag} {col}: no such column in the input{hint}; available columns: {list(available)}; "
        f"fix: pass {flag} with one of them"
    )


def _orderable(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def check_columns(schema: pa.Schema, required: dict[str, str]) -> None:
    """The key, partition and precombine columns exist and have types that can play their role;
    no column is reserved by the stream or of a type a Hudi table cannot hold."""
    for role, col in required.items():
        if col not in schema.names:
            raise missing_column(role, col, schema.names)
        t = schema.field(col).type
        if pa.types.is_nested(t):
            raise InputError(
                f"{FLAGS[role]} {col}: the column is {t}, which cannot be a record key / partition path / "
                "ordering value; fix: pass an atomic column (string, number, date, timestamp)"
            )
    pc_type = schema.field(required["precombine"]).type
    if not _orderable(pc_type):
        raise InputError(
            f"--precombine-field {required['precombine']}: the column is {pc_type}, but the precombine field "
            "orders the versions of a record (the larger wins), so it must be a number, a date or a timestamp "
            "(compared as text, '10' < '9'); fix: pass a numeric or timestamp column, or write this one as numbers"
        )
    for col in INTERNAL_COLUMNS:
        if col in schema.names:
            raise InputError(f"--input has a column named {col!r}, which the stream reserves; fix: rename or drop it")
