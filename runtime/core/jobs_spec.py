"""Several jobs on one table: how many, how their streams overlap, when each starts.

One command may run two whole Flink jobs (each its own job manager, coordinator, write tasks and
stream) that write one Hudi table, as two Flink deployments of Hudi's writer do (apache/hudi
#19357, #19587). The jobs share the table and nothing else; each one's configuration is the
command's, with its own Flink job id (``job-1``, ``job-2``) and its own stream
(:mod:`runtime.data.job_streams`).

``overlap`` says what the streams share:

* ``none`` (the default): distinct keys in distinct partitions, so distinct file groups. This is
  how Hudi's documentation deploys several writers (each its own partitions: a backfill beside
  the stream) and it is the one layout where optimistic concurrency commits both jobs without a
  conflict, so a failure seen under it is the protocol's, not the workload's.
* ``file-groups``: distinct keys in the same partitions. The bucket index puts both jobs' records
  of a bucket in the same file group (its id is the partition and bucket's), so their commits
  touch the same file groups: ``SimpleConcurrentFileWritesConflictResolutionStrategy`` sees a
  conflict, and a single writer's copy-on-write rewrite of a file group drops the other's rows.
* ``keys``: both streams update the same keys. Ordering values never tie across jobs (job ``j``
  of ``n`` writes ``ts * n + j - 1``), so the merge rule names one winner for every key.

``start_s``: virtual (simulator) or real (Ray) seconds after the command starts at which each job
starts. ``writer_guard``: ``none`` runs every job as Hudi's single-writer mode would (nothing
stops a second writer; the table may be corrupted, which is what #19357 reports); ``lab-lock``
is the lab's own protection, its run-wide table lock, which refuses a second job under
single-writer before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtime.core.config import ConfigError, JobConfig
from runtime.core.job_options import IN_PROCESS_LOCK, SINGLE_WRITER

OVERLAPS = ("none", "file-groups", "keys")
WRITER_GUARDS = ("none", "lab-lock")
MAX_JOBS = 2  # the model and its verdict are built for two; more is a later change


def job_name(index: int) -> str:
    """The name of job ``index`` (0-based): its Flink job id and its prefix in the trace."""
    return f"job-{index + 1}"


@dataclass(frozen=True)
class JobsSpec:
    """How many jobs one command runs on its table, and how (the module docstring)."""

    jobs: int = 1
    overlap: str = "none"
    start_s: tuple[float, ...] = field(default_factory=tuple)  # per job; missing ones start at 0
    writer_guard: str = "none"
    # per job, what its configuration changes from the command's (a scenario's: one job's late
    # commit, say); missing ones change nothing
    overrides: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @property
    def several(self) -> bool:
        return self.jobs > 1

    def start_of(self, index: int) -> float:
        return self.start_s[index] if index < len(self.start_s) else 0.0

    def overrides_of(self, index: int) -> dict[str, Any]:
        return self.overrides[index] if index < len(self.overrides) else {}

    def validate(self, concurrency_mode: str = SINGLE_WRITER) -> JobsSpec:
        """Checks every value, naming the flag; returns self."""
        if not 1 <= self.jobs <= MAX_JOBS:
            raise ConfigError(f"--jobs {self.jobs}: the lab runs 1 or {MAX_JOBS} jobs on one table; give --jobs 1 or 2")
        if self.overlap not in OVERLAPS:
            raise ConfigError(f"--jobs-overlap {self.overlap!r}: choose one of {', '.join(OVERLAPS)}")
        if self.writer_guard not in WRITER_GUARDS:
            raise ConfigError(f"--writer-guard {self.writer_guard!r}: choose one of {', '.join(WRITER_GUARDS)}")
        if len(self.start_s) > self.jobs or any(s < 0 for s in self.start_s):
            raise ConfigError(
                f"--jobs-start {','.join(map(str, self.start_s))}: one non-negative number of seconds per job "
                f"({self.jobs} job(s)), e.g. --jobs-start 0,0.5"
            )
        if self.several and self.writer_guard == "lab-lock" and concurrency_mode == SINGLE_WRITER:
            raise ConfigError(
                f"--jobs {self.jobs} under --concurrency-mode single-writer with --writer-guard lab-lock: the lab's "
                "run-wide table lock lets one job write the table and refuses the second. Use --concurrency-mode "
                "optimistic or non-blocking for two writers, or --writer-guard none to run both as Hudi's "
                "single-writer mode does (nothing stops the second writer; #19357's loss)"
            )
        return self


def parse_start(text: str) -> tuple[float, ...]:
    """``--jobs-start 0,0.5`` -> (0.0, 0.5); an error names the flag."""
    if not text:
        return ()
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"--jobs-start {text!r}: seconds per job, comma-separated, e.g. --jobs-start 0,0.5") from None


def concurrency_mode(cfg: JobConfig) -> str:
    """Hudi's ``hoodie.write.concurrency.mode`` of a job's configuration (``--concurrency-mode``)."""
    return cfg.concurrency_mode


def check_simulated_lock(cfg: JobConfig, spec: JobsSpec) -> None:
    """Several jobs in one simulated process: an in-process lock would exclude them, which the
    jobs of two Flink deployments (two JobManager processes) never are."""
    if spec.several and cfg.lock_provider == IN_PROCESS_LOCK:
        raise ConfigError(
            f"--lock-provider in-process with --jobs {spec.jobs} in the simulator: every job runs in this one "
            "process, so Hudi's InProcessLockProvider would exclude them, which two Flink jobs (two JobManager "
            "processes) never are; use --lock-provider filesystem (the Flink writer's default)"
        )
