"""Whether a record's values in the table are the values it was written with.

The verifier (:func:`runtime.lab.verify.compare`) matches the expected rows (the input, one per
record identity) with the rows the official reader returned, each with an ``_id`` column, and asks
this module which identities hold other values in the data columns. A column is compared by its
values, never by how Arrow or pandas lays them out (a reader returns a chunk per file, and pandas
renders a struct's int child as ``1.0`` in a chunk with a null row and as ``1`` in one without):

* a flat column (numbers, strings, binary, decimals, dates and times) of one type on both sides:
  Arrow's equality, two nulls equal, a float's null and NaN equal (pandas writes a missing float
  as NaN, Spark and Arrow as null), a float by its bits otherwise (-0.0 is not 0.0);
* a flat column the table stores as another type (an input's uint8 read back as int32, a
  dictionary as a string, float32 as double, another decimal scale): the input's values cast to
  the table's type, as the writer converts them (Hudi's ``HoodieAvroUtils.rewriteRecordWithNewSchema``
  into the table's schema), then as above; a value the cast refuses (a fraction into an int) is
  compared as a Python value;
* a nested column (struct, list, map) or one Arrow cannot compare (an interval): value by value
  as Python values, walked with the column's type. A struct field one side lacks equals a null
  (Hudi's schema evolution adds a field as null); a map's entries in any order (Avro's maps,
  which Hudi's writer goes through, are unordered); numbers by value (1 is 1.0), with the float
  rules above.

Where the expected rows hold an identity twice (not an expected state's shape), the old text
comparison (pandas' ``astype(str)``) decides, as before.
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["differing", "holds_float"]

_FLOAT_BITS = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}
_Column: TypeAlias = pa.ChunkedArray | pa.Array
_Rows: TypeAlias = "np.ndarray[Any, np.dtype[np.bool_]]"  # one bool per row: differs


def differing(actual: pa.Table, expected: pa.Table, columns: list[str]) -> list[str]:
    """The identities (``_id``) both tables hold whose values in ``columns`` differ, in identity
    order. ``actual`` holds one row per identity (the caller picks it among duplicates)."""
    e_ids = expected.column("_id")
    if pc.count_distinct(e_ids, mode="all").as_py() != expected.num_rows:
        return _differing_as_text(actual, expected.combine_chunks(), columns)
    at = pc.index_in(e_ids, value_set=actual.column("_id"))  # each expected identity's actual row
    both = pc.is_valid(at)
    e, a = expected.filter(both), actual.take(pc.drop_null(at))
    differs = np.zeros(e.num_rows, dtype=bool)
    for c in columns:
        differs |= _column_differs(a.column(c), e.column(c))
    if not differs.any():
        return []
    ids = e.column("_id").filter(pa.array(differs))
    return [str(v) for v in ids.take(pc.sort_indices(ids)).to_pylist()]


def _column_differs(x: _Column, y: _Column) -> _Rows:
    """Row by row, whether the table's values ``x`` differ from the input's ``y`` (aligned)."""
    if x.type != y.type and _flat(x.type) and _flat(y.type):
        try:
            y = pc.cast(y, x.type)  # the input's value as the table stores it
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _values_differ(x, y)
    if x.type == y.type and _flat(x.type):
        return _flat_differs(x, y)
    if x.type != y.type:
        try:  # a struct, list or map of other widths: the same shape in the table's types
            y = pc.cast(y, x.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return _values_differ(x, y)
    if x.type == y.type and not holds_float(x.type) and _one_chunk(x).equals(_one_chunk(y)):
        return np.zeros(len(x), dtype=bool)  # the common case, in C (no float: Arrow's -0.0 is 0.0)
    return _values_differ(x, y)


def holds_float(t: pa.DataType) -> bool:
    if pa.types.is_floating(t):
        return True
    if pa.types.is_dictionary(t):
        return holds_float(t.value_type)
    if pa.types.is_map(t):
        return holds_float(t.key_type) or holds_float(t.item_type)
    return any(holds_float(t.field(i).type) for i in range(t.num_fields))


def _flat(t: pa.DataType) -> bool:
    """A type whose values Arrow compares for equality (not nested, not a dictionary, not an
    interval)."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_decimal(t)
        or (pa.types.is_temporal(t) and not pa.types.is_interval(t))
    )


def _flat_differs(x: _Column, y: _Column) -> _Rows:
    if pa.types.is_floating(x.type):  # by their bits: -0.0 is not 0.0
        bits = _FLOAT_BITS[x.type.bit_width]
        same = pc.fill_null(pc.equal(_one_chunk(x).view(bits), _one_chunk(y).view(bits)), False)
    elif not x.null_count and not y.null_count:  # no null (and no NaN): equal is the answer
        differs: _Rows = ~pc.equal(x, y).to_numpy(zero_copy_only=False)
        return differs
    else:
        same = pc.fill_null(pc.equal(x, y), False)
    both_missing = pc.and_(pc.is_null(x, nan_is_null=True), pc.is_null(y, nan_is_null=True))
    out: _Rows = ~pc.or_(same, both_missing).to_numpy(zero_copy_only=False)
    return out


def _one_chunk(column: _Column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _values_differ(x: _Column, y: _Column) -> _Rows:
    xs, ys = x.to_pylist(), y.to_pylist()
    tx, ty = x.type, y.type
    return np.fromiter((_value(p, tx) != _value(q, ty) for p, q in zip(xs, ys, strict=True)), bool, len(xs))


def _value(v: Any, t: pa.DataType) -> Any:
    """A Python value from a column of type ``t`` in a form that compares by value alone."""
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        return _value(v, t.value_type)
    if pa.types.is_struct(t):
        return _Struct({f.name: _value(v.get(f.name), f.type) for f in t})
    if pa.types.is_map(t):
        entries = [(_value(k, t.key_type), _value(x, t.item_type)) for k, x in v]
        return tuple(sorted(entries, key=repr))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return tuple(_value(x, t.value_type) for x in v)
    if isinstance(v, float):
        if math.isnan(v):
            return None  # NaN and null are one missing float, as in the flat comparison
        if v == 0.0:
            return _Zero(math.copysign(1.0, v))
    elif isinstance(v, int) and v == 0 and not isinstance(v, bool):
        return _Zero(1.0)
    return v


class _Zero(float):
    """Zero with its sign: -0.0 is not 0.0 (an int's 0 is +0.0)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Zero) and math.copysign(1.0, self) == math.copysign(1.0, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = float.__hash__


class _Struct(dict[str, Any]):
    """A struct's fields by name; a field one side lacks equals a null on the other."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Struct):
            return False
        return all(self.get(k) == other.get(k) for k in self.keys() | other.keys())

    def __ne__(self, other: object) -> bool:
        return not self == other


def _differing_as_text(a: pa.Table, e: pa.Table, columns: list[str]) -> list[str]:
    """The identities both tables hold whose values in ``columns`` differ as text (pandas'
    ``astype(str)``), in identity order: for expected rows that repeat an identity."""
    ap, ep = a.to_pandas().set_index("_id"), e.to_pandas().set_index("_id")
    common = ep.index.intersection(ap.index).sort_values()
    diff = (ap.loc[common, columns].astype(str) != ep.loc[common, columns].astype(str)).any(axis=1)
    return [str(k) for k in diff[diff].index]
