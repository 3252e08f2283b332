"""The job a simulation runs: the generator source, its table on disk or the simulated disk.

:func:`prepare_config` checks what the simulator cannot run (an input file, a broker, an unknown
storage, a merge-on-read table on the simulated disk) before anything starts, and places the table:
under the run's workdir on disk (which must not hold one unless the run writes on an existing
table), at a fixed path on the simulated disk so traces never name a directory.
"""

from __future__ import annotations

import os

from runtime.core.config import ConfigError, JobConfig
from runtime.hudi.timeline.instant import HOODIE
from runtime.job.prepare import ResolvedJob, prepare_job

STORAGES = ("disk", "memory")  # disk: real parquet, the official reader verifies; memory: the simulated disk
MEMORY_TABLE = "/commitlab-sim/table"  # the table's path on the simulated disk (same in every run)


def _data_entries(table: str) -> list[str]:
    return [e for e in os.listdir(table) if not e.startswith(".")] if os.path.isdir(table) else []


def prepare_config(
    job: JobConfig | ResolvedJob, workdir: str | None, storage: str = "disk", existing_table: bool = False
) -> ResolvedJob:
    """The job a simulation runs: the generator source, the table under ``workdir`` (on the
    simulated disk: at a fixed path, so traces never name a directory); a plain config is
    checked here (:func:`~runtime.job.prepare.prepare_job`: the table is always a new one)."""
    check_simulatable(job.config if isinstance(job, ResolvedJob) else job, storage)
    if storage == "memory":
        return placed(job, MEMORY_TABLE)
    if workdir is None:
        raise ConfigError(
            "a simulation on disk writes its table under a workdir: pass workdir (or use storage='memory')"
        )
    table = os.path.join(os.path.abspath(workdir), "table")
    resolved = placed(job, table)
    if not existing_table and (
        os.path.isfile(os.path.join(table, HOODIE, "hoodie.properties")) or _data_entries(table)
    ):
        raise ConfigError(
            f"{table} already holds a table: a simulation writes a fresh one (same seed, "
            "same files); remove it or use another workdir"
        )
    return resolved


def check_simulatable(cfg: JobConfig, storage: str) -> None:
    """Refuses, naming the flag, what the simulator cannot run."""
    if cfg.input_path:
        raise ConfigError("the simulator runs the built-in generator; --input needs the Ray host")
    if cfg.control_topic != "model":
        raise ConfigError(
            f"--control-topic {cfg.control_topic}: the simulator runs the control topic's model only (a broker "
            "is real time, not the seed's); use commitlab run or compare for a broker"
        )
    if storage not in STORAGES:
        raise ConfigError(f"unknown storage {storage!r}; choose one of {', '.join(STORAGES)}")
    if storage == "memory" and cfg.table_type != "copy-on-write":
        # the simulated disk's own snapshot reader reads base files; log files need the official one
        raise ConfigError(
            f"--table-type {cfg.table_type} runs on the real disk only (--storage disk): the simulated "
            "disk's snapshot reader reads base files, not log files"
        )


def placed(job: JobConfig | ResolvedJob, table: str) -> ResolvedJob:
    """``job`` on the generator source, writing a new table at ``table``; a plain config is
    prepared now, a prepared job keeps its checks (neither the source nor the table path
    changes what they found)."""
    if isinstance(job, ResolvedJob):
        return ResolvedJob(job.config.replace(source="generator", table=table))
    return prepare_job(job.replace(source="generator", table=table), fresh_table=True)
