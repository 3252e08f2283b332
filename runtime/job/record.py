"""The result record of one job (:class:`~runtime.lab.results.JobResult`), from what the driver
kept of its attempts and what the host gathered of its roles at the end: the commits and
compactions the table holds, every instant rolled back and why (Hudi's coordinator rolls back
pending instants when it starts: ``StreamWriteOperatorCoordinator.initInstant`` ->
``rollbackFailedWrites``), the faults fired, the failovers, the checkpoints.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from runtime.core import roles, trace_events
from runtime.core.config import JobConfig
from runtime.core.dfs import DfsCounters
from runtime.core.json_doc import JsonObject
from runtime.core.messages import CoordinatorView, JobManagerView, TaskDump
from runtime.core.metrics import MetricsSnapshot
from runtime.core.trace import TraceEvent
from runtime.faults.markers import FiredFault, fired_faults
from runtime.flink.state_backend import StateBackend
from runtime.hudi.formats.commit_metadata import (
    CommitSummary,
    CompletedInstant,
    commit_summaries,
    compaction_summaries,
    files_written,
)
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.timeline.archived_timeline import archived_commit_metadata
from runtime.job.driver import JobDriver, Outcome
from runtime.lab.prefix import verify_prefix
from runtime.lab.results import (
    CheckpointEntry,
    Compactions,
    CoordinatorRecord,
    DataWritten,
    JobResult,
    Rollback,
    RunFigures,
    TaskSummary,
    Timing,
    run_figures,
)
from runtime.lab.status import Status
from runtime.lab.verdicts import CommittedPrefix
from runtime.lab.verify import VerifyError

# a checkpoint the driver's last view had pending that the completed-checkpoint store holds
COMPLETED_AFTER_VIEW = "completed after the driver's last view of the job manager (read from the checkpoint store)"


def rollbacks(driver: JobDriver, coord: CoordinatorView) -> list[Rollback]:
    """Every instant the job rolled back, and why: those pending when an attempt started that
    are gone from the table now, and those the coordinator reports (a failed commit it rolled
    back itself)."""
    timeline = driver.table.timeline() if driver.pending_at_launch else None
    on_table = set(timeline.pending_commits()) | set(timeline.completed_commits()) if timeline else set()
    out = [Rollback(instant=i, reason=why) for i, why in driver.pending_at_launch.items() if i not in on_table]
    seen = {r["instant"] for r in out}
    out += [
        Rollback(instant=i, reason="a failed commit the coordinator rolled back")
        for i in coord.rolled_back
        if i not in seen
    ]
    return sorted(out, key=lambda r: r["instant"])


def verify_committed_prefix(
    driver: JobDriver,
    record: JobResult,
    stream: pa.Table | None,
    read_actual: Callable[[], pa.Table],
    before: pa.Table | None = None,
) -> CommittedPrefix | None:
    """A run that did not finish: whether its commits hold exactly what they should
    (:mod:`runtime.lab.prefix`), merged into the table as it found it (``before``); None for a
    finished run (``exactly_once`` says it all)."""
    if record.status == Status.FINISHED:
        return None
    if stream is None:
        return CommittedPrefix(
            verified=None,
            prefix="not checked: the Spark source keeps no copy of the stream; "
            "run commitlab verify --table with --input to check the table",
        )
    cfg, commits = driver.cfg, record.commits
    extra = driver.table.read_commit_metadata(commits[-1]["instant"]).get("extraMetadata", {}) if commits else {}
    try:
        return verify_prefix(
            read_actual(),
            stream,
            commits,
            record.figures.checkpoints.detail,
            cfg.round_bounds(),
            extra,
            key=cfg.key_field,
            precombine=cfg.precombine_field,
            partition=cfg.partition_field,
            before=before,
        )
    except (VerifyError, ValueError) as exc:
        return CommittedPrefix(verified=False, prefix="not checked", error=str(exc))


def unchanged_table(table: HudiTable, commits_before: set[str]) -> CommittedPrefix:
    """A run stopped in its start-up, before any role started: it committed nothing, so its table
    holds the completed instants it held, checked by listing the timeline."""
    now = completed_instants(table)
    held = f"the table's timeline holds the {len(commits_before)} completed instant(s) it held"
    what = "nothing: stopped during the start-up, before any role started"
    if now == commits_before:
        return CommittedPrefix(verified=True, prefix=f"{what}; {held}")
    changed = sorted(now ^ commits_before)[:10]
    return CommittedPrefix(verified=False, prefix=what, error=f"instants changed meanwhile: {changed}")


def completed_instants(table: HudiTable) -> set[str]:
    """The table's completed instants; none before it is created (its ``.hoodie`` may hold only
    the run's lock)."""
    created = table.dfs.exists(table.dfs.join(table.hoodie, "hoodie.properties"))
    return set(table.timeline().completed_instants()) if created else set()


def faults_not_fired(driver: JobDriver, fired: list[FiredFault]) -> list[str]:
    """The armed fault specs no role fired (a marker per firing names the spec)."""
    keys = {(f["point"], f["checkpoint"], f["task"], f.get("target", "")) for f in fired}
    return [s.text() for s in driver.cfg.faults if (s.point, s.checkpoint, s.task, s.target) not in keys]


def trace_markers(driver: JobDriver) -> list[TraceEvent]:
    """Trace events of the job's failovers (when the job failed, when it was back), for the
    timeline picture and the trace file: what no role could record, since one of them died."""

    def marker(name: str, at: float, args: JsonObject) -> TraceEvent:
        ts = round(at * 1e6, 1)
        return TraceEvent(
            ph="i",
            s="g",
            pid="job",
            tid="failover",
            cat=trace_events.FAILOVER,
            name=name,
            ts=ts,
            args=args,
        )

    out = []
    for n, f in enumerate(driver.failovers, start=1):
        what = f"failover {n} ({f.strategy}): restore checkpoint {f.restored_checkpoint}"
        failed = trace_events.failover_args(n, trace_events.FAILED)
        out.append(marker(what, f.at, {"error": (f.error or "")[:300], "down_s": f.down_s} | failed))
        if f.down_s is not None:
            out.append(marker(f"restarted {n}", f.at + f.down_s, trace_events.failover_args(n, trace_events.RESTARTED)))
    return out


def checkpoints(driver: JobDriver, jm: JobManagerView | None, *, final: bool = True) -> dict[str, CheckpointEntry]:
    """Every checkpoint of the job, those of job managers a failover replaced included, as
    result.json's ``checkpoints.detail`` (string keys, as JSON has them). A view that is not
    ``final`` (the last the driver holds of a job manager that did not answer at the end) may
    miss checkpoints that completed after it: the completed-checkpoint store on the table says
    which (the job manager stores a checkpoint before it notifies anyone of its completion)."""
    every = {**driver.prior_checkpoints, **(jm.checkpoints if jm is not None else {})}
    out: dict[int, CheckpointEntry] = {
        k: CheckpointEntry(status=v.status, round=v.round, reason=v.reason, acks=list(v.acks))
        for k, v in sorted(every.items())
    }
    if not final:
        stored = StateBackend(driver.table.dfs, driver.table.base_path, driver.cfg.checkpoint_store).completed()
        for done in (c for c in stored if c.checkpoint_id > driver.cfg.from_checkpoint):  # not an earlier job's
            if done.checkpoint_id not in out or out[done.checkpoint_id]["status"] != "completed":
                acks = sorted(r for r in done.states if r != roles.COORDINATOR)
                out[done.checkpoint_id] = CheckpointEntry(
                    status="completed", round=done.round, reason=COMPLETED_AFTER_VIEW, acks=acks
                )
    return {str(k): v for k, v in sorted(out.items())}


@dataclass(frozen=True)
class TableRecord:
    """What the table says of a job: its commits, its compactions, what it wrote."""

    commits: list[CommitSummary]
    compactions: Compactions
    data_written: DataWritten


def table_record(driver: JobDriver, coord: CoordinatorView, figures: RunFigures, before: set[str]) -> TableRecord:
    """What the table says of this job, from one listing of its timeline and one read of each
    completed instant's metadata (none when the job stopped before the table was created):
    its commits, which survive any failover; merge-on-read: its compactions and what the
    coordinator scheduled and postponed; the files and bytes it wrote and the write
    amplification."""
    if not driver.table.dfs.exists(driver.table.hoodie):
        return TableRecord([], Compactions(), DataWritten())
    timeline = driver.table.timeline()
    # this run's commits the archiver moved off the active timeline (after those it found there)
    first = max(before, default="")
    archived = [c for c in archived_commit_metadata(driver.table) if c.instant > first and c.instant not in before]
    done = archived + driver.table.completed_metadata(timeline, skip=before)
    compactions = Compactions()
    if driver.cfg.compacts:
        compactions = Compactions(
            completed=compaction_summaries(done),
            pending=timeline.pending_compactions(),
            scheduled=len(coord.compactions_scheduled),
            postponed=coord.compactions_postponed,
        )
    return TableRecord(commit_summaries(done), compactions, data_written(done, figures))


def data_written(done: list[CompletedInstant], figures: RunFigures) -> DataWritten:
    """The files and bytes the instants wrote, per completed checkpoint, and the write
    amplification against the bytes the sources emitted."""
    f = files_written(done)
    checkpoints = max(1, figures.checkpoints.completed)
    input_bytes = figures.counters.get("input_bytes", 0)
    return DataWritten(
        base_files=f["base_files"],
        log_files=f["log_files"],
        bytes=f["bytes"],
        compaction_base_files=f["compaction_base_files"],
        compaction_bytes=f["compaction_bytes"],
        base_files_per_checkpoint=round(f["base_files"] / checkpoints, 2),
        log_files_per_checkpoint=round(f["log_files"] / checkpoints, 2),
        compaction_base_files_per_checkpoint=round(f["compaction_base_files"] / checkpoints, 2),
        input_bytes=input_bytes,
        write_amplification=round(f["bytes"] / input_bytes, 3) if input_bytes else None,
    )


def job_result(
    driver: JobDriver,
    outcome: Outcome,
    *,
    metrics: list[MetricsSnapshot],
    driver_dfs: DfsCounters,
    coord: CoordinatorView | None,
    jm: JobManagerView | None,
    jm_final: bool = True,
    dumps: dict[str, TaskDump],
    commits_before: set[str],
    table: str,
    timing: Timing,
    run_s: float,
) -> JobResult:
    """The result record, from what the host gathered of its roles at the end."""
    cfg = driver.cfg
    parts = metrics + driver.prior_metrics
    coord = coord or CoordinatorView(instant=None, error="the coordinator did not answer")
    detail = checkpoints(driver, jm, final=jm_final)
    figures = run_figures(parts, driver_dfs, coord.releases, detail, dumps, cfg.checkpoints)
    fired = fired_faults(driver.table.dfs, driver.table.base_path)
    rolled_back = rollbacks(driver, coord)
    on_table = table_record(driver, coord, figures, commits_before)
    return JobResult(
        figures=figures,
        protocol=driver.protocol.name,  # a spec's class name, not its file path
        writers=cfg.writers,
        source=cfg.source,
        table=table,
        status=outcome.status,
        error=outcome.error,
        records=cfg.records,
        commits=on_table.commits,
        compactions=on_table.compactions,
        data_written=on_table.data_written,
        empty_rounds=coord.empty_rounds,
        failovers=driver.failovers,
        faults_fired=fired,
        faults_armed=[s.text() for s in cfg.faults],
        faults_not_fired=faults_not_fired(driver, fired),
        rolled_back=[r["instant"] for r in rolled_back],
        rollbacks=rolled_back,
        coordinator=CoordinatorRecord(coord.resets, coord.deleted_by_fault, coord.protocol, coord.concurrency),
        deadlock=outcome.deadlock,
        stalls=list(outcome.stalls),
        timing=timing,
        rows_per_s=round(figures.rows_in / max(1e-9, run_s), 1),
        tasks={n: _task_summary(d) for n, d in dumps.items()},
        send_errors=[e for m in parts for e in m.send_errors],
        durations=cfg.effective_durations(),
        config=_RECORDS.of(cfg),
    )


class _ConfigRecords:
    """``JobConfig.record`` of the last configuration recorded, kept as pickled bytes: a search's
    thousands of runs record one configuration, and ``dataclasses.asdict`` walks every field
    (0.2 ms a run, twice what this costs). Keyed by value: the configuration's pickle, every field
    of it, so equal bytes are an equal configuration and so an equal record; each result gets its
    own copy of the record, unpickled."""

    def __init__(self) -> None:
        self.key = b""
        self.record = b""

    def of(self, cfg: JobConfig) -> dict[str, Any]:
        key = pickle.dumps(cfg, pickle.HIGHEST_PROTOCOL)
        if key != self.key:
            self.key, self.record = key, pickle.dumps(cfg.record(), pickle.HIGHEST_PROTOCOL)
        copy: dict[str, Any] = pickle.loads(self.record)
        return copy


_RECORDS = _ConfigRecords()


def _task_summary(d: TaskDump) -> TaskSummary:
    return TaskSummary(state=d.state, error=d.error, flushes=d.flushes, protocol=d.protocol, rows_in=d.rows_in)
