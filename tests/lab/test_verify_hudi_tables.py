"""`commitlab verify --table` on the 41 tables Hudi's own Spark writer made (hudi-rs's test data:
table versions 6, 8 and 9, copy-on-write and merge-on-read, Avro and parquet log blocks, five key
generators, with and without meta fields, insert_overwrite, clustering, compaction, rollback and
indexing on the timeline): each is judged consistent with exit 0, and damage made on a copy of one
is an error naming the instant or the file.

The tables are vendored in ``tests/fixtures/hudi-rs-tables/`` (Apache License 2.0: their
README.md keeps the licence note), so the suite depends on nothing outside the repository.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest

from runtime.cli import main
from runtime.lab.table_audit import audit_table

TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-rs-tables"
ZIPS = sorted(TABLES.glob("*.zip"))


def test_the_fixture_tables_are_vendored_with_their_licence():
    assert len(ZIPS) == 41
    assert "Apache License 2.0" in (TABLES / "README.md").read_text()


def _unzipped(zip_path: Path, into: Path) -> str:
    """The table directory of one fixture zip, unpacked under ``into``."""
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(into)
    dirs = [d for d in into.iterdir() if d.is_dir() and not d.name.startswith("__MACOSX")]
    assert len(dirs) == 1, dirs
    return str(dirs[0])


def _table(tmp_path: Path, name: str) -> str:
    return _unzipped(TABLES / f"{name}.zip", tmp_path / name)


@pytest.mark.parametrize("fixture", ZIPS, ids=[z.stem for z in ZIPS])
def test_every_table_hudi_wrote_is_consistent(fixture, tmp_path, capsys):
    table = _unzipped(fixture, tmp_path)
    assert main(["verify", "--table", table]) == 0
    out = capsys.readouterr().out
    assert f"verify {table}: consistent" in " ".join(out.split())
    assert "Traceback" not in out


def test_insert_duplicates_are_a_note_not_an_error(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_timebasedkeygen_epochmillis")
    audit = audit_table(table)
    notes = [f for f in audit.findings if f.kind == "duplicate-key"]
    assert audit.ok and [f.severity for f in notes] == ["info"]
    assert "INSERT" in notes[0].message


def test_a_completed_commit_deleted_from_the_middle_is_a_lost_commit(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    timeline = Path(table, ".hoodie", "timeline")
    victim = sorted(p for p in timeline.iterdir() if p.name.endswith(".commit") and "_" in p.name)[2]
    instant = victim.name.split("_", 1)[0]
    victim.unlink()
    lost = [f for f in audit_table(table).errors if f.kind == "lost-commit"]
    assert len(lost) == 1 and instant in lost[0].message and "metadata table" in lost[0].message
    assert main(["verify", "--table", table]) == 1


@pytest.mark.parametrize("where", ["head", "middle", "end"])
def test_a_log_file_with_flipped_bytes_is_named(tmp_path, where):
    table = _table(tmp_path, "sample_table__mor__avro__v9_txns_simple_meta")
    log = sorted(Path(table).glob("region=us/.*.log.*"))[0]
    data = bytearray(log.read_bytes())
    at = {"head": 30, "middle": len(data) // 2, "end": len(data) - 40}[where]
    for i in range(at, at + 8):
        data[i] ^= 0xFF
    log.write_bytes(bytes(data))
    rel = f"region=us/{log.name}"
    assert [f.kind for f in audit_table(table).errors if f.file == rel] == ["corrupt-log"]
    assert main(["verify", "--table", table]) == 1


def test_a_truncated_base_file_and_a_stray_file_are_named(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    base = sorted(Path(table).glob("region=us/*.parquet"))[0]
    with open(base, "r+b") as f:
        f.truncate(100)
    shutil.copy(base, Path(table, "region=eu", "stray.parquet"))
    errors = {(f.kind, f.file) for f in audit_table(table).errors}
    assert ("corrupt-parquet", f"region=us/{base.name}") in errors
    assert ("metadata-size-mismatch", f"region=us/{base.name}") in errors  # readers using it read its old length
    assert ("stray-file", "region=eu/stray.parquet") in errors


def test_a_copied_file_group_is_a_duplicate_error_whatever_the_operation(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    latest = sorted(Path(table).glob("region=eu/*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])[-1]
    copy = latest.with_name("11111111-0000-0000-0000-000000000000-0" + latest.name[latest.name.index("_") :])
    shutil.copy(latest, copy)
    errors = {f.kind: f for f in audit_table(table).errors}
    assert errors["unlisted-file"].file == f"region=eu/{copy.name}"
    assert "11111111-0000-0000-0000-000000000000-0" in errors["duplicate-key"].message
    assert main(["verify", "--table", table]) == 1


def test_a_committed_base_file_deleted_is_named_by_the_metadata_table_check(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    victim = sorted(Path(table).glob("region=us/*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])[-1]
    victim.unlink()
    errors = {(f.kind, f.file) for f in audit_table(table).errors}
    assert ("metadata-lists-missing-file", f"region=us/{victim.name}") in errors
    assert main(["verify", "--table", table]) == 1


def test_a_stray_base_file_of_a_completed_instant_is_not_in_the_metadata_table(tmp_path):
    table = _table(tmp_path, "sample_table__mor__avro__v9_txns_simple_meta")
    latest = sorted(Path(table).glob("region=eu/*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])[-1]
    copy = latest.with_name("22222222-0000-0000-0000-000000000000-0" + latest.name[latest.name.index("_") :])
    shutil.copy(latest, copy)
    errors = {(f.kind, f.file) for f in audit_table(table).errors}
    assert ("metadata-missing-file", f"region=eu/{copy.name}") in errors


def test_a_metadata_table_delta_commit_removed_is_a_missing_instant(tmp_path):
    table = _table(tmp_path, "quickstart_trips_table__mor__avro__v8_trips_8i3u1d")
    mdt_timeline = Path(table, ".hoodie", "metadata", ".hoodie", "timeline")
    data = {p.name.split("_", 1)[0] for p in Path(table, ".hoodie", "timeline").glob("*_*.deltacommit")}
    victim = sorted(p for p in mdt_timeline.glob("*_*.deltacommit") if p.name.split("_", 1)[0] in data)[-2]
    instant = victim.name.split("_", 1)[0]
    victim.unlink()
    missing = [f for f in audit_table(table).errors if f.kind == "metadata-table-missing-instant"]
    assert [instant in f.message for f in missing] == [True]
    assert main(["verify", "--table", table]) == 1


def test_a_metadata_table_log_with_flipped_bytes_is_named(tmp_path):
    table = _table(tmp_path, "sample_table__mor__avro__v9_txns_simple_meta")
    log = sorted(Path(table, ".hoodie", "metadata", "files").glob(".files-*.log.*"), key=lambda p: p.stat().st_size)[-1]
    data = bytearray(log.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF
    log.write_bytes(bytes(data))
    named = [f for f in audit_table(table).errors if f.kind == "corrupt-metadata-table"]
    assert [f.file for f in named] == [f".hoodie/metadata/files/{log.name}"]
    assert "byte" in named[0].message
    assert main(["verify", "--table", table]) == 1


def test_an_instant_a_rollback_undid_that_is_still_completed_is_an_error(tmp_path):
    table = _table(tmp_path, "sample_table__mor__avro__v9_nonpartitioned_rollback")
    timeline = Path(table, ".hoodie", "timeline")
    assert audit_table(table).ok
    undone = "20260403184242950"  # the instant the fixture's rollback 20260403184259077 undid
    some_commit = sorted(timeline.glob("*_*.deltacommit"))[0]
    shutil.copy(some_commit, timeline / f"{undone}_20260403184243000.deltacommit")
    found = [f for f in audit_table(table).errors if f.kind == "undone-instant-on-timeline"]
    assert len(found) == 1 and undone in found[0].message
    assert found[0].file.endswith(".rollback")


def test_a_restore_is_read_with_the_instants_it_undid(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    timeline = Path(table, ".hoodie", "timeline")
    kept = sorted(p.name.split("_", 1)[0] for p in timeline.glob("*_*.commit"))[-1]
    schema = {
        "type": "record",
        "name": "HoodieRestoreMetadata",
        "fields": [
            {"name": "startRestoreTime", "type": "string"},
            {"name": "timeTakenInMillis", "type": "long"},
            {"name": "instantsToRollback", "type": {"type": "array", "items": "string"}},
        ],
    }
    with open(timeline / "20990101000000000_20990101000001000.restore", "wb") as f:
        record = {"startRestoreTime": "20990101000000000", "timeTakenInMillis": 1, "instantsToRollback": [kept]}
        fastavro.writer(f, fastavro.parse_schema(schema), [record])
    audit = audit_table(table)
    assert any(f.kind == "restore" and kept in f.message for f in audit.findings)
    assert [f.kind for f in audit.errors] == ["undone-instant-on-timeline"]


def test_a_metadata_table_the_properties_list_but_storage_lacks_is_an_error(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_nonpart_meta")
    Path(table, ".hoodie", "metadata", ".hoodie", "hoodie.properties").unlink()
    assert [f.kind for f in audit_table(table).errors] == ["metadata-table-missing"]


def test_a_metadata_table_commit_file_that_does_not_parse_is_named(tmp_path):
    table = _table(tmp_path, "sample_table__mor__avro__v9_txns_simple_meta")
    mdt_timeline = Path(table, ".hoodie", "metadata", ".hoodie", "timeline")
    victim = sorted(mdt_timeline.glob("*_*.deltacommit"))[-1]
    victim.write_bytes(b"Obj\x01 not an Avro container")
    named = [f.file for f in audit_table(table).errors if f.kind == "corrupt-metadata-table"]
    assert named == [f".hoodie/metadata/.hoodie/timeline/{victim.name}"]


def test_damage_inside_a_non_key_column_of_a_snapshot_file_is_named(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    latest = sorted(Path(table).glob("region=us/*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])[-1]
    row_group = pq.ParquetFile(latest).metadata.row_group(0)
    amount = next(
        row_group.column(i) for i in range(row_group.num_columns) if row_group.column(i).path_in_schema == "amount"
    )
    data = bytearray(latest.read_bytes())
    at = amount.data_page_offset + amount.total_compressed_size // 2
    for i in range(at, at + 8):
        data[i] ^= 0xFF
    latest.write_bytes(bytes(data))
    assert ("corrupt-parquet", f"region=us/{latest.name}") in {(f.kind, f.file) for f in audit_table(table).errors}


@pytest.mark.parametrize("damage", ["deleted", "garbled"])
def test_a_partition_without_valid_partition_metadata_is_named(tmp_path, damage):
    table = _table(tmp_path, "sample_table__cow__v6_simplekeygen_nonhivestyle")
    meta = Path(table, "30", ".hoodie_partition_metadata")
    if damage == "deleted":
        meta.unlink()
    else:
        meta.write_bytes(meta.read_bytes().replace(b"partitionDepth=1", b"partitionDepth=\xff"))
    kind = "missing-partition-metadata" if damage == "deleted" else "corrupt-partition-metadata"
    assert [(f.kind, f.file) for f in audit_table(table).errors] == [(kind, "30/.hoodie_partition_metadata")]
