"""A Hudi table's config: what ``hoodie.properties`` holds (``HoodieTableConfig``) and the
write options this lab keeps beside it, the meta columns of its base files, and the error a
missing, malformed or foreign table raises."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from runtime.core.config import JobConfig
from runtime.core.errors import UserError
from runtime.core.job_options import HOODIE_TABLE_TYPE
from runtime.hudi.formats.rollback_metadata import rollback_instants_on
from runtime.hudi.table.markers import markers_on
from runtime.hudi.timeline.instant import COMMIT, DELTA_COMMIT
from runtime.hudi.timeline.table_version import TableVersion, table_version

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)

COPY_ON_WRITE, MERGE_ON_READ = "COPY_ON_WRITE", "MERGE_ON_READ"
PARTITION_METADATA = ".hoodie_partition_metadata"


# Hudi's bucket index config key (``HoodieIndexConfig.BUCKET_INDEX_NUM_BUCKETS``). Hudi keeps it a
# write config; this lab records it in hoodie.properties at creation (see runtime.hudi.table.layout).
BUCKETS_KEY = "hoodie.bucket.index.num.buckets"


class TableError(UserError, RuntimeError):
    """The table is missing, malformed or belongs to another configuration; the message says
    which, and what to do."""


@dataclass(frozen=True)
class TableProps:
    table_name: str
    record_key_field: str
    partition_field: str
    precombine_field: str
    database: str = "default"
    # buckets per partition (file groups of the bucket index); 0: not stated (not recorded/checked)
    num_buckets: int = 0
    table_type: str = COPY_ON_WRITE  # hoodie.table.type
    version: int = 6  # hoodie.table.version
    # a write config, not a table property (two props of one table compare equal whatever it
    # says): whether writes leave markers (--markers)
    markers: bool = field(default=False, compare=False)
    # likewise: whether a rollback publishes rollback instants (--rollback-instants)
    rollback_instants: bool = field(default=False, compare=False)
    # likewise: Hudi's write.precombine (--write-precombine: release, true, false)
    write_precombine: str = field(default="release", compare=False)
    # likewise: whether the writer keeps the metadata table (--metadata-table; None: leave it as
    # found, for a table opened by something other than a job)
    metadata_table: bool | None = field(default=None, compare=False)
    # likewise: the writer's --clean-retain-commits, --archive-min-commits, --archive-max-commits,
    # from which the metadata table's own cleaner and archiver take theirs (metadata_services)
    service_options: tuple[str, str, str] = field(default=("release", "release", "release"), compare=False)

    @classmethod
    def for_job(cls, cfg: JobConfig) -> TableProps:
        """The table a job writes: its key fields, its bucket count, its type and version (the
        job's ``--table-version``, resolved by ``prepare_job`` from the protocol's release)."""
        if not cfg.table_version.isdigit():
            raise TableError(
                f"--table-version {cfg.table_version} is not resolved to a number: validate the job "
                "(runtime.job.prepare.prepare_job) before making its table"
            )
        return cls(
            cfg.table_name,
            cfg.key_field,
            cfg.partition_field,
            cfg.precombine_field,
            num_buckets=cfg.num_buckets,
            table_type=HOODIE_TABLE_TYPE[cfg.table_type],
            version=int(cfg.table_version),
            markers=markers_on(cfg.markers),
            rollback_instants=rollback_instants_on(cfg.rollback_instants),
            write_precombine=cfg.write_precombine,
            # unresolved (release, before prepare_job): the metadata table is left as found
            metadata_table=None if cfg.metadata_table == "release" else cfg.metadata_table == "true",
            service_options=(cfg.clean_retain_commits, cfg.archive_min_commits, cfg.archive_max_commits),
        )

    @property
    def rules(self) -> TableVersion:
        return table_version(self.version)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def precombines_flush(self) -> bool:
        """Whether a flush keeps one record per key (``write.precombine``): Hudi's Flink
        ``HoodieTableFactory.setupWriteOptions`` turns it on for a copy-on-write upsert only."""
        if self.write_precombine == "release":
            return not self.merge_on_read
        return self.write_precombine == "true"

    @property
    def write_action(self) -> str:
        """The action of a writer's instant (``CommitUtils.getCommitActionType``): a delta commit
        on merge-on-read, a commit on copy-on-write."""
        return DELTA_COMMIT if self.merge_on_read else COMMIT

    def properties(self) -> dict[str, str]:
        checksum = zlib.crc32(f"{self.database}.{self.table_name}".encode())
        buckets = {BUCKETS_KEY: str(self.num_buckets)} if self.num_buckets > 0 else {}
        return {
            "hoodie.table.name": self.table_name,
            "hoodie.table.type": self.table_type,
            "hoodie.table.version": str(self.version),
            "hoodie.timeline.layout.version": str(self.rules.timeline_layout),
            "hoodie.table.partition.fields": self.partition_field,
            "hoodie.table.recordkey.fields": self.record_key_field,
            self.rules.ordering_field_key: self.precombine_field,
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.datasource.write.hive_style_partitioning": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.timeline.timezone": "UTC",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
            "hoodie.database.name": self.database,
            "hoodie.archivelog.folder": "archived",
            **self.rules.extra_properties(),
            **buckets,
            "hoodie.table.checksum": str(checksum),  # Hudi writes it last
        }


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties (the subset Hudi writes: key=value lines, # comments, \\: escapes)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip().replace("\\:", ":").replace("\\=", "=")
    return props
