"""Hudi's log format: the log files of a merge-on-read file group, block by block.

Sources (apache/hudi 0.14/0.15, table version 6; the blocks written here are read back by the
official reader, ``hudi`` 0.5.0, and a rollback block has the size of a Hudi-written one):

* ``HoodieLogFormat`` / ``HoodieLogFormatWriter.appendBlocks``: a log file is a sequence of blocks,
  each ``MAGIC "#HUDI#"``, the block length (long: every byte after it, the reverse pointer
  included), the log format version (int, 1), the block type (int), the header, the content length
  (long), the content, the footer, and the reverse pointer (long: the block's size less its last 8
  bytes). Integers are big-endian (``DataOutputStream``).
* ``HoodieLogBlock.getLogMetadataBytes``: a header or footer is a count (int), then per entry the
  ``HeaderMetadataType`` ordinal (int), the value's length (int) and its UTF-8 bytes. Flink writes
  no footer entries (a count of 0).
* ``HoodieLogBlockType`` ordinals: COMMAND_BLOCK 0, DELETE_BLOCK 1, CORRUPT_BLOCK 2,
  AVRO_DATA_BLOCK 3, HFILE_DATA_BLOCK 4, PARQUET_DATA_BLOCK 5, CDC_DATA_BLOCK 6 (Hudi 1.x
  ``HoodieLogBlock.HoodieLogBlockType``: the ordinal is what is stored); ``HeaderMetadataType``:
  INSTANT_TIME 0, TARGET_INSTANT_TIME 1, SCHEMA 2,
  COMMAND_BLOCK_TYPE 3; ``HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK`` is ordinal 0, written as "0".
* ``HoodieAvroDataBlock.serializeRecords``: the content is the block version (int, 3), the record
  count (int), then per record its length (int) and its Avro binary encoding
  (``BinaryEncoder``, no container) with the header's SCHEMA as writer schema. The records carry
  the five meta fields first, each ``["null", "string"]`` (``HoodieAvroUtils.addMetadataFields``);
  in log records ``_hoodie_file_name`` holds the file id (``HoodieAppendHandle.populateMetadataFields``).
* ``HoodieParquetDataBlock.serializeRecords``: a parquet data block's content is a whole parquet
  file (``PAR1`` ... ``PAR1``), its records' count in the footer (what ``hoodie.logfile.data.block.format
  = parquet`` writes; hudi-rs reads it as ``BlockType::ParquetData``).
* ``FSUtils.makeLogFileName``: ``.<fileId>_<baseCommitTime>.log.<version>_<writeToken>``: in table
  version 6 the middle instant is the file slice's base instant, not the delta commit's.

The Avro records are encoded a column at a time by :mod:`runtime.hudi.formats.avro_encoding` (the bytes
fastavro's ``schemaless_writer`` writes per record) and decoded by fastavro; the framing above is
this module's.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.avro_encoding import (
    AvroDecodeError,
    byte_lengths,
    decode_records,
    fixed_width_values,
    join_rows,
    record_fields,
)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
AVRO_BLOCK_VERSION = 3

COMMAND_BLOCK, DELETE_BLOCK, CORRUPT_BLOCK, AVRO_DATA_BLOCK = 0, 1, 2, 3
HFILE_DATA_BLOCK, PARQUET_DATA_BLOCK, CDC_DATA_BLOCK = 4, 5, 6
INSTANT_TIME, TARGET_INSTANT_TIME, SCHEMA, COMMAND_BLOCK_TYPE = 0, 1, 2, 3
ROLLBACK_BLOCK = "0"

LOG_EXTENSION = "log"
_LOG_FILE = re.compile(r"^\.(?P<file_id>[^_]+)_(?P<instant>[^._]+)\.log\.(?P<version>\d+)_(?P<token>.+)$")

META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)


class LogFormatError(ValueError):
    """Bytes that are not a Hudi log block (the message says where and what was found)."""


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    base_instant: str  # table version 6: the file slice's base instant; from 8: the writing instant
    version: int
    write_token: str

    def __str__(self) -> str:
        return f".{self.file_id}_{self.base_instant}.{LOG_EXTENSION}.{self.version}_{self.write_token}"

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        m = _LOG_FILE.match(name)
        return cls(m["file_id"], m["instant"], int(m["version"]), m["token"]) if m else None


@dataclass(frozen=True)
class LogBlock:
    block_type: int
    header: dict[int, str]
    content: bytes
    footer: dict[int, str]
    offset: int = 0  # the byte of the log file the block starts at

    @property
    def instant(self) -> str:
        return self.header.get(INSTANT_TIME, "")


def _metadata_bytes(entries: dict[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode()
        out.append(struct.pack(">ii", key, len(raw)))
        out.append(raw)
    return b"".join(out)


def encode_block(block_type: int, header: dict[int, str], content: bytes = b"") -> bytes:
    """One block, framed as ``HoodieLogFormatWriter`` writes it (no footer entries)."""
    body = b"".join(
        (
            struct.pack(">ii", LOG_FORMAT_VERSION, block_type),
            _metadata_bytes(header),
            struct.pack(">q", len(content)),
            content,
            _metadata_bytes({}),
        )
    )
    # the block length counts what follows it, the reverse pointer included; the reverse pointer
    # is the block's size without itself
    return b"".join((MAGIC, struct.pack(">q", len(body) + 8), body, struct.pack(">q", len(MAGIC) + 8 + len(body))))


def record_schema(data_schema_json: str) -> JsonObject:
    """The log records' writer schema: the meta fields first, then the table's data fields."""
    data = json.loads(data_schema_json)
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    return {**data, "fields": meta + list(data["fields"])}


def avro_data_block(instant: str, schema: JsonObject, records: pa.Table) -> bytes:
    """An AVRO_DATA block of ``records`` (the meta columns included) written at ``instant``: the
    records encoded a column at a time (:mod:`runtime.hudi.formats.avro_encoding`), each after its length."""
    header = {INSTANT_TIME: instant, SCHEMA: json.dumps(schema, separators=(",", ":"))}
    return encode_block(AVRO_DATA_BLOCK, header, avro_block_content(schema, records))


def avro_block_content(schema: JsonObject, records: pa.Table) -> bytes:
    """``HoodieAvroDataBlock.serializeRecords``: the version, the count, then per record its
    length (a big-endian int) and its Avro binary encoding."""
    head = struct.pack(">ii", AVRO_BLOCK_VERSION, records.num_rows)
    if records.num_rows == 0:
        return head
    fields = record_fields(schema, records)
    lengths = np.zeros(records.num_rows, dtype=np.int64)
    for field in fields:
        lengths += byte_lengths(field)
    prefix = fixed_width_values(np.asarray(lengths, dtype=">i4").view(np.uint8).reshape(-1, 4))
    joined = join_rows([prefix, *fields])
    offsets = np.frombuffer(joined.buffers()[1], np.int64, len(joined) + 1, joined.offset * 8)
    records_bytes: bytes = joined.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
    return head + records_bytes


def rollback_block(rollback_instant: str, target_instant: str) -> bytes:
    """The command block a rollback appends to a file group it did not create (Hudi 0.14/0.15
    ``BaseRollbackHelper``): blocks of ``target_instant`` are to be ignored."""
    header = {INSTANT_TIME: rollback_instant, TARGET_INSTANT_TIME: target_instant, COMMAND_BLOCK_TYPE: ROLLBACK_BLOCK}
    return encode_block(COMMAND_BLOCK, header)


def _read_metadata(data: bytes, at: int) -> tuple[dict[int, str], int]:
    (count,) = struct.unpack_from(">i", data, at)
    at += 4
    entries = {}
    for _ in range(count):
        key, size = struct.unpack_from(">ii", data, at)
        at += 8
        entries[key] = data[at : at + size].decode()
        at += size
    return entries, at


def read_blocks(data: bytes, name: str = "log file") -> Iterator[LogBlock]:
    """The blocks of a log file; a block whose framing does not add up raises LogFormatError,
    naming the file and the byte the block starts at."""
    at = 0
    while at < len(data):
        try:
            block, end = _read_block(data, at, name)
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            if isinstance(exc, LogFormatError):
                raise
            raise LogFormatError(f"{name}: the block at byte {at} is corrupt ({type(exc).__name__}: {exc})") from None
        yield block
        at = end


def _read_block(data: bytes, at: int, name: str) -> tuple[LogBlock, int]:
    """The block at byte ``at`` and the byte after it."""
    if data[at : at + len(MAGIC)] != MAGIC:
        raise LogFormatError(f"{name}: no log block magic at byte {at}")
    (length,) = struct.unpack_from(">q", data, at + 6)
    end = at + 14 + length
    if end > len(data) or length < 0:
        raise LogFormatError(
            f"{name}: the block at byte {at} says {length} bytes follow, the file has {len(data) - at - 14}"
        )
    version, block_type = struct.unpack_from(">ii", data, at + 14)
    if version != LOG_FORMAT_VERSION:
        raise LogFormatError(f"{name}: log format version {version} at byte {at}; version 1 is read")
    header, pos = _read_metadata(data, at + 22)
    (content_len,) = struct.unpack_from(">q", data, pos)
    content = data[pos + 8 : pos + 8 + content_len]
    footer, pos = _read_metadata(data, pos + 8 + content_len)
    (reverse,) = struct.unpack_from(">q", data, pos)
    if pos + 8 != end or reverse != end - at - 8:
        raise LogFormatError(f"{name}: the block at byte {at} is corrupt (lengths do not add up)")
    return LogBlock(block_type, header, content, footer, at), end


def record_count(block: LogBlock) -> int:
    """The records an Avro or parquet data block holds (from its content's header or footer,
    nothing decoded)."""
    if block.block_type == PARQUET_DATA_BLOCK:
        try:
            return int(pq.read_metadata(io.BytesIO(block.content)).num_rows)
        except (pa.ArrowException, OSError) as exc:
            raise LogFormatError(f"a parquet data block without a readable footer: {exc}") from None
    if block.block_type != AVRO_DATA_BLOCK or len(block.content) < 8:
        raise LogFormatError(f"block type {block.block_type} is not an Avro data block with records")
    return int(struct.unpack_from(">i", block.content, 4)[0])


def decode_rows(block: LogBlock) -> int:
    """Decodes every record of an Avro or parquet data block (the framing can be intact while
    the records are not) and returns their count; raises LogFormatError when they do not decode."""
    if block.block_type == PARQUET_DATA_BLOCK:
        try:
            return int(pq.read_table(io.BytesIO(block.content)).num_rows)
        except (pa.ArrowException, OSError) as exc:
            raise LogFormatError(f"its parquet content does not decode ({type(exc).__name__}: {exc})") from None
    try:
        return len(avro_records(block))
    except LogFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - fastavro raises many types on damaged bytes
        raise LogFormatError(
            f"its records do not decode with its header's schema ({type(exc).__name__}: {exc})"
        ) from None


def avro_table(block: LogBlock, schema: pa.Schema) -> pa.Table:
    """The records of an AVRO_DATA block as a table of ``schema`` (the Arrow types of its header's
    schema): decoded a column at a time (:func:`runtime.hudi.formats.avro_encoding.decode_records`), or
    record by record by fastavro when a field is of a type left to it."""
    count = _avro_record_count(block)
    starts, at = _record_starts(block.content, count)
    ends = np.append(starts[1:] - 4, at).astype(np.int64) if count else starts
    if at > len(block.content) or bool((ends < starts).any()):
        raise LogFormatError(f"its {count} records' lengths run past its {len(block.content)} bytes")
    try:
        decoded = decode_records(json.loads(block.header[SCHEMA]), block.content, starts, ends)
    except AvroDecodeError as exc:
        raise LogFormatError(f"its records do not decode with its header's schema ({exc})") from None
    if decoded is None:
        return pa.Table.from_pylist(avro_records(block), schema=schema)
    return decoded if decoded.schema.equals(schema) else decoded.cast(schema)


def _record_starts(content: bytes, count: int) -> tuple[npt.NDArray[np.int64], int]:
    """Where each record's encoding starts (after its length), and the byte after the last: each
    record's place follows from the lengths before it (a list, then one array: a numpy item
    assignment per record costs as much again)."""
    starts, at, read_length = [0] * count, 8, _BIG_ENDIAN_INT.unpack_from
    for i in range(count):
        starts[i] = at + 4
        (length,) = read_length(content, at)
        at += 4 + length
    return np.array(starts, dtype=np.int64), at


_BIG_ENDIAN_INT = struct.Struct(">i")


def _avro_record_count(block: LogBlock) -> int:
    if block.block_type != AVRO_DATA_BLOCK:
        raise LogFormatError(f"block type {block.block_type} is not an Avro data block")
    version, count = struct.unpack_from(">ii", block.content, 0)
    if version != AVRO_BLOCK_VERSION:
        raise LogFormatError(f"Avro data block version {version}; version {AVRO_BLOCK_VERSION} is read")
    return int(count)


def avro_records(block: LogBlock) -> list[JsonObject]:
    """The records of an AVRO_DATA block, decoded with the schema of its header."""
    count = _avro_record_count(block)
    parsed = fastavro.parse_schema(json.loads(block.header[SCHEMA]))
    buf = io.BytesIO(block.content)
    at, out = 8, list[JsonObject]()
    for _ in range(count):
        (size,) = struct.unpack_from(">i", block.content, at)
        buf.seek(at + 4)
        record = fastavro.schemaless_reader(buf, parsed, None)
        if not isinstance(record, dict):
            raise LogFormatError(f"a record of the block decodes to {type(record).__name__}, not a record")
        out.append(record)
        at += 4 + size
    return out
