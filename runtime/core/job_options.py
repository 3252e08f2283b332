"""Every option of a job, in one table: :class:`JobOptions`, each field with its :class:`Option` (its
help, its group on the command line, its flag and the values it allows), the base of
:class:`~runtime.core.config.JobConfig`.

Each option names what it models: Hudi's or Flink's own option and its default (``release``: the
default of the Hudi release the protocol models), or the lab's where it has no counterpart. The
durations left ``UNSET`` here are Hudi's and Flink's defaults times ``--time-scale``
(:mod:`runtime.core.durations`), resolved by :class:`~runtime.core.config.JobConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtime.core.durations import DEFAULT_TIME_SCALE, UNSET

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
    """How a :class:`~runtime.core.config.JobConfig` field appears on the command line and in a
    ``--config`` file.

    ``flag`` defaults to the field's name in kebab case without a duration's ``_s``. A field with
    ``choices`` is checked against them by :meth:`~runtime.core.config.JobConfig.validate`, which
    names the flag."""

    help: str
    group: str
    flag: str = ""
    choices: tuple[str, ...] = ()


PARQUET_CODECS = ("snappy", "gzip", "zstd", "uncompressed")  # --parquet-compression
BLOOM_FILTERS = ("release", "none")  # --bloom-filter


def _opt(default: Any, help: str, group: str, *, flag: str = "", choices: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"option": Option(help, group, flag, choices)})


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


@dataclass
class JobOptions:
    """The options of a job, as the command line and a ``--config`` file give them (a field with an
    :class:`Option` is a flag); :class:`~runtime.core.config.JobConfig` adds what no flag sets and
    resolves, derives and validates them."""

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
    # timing: UNSET means the Hudi/Flink default times time_scale (runtime.core.durations)
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
    # the Ray driver's watch on its cluster's head (actors/cluster_watch.py): a lost head ends the run
    # with its record well before Ray ends the driver (gcs_rpc_server_reconnect_timeout_s, 60 s)
    cluster_lost_after_s: float = _opt(
        10.0,
        "Ray: seconds the Ray cluster's head (its GCS) may leave the driver's probes, one a second, unanswered "
        "before the run ends as failed with its record (the committed prefix checked); well below Ray's "
        "gcs_rpc_server_reconnect_timeout_s (60 s), after which Ray ends the driver without one",
        RECOVERY,
    )
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
