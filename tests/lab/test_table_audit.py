"""`commitlab verify --table` without the input: each damage, made on a copy of one good table,
is an error finding naming what is wrong, and the command exits 1; a legal table exits 0.

The good table is written once per module by the simulator on the real disk (the unchanged roles,
no Ray, about a second): three commits under the message-bus protocol, then a started instant."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from runtime.cli import main
from runtime.core.config import JobConfig
from runtime.lab.table_audit import audit_table
from runtime.sim import simulate

CFG = JobConfig(
    source="generator",
    protocol="message-bus",
    writers=2,
    checkpoints=3,
    records=600,
    bucket_flush_rows=200,
    partitions=2,
)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    work = tmp_path_factory.mktemp("audit")
    result = simulate(CFG, seed=5, workdir=str(work / "run"), storage="disk")
    assert result.status == "finished" and result.exactly_once.verified, result.exactly_once
    config = {f.name: getattr(CFG, f.name) for f in dataclasses.fields(CFG)}
    config["table"] = result.table
    result_json = work / "result.json"
    result_json.write_text(json.dumps({**result.to_json(), "config": config}, default=str))
    return result.table, [c["instant"] for c in result.commits], str(result_json)


@pytest.fixture()
def copy(good, tmp_path):
    src, commits, result_json = good
    dst = str(tmp_path / "t")
    shutil.copytree(src, dst)
    return dst, commits, result_json


def _hoodie(table: str, name: str) -> str:
    return os.path.join(table, ".hoodie", name)


def _kinds(table: str, **kw) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in audit_table(table, **kw).findings:
        out.setdefault(f.severity, []).append(f.kind)
    return out


def _latest_file(table: str, instant: str, partition: str = "p00") -> str:
    d = os.path.join(table, partition)
    return os.path.join(d, sorted(n for n in os.listdir(d) if n.endswith(f"_{instant}.parquet"))[0])


def test_a_good_table_has_no_error_and_verify_exits_0(copy):
    table, _, _ = copy
    assert "error" not in _kinds(table)
    assert main(["verify", "--table", table]) == 0


def test_the_last_commit_deleted_is_found_by_its_checkpoint_message(copy):
    table, commits, _ = copy
    os.remove(_hoodie(table, f"{commits[-1]}.commit"))
    found = audit_table(table)
    errors = [f for f in found.findings if f.severity == "error"]
    assert [f.kind for f in errors] == ["checkpoint-message-without-commit"], found.findings
    assert commits[-1] in errors[0].message and "message_bus" in errors[0].message
    assert main(["verify", "--table", table]) == 1


def test_a_write_that_failed_before_its_commit_is_legal(copy):
    """The same files without a message saying it committed: a failed write awaiting rollback,
    which Hudi allows (a warning: a later instant started after it), not an error."""
    table, commits, _ = copy
    os.remove(_hoodie(table, f"{commits[-1]}.commit"))
    shutil.rmtree(_hoodie(table, os.path.join(".aux", "message_bus")))
    kinds = _kinds(table)
    assert "error" not in kinds and kinds["warning"] == ["pending-files"]
    assert main(["verify", "--table", table]) == 0


def test_the_run_record_names_a_lost_last_commit(copy):
    table, commits, result_json = copy
    os.remove(_hoodie(table, f"{commits[-1]}.commit"))
    shutil.rmtree(_hoodie(table, os.path.join(".aux", "message_bus")))
    assert _kinds(table, expected_commits=commits)["error"] == ["lost-commit"]
    assert main(["verify", "--result", result_json, "--table", table]) == 1


def test_a_completed_instant_missing_in_the_middle_is_a_gap(copy):
    table, commits, _ = copy
    os.remove(_hoodie(table, f"{commits[1]}.commit"))
    found = [f for f in audit_table(table).findings if f.severity == "error"]
    assert [f.kind for f in found] == ["lost-commit"]
    assert commits[1] in found[0].message and "prevCommit" in found[0].message
    assert main(["verify", "--table", table]) == 1


def test_duplicate_keys_across_two_file_groups_of_a_partition(copy):
    """A second file group holding the same records, listed in the commit metadata (so only the
    uniqueness check can see it)."""
    table, commits, _ = copy
    last = commits[-1]
    src = _latest_file(table, last)
    name = f"00000009-dup0-0000-0000-000000000000-0_0-0-0_{last}.parquet"
    shutil.copy(src, os.path.join(os.path.dirname(src), name))
    meta_path = _hoodie(table, f"{last}.commit")
    meta = json.load(open(meta_path))
    stat = dict(meta["partitionToWriteStats"]["p00"][0])
    stat.update(fileId=name.split("_")[0], path=f"p00/{name}", fileSizeInBytes=os.path.getsize(src))
    stat["numWrites"] = pq.ParquetFile(src).metadata.num_rows
    meta["partitionToWriteStats"]["p00"].append(stat)
    json.dump(meta, open(meta_path, "w"))
    found = [f for f in audit_table(table).findings if f.severity == "error"]
    assert [f.kind for f in found] == ["duplicate-key"], found
    assert "across two or more file groups" in found[0].message
    assert main(["verify", "--table", table]) == 1


def test_a_corrupt_commit_file_is_a_finding_with_its_name(copy):
    table, commits, _ = copy
    with open(_hoodie(table, f"{commits[1]}.commit"), "w") as f:
        f.write('{"partitionToWriteStats": {"p00": [')
    found = [f for f in audit_table(table).findings if f.severity == "error"]
    assert found and found[0].kind == "corrupt-commit" and found[0].file == f".hoodie/{commits[1]}.commit"
    assert main(["verify", "--table", table]) == 1


def test_a_truncated_parquet_file_is_a_finding_with_its_name(copy):
    table, commits, _ = copy
    path = _latest_file(table, commits[-1])
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    rel = os.path.relpath(path, table)
    found = {f.kind: f for f in audit_table(table).findings if f.severity == "error"}
    assert found["corrupt-parquet"].file == rel and found["size-mismatch"].file == rel
    assert main(["verify", "--table", table]) == 1


def test_a_base_file_its_commit_lists_deleted_is_a_missing_file(copy):
    table, commits, _ = copy
    path = _latest_file(table, commits[-1])
    os.remove(path)
    found = {f.kind: f for f in audit_table(table).findings if f.severity == "error"}
    assert found["missing-file"].file == os.path.relpath(path, table)
    assert main(["verify", "--table", table]) == 1


def test_a_base_file_of_no_instant_is_an_orphan(copy):
    table, commits, _ = copy
    src = _latest_file(table, commits[-1])
    orphan = os.path.basename(src).replace(commits[-1], "29991231000000000")
    shutil.copy(src, os.path.join(os.path.dirname(src), orphan))
    assert _kinds(table)["error"] == ["orphan-file"]


def test_verify_result_re_derives_the_expected_state_of_a_generator_run(copy, capsys):
    table, commits, result_json = copy
    assert main(["verify", "--result", result_json, "--table", table]) == 0
    assert "verified" in capsys.readouterr().out
    # a changed value is now a mismatch against the regenerated input
    path = _latest_file(table, commits[-1])
    t = pq.read_table(path)
    i = t.column_names.index("payload")
    pq.write_table(t.set_column(i, "payload", [["tampered"] + t.column(i).to_pylist()[1:]]), path)
    assert main(["verify", "--result", result_json, "--table", table]) == 1
    assert "mismatched 1" in capsys.readouterr().out
