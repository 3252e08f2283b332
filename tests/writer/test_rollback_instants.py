"""Rollback instants (runtime.hudi.formats.rollback_metadata): a failed write the coordinator rolls back at start
leaves ``.rollback.requested`` (the plan), ``.rollback.inflight`` and a completed ``.rollback``
whose ``HoodieRollbackMetadata`` names the instant undone and the files deleted, as Hudi writes
them; ``verify`` judges the table consistent and the official reader reads it;
``--rollback-instants none`` writes none."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.fault_spec import FaultSpec
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.rollback_metadata import (
    ROLLBACK_METADATA_SCHEMA,
    ROLLBACK_PLAN_SCHEMA,
    RollbackPlan,
    encode_plan,
)
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.lab.table_audit import audit_table
from runtime.sim import simulate

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hudi-rs-tables"


def _failover_run(tmp_path: Path, **kw: object):
    cfg = dict(source="generator", writers=2, checkpoints=4, records=1_200, bucket_flush_rows=300)
    faults = [FaultSpec("task.in_snapshot", 2, 1)]
    result = simulate(
        JobConfig(**{**cfg, "protocol": "operator-event", "faults": faults, **kw}), seed=1, workdir=str(tmp_path)
    )
    assert result.status == "finished" and result.exactly_once.verified
    assert result.rolled_back
    return result, tmp_path / "table"


def _timeline(table: Path) -> Path:
    return table / ".hoodie" / "timeline" if (table / ".hoodie" / "timeline").is_dir() else table / ".hoodie"


def _decode(path: Path, schema: dict) -> dict:
    """The one record of an Avro container file, read with Hudi's schema as the reader's."""
    (record,) = fastavro.reader(io.BytesIO(path.read_bytes()), reader_schema=fastavro.parse_schema(schema))
    return record


def _rollback_files(table: Path) -> list[str]:
    return sorted(p.name for p in _timeline(table).iterdir() if ".rollback" in p.name)


@pytest.mark.parametrize(
    ("table_type", "version"), [("copy-on-write", "6"), ("merge-on-read", "6"), ("merge-on-read", "9")]
)
def test_a_failover_run_publishes_a_rollback_instant_naming_the_instant_it_undid(tmp_path, table_type, version):
    result, table = _failover_run(tmp_path, table_type=table_type, table_version=version)
    files = _rollback_files(table)
    completed = [f for f in files if f.endswith(".rollback")]
    assert len(completed) == len(result.rolled_back)
    times = [f.split("_")[0].split(".")[0] for f in completed]
    assert sorted(files) == sorted(
        [*completed, *(f"{t}.rollback.requested" for t in times), *(f"{t}.rollback.inflight" for t in times)]
    )
    undone = []
    for name, ts in zip(completed, times, strict=True):
        meta = _decode(_timeline(table) / name, ROLLBACK_METADATA_SCHEMA)
        plan = _decode(_timeline(table) / f"{ts}.rollback.requested", ROLLBACK_PLAN_SCHEMA)
        assert meta["startRollbackTime"] == ts
        assert meta["commitsRollback"] == [plan["instantToRollback"]["commitTime"]]
        assert meta["instantsRollback"] == [plan["instantToRollback"]]
        undone += meta["commitsRollback"]
        deleted = [f for p in meta["partitionMetadata"].values() for f in p["successDeleteFiles"]]
        assert meta["totalFilesDeleted"] == len(deleted)
        assert not any(os.path.exists(f) for f in deleted)
        # the rollback's time is after the instant it undid, before the next instant started
        assert ts > meta["commitsRollback"][0]
    assert sorted(undone) == sorted(result.rolled_back)
    # the undone instants are gone from the timeline; the table is consistent and readable
    names = [p.name for p in _timeline(table).iterdir()]
    assert not any(n.startswith(tuple(undone)) for n in names)
    audit = audit_table(str(table), expected_commits=[c["instant"] for c in result.commits])
    assert audit.ok, [f.message for f in audit.errors]
    assert not [f for f in audit.findings if f.kind == "undone-instant-on-timeline"]
    rows = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(table)).build().read())
    assert rows.num_rows == result.exactly_once.expected


def test_a_rollback_file_decodes_as_hudis_own_with_its_schema(tmp_path):
    """The lab's rollback files read with the schema a Hudi-written one embeds (hudi-rs's
    ``v6_nonpartitioned_rollback``), and give the same fields."""
    with zipfile.ZipFile(FIXTURES / "sample_table__mor__parquet__v6_nonpartitioned_rollback.zip") as z:
        name = next(n for n in z.namelist() if n.endswith(".rollback") and "MACOSX" not in n)
        hudi_written = fastavro.reader(io.BytesIO(z.read(name)))
        hudi_schema, hudi_record = hudi_written.writer_schema, next(iter(hudi_written))
    _, table = _failover_run(tmp_path, table_type="merge-on-read", table_version="6")
    ours = next(p for p in _timeline(table).iterdir() if p.name.endswith(".rollback"))
    (record,) = fastavro.reader(io.BytesIO(ours.read_bytes()), reader_schema=hudi_schema)
    assert set(record) == set(hudi_record)
    theirs = json.dumps(fastavro.reader(io.BytesIO(ours.read_bytes())).writer_schema, sort_keys=True)
    assert theirs == json.dumps(hudi_schema, sort_keys=True)


def test_with_rollback_instants_none_a_rollback_writes_no_instant(tmp_path):
    _, table = _failover_run(tmp_path, rollback_instants="none")
    assert _rollback_files(table) == []


def test_a_rollback_a_crash_interrupted_is_resumed_under_its_own_instant_time(tmp_path):
    dfs, base = open_dfs(str(tmp_path / "t"))
    props = TableProps("t", "key", "partition", "ts", rollback_instants=True)
    table = HudiTable.create_or_open(dfs, base, props)
    table.start_instant("20260101000000001")
    # a rollback that saved its plan and went inflight, then its process died
    plan = encode_plan(RollbackPlan("20260101000000001", "commit", []))
    (Path(base) / ".hoodie" / "20260101000000005.rollback.requested").write_bytes(plan)
    (Path(base) / ".hoodie" / "20260101000000005.rollback.inflight").write_bytes(b"")
    timeline = table.timeline()
    assert WriteClient(table).failed_writes(timeline) == ["20260101000000001"]
    WriteClient(table).rollback("20260101000000001", now=1.9e9)
    assert _rollback_files(Path(base)) == [
        "20260101000000005.rollback",
        "20260101000000005.rollback.inflight",
        "20260101000000005.rollback.requested",
    ]


def test_the_rollback_instants_option_takes_release_or_none():
    assert JobConfig().rollback_instants == "release"
    with pytest.raises(ConfigError, match="rollback"):
        JobConfig(rollback_instants="eager").validate()
