"""A job's options checked and resolved once, by whoever starts the run, before any work starts:
the configuration's own checks, the ``--input`` (read as the Spark job reads it), the armed faults
against the protocol, ``--table-version release`` resolved to the version the protocol's Hudi
release writes, and the existing table's layout (its bucket count; options that disagree with it
are refused: :mod:`runtime.hudi.table.layout`; a directory that is not a table is refused).

:class:`ResolvedJob` is what that gives: the job driver and both hosts take one, so a run cannot
start from options nobody checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.config import ConfigError, JobConfig
from runtime.core.fault_spec import MESSAGE_FAULTS
from runtime.core.job_options import NON_BLOCKING
from runtime.data.errors import InputError
from runtime.data.input_format import CheckedInput, check_input
from runtime.flink.job_manager import JobManager
from runtime.flink.source import Source
from runtime.hudi.client.concurrency import warn_config
from runtime.hudi.client.table_services import TableServices
from runtime.hudi.formats.avro_schema import UnsupportedColumn, check_columns
from runtime.hudi.table.layout import resolve_layout
from runtime.job.table_schema import reconcile
from runtime.protocols import get_protocol
from runtime.writer.coordinator import Coordinator
from runtime.writer.write_task import WriteTask


@dataclass(frozen=True)
class ResolvedJob:
    """A job's configuration, validated and resolved against its table (:func:`prepare_job`)."""

    config: JobConfig
    # ``--input`` as its check read it (files, format, schema), so the Spark job does not read it
    # again to check it; None for the generator
    input: CheckedInput | None = None


def prepare_job(config: JobConfig, *, fresh_table: bool = False) -> ResolvedJob:
    """``config`` checked (:func:`validate_job`) and resolved against the table it writes; raises
    ConfigError. ``fresh_table``: the run writes a new table (the simulator's), so there is no
    table whose layout to read."""
    cfg = validate_job(config)
    checked = check_input_of(cfg)
    return ResolvedJob(cfg if fresh_table else resolve_layout(cfg), checked)


def check_input_of(cfg: JobConfig) -> CheckedInput | None:
    """``--input`` read as the Spark job will read it (:func:`runtime.data.input_format.check_input`),
    every column's type one a Hudi table can hold, and held against the existing table's schema
    (:func:`runtime.job.table_schema.reconcile`); raises InputError naming the flag."""
    if not cfg.input_path:
        return None
    checked = check_input(
        cfg.input_path, cfg.input_format or None, cfg.key_field, cfg.partition_field, cfg.precombine_field
    )
    try:
        check_columns(checked.schema)
    except UnsupportedColumn as exc:
        raise InputError(f"--input {cfg.input_path}: {exc}") from None
    return reconcile(checked, cfg.table, cfg.key_field, cfg.partition_field, cfg.table_name)


def prepared(job: JobConfig | ResolvedJob) -> ResolvedJob:
    """``job`` as given when prepared already, else prepared now (:func:`prepare_job`)."""
    return job if isinstance(job, ResolvedJob) else prepare_job(job)


def rpc_methods(protocol_name: str) -> frozenset[str]:
    """The RPC methods of every role of a job of ``protocol_name``: what a messaging fault (or a
    search's loss) can hit."""
    protocol = get_protocol(protocol_name)
    return frozenset(
        (
            *WriteTask.RPC_METHODS,
            *Source.RPC_METHODS,
            *JobManager.RPC_METHODS,
            *Coordinator.OWN_RPC_METHODS,
            *protocol.coordinator_side.RPC_METHODS,
            *protocol.extra_rpc_methods,
        )
    )


def validate_job(cfg: JobConfig) -> JobConfig:
    """The checks a job's options get before any work starts, on either host: the configuration's
    own (:meth:`JobConfig.validate`), and that every armed fault can fire under the protocol (a
    bus to delete, an RPC method for a messaging fault to hit). Raises ConfigError. Returns ``cfg``,
    ``--table-version release`` resolved to the version the protocol's Hudi release writes."""
    protocol = get_protocol(cfg.protocol)  # a spec that does not load fails here, before any host starts
    cfg.validate()
    warn_config(cfg)  # --lock-provider without a multi-writer --concurrency-mode
    methods = rpc_methods(cfg.protocol)
    if cfg.allow_empty_commit != "release" and protocol.empty_commit_default is None:
        raise ConfigError(
            f"--allow-empty-commit {cfg.allow_empty_commit}: the Hudi release {cfg.protocol} models has no "
            "hoodie.allow.empty.commit for its Flink writer (it came with 0.14, HUDI-6127; the Kafka Connect "
            "sink always commits); leave it at release, or choose ckp-meta, timeline-server or coordination-rpc"
        )
    for spec in cfg.faults:
        if spec.point.startswith("bus.") and not protocol.messages_on_dfs:
            raise ConfigError(
                f"--faults {spec.text()}: {cfg.protocol} keeps no messages on the DFS, so there is no "
                "directory to delete; the fault could never fire (it applies to message-bus, ckp-meta, "
                "timeline-server)"
            )
        if spec.point.startswith("control_topic.") and protocol.name != "control-topic":
            raise ConfigError(
                f"--faults {spec.text()}: {cfg.protocol} has no control topic; the fault applies to control-topic"
            )
        if spec.point in MESSAGE_FAULTS and spec.target and spec.target not in methods:
            raise ConfigError(
                f"--faults {spec.text()}: no role of a {cfg.protocol} job has an RPC method {spec.target!r}; "
                f"name one of {', '.join(sorted(methods))}"
            )
    if cfg.table_version == "release":  # the version the protocol's Hudi release writes
        cfg = cfg.replace(table_version=str(protocol.release_table_version))
    if cfg.concurrency_mode == NON_BLOCKING and cfg.table_version == "6":
        raise ConfigError(
            "--concurrency-mode non-blocking needs table version 8 or 9 (Hudi 1.x, which brought non-blocking "
            "concurrency control): there each log file is named after the instant that wrote it and joins its "
            "file slice by completion time; on version 6 a log file is named after its slice's base instant and "
            "a version, which two writers appending to one file group would both take. Give --table-version 8 "
            "or 9, or a protocol of Hudi 1.x (coordination-rpc, coordination-rpc-async)"
        )
    # the cleaner's and archiver's options, checked as Hudi's write config checks them
    TableServices.parse(
        cfg.clean_retain_commits, cfg.archive_min_commits, cfg.archive_max_commits, protocol.table_service_defaults
    )
    if cfg.metadata_table == "release":  # FlinkOptions.METADATA_ENABLED of the protocol's release
        cfg = cfg.replace(metadata_table=str(protocol.metadata_table_default).lower())
    protocol.check_config(cfg)  # what the protocol itself cannot run
    return cfg
