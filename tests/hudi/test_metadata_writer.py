"""The metadata table the lab writes (``--metadata-table``): Hudi's bytes, read back by the official
reader (which lists the table through it from version 8), audited by ``verify``, initialised from
an existing table's files, and absent when off."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from hudi import HudiTableBuilder

from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.hudi.client import write_client
from runtime.hudi.client.metadata_writer import MetadataTableWriter, files_records
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats.hfile import read_hfile, write_hfile
from runtime.hudi.formats.log_format import HFILE_DATA_BLOCK, INSTANT_TIME, SCHEMA, encode_block, read_blocks
from runtime.hudi.formats.metadata_record import SCHEMA_JSON
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.log_reader import hfile_records
from runtime.hudi.table.metadata_table import open_metadata_table, read_files_partition
from runtime.hudi.table.table_config import TableProps, parse_properties
from runtime.job.prepare import validate_job
from runtime.lab.table_audit import audit_table
from runtime.lab.verify import read_snapshot
from runtime.protocols import PROTOCOLS
from runtime.sim import simulate
from tests.hudi.test_table import NAME, ROWS1, ROWS2, commit, read_all, write_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-rs-tables"  # vendored, with their licence
V9_META = "sample_table__mor__avro__v9_txns_simple_meta"
T1, T2 = "20260101000000100", "20260101000000200"


def _fixture_files(tmp_path: Path) -> Path:
    archive = FIXTURES / f"{V9_META}.zip"
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path)
    (files,) = [p for p in tmp_path.glob("*/.hoodie/metadata/files") if "__MACOSX" not in str(p)]
    return files


def test_an_hfile_data_block_is_written_byte_for_byte_as_hudi_writes_it(tmp_path):
    """Hudi 1.1's own log file of the files partition, rewritten from its cells: the same bytes
    (the HFile's creation time is Hudi's wall clock, taken from the file)."""
    for log in sorted(_fixture_files(tmp_path).glob(".files-0000-0_2*.log.*"))[:3]:
        original = log.read_bytes()
        (block,) = read_blocks(original)
        hfile = read_hfile(block.content)
        created = int.from_bytes(hfile.file_info[b"hfile.CREATE_TIME_TS"], "big")
        content = write_hfile(hfile.cells, {b"schema": SCHEMA_JSON.encode()}, create_time_ms=created)
        assert content == block.content
        header = {SCHEMA: SCHEMA_JSON, INSTANT_TIME: block.instant}
        assert encode_block(HFILE_DATA_BLOCK, header, content) == original


def test_the_files_records_decode_as_hudis_do(tmp_path):
    log = sorted(_fixture_files(tmp_path).glob(".files-0000-0_2*.log.*"))[0]
    (block,) = read_blocks(log.read_bytes())
    theirs = dict(hfile_records(block.content, block.header[SCHEMA]))
    changes = {
        key.decode(): {n: (i["size"], i["isDeleted"]) for n, i in r["filesystemMetadata"].items()}
        for key, r in theirs.items()
        if r["type"] == 2
    }
    ours = dict(hfile_records(write_hfile(files_records(changes), {}), SCHEMA_JSON))
    assert ours.keys() == theirs.keys()
    for key, record in theirs.items():
        assert ours[key]["type"] == record["type"] and ours[key]["key"] == record["key"] == ""
        assert ours[key]["filesystemMetadata"] == record["filesystemMetadata"]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_release_turns_the_metadata_table_on_from_hudi_1_0(protocol):
    cfg = validate_job(JobConfig(source="generator", protocol=protocol))
    on = protocol in ("coordination-rpc", "coordination-rpc-async", "two-phase-commit")
    assert cfg.metadata_table == ("true" if on else "false")
    assert TableProps.for_job(cfg).metadata_table is on


def _run(tmp_path: Path, table_type: str, **kwargs) -> tuple[Path, object]:
    cfg = JobConfig(
        source="generator",
        protocol=kwargs.pop("protocol", "coordination-rpc"),
        writers=2,
        checkpoints=4,
        records=2_000,
        bucket_flush_rows=300,
        table_type=table_type,
        **kwargs,
    )
    result = simulate(cfg, workdir=str(tmp_path / "run"), seed=5, storage="disk")
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once
    return tmp_path / "run" / "table", result


def _rows_read(table: Path) -> int:
    return sum(b.num_rows for b in HudiTableBuilder.from_base_uri(str(table)).build().read())


@pytest.mark.parametrize("table_type", ["copy-on-write", "merge-on-read"])
def test_the_official_reader_lists_a_lab_table_through_its_metadata_table(tmp_path, table_type):
    """A base file of a completed instant that the metadata table does not list is invisible to
    the reader: it reads as many rows as were written, a storage listing reads that file too."""
    extra = {"compaction_delta_commits": 2} if table_type == "merge-on-read" else {}
    table, result = _run(tmp_path, table_type, **extra)
    props = parse_properties((table / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.metadata.partitions"] == "files" and props["hoodie.table.version"] == "9"
    expected = result.exactly_once.expected
    assert _rows_read(table) == expected
    base = max(table.glob("p00/*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])
    stray = base.with_name("99999999-0000-0000-0000-000000000000-0" + base.name[base.name.index("_") :])
    shutil.copy(base, stray)
    assert _rows_read(table) == expected  # the metadata table's listing: the copy is not in it
    errors = {(f.kind, f.file) for f in audit_table(str(table)).errors}
    assert ("metadata-missing-file", f"p00/{stray.name}") in errors
    listed = (table / ".hoodie" / "hoodie.properties").read_text().replace("hoodie.table.metadata.partitions=files", "")
    (table / ".hoodie" / "hoodie.properties").write_text(listed)
    assert _rows_read(table) > expected  # listed from storage, the copy's rows come twice


@pytest.mark.parametrize(("protocol", "version"), [("coordination-rpc", "9"), ("ckp-meta", "6")])
def test_verify_passes_a_lab_written_metadata_table(tmp_path, protocol, version):
    table, result = _run(tmp_path, "merge-on-read", protocol=protocol, table_version=version, metadata_table="true")
    audit = audit_table(str(table), [c["instant"] for c in result.commits])
    assert not audit.errors, audit.errors
    dfs, base = open_dfs(str(table), role="test")
    data = HudiTable.open(dfs, base)
    view = read_files_partition(open_metadata_table(data))
    on_storage = {str(p.relative_to(table)) for p in table.glob("p*/*") if p.name != ".hoodie_partition_metadata"}
    assert set(view.files()) == on_storage
    boot = "00000000000000000" if version == "9" else "00000000000000010"
    assert view.timeline.is_completed(boot)
    assert read_snapshot(str(table)).num_rows == result.exactly_once.expected


def test_metadata_table_false_writes_none(tmp_path):
    table, _ = _run(tmp_path, "copy-on-write", metadata_table="false")
    assert not (table / ".hoodie" / "metadata").exists()
    assert "hoodie.table.metadata.partitions" not in (table / ".hoodie" / "hoodie.properties").read_text()


def _props(**kw: object) -> TableProps:
    return TableProps(NAME, "key", "partition", "ts", num_buckets=1, version=9, **kw)  # type: ignore[arg-type]


def test_an_existing_table_gets_a_metadata_table_from_its_files_and_loses_it_when_off(tmp_path):
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    before = write_client.create_or_open(dfs, path, _props())
    stats1 = commit(before, T1, ROWS1, 1)
    assert not Path(before.hoodie, "metadata").exists()
    table = write_client.create_or_open(dfs, path, _props(metadata_table=True))
    stats2 = commit(table, T2, ROWS2, 2)
    view = read_files_partition(open_metadata_table(table))
    assert set(view.files()) == {s.path for s in stats1 + stats2}
    boot = next(Path(table.hoodie, "metadata", "files").glob("files-0000-0_*_00000000000000000.hfile"))
    in_base = {k.decode() for k, _ in hfile_records(boot.read_bytes(), "")}
    assert in_base == {"__all_partitions__"} | {s.partition for s in stats1}  # the first commit's, bootstrapped
    assert not audit_table(path).errors
    write_client.create_or_open(dfs, path, _props(metadata_table=False))
    assert not Path(table.hoodie, "metadata").exists()
    assert "metadata.partitions" not in Path(table.hoodie, "hoodie.properties").read_text()


@pytest.mark.parametrize("version", [6, 9])
def test_the_files_partition_compacts_every_ten_delta_commits(tmp_path, version):
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    props = TableProps(NAME, "key", "partition", "ts", num_buckets=1, version=version, metadata_table=True)
    table = write_client.create_or_open(dfs, path, props)
    stats = []
    for n in range(1, 13):
        stats += commit(table, f"202601010000{n:02d}000", ROWS1 if n % 2 else ROWS2, n)
    view = read_files_partition(open_metadata_table(table))
    (compaction,) = view.timeline.completed_compactions()
    files = Path(table.hoodie, "metadata", "files")
    base = next(files.glob(f"files-0000-0_*_{compaction}.hfile"))
    assert {k.decode() for k, _ in hfile_records(base.read_bytes(), "")} == {"__all_partitions__", "us", "eu", "asia"}
    if version == 6:  # the latest delta commit's time + 001; later logs join its slice
        assert len(compaction) == 20 and compaction.endswith("001")
        assert list(files.glob(f".files-0000-0_{compaction}.log.*"))
    assert set(view.files()) == {s.path for s in stats}
    assert not audit_table(path).errors
    assert len(read_all(table)) == 7  # the keys of ROWS1 and ROWS2, listed through the metadata table


def test_a_rolled_back_instant_leaves_the_metadata_table(tmp_path):
    """An attempt whose metadata delta commit completed but whose data commit did not: the
    rollback undoes the delta commit, so the metadata table lists none of its files."""
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    table = write_client.create_or_open(dfs, path, _props(metadata_table=True, rollback_instants=True))
    kept = commit(table, T1, ROWS1, 1)
    table.start_instant(T2)
    failed = write_files(table, T2, ROWS2)
    changes = {s.partition: {Path(s.path).name: (s.file_size, False)} for s in failed}
    MetadataTableWriter(table).update(T2, changes, None)  # the coordinator failed after this
    assert {s.path for s in failed} <= set(read_files_partition(open_metadata_table(table)).files())
    WriteClient(table).rollback(T2)
    view = read_files_partition(open_metadata_table(table))
    assert set(view.files()) == {s.path for s in kept}
    assert not [i for i in view.timeline.instants if i.ts == T2]
    assert not audit_table(path).errors


def test_a_metadata_delta_commit_left_pending_is_undone_by_the_rollback(tmp_path):
    """A coordinator that failed while the metadata table's delta commit was still inflight
    (version 9 names a completed instant by its completion time, a pending one has none): the
    data rollback removes it and the metadata table lists none of the attempt's files."""
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    table = write_client.create_or_open(dfs, path, _props(metadata_table=True, rollback_instants=True))
    kept = commit(table, T1, ROWS1, 1)
    table.start_instant(T2)
    write_files(table, T2, ROWS2)
    mdt = open_metadata_table(table)
    for state in ("requested", "inflight"):
        dfs.write_bytes(mdt.timeline_file(f"{T2}.deltacommit.{state}"), b"")
    WriteClient(table).rollback(T2)
    view = read_files_partition(open_metadata_table(table))
    assert set(view.files()) == {s.path for s in kept}
    assert not [i for i in view.timeline.instants if i.ts == T2]
    assert not audit_table(path).errors
