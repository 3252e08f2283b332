"""Job configuration: one dataclass, validated once, shipped to every role.

:class:`JobConfig` is the job's options (:class:`~runtime.core.job_options.JobOptions`, one table,
each with its flag) and what no flag sets: the armed fault points, the deterministic schedule
(:class:`Schedule`), the durations set explicitly and a job's own checkpoint store. At
construction every duration left unset becomes its Hudi or Flink default times the time scale
(:mod:`runtime.core.durations`); :meth:`JobConfig.validate` names the first bad option by its flag.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from runtime.core.codec import message
from runtime.core.durations import (
    CHECKPOINT_TIMEOUT_DURATIONS,
    HUDI_FLINK_DURATIONS_S,
    SCALED_DURATIONS,
    TRANSPORT_DEADLINE_FLOORS_S,
    UNSET,
    default_duration,
    transport_floor,
)
from runtime.core.errors import UserError
from runtime.core.fault_spec import FaultSpec
from runtime.core.job_options import NON_BLOCKING, JobOptions, Option


class ConfigError(UserError, ValueError):
    """A configuration value is wrong; the message names the option and what is allowed."""

    heading = "configuration error"


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


def option_of(name: str) -> Option | None:
    """The command-line option of a JobConfig field, or None for a field that has none."""
    return _OPTIONS.get(name)


def flag_of(name: str) -> str:
    """The flag a user writes for a JobConfig field (``checkpoint_timeout_s`` -> ``--checkpoint-timeout``)."""
    opt = _OPTIONS.get(name)
    if opt is not None and opt.flag:
        return opt.flag
    stem = name[:-2] if name.endswith("_s") else name
    return "--" + stem.replace("_", "-")


@message
@dataclass
class JobConfig(JobOptions):
    """A job's configuration: its options (:class:`~runtime.core.job_options.JobOptions`) and what no
    flag sets, with every duration resolved (see the module docstring)."""

    faults: list[FaultSpec] = field(default_factory=list)  # armed fault points (runtime.faults.injector)
    schedule: Schedule = field(default_factory=Schedule)
    # the durations set explicitly (not from the time scale); None until resolved at construction
    explicit_durations: list[str] | None = None
    # one of several jobs on the table (--jobs 2): its own folder of the table's checkpoint store,
    # as Flink keys checkpoints by job id (runtime.flink.state_backend); empty: the table's store
    checkpoint_store: str = ""

    def __post_init__(self) -> None:
        if self.explicit_durations is not None:
            return  # a copy or a decoded config: its durations are already effective
        if not self.time_scale > 0:
            raise ConfigError(f"--time-scale must be positive, got {self.time_scale}")
        if self.instant_wait_timeout_s == 0.0:  # (0 meant "the checkpoint timeout" before the scale)
            self.instant_wait_timeout_s = UNSET
        self.explicit_durations = [n for n in SCALED_DURATIONS if getattr(self, n) != UNSET]
        for name in HUDI_FLINK_DURATIONS_S:
            if getattr(self, name) == UNSET:
                setattr(self, name, default_duration(name, self.time_scale, self.writers))
        for name in CHECKPOINT_TIMEOUT_DURATIONS:
            if getattr(self, name) == UNSET:
                setattr(self, name, self.checkpoint_timeout_s)

    def record(self) -> dict[str, Any]:
        """Every field as plain JSON values, for ``result.json``'s ``config`` (``--config`` reads it back)."""
        return dataclasses.asdict(self)

    def effective_durations(self) -> dict[str, float]:
        """The time scale, every scaled duration as the run uses it and the floor of each transport
        deadline (``rpc_timeout_floor_s``), for result.json."""
        floors = {
            n.removesuffix("_s") + "_floor_s": transport_floor(n, self.writers) for n in TRANSPORT_DEADLINE_FLOORS_S
        }
        return {"time_scale": self.time_scale, **{n: float(getattr(self, n)) for n in SCALED_DURATIONS}, **floors}

    # -- derived -------------------------------------------------------------------------------

    @property
    def num_keys(self) -> int:
        return self.keys or max(1, self.records // 2)

    @property
    def num_buckets(self) -> int:
        return self.buckets or 2 * self.writers

    @property
    def compacts(self) -> bool:
        """Whether the job schedules and runs compactions (a merge-on-read table's, when on)."""
        return self.table_type == "merge-on-read" and self.compaction_delta_commits > 0

    @property
    def compaction_parallelism(self) -> int:
        """compaction.tasks: unset, the write tasks' parallelism (Hudi 0.13+)."""
        return self.compaction_tasks or self.writers

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

    def round_bounds(self) -> list[int]:
        """Stream offsets where each round starts: round k is ``[bounds[k-1], bounds[k])``."""
        bounds = [0]
        for n in self.rounds():
            bounds.append(bounds[-1] + n)
        return bounds

    def replace(self, **changes: Any) -> JobConfig:
        """A copy with ``changes``; a new ``time_scale`` rescales every duration not set
        explicitly (durations in ``changes`` count as explicit), and new ``writers`` re-derive the
        transport deadlines' floors."""
        if "time_scale" not in changes and "writers" not in changes:
            if "checkpoint_timeout_s" in changes:
                # the timeouts that default to the checkpoint timeout (Hudi) follow a new one
                explicit = set(self.explicit_durations or ()) | set(changes)
                follow = {n: changes["checkpoint_timeout_s"] for n in CHECKPOINT_TIMEOUT_DURATIONS if n not in explicit}
                changes = {**follow, **changes}
            return dataclasses.replace(self, **changes)
        explicit = set(self.explicit_durations or ()) | {n for n in changes if n in SCALED_DURATIONS}
        rescaled = {n: UNSET for n in SCALED_DURATIONS if n not in explicit}
        return dataclasses.replace(self, **{**rescaled, **changes, "explicit_durations": None})

    def validate(self, known_protocols: list[str] | None = None) -> JobConfig:
        """Raises ConfigError naming the first bad option by its flag; returns self for chaining."""
        if known_protocols is not None and self.protocol not in known_protocols:
            raise ConfigError(f"unknown protocol {self.protocol!r}; choose one of {', '.join(known_protocols)}")
        self._validate_choices()
        self._validate_counts()
        self._validate_durations()
        self._validate_fields()
        self._validate_concurrency()
        self._validate_schedule()
        self._validate_faults()
        return self

    def _validate_choices(self) -> None:
        for name, opt in _OPTIONS.items():
            if opt.choices and getattr(self, name) not in opt.choices:
                allowed = ", ".join(c or "''" for c in opt.choices)
                raise ConfigError(f"{flag_of(name)} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("hold_bootstraps", "p2_fix_aborted_reread"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{flag_of(name)} is a switch: true or false, got {getattr(self, name)!r}")

    def _validate_counts(self) -> None:
        positive = (
            "writers",
            "checkpoints",
            "partitions",
            "source_batch_rows",
            "timeline_refresh_requests",
            "bucket_flush_rows",
            "task_buffer_rows",
            "input_queue_batches",
            "max_concurrent_checkpoints",
            "spark_executors",
            "spark_executor_cores",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{flag_of(name)} must be at least 1, got {getattr(self, name)}")
        for name in (
            "records",
            "keys",
            "buckets",
            "max_restarts",
            "payload_bytes",
            "slots_per_task_manager",
            "compaction_delta_commits",
            "compaction_tasks",
            "from_checkpoint",
            "lock_retries",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{flag_of(name)} must not be negative, got {getattr(self, name)}")
        if self.num_buckets < self.writers:
            raise ConfigError(
                f"--buckets {self.num_buckets} is less than --writers {self.writers}: "
                "some write task would own no file group; use at least one bucket per writer"
            )

    def _validate_durations(self) -> None:
        for name in (*SCALED_DURATIONS, "deadlock_threshold_s", "job_timeout_s", "cluster_lost_after_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{flag_of(name)} must be a positive number of seconds, got {getattr(self, name)}")

    def _validate_fields(self) -> None:
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
        if self.update_ratio >= 1.0:
            raise ConfigError(f"--update-ratio must be below 1, got {self.update_ratio}")
        if not self.table_name.strip():
            raise ConfigError("--table-name must not be empty")
        if self.write_precombine == "false" and self.table_type != "merge-on-read":
            raise ConfigError(
                "--write-precombine false: Hudi de-duplicates every copy-on-write upsert "
                "(HoodieTableFactory.setupWriteOptions sets write.precombine); use it with --table-type merge-on-read"
            )

    def _validate_concurrency(self) -> None:
        """Hudi's own checks of hoodie.write.concurrency.mode (``HoodieWriteConfig.Builder.validate``)."""
        if self.lock_wait_s != UNSET and not self.lock_wait_s > 0:
            raise ConfigError(f"--lock-wait must be a positive number of seconds, got {self.lock_wait_s}")
        if self.concurrency_mode == NON_BLOCKING and self.table_type != "merge-on-read":
            # the lab's index is always the simple bucket index (runtime/writer/buckets.py)
            raise ConfigError(
                "--concurrency-mode non-blocking: Hudi's non-blocking concurrency control requires a merge-on-read "
                'table with the simple bucket index (HoodieWriteConfig: "Non-blocking concurrency control requires '
                'the MOR table with simple bucket index"); add --table-type merge-on-read, or use '
                "--concurrency-mode optimistic"
            )

    def _validate_schedule(self) -> None:
        rounds = self.schedule.rounds
        if rounds is not None:
            if len(rounds) != self.checkpoints:
                raise ConfigError(
                    f"schedule.rounds has {len(rounds)} entries but --checkpoints is "
                    f"{self.checkpoints}: give one record count per checkpoint"
                )
            if sum(rounds) != self.records:
                raise ConfigError("schedule.rounds must add up to --records")
        outside = [c for c in self.schedule.abort_checkpoints if not 1 <= c <= self.checkpoints]
        if outside:
            raise ConfigError(
                f"--abort-checkpoints {','.join(map(str, outside))}: the job takes checkpoints 1 to "
                f"{self.checkpoints} (--checkpoints); name checkpoints in that range"
            )

    def _validate_faults(self) -> None:
        for spec in self.faults:
            if spec.task >= self.writers:
                raise ConfigError(
                    f"--faults {spec.text()}: task #{spec.task} does not exist with --writers {self.writers} "
                    f"(tasks are #0 to #{self.writers - 1})"
                )
            if spec.checkpoint > self.checkpoints:
                raise ConfigError(
                    f"--faults {spec.text()}: checkpoint @{spec.checkpoint} is never taken with --checkpoints "
                    f"{self.checkpoints}; the fault would never fire"
                )


_OPTIONS: dict[str, Option] = {
    f.name: f.metadata["option"] for f in dataclasses.fields(JobConfig) if "option" in f.metadata
}
