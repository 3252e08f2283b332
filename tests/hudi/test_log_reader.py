"""Every data block format of a log file is read: an HFile data block's records are counted and
decoded, a CDC block decodes as the Avro block it extends, and damage inside either is a
LogFormatError (verify then names the file and the byte)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from runtime.hudi.formats.log_format import (
    CDC_DATA_BLOCK,
    HFILE_DATA_BLOCK,
    INSTANT_TIME,
    SCHEMA,
    LogFormatError,
    avro_data_block,
    encode_block,
    read_blocks,
)
from runtime.hudi.table.log_reader import decode_block, row_count

TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-rs-tables"


def _hfile_block():
    with zipfile.ZipFile(TABLES / "sample_table__cow__v9_txns_simple_meta.zip") as z:
        name = next(n for n in z.namelist() if "/metadata/files/" in n and n.endswith(".log.1_3-34-96"))
        return next(b for b in read_blocks(z.read(name)) if b.block_type == HFILE_DATA_BLOCK)


def test_an_hfile_data_block_is_counted_and_decoded():
    block = _hfile_block()
    assert row_count(block) == decode_block(block) == 4


def test_an_hfile_data_block_with_flipped_bytes_does_not_decode():
    block = _hfile_block()
    content = bytearray(block.content)
    for i in range(40, 48):
        content[i] ^= 0xFF
    damaged = encode_block(HFILE_DATA_BLOCK, block.header, bytes(content))
    with pytest.raises(LogFormatError):
        decode_block(next(read_blocks(damaged)))


def test_a_cdc_block_decodes_as_an_avro_block():
    schema = {"type": "record", "name": "cdc", "fields": [{"name": "op", "type": "string"}]}
    avro = next(read_blocks(avro_data_block("001", schema, pa.table({"op": ["i", "u"]}))))
    header = {INSTANT_TIME: "001", SCHEMA: json.dumps(schema)}
    cdc = next(read_blocks(encode_block(CDC_DATA_BLOCK, header, avro.content)))
    assert decode_block(cdc) == 2
    broken = next(read_blocks(encode_block(CDC_DATA_BLOCK, header, avro.content[:-3])))
    with pytest.raises(LogFormatError):
        decode_block(broken)
