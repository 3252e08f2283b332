"""The table's layout is the table's (runtime.hudi.table.layout, TableProps.num_buckets).

What users rely on: the bucket count a table was created with is written into hoodie.properties
under Hudi's key and read back; a later job without --buckets takes it whatever its --writers; a
job whose options disagree with the table (bucket count, key fields, table name, type) is refused
with a message naming the property, both values and the fix, and the table is left untouched;
the same holds for a table on S3.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hudi import HudiTableBuilder

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import open_dfs
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.layout import read_layout, resolve_layout
from runtime.hudi.table.table_config import BUCKETS_KEY, TableError, TableProps, parse_properties
from runtime.job.prepare import validate_job

PROPS = TableProps("t", "key", "partition", "ts", num_buckets=4)
S3_BUCKET = "lab"  # the bucket the shared s3 fixture creates (tests/conftest.py)


def _table(path: Path | str, props: TableProps = PROPS) -> str:
    dfs, base = open_dfs(str(path))
    HudiTable.create_or_open(dfs, base, props)
    return str(path)


def _fingerprint(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256 of its bytes)."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = Path(d, name)
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _cfg(table: str, **kw: object) -> JobConfig:
    # validated as every run is (--table-version release resolved to the protocol's)
    return validate_job(JobConfig(source="generator", table=table, table_name="t", **kw))  # type: ignore[arg-type]


def test_the_bucket_count_is_written_at_creation_under_hudis_key_and_read_back(tmp_path):
    path = _table(tmp_path / "t")
    text = Path(path, ".hoodie", "hoodie.properties").read_text()
    assert f"{BUCKETS_KEY}=4\n" in text
    assert text.rstrip().splitlines()[-1].startswith("hoodie.table.checksum=")  # still the last entry
    dfs, base = open_dfs(path)
    assert HudiTable.open(dfs, base).props.num_buckets == 4
    layout = read_layout(dfs, base)
    assert layout is not None and layout.num_buckets == 4
    # Hudi's own reader opens the table with the extra property
    assert HudiTableBuilder.from_base_uri(path).build().table_name == "t"


def test_a_job_takes_the_jobs_bucket_count_when_it_creates_the_table(tmp_path):
    cfg = _cfg(str(tmp_path / "new"), writers=3)
    assert TableProps.for_job(cfg).num_buckets == 6
    assert resolve_layout(cfg) is cfg  # no table yet: nothing to resolve


def test_a_run_without_buckets_uses_the_tables_count_whatever_its_writers(tmp_path):
    path = _table(tmp_path / "t")
    for writers in (1, 3, 4):
        cfg = resolve_layout(_cfg(path, writers=writers).validate())
        assert cfg.buckets == 4 and cfg.num_buckets == 4
        assert TableProps.for_job(cfg) == PROPS  # what the job then opens the table with


def test_a_run_with_the_tables_bucket_count_is_accepted(tmp_path):
    path = _table(tmp_path / "t")
    assert resolve_layout(_cfg(path, writers=3, buckets=4)).num_buckets == 4


def test_another_bucket_count_is_refused_naming_the_property_both_values_and_the_fix(tmp_path):
    path = _table(tmp_path / "t")
    before = _fingerprint(tmp_path / "t")
    with pytest.raises(ConfigError) as exc:
        resolve_layout(_cfg(path, writers=3, buckets=6))
    msg = str(exc.value)
    assert BUCKETS_KEY in msg and "=4" in msg and "--buckets is 6" in msg
    assert "pass --buckets 4 or omit it" in msg
    assert _fingerprint(tmp_path / "t") == before


def test_a_table_without_the_property_is_refused_and_left_as_it_was(tmp_path):
    path = _table(tmp_path / "old", TableProps("t", "key", "partition", "ts"))  # as an older commitlab wrote it
    assert BUCKETS_KEY not in parse_properties(Path(path, ".hoodie", "hoodie.properties").read_text())
    before = _fingerprint(tmp_path / "old")
    for buckets in (0, 4):
        with pytest.raises(ConfigError, match=f"has no {BUCKETS_KEY}.*new --table"):
            resolve_layout(_cfg(path, writers=2, buckets=buckets))
    assert _fingerprint(tmp_path / "old") == before


def test_more_writers_than_the_tables_buckets_is_refused(tmp_path):
    path = _table(tmp_path / "t")
    with pytest.raises(ConfigError, match=r"=4 but --writers is 5.*--writers 4 or fewer"):
        resolve_layout(_cfg(path, writers=5))


@pytest.mark.parametrize(
    "option,value,prop,flag",
    [
        ("key_field", "id", "hoodie.table.recordkey.fields", "--key"),
        ("partition_field", "region", "hoodie.table.partition.fields", "--partition-field"),
        ("precombine_field", "version", "hoodie.table.precombine.field", "--precombine-field"),
        ("table_name", "other", "hoodie.table.name", "--table-name"),
    ],
)
def test_other_key_fields_or_table_name_are_refused_with_the_flag(tmp_path, option, value, prop, flag):
    path = _table(tmp_path / "t")
    before = _fingerprint(tmp_path / "t")
    cfg = validate_job(JobConfig(source="spark", table=path, table_name="t").replace(**{option: value}))
    with pytest.raises(ConfigError) as exc:
        resolve_layout(cfg)
    theirs = {"key_field": "key", "partition_field": "partition", "precombine_field": "ts", "table_name": "t"}[option]
    assert f"{prop}={theirs} but {flag} is {value!r}" in str(exc.value)
    assert f"pass {flag} {theirs}" in str(exc.value)
    assert _fingerprint(tmp_path / "t") == before


def test_a_table_of_the_other_type_is_refused_naming_the_flag_that_fits_it(tmp_path):
    path = _table(tmp_path / "t")
    props_file = Path(path, ".hoodie", "hoodie.properties")
    props_file.write_text(props_file.read_text().replace("COPY_ON_WRITE", "MERGE_ON_READ"))
    before = props_file.read_bytes()
    with pytest.raises(
        ConfigError,
        match="hoodie.table.type=MERGE_ON_READ but --table-type is copy-on-write: pass --table-type merge-on-read",
    ):
        resolve_layout(_cfg(path))
    assert resolve_layout(_cfg(path).replace(table_type="merge-on-read")).table_type == "merge-on-read"
    assert props_file.read_bytes() == before  # a refused run leaves the table as it was


def test_opening_with_another_bucket_count_raises_table_error(tmp_path):
    """The second line of defence, for callers that open the table without the pre-flight."""
    path = _table(tmp_path / "t")
    dfs, base = open_dfs(path)
    with pytest.raises(TableError, match=f"{BUCKETS_KEY}='4' but this job uses '6'"):
        HudiTable.create_or_open(dfs, base, TableProps("t", "key", "partition", "ts", num_buckets=6))
    HudiTable.create_or_open(dfs, base, TableProps("t", "key", "partition", "ts"))  # not stated: not checked


def test_the_check_reads_a_table_on_s3(s3):
    uri = s3.uri(S3_BUCKET, "layout/t")
    _table(uri)
    assert resolve_layout(_cfg(uri, writers=3)).num_buckets == 4
    with pytest.raises(ConfigError, match=r"--buckets 4 or omit it"):
        resolve_layout(_cfg(uri, writers=3, buckets=8))
    dfs, base = open_dfs(uri)
    layout = read_layout(dfs, base)
    assert layout is not None and layout.num_buckets == 4
