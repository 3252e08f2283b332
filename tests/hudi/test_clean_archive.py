"""Hudi's cleaner and archiver after each commit (runtime.hudi.client.cleaner, runtime.hudi.client.archiver):
a long run keeps its active timeline bounded, publishes ``.clean`` instants with Hudi's schemas,
deletes only superseded file versions, and moves old instants to the archived timeline, where
``runtime.hudi.timeline.archived_timeline`` reads them back; ``verify`` passes and the official reader
reads the table. Bad values are refused before anything starts, as Hudi's write config refuses them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from runtime.cli import main
from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.dfs_components import Component, component_of
from runtime.hudi.client.archiver import ARCHIVED_META_ENTRY_SCHEMA
from runtime.hudi.client.table_services import (
    FLINK_DEFAULTS,
    WRITE_CLIENT_DEFAULTS,
    TableServiceConfigError,
    TableServices,
)
from runtime.hudi.formats import clean_metadata
from runtime.hudi.formats.log_format import SCHEMA, LogFileName, read_blocks
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import open_metadata_table
from runtime.hudi.timeline.archived_timeline import archived_commit_metadata, archived_instants
from runtime.lab.table_audit import audit_table
from runtime.sim import simulate
from tests.writer.test_rollback_instants import _decode, _timeline

SMALL = {"clean_retain_commits": "2", "archive_min_commits": "3", "archive_max_commits": "4"}
# HoodieArchivedMetaEntry.avsc (0.14): the fields a reader resolves the lab's entries against
HUDI_ARCHIVED_META_ENTRY_FIELDS = [
    "hoodieCommitMetadata",
    "hoodieCleanMetadata",
    "hoodieCompactionMetadata",
    "hoodieRollbackMetadata",
    "hoodieSavePointMetadata",
    "commitTime",
    "actionType",
    "version",
    "hoodieCompactionPlan",
    "hoodieCleanerPlan",
    "actionState",
    "hoodieReplaceCommitMetadata",
    "hoodieRequestedReplaceMetadata",
]

# HoodieCleanerPlan.avsc / HoodieCleanMetadata.avsc in 0.14 (1.x appends extraMetadata)
HUDI_CLEANER_PLAN_FIELDS = [
    "earliestInstantToRetain",
    "lastCompletedCommitTimestamp",
    "policy",
    "filesToBeDeletedPerPartition",
    "version",
    "filePathsToBeDeletedPerPartition",
    "partitionsToBeDeleted",
]
HUDI_CLEAN_METADATA_FIELDS = [
    "startCleanTime",
    "timeTakenInMillis",
    "totalFilesDeleted",
    "earliestCommitToRetain",
    "lastCompletedCommitTimestamp",
    "partitionMetadata",
    "version",
    "bootstrapPartitionMetadata",
]


def _writer_fields(path: Path) -> list[str]:
    """The field names of the schema an Avro container file embeds."""
    return [f["name"] for f in fastavro.reader(io.BytesIO(path.read_bytes())).writer_schema["fields"]]


def _run(tmp_path: Path, checkpoints: int, **kw: object):
    cfg = dict(source="generator", writers=1, records=600, keys=40, partitions=1, checkpoints=checkpoints)
    result = simulate(JobConfig(**{**cfg, **kw}), seed=1, workdir=str(tmp_path))
    assert result.status == "finished" and result.exactly_once.verified, result.exactly_once
    return result, tmp_path / "table"


@pytest.mark.parametrize(
    ("protocol", "table_type", "version"),
    [("ckp-meta", "copy-on-write", "6"), ("coordination-rpc", "merge-on-read", "9")],
)
def test_a_long_run_keeps_the_timeline_bounded_cleans_superseded_files_and_archives(
    tmp_path, protocol, table_type, version
):
    result, table = _run(
        tmp_path,
        64,
        protocol=protocol,
        table_type=table_type,
        table_version=version,
        compaction_delta_commits=3,
        **SMALL,
    )
    dfs, base = open_dfs(str(table))
    hudi = HudiTable.open(dfs, base)
    timeline = hudi.timeline()
    # bounded: at most max completed commits (and compactions), at most max completed cleans, but
    # for those the metadata table's latest compaction holds back (nothing from it on is archived)
    mdt = open_metadata_table(hudi)
    held = mdt.timeline().completed_compactions()[-1:] if mdt is not None else []
    assert len([ts for ts in timeline.completed_instants() if not held or ts < held[0]]) <= 4
    cleans = [i.ts for i in timeline.instants if i.action == clean_metadata.CLEAN and i.state == "completed"]
    assert 1 <= len(cleans) <= 4
    # every commit of the run is on the active timeline or the archived one, and recorded
    archived = archived_instants(hudi)
    run_commits = {c["instant"] for c in result.commits}
    assert len(run_commits) == 64
    assert run_commits <= set(timeline.completed_commits()) | set(archived)
    assert {c.instant for c in archived_commit_metadata(hudi)} >= run_commits - set(timeline.completed_commits())
    # the clean instants decode with Hudi's schemas and name the files they deleted
    extra = hudi.version.layout_2
    for ts in cleans:
        done = next(p for p in _timeline(table).iterdir() if p.name.startswith(ts) and p.name.endswith(".clean"))
        meta = _decode(done, clean_metadata.CLEAN_METADATA_SCHEMA[extra])
        plan = _decode(_timeline(table) / f"{ts}.clean.requested", clean_metadata.CLEANER_PLAN_SCHEMA[extra])
        extra_field = ["extraMetadata"] if extra else []
        assert _writer_fields(done) == HUDI_CLEAN_METADATA_FIELDS + extra_field
        assert _writer_fields(_timeline(table) / f"{ts}.clean.requested") == HUDI_CLEANER_PLAN_FIELDS + extra_field
        assert plan["policy"] == "KEEP_LATEST_COMMITS" and meta["startCleanTime"] == ts
        assert meta["earliestCommitToRetain"] == plan["earliestInstantToRetain"]["timestamp"]
        deleted = [f["filePath"] for files in plan["filePathsToBeDeletedPerPartition"].values() for f in files]
        assert meta["totalFilesDeleted"] == len(deleted) > 0
        for path in deleted:
            assert not Path(path).exists()
            _assert_superseded(timeline, Path(path))
    audit = audit_table(str(table), expected_commits=[c["instant"] for c in result.commits])
    assert audit.ok, [f.message for f in audit.errors]
    rows = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(table)).build().read())
    assert rows.num_rows == result.exactly_once.expected


def _assert_superseded(timeline, path: Path) -> None:
    """A deleted file's file group still has a newer committed base file on disk."""
    name = path.name
    parsed, log = parse_base_file_name(name), LogFileName.parse(name)
    file_id, instant = (parsed[0], parsed[2]) if parsed else (log.file_id, log.base_instant)
    newer = [
        p
        for p in path.parent.iterdir()
        if (q := parse_base_file_name(p.name))
        and q[0] == file_id
        and q[2] > instant
        and timeline.contains_or_before_start(q[2])
    ]
    assert newer, f"{name} was deleted with no newer committed version of its file group"


def test_the_archived_timeline_is_hudis_log_of_archived_meta_entries(tmp_path):
    """Version 6: archive log files whose Avro blocks carry a HoodieArchivedMetaEntry schema
    whose fields are Hudi's, in Hudi's order; completed commits carry their metadata."""
    _, table = _run(tmp_path, 12, protocol="operator-event", **SMALL)
    logs = sorted((table / ".hoodie" / "archived").glob(".commits_.archive.*_1-0-1"))
    assert logs and logs[0].name == ".commits_.archive.1_1-0-1"
    (block,) = read_blocks(logs[0].read_bytes(), logs[0].name)
    schema = json.loads(block.header[SCHEMA])
    names = [f["name"] for f in schema["fields"]]
    assert schema["name"] == "HoodieArchivedMetaEntry" and schema == ARCHIVED_META_ENTRY_SCHEMA
    assert names == [n for n in HUDI_ARCHIVED_META_ENTRY_FIELDS if n in names]
    dfs, base = open_dfs(str(table))
    commits = archived_commit_metadata(HudiTable.open(dfs, base))
    assert commits and all(
        c.doc["partitionToWriteStats"] and "checkpoint.id" in c.doc["extraMetadata"] for c in commits
    )


def test_with_the_services_off_nothing_is_cleaned_or_archived(tmp_path):
    off = {"clean_retain_commits": "off", "archive_min_commits": "off", "archive_max_commits": "off"}
    result, table = _run(tmp_path, 8, protocol="operator-event", **off)
    assert not [p for p in _timeline(table).iterdir() if ".clean" in p.name]
    assert not list((table / ".hoodie" / "archived").iterdir())
    dfs, base = open_dfs(str(table))
    assert len(HudiTable.open(dfs, base).timeline().completed_commits()) == len(result.commits) == 8


def test_release_resolves_to_the_modelled_writers_defaults():
    assert TableServices.parse("release", "release", "release", FLINK_DEFAULTS) == TableServices(30, 40, 50)
    assert TableServices.parse("release", "release", "release", WRITE_CLIENT_DEFAULTS) == TableServices(10, 20, 30)
    assert TableServices.parse("off", "release", "release", FLINK_DEFAULTS) == TableServices(0, 40, 50)
    assert not TableServices.parse("5", "off", "release", FLINK_DEFAULTS).archives
    assert JobConfig().clean_retain_commits == JobConfig().archive_min_commits == "release"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--archive-min-commits", "5", "--archive-max-commits", "5"], "--archive-max-commits 5 must be greater than"),
        (["--clean-retain-commits", "40"], "--archive-min-commits 40 must be greater than --clean-retain-commits 40"),
        (["--clean-retain-commits", "-1"], "--clean-retain-commits must be a positive number of commits"),
        (["--archive-max-commits", "many"], "--archive-max-commits must be a positive number of commits"),
    ],
)
def test_bad_values_exit_2_naming_the_flag_before_anything_starts(tmp_path, capsys, no_ray, flags, message):
    code = main(["run", "--source", "generator", "--quiet", "--out", str(tmp_path / "out"), *flags])
    assert code == 2
    assert message in capsys.readouterr().out
    assert not (tmp_path / "out" / "table").exists()


def test_the_check_is_hudis_write_config_check():
    with pytest.raises(TableServiceConfigError, match="archive.min_commits to be greater than clean.retain_commits"):
        TableServices.parse("3", "3", "4", FLINK_DEFAULTS)


def test_clean_instants_are_a_component_of_their_own():
    for path in (
        "/t/.hoodie/20260101000000001.clean.requested",
        "/t/.hoodie/20260101000000001.clean",
        "/t/.hoodie/timeline/20260101000000001_20260101000000002.clean",
    ):
        assert component_of(path) == Component.CLEAN
    assert component_of("/t/.hoodie/20260101000000001.commit") == Component.TIMELINE


def test_with_a_metadata_table_nothing_newer_than_its_latest_compaction_is_archived(tmp_path):
    """HoodieTimelineArchiver: no archiving before the metadata table's first compaction (every
    10 delta commits), none past its latest; without the metadata table the same run archives."""
    runs = {}
    for mdt in ("true", "false"):
        archive_only = {**SMALL, "clean_retain_commits": "off"}  # 7 metadata delta commits: no compaction yet
        _, table = _run(tmp_path / mdt, 6, protocol="coordination-rpc", metadata_table=mdt, **archive_only)
        dfs, base = open_dfs(str(table))
        runs[mdt] = archived_instants(HudiTable.open(dfs, base))
    assert not runs["true"] and runs["false"]
