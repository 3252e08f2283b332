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
first page unless ``encodedSize + dictionaryByteSize < rawSize`` (``isCompressionSatisfying``).
A column whose values are all distinct never passes (its dictionary alone is as large as its
plain values), and three columns of a base file are distinct by construction: the sequence number,
the record key and the record key field (one row per key in a file group). They are written PLAIN,
as parquet-mr writes them. pyarrow, which lacks the first-page check, would keep their
dictionaries (20 % more write time on a 31,000-row file). Every other column stays
dictionary-encoded, as pyarrow does: deciding per column as parquet-mr does needs a distinct
count per column per file, which cost more here than the encoding saved, so a data column of
unique values (a payload) is dictionary-encoded here and PLAIN in Hudi's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.core.config import PARQUET_CODECS as CODECS

HUDI_DEFAULT_CODEC = "gzip"  # HoodieStorageConfig.PARQUET_COMPRESSION_CODEC_NAME


@dataclass(frozen=True)
class ParquetWriteOptions:
    """The writer's ``hoodie.parquet.compression.codec``."""

    compression: str = "snappy"

    def __post_init__(self) -> None:
        if self.compression not in CODECS:
            raise ValueError(f"unknown parquet codec {self.compression!r}; choose one of {', '.join(CODECS)}")

    def write_table_args(self, columns: list[str], distinct: tuple[str, ...] = ()) -> dict[str, Any]:
        """``pyarrow.parquet.write_table`` keyword arguments for a file of ``columns``, of which
        ``distinct`` hold a different value in every row (written PLAIN)."""
        return {
            "compression": "none" if self.compression == "uncompressed" else self.compression,
            "use_dictionary": [c for c in columns if c not in distinct],
        }
