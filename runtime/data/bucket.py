"""The bucket index: which bucket (file group within a partition) a record key belongs to.

Source: Apache Hudi 0.11 - 1.0, ``hudi-client-common/.../index/bucket/BucketIdentifier.java``,
``getBucketId(HoodieKey, indexKeyFields, numBuckets)`` and ``getBucketId(List<String>, int)``::

    hashKeyFields = recordKey contains ":" ? <values of the index key fields> : [recordKey]
    bucket        = (hashKeyFields.hashCode() & Integer.MAX_VALUE) % numBuckets

``List.hashCode()`` is ``31 * 1 + String.hashCode()`` for a one-element list, and
``String.hashCode()`` is ``s[0]*31^(n-1) + ... + s[n-1]`` over the UTF-16 code units, in 32-bit
two's-complement arithmetic. The record key here is one field (no ``field:value`` pairs), so the
hash keys are ``[recordKey]``, as Hudi's for a simple key generator.

This module is the ONE definition of the rule: the generator, Spark's :func:`bucket_column` (the
data plane: this module's numpy code in a pandas UDF) and the writer's file groups all use it. It
lives in ``runtime.data``, the lowest package that needs it (``runtime.hudi`` sits above
``runtime.data`` in the layers, so the data plane could not import it from there);
:mod:`runtime.hudi.table.bucket` re-exports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import mul
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

_MASK32 = 0xFFFFFFFF
INT_MAX = 0x7FFFFFFF  # Java's Integer.MAX_VALUE
LIST_HASH_SEED = 31  # List.hashCode of one element e: 31 * 1 + e.hashCode()


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` as an unsigned 32-bit value (over UTF-16 code units)."""
    try:
        ascii_units = s.encode("ascii")  # one byte, one code unit
    except UnicodeEncodeError:
        units = s.encode("utf-16-be")
        h = 0
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK32
        return h
    dot: int = sum(map(mul, ascii_units, _powers_of_31(len(ascii_units))))
    return dot & _MASK32


_POWER_TUPLES: dict[int, tuple[int, ...]] = {}


def _powers_of_31(width: int) -> tuple[int, ...]:
    """31**(width-1-j) mod 2**32 for j = 0..width-1: the hash is their dot product with the units."""
    p = _POWER_TUPLES.get(width)
    if p is None:
        p = _POWER_TUPLES[width] = tuple(pow(31, width - 1 - j, 1 << 32) for j in range(width))
    return p


def bucket_of(key: str, num_buckets: int) -> int:
    """Hudi's ``BucketIdentifier.getBucketId([key], numBuckets)``."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")
    return (((LIST_HASH_SEED + java_string_hash(key)) & _MASK32) & INT_MAX) % num_buckets


def bucket_ids(keys: Sequence[str], num_buckets: int) -> npt.NDArray[np.int32]:
    """:func:`bucket_of` of many keys at once (int32)."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")
    if not keys:
        return np.zeros(0, dtype=np.int32)
    return bucket_ids_of_array(pa.array(keys, pa.string()), num_buckets)


# Below this many keys the per-key loop is cheaper than numpy's per-call cost.
_SCALAR_HASH_BELOW = 12
_POWERS: dict[int, npt.NDArray[np.uint32]] = {}


def _powers(width: int) -> npt.NDArray[np.uint32]:
    p = _POWERS.get(width)
    if p is None:
        p = _POWERS[width] = np.array(_powers_of_31(width), dtype=np.uint32)
    return p


def java_string_hashes(keys: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.uint32]:
    """:func:`java_string_hash` of every string of an Arrow string array (no nulls), as uint32.

    ``s[0]*31^(n-1) + ... + s[n-1]`` mod 2**32 is a dot product with the powers of 31 mod 2**32,
    so the keys are right-aligned in a matrix (leading zeros add nothing) and hashed in one
    product. Vectorised for ASCII, where a byte is a UTF-16 code unit; other keys take the loop."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())
    n = len(arr)
    if arr.null_count:
        raise ValueError(f"{arr.null_count} record key(s) are null: a record key cannot be null")
    if n < _SCALAR_HASH_BELOW:
        return np.array([java_string_hash(k) for k in arr.to_pylist()], dtype=np.uint32)
    width_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=width_type)[arr.offset : arr.offset + n + 1].astype(np.int64)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(1, dtype=np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    width = int(lengths.max()) if n else 0
    if width == 0:
        return np.zeros(n, dtype=np.uint32)
    if int(lengths.min()) == width:  # every key as long (generated keys are): the bytes as a matrix
        chars = data[offsets[0] : offsets[-1]].reshape(n, width)
    else:
        pos = ends[:, None] - width + np.arange(width)  # right-aligned: the last column is the last char
        inside = pos >= starts[:, None]
        chars = np.where(inside, data[np.clip(pos, 0, len(data) - 1)], 0)
    # uint32 arithmetic wraps modulo 2**32, as Java's int does: the product is the hash
    h = chars.astype(np.uint32) @ _powers(width)
    if bool((data[offsets[0] : offsets[-1]] >= 0x80).any()):  # not ASCII: UTF-8 bytes are not code units
        wide = np.flatnonzero((chars >= 0x80).any(axis=1))
        h[wide] = [java_string_hash(k) for k in arr.take(pa.array(wide)).to_pylist()]
    hashes: npt.NDArray[np.uint32] = h
    return hashes


def bucket_ids_of_array(keys: pa.Array | pa.ChunkedArray, num_buckets: int) -> npt.NDArray[np.int32]:
    """:func:`bucket_of` of every key of an Arrow string array (int32)."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")
    h = java_string_hashes(keys).astype(np.uint64)
    ids: npt.NDArray[np.int32] = (
        ((h + np.uint64(LIST_HASH_SEED)) & np.uint64(_MASK32) & np.uint64(INT_MAX)) % np.uint64(num_buckets)
    ).astype(np.int32)
    return ids


def bucket_column(key_col: str, num_buckets: int) -> Column:
    """The bucket of ``key_col`` as a Spark column (int), computed by this module's own numpy
    code (:func:`bucket_ids_of_array`) in Arrow batches: a scalar pandas UDF, so Spark and the
    writers apply one implementation of the rule. The key is cast to string first, as Hudi's
    record key is a string."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import pandas_udf

    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")

    def buckets(keys: pd.Series) -> pd.Series:
        return pd.Series(bucket_ids_of_array(pa.array(keys, pa.string()), num_buckets))

    # pandas_udf reads the hints to pick a scalar UDF; under postponed evaluation they are
    # strings naming this function's local ``pd``, so give it the types themselves
    buckets.__annotations__ = {"keys": pd.Series, "return": pd.Series}
    udf = pandas_udf(buckets, "int")  # type: ignore[call-overload]
    return udf(F.col(key_col).cast("string"))  # type: ignore[no-any-return]
