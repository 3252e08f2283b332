"""`commitlab run` on a table another run made: options that disagree with the table's layout are
refused with exit 2 before Ray or Spark start, and the table stays byte-identical.

The first run is the simulator's (same table format, no Ray); the second is the CLI's ``run``,
whose Ray start is replaced by a failure, so a check that came too late fails the test instead
of starting Ray.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from runtime.core.config import JobConfig
from runtime.hudi.table.table_config import BUCKETS_KEY
from runtime.sim.host import simulate

SMALL = dict(records=600, checkpoints=2, partitions=2, bucket_flush_rows=10_000)


def _fingerprint(root: Path) -> dict[str, str]:
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = Path(d, name)
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def written(tmp_path) -> Path:
    """A table written by a verified run with 2 writers and 4 buckets per partition."""
    result = simulate(JobConfig(writers=2, **SMALL), seed=1, workdir=str(tmp_path / "first"))
    assert result.status == "finished" and result.exactly_once.verified
    return tmp_path / "first" / "table"


def _run(table: Path, out: Path, *extra: str) -> int:
    from runtime.cli import main

    return main(["run", "--source", "generator", "--table", str(table), "--out", str(out), "--quiet", *extra])


def test_the_first_run_records_its_bucket_count(written):
    text = (written / ".hoodie" / "hoodie.properties").read_text()
    assert f"{BUCKETS_KEY}=4\n" in text


def test_another_buckets_on_an_existing_table_exits_2_before_ray_and_leaves_it_intact(
    written, tmp_path, no_ray, capsys
):
    before = _fingerprint(written)
    assert _run(written, tmp_path / "out", "--writers", "3", "--buckets", "6") == 2
    said = " ".join(capsys.readouterr().out.split())  # the console folds long lines
    assert "configuration error" in said and BUCKETS_KEY in said
    assert "--buckets is 6" in said and "pass --buckets 4 or omit it" in said
    assert _fingerprint(written) == before
    assert not (tmp_path / "out" / "result.json").exists()


def test_writers_3_on_a_table_without_the_property_exits_2_and_leaves_it_intact(written, tmp_path, no_ray, capsys):
    """A table as the previous version wrote it (no bucket property): a run with --writers 3 would
    have written 6 buckets over its 4 (the same key in two file groups); it is refused."""
    props = written / ".hoodie" / "hoodie.properties"
    props.write_text("".join(line for line in props.read_text().splitlines(True) if BUCKETS_KEY not in line))
    before = _fingerprint(written)
    assert _run(written, tmp_path / "out", "--writers", "3") == 2
    said = " ".join(capsys.readouterr().out.split())  # the console folds long lines
    assert f"has no {BUCKETS_KEY}" in said and "new --table" in said
    assert _fingerprint(written) == before


def test_another_key_field_exits_2_naming_the_flag(written, tmp_path, no_ray, capsys):
    before = _fingerprint(written)
    rc = _run(written, tmp_path / "out", "--writers", "2", "--table-name", "other")
    assert rc == 2
    assert "hoodie.table.name=commitlab but --table-name is 'other'" in " ".join(capsys.readouterr().out.split())
    assert _fingerprint(written) == before
