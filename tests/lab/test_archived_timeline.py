"""Instants Hudi's archiver moved off the active timeline are read from the archived timeline (the
LSM timeline of table versions 8 and 9, the archive log files of version 6): their files are
committed, so a later commit that merged from them is no lost commit, and an archived timeline
file that does not read is an error naming it."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runtime.cli import main
from runtime.hudi.formats.log_format import avro_data_block
from runtime.lab.table_audit import audit_table

TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-rs-tables"


def _table(tmp_path: Path, fixture: str) -> Path:
    with zipfile.ZipFile(TABLES / f"{fixture}.zip") as z:
        z.extractall(tmp_path)
    return next(d for d in tmp_path.iterdir() if d.is_dir() and not d.name.startswith("__MACOSX"))


def _archive_first_commit(timeline: Path) -> tuple[str, str]:
    """Removes the first commit's files from the active timeline; returns (instant, completion)."""
    first = sorted(p.name for p in timeline.glob("*.commit"))[0]
    instant = first.split("_", 1)[0].split(".", 1)[0]
    completion = first.split("_", 1)[1].split(".", 1)[0] if "_" in first else ""
    for p in timeline.glob(f"{instant}*"):
        p.unlink()
    return instant, completion


def _lsm_history(history: Path, instant: str, completion: str, data_file: str | None = None) -> Path:
    name = data_file or f"{instant}_{instant}_0.parquet"
    rows = {"instantTime": [instant], "completionTime": [completion], "action": ["commit"], "version": [1]}
    pq.write_table(pa.table(rows), history / f"{instant}_{instant}_0.parquet")
    (history / "manifest_1").write_text(json.dumps({"files": [{"fileName": name, "fileLen": 1}]}))
    (history / "_version_").write_text("1")
    return history / name


def test_an_instant_archived_to_the_lsm_timeline_is_committed(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    timeline = table / ".hoodie" / "timeline"
    instant, completion = _archive_first_commit(timeline)
    lost = [f for f in audit_table(str(table)).errors if instant in f.message]
    assert lost, "without the archived timeline, later commits merged from a commit no timeline has"
    _lsm_history(timeline / "history", instant, completion)
    audit = audit_table(str(table))
    assert audit.ok, audit.errors
    assert [f.kind for f in audit.findings if instant in f.message] == ["archived-instants"]
    assert main(["verify", "--table", str(table)]) == 0


def test_an_lsm_manifest_naming_a_missing_file_is_named(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v9_txns_simple_meta")
    timeline = table / ".hoodie" / "timeline"
    instant, completion = _archive_first_commit(timeline)
    _lsm_history(timeline / "history", instant, completion, data_file="1_2_0.parquet")
    named = [f for f in audit_table(str(table)).errors if f.kind == "corrupt-archived-timeline"]
    assert [f.file for f in named] == [".hoodie/timeline/history/1_2_0.parquet"]


def test_an_instant_archived_to_a_version_6_archive_log_is_committed(tmp_path):
    table = _table(tmp_path, "sample_table__cow__v6_simplekeygen_nonhivestyle")
    instant, _ = _archive_first_commit(table / ".hoodie")
    assert not audit_table(str(table)).ok
    schema = {
        "type": "record",
        "name": "HoodieArchivedMetaEntry",
        "fields": [{"name": n, "type": ["null", "string"]} for n in ("commitTime", "actionType", "actionState")],
    }
    entries = pa.table({"commitTime": [instant], "actionType": ["commit"], "actionState": ["COMPLETED"]})
    (table / ".hoodie" / "archived" / ".commits_.archive.1_1-0-1").write_bytes(
        avro_data_block(instant, schema, entries)
    )
    audit = audit_table(str(table))
    assert audit.ok, audit.errors
    assert any(f.kind == "archived-instants" for f in audit.findings)
