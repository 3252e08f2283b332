"""Reading a log block's records whatever its data format: Avro, parquet, HFile and CDC data blocks
(the framing and the Avro/parquet decoding are :mod:`runtime.hudi.formats.log_format`'s).

Sources (Apache Hudi 0.14-1.1, ``hudi-common`` ``org.apache.hudi.common.table.log.block``):

* ``HoodieHFileDataBlock``: the content is a whole HFile (:mod:`runtime.hudi.formats.hfile`) whose cells
  are (record key, the record's Avro binary encoding with the header's SCHEMA); what the metadata
  table writes, and a data table with ``hoodie.logfile.data.block.format=hfile``.
* ``HoodieCDCDataBlock`` (``CDC_DATA_BLOCK``) extends ``HoodieAvroDataBlock``: the same content
  layout, its records the change log (``HoodieCDCSupplementalLoggingMode``), not rows of the table,
  so they are decoded but not counted against a commit's ``numWrites``.
* ``HoodieLogFormatReader`` reads each block by its type; one whose records do not decode is
  reported with the log file and the byte the block starts at.
"""

from __future__ import annotations

import dataclasses
import io
import json

import fastavro

from runtime.core.json_doc import JsonObject
from runtime.hudi.formats.hfile import read_hfile
from runtime.hudi.formats.log_format import (
    AVRO_DATA_BLOCK,
    CDC_DATA_BLOCK,
    HFILE_DATA_BLOCK,
    PARQUET_DATA_BLOCK,
    SCHEMA,
    LogBlock,
    LogFormatError,
    decode_rows,
    record_count,
)

# the data blocks whose records are rows of the table (a commit's numWrites counts them)
ROW_BLOCKS = (AVRO_DATA_BLOCK, PARQUET_DATA_BLOCK, HFILE_DATA_BLOCK)
DECODED_BLOCKS = (*ROW_BLOCKS, CDC_DATA_BLOCK)


def hfile_records(content: bytes, schema: str) -> list[tuple[bytes, JsonObject]]:
    """The (key, record) cells of an HFile whose values are Avro records of ``schema`` (JSON; ''
    for the schema its file info holds); raises LogFormatError when they do not decode."""
    try:
        hfile = read_hfile(content)
        parsed = fastavro.parse_schema(json.loads(schema or hfile.schema))
        out = []
        for key, value in hfile.cells:
            record = fastavro.schemaless_reader(io.BytesIO(value), parsed, None)
            if not isinstance(record, dict):
                raise ValueError(f"the value of key {key[:40]!r} decodes to {type(record).__name__}, not a record")
            out.append((key, record))
        return out
    except Exception as exc:  # noqa: BLE001 - damaged bytes make the HFile and Avro readers raise many types
        raise LogFormatError(f"not an HFile of Avro records ({type(exc).__name__}: {exc})") from None


def row_count(block: LogBlock) -> int:
    """The records of an Avro, parquet or HFile data block, read from its header or trailer."""
    if block.block_type == HFILE_DATA_BLOCK:
        try:
            return read_hfile(block.content).trailer.entry_count
        except ValueError as exc:
            raise LogFormatError(f"an HFile data block without a readable trailer: {exc}") from None
    return record_count(block)


def decode_block(block: LogBlock) -> int:
    """Decodes every record of a data block of any format and returns their count; raises
    LogFormatError when they do not decode."""
    if block.block_type == HFILE_DATA_BLOCK:
        return len(hfile_records(block.content, block.header.get(SCHEMA, "")))
    if block.block_type == CDC_DATA_BLOCK:  # an Avro data block's layout
        return decode_rows(dataclasses.replace(block, block_type=AVRO_DATA_BLOCK))
    return decode_rows(block)
