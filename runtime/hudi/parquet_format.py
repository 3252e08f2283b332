"""How a base file is encoded: the compression codec (``--parquet-compression``).

Hudi 0.11 - 1.x ``hudi-common/.../config/HoodieStorageConfig``: ``hoodie.parquet.compression.codec``
defaults to ``gzip``, and base files are written by parquet-mr (``HoodieAvroParquetWriter``);
the reference tables under the design notes' fixtures carry ``parquet-mr version 1.12.3`` and
GZIP column chunks.

Deliberate difference, by default: this writer compresses with ``snappy``, the codec of Spark's
and pyarrow's own writers, because gzip costs about 3.5 times snappy's write time here (a
31,000-row base file: 47 ms against 13 ms) and the data-plane benchmark compares against Spark's
snappy write. ``--parquet-compression gzip`` writes what Hudi writes; every codec is read by the
official reader.

Dictionary encoding (``hoodie.parquet.dictionary.enabled``, true): parquet-mr 1.12's
``DictionaryValuesWriter`` starts every column dictionary-encoded and falls back to PLAIN at the
first page unless ``encodedSize + dictionaryByteSize < rawSize`` (``isCompressionSatisfying``;
also when the dictionary outgrows ``parquet.dictionary.page.size``, 1 MiB: ``shouldFallBack``).
pyarrow lacks that check and would keep a dictionary of unique values. So the writer tells pyarrow
which columns to dictionary-encode:

- the sequence number, the record key and the record key field are distinct in every row of a
  file group by construction: never (parquet-mr's check cannot pass for them);
- every other column by the same inequality, computed as parquet-mr computes it (a binary value
  is 4 bytes of length and its bytes, a fixed-width one its width; the ids bit-packed at the
  dictionary's width) over the column's first 1,024 values instead of its whole first page (a
  distinct count over a page per column per file cost more here than the encoding saved). A
  column whose first 1,024 values repeat but whose page would not pay keeps a dictionary here
  that parquet-mr would drop; readers decode both the same.

Booleans have no dictionary in parquet-mr, nor here. Nested columns are left PLAIN here (parquet-mr
decides each of their leaves like a column).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.config import PARQUET_CODECS as CODECS
from runtime.core.config import JobConfig


@dataclass(frozen=True)
class ParquetWriteOptions:
    """The writer's ``hoodie.parquet.compression.codec`` (the dictionary is always on, as
    ``hoodie.parquet.dictionary.enabled`` has it by default)."""

    compression: str = JobConfig.parquet_compression  # the option's default

    def __post_init__(self) -> None:
        if self.compression not in CODECS:
            raise ValueError(f"unknown parquet codec {self.compression!r}; choose one of {', '.join(CODECS)}")

    def write_table_args(self, table: pa.Table, distinct: tuple[str, ...] = ()) -> dict[str, Any]:
        """``pyarrow.parquet.write_table`` keyword arguments for ``table``, of whose columns
        ``distinct`` hold a different value in every row."""
        keep = [c for c in table.column_names if c not in distinct and _dictionary_pays(table.column(c))]
        codec = "none" if self.compression == "uncompressed" else self.compression
        return {"compression": codec, "use_dictionary": keep}


SAMPLE_VALUES = 1024


def _dictionary_pays(column: pa.ChunkedArray) -> bool:
    """parquet-mr's ``isCompressionSatisfying`` over the column's first values."""
    typ = column.type
    binary = pa.types.is_string(typ) or pa.types.is_binary(typ)
    if not binary and (not pa.types.is_primitive(typ) or pa.types.is_boolean(typ)):
        return False
    sample = column.slice(0, SAMPLE_VALUES).combine_chunks()
    if sample.null_count:
        sample = sample.drop_null()
    if len(sample) < 2:
        return False  # one value: its dictionary is as large as the value itself
    dictionary = pc.unique(sample)
    bit_width = max(1, (len(dictionary) - 1).bit_length())
    encoded = math.ceil(len(sample) * bit_width / 8) + 1  # + the bit width byte
    return encoded + _plain_bytes(dictionary) < _plain_bytes(sample)


def _plain_bytes(arr: pa.Array) -> int:
    """The PLAIN size of ``arr`` (no nulls) as parquet-mr counts it."""
    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)
        return int(offsets[arr.offset + len(arr)] - offsets[arr.offset]) + 4 * len(arr)
    return max(1, int(arr.type.bit_width) // 8) * len(arr)
