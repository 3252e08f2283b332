"""A user's ``--input`` held against the schema of the table it is written into, before any work.

The table's schema is the Avro schema in its latest completed commit's metadata
(``extraMetadata.schema``; Hudi's ``TableSchemaResolver.getTableAvroSchemaFromLatestCommit``). The
input's schema is the one every reader reads (:mod:`runtime.data.input_format`, Spark's rules),
its key and partition columns as strings (``read_input`` casts them), converted to Avro as Hudi's
Spark writer converts it (:mod:`runtime.hudi.formats.avro_schema`). The two are reconciled by the rules
of Hudi's Spark writer at its defaults (``hoodie.datasource.write.reconcile.schema=false``,
``hoodie.avro.schema.validate=false``, ``hoodie.datasource.write.schema.allow.auto.evolution.column.drop=false``,
``hoodie.write.set.null.for.missing.columns=false``): ``HoodieSchemaUtils.deduceWriterSchema``
(``hudi-spark-common``, 0.14: ``HoodieSparkSqlWriter.deduceWriterSchema``):

1. ``canonicalizeSchema`` -> ``AvroSchemaEvolutionUtils.reconcileSchemaRequirements(source, table)``:
   an input column whose type ``SchemaChangeUtils.shouldPromoteType(input, table)`` (int -> long,
   float, double, string, decimal; long -> float, double, string, decimal; float -> double,
   string, decimal; double -> string, decimal; a decimal -> a decimal as wide or wider, string;
   string -> date, decimal; date -> string) takes the table's type: the run casts the column
   (:attr:`CheckedInput.casts`) and the table's schema stays. A value that would not convert
   exactly (a rounded decimal, an integer a double cannot hold, a string that does not parse) is
   refused, naming it (:mod:`runtime.data.input_scan`): Hudi's writer would round or fail on it.
2. ``AvroSchemaUtils.checkValidEvolution(writer, table)``: a column of the table missing from the
   input is refused (``MissingSchemaFieldException``); then the table's records must be readable
   with the input's schema (``AvroSchemaCompatibility.checkReaderWriterCompatibility(input,
   table)``: Avro's promotions int -> long -> float -> double, string <-> bytes), else
   ``SchemaBackwardsCompatibilityException``: refused here, naming the column, both types and
   the first value that does not convert to the table's type.

Difference from Hudi (docs/FIDELITY.md, "A second ingest"): where Hudi would EVOLVE the table's
schema (an input column wider than the table's, e.g. ``double`` over ``bigint``, or a new
column), the run is refused: this lab's writer merges a file group's base file only in the schema
it was written with (:func:`runtime.hudi.table.merge` refuses columns a base file lacks), so it cannot
write the evolved schema Hudi would. The refusal says what Hudi would do and the fix (cast the
column to the table's type, drop it, or write a new ``--table``). Avro compares no logical types,
so Hudi would also take a ``timestamp`` column over a ``bigint`` or a ``date`` one (numbers both,
the old values read as instants); that is refused here as the change of meaning it is.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pyarrow as pa

from runtime.core.dfs import DfsError, DfsNotFound, open_dfs
from runtime.data.errors import InputError
from runtime.data.input_format import CheckedInput
from runtime.data.input_scan import SCAN_BUDGET_S, BadValue, ColumnCheck, check_values, first_inexact, first_valid
from runtime.hudi.formats.avro_schema import arrow_type, avro_schema
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableError

FRESH = "or write to a new --table"


def latest_table_schema(table: str) -> tuple[str, dict[str, Any]] | None:
    """(instant, Avro record) of the table's latest completed commit that records a schema; None
    for a path without a table or a table without one."""
    try:
        dfs, base = open_dfs(table, role="preflight")
        hudi = HudiTable.open(dfs, base)
        timeline = hudi.timeline()
        for instant in reversed(timeline.completed_instants()):
            name = hudi.metadata_file(instant, timeline)
            doc = hudi.version.decode_metadata(dfs.read_bytes(hudi.timeline_file(name)), name)
            text = (doc.get("extraMetadata") or {}).get("schema")
            if text:
                return instant, json.loads(text)
    except (DfsNotFound, TableError):
        return None
    except (DfsError, ValueError) as exc:
        raise InputError(f"--table {table}: cannot read the schema of its latest commit ({exc}); {FRESH}") from None
    return None


def _kind(avro: Any) -> Any:
    """An Avro field type without its null branch."""
    if isinstance(avro, list):
        return next(t for t in avro if t != "null")
    return avro


def _unnamed(avro: Any) -> Any:
    """An Avro type without the full names of its named types (a decimal's ``fixed``, a struct's
    ``record``): they come from the writer's table name (``hoodie.<table>.<table>_record.<field>``),
    not from the data, so a table written under another name (or a verify, which names none)
    holds the same types. Hudi ignores them too where it compares atomic types
    (``AvroSchemaUtils.isAtomicSchemasCompatible``: ``isSchemaCompatible(.., checkNaming=false, ..)``).
    A record's field names are kept."""
    if isinstance(avro, list):
        return [_unnamed(t) for t in avro]
    if not isinstance(avro, dict):
        return avro
    named = avro.get("type") in ("fixed", "record", "enum")
    out = {k: _unnamed(v) for k, v in avro.items() if not (named and k in ("name", "namespace"))}
    if "fields" in avro:
        out["fields"] = [{**f, "type": _unnamed(f["type"])} for f in avro["fields"]]
    return out


def _primitive(avro: Any) -> Any:
    """The Avro type under a logical type (``long`` of a timestamp, ``int`` of a date)."""
    k = _kind(avro)
    return k["type"] if isinstance(k, dict) and "logicalType" in k and k["type"] in ("int", "long") else k


def _name(avro: Any) -> str:
    """The Spark SQL name of an Avro type written by :mod:`runtime.hudi.formats.avro_schema`."""
    t = arrow_type(_kind(avro))
    names = {pa.int64(): "bigint", pa.int32(): "int", pa.float64(): "double", pa.float32(): "float"}
    if t in names:
        return names[t]
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    return {pa.string(): "string", pa.date32(): "date", pa.bool_(): "boolean", pa.binary(): "binary"}.get(t, str(t))


def _category(avro: Any) -> str:
    """SchemaChangeUtils' type of an Avro type: int, long, float, double, decimal, string, date, other."""
    k = _kind(avro)
    if isinstance(k, dict):
        logical = k.get("logicalType")
        if logical in ("decimal", "date"):
            return str(logical)
        return "other" if logical or k.get("type") not in ("int", "long", "float", "double", "string") else k["type"]
    return k if k in ("int", "long", "float", "double", "string") else "other"


# SchemaChangeUtils.isTypeUpdateAllowInternal: the types each may be promoted to
_PROMOTIONS = {
    "int": {"long", "float", "double", "string", "decimal"},
    "long": {"float", "double", "string", "decimal"},
    "float": {"double", "string", "decimal"},
    "double": {"string", "decimal"},
    "decimal": {"decimal", "string"},
    "string": {"date", "decimal"},
    "date": {"string"},
}
# Avro's reader/writer promotions (AvroSchemaCompatibility): the writer types a reader type reads
_AVRO_READS = {"long": {"int"}, "float": {"int", "long"}, "double": {"int", "long", "float"}}


def _promotes(src: Any, dst: Any) -> bool:
    """``SchemaChangeUtils.shouldPromoteType(src, dst)``: the input's type ``src`` takes the table's ``dst``."""
    a, b = _category(src), _category(dst)
    if b not in _PROMOTIONS.get(a, set()):
        return False
    if a == b == "decimal":  # only to a decimal as wide: scale and integer digits both kept
        s, d = arrow_type(_kind(src)), arrow_type(_kind(dst))
        return bool(d.scale >= s.scale and d.precision - d.scale >= s.precision - s.scale and d != s)
    return True


def reconcile(checked: CheckedInput, table: str, key: str, partition: str, table_name: str) -> CheckedInput:
    """``checked`` held against the table at ``table`` (module docstring): the casts to make, or
    :class:`InputError` naming the column, both types, the first offending value and the fix."""
    found = latest_table_schema(table)
    if found is None:
        return checked
    instant, table_record = found
    as_read = pa.schema(
        [pa.field(f.name, pa.string() if f.name in (key, partition) else f.type) for f in checked.schema]
    )
    mine = {f["name"]: f["type"] for f in avro_schema(as_read, table_name)["fields"]}
    theirs = {f["name"]: f["type"] for f in table_record.get("fields", []) if not f["name"].startswith("_hoodie_")}
    where = f"the table at {table} (its schema as of commit {instant})"
    missing = [c for c in theirs if c not in mine]
    if missing:
        raise InputError(
            f"--input: the table's column(s) {missing} are not in the input; Hudi refuses a write that drops a "
            f"column of {where} (AvroSchemaUtils.checkValidEvolution: MissingSchemaFieldException); fix: add "
            f"{missing[0]!r} to the input (nulls are allowed), {FRESH}"
        )
    added = [c for c in mine if c not in theirs]
    if added:
        raise InputError(
            f"--input: column {added[0]!r} ({_name(mine[added[0]])}) is not in {where}; Hudi's Spark writer would "
            "add it as a nullable column (schema evolution), which this lab's writer does not do; fix: drop "
            f"{added[0]!r} from the input, {FRESH}"
        )
    casts: list[tuple[str, pa.DataType]] = []
    checks: list[ColumnCheck] = []
    for col, t in theirs.items():
        src = mine[col]
        if _unnamed(_kind(src)) == _unnamed(_kind(t)):
            continue
        target = arrow_type(_kind(t))
        detail = f"--input: column {col!r} is {_name(src)} in the input but {_name(t)} in {where}"
        if _promotes(src, t):
            casts.append((col, target))
            checks.append(_exact(col, target, detail))
            continue
        _refuse_change(checked, col, src, t, target, detail)
    if not casts:
        return checked
    scan = check_values(checked.files, checked.fmt, checked.schema, checks, SCAN_BUDGET_S)
    note = scan.note(SCAN_BUDGET_S)
    return replace(checked, casts=tuple(casts), notes=checked.notes + ((note,) if note else ()))


def _exact(col: str, target: pa.DataType, detail: str) -> ColumnCheck:
    return ColumnCheck(
        col,
        first_inexact(target),
        detail + ", which Hudi converts it to (AvroSchemaEvolutionUtils.reconcileSchemaRequirements), but {where} "
        "holds {value}, which does not convert exactly (it would be rounded, overflow or not parse)",
        f"write {col!r} with values the table's type holds (round them, or fix the value), {FRESH}",
    )


def _refuse_change(checked: CheckedInput, col: str, src: Any, t: Any, target: pa.DataType, detail: str) -> None:
    """Raises the refusal of a type change Hudi would not promote: evolved by Hudi (refused here)
    or refused by Hudi too; names the first value that does not convert to the table's type."""
    ps, pt = _primitive(src), _primitive(t)
    avro_reads = ps == pt or (isinstance(ps, str) and pt in _AVRO_READS.get(ps, set()))  # Hudi takes it
    if avro_reads and "other" not in (_category(src), _category(t)) and "date" not in (_category(src), _category(t)):
        raise InputError(
            f"{detail}; Hudi's Spark writer would evolve the table's column to {_name(src)} "
            "(AvroSchemaCompatibility reads the old values as the wider type), which this lab's writer does not "
            f"do; fix: cast {col!r} to {_name(t)} in the input, {FRESH}"
        )
    if avro_reads:  # timestamp over bigint or date, date over int: Avro numbers under another logical type
        raise InputError(
            f"{detail}; Hudi's Avro check (AvroSchemaCompatibility) compares no logical types and would take it, "
            f"reading the table's {_name(t)} values as {_name(src)}, a change of meaning that is refused here; "
            f"fix: write {col!r} as {_name(t)}, {FRESH}"
        )
    first = ""
    if not pa.types.is_nested(target):
        # the first value that does not convert to the table's type; else (each does: the type alone
        # is refused) the first value, an example of what Hudi refuses
        bad, label = _first_bad(checked, _exact(col, target, "")), f"the first value that is not a {_name(t)}"
        if bad is None:
            bad, label = _first_bad(checked, ColumnCheck(col, first_valid, "", "")), "the first value"
        first = f"; {label}: {bad.value} in {bad.where}" if bad else ""
    raise InputError(
        f"{detail}, and Hudi refuses the change (AvroSchemaUtils.checkValidEvolution: "
        f"SchemaBackwardsCompatibilityException, the table's {_name(t)} values cannot be read as "
        f"{_name(src)}){first}; fix: write {col!r} as {_name(t)} (e.g. clean or cast the column), {FRESH}"
    )


def _first_bad(checked: CheckedInput, check: ColumnCheck) -> BadValue | None:
    try:
        check_values(checked.files, checked.fmt, checked.schema, [check], SCAN_BUDGET_S)
    except BadValue as bad:
        return bad
    return None
