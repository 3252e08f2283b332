"""The messages roles exchange, and the task state they checkpoint.

Names follow Hudi's Flink writer (``WriteMetadataEvent``, ``CommitAckEvent``) and Flink's checkpoint
vocabulary. All are msgpack-encoded through :mod:`runtime.core.codec`, so they are the same bytes on Ray
and in the simulator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from runtime.core.codec import message

if TYPE_CHECKING:
    from runtime.core.dfs import FileEntry

# The instant a task reports before any instant exists (Hudi's WriteMetadataEvent.BOOTSTRAP_INSTANT).
BOOTSTRAP_INSTANT = ""


@message
@dataclass
class WriteStat:
    """What one flush wrote into one file group (one entry of ``partitionToWriteStats``)."""

    file_id: str
    path: str  # relative to the table base path
    partition: str
    prev_commit: str  # instant of the base file version this one replaced, or "null"
    num_writes: int  # rows in the new file version
    num_inserts: int
    num_update_writes: int
    total_write_bytes: int
    file_size: int
    keys_written: int = 0  # rows whose _hoodie_commit_time is this instant
    # a log file's (merge-on-read; HoodieDeltaWriteStat): its version (0: a base file), the file
    # slice's base file ("" for a log-only file group) and every log file of the slice, this one too
    log_version: int = 0
    base_file: str = ""
    log_files: list[str] = field(default_factory=list)
    # a compaction's base file: what it read of the slice's log files (HoodieWriteStat's
    # totalLogRecords, totalLogFilesCompacted, totalLogSizeCompacted, totalUpdatedRecordsCompacted)
    log_records: int = 0
    log_files_compacted: int = 0
    log_size_compacted: int = 0
    updated_records_compacted: int = 0


@message
@dataclass
class WriteMetadataEvent:
    """Task -> coordinator after each flush (Hudi's WriteMetadataEvent).

    ``last_batch`` marks the flush inside the barrier snapshot; ``bootstrap`` the event a task
    sends when it (re)starts, carrying the uncommitted statuses restored from its state.
    """

    task_id: int
    checkpoint_id: int
    instant: str
    write_stats: list[WriteStat] = field(default_factory=list)
    last_batch: bool = False
    end_input: bool = False
    bootstrap: bool = False


@message
@dataclass
class CompactionPlanEvent:
    """Plan operator -> a compaction task: one operation of a compaction plan (Hudi's
    ``CompactionPlanEvent``, its ``CompactionOperation`` spelled out)."""

    instant: str
    partition: str
    file_id: str
    base_instant: str
    base_file: str
    log_files: list[str]
    checkpoint_id: int = -1  # the checkpoint whose completion ran the plan (fault points use it)


@message
@dataclass
class CompactionCommitEvent:
    """A compaction task -> the commit sink: one file group compacted, or failed (Hudi's
    ``CompactionCommitEvent``; ``stat`` None when it failed)."""

    instant: str
    file_id: str
    task_id: int
    stat: WriteStat | None = None
    error: str = ""
    checkpoint_id: int = -1

    @property
    def failed(self) -> bool:
        return self.stat is None


@message
@dataclass
class CommitAckEvent:
    """Coordinator -> task operator event (P1): the instant is reused, stop confirming."""

    checkpoint_id: int


@message
@dataclass
class CheckpointTrigger:
    checkpoint_id: int
    timestamp: float = 0.0


@message
@dataclass
class CheckpointNotice:
    """Checkpoint complete or aborted, sent by the job manager."""

    checkpoint_id: int
    reason: str = ""


@message
@dataclass
class TaskState:
    """A write task's checkpointed state (Hudi keeps one WriteMetadataEvent in list state)."""

    task_id: int
    checkpoint_id: int
    instant: str
    uncommitted: list[WriteMetadataEvent] = field(default_factory=list)


@message
@dataclass
class SourceState:
    task_id: int
    checkpoint_id: int
    offset: int  # next stream position to emit after restore


@message
@dataclass
class CheckpointAck:
    """A task's (or source's) acknowledgement of a checkpoint, with its encoded state."""

    role: str
    checkpoint_id: int
    state: bytes = b""


@message
@dataclass
class RoundEmitted:
    """A source finished emitting the data of one round (the records before barrier ``round``)."""

    source: str
    round: int
    rows: int
    end_offset: int = -1  # the source's shard position after the round (absolute, across restarts)


@message
@dataclass
class TaskFailure:
    role: str
    error: str
    checkpoint_id: int = -1


@message
@dataclass
class InputFinished:
    """The job manager's last checkpoint completed; rows each task's source emitted."""

    final_offsets: dict[int, int] = field(default_factory=dict)


@message
@dataclass
class TasksReset:
    """Region failover: every write task restarts from the last completed checkpoint; the next
    checkpoint id they see is ``resume_checkpoint_id + 1``."""

    resume_checkpoint_id: int
    reason: str = ""


@message
@dataclass
class InstantTimeRequest:
    """Write task -> coordinator, on the RPC path (Hudi 1.1's Correspondent.InstantTimeRequest,
    sent with TaskOperatorEventGateway.sendRequestToCoordinator): the instant of checkpoint key
    ``checkpoint_id`` (the task's last checkpoint id, -1 before the first)."""

    task_id: int
    checkpoint_id: int


@message
@dataclass
class InstantTimeReply:
    """Coordinator -> write task, on the request's future (Correspondent.InstantTimeResponse);
    ``status`` PENDING with no instant while it is being created (PR #19960)."""

    checkpoint_id: int
    status: str
    instant: str = ""


@dataclass
class DataBatch:
    """Records for one task, in stream order (not a codec message: it travels as Arrow)."""

    records: pa.Table
    round: int = 0
    start_offset: int = -1  # position of the first row in this task's shard (-1: unknown)


@message
@dataclass
class Barrier:
    checkpoint_id: int


@message
@dataclass
class EndOfInput:
    pass


# -- P5's control topic (RFC-32, Hudi's Kafka Connect sink); the log model is runtime.kafka.topic --

# message kinds: the EventType of Hudi's ControlMessage.proto (hudi-kafka-connect)
START_COMMIT = "START_COMMIT"
END_COMMIT = "END_COMMIT"
WRITE_STATUS = "WRITE_STATUS"
ACK_COMMIT = "ACK_COMMIT"
KINDS: tuple[str, ...] = (START_COMMIT, END_COMMIT, WRITE_STATUS, ACK_COMMIT)

OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"  # Kafka's error code name


@message
@dataclass
class ControlMessage:
    """One message on the control topic (Hudi's ``ControlMessage`` proto).

    ``offsets`` is the proto's ``CoordinatorInfo.globalKafkaCommitOffsets``: every message the
    coordinator sends (START_COMMIT, END_COMMIT, ACK_COMMIT; ``buildControlMessage``) carries the
    offsets committed so far per source (Kafka) partition, which participants treat as the truth.
    ``write_stats`` and ``last_offset`` are a participant's WRITE_STATUS for ``partition``
    (``ParticipantInfo``; the proto's ``kafkaOffset`` is ``last_offset + 1``, the next offset);
    ``seq`` numbers a sender's messages so receivers can spot gaps and duplicates.
    """

    kind: str
    commit_time: str
    sender: str
    partition: int = -1
    offsets: dict[int, int] = field(default_factory=dict)
    write_stats: list[WriteStat] = field(default_factory=list)
    last_offset: int = -1
    seq: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown control message kind {self.kind!r}; expected one of {KINDS}")


@message
@dataclass
class TopicRecord:
    """A message as stored in the control topic's log: its offset and when the topic appended it."""

    offset: int
    message: ControlMessage
    appended_at: float


@message
@dataclass
class AppendRequest:
    """Producer -> topic; the reply is the offset the message was appended at."""

    message: ControlMessage


@message
@dataclass
class FetchRequest:
    """Consumer -> topic: records from ``offset`` on; ``timeout_s > 0`` long-polls when none exist."""

    consumer: str
    offset: int
    max_records: int = 100
    timeout_s: float = 0.0


@message
@dataclass
class FetchResponse:
    """Topic -> consumer. ``next_offset`` is where the consumer should fetch next.

    ``error`` is empty on success or ``OFFSET_OUT_OF_RANGE`` when the requested offset is below
    ``log_start_offset``; then ``records`` is empty and ``next_offset`` is the log start
    (``runtime.kafka.topic.raise_for_error`` turns the marker into an exception).
    """

    records: list[TopicRecord]
    next_offset: int
    log_start_offset: int
    high_watermark: int
    error: str = ""


@message
@dataclass
class OffsetCommit:
    """Consumer -> topic: ``offset`` is the next offset the consumer will read (Kafka's convention)."""

    consumer: str
    offset: int


# -- checkpointed state of the roles ----------------------------------------------------------------


@message
@dataclass
class SeekRequest:
    """A consumer asks its source to emit again from ``offset`` (a Kafka seek)."""

    offset: int


@message
@dataclass
class CommitRecord:
    instant: str
    checkpoint: int
    rows: int
    files: int
    committed_at: float = 0.0


@message
@dataclass
class CoordinatorState:
    """The coordinator's checkpointed state (taken when a checkpoint is triggered)."""

    checkpoint_id: int
    instant: str
    events: list[WriteMetadataEvent] = field(default_factory=list)


@message
@dataclass
class EventBufferState:
    """One entry of EventBuffers: checkpoint key -> (instant, one event per task that reported)."""

    checkpoint_id: int
    instant: str
    events: list[WriteMetadataEvent] = field(default_factory=list)


@message
@dataclass
class RpcCoordinatorState:
    """The coordinator's checkpointed state (getAllCompletedEvents)."""

    buffers: list[EventBufferState] = field(default_factory=list)


@message
@dataclass
class CompletedCheckpoint:
    checkpoint_id: int
    round: int  # the data round this checkpoint closed
    states: dict[str, bytes] = field(default_factory=dict)  # role name -> encoded state


# -- introspection: what a write task's actor answers while its mailbox thread is blocked ----------


@message
@dataclass
class MailInfo:
    """One queued mail, in take order (Flink's ``TaskMailbox``): what the deadlock report shows."""

    position: int
    seq: int
    kind: str
    description: str
    priority: int
    waited_s: float


@message
@dataclass
class MailRun:
    """What the mailbox thread runs: a mail, or a step of the default action (``processInput``)."""

    what: str  # "mail" or "default action"
    kind: str
    description: str
    started_at: float
    seq: int | None = None
    priority: int | None = None
    step: int | None = None  # the default action's step number
    ended_at: float | None = None


@message
@dataclass
class BlockedWait:
    """What a role's mailbox thread is blocked on right now (for introspection and the
    deadlock watchdog).

    ``releasing_mail`` names the kind of mail that would end the wait if it could run, when the
    wait can be ended by a mail at all (P1's ``CommitAckEvent``); ``waiting_on`` says in words what
    else would end it ("a new pending instant on the timeline").
    """

    what: str
    waiting_on: str
    since: float
    releasing_mail: str | None = None
    checkpoint_id: int = -1


@message
@dataclass
class InstantWait:
    """A finished wait of a writer for an instant: the commit-to-unblock latency's sample."""

    instant: str
    since: float
    until: float


@message
@dataclass
class TaskDump:
    """A write task's introspection, answered even while its mailbox thread is blocked.

    A host that cannot reach the task fills only ``role`` and ``state`` (``unreachable: ...``,
    ``not answering for N s``)."""

    role: str
    state: str
    task_id: int = -1
    error: str | None = None
    running: MailRun | None = None
    blocked: BlockedWait | None = None
    blocked_s: float = 0.0  # how long ``blocked`` has lasted
    mailbox: list[MailInfo] = field(default_factory=list)
    input_queue: int = 0
    buffered_rows: int = 0
    current_instant: str | None = None
    last_checkpoint_id: int = -1
    rows_in: int = 0
    flushes: dict[str, int] = field(default_factory=dict)
    skipped_flushes: int = 0
    protocol: dict[str, object] = field(default_factory=dict)  # the protocol side's own state
    waits: list[InstantWait] = field(default_factory=list)

    @property
    def unreachable(self) -> bool:
        return self.state.startswith("unreachable")


@message
@dataclass
class CheckpointView:
    """One checkpoint as the job manager tracks it (Flink's pending or completed checkpoint)."""

    status: str  # pending, completed, aborted, timed-out, subsumed
    round: int = 0  # the data round its barriers close (round k: the records before barrier k)
    reason: str = ""
    acks: list[str] = field(default_factory=list)  # the roles that acknowledged it


@message
@dataclass
class JobManagerView:
    """The job manager's state: what the supervisor, the progress bar and a failover read."""

    status: str
    current: int  # the checkpoint in progress (0 before the first)
    waiting_for: str  # what the loop waits for now (a timed-out job's diagnosis)
    checkpoints: dict[int, CheckpointView] = field(default_factory=dict)
    rounds_emitted: dict[str, int] = field(default_factory=dict)
    failures: list[TaskFailure] = field(default_factory=list)


@message
@dataclass
class InstantRelease:
    """When the coordinator made an instant known to the writers (the commit-to-unblock latency's
    start)."""

    instant: str
    at: float


@message
@dataclass
class CoordinatorView:
    """The coordinator's state: what the result record and a failover decision read."""

    instant: str | None
    commits: list[CommitRecord] = field(default_factory=list)
    empty_rounds: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)
    bootstrapped: list[int] = field(default_factory=list)
    error: str | None = None
    cleanings: list[dict[str, float]] = field(default_factory=list)
    buffered_events: int = 0
    releases: list[InstantRelease] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    protocol: dict[str, object] = field(default_factory=dict)  # the protocol side's own state
    deleted_by_fault: list[str] = field(default_factory=list)
    resets: list[dict[str, object]] = field(default_factory=list)  # region failovers it lived through
    stale_events_dropped: int = 0
    compactions_scheduled: list[str] = field(default_factory=list)
    compactions_postponed: int = 0
    # a multi-writer --concurrency-mode's figures (runtime.hudi.client.concurrency); empty under single-writer
    concurrency: dict[str, object] = field(default_factory=dict)


@message
@dataclass
class FileSliceRequest:
    """A write task asks the embedded timeline server for file slices
    (``RemoteHoodieTableFileSystemView``: the partition and what the task's timeline knows: the
    instant it writes and, when it has just read the timeline, its completed instants' key).
    ``file_id``: one file group's latest slice (``getLatestFileSlice``, ``getLatestBaseFile``);
    empty: every file group of the partition (``getAllFileGroups``, a partition's first touch)."""

    partition: str
    instant: str
    timeline: str = ""
    file_id: str = ""


@message
@dataclass
class PartitionFiles:
    """Files of a partition, names and sizes, as one listing or a file-system view holds them: the
    server's answer (a partition's at a first touch, one file group's for a look-up). Two
    columns: a partition's hundreds of files as flat lists cost the codec a fraction of an object
    each."""

    names: list[str]
    sizes: list[int]

    @classmethod
    def listed(cls, entries: Iterable[FileEntry]) -> PartitionFiles:
        """A directory listing's files as the two columns."""
        entries = list(entries)
        return cls([e.name for e in entries], [e.size for e in entries])

    def sizes_by_name(self) -> dict[str, int]:
        return dict(zip(self.names, self.sizes, strict=True))
