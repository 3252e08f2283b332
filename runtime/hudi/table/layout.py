"""The table's layout is the table's: a job's options checked against an existing table, before
anything starts.

The bucket index puts a record in file group ``bucket = hash(key) % numBuckets`` of its partition
(:mod:`runtime.data.bucket`). A second job writing the same table with another ``numBuckets`` puts
the same key into a second file group of the partition: the snapshot then holds the key twice. So
the bucket count is written into ``.hoodie/hoodie.properties`` when the table is created, under
Hudi's own config key ``hoodie.bucket.index.num.buckets`` (``HoodieIndexConfig.BUCKET_INDEX_NUM_BUCKETS``),
and a later job:

* that does not give ``--buckets`` takes the table's count;
* that gives another count, or meets a table without the property (an older commitlab or another
  writer made it, so the count its file groups were written with is unknown), is refused;
* whose key fields, table name or table type differ from the table's is refused too (the table
  name seeds this lab's file ids, so another name is another set of file groups).

The bucket count does not follow the writer count: a write task owns the buckets the partitioner
gives it, as Hudi's Flink ``BucketIndexPartitioner.partition`` assigns a bucket to a subtask for any
parallelism (``hudi-flink/.../sink/partitioner/BucketIndexPartitioner.java``; later releases through
``BucketIndexUtil.getPartitionIndexFunc``). Here ``task = bucket % writers``
(:mod:`runtime.data.workload`): Hudi's later formula whenever the bucket count is a multiple of
the writer count, another one-owner assignment otherwise.

Difference from Hudi (docs/fidelity/layout.md): Hudi 0.11 - 1.1 keeps the bucket count a write
config only (``HoodieTableConfig`` has no bucket property; apache/hudi#13241 shows the corruption
a changed ``hoodie.bucket.index.num.buckets`` causes, #8459 discusses making it a table config,
HUDI-5996 / PR #8338 proposed this start-up check; neither is merged). Hudi's readers ignore the
extra property.

The check reads ``hoodie.properties`` through :mod:`runtime.core.dfs` (local paths and S3 URIs
alike) and never writes: a refused run leaves the table as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.config import ConfigError, JobConfig
from runtime.core.dfs import Dfs, DfsError, DfsNotFound, open_dfs
from runtime.core.job_options import HOODIE_TABLE_TYPE
from runtime.hudi.table.hudi_table import refuse_foreign_directory
from runtime.hudi.table.table_config import BUCKETS_KEY, COPY_ON_WRITE, TableProps, parse_properties
from runtime.hudi.timeline.instant import HOODIE
from runtime.hudi.timeline.table_version import TABLE_VERSIONS

PROPERTIES_FILE = "hoodie.properties"
TABLE_VERSIONS_WRITTEN = tuple(str(v) for v in TABLE_VERSIONS)
FRESH_TABLE = "or write to a new --table"


@dataclass(frozen=True)
class TableLayout:
    """What an existing table's ``hoodie.properties`` says about how it is laid out."""

    path: str
    properties: dict[str, str]

    @property
    def num_buckets(self) -> int | None:
        """Buckets per partition; None when the table does not record it (or not as a number)."""
        value = self.properties.get(BUCKETS_KEY, "")
        return int(value) if value.isdigit() and int(value) > 0 else None


def read_layout(dfs: Dfs, base_path: str) -> TableLayout | None:
    """The layout of the table at ``base_path``; None when there is no ``hoodie.properties``."""
    props_path = Dfs.join(base_path.rstrip("/"), HOODIE, PROPERTIES_FILE)
    try:
        text = dfs.read_bytes(props_path).decode("utf-8", errors="replace")
    except DfsNotFound:
        return None
    return TableLayout(base_path, parse_properties(text))


def resolve_layout(cfg: JobConfig) -> JobConfig:
    """``cfg`` with the existing table's bucket count when ``--buckets`` was not given; raises
    :class:`ConfigError` naming the property, both values and the fix when ``cfg`` disagrees with
    the table at ``cfg.table``. A path without a table: ``cfg`` unchanged (it creates one)."""
    try:
        dfs, base = open_dfs(cfg.table, role="preflight")
        layout = read_layout(dfs, base)
        if layout is None:
            refuse_foreign_directory(dfs, base)
    except DfsError as exc:
        raise ConfigError(f"--table {cfg.table}: cannot read {HOODIE}/{PROPERTIES_FILE}: {exc}") from None
    if layout is None:
        return cfg
    check_fields(cfg, layout)
    return cfg.replace(buckets=check_buckets(cfg, layout))


def check_fields(cfg: JobConfig, layout: TableLayout) -> None:
    """Refuses a table of another type or version, or whose name or key fields differ from the
    options (each named by its flag, with the table's value to pass instead)."""
    p, where = layout.properties, f"the table at {layout.path}"
    table_type = p.get("hoodie.table.type", COPY_ON_WRITE).upper()
    if table_type != HOODIE_TABLE_TYPE[cfg.table_type]:
        theirs = {v: k for k, v in HOODIE_TABLE_TYPE.items()}.get(table_type)
        fix = f"pass --table-type {theirs} (the table's), " if theirs else ""
        raise ConfigError(
            f"{where} has hoodie.table.type={table_type} but --table-type is {cfg.table_type}: {fix}{FRESH_TABLE}"
        )
    version = p.get("hoodie.table.version", "6")
    if version not in TABLE_VERSIONS_WRITTEN:
        raise ConfigError(
            f"{where} has hoodie.table.version={version}; this lab writes versions "
            f"{', '.join(TABLE_VERSIONS_WRITTEN)}: {FRESH_TABLE}"
        )
    if version != cfg.table_version:
        raise ConfigError(
            f"--table-version: this run writes version {cfg.table_version} (the default, release, is what "
            f"{cfg.protocol}'s Hudi release writes) but {where} has hoodie.table.version={version}, and a table is "
            f"never upgraded here; fix: pass --table-version {version} (the table's), {FRESH_TABLE}"
        )
    props = TableProps.for_job(cfg)
    want = props.properties()
    for prop, flag in (
        ("hoodie.table.name", "--table-name"),
        ("hoodie.table.recordkey.fields", "--key"),
        ("hoodie.table.partition.fields", "--partition-field"),
        (props.rules.ordering_field_key, "--precombine-field"),
    ):
        theirs = p.get(prop)
        if theirs == want[prop]:
            continue
        if theirs is None:
            raise ConfigError(
                f"{where} has no {prop} in {HOODIE}/{PROPERTIES_FILE} ({flag} is {want[prop]!r}): {FRESH_TABLE}"
            )
        raise ConfigError(
            f"{where} has {prop}={theirs} but {flag} is {want[prop]!r}: "
            f"pass {flag} {theirs} (the table's), {FRESH_TABLE}"
        )


def check_buckets(cfg: JobConfig, layout: TableLayout) -> int:
    """The bucket count the run must use: the table's. Refuses a different ``--buckets``, a table
    that does not record its count, and more writers than the table has buckets."""
    where, theirs = f"the table at {layout.path}", layout.num_buckets
    if theirs is None:
        raise ConfigError(
            f"{where} has no {BUCKETS_KEY} in {HOODIE}/{PROPERTIES_FILE} (an older commitlab or another writer "
            "created it), so the bucket count of its file groups is unknown and another count would put a key "
            f"into two file groups of one partition: {FRESH_TABLE}"
        )
    if cfg.buckets and cfg.buckets != theirs:
        raise ConfigError(
            f"{where} has {BUCKETS_KEY}={theirs} but --buckets is {cfg.buckets}: a key would land in two file "
            f"groups of one partition; pass --buckets {theirs} or omit it (the table's count is used), {FRESH_TABLE}"
        )
    if theirs < cfg.writers:
        raise ConfigError(
            f"{where} has {BUCKETS_KEY}={theirs} but --writers is {cfg.writers}: some write task would own no "
            f"file group; use --writers {theirs} or fewer, {FRESH_TABLE}"
        )
    return theirs
