"""`commitlab verify`'s headline follows its exit code: "consistent" only when it exits 0; each
finding names the file or instant; a merge-on-read log file the official reader cannot decode is
found and named by verify's own decoding; one commit the reader cannot read does not stop the
checks of the others."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

from runtime.cli import main
from runtime.core.config import JobConfig
from runtime.sim import simulate


def _cfg(**kw) -> JobConfig:
    base = dict(source="generator", writers=2, checkpoints=3, records=1_000, bucket_flush_rows=200)
    base.update(kw)
    return JobConfig(**base)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    work = tmp_path_factory.mktemp("headline")
    cow = simulate(_cfg(), seed=5, workdir=str(work / "cow"), storage="disk")
    mor = simulate(_cfg(table_type="merge-on-read"), seed=5, workdir=str(work / "mor"), storage="disk")
    assert cow.exactly_once.verified and mor.exactly_once.verified
    return cow.table, mor.table


def _copy(src: str, tmp_path) -> str:
    dst = str(tmp_path / "t")
    shutil.copytree(src, dst)
    return dst


def _with_property(src: str, tmp_path, old: str, new: str) -> str:
    """A copy of the table at ``src`` whose hoodie.properties says ``new`` where it said ``old``."""
    table = _copy(src, tmp_path)
    props = os.path.join(table, ".hoodie", "hoodie.properties")
    text = open(props).read()
    assert old in text
    open(props, "w").write(text.replace(old, new))
    return table


def _verify(table: str, capsys) -> tuple[int, str]:
    code = main(["verify", "--table", table])
    out = " ".join(capsys.readouterr().out.split())  # the table's cells wrap: one line of words
    return code, out


def test_a_good_table_is_consistent_and_exits_0(tables, capsys):
    code, out = _verify(tables[0], capsys)
    assert code == 0 and "consistent" in out and "NOT consistent" not in out


def test_a_stray_parquet_file_is_named_and_not_consistent(tables, tmp_path, capsys):
    table = _copy(tables[0], tmp_path)
    part = next(p for p in glob.glob(f"{table}/*") if os.path.isdir(p) and not p.endswith(".hoodie"))
    shutil.copy(glob.glob(f"{part}/*.parquet")[0], f"{part}/stray-file.parquet")
    code, out = _verify(table, capsys)
    assert code == 1
    assert "stray-file" in out and f"{os.path.basename(part)}/stray-file.parquet" in out
    assert "NOT consistent" in out and ": consistent" not in out


def test_a_log_file_with_flipped_bytes_is_named_by_verifys_own_decoding(tables, tmp_path, capsys):
    table = _copy(tables[1], tmp_path)
    log = sorted(glob.glob(f"{table}/*/.*.log.*"))[0]
    data = bytearray(open(log, "rb").read())
    for i in range(len(data) // 2, len(data) // 2 + 40):
        data[i] ^= 0xFF
    open(log, "wb").write(bytes(data))
    code, out = _verify(table, capsys)
    assert code == 1 and "corrupt-log" in out and os.path.basename(log) in out
    assert "NOT consistent" in out
    # the commits whose files are intact are still checked
    assert "of 3 commits' incremental reads checked" in out and "0 of 3" not in out


def test_a_table_of_an_unknown_version_is_bad_input_and_not_consistent(tables, tmp_path, capsys):
    table = _with_property(tables[0], tmp_path, "hoodie.table.version=6", "hoodie.table.version=5")
    code, out = _verify(table, capsys)
    assert code == 2 and "version 5" in out  # not a table this lab or the reader reads: the user's input
    assert "NOT consistent" in out and ": consistent" not in out


def test_a_table_whose_properties_the_reader_refuses_names_the_file(tables, tmp_path, capsys):
    table = _with_property(tables[0], tmp_path, "file.format=PARQUET", "file.format=ORC")
    code, out = _verify(table, capsys)
    assert code == 1 and "reader-cannot-open" in out and "ORC" in out
    assert "NOT consistent" in out and ": consistent" not in out
