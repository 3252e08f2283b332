"""A bounded scan of a user's ``--input`` before Ray or Spark start: the values the checks of the
schema alone cannot see.

:func:`check_values` reads the files of a :class:`~runtime.data.input_format.CheckedInput` with
pyarrow, only the columns it needs, a batch at a time, and refuses the first:

* null record key (Hudi needs one: ``HoodieKey``);
* null or NaN ordering value (``--precombine-field``: it orders the versions of a record; a NaN is
  unordered, and pandas writes a missing float as null);
* nanosecond timestamp with nanoseconds below a microsecond (Hudi holds microseconds: truncated);
* value that does not convert exactly to the type the table holds its column as
  (:attr:`CheckedInput.casts`: a 4-decimal number in a ``decimal(10,2)`` column would be rounded,
  ``n/a`` in a ``double`` column does not parse, an integer beyond 2^53 in a ``double`` one).

Each is named in the user's words: the column, the file, the data row (1-based, the header not
counted) and the value. The scan is bounded in time (:data:`SCAN_BUDGET_S`): past it the rest of
the input is not scanned, and :attr:`Scan.cut` says where it stopped and the run says so (the Spark
job's own check still refuses a null key or ordering value, later; a value past the bound that
does not convert exactly is converted as Hudi's writer converts it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from runtime.data.errors import InputError
from runtime.data.text_input import csv_batches, csv_header, input_stream

SCAN_BUDGET_S = 2.0
_BATCH_ROWS = 65_536

# the index of the first bad value of a column's values (as Spark reads them), or None
Check = Callable[[pa.Array], "int | None"]


class BadValue(InputError):
    """A value a check refused: the message, and the value and where it is."""

    heading = "InputError"  # to the user, one kind of input error

    def __init__(self, message: str, value: str, where: str) -> None:
        super().__init__(message)
        self.value, self.where = value, where


@dataclass(frozen=True)
class ColumnCheck:
    """One column's check: which values are bad, what is wrong with them and the fix."""

    column: str
    first_bad: Check
    problem: str  # "{column}", "{value}" and "{where}" filled in
    fix: str


@dataclass
class Scan:
    """Where a scan stopped when its time ran out: (file, rows scanned in it), else None."""

    files: int = 0
    rows: int = 0
    cut: tuple[str, int] | None = None

    def note(self, budget_s: float) -> str | None:
        """The line saying the bound cut the scan, for the user."""
        if self.cut is None:
            return None
        path, row = self.cut
        return (
            f"--input: the value check stopped after {budget_s:g} s ({self.rows:,} rows, up to row {row:,} of "
            f"{path!r}); Spark checks the rest for null keys and ordering values once it starts, and converts "
            "any value there to the table's column types as Hudi's writer does, unchecked"
        )


def check_values(
    files: Sequence[str],
    fmt: str,
    schema: pa.Schema,
    checks: Sequence[ColumnCheck],
    budget_s: float = SCAN_BUDGET_S,
) -> Scan:
    """Runs ``checks`` over the input's rows in stream order; raises :class:`InputError` at the
    first bad value. Returns how far it got."""
    scan = Scan()
    if not checks:
        return scan
    deadline = time.monotonic() + budget_s
    columns = list(dict.fromkeys(c.column for c in checks))
    for path in files:
        scan.files += 1
        for row0, batch in _batches(path, fmt, schema, columns):
            for check in checks:
                values = batch.column(batch.schema.get_field_index(check.column))
                bad = check.first_bad(_plain(values))
                if bad is not None:
                    raise _refusal(check, path, row0 + bad, values[bad].as_py())
            scan.rows += batch.num_rows
            if time.monotonic() > deadline:
                scan.cut = (path, row0 + batch.num_rows)
                return scan
    return scan


def _refusal(check: ColumnCheck, path: str, index: int, value: object) -> BadValue:
    where = f"{path!r} data row {index + 1:,}"
    shown = "null" if value is None else repr(value) if isinstance(value, str) else str(value)
    problem = check.problem.format(column=check.column, value=shown, where=where)
    return BadValue(f"{problem}; fix: {check.fix}", shown, where)


def _plain(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column's values without a dictionary (pandas' categoricals): Spark reads the values."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    return values


def _batches(path: str, fmt: str, schema: pa.Schema, columns: list[str]) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first row of the batch in its file, the batch) with ``columns``, typed as ``schema`` for
    CSV (read as text) and JSON, as stored for parquet."""
    row0 = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        present = [c for c in columns if c in pq.read_schema(_open(path)).names]
        with pq.ParquetFile(_open(path)) as pf:
            for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=present):
                yield row0, batch
                row0 += batch.num_rows
        return
    if fmt == "csv":
        names = csv_header(path)
        for batch in csv_batches(path, names):
            typed = [pc.cast(batch.column(names.index(c)), schema.field(c).type) for c in columns]
            yield row0, pa.RecordBatch.from_arrays(typed, names=columns)
            row0 += batch.num_rows
        return
    import pyarrow.json as pj

    table = pj.read_json(input_stream(path))
    arrays = [
        pc.cast(table.column(c), schema.field(c).type) if c in table.column_names else pa.nulls(table.num_rows)
        for c in columns
    ]
    for batch in pa.table(arrays, names=columns).to_batches(_BATCH_ROWS):
        yield row0, batch
        row0 += batch.num_rows


def _open(path: str) -> pa.NativeFile | str:
    if "://" in path and not path.startswith("file://"):
        import pyarrow.fs as pafs

        fs, inner = pafs.FileSystem.from_uri(path)
        return fs.open_input_file(inner)
    return path[len("file://") :] if path.startswith("file://") else path


# -- the checks -------------------------------------------------------------------------------------


def first_null(values: pa.Array) -> int | None:
    """The first null."""
    if not values.null_count:
        return None
    return int(pc.index(pc.is_null(values), True).as_py())


def first_valid(values: pa.Array) -> int | None:
    """The first value that is not null."""
    found = pc.index(values.is_valid(), True).as_py()
    return None if found < 0 else int(found)


def first_null_or_nan(values: pa.Array) -> int | None:
    """The first null, or NaN of a floating column."""
    bad = pc.is_null(values, nan_is_null=pa.types.is_floating(values.type))
    found = pc.index(bad, True).as_py()
    return None if found < 0 else int(found)


def first_bad_partition(values: pa.Array) -> int | None:
    """The first value that is not a partition path (as the Spark job's check, ``_row_stats``):
    null, empty, with a backslash, an empty segment or a segment starting with a dot."""
    text = pc.cast(values, pa.string())
    misnamed = pc.or_(pc.equal(text, ""), pc.match_substring_regex(text, r"\\|^\.|^/|/$|//|/\."))
    bad = pc.or_kleene(pc.is_null(text), misnamed)
    found = pc.index(pc.fill_null(bad, True), True).as_py()
    return None if found < 0 else int(found)


def first_sub_micro(values: pa.Array) -> int | None:
    """The first nanosecond timestamp with nanoseconds below a microsecond (truncated to micros)."""
    nanos = pc.cast(values.cast(pa.timestamp("ns", tz=values.type.tz)), pa.int64())
    rest = pc.not_equal(pc.subtract(nanos, pc.multiply(pc.divide(nanos, 1000), 1000)), 0)
    found = pc.index(pc.fill_null(rest, False), True).as_py()
    return None if found < 0 else int(found)


def first_inexact(target: pa.DataType) -> Check:
    """The first value that does not convert exactly to ``target``: a parse failure, an overflow,
    a lost digit (a float is converted and back, as a decimal cast rounds silently)."""

    def fails(values: pa.Array) -> bool:
        try:
            out = pc.cast(values, target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return True
        if pa.types.is_floating(values.type) and (pa.types.is_decimal(target) or pa.types.is_floating(target)):
            back = pc.cast(out, values.type)
            differs = pc.fill_null(pc.not_equal(back, values), False)
            return bool(pc.any(differs).as_py())
        return False

    def first(values: pa.Array) -> int | None:
        if not fails(values):
            return None
        lo, hi = 0, len(values) - 1  # the shortest failing prefix ends at the first bad value
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(values.slice(0, mid + 1)):
                hi = mid
            else:
                lo = mid + 1
        return lo

    return first
