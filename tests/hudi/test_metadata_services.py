"""The metadata table's own table services (runtime.hudi.client.metadata_services): a long run keeps its
timeline and its file slices bounded, as Hudi's does; its cleaner deletes only superseded slices,
so the official reader and ``verify`` still see every data file; its delta commits and compactions
write direct markers, whose folder is gone once each commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from hudi import HudiTableBuilder

from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.dfs_components import Component, component_of
from runtime.core.fault_spec import FaultSpec
from runtime.hudi.client.metadata_services import MetadataTableServices
from runtime.hudi.client.metadata_writer import MetadataTableWriter
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.formats import clean_metadata
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.markers import DirectWriteMarkers
from runtime.hudi.table.metadata_table import open_metadata_table, read_files_partition
from runtime.hudi.table.table_config import TableProps
from runtime.hudi.timeline.archived_timeline import archived_instants
from runtime.hudi.timeline.instant import COMPLETED
from runtime.lab.table_audit import audit_table
from runtime.sim import simulate
from tests.hudi.test_table import NAME, ROWS1, ROWS2, commit

SMALL = {"clean_retain_commits": "2", "archive_min_commits": "3", "archive_max_commits": "4"}
CHECKPOINTS = 64


def _run(tmp_path: Path, protocol: str, version: str, **kw: str):
    cfg = JobConfig(
        source="generator",
        writers=1,
        records=600,
        keys=40,
        partitions=1,
        checkpoints=CHECKPOINTS,
        protocol=protocol,
        table_type="merge-on-read",
        table_version=version,
        compaction_delta_commits=3,
        metadata_table="true",
        **kw,
    )
    result = simulate(cfg, seed=1, workdir=str(tmp_path))
    assert result.status == "finished" and result.exactly_once.verified, result.exactly_once
    return result, tmp_path / "table"


@pytest.mark.parametrize(("protocol", "version"), [("coordination-rpc", "9"), ("ckp-meta", "6")])
def test_a_long_run_keeps_the_metadata_timeline_and_slices_bounded(tmp_path, protocol, version):
    """64 data commits and their cleans and compactions: well over a hundred metadata delta
    commits, of which the active timeline keeps what the retained commits need; old file slices
    of the files partition are deleted; readers still list every data file."""
    result, table = _run(tmp_path, protocol, version, **SMALL)
    dfs, base = open_dfs(str(table))
    mdt = open_metadata_table(HudiTable.open(dfs, base))
    timeline = mdt.timeline()
    retain = 20  # DEFAULT_METADATA_CLEANER_COMMITS_RETAINED: the floor over the data table's 2 * 1.2
    assert retain < len(timeline.completed_instants()) <= retain + 10  # + the delta commits since a compaction
    assert (
        len(archived_instants(mdt)) >= 3 * CHECKPOINTS // 2
    )  # of the delta commits of every commit, clean, compaction
    bases = sorted(Path(mdt.base_path, "files").glob("*.hfile"))
    assert len(bases) <= 3  # the latest slice, the one before the earliest retained commit, one more
    cleans = [i.ts for i in timeline.instants if i.action == clean_metadata.CLEAN and i.state == COMPLETED]
    assert cleans
    latest_base = max(parse_base_file_name(p.name)[2] for p in bases)
    for ts in cleans:
        plan = clean_metadata.decode_plan(dfs.read_bytes(mdt.timeline_file(f"{ts}.clean.requested")))
        for path in (p for paths in plan.files.values() for p in paths):
            assert not Path(path).exists() and latest_base not in Path(path).name
    # every data file on storage is listed, and the reader reads every row through the listing
    view = read_files_partition(mdt)
    on_storage = {str(p.relative_to(table)) for p in table.glob("p*/*") if p.name != ".hoodie_partition_metadata"}
    assert set(view.files()) == on_storage
    audit = audit_table(str(table), [c["instant"] for c in result.commits])
    assert audit.ok, [f.message for f in audit.errors]
    rows = sum(b.num_rows for b in HudiTableBuilder.from_base_uri(str(table)).build().read())
    assert rows == result.exactly_once.expected


def test_the_metadata_table_archives_nothing_the_data_tables_active_timeline_holds(tmp_path):
    """Without the data table's archiving its whole timeline stays active, so the metadata
    table's delta commits of those instants stay on its own (getEarliestInstantForMetadataArchival)."""
    result, table = _run(tmp_path, "coordination-rpc", "9", clean_retain_commits="2", archive_min_commits="off")
    dfs, base = open_dfs(str(table))
    data = HudiTable.open(dfs, base)
    mdt_timeline = open_metadata_table(data).timeline()
    first = data.timeline().commits()[0].ts
    kept = {i.ts for i in mdt_timeline.instants}
    assert {c["instant"] for c in result.commits if c["instant"] >= first} <= kept


def test_the_metadata_services_follow_the_data_writers_options():
    """``createMetadataWriteConfig``: retained max(20, data * 1.2), archiving min + 1 and max + 1;
    off and release keep Hudi's write-config numbers (the Flink writer's 30, 40, 50)."""
    props = TableProps(NAME, "key", "partition", "ts")
    assert MetadataTableServices.for_data_table(props) == MetadataTableServices(36, 41, 51)
    small = TableProps(NAME, "key", "partition", "ts", service_options=("2", "3", "4"))
    assert MetadataTableServices.for_data_table(small) == MetadataTableServices(20, 4, 5)
    off = TableProps(NAME, "key", "partition", "ts", service_options=("50", "off", "off"))
    assert MetadataTableServices.for_data_table(off) == MetadataTableServices(60, 41, 51)


@pytest.mark.parametrize("version", [6, 9])
def test_metadata_delta_commits_and_compactions_write_markers_gone_after_commit(tmp_path, version, monkeypatch):
    created: list[tuple[str, str, str]] = []
    original = DirectWriteMarkers.create_if_not_exists

    def record(self: DirectWriteMarkers, partition: str, name: str, io_type: str) -> bool:
        if "/metadata/" in self.folder:
            created.append((self.folder.rsplit("/", 1)[1], name, io_type))
        return original(self, partition, name, io_type)

    monkeypatch.setattr(DirectWriteMarkers, "create_if_not_exists", record)
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    props = TableProps(NAME, "key", "partition", "ts", num_buckets=1, version=version, metadata_table=True)
    table = HudiTable.create_or_open(dfs, path, props)
    instants = [f"202601010000{n:02d}000" for n in range(1, 13)]
    for n, instant in enumerate(instants, 1):
        commit(table, instant, ROWS1 if n % 2 else ROWS2, n)
    mdt = open_metadata_table(table)
    (compaction,) = mdt.timeline().completed_compactions()
    by_instant = {ts: (name, io_type) for ts, name, io_type in created}
    assert by_instant["00000000000000000" if version == 9 else "00000000000000010"][1] == "CREATE"  # its base file
    if version == 9:  # the log file's own marker (createLogMarkerIfNotExists)
        assert by_instant[instants[0]] == (f".files-0000-0_{instants[0]}.log.1_0-0-0", "CREATE")
    else:  # the slice's base file's APPEND marker
        assert by_instant[instants[0]] == ("files-0000-0_0-0-0_00000000000000010.hfile", "APPEND")
    assert by_instant[compaction] == (f"files-0000-0_0-0-0_{compaction}.hfile", "MERGE")
    assert not list(Path(mdt.hoodie, ".temp").glob("*"))  # every folder deleted after its commit
    assert component_of(f"{mdt.hoodie}/.temp/{instants[0]}/files/x.marker.CREATE") == Component.METADATA
    assert component_of(f"{mdt.timeline_dir}/{instants[0]}.clean.requested") == Component.METADATA


def test_a_failed_attempts_metadata_markers_go_with_its_rollback(tmp_path):
    """A coordinator that failed inside the metadata table's delta commit leaves its marker folder;
    the data rollback that undoes the delta commit deletes it (``runRollback``)."""
    dfs, path = open_dfs(str(tmp_path / NAME), role="coordinator")
    props = TableProps(NAME, "key", "partition", "ts", num_buckets=1, version=9, metadata_table=True)
    table = HudiTable.create_or_open(dfs, path, props)
    commit(table, "20260101000001000", ROWS1, 1)
    failed = "20260101000002000"
    table.start_instant(failed)
    mdt = open_metadata_table(table)
    for state in ("requested", "inflight"):
        dfs.write_bytes(mdt.timeline_file(f"{failed}.deltacommit.{state}"), b"")
    log = f".files-0000-0_{failed}.log.1_0-0-0"
    mdt.write_markers(failed).create_if_not_exists("files", log, "CREATE")
    WriteClient(table).rollback(failed)
    assert not Path(mdt.hoodie, ".temp", failed).exists()
    assert not audit_table(path).errors


def test_the_metadata_table_takes_its_instant_times_from_the_data_tables_clock(tmp_path):
    """One JVM, one ``HoodieInstantTimeGenerator.lastInstantTime``: an instant time the metadata
    table issues comes after the data table's last, even at the same moment (the metadata table's
    own clean took the time of the data table's clean it was recording, before)."""
    dfs, base = open_dfs(str(tmp_path / "t"))
    props = TableProps(NAME, "key", "partition", "ts", num_buckets=1, version=9, metadata_table=True)
    table = HudiTable.create_or_open(dfs, base, props)
    data_clean = table.new_instant_time(100.0, table.timeline())
    mdt = MetadataTableWriter(table).mdt
    mdt_clean = mdt.new_instant_time(100.0)
    assert table.new_instant_time(100.0, table.timeline()) > mdt_clean > data_clean


def test_commits_after_a_coordinator_crash_past_the_metadata_tables_first_clean(tmp_path):
    """The coordinator crashes before a commit file after the metadata table's first clean; the
    restarted attempt cleans the data table at a fresh time, and its commits go on: no metadata
    instant shares a requested time with another (they did: the metadata table's clean and the
    delta commit of the data table's clean, and every later commit failed reading the clean)."""
    cfg = JobConfig(
        source="generator",
        writers=1,
        records=1200,
        keys=40,
        partitions=1,
        checkpoints=30,
        protocol="coordination-rpc",
        faults=[FaultSpec("coordinator.before_commit_file", 22)],
        **SMALL,
    )
    result = simulate(cfg, seed=1, workdir=str(tmp_path))
    assert [f.error for f in result.failovers] == ["InjectedCrash: injected crash at coordinator.before_commit_file"]
    assert result.status == "finished" and result.exactly_once.verified, (result.error, result.exactly_once)
    dfs, base = open_dfs(str(tmp_path / "table"))
    mdt = open_metadata_table(HudiTable(dfs, base, TableProps(NAME, "key", "partition", "ts", version=9)))
    assert mdt is not None
    actions: dict[str, set[str]] = {}
    for i in mdt.timeline().instants:
        actions.setdefault(i.ts, set()).add(i.action)
    assert any("clean" in a for a in actions.values())
    assert {ts: a for ts, a in actions.items() if len(a) > 1} == {}
