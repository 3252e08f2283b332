"""The protocol interface: how a write task learns the instant to write, and what the
coordinator publishes when an instant starts, a round is empty or a checkpoint is aborted.

Each protocol has a writer side (on the task's mailbox thread) and a coordinator side. The rest of
the write path (buffering, flushing, events, commit) is shared and knows nothing of protocols.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any
from typing import Protocol as _TypingProtocol

from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.messages import BlockedWait, TaskState
from runtime.hudi.client.table_services import FLINK_DEFAULTS, ReleaseDefaults
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table.hudi_table import HudiTable

if TYPE_CHECKING:
    pass


class InstantWaitTimeout(TimeoutError):
    """The writer waited past its bound for an instant (Hudi: 'Timeout while waiting for
    instant initialize'); the task fails and the job fails over."""


class WriterContext(_TypingProtocol):
    """What a writer-side protocol may see of its task."""

    env: Env
    config: JobConfig
    table: HudiTable
    task_id: int
    current_instant: str | None
    last_checkpoint_id: int
    # the task's checkpointed state when it restarts from one (None on a fresh start), set before
    # open(): its checkpoint id and instant, and the write statuses it re-sends in its bootstrap
    restored: TaskState | None

    def set_blocked(self, wait: BlockedWait | None) -> None: ...


class CoordinatorContext(_TypingProtocol):
    env: Env
    config: JobConfig
    table: HudiTable
    client: WriteClient  # the table's write client: commits, rollbacks and table services go through it
    task_names: list[str]


class WriterSide(abc.ABC):
    # Flink writers flush everything at the barrier; a Kafka Connect participant does not (its
    # commits ride the control topic, not checkpoints)
    flushes_at_barrier: bool = True
    # whether a failover restarts sources from the beginning (the protocol's own offsets decide
    # what to skip) instead of from the last completed checkpoint
    replays_from_committed_offsets: bool = False

    def __init__(self, ctx: WriterContext) -> None:
        self.ctx = ctx

    def accept(self, records: Any, start_offset: int) -> Any:
        """Filters an input batch before buffering (the control topic's offset rules); returns
        the records to buffer, possibly none."""
        return records

    def may_flush_eagerly(self) -> bool:
        """Whether a size-triggered flush may write now (False keeps buffering)."""
        return True

    async def on_write_event(self, event: Any) -> bool:
        """Sees each WriteMetadataEvent before it goes to the coordinator; True keeps it (a
        protocol that reports writes its own way, like the control topic's WRITE_STATUS)."""
        return False

    async def open(self) -> None:
        """Called once when the task initializes its state, before the bootstrap event."""

    def initial_instant(self) -> str | None:
        """The task's current instant after (re)start; None until it writes."""
        return None

    @abc.abstractmethod
    async def instant_to_write(self, *, eager: bool, has_data: bool) -> str | None:
        """Blocks the mailbox thread until the instant to write is known. ``eager`` is True for
        a flush before the barrier; ``has_data`` whether the task buffers records."""

    def on_snapshot(self, checkpoint_id: int) -> None:
        """After the barrier flush: the next flush must confirm a new instant."""

    def on_operator_event(self, event: Any) -> None:
        """An operator event from the coordinator, run as a lowest-priority mail."""

    def describe(self) -> dict[str, Any]:
        return {}


class CoordinatorSide(abc.ABC):
    # RPC methods this side answers on the coordinator's actor, besides the coordinator's own
    RPC_METHODS: tuple[str, ...] = ()
    # whether the coordinator starts an instant at bootstrap and after each commit (Hudi <= 1.0);
    # coordination-rpc creates them on request instead
    eager_instants: bool = True
    # Hudi 1.x: the protocol keeps the write metadata events in its own per-checkpoint buffers,
    # which go into the coordinator's checkpoint (snapshot_state) and come back from it after a
    # global failover (restore_state); the coordinator's 0.x event list and bootstrap path are skipped
    buffers_events: bool = False
    # BaseHoodieWriteClient.startCommit: under the EAGER failed-writes policy (Hudi's default for
    # a single Flink writer) CleanerUtils.rollbackFailedWrites rolls every pending writer's instant
    # back before a new instant starts; the coordinator's instant starts (create_instant) do it when
    # this is True. False for a side that does not start its instants through startCommit there.
    rolls_back_at_start_commit: bool = True

    def __init__(self, ctx: CoordinatorContext) -> None:
        self.ctx = ctx

    def instants_in_use(self) -> set[str]:
        """Pending instants the coordinator still means to commit: an instant start's rollback of
        failed writes spares them (``Coordinator.create_instant``)."""
        return set()

    async def open(self) -> None:
        """Called when the coordinator starts, before the first instant."""

    async def on_instant_started(self, checkpoint_id: int, committed: str, new_instant: str) -> None:
        """A new instant is inflight; ``checkpoint_id`` is the checkpoint whose completion
        started it (0 for the first), ``committed`` the instant just committed ('' if none)."""

    async def on_checkpoint_complete(self, checkpoint_id: int) -> dict[str, Any] | None:
        """Overrides the commit decision (runs under the coordinator's handler lock); None keeps
        the default: commit the current instant once every task sent its last batch."""
        return None

    async def on_all_bootstrapped(self) -> None:
        """Every task sent its bootstrap event (after the first instant, if eager)."""

    async def on_checkpoint_trigger(self, checkpoint_id: int) -> None:
        """The job manager triggered a checkpoint (the coordinator's snapshot is being taken)."""

    async def on_end_of_input(self, final_offsets: dict[int, int]) -> dict[str, Any]:
        """The job's last checkpoint completed; a protocol that commits on its own schedule
        finishes here (bounded). ``final_offsets``: rows each task's source emitted."""
        return {}

    async def on_empty_round(self, checkpoint_id: int, instant: str) -> None:
        """Checkpoint completed with no data written: ``instant`` is reused."""

    async def on_checkpoint_aborted(self, checkpoint_id: int, instant: str) -> None:
        """Checkpoint aborted: ``instant`` stays pending and is reused."""

    async def on_write_metadata(self, event: Any) -> None:
        """With ``buffers_events``: every WriteMetadataEvent, bootstrap or not, under the handler
        lock (Hudi 1.x handleBootstrapEvent / handleWriteMetaEvent)."""

    def snapshot_state(self, checkpoint_id: int) -> bytes:
        """With ``buffers_events``: this side's part of the coordinator's checkpoint."""
        return b""

    async def restore_state(self, state: bytes) -> None:
        """With ``buffers_events``: a restarted coordinator's state from the last completed
        checkpoint (Flink's resetToCheckpoint), before :meth:`open`."""

    def describe(self) -> dict[str, Any]:
        return {}

    async def on_tasks_reset(self) -> None:
        """Region failover: every write task restarts; pending instants will be rolled back when
        they have all bootstrapped again, so forget any handed out."""

    async def delete_dfs_messages(self) -> str | None:
        """Deletes the directory of messages this protocol keeps on the DFS and returns its path
        (the bus.deleted fault, #8060); None when the protocol keeps none there."""
        return None

    async def close(self) -> None:
        pass


class Protocol:
    """A named pair of sides."""

    name: str = ""
    description: str = ""
    writer_side: type[WriterSide]
    coordinator_side: type[CoordinatorSide]
    # roles this protocol adds to the job, by actor name (the timeline server, the control topic),
    # and the RPC methods they answer (a messaging fault may name one)
    extra_roles: tuple[str, ...] = ()
    extra_rpc_methods: tuple[str, ...] = ()
    # whether the coordinator tells writers through files on the DFS (the bus faults apply)
    messages_on_dfs: bool = False
    # hoodie.allow.empty.commit in the modelled release: its default, or None where the Flink
    # writer has no such option (before 0.14, HUDI-6127) or the protocol commits empty anyway
    empty_commit_default: bool | None = None
    # True for a design no Hudi release ships (two-phase-commit): listings and --help mark it
    what_if: bool = False
    # hoodie.table.version the modelled release writes (HoodieTableVersion.current(): 6 up to
    # 0.15, 8 in 1.0, 9 in 1.1): what --table-version release resolves to
    release_table_version: int = 6
    # clean.retain_commits, archive.min_commits, archive.max_commits of the modelled writer: what
    # --clean-retain-commits / --archive-min-commits / --archive-max-commits release resolve to
    table_service_defaults: ReleaseDefaults = FLINK_DEFAULTS
    # FlinkOptions.METADATA_ENABLED (metadata.enabled) in the modelled release: false up to 0.15
    # (the 0.14.0 bundle's bytecode), true from 1.0 (HUDI-4372, PR #11124): what --metadata-table
    # release resolves to
    metadata_table_default: bool = False
    # the write tasks' file-system view in the modelled release (runtime.hudi.table.file_system_view):
    # "remote", the coordinator's embedded timeline server (FlinkWriteClients), or "direct"
    release_file_system_view: str = "remote"

    @classmethod
    def allows_empty_commit(cls, config: JobConfig) -> bool:
        """Whether a round without data commits an empty instant (``--allow-empty-commit``)."""
        if config.allow_empty_commit == "release" or cls.empty_commit_default is None:
            return bool(cls.empty_commit_default)
        return config.allow_empty_commit == "true"

    @classmethod
    def check_config(cls, config: JobConfig) -> None:
        """Raises a ConfigError (exit 2, before any host starts) for options the protocol cannot
        run, naming the flag and the fix; ``config.table_version`` is resolved to a number."""

    @classmethod
    def dfs_message_dirs(cls, base_path: str) -> tuple[str, ...]:
        """The directories of messages this protocol keeps on the DFS under the table at
        ``base_path``: what the bus.deleted_between_restarts fault removes while the job is down
        (#8060, #8120), so a host need not know any protocol's layout."""
        return ()

    @classmethod
    def roles_for(cls, config: JobConfig) -> tuple[str, ...]:
        """The ``extra_roles`` a job with ``config`` starts (the control topic is none on a broker)."""
        return cls.extra_roles

    @classmethod
    def make_role(cls, kind: str, env: Env, config: JobConfig, table: HudiTable, task_names: list[str]) -> Any:
        """Builds one of ``extra_roles``; the object lists its RPC methods in ``RPC_METHODS``."""
        raise ValueError(f"protocol {cls.name} has no role {kind!r}")
