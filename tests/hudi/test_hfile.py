"""The HFile reader on the metadata tables Hudi wrote (hudi-rs's test tables): a base HFile of the
metadata table's ``files`` partition and an HFile data block of its logs give their cells; damage
is an HFileError that says where."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from runtime.hudi.formats.hfile import HFileError, read_hfile
from runtime.hudi.formats.log_format import HFILE_DATA_BLOCK, read_blocks

TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-rs-tables"
FIXTURE = "sample_table__cow__v9_txns_simple_meta"
FILES = "v9_txns_simple_meta/.hoodie/metadata/files/"


def _member(suffix: str) -> bytes:
    with zipfile.ZipFile(TABLES / f"{FIXTURE}.zip") as z:
        name = next(n for n in z.namelist() if n.startswith(FILES) and n.endswith(suffix))
        return z.read(name)


def test_a_base_hfile_of_the_files_partition_lists_its_partitions_in_key_order():
    hfile = read_hfile(_member("_20260307162449278.hfile"))
    assert [k for k, _ in hfile.cells] == [b"__all_partitions__", b"region=apac", b"region=eu", b"region=us"]
    assert '"HoodieMetadataRecord"' in hfile.schema
    assert hfile.trailer.codec == 1  # GZ, as the metadata table writes them


def test_an_hfile_data_block_of_a_metadata_log_is_an_hfile():
    blocks = list(read_blocks(_member(".log.1_3-34-96")))
    data = [b for b in blocks if b.block_type == HFILE_DATA_BLOCK]
    assert len(data) == 1
    assert b"__all_partitions__" in [k for k, _ in read_hfile(data[0].content).cells]


@pytest.mark.parametrize("damage", ["truncate", "flip-data", "flip-trailer"])
def test_a_damaged_hfile_is_an_error_not_a_crash(damage):
    data = bytearray(_member("_20260307162449278.hfile"))
    if damage == "truncate":
        data = data[:-100]
    else:
        at = 60 if damage == "flip-data" else len(data) - 4096 + 2
        for i in range(at, at + 8):
            data[i] ^= 0xFF
    with pytest.raises(HFileError):
        read_hfile(bytes(data))
