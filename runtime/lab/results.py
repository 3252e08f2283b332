"""The result record of a run and the figures every host reports the same way (Ray, the simulator)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypedDict

from runtime.core import roles
from runtime.core.dfs import DfsComponentOps, DfsCounters
from runtime.core.json_doc import JsonObject
from runtime.core.messages import InstantRelease, TaskDump
from runtime.core.metrics import Metrics, MetricsSnapshot
from runtime.faults.markers import FiredFault
from runtime.hudi.formats.commit_metadata import CommitSummary, CompactionSummary
from runtime.lab.deadlock import Stall
from runtime.lab.latency import Percentiles, percentiles, unblock_latencies
from runtime.lab.s3_endpoint import EndpointCounts
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix, Deadlock, ExactlyOnce, TableBefore

TraceEvent = tuple[Any, ...]  # (t_ns, type, role, *fields), as runtime.sim.recorder records them

DATA_ROLES = ("writer.data", roles.DRIVER)  # DFS traffic that is not the commit protocol's
CONTROL_TOPIC = "control_topic."  # the samples control-topic's roles take (RunFigures.control_topic)


def run_figures(
    metric_parts: Iterable[MetricsSnapshot],
    driver_dfs: DfsCounters,
    releases: list[InstantRelease],
    checkpoints: dict[str, CheckpointEntry],
    dumps: dict[str, TaskDump],
    requested_checkpoints: int,
) -> RunFigures:
    """Counters, checkpoints, latencies of a run from its roles' metrics, the coordinator's
    instant releases, the job's checkpoints and the write tasks' dumps."""
    parts = list(metric_parts)
    dfs_ops = DfsCounters.merge([m.dfs_ops for m in parts] + [driver_dfs.snapshot()])
    by_component = DfsCounters.merge_components([m.dfs_components for m in parts] + [driver_dfs.by_component()])
    merged = Metrics.merge(parts)
    latencies = unblock_latencies([(r.instant, r.at) for r in releases], [w for d in dumps.values() for w in d.waits])
    completed = sum(1 for c in checkpoints.values() if c["status"] == "completed")
    aborted = sum(1 for c in checkpoints.values() if c["status"] in ("aborted", "timed-out"))
    n_ckp = max(1, completed + aborted)
    return RunFigures(
        rows_in=sum(d.rows_in for d in dumps.values()),
        checkpoints=CheckpointCounts(completed, aborted, requested_checkpoints, checkpoints),
        dfs_ops=dfs_ops,
        dfs_ops_per_checkpoint={
            r: {op: round(n / n_ckp, 2) for op, n in ops.items()} for r, ops in dfs_ops.items() if r not in DATA_ROLES
        },
        dfs_ops_by_component=by_component,
        dfs_per_checkpoint_by_component=per_checkpoint_by_component(by_component, n_ckp),
        rpcs=merged.rpcs,
        mails=merged.mails,
        writer_blocked_s={k: round(v, 3) for k, v in merged.blocked_s.items()},
        commit_to_unblock_s=percentiles(latencies),
        commit_to_unblock_samples=[round(x, 5) for x in latencies],
        counters=merged.counters,
        control_topic={
            name: percentiles(values)
            for name, values in sorted(merged.samples.items())
            if name.startswith(CONTROL_TOPIC)
        },
    )


def per_checkpoint_by_component(by_component: DfsComponentOps, n_ckp: int) -> dict[str, float]:
    """DFS operations per checkpoint by component, every role of the job added up but the driver's
    (which prepares the table and verifies it): what a commit costs, part by part."""
    out: dict[str, float] = {}
    for role, components in by_component.items():
        if role == roles.DRIVER:
            continue
        for component, counts in components.items():
            out[component] = out.get(component, 0) + sum(counts.values())
    return {c: round(n / n_ckp, 2) for c, n in sorted(out.items())}


@dataclass
class FailoverRecord:
    """One failover of a job: why, when, how (global or region) and where the job resumed."""

    error: str | None
    at: float  # the host's clock: wall-clock seconds on Ray, virtual seconds in the simulator
    strategy: str  # global (restart all) or region (the coordinator lives on)
    restored_checkpoint: int | None
    resumed_round: int
    deleted: str | None = None  # what the bus.deleted_between_restarts fault removed (table-relative)
    down_s: float | None = None  # from the failure until the restarted roles were all up
    coordinator_reset: Any = None  # the coordinator's answer to a region failover's reset
    clock: str = "at"  # the key of ``at`` in result.json: "at" (Ray) or "at_virtual_s" (simulator)

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "error": self.error,
            self.clock: round(self.at, 6) if self.clock == "at_virtual_s" else self.at,
            "strategy": self.strategy,
            "restored_checkpoint": self.restored_checkpoint,
            "resumed_round": self.resumed_round,
            "down_s": self.down_s,
        }
        if self.deleted is not None:
            out["deleted"] = self.deleted
        if self.strategy == "region":
            out["coordinator_reset"] = self.coordinator_reset
        return out

    @classmethod
    def from_json(cls, doc: JsonObject) -> FailoverRecord:
        clock = "at_virtual_s" if "at_virtual_s" in doc else "at"
        return cls(
            error=doc["error"],
            at=doc[clock],
            strategy=doc["strategy"],
            restored_checkpoint=doc["restored_checkpoint"],
            resumed_round=doc["resumed_round"],
            deleted=doc.get("deleted"),
            down_s=doc["down_s"],
            coordinator_reset=doc.get("coordinator_reset"),
            clock=clock,
        )


class CheckpointEntry(TypedDict):
    """One checkpoint of the job as the job manager recorded it."""

    status: str  # completed, pending, aborted, timed-out: the checkpoint's, not the run's
    round: int
    reason: str
    acks: list[str]


class Rollback(TypedDict):
    """An instant the job rolled back, and why."""

    instant: str
    reason: str


class DataWritten(TypedDict, total=False):
    """What the job's commits and compactions wrote (:func:`runtime.hudi.formats.commit_metadata.files_written`), per
    checkpoint, and the write amplification: bytes written / the input records' bytes (the
    sources' ``input_bytes`` counter). Empty when the job stopped before the table existed."""

    base_files: int
    log_files: int
    bytes: int
    compaction_base_files: int
    compaction_bytes: int
    base_files_per_checkpoint: float
    log_files_per_checkpoint: float
    compaction_base_files_per_checkpoint: float
    input_bytes: int
    write_amplification: float | None


class Timing(TypedDict, total=False):
    """How long a run's phases took, in seconds: preparing the stream (the Spark source: starting
    Spark, handing the shards over, the expected state), setting up, running; on Ray also the
    total, when every role was up, and how many of the job's processes (started while the stream
    was prepared) were up when the run began (a count)."""

    spark_start_s: float
    prepare_s: float
    expected_s: float
    setup_s: float
    run_s: float
    total_s: float
    actors_up_s: float | None
    sources_started_at: float | None  # epoch s (Ray): the first launch began starting the sources
    processes_up_at_run: int


class Divergence(TypedDict):
    """Where a replay's trace first differs from the reference run's (events as JSON lists)."""

    index: int
    first: list[Any] | None
    second: list[Any] | None


class SimCounts(TypedDict):
    """The simulator's own figures of a run: its loop, its network, its delays."""

    loop_iterations: int
    clock_jumps: int
    messages: int
    delay: str
    io_delay: str | None
    inline_executor_calls: int


class Compactions(TypedDict, total=False):
    """Merge-on-read: the compactions the job completed (read from the table), those left pending,
    and how many the coordinator scheduled and postponed; empty for copy-on-write."""

    completed: list[CompactionSummary]
    pending: list[str]
    scheduled: int
    postponed: int


class TaskSummary(TypedDict):
    """A write task at the end of the run, from its dump."""

    state: str
    error: str | None
    flushes: dict[str, int]
    protocol: dict[str, object]  # the protocol's own state: each protocol reports its own
    rows_in: int


@dataclass
class CheckpointCounts:
    completed: int
    aborted: int  # aborted or timed out
    requested: int
    detail: dict[str, CheckpointEntry]  # by checkpoint id (a string, as JSON has it)


@dataclass
class RunFigures:
    """Counters, checkpoints, latencies of a run (:func:`run_figures`)."""

    rows_in: int
    checkpoints: CheckpointCounts
    dfs_ops: dict[str, dict[str, int]]  # by role, by operation
    dfs_ops_per_checkpoint: dict[str, dict[str, float]]
    dfs_ops_by_component: DfsComponentOps  # by role, by component (runtime.core.dfs_components), by operation
    dfs_per_checkpoint_by_component: dict[str, float]  # every role but the driver's
    rpcs: dict[str, int]
    mails: dict[str, int]
    writer_blocked_s: dict[str, float]
    commit_to_unblock_s: Percentiles
    commit_to_unblock_samples: list[float]
    counters: dict[str, int]
    # control-topic's latency samples (Metrics.sample) as percentiles: a commit from END_COMMIT to
    # ACK_COMMIT (control_topic.commit_s) and, on a broker, a control message from produce to
    # consume (control_topic.delivery_s); only in a control-topic run's result.json
    control_topic: dict[str, Percentiles] = field(default_factory=dict)

    @property
    def checkpoints_taken(self) -> int:
        """What the per-checkpoint figures divide by: the checkpoints completed or aborted (at least 1)."""
        return max(1, self.checkpoints.completed + self.checkpoints.aborted)

    def dfs_per_checkpoint_by_role(self) -> dict[str, dict[str, float]]:
        """Every role's DFS operations per checkpoint but the driver's: the protocol roles'
        (``dfs_ops_per_checkpoint``) and the write tasks' data work (``writer.data``), so that they
        add up to :attr:`dfs_per_checkpoint_by_component`'s parts."""
        n_ckp = self.checkpoints_taken
        return {
            r: {op: round(n / n_ckp, 2) for op, n in sorted(ops.items())}
            for r, ops in sorted(self.dfs_ops.items())
            if r != roles.DRIVER
        }

    def dfs_total_per_checkpoint(self) -> float:
        """DFS operations per checkpoint of every role but the driver, from the counts themselves
        (not from rounded rows): the sum of the role rows and of the parts alike."""
        total = sum(sum(ops.values()) for r, ops in self.dfs_ops.items() if r != roles.DRIVER)
        return round(total / self.checkpoints_taken, 2)

    def to_json(self) -> JsonObject:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["checkpoints"] = asdict(self.checkpoints)
        if not self.control_topic:
            del out["control_topic"]
        return out

    @classmethod
    def from_json(cls, doc: JsonObject) -> RunFigures:
        # results written before the component breakdown existed have none
        added: JsonObject = {"dfs_ops_by_component": {}, "dfs_per_checkpoint_by_component": {}, "control_topic": {}}
        values: JsonObject = {f.name: doc[f.name] if f.name in doc else added[f.name] for f in fields(cls)}
        return cls(**{**values, "checkpoints": CheckpointCounts(**doc["checkpoints"])})


@dataclass
class CoordinatorRecord:
    """What the coordinator lived through: resets, what a fault deleted, its protocol's state."""

    resets: list[dict[str, object]]  # the coordinator's answer to each region failover's reset
    deleted_by_fault: list[str]
    protocol: dict[str, object]  # each protocol reports its own
    # a multi-writer --concurrency-mode: the mode as Hudi's options, conflicts, the lock's cost
    concurrency: dict[str, object] = field(default_factory=dict)


@dataclass
class SimulationRecord:
    """What only the simulator reports: the schedule's seed, virtual time, the trace's hash."""

    host: str
    storage: str  # memory (the simulated disk) or disk
    seed: int
    virtual_s: float
    wall_s: float
    verify_s: float
    sim: SimCounts
    trace_events: int
    trace_sha256: str  # "" when not computed: the bounded search's runs (simulate's hash_trace)
    divergence: Divergence | None  # the first event that differed from the expected trace
    # the events, when asked for: kept in memory (replays, excerpts) and written to trace.jsonl,
    # never into result.json
    trace: list[TraceEvent] | None = None

    def to_json(self) -> JsonObject:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}

    @classmethod
    def from_json(cls, doc: JsonObject) -> SimulationRecord:
        values: JsonObject = {f.name: doc.get(f.name) for f in fields(cls) if f.name != "trace"}
        return cls(**values)


class ProcessPlace(TypedDict, total=False):
    """Where one process of a Ray run lived (``actors.process_actor``'s ``where``): the roles it
    hosted, its node, host and pid, its memory (RSS; USS when readable), and how often Ray
    started a sender's later message first (the channels put it back in order); only ``error``
    and ``roles`` for a process that did not answer. A role's entry is its process's, without
    ``roles``."""

    process: str
    roles: list[str]
    node_id: str
    host: str
    pid: int
    rss_bytes: int
    uss_bytes: int | None
    messages_held_for_order: int
    order_gaps: int
    error: str


class RunPlacement(TypedDict):
    """Where a Ray run's roles ran: the placement strategy, the roles on each node, the nodes
    holding write tasks, every process and every role, and the slots of a task manager."""

    strategy: str
    roles_per_node: dict[str, int]
    writer_nodes: int
    processes: dict[str, ProcessPlace]
    roles: dict[str, ProcessPlace]
    slots_per_task_manager: int


@dataclass(frozen=True)
class ClusterLost:
    """A run on Ray that lost its cluster: the head's GCS (at ``gcs_address``) stopped answering
    the driver for ``unreachable_s`` seconds, or its process, of a local Ray, exited (``seen``
    says which, in words). Recorded as ``cluster_lost`` (``actors/cluster_watch.py``)."""

    gcs_address: str
    unreachable_s: float
    seen: str

    def to_json(self) -> JsonObject:
        return {"gcs_address": self.gcs_address, "unreachable_s": self.unreachable_s, "seen": self.seen}

    @classmethod
    def from_json(cls, doc: JsonObject) -> ClusterLost:
        return cls(doc["gcs_address"], doc["unreachable_s"], doc["seen"])


@dataclass
class RayRecord:
    """What only the Ray host reports: where the roles ran, what the DFS endpoint served, and
    when the run lost its Ray cluster, what showed it."""

    placement: RunPlacement
    dfs_endpoint: EndpointCounts | None
    trace_file: str | None
    stacks_at_timeout: JsonObject | None = None  # a timed-out job: where its coroutines waited
    cluster_lost: ClusterLost | None = None

    def to_json(self) -> JsonObject:
        out = {} if self.stacks_at_timeout is None else {"stacks_at_timeout": self.stacks_at_timeout}
        if self.cluster_lost is not None:
            out["cluster_lost"] = self.cluster_lost.to_json()
        return out | {"placement": self.placement, "dfs_endpoint": self.dfs_endpoint, "trace_file": self.trace_file}

    @classmethod
    def from_json(cls, doc: JsonObject) -> RayRecord:
        lost = doc.get("cluster_lost")
        return cls(
            doc["placement"],
            doc.get("dfs_endpoint"),
            doc.get("trace_file"),
            doc.get("stacks_at_timeout"),
            ClusterLost.from_json(lost) if lost else None,
        )


# JobResult's fields that result.json places after the job's own: the failovers, then the host's
_AFTER_THE_JOB = frozenset({"figures", "failovers", "exactly_once", "simulation", "ray", "timeline", "timeline_error"})


@dataclass
class JobResult:
    """The result record of a job on any host; :meth:`to_json` gives ``result.json``."""

    figures: RunFigures
    protocol: str
    writers: int
    source: str
    table: str
    status: Status
    error: str | None
    records: int
    commits: list[CommitSummary]  # read from the table
    empty_rounds: list[int]
    failovers: list[FailoverRecord]
    faults_fired: list[FiredFault]
    faults_armed: list[str]  # the --faults specs, as written
    faults_not_fired: list[str]  # armed specs that never fired: the run did not test them
    rolled_back: list[str]
    rollbacks: list[Rollback]  # why each instant was rolled back
    coordinator: CoordinatorRecord
    deadlock: Deadlock | None
    stalls: list[Stall]
    timing: Timing
    rows_per_s: float
    tasks: dict[str, TaskSummary]
    send_errors: list[str]
    durations: dict[str, float]  # the time scale and every scaled Hudi/Flink duration the run used
    config: dict[str, Any]  # the effective configuration (JobConfig.record): --config re-runs it
    committed_prefix: CommittedPrefix | None = None  # a run that did not finish: its commits, checked
    # the table before the run (rows, hash, instant, merge rule): what its stream was merged into
    table_before: TableBefore | None = None
    # merge-on-read: the compactions the job completed, read from the table (instant, file groups,
    # rows, log files compacted), and those it scheduled / postponed
    compactions: Compactions = field(default_factory=lambda: Compactions())
    # the data the job's commits and compactions wrote (runtime.hudi.formats.commit_metadata.files_written),
    # and the write amplification: bytes written / the input records' bytes (the sources' input_bytes counter:
    # what they emitted, replays after a failover included, so a figure for runs without faults)
    data_written: DataWritten = field(default_factory=lambda: DataWritten())
    exactly_once: ExactlyOnce | None = None  # a finished run's verdict (None: not verified)
    simulation: SimulationRecord | None = None  # the simulator's own fields
    ray: RayRecord | None = None  # the Ray host's own fields
    timeline: str | None = None  # the timeline picture drawn from the run's trace
    timeline_error: str | None = None  # why it could not be drawn

    @property
    def finished(self) -> bool:
        return self.status == Status.FINISHED

    @property
    def sim(self) -> SimulationRecord:
        """The simulator's fields of a simulated run."""
        if self.simulation is None:
            raise ValueError(f"the run of {self.table} did not run on the simulator")
        return self.simulation

    def to_json(self) -> JsonObject:
        """result.json: the figures, then the job's fields, then what the host adds."""
        out = self.figures.to_json()
        out.update((f.name, self._field_json(f.name)) for f in fields(self) if f.name not in _AFTER_THE_JOB)
        out["failovers"] = [f.to_json() for f in self.failovers]
        if self.ray is not None:
            out.update(self.ray.to_json())
        out["exactly_once"] = self.exactly_once and self.exactly_once.to_json()
        if self.simulation is not None:
            out.update(self.simulation.to_json())
        for picture in ("timeline", "timeline_error"):
            if getattr(self, picture) is not None:
                out[picture] = getattr(self, picture)
        return out

    def _field_json(self, name: str) -> Any:
        value = getattr(self, name)
        if isinstance(value, Status):
            return value.value
        if isinstance(value, (Deadlock, CommittedPrefix, TableBefore)):
            return value.to_json()
        if isinstance(value, CoordinatorRecord):
            doc = asdict(value)
            if not value.concurrency:  # single-writer: the document it always was
                del doc["concurrency"]
            return doc
        return [asdict(s) for s in self.stalls] if name == "stalls" else value

    @classmethod
    def from_json(cls, doc: JsonObject) -> JobResult:
        """A result.json read back (``commitlab report DIR``, ``--config DIR/result.json``)."""
        plain = {f.name: doc[f.name] for f in fields(cls) if f.name not in _AFTER_THE_JOB and f.name in doc}
        prefix, verdict, deadlock = doc.get("committed_prefix"), doc.get("exactly_once"), doc.get("deadlock")
        typed: JsonObject = dict(
            status=Status(doc["status"]),
            coordinator=CoordinatorRecord(**doc["coordinator"]),
            deadlock=deadlock and Deadlock.from_json(deadlock),
            stalls=[Stall(**s) for s in doc.get("stalls", [])],
            committed_prefix=prefix and CommittedPrefix.from_json(prefix),
            table_before=doc.get("table_before") and TableBefore.from_json(doc["table_before"]),
        )
        return cls(
            **plain | typed,
            figures=RunFigures.from_json(doc),
            failovers=[FailoverRecord.from_json(f) for f in doc.get("failovers", [])],
            exactly_once=verdict and ExactlyOnce.from_json(verdict),
            simulation=SimulationRecord.from_json(doc) if doc.get("host") == "simulator" else None,
            ray=RayRecord.from_json(doc) if "placement" in doc else None,
            timeline=doc.get("timeline"),
            timeline_error=doc.get("timeline_error"),
        )
