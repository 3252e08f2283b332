"""HFile, the file format of the metadata table's base files and of its log blocks' content: read
(every (key, value) cell in key order) and written (:func:`write_hfile`, as Hudi 1.x writes it).

Sources (Apache Hudi 1.0/1.1 ``hudi-io``, ``org.apache.hudi.io.hfile``, which reads the HBase
HFile v3 files Hudi 0.x wrote and writes the same format itself; checked on the metadata tables of
the hudi-rs test tables):

* ``HFileReaderImpl.readTrailer`` / ``HFileTrailer.deserialize``: the last 4096 bytes
  (``TRAILER_SIZE``) are the trailer: the magic ``TRABLK"$``, a length-delimited protobuf
  ``TrailerProto`` (``load_on_open_data_offset`` 2, ``data_index_count`` 5, ``meta_index_count`` 6,
  ``entry_count`` 7, ``num_data_index_levels`` 8, ``compression_codec`` 12: an
  ``HFileCompressionCodec`` ordinal, LZO 0, GZ 1, NONE 2, ...), padding, and the version (int: the
  major version in the low 3 bytes, 3).
* ``HFileReaderImpl.initializeMetadata``: at ``load_on_open_data_offset`` follow the root data
  index block, the meta index block and the file info block (``HFileBlockReader.nextBlock``).
* ``HFileBlock``: a block is a 33-byte header (``HFILEBLOCK_HEADER_SIZE``: the 8-byte magic, the
  on-disk size without header (int, checksums included), the uncompressed size without header
  (int), the previous block's offset (long), the checksum type (byte), the bytes per checksum (int)
  and the on-disk data size with header (int)), then the content, compressed as a whole with the
  trailer's codec (``HFileBlock.unpack``; GZ is a gzip stream), then the checksums.
* ``HFileRootIndexBlock.readBlockIndex``: per entry the block's offset (long), its on-disk size
  (int) and its first key (a Hadoop ``WritableUtils`` vint length, then the bytes).
* ``HFileDataBlock`` / ``KeyValue``: a data block's content is cells, each the key length (int),
  the value length (int), the key, the value and one MVCC byte (always 0 in Hudi,
  ``ZERO_TS_VERSION_BYTE_LENGTH``); a key is the row length (short), the row (Hudi's record key),
  the family length (byte, 0), the family, the qualifier, the timestamp (long) and the type (byte).
* ``HFileFileInfoBlock.readFileInfo``: ``PBUF``, then a length-delimited ``InfoProto`` of
  ``BytesBytesPair`` (first 1, second 2) entries (field 1). Hudi's Avro HFile writer
  (``HoodieAvroHFileWriter``) stores the records' writer schema under ``schema``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

TRAILER_SIZE = 4096
TRAILER_MAGIC = b'TRABLK"$'
DATA_MAGIC = b"DATABLK*"
ROOT_INDEX_MAGIC = b"IDXROOT2"
FILE_INFO_MAGIC = b"FILEINF2"
PB_MAGIC = b"PBUF"
HEADER_SIZE = 33
CODEC_GZ, CODEC_NONE = 1, 2
CODEC_NAMES = ("LZO", "GZ", "NONE", "SNAPPY", "LZ4", "BZIP2", "ZSTD")
SCHEMA_KEY = b"schema"  # HoodieAvroHFileWriter's file info key for the records' Avro schema


class HFileError(ValueError):
    """Bytes that are not an HFile this reader can read (the message says what and where)."""


@dataclass(frozen=True)
class Trailer:
    load_on_open: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    index_levels: int
    codec: int
    major_version: int


@dataclass(frozen=True)
class HFile:
    """An HFile's cells (row key -> value bytes, in key order) and its file info entries."""

    cells: list[tuple[bytes, bytes]]
    file_info: dict[bytes, bytes]
    trailer: Trailer

    @property
    def schema(self) -> str:
        """The records' Avro writer schema (JSON), '' when the file info holds none."""
        return self.file_info.get(SCHEMA_KEY, b"").decode()


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A protobuf base-128 varint at ``at`` and the byte after it."""
    value = shift = 0
    while True:
        if at >= len(data):
            raise HFileError("a protobuf varint runs past the end of its message")
        b = data[at]
        value |= (b & 0x7F) << shift
        at += 1
        if not b & 0x80:
            return value, at
        shift += 7


def _protobuf_fields(msg: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: a varint or a length-delimited field's bytes."""
    at = 0
    while at < len(msg):
        key, at = _varint(msg, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(msg, at)
            yield field, value
        elif wire == 2:
            size, at = _varint(msg, at)
            yield field, msg[at : at + size]
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise HFileError(f"protobuf wire type {wire} is not one HFile writes")


def read_trailer(data: bytes) -> Trailer:
    if len(data) < TRAILER_SIZE:
        raise HFileError(f"{len(data)} bytes is shorter than an HFile v3 trailer ({TRAILER_SIZE} bytes)")
    trailer = data[-TRAILER_SIZE:]
    major = int.from_bytes(trailer[-3:], "big")
    if not trailer.startswith(TRAILER_MAGIC):
        raise HFileError(f"no HFile trailer magic {TRAILER_MAGIC!r} {TRAILER_SIZE} bytes before the end")
    if major != 3:
        raise HFileError(f"HFile major version {major}; version 3 is read")
    size, at = _varint(trailer, len(TRAILER_MAGIC))
    f = {k: v for k, v in _protobuf_fields(trailer[at : at + size]) if isinstance(v, int)}
    return Trailer(
        load_on_open=f.get(2, 0),
        data_index_count=f.get(5, 0),
        meta_index_count=f.get(6, 0),
        entry_count=f.get(7, 0),
        index_levels=f.get(8, 1),
        codec=f.get(12, CODEC_NONE),
        major_version=major,
    )


def _block(data: bytes, at: int, magic: bytes, codec: int) -> tuple[bytes, int]:
    """The uncompressed content of the block at ``at`` (whose magic must be ``magic``) and the
    offset of the block after it."""
    header = data[at : at + HEADER_SIZE]
    if len(header) < HEADER_SIZE or header[:8] != magic:
        raise HFileError(f"no {magic.decode()} block at byte {at} (found {header[:8]!r})")
    on_disk, uncompressed = struct.unpack_from(">ii", header, 8)
    (data_with_header,) = struct.unpack_from(">i", header, 29)
    end = at + HEADER_SIZE + on_disk
    if on_disk < 0 or end > len(data):
        raise HFileError(f"the {magic.decode()} block at byte {at} says {on_disk} bytes follow; the file ends first")
    raw = data[at + HEADER_SIZE : at + max(data_with_header, HEADER_SIZE)]
    if codec == CODEC_NONE:
        content = raw[:uncompressed]
    elif codec == CODEC_GZ:
        try:
            content = zlib.decompress(raw, wbits=31)
        except zlib.error as exc:
            raise HFileError(f"the {magic.decode()} block at byte {at} does not decompress (GZ): {exc}") from None
    else:
        name = CODEC_NAMES[codec] if codec < len(CODEC_NAMES) else str(codec)
        raise HFileError(f"HFile compression codec {name} is not read (GZ and NONE are)")
    if len(content) != uncompressed:
        raise HFileError(
            f"the {magic.decode()} block at byte {at} holds {len(content)} bytes; its header says {uncompressed}"
        )
    return content, end


def _writable_vint(data: bytes, at: int) -> tuple[int, int]:
    """Hadoop ``WritableUtils.readVInt``."""
    first = struct.unpack_from(">b", data, at)[0]
    if first >= -112:
        return first, at + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)
    value = int.from_bytes(data[at + 1 : at + size], "big")
    return (~value if negative else value), at + size


def _root_index(content: bytes, count: int) -> list[tuple[int, int]]:
    """(offset, on-disk size) of each block a root index names."""
    out, at = [], 0
    for _ in range(count):
        offset, size = struct.unpack_from(">qi", content, at)
        key_len, at = _writable_vint(content, at + 12)
        at += key_len
        out.append((offset, size))
    return out


def _cells(content: bytes, at_block: int) -> Iterator[tuple[bytes, bytes]]:
    at = 0
    while at < len(content):
        key_len, value_len = struct.unpack_from(">ii", content, at)
        key_at = at + 8
        (row_len,) = struct.unpack_from(">h", content, key_at)
        if key_len < row_len + 12 or key_at + key_len + value_len + 1 > len(content):
            raise HFileError(f"a cell of the data block at byte {at_block} runs past the block's end")
        row = content[key_at + 2 : key_at + 2 + row_len]
        yield row, content[key_at + key_len : key_at + key_len + value_len]
        at = key_at + key_len + value_len + 1  # the MVCC version byte, 0


def _file_info(content: bytes) -> dict[bytes, bytes]:
    if not content.startswith(PB_MAGIC):
        raise HFileError("the file info block does not start with PBUF")
    size, at = _varint(content, len(PB_MAGIC))
    info: dict[bytes, bytes] = {}
    for field, entry in _protobuf_fields(content[at : at + size]):
        if field == 1 and isinstance(entry, bytes):
            pair = {k: v for k, v in _protobuf_fields(entry) if isinstance(v, bytes)}
            info[pair.get(1, b"")] = pair.get(2, b"")
    return info


def read_hfile(data: bytes) -> HFile:
    """Every cell of an HFile, in the order of its data blocks; raises HFileError naming the
    byte where the file stops being an HFile."""
    try:
        trailer = read_trailer(data)
        if trailer.index_levels != 1:
            raise HFileError(f"a {trailer.index_levels}-level data index is not read (one level is)")
        index, at = _block(data, trailer.load_on_open, ROOT_INDEX_MAGIC, trailer.codec)
        _, at = _block(data, at, ROOT_INDEX_MAGIC, trailer.codec)  # the meta index
        info, _ = _block(data, at, FILE_INFO_MAGIC, trailer.codec)
        cells: list[tuple[bytes, bytes]] = []
        for offset, _size in _root_index(index, trailer.data_index_count):
            content, _ = _block(data, offset, DATA_MAGIC, trailer.codec)
            cells.extend(_cells(content, offset))
        file_info = _file_info(info)
    except struct.error as exc:
        raise HFileError(f"the HFile ends inside a structure ({exc})") from None
    if len(cells) != trailer.entry_count:
        raise HFileError(f"holds {len(cells)} cells; its trailer says {trailer.entry_count}")
    return HFile(cells, file_info, trailer)


# -- writing ---------------------------------------------------------------------------------------
#
# What Hudi 1.x's own HFile writer (hudi-io ``HFileWriterImpl``, used by ``HoodieAvroHFileWriter``
# and ``HoodieHFileDataBlock``) writes, byte for byte on the metadata tables of the hudi-rs test
# tables: GZ blocks (a gzip stream as ``java.util.zip.GZIPOutputStream`` writes it: no mtime, OS
# byte 0, deflate level 6), checksum type NULL with a zero 4-byte checksum per 16 KiB chunk, every
# block's previous-block offset -1, the root index keyed by each block's first row (row length and
# row), an empty meta index, the trailer's field 3 holding the data's uncompressed size and the
# comparator ``HoodieHBaseKVComparator``. Not written: the bloom filter meta block Hudi adds to a
# base HFile (``bloomFilterTypeCode``): readers of the ``files`` partition do not use it.

COMPARATOR = b"org.apache.hudi.io.storage.HoodieHBaseKVComparator"
BYTES_PER_CHECKSUM = 16 * 1024
DATA_BLOCK_SIZE = 1024 * 1024  # hoodie.hfile.block.size: a data block closes once it holds this much
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # GZIPOutputStream's: no mtime, OS 0
_LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF  # HConstants.LATEST_TIMESTAMP
_PUT = 4  # KeyValue.Type.Put


def _gzip(content: bytes) -> bytes:
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(content) + deflate.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(content), len(content) & 0xFFFFFFFF)


def _write_block(magic: bytes, content: bytes) -> bytes:
    packed = _gzip(content)
    checksums = -(-(HEADER_SIZE + len(packed)) // BYTES_PER_CHECKSUM) * 4
    header = magic + struct.pack(
        ">iiqbii", len(packed) + checksums, len(content), -1, 0, BYTES_PER_CHECKSUM, HEADER_SIZE + len(packed)
    )
    return header + packed + b"\0" * checksums


def _pb_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pb_field(field: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _pb_varint(field << 3) + _pb_varint(value)
    return _pb_varint(field << 3 | 2) + _pb_varint(len(value)) + value


def _writable_vint_bytes(value: int) -> bytes:
    """Hadoop ``WritableUtils.writeVInt`` of a non-negative int."""
    if value <= 127:
        return struct.pack(">b", value)
    size = (value.bit_length() + 7) // 8
    return struct.pack(">b", -112 - size) + value.to_bytes(size, "big")


def _row_key(row: bytes) -> bytes:
    return struct.pack(">h", len(row)) + row


def _cell(row: bytes, value: bytes) -> bytes:
    key = _row_key(row) + b"\0" + struct.pack(">qb", _LATEST_TIMESTAMP, _PUT)
    return struct.pack(">ii", len(key), len(value)) + key + value + b"\0"


def _data_blocks(cells: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes, int, int, int]:
    """The data blocks of sorted ``cells`` written at the start of a file: their bytes, the root
    index's content, their count, their uncompressed size and the last block's offset."""
    out, index, content, first, last = bytearray(), bytearray(), bytearray(), b"", 0
    total = blocks = 0
    for n, (row, value) in enumerate(cells):
        if not content:
            first, last = row, len(out)
        content.extend(_cell(row, value))
        if len(content) >= DATA_BLOCK_SIZE or n == len(cells) - 1:
            block = _write_block(DATA_MAGIC, bytes(content))
            index.extend(struct.pack(">qi", last, len(block)) + _writable_vint_bytes(len(first) + 2) + _row_key(first))
            total += len(content)
            blocks += 1
            out.extend(block)
            content = bytearray()
    return bytes(out), bytes(index), blocks, total, last


def _writer_file_info(cells: list[tuple[bytes, bytes]], create_time_ms: int) -> dict[bytes, bytes]:
    """The file info entries the HFile writer keeps itself (key and value lengths are the rows')."""
    count = max(len(cells), 1)
    return {
        b"hfile.LASTKEY": _row_key(cells[-1][0]) if cells else b"",
        b"hfile.AVG_VALUE_LEN": struct.pack(">i", sum(len(v) for _, v in cells) // count),
        b"hfile.AVG_KEY_LEN": struct.pack(">i", sum(len(k) for k, _ in cells) // count),
        b"KEY_VALUE_VERSION": struct.pack(">i", 1),
        b"MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0),
        b"hfile.CREATE_TIME_TS": struct.pack(">q", create_time_ms),
    }


def write_hfile(cells: list[tuple[bytes, bytes]], file_info: dict[bytes, bytes], create_time_ms: int = 0) -> bytes:
    """An HFile v3 of ``cells`` (row key, value), sorted by key; ``file_info`` entries (e.g. the
    records' schema under :data:`SCHEMA_KEY`) come first, then those the writer keeps itself.
    ``create_time_ms``: ``hfile.CREATE_TIME_TS`` (Hudi's wall clock; 0 keeps traces deterministic)."""
    cells = sorted(cells)
    data, index, blocks, total, last_block = _data_blocks(cells)
    out = bytearray(data)
    load_on_open = len(out)
    out.extend(_write_block(ROOT_INDEX_MAGIC, index))
    out.extend(_write_block(ROOT_INDEX_MAGIC, b""))  # the meta index: no meta blocks
    info = {**file_info, **_writer_file_info(cells, create_time_ms)}
    pairs = b"".join(_pb_field(1, _pb_field(1, k) + _pb_field(2, v)) for k, v in info.items())
    file_info_offset = len(out)
    out.extend(_write_block(FILE_INFO_MAGIC, PB_MAGIC + _pb_varint(len(pairs)) + pairs))
    fields: tuple[tuple[int, int | bytes], ...] = (
        (1, file_info_offset),
        (2, load_on_open),
        (3, total),
        (5, blocks),
        (6, 0),
        (7, len(cells)),
        (8, 1),
        (9, 0),
        (10, last_block),
        (11, COMPARATOR),
        (12, CODEC_GZ),
    )
    trailer = b"".join(_pb_field(f, v) for f, v in fields)
    body = TRAILER_MAGIC + _pb_varint(len(trailer)) + trailer
    out.extend(body + b"\0" * (TRAILER_SIZE - len(body) - 4) + struct.pack(">i", 3))
    return bytes(out)
