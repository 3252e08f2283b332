"""The bucket index: which bucket (file group within a partition) a record key belongs to.

Source: Apache Hudi 0.11 - 1.0, ``hudi-client-common/.../index/bucket/BucketIdentifier.java``,
``getBucketId(HoodieKey, indexKeyFields, numBuckets)`` and ``getBucketId(List<String>, int)``::

    hashKeyFields = recordKey contains ":" ? <values of the index key fields> : [recordKey]
    bucket        = (hashKeyFields.hashCode() & Integer.MAX_VALUE) % numBuckets

``List.hashCode()`` is ``31 * 1 + String.hashCode()`` for a one-element list, and
``String.hashCode()`` is ``s[0]*31^(n-1) + ... + s[n-1]`` over the UTF-16 code units, in 32-bit
two's-complement arithmetic. The record key here is one field (no ``field:value`` pairs), so the
hash keys are ``[recordKey]``, as Hudi's for a simple key generator.

This module is the ONE definition of the rule: the generator and Spark's :func:`bucket_expr`
(the data plane) and the writer's file groups all use it. It lives in ``runtime.data``, the
lowest package that needs it (``runtime.hudi`` sits above ``runtime.data`` in the layers, so the
data plane could not import it from there); :mod:`runtime.hudi.bucket` re-exports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

_MASK32 = 0xFFFFFFFF
INT_MAX = 0x7FFFFFFF  # Java's Integer.MAX_VALUE
LIST_HASH_SEED = 31  # List.hashCode of one element e: 31 * 1 + e.hashCode()


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` as an unsigned 32-bit value (over UTF-16 code units)."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK32
    return h


def bucket_of(key: str, num_buckets: int) -> int:
    """Hudi's ``BucketIdentifier.getBucketId([key], numBuckets)``."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")
    return (((LIST_HASH_SEED + java_string_hash(key)) & _MASK32) & INT_MAX) % num_buckets


def bucket_ids(keys: Sequence[str], num_buckets: int) -> npt.NDArray[np.int32]:
    """:func:`bucket_of` of many keys at once (int32), vectorised over the UTF-16 code units of
    keys in the Basic Multilingual Plane (one code point is one code unit there); other keys take
    the scalar path."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")
    if not keys:
        return np.zeros(0, dtype=np.int32)
    arr = np.array(keys, dtype=np.str_)
    width = arr.dtype.itemsize // 4
    codes = arr.view(np.uint32).reshape(len(keys), max(width, 1)).astype(np.uint64)
    lens = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
    h = np.zeros(len(keys), dtype=np.uint64)
    for j in range(width):
        step = (h * np.uint64(31) + codes[:, j]) & np.uint64(_MASK32)
        h = np.where(j < lens, step, h)
    out = (((h + np.uint64(LIST_HASH_SEED)) & np.uint64(_MASK32) & np.uint64(INT_MAX)) % np.uint64(num_buckets)).astype(
        np.int32
    )
    for i in np.flatnonzero((codes > 0xFFFF).any(axis=1)).tolist():  # surrogate pairs in UTF-16
        out[i] = bucket_of(keys[i], num_buckets)
    return out


def bucket_expr(key_col: str, num_buckets: int) -> Column:
    """The same rule as a Spark SQL expression: the key is cast to string (Spark casts an int to
    4 raw bytes otherwise), encoded as UTF-16BE, and hashed one 16-bit code unit at a time."""
    from pyspark.sql import functions as F

    if num_buckets < 1:
        raise ValueError(f"num_buckets must be at least 1, got {num_buckets}")
    units = f"hex(encode(CAST(`{key_col}` AS STRING), 'UTF-16BE'))"
    string_hash = (
        f"aggregate(filter(sequence(0, greatest(length({units}) div 4, 1) - 1), i -> i < length({units}) div 4), "
        f"CAST(0 AS BIGINT), (acc, i) -> (acc * 31 + CAST(conv(substr({units}, i * 4 + 1, 4), 16, 10) AS BIGINT))"
        f" % 4294967296)"
    )
    return F.expr(f"((({string_hash} + {LIST_HASH_SEED}) % 4294967296) & {INT_MAX}) % {num_buckets}")
