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
* ``write_status_timeout_s`` 300 s: Hudi Kafka Connect ``hoodie.kafka.coordinator.write.timeout.secs``;
* ``kafka_commit_interval_s`` 60 s: Hudi Kafka Connect ``hoodie.kafka.commit.interval.secs``
  (``KafkaConnectConfigs.COMMIT_INTERVAL_SECS``).

The multi-writer durations (``lock_wait_s``, like ``heartbeat_interval_s``) stay UNSET here and are
resolved by the concurrency control that uses them (:mod:`runtime.hudi.client.concurrency`).

The default scale, 0.05, keeps a run to seconds on a shared machine (a 10 min timeout becomes
30 s, the 1 s tick 50 ms: the values this lab used before the scale existed). What does not
scale: RPC and DFS latencies (real or simulated) and lock hold times are what they are, so at a
small scale they weigh more against the timeouts than in production.

The rule for transport deadlines (:data:`TRANSPORT_DEADLINE_FLOORS_S`, :func:`default_duration`):
a timeout that means "the peer is dead" rather than "the protocol gave up waiting" bounds a round
trip through the host's RPC stack, which the time scale does not shorten and which takes longer the
more callers one role answers at once. So its default is scaled like the others but never below its
floor: Flink's own value, or :data:`TRANSPORT_DEADLINE_PER_CALLER_S` per write task when that is
more (every write task calls the job manager, the coordinator and the control topic; one role
answers them all). ``rpc_timeout_s`` (Flink's ask timeout) bounds every role-to-role call, a write
task's operator-event acknowledgement, its bootstrap and its checkpoint ack to the job manager, the
instant requests of coordination-rpc, the timeline server's requests and the control topic's produce
and fetch requests. Measured on a busy 2-core host (load 25 to 65) at 256 write tasks: scaled to
0.5 s, their checkpoint acks to one job manager missed it and the job failed over three times; 10 s
held for operator-event and coordination-rpc, but a control-topic append waited behind 256
consumers' fetches for longer (one failover); 0.1 s per caller (25.6 s) holds for all three. The
model's waits (the tick, the intervals, the checkpoint, commit-ack, instant-wait and write-status
timeouts) scale as before. An explicit ``--rpc-timeout`` wins (fault scenarios set a short one to
make a lost message cost less).

``timeline_refresh_requests`` (RFC-50's server rescans after N requests) is a count, not a time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from runtime.core.codec import message
from runtime.core.errors import UserError
from runtime.core.fault_spec import FaultSpec


class ConfigError(UserError, ValueError):
    """A configuration value is wrong; the message names the option and what is allowed."""

    heading = "configuration error"


DEFAULT_TIME_SCALE = 0.05
UNSET = -1.0  # a duration left to its Hudi/Flink default times the time scale
# Hudi's and Flink's defaults in seconds, before the time scale (see the module docstring)
HUDI_FLINK_DURATIONS_S: dict[str, float] = {
    "wait_tick_s": 1.0,
    "checkpoint_timeout_s": 600.0,
    "checkpoint_interval_s": 4.0,
    "rpc_timeout_s": 10.0,
    "write_status_timeout_s": 300.0,
    "kafka_commit_interval_s": 60.0,
}
# durations whose default is the (effective) checkpoint timeout
CHECKPOINT_TIMEOUT_DURATIONS = ("commit_ack_timeout_s", "instant_wait_timeout_s")
SCALED_DURATIONS = (*HUDI_FLINK_DURATIONS_S, *CHECKPOINT_TIMEOUT_DURATIONS)
# transport deadlines: scaled, but never below a floor, Flink's own value or more with many
# callers of one role (see the module docstring)
TRANSPORT_DEADLINE_FLOORS_S: dict[str, float] = {"rpc_timeout_s": HUDI_FLINK_DURATIONS_S["rpc_timeout_s"]}
TRANSPORT_DEADLINE_PER_CALLER_S = 0.1


def transport_floor(name: str, callers: int) -> float:
    """The least a transport deadline may be when one role answers ``callers`` at once."""
    return max(TRANSPORT_DEADLINE_FLOORS_S[name], round(TRANSPORT_DEADLINE_PER_CALLER_S * callers, 9))


def default_duration(name: str, time_scale: float, callers: int) -> float:
    """The default of a Hudi/Flink duration at ``time_scale``: a model wait is its default times
    the scale; a transport deadline is too, but never below its floor for ``callers``."""
    scaled = round(HUDI_FLINK_DURATIONS_S[name] * time_scale, 9)
    return max(scaled, transport_floor(name, callers)) if name in TRANSPORT_DEADLINE_FLOORS_S else scaled


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


# the command line's option groups, in the order --help shows them
WORKLOAD, SPARK, WRITE_PATH, TIMING, RECOVERY, CONCURRENCY = (
    "workload",
    "Spark on Ray",
    "write path",
    "timing (Hudi's and Flink's defaults times --time-scale)",
    "faults and recovery",
    "concurrency control (Hudi's hoodie.write.concurrency.mode)",
)


@dataclass(frozen=True)
class Option:
    """How a :class:`JobConfig` field appears on the command line and in a ``--config`` file.

    ``flag`` defaults to the field's name in kebab case without a duration's ``_s``. A field with
    ``choices`` is checked against them by :meth:`JobConfig.validate`, which names the flag."""

    help: str
    group: str
    flag: str = ""
    choices: tuple[str, ...] = ()


PARQUET_CODECS = ("snappy", "gzip", "zstd", "uncompressed")  # --parquet-compression
BLOOM_FILTERS = ("release", "none")  # --bloom-filter


def _opt(default: Any, help: str, group: str, *, flag: str = "", choices: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"option": Option(help, group, flag, choices)})


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


# --table-type values -> hoodie.table.type
TABLE_TYPES = ("copy-on-write", "merge-on-read")
HOODIE_TABLE_TYPE = {"copy-on-write": "COPY_ON_WRITE", "merge-on-read": "MERGE_ON_READ"}
TABLE_VERSION_CHOICES = ("release", "6", "8", "9")
# --concurrency-mode values -> hoodie.write.concurrency.mode (runtime.hudi.client.concurrency)
SINGLE_WRITER, OPTIMISTIC, NON_BLOCKING = "single-writer", "optimistic", "non-blocking"
CONCURRENCY_MODES = (SINGLE_WRITER, OPTIMISTIC, NON_BLOCKING)
# --lock-provider values ("": the default, filesystem under a multi-writer mode)
FILESYSTEM_LOCK, IN_PROCESS_LOCK = "filesystem", "in-process"
LOCK_PROVIDERS = ("", FILESYSTEM_LOCK, IN_PROCESS_LOCK)
# --instant-times: who makes a writer's instant times (runtime.hudi.client.transaction)
TABLE_INSTANT_TIMES, UNLOCKED_0X, LOCKED_1X = "table", "0.x", "1.x"
INSTANT_TIMES = (TABLE_INSTANT_TIMES, UNLOCKED_0X, LOCKED_1X)


@message
@dataclass
class JobConfig:
    protocol: str = "message-bus"
    writers: int = _opt(2, "write tasks (one source each)", WORKLOAD)
    checkpoints: int = _opt(5, "checkpoints the job takes; round k is the data before barrier k", WORKLOAD)
    records: int = _opt(10_000, "records in the generated stream", WORKLOAD)
    source: str = _opt(
        "spark",
        "spark: PySpark on Ray (RayDP) generates or reads the stream; generator: a built-in Python "
        "generator (fast, for tests)",
        WORKLOAD,
        choices=("spark", "generator"),
    )
    table: str = "./commitlab-table"  # the command line's --table (default OUT/table)
    table_name: str = _opt("commitlab", "hoodie.table.name of a new table", WORKLOAD)
    # the record's fields (a user's --input names its own)
    key_field: str = _opt("key", "record key column", WORKLOAD, flag="--key")
    partition_field: str = _opt("partition", "partition path column", WORKLOAD)
    precombine_field: str = _opt("ts", "ordering column: the larger value wins an upsert", WORKLOAD)
    input_path: str = _opt("", "parquet, CSV or JSON file or directory read by Spark", WORKLOAD, flag="--input")
    input_format: str = _opt(
        "", "format of --input (empty: from the file names)", WORKLOAD, choices=("", "parquet", "csv", "json")
    )
    # generated workload
    keys: int = _opt(0, "distinct keys (0: records/2)", WORKLOAD)
    update_ratio: float = _opt(
        -1.0, "fraction of generated records that update a seen key (< 0: from --keys)", WORKLOAD
    )
    skew: str = _opt("uniform", "which keys updates pick", WORKLOAD, choices=("uniform", "zipf"))
    zipf_s: float = _opt(1.1, "the Zipf exponent of --skew zipf", WORKLOAD, flag="--zipf-s")
    partitions: int = _opt(4, "partition values of the generated stream", WORKLOAD)
    payload_bytes: int = _opt(32, "bytes of payload per generated record", WORKLOAD)
    seed: int = _opt(42, "seed of the generated stream", WORKLOAD)
    # Spark on Ray
    spark_executors: int = _opt(1, "RayDP Spark executors", SPARK)
    spark_executor_cores: int = _opt(1, "cores per Spark executor", SPARK)
    spark_executor_memory: str = _opt("1G", "memory per Spark executor", SPARK)
    # layout
    buckets: int = _opt(
        0, "buckets per partition of a new table (0: 2 per writer; an existing table keeps its own)", WORKLOAD
    )
    # data flow
    source_batch_rows: int = _opt(1_000, "records per batch a source emits", WRITE_PATH)
    bucket_flush_rows: int = _opt(20_000, "Hudi write.batch.size, in rows: a bucket this full is flushed", WRITE_PATH)
    task_buffer_rows: int = _opt(
        100_000,
        "Hudi write.task.max.size, in rows: the largest bucket is flushed when the task holds this many",
        WRITE_PATH,
    )
    input_queue_batches: int = _opt(8, "a write task's bounded input queue, in batches (back-pressure)", WRITE_PATH)
    table_type: str = _opt(
        "copy-on-write",
        "Hudi's table.type for a new table: copy-on-write rewrites a file group's base file at each "
        "checkpoint; merge-on-read appends a log file per flush, commits delta commits and compacts "
        "(--compaction-delta-commits)",
        WRITE_PATH,
        choices=TABLE_TYPES,
    )
    table_version: str = _opt(
        "release",
        "hoodie.table.version of a new table: 6 (Hudi 0.14-0.15, timeline in .hoodie), 8 (Hudi 1.0) or 9 "
        "(Hudi 1.1; both: timeline in .hoodie/timeline, completion times in its file names, Avro metadata); "
        "release: the version the protocol's Hudi release writes (9 for coordination-rpc and "
        "coordination-rpc-async, 6 for the others)",
        WRITE_PATH,
        choices=TABLE_VERSION_CHOICES,
    )
    compaction_delta_commits: int = _opt(
        5,
        "merge-on-read: Hudi's compaction.delta_commits, the delta commits after which the coordinator "
        "schedules a compaction that the job's compaction tasks run (0: none, as compaction.schedule.enabled=false)",
        WRITE_PATH,
    )
    compaction_tasks: int = _opt(
        0, "merge-on-read: Hudi's compaction.tasks, parallel compaction tasks (0: one per write task)", WRITE_PATH
    )
    # Hudi's write.precombine (FlinkOptions.PRE_COMBINE, default false): HoodieTableFactory
    # sets it for a copy-on-write upsert only, "the MOR table deduplicate on reading"
    write_precombine: str = _opt(
        "release",
        "Hudi write.precombine: a flush keeps one record per key (true) or every record it holds (false, "
        "merge-on-read only: the reader and the compaction merge them); release: what Hudi does (true for "
        "copy-on-write, false for merge-on-read)",
        WRITE_PATH,
        choices=("release", "true", "false"),
    )
    # the lab's guard: no compaction is scheduled while a writer's instant newer than the last
    # completed one is pending (runtime.writer.coordinator says why; Hudi's Flink writer has none)
    compaction_pending_guard: str = _opt(
        "on",
        "merge-on-read: on (the lab's guard: a compaction waits while a writer's instant newer than the "
        "last completed one is pending), off (as Hudi's Flink writer: on table version 6 a delta commit "
        "still writing into the old slice is then shadowed by the compacted base file, issue #7969)",
        WRITE_PATH,
        choices=("on", "off"),
    )
    parquet_compression: str = _opt(
        "gzip",
        "base-file codec, Hudi's hoodie.parquet.compression.codec (gzip, Hudi's default); snappy "
        "is about a fifth of gzip's encode time and writes about twice the bytes",
        WRITE_PATH,
        choices=PARQUET_CODECS,
    )
    bloom_filter: str = _opt(
        "release",
        "base-file footer: release writes the record-key bloom filter and key range Hudi 0.14 writes "
        "into every base file (about 430 KB a file); none leaves them out, which Hudi 0.14 cannot",
        WRITE_PATH,
        choices=BLOOM_FILTERS,
    )
    # timing: UNSET means the Hudi/Flink default times time_scale (see the module docstring)
    time_scale: float = _opt(
        DEFAULT_TIME_SCALE,
        "multiplies every Hudi/Flink default duration (1: production values); an explicit duration flag wins",
        TIMING,
    )
    checkpoint_interval_s: float = _opt(UNSET, "seconds between checkpoint triggers (Flink: user-set)", TIMING)
    checkpoint_timeout_s: float = _opt(UNSET, "Flink execution.checkpointing.timeout, seconds", TIMING)
    wait_tick_s: float = _opt(UNSET, "a writer's poll interval while it waits for an instant, seconds", TIMING)
    instant_wait_timeout_s: float = _opt(
        UNSET, "how long a writer waits for an instant before it fails (Hudi: the checkpoint timeout)", TIMING
    )
    commit_ack_timeout_s: float = _opt(
        UNSET, "Hudi write.commit.ack.timeout (operator-event, ckp-meta, timeline-server), seconds", TIMING
    )
    deadlock_threshold_s: float = _opt(
        2.0, "seconds a task may block on a mail in its own mailbox before the watchdog calls it a deadlock", TIMING
    )
    rpc_timeout_s: float = _opt(
        UNSET,
        "seconds an RPC between roles may take before the peer counts as dead (Flink's ask timeout; a transport "
        "deadline: scaled, but not below 10 s or 0.1 s per writer)",
        TIMING,
    )
    timeline_refresh_requests: int = _opt(
        100, "timeline-server: the server rescans ckp_meta after this many requests (HUDI-6336)", TIMING
    )
    write_status_timeout_s: float = _opt(
        UNSET, "control-topic: hoodie.kafka.coordinator.write.timeout.secs, seconds", TIMING
    )
    topic_retention_records: int = 10_000  # control topic retention
    # P5: what ends a Kafka Connect commit. "wall": the coordinator schedules END_COMMIT
    # kafka_commit_interval_s after START_COMMIT, as Hudi's ConnectTransactionCoordinator does;
    # "checkpoint": each Flink checkpoint trigger ends it (every protocol runs the same rounds)
    control_topic_interval: str = _opt(
        "wall",
        "control-topic: what ends a commit; wall: the commit interval after START_COMMIT, as Hudi's Kafka "
        "Connect coordinator; checkpoint: each checkpoint trigger",
        TIMING,
        choices=("wall", "checkpoint"),
    )
    kafka_commit_interval_s: float = _opt(
        UNSET, "control-topic: hoodie.kafka.commit.interval.secs with --control-topic-interval wall, seconds", TIMING
    )
    # P5: where the control topic lives (runtime.kafka.address): the in-process model, or a broker
    control_topic: str = _opt(
        "model",
        "control-topic: model (the topic modelled as a role of the job; the simulator's only one), "
        "kafka://HOST:PORT[/TOPIC] (a Kafka broker; topic hudi-control-topic by default) or kafka (start a "
        "single-node broker on loopback for the run: commitlab kafka)",
        WRITE_PATH,
    )
    job_timeout_s: float = _opt(300.0, "the whole run; the job is stopped with a diagnosis after it", TIMING)
    max_concurrent_checkpoints: int = _opt(1, "Flink execution.checkpointing.max-concurrent-checkpoints", TIMING)
    # one writer per table (runtime/hudi/client/lock.py): UNSET is Hudi's 60 s times time_scale, not below 5 s
    heartbeat_interval_s: float = _opt(
        UNSET, "Hudi hoodie.client.heartbeat.interval_in_ms: how often a run renews its lock on the table", TIMING
    )
    heartbeat_tolerable_misses: int = _opt(
        2,
        "Hudi hoodie.client.heartbeat.tolerable.misses: a table lock not renewed for this many intervals "
        "has expired, and the next run takes the table over",
        TIMING,
    )
    max_restarts: int = _opt(3, "failovers from the last completed checkpoint before the job gives up", RECOVERY)
    # Hudi's concurrency control (runtime.hudi.client.concurrency, docs/CONCURRENCY.md)
    concurrency_mode: str = _opt(
        SINGLE_WRITER,
        "Hudi hoodie.write.concurrency.mode: single-writer (one run holds the table for its whole life), "
        "optimistic (OPTIMISTIC_CONCURRENCY_CONTROL: each commit takes the lock and fails on a file group "
        "another writer committed since the instant started), non-blocking (NON_BLOCKING_CONCURRENCY_CONTROL: "
        "merge-on-read only, writers append logs to the same file groups); both multi-writer modes heartbeat "
        "each instant and roll back only instants whose heartbeat expired (LAZY)",
        CONCURRENCY,
        choices=CONCURRENCY_MODES,
    )
    lock_provider: str = _opt(
        "",
        "Hudi hoodie.write.lock.provider under a multi-writer --concurrency-mode: filesystem "
        "(FileSystemBasedLockProvider, the file .hoodie/.aux/lock; the default) or in-process "
        "(InProcessLockProvider: excludes only writers of one process, so two jobs on Ray are not excluded)",
        CONCURRENCY,
        choices=LOCK_PROVIDERS,
    )
    lock_wait_s: float = _opt(
        UNSET,
        "Hudi hoodie.write.lock.wait_time_ms: how long one attempt to take the transaction lock may wait "
        "(Hudi's Flink writer: 2 s)",
        CONCURRENCY,
    )  # UNSET: 2 s x time_scale (runtime.hudi.client.concurrency)
    instant_times: str = _opt(
        TABLE_INSTANT_TIMES,
        "who makes the coordinator's instant times: table (the lab's: after every instant on the timeline, "
        "listed under the table's lock), 0.x (Hudi 0.x createNewInstantTime: the millisecond clock, no lock, so "
        "two writers can take one time), 1.x (Hudi 1.x, HUDI-7507: the clock read holding the lock, held 200 ms "
        "more for clock skew)",
        CONCURRENCY,
        choices=INSTANT_TIMES,
    )
    lock_retries: int = _opt(
        30,
        "Hudi hoodie.write.lock.client.num_retries (Hudi's Flink writer: 30): attempts to take the "
        "transaction lock after the first before the commit fails",
        CONCURRENCY,
    )
    # Flink's job id ($internal.pipeline.job-id, fixed by the Kubernetes operator in application
    # mode) and its --fromSavepoint: what a sink that records the job in its commits sees
    job_id: str = _opt("", "Flink's job id, kept across restarts when given (empty: a new one per job)", RECOVERY)
    from_checkpoint: int = _opt(
        0,
        "start from this completed checkpoint of the table's checkpoint store, as Flink's --fromSavepoint "
        "(0: a fresh start without state)",
        RECOVERY,
    )
    failover: str = _opt(
        "global",
        "global: a task failure restarts every role (Flink's restart-all); region: the tasks, their sources and "
        "the checkpointing restart, the coordinator keeps running (global when the coordinator itself failed)",
        RECOVERY,
        choices=("global", "region"),
    )
    # after a region failover the coordinator answers a task's bootstrap only once every task's
    # has arrived, so no task writes into an instant about to be rolled back; False is Hudi
    # before HUDI-6194 (a task that bootstrapped early may write into that instant)
    hold_bootstraps: bool = _opt(
        True,
        "after a region failover, answer each task's bootstrap at once, as Hudi did before HUDI-6194 "
        "(reproduces writes into a rolled-back instant)",
        RECOVERY,
        flag="--no-hold-bootstraps",
    )
    # P2 message-bus only: a flush made after the round's instant was confirmed keeps that
    # instant; False is PR #3915 as shipped, which re-reads the message and hands a second
    # eager flush after an aborted checkpoint the literal 'aborted'
    p2_fix_aborted_reread: bool = _opt(
        False,
        "message-bus only: a later flush of a round keeps the instant the round confirmed (PR #3915 re-reads the "
        "message and hands a second eager flush after an abort the literal 'aborted'); others ignore it",
        RECOVERY,
    )
    # Hudi's hoodie.allow.empty.commit for the Flink writer (HUDI-6127, 0.14; default true since
    # HUDI-7819, 1.0): a checkpoint whose tasks wrote nothing commits an empty instant instead of
    # reusing it; "release": the default of the Hudi release the protocol models
    allow_empty_commit: str = _opt(
        "release",
        "Hudi hoodie.allow.empty.commit: a round without data commits an empty instant (true) or reuses the "
        "instant and, in the CommitAckEvent family, sends the ack (false); release: the default of the "
        "Hudi release the protocol models (false before 1.0, true from 1.0 on)",
        WRITE_PATH,
        choices=("release", "true", "false"),
    )
    # Hudi's write markers (hoodie.write.markers.type): the write tasks create one per data file
    # under .hoodie/.temp/<instant>/, the commit deletes them, a rollback reads them (runtime.hudi.table.markers)
    markers: str = _opt(
        "release",
        "Hudi write markers: direct (a marker file per data file, created by the write task, deleted "
        "after the commit, read by a rollback), none (no markers: a rollback lists the partitions); "
        "release: what the protocol's Hudi release does (direct: the Flink write tasks' client runs "
        "without an embedded timeline server)",
        WRITE_PATH,
        choices=("release", "direct", "none"),
    )
    # Hudi's rollback instants (runtime.hudi.formats.rollback_metadata): a rollback saves its plan as
    # <t>.rollback.requested, goes inflight, deletes, then publishes <t>.rollback with its metadata
    rollback_instants: str = _opt(
        "release",
        "Hudi rollback instants: release (what Hudi does: every rollback of a failed write or compaction "
        "writes .rollback.requested with its plan, .rollback.inflight, then .rollback with the "
        "HoodieRollbackMetadata naming the instant undone), none (the files are deleted with no rollback "
        "instant, this lab before them)",
        WRITE_PATH,
        choices=("release", "none"),
    )
    # Hudi's cleaner and archiver after each commit (runtime.hudi.client.table_services): a number,
    # release (the modelled writer's default) or off
    clean_retain_commits: str = _opt(
        "release",
        "Hudi clean.retain_commits (KEEP_LATEST_COMMITS): after a commit the cleaner deletes file versions the "
        "last N commits do not need and writes a .clean instant; release: the modelled writer's default (30 "
        "for the Flink writer, 10 for control-topic's Connect sink); off: no cleaner",
        WRITE_PATH,
    )
    archive_min_commits: str = _opt(
        "release",
        "Hudi archive.min_commits: the completed commits archiving leaves on the active timeline; release: "
        "the modelled writer's default (40; 20 for control-topic); off: no archiving",
        WRITE_PATH,
    )
    archive_max_commits: str = _opt(
        "release",
        "Hudi archive.max_commits: past this many completed commits the oldest are archived (.hoodie/archived, "
        "or timeline/history from table version 8); release: the modelled writer's default (50; 30 for "
        "control-topic); off: no archiving",
        WRITE_PATH,
    )
    # Hudi's metadata table (runtime.hudi.client.metadata_writer): its files partition committed with every
    # data commit, so readers list the table through it; "release": FlinkOptions.METADATA_ENABLED of
    # the release the protocol models (false before 1.0, true from 1.0: HUDI-4372, PR #11124)
    metadata_table: str = _opt(
        "release",
        "Hudi metadata.enabled: true (every commit also commits a delta commit of the metadata table's files "
        "partition under .hoodie/metadata, compacted every 10; readers list the table through it), false (none; "
        "an existing one is deleted, as Hudi does); release: the default of the Hudi release the protocol models "
        "(false before 1.0, true from 1.0 on: coordination-rpc, coordination-rpc-async, two-phase-commit)",
        WRITE_PATH,
        choices=("release", "true", "false"),
    )
    # what Hudi's writer reads around each write (runtime.hudi.table.meta_client): a HoodieTableMetaClient
    # per write handle and per coordinator step, the handles' file checks
    meta_client: str = _opt(
        "release",
        "Hudi's meta clients: release (as the protocol's Hudi release: every write handle builds the table "
        "anew, hoodie.properties read and the timeline listed, and checks its files; the coordinator "
        "reloads the table per commit), shared (one view per task, the timeline read once an instant)",
        WRITE_PATH,
        choices=("release", "shared"),
    )
    # where a write task learns its file slices (runtime.hudi.table.file_system_view): Hudi's tasks ask the
    # embedded timeline server on the coordinator (hoodie.filesystem.view.type REMOTE_FIRST)
    file_system_view: str = _opt(
        "release",
        "Hudi hoodie.filesystem.view.type of the write tasks: remote (REMOTE_FIRST: the tasks ask the "
        "coordinator's embedded timeline server for a partition's file slices; the server lists the partition "
        "after each commit), direct (each task lists the partitions it writes itself); release: what the "
        "protocol's Hudi release does (remote for the Flink writer, direct for control-topic's Connect sink)",
        WRITE_PATH,
        choices=("release", "remote", "direct"),
    )
    # Flink taskmanager.numberOfTaskSlots: write tasks (each with its source) in one task manager
    # process; 0: two task managers per CPU of the cluster, the writers spread over them
    slots_per_task_manager: int = _opt(
        0,
        "Flink taskmanager.numberOfTaskSlots: write tasks (each with its source) one task manager process "
        "hosts; 0: two task managers per CPU of the Ray cluster, the writers spread evenly over them",
        RECOVERY,
    )
    placement: str = _opt(
        "spread",
        "how role actors spread over a Ray cluster's nodes (a placement group; none: Ray's default scheduling)",
        RECOVERY,
        choices=("spread", "pack", "strict-spread", "none"),
    )
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
        for name in (*SCALED_DURATIONS, "deadlock_threshold_s", "job_timeout_s"):
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
