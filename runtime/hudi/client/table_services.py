"""The table services after a writers' commit: the cleaner, then the archiver, with the options
that tune or switch them off.

``--clean-retain-commits`` is Hudi's ``clean.retain_commits`` (``hoodie.cleaner.commits.retained``),
``--archive-min-commits`` / ``--archive-max-commits`` its ``archive.min_commits`` /
``archive.max_commits`` (``hoodie.keep.min.commits`` / ``max``). Each takes a number, ``release``
(the default of the writer the protocol models: the Flink writer's 30, 40 and 50 from 0.10 to 1.1,
``FlinkOptions``; the Kafka Connect sink's write-client defaults 10, 20 and 30,
``HoodieCleanConfig``/``HoodieArchivalConfig``) or ``off`` (``clean.async.enabled`` /
``hoodie.archive.automatic`` false; either archive option off stops archiving). The numbers are
checked as ``HoodieWriteConfig.Builder.validate`` checks them: max above min, min above the
retained commits (else "there is risk of incremental pull missing data"), before anything starts.

Sources: :mod:`runtime.hudi.client.cleaner`, :mod:`runtime.hudi.client.archiver`;
``BaseHoodieWriteClient.mayBeCleanAndArchive`` (0.14: ``autoCleanOnCommit`` then
``autoArchiveOnCommit``).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.config import ConfigError
from runtime.hudi.client import archiver, cleaner
from runtime.hudi.client.table_metadata import TableMetadataWriter
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.active_timeline import Timeline

RELEASE, OFF = "release", "off"
CLEAN_FLAG, MIN_FLAG, MAX_FLAG = "--clean-retain-commits", "--archive-min-commits", "--archive-max-commits"


class TableServiceConfigError(ConfigError):
    """Clean or archive options Hudi would refuse; the message names the flag and the fix."""


@dataclass(frozen=True)
class ReleaseDefaults:
    """A writer's cleaner and archiver defaults: retained commits, min and max commits kept."""

    clean_retain_commits: int = 30
    archive_min_commits: int = 40
    archive_max_commits: int = 50


FLINK_DEFAULTS = ReleaseDefaults()  # FlinkOptions, Hudi 0.10-1.1
WRITE_CLIENT_DEFAULTS = ReleaseDefaults(10, 20, 30)  # HoodieCleanConfig / HoodieArchivalConfig


@dataclass(frozen=True)
class TableServices:
    """What runs after a writers' commit: 0 switches the cleaner (``clean_retain_commits``) or
    the archiver (``archive_max_commits``) off."""

    clean_retain_commits: int = 0
    archive_min_commits: int = 0
    archive_max_commits: int = 0

    @classmethod
    def parse(cls, retain: str, min_commits: str, max_commits: str, defaults: ReleaseDefaults) -> TableServices:
        """The options' values (numbers, ``release`` or ``off``), checked as Hudi checks them."""
        r = _number(CLEAN_FLAG, retain, defaults.clean_retain_commits)
        lo = _number(MIN_FLAG, min_commits, defaults.archive_min_commits)
        hi = _number(MAX_FLAG, max_commits, defaults.archive_max_commits)
        if not lo or not hi:
            return cls(r, 0, 0)
        if hi <= lo:
            raise TableServiceConfigError(
                f"{MAX_FLAG} {hi} must be greater than {MIN_FLAG} {lo} (Hudi: increase archive.max_commits to be "
                f"greater than archive.min_commits); raise {MAX_FLAG} or lower {MIN_FLAG}"
            )
        if r and lo <= r:
            raise TableServiceConfigError(
                f"{MIN_FLAG} {lo} must be greater than {CLEAN_FLAG} {r} (Hudi: increase archive.min_commits to be "
                "greater than clean.retain_commits, otherwise instants the cleaner keeps files for would be "
                f"archived); raise {MIN_FLAG} and {MAX_FLAG}, or lower {CLEAN_FLAG}"
            )
        return cls(r, lo, hi)

    @property
    def archives(self) -> bool:
        return self.archive_max_commits > 0

    @property
    def any(self) -> bool:
        return bool(self.clean_retain_commits) or self.archives

    def after_commit(self, table: HudiTable, now: float, metadata: TableMetadataWriter | None = None) -> None:
        """``mayBeCleanAndArchive``: the clean, then the archiving, from one listing of the
        timeline (the post-commit services' table); a completed clean is listed again.
        ``metadata``: the metadata table's writer when it is on (the clean's delta commit)."""
        files = table.timeline_files()
        if self.clean_retain_commits and cleaner.clean(
            table, self.clean_retain_commits, now, Timeline(files.values()), metadata=metadata
        ):
            files = table.timeline_files()
        if self.archives:
            policy = archiver.ArchivePolicy(
                self.archive_min_commits, self.archive_max_commits, self.clean_retain_commits
            )
            archiver.archive(table, policy, files)


def _number(flag: str, value: str, default: int) -> int:
    if value == RELEASE:
        return default
    if value == OFF:
        return 0
    if not value.isdigit() or int(value) < 1:
        raise TableServiceConfigError(
            f"{flag} must be a positive number of commits, {RELEASE} (the modelled release's default) or {OFF}, "
            f"got {value!r}"
        )
    return int(value)
