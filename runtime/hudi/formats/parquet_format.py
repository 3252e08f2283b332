"""How a base file is encoded: the compression codec (``--parquet-compression``).

Hudi 0.11 - 1.x ``hudi-common/.../config/HoodieStorageConfig``: ``hoodie.parquet.compression.codec``
defaults to ``gzip``, and base files are written by parquet-mr (``HoodieAvroParquetWriter``);
the reference tables under the design notes' fixtures carry ``parquet-mr version 1.12.3`` and
GZIP column chunks. The Flink writer sets no codec of its own (``FlinkWriteClients`` builds the
storage config from the parquet sizes only), so gzip is what it writes, and the default here.
parquet-mr compresses GZIP pages through Hadoop's ``GzipCodec`` at zlib's default level
(``ZlibCompressor.CompressionLevel.DEFAULT_COMPRESSION``, level 6); pyarrow's own gzip default is
level 9, so the writer asks for 6.

``--parquet-compression snappy`` (a deliberate difference, named: Spark's and pyarrow's own
default codec) costs about a fifth of gzip's encode time here (a 31,000-row base file: about 7 ms
against 33 ms of CPU) and writes about twice the bytes; ``zstd`` and ``uncompressed`` are offered
too. Every codec is read by the official reader.

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

The footer's key-value metadata (``--bloom-filter``): Hudi 0.14 writes base files with parquet-avro's
``AvroWriteSupport`` wrapped by ``HoodieAvroWriteSupport``, so every one carries ``parquet.avro.schema``
and ``writer.model.name`` = ``avro`` (``AvroWriteSupport.init``) and, since the meta fields are
populated, the record keys' bloom filter and key range (:mod:`runtime.hudi.formats.bloom_filter`).
``parquet.avro.schema`` is the writer schema of Hudi's Flink writer: ``HoodieAvroUtils.addMetadataFields``
(each meta field ``["null","string"]`` with an empty doc and a null default) before the data columns as
hudi-flink's ``AvroSchemaConverter.convertToSchema`` writes them (a nullable column ``["null", type]``
with a null default; the record key, NOT NULL as Flink's primary key is, its bare type). The text is
Hudi's for string, number, boolean, bytes and date columns; the types inside other columns (timestamps,
decimals, nested) are written as :mod:`runtime.hudi.formats.avro_schema` maps them, which follows Spark's
converter. ``--bloom-filter none`` (a deliberate difference: Hudi 0.14 has no switch;
``hoodie.parquet.bloom.filter.enabled`` came in 0.15.0) leaves out the bloom filter and the key range.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.config import JobConfig
from runtime.core.job_options import BLOOM_FILTERS
from runtime.core.job_options import PARQUET_CODECS as CODECS
from runtime.core.json_doc import JsonObject
from runtime.hudi.formats import avro_schema
from runtime.hudi.formats.bloom_filter import FOOTER_KEYS as BLOOM_FOOTER_KEYS
from runtime.hudi.formats.bloom_filter import KeyFilter

RECORD_KEY_COLUMN = "_hoodie_record_key"
AVRO_SCHEMA_KEY = "parquet.avro.schema"  # AvroWriteSupport.AVRO_SCHEMA
WRITER_MODEL_KEY = "writer.model.name"  # ParquetWriter.OBJECT_MODEL_NAME_PROP
GZIP_LEVEL = 6  # zlib's default, which parquet-mr's GzipCodec compresses at (pyarrow's default: 9)
FOOTER_KEYS = frozenset((AVRO_SCHEMA_KEY, WRITER_MODEL_KEY, *BLOOM_FOOTER_KEYS))


@dataclass(frozen=True)
class ParquetWriteOptions:
    """The writer's ``hoodie.parquet.compression.codec`` (the dictionary is always on, as
    ``hoodie.parquet.dictionary.enabled`` has it by default) and ``--bloom-filter``."""

    compression: str = JobConfig.parquet_compression  # the option's default
    bloom_filter: str = JobConfig.bloom_filter

    @classmethod
    def of(cls, config: JobConfig) -> ParquetWriteOptions:
        return cls(config.parquet_compression, config.bloom_filter)

    def __post_init__(self) -> None:
        if self.compression not in CODECS:
            raise ValueError(f"unknown parquet codec {self.compression!r}; choose one of {', '.join(CODECS)}")
        if self.bloom_filter not in BLOOM_FILTERS:
            raise ValueError(f"unknown bloom filter {self.bloom_filter!r}; choose one of {', '.join(BLOOM_FILTERS)}")

    @staticmethod
    def without_footer(table: pa.Table) -> pa.Table:
        """``table`` without the footer keys its schema got from the base file it was read from,
        which pyarrow would otherwise write again (and copy into ``ARROW:schema``)."""
        kept = {k: v for k, v in (table.schema.metadata or {}).items() if k.decode() not in FOOTER_KEYS}
        return table if len(kept) == len(table.schema.metadata or {}) else table.replace_schema_metadata(kept or None)

    def footer(
        self,
        table: pa.Table,
        table_name: str,
        key_field: str,
        meta: tuple[str, ...],
        key_filter: KeyFilter | None = None,
    ) -> dict[str, str]:
        """The footer's key-value metadata Hudi writes for a base file holding ``table`` (its
        ``meta`` columns first, then the data columns); ``key_filter``: its keys' filter, when the
        writer has it already (:meth:`key_filter`)."""
        out: dict[str, str] = {}
        if self.bloom_filter != "none":
            out = (key_filter or KeyFilter.of(table.column(RECORD_KEY_COLUMN))).footer()
        out[AVRO_SCHEMA_KEY] = writer_schema_json(table.schema, table_name, key_field, meta)
        out[WRITER_MODEL_KEY] = "avro"
        return out

    def key_filter(self, table: pa.Table, prior: KeyFilter | None = None, kept: int = 0) -> KeyFilter | None:
        """The bloom filter and key range of a base file holding ``table``; ``prior`` is the
        filter of the first ``kept`` keys, which ``table`` starts with (None: hash them all).
        None when the footer has no filter."""
        if self.bloom_filter == "none":
            return None
        keys = table.column(RECORD_KEY_COLUMN)
        if prior is None or prior.count != kept:
            return KeyFilter.of(keys)
        return prior.extended(keys.slice(kept))

    def merged_key_filter(self, merged: pa.Table, base: pa.Table | None, prior: KeyFilter | None) -> KeyFilter | None:
        """The filter of a merge's output ``merged``: ``prior`` (the filter of ``base``'s keys)
        extended by the keys the merge appended when it kept ``base``'s keys in their order (no
        delete), else worked out anew."""
        kept = 0
        if prior is not None and base is not None and merged.num_rows >= base.num_rows:
            keys = base.column(RECORD_KEY_COLUMN)
            same = pc.all(pc.equal(merged.column(RECORD_KEY_COLUMN).slice(0, base.num_rows), keys)).as_py()
            kept = base.num_rows if same or base.num_rows == 0 else 0
        return self.key_filter(merged, prior if base is not None else None, kept)

    def write_table_args(self, table: pa.Table, distinct: tuple[str, ...] = ()) -> JsonObject:
        """``pyarrow.parquet.write_table`` keyword arguments for ``table``, of whose columns
        ``distinct`` hold a different value in every row."""
        keep = [c for c in table.column_names if c not in distinct and _dictionary_pays(table.column(c))]
        return {**self.codec_args(), "use_dictionary": keep}

    def codec_args(self) -> JsonObject:
        """The codec's ``pyarrow.parquet.write_table`` keyword arguments (gzip at :data:`GZIP_LEVEL`)."""
        codec = "none" if self.compression == "uncompressed" else self.compression
        return {"compression": codec, "compression_level": GZIP_LEVEL} if codec == "gzip" else {"compression": codec}


def writer_schema_json(schema: pa.Schema, table_name: str, key_field: str, meta: tuple[str, ...]) -> str:
    """``parquet.avro.schema`` of Hudi's Flink writer for a base file of ``schema`` (see the module docstring)."""
    data = avro_schema.avro_schema(schema, table_name, skip=meta)
    fields: list[dict[str, object]] = [
        {"name": name, "type": ["null", "string"], "doc": "", "default": None} for name in meta if name in schema.names
    ]
    for field in data["fields"]:
        avro_type = field["type"][0]  # avro_schema's nullable union is [type, "null"]
        if field["name"] == key_field:
            fields.append({"name": field["name"], "type": avro_type})
        else:
            fields.append({"name": field["name"], "type": ["null", avro_type], "default": None})
    return json.dumps({**data, "fields": fields}, separators=(",", ":"))


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
