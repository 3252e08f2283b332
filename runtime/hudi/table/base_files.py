"""Base file names and ids: ``<fileId>_<writeToken>_<instant>.parquet`` (``FSUtils.makeBaseFileName``),
the bucket index's file ids (``BucketIdentifier``), and the Avro schema a commit records of them."""

from __future__ import annotations

import functools
import re
import uuid

import pyarrow as pa

from runtime.data.columns import INTERNAL_COLUMNS
from runtime.hudi.formats import avro_schema
from runtime.hudi.table.table_config import META_COLUMNS

# parquet: the data table's; hfile: the metadata table's (its cleaner groups them too), whose
# compactions on version 6 are a delta commit's time + 001 (20 digits)
_BASE_FILE = re.compile(r"^(?P<file_id>[^_]+)_(?P<token>[^_]+)_(?P<instant>\d{14,20})\.(?:parquet|hfile)$")


@functools.lru_cache(maxsize=65536)
def file_group_id(table_name: str, partition: str, bucket: int) -> str:
    """Bucket-index file id: the bucket number in the first 8 characters (as Hudi's
    BucketIdentifier does), the rest a stable UUID, ``-0`` suffix; no ``_`` anywhere."""
    stable = uuid.uuid5(uuid.NAMESPACE_URL, f"commitlab/{table_name}/{partition}/{bucket}")
    return f"{bucket:08d}{str(stable)[8:]}-0"


def base_file_name(file_id: str, write_token: str, instant: str) -> str:
    return f"{file_id}_{write_token}_{instant}.parquet"


@functools.lru_cache(maxsize=65536)
def parse_base_file_name(name: str) -> tuple[str, str, str] | None:
    """(file_id, write_token, instant) of a base file name, or None if it is not one. Cached:
    the cleaner parses every file of a partition at every commit, and the names repeat."""
    m = _BASE_FILE.match(name)
    return (m["file_id"], m["token"], m["instant"]) if m else None


def avro_schema_json(schema: pa.Schema, table_name: str) -> str:
    """The Avro schema of the data columns (``extraMetadata.schema``) as Hudi's Spark writer converts
    them (:mod:`runtime.hudi.formats.avro_schema`); the meta and internal columns left out."""
    return avro_schema.avro_schema_json(schema, table_name, skip=META_COLUMNS + INTERNAL_COLUMNS)
