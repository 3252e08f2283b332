"""Job configuration: one dataclass, validated once, shipped to every role.

Hudi's and Flink's defaults (1 s wait tick, 10 min checkpoint timeout, 256 MB buckets) are scaled
down here so a run takes seconds; every value is a field, so a study can set Hudi's real numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from runtime.core.codec import message
from runtime.core.fault_spec import FaultSpec


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the option and what is allowed."""


@message
@dataclass
class Schedule:
    """Deterministic schedule knobs: what each round holds and how the job manager behaves.

    ``rounds`` gives the number of records each round carries (round k = the records before
    barrier k); ``None`` spreads ``records`` evenly over the checkpoints.
    """

    rounds: list[int] | None = None
    abort_checkpoints: list[int] = field(default_factory=list)
    # checkpoint id -> seconds the job manager waits before notifying completion
    notify_delay_s: dict[int, float] = field(default_factory=dict)
    # checkpoint id -> seconds a cleaning action holds the table lock after that commit (#19902)
    clean_lock_s: dict[int, float] = field(default_factory=dict)


@message
@dataclass
class JobConfig:
    protocol: str = "message-bus"
    writers: int = 2
    checkpoints: int = 5
    records: int = 10_000
    source: str = "spark"  # "spark": prepared by PySpark on Ray (RayDP); "generator": in Python
    table: str = "./commitlab-table"
    table_name: str = "commitlab"
    # the record's fields (a user's --input names its own)
    key_field: str = "key"
    partition_field: str = "partition"
    precombine_field: str = "ts"
    input_path: str = ""  # parquet, CSV or JSON read by Spark; empty: generate the workload
    input_format: str = ""  # empty: from the file names
    # generated workload
    keys: int = 0  # distinct keys; 0 means records // 2
    update_ratio: float = -1.0  # fraction of records updating a seen key; < 0: from keys
    skew: str = "uniform"  # or "zipf"
    zipf_s: float = 1.1
    partitions: int = 4
    payload_bytes: int = 32
    seed: int = 42
    # Spark on Ray
    spark_executors: int = 1
    spark_executor_cores: int = 1
    spark_executor_memory: str = "1G"
    # layout
    buckets: int = 0  # buckets per partition; 0 means 2 per writer
    # data flow
    source_batch_rows: int = 1_000  # records per batch a source emits
    bucket_flush_rows: int = 20_000  # Hudi write.batch.size, in rows
    task_buffer_rows: int = 100_000  # Hudi write.task.max.size, in rows
    input_queue_batches: int = 8  # bounded input queue of a write task (back-pressure)
    # timing (Hudi/Flink defaults in comments)
    checkpoint_interval_s: float = 0.2  # Flink: user-set
    checkpoint_timeout_s: float = 30.0  # Flink: 10 min
    wait_tick_s: float = 0.05  # Hudi: 1 s
    instant_wait_timeout_s: float = 0.0  # Hudi: = checkpoint timeout; 0 means that
    commit_ack_timeout_s: float = 10.0  # Hudi write.commit.ack.timeout (P1)
    deadlock_threshold_s: float = 2.0  # blocked this long on a mail in its own mailbox: deadlock
    rpc_timeout_s: float = 10.0  # Hudi/Flink RPC ask timeout
    timeline_refresh_requests: int = 100  # RFC-50: the server rescans after this many requests
    write_status_timeout_s: float = 10.0  # RFC-32 coordinator waiting for WRITE_STATUS (Hudi: 300 s)
    topic_retention_records: int = 10_000  # control topic retention
    # P5: what ends a Kafka Connect commit. "wall": the coordinator schedules END_COMMIT
    # kafka_commit_interval_s after START_COMMIT, as Hudi's ConnectTransactionCoordinator does;
    # "checkpoint": each Flink checkpoint trigger ends it (every protocol runs the same rounds)
    control_topic_interval: str = "wall"
    kafka_commit_interval_s: float = 0.2  # Hudi hoodie.kafka.commit.interval.secs: 60 s
    job_timeout_s: float = 300.0  # the whole run; the job is stopped with a diagnosis after it
    max_restarts: int = 3  # failovers (restart from the last completed checkpoint) before giving up
    # what a task failure restarts: "global" (every role, the coordinator included: Flink's
    # restart-all) or "region" (the write tasks, their sources and the checkpointing; the
    # coordinator keeps running and re-initialises when every task bootstrapped again)
    failover: str = "global"
    # after a region failover the coordinator answers a task's bootstrap only once every task's
    # has arrived, so no task writes into an instant about to be rolled back; False is Hudi
    # before HUDI-6194 (a task that bootstrapped early may write into that instant)
    hold_bootstraps: bool = True
    # P2 message-bus only: a flush made after the round's instant was confirmed keeps that
    # instant; False is PR #3915 as shipped, which re-reads the message and hands a second
    # eager flush after an aborted checkpoint the literal 'aborted'
    p2_fix_aborted_reread: bool = False
    placement: str = "spread"  # role actors over the nodes: spread, pack, strict-spread, none
    faults: list[FaultSpec] = field(default_factory=list)  # armed fault points (runtime.faults.injector)
    schedule: Schedule = field(default_factory=Schedule)

    # -- derived -------------------------------------------------------------------------------

    @property
    def num_keys(self) -> int:
        return self.keys or max(1, self.records // 2)

    @property
    def num_buckets(self) -> int:
        return self.buckets or 2 * self.writers

    @property
    def instant_wait_timeout(self) -> float:
        return self.instant_wait_timeout_s or self.checkpoint_timeout_s

    @property
    def bootstrap_hold_s(self) -> float:
        """How long the coordinator holds a task's bootstrap answer after a region failover,
        waiting for the other tasks: a task's first wait for an instant, and at least an RPC
        timeout, since restarted actors come up over seconds on a loaded machine."""
        return max(self.instant_wait_timeout, self.rpc_timeout_s)

    def rounds(self) -> list[int]:
        """Records per round; round k (1-based) is emitted before barrier k."""
        if self.schedule.rounds is not None:
            return list(self.schedule.rounds)
        base, extra = divmod(self.records, self.checkpoints)
        return [base + (1 if i < extra else 0) for i in range(self.checkpoints)]

    def replace(self, **changes: Any) -> JobConfig:
        return dataclasses.replace(self, **changes)

    def validate(self, known_protocols: list[str] | None = None) -> JobConfig:
        """Raises ConfigError naming the first bad option; returns self for chaining."""
        positive_ints = (
            "writers",
            "checkpoints",
            "partitions",
            "source_batch_rows",
            "timeline_refresh_requests",
            "bucket_flush_rows",
            "task_buffer_rows",
            "input_queue_batches",
        )
        for name in positive_ints:
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.records < 0:
            raise ConfigError(f"--records must not be negative, got {self.records}")
        for name in ("checkpoint_interval_s", "wait_tick_s", "deadlock_threshold_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("checkpoint_timeout_s", "job_timeout_s", "commit_ack_timeout_s", "rpc_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.instant_wait_timeout_s < 0:
            raise ConfigError(
                f"instant_wait_timeout_s must not be negative (0 means the checkpoint "
                f"timeout), got {self.instant_wait_timeout_s}"
            )
        if self.buckets < 0 or self.keys < 0:
            raise ConfigError("--buckets and --keys must not be negative")
        if self.num_buckets < self.writers:
            raise ConfigError(
                f"--buckets {self.num_buckets} is less than --writers {self.writers}: "
                "some write task would own no file group; use at least one bucket per writer"
            )
        if self.schedule.rounds is not None:
            if len(self.schedule.rounds) != self.checkpoints:
                raise ConfigError(
                    f"schedule.rounds has {len(self.schedule.rounds)} entries but --checkpoints is "
                    f"{self.checkpoints}: give one record count per checkpoint"
                )
            if sum(self.schedule.rounds) != self.records:
                raise ConfigError("schedule.rounds must add up to --records")
        if known_protocols is not None and self.protocol not in known_protocols:
            raise ConfigError(f"unknown protocol {self.protocol!r}; choose one of {', '.join(known_protocols)}")
        if self.source not in ("generator", "spark"):
            raise ConfigError(f"unknown source {self.source!r}; choose generator or spark")
        if self.input_path and self.source != "spark":
            raise ConfigError("--input is read by Spark: use it with --source spark")
        if self.source == "generator" and (self.key_field, self.partition_field, self.precombine_field) != (
            "key",
            "partition",
            "ts",
        ):
            raise ConfigError(
                "the generator source writes fields key, partition and ts; "
                "--key/--partition-field/--precombine-field go with --input"
            )
        if not isinstance(self.p2_fix_aborted_reread, bool):
            raise ConfigError(
                f"p2_fix_aborted_reread must be true or false, got {self.p2_fix_aborted_reread!r}: "
                "pass --p2-fix-aborted-reread to turn it on"
            )
        if self.control_topic_interval not in ("wall", "checkpoint"):
            raise ConfigError(
                f"--control-topic-interval must be wall or checkpoint, got {self.control_topic_interval!r}"
            )
        for name in ("kafka_commit_interval_s", "write_status_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.failover not in ("global", "region"):
            raise ConfigError(f"--failover must be global or region, got {self.failover!r}")
        if self.skew not in ("uniform", "zipf"):
            raise ConfigError(f"--skew must be uniform or zipf, got {self.skew!r}")
        if self.update_ratio >= 1.0:
            raise ConfigError(f"--update-ratio must be below 1, got {self.update_ratio}")
        if self.input_format and self.input_format not in ("parquet", "csv", "json"):
            raise ConfigError(f"--input-format must be parquet, csv or json, got {self.input_format!r}")
        if self.placement not in ("spread", "pack", "strict-spread", "none"):
            raise ConfigError(f"--placement must be spread, pack, strict-spread or none, got {self.placement!r}")
        if not self.table_name.strip():
            raise ConfigError("--table-name must not be empty")
        return self
