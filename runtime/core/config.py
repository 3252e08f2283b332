"""Job configuration: one dataclass, validated once, shipped to every role.

One time scale: every duration Hudi or Flink gives a default to is that default times
``time_scale`` (``--time-scale``), unless set explicitly (an explicit value wins). The defaults,
in seconds before scaling (:data:`HUDI_FLINK_DURATIONS_S`):

* ``wait_tick_s`` 1 s: Hudi 0.10-1.0 ``StreamWriteFunction.instantToWrite`` / ``CkpMetadata`` readers
  poll once a second;
* ``checkpoint_timeout_s`` 600 s: Flink ``execution.checkpointing.timeout`` (10 min);
* ``commit_ack_timeout_s`` and ``instant_wait_timeout_s`` = the checkpoint timeout: Hudi
  ``write.commit.ack.timeout`` (-1: the checkpoint timeout, ``FlinkOptions``);
* ``checkpoint_interval_s`` 4 s: user-set in Flink (no default); 4 s keeps this lab's 0.2 s run;
* ``rpc_timeout_s`` 10 s: Flink ``akka.ask.timeout`` / ``pekko.ask.timeout``;
* ``write_status_timeout_s`` 300 s: Hudi Kafka Connect ``hoodie.kafka.coordinator.write.timeout.secs``
  (its 60 s ``hoodie.kafka.commit.interval.secs`` is the checkpoint interval here).

The default scale, 0.05, keeps a run to seconds on a shared machine (a 10 min timeout becomes
30 s, the 1 s tick 50 ms: the values this lab used before the scale existed). What does not
scale: RPC and DFS latencies (real or simulated) and lock hold times are what they are, so at a
small scale they weigh more against the timeouts than in production.

``timeline_refresh_requests`` (RFC-50's server rescans after N requests) is a count, not a time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from runtime.core.codec import message
from runtime.core.fault_spec import FaultSpec


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the option and what is allowed."""


DEFAULT_TIME_SCALE = 0.05
UNSET = -1.0  # a duration left to its Hudi/Flink default times the time scale
# Hudi's and Flink's defaults in seconds, before the time scale (see the module docstring)
HUDI_FLINK_DURATIONS_S: dict[str, float] = {
    "wait_tick_s": 1.0,
    "checkpoint_timeout_s": 600.0,
    "checkpoint_interval_s": 4.0,
    "rpc_timeout_s": 10.0,
    "write_status_timeout_s": 300.0,
}
# durations whose default is the (effective) checkpoint timeout
CHECKPOINT_TIMEOUT_DURATIONS = ("commit_ack_timeout_s", "instant_wait_timeout_s")
SCALED_DURATIONS = (*HUDI_FLINK_DURATIONS_S, *CHECKPOINT_TIMEOUT_DURATIONS)


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
    # timing: UNSET means the Hudi/Flink default times time_scale (see the module docstring)
    time_scale: float = DEFAULT_TIME_SCALE
    checkpoint_interval_s: float = UNSET  # Flink: user-set (4 s here)
    checkpoint_timeout_s: float = UNSET  # Flink: 10 min
    wait_tick_s: float = UNSET  # Hudi: 1 s
    instant_wait_timeout_s: float = UNSET  # Hudi: = checkpoint timeout
    commit_ack_timeout_s: float = UNSET  # Hudi write.commit.ack.timeout (P1): = checkpoint timeout
    deadlock_threshold_s: float = 2.0  # blocked this long on a mail in its own mailbox: deadlock
    rpc_timeout_s: float = UNSET  # Flink RPC ask timeout: 10 s
    timeline_refresh_requests: int = 100  # RFC-50: the server rescans after this many requests
    write_status_timeout_s: float = UNSET  # RFC-32 coordinator waiting for WRITE_STATUS (Hudi: 300 s)
    topic_retention_records: int = 10_000  # control topic retention
    # P5: what ends a Kafka Connect commit. "wall": the coordinator schedules END_COMMIT
    # kafka_commit_interval_s after START_COMMIT, as Hudi's ConnectTransactionCoordinator does;
    # "checkpoint": each Flink checkpoint trigger ends it (every protocol runs the same rounds)
    control_topic_interval: str = "wall"
    kafka_commit_interval_s: float = 0.2  # Hudi hoodie.kafka.commit.interval.secs: 60 s
    job_timeout_s: float = 300.0  # the whole run; the job is stopped with a diagnosis after it
    max_concurrent_checkpoints: int = 1  # Flink execution.checkpointing.max-concurrent-checkpoints
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
    # the durations set explicitly (not from the time scale); None until resolved at construction
    explicit_durations: list[str] | None = None

    def __post_init__(self) -> None:
        if self.explicit_durations is not None:
            return  # a copy or a decoded config: its durations are already effective
        if not self.time_scale > 0:
            raise ConfigError(f"--time-scale must be positive, got {self.time_scale}")
        if self.instant_wait_timeout_s == 0.0:  # (0 meant "the checkpoint timeout" before the scale)
            self.instant_wait_timeout_s = UNSET
        self.explicit_durations = [n for n in SCALED_DURATIONS if getattr(self, n) != UNSET]
        for name, base in HUDI_FLINK_DURATIONS_S.items():
            if getattr(self, name) == UNSET:
                setattr(self, name, round(base * self.time_scale, 9))
        for name in CHECKPOINT_TIMEOUT_DURATIONS:
            if getattr(self, name) == UNSET:
                setattr(self, name, self.checkpoint_timeout_s)

    def effective_durations(self) -> dict[str, float]:
        """The time scale and every scaled duration as the run uses it (for result.json)."""
        return {"time_scale": self.time_scale, **{n: float(getattr(self, n)) for n in SCALED_DURATIONS}}

    # -- derived -------------------------------------------------------------------------------

    @property
    def num_keys(self) -> int:
        return self.keys or max(1, self.records // 2)

    @property
    def num_buckets(self) -> int:
        return self.buckets or 2 * self.writers

    @property
    def instant_wait_timeout(self) -> float:
        return self.instant_wait_timeout_s

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
        """A copy with ``changes``; a new ``time_scale`` rescales every duration not set
        explicitly (durations in ``changes`` count as explicit)."""
        if "time_scale" not in changes:
            if "checkpoint_timeout_s" in changes:
                # the timeouts that default to the checkpoint timeout (Hudi) follow a new one
                explicit = set(self.explicit_durations or ()) | set(changes)
                follow = {n: changes["checkpoint_timeout_s"] for n in CHECKPOINT_TIMEOUT_DURATIONS if n not in explicit}
                changes = {**follow, **changes}
            return dataclasses.replace(self, **changes)
        explicit = set(self.explicit_durations or ()) | {n for n in changes if n in SCALED_DURATIONS}
        rescaled = {n: UNSET for n in SCALED_DURATIONS if n not in explicit}
        return dataclasses.replace(self, **{**rescaled, **changes, "explicit_durations": None})

    def _validate_durations(self) -> None:
        for name in (*SCALED_DURATIONS, "deadlock_threshold_s", "job_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_concurrent_checkpoints < 1:
            raise ConfigError(
                f"--max-concurrent-checkpoints must be at least 1 (Flink's default is 1), "
                f"got {self.max_concurrent_checkpoints}"
            )

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
        self._validate_durations()
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
