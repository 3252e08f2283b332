"""The result record of several jobs on one table (``result.json`` of ``--jobs 2``), and its summary.

Each job's own record is the one a single job writes (:class:`~runtime.lab.results.JobResult`:
its commits, failovers, rollbacks, DFS operations by part, writers' blocked time); beside them the
verdict of the table they share and each job's share of it (:mod:`runtime.lab.job_verdicts`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from rich.table import Table

from runtime.core.jobs_spec import JobsSpec
from runtime.core.json_doc import JsonObject
from runtime.lab.fault_matrix import known_loss
from runtime.lab.job_verdicts import JobShare, named
from runtime.lab.results import JobResult, SimulationRecord
from runtime.lab.status import Status
from runtime.lab.verdicts import ExactlyOnce

CONFLICT = "HoodieWriteConflictException"  # runtime.hudi.client.conflict.WriteConflict's message names it


def conflict_failovers(job: JobResult) -> int:
    """The job's failovers a write conflict caused (optimistic: the commit fails, the job fails
    over and replays from its last checkpoint, as Hudi's Flink writer does)."""
    return sum(1 for f in job.failovers if CONFLICT in str(f.error or ""))


@dataclass
class JobsResult:
    jobs: list[JobResult]
    spec: JobsSpec
    concurrency_mode: str
    # the shared table's verdict (None: not every job finished, or not verified)
    exactly_once: ExactlyOnce | None = None
    shares: list[JobShare] = field(default_factory=list)
    simulation: SimulationRecord | None = None

    @property
    def status(self) -> Status:
        """Finished when every job did; else the first job's status that is not."""
        return next((j.status for j in self.jobs if j.status != Status.FINISHED), Status.FINISHED)

    @property
    def verified(self) -> bool:
        return self.status == Status.FINISHED and self.exactly_once is not None and self.exactly_once.verified

    def known_loss(self) -> str | None:
        """Hudi's own loss the unverified table shows (:func:`known_losses`), else None."""
        if self.exactly_once is None or self.exactly_once.verified:
            return None
        return known_losses(str(self.jobs[0].config.get("protocol", "")), self) if self.jobs else None

    def verdict_line(self) -> str:
        if self.exactly_once is None:
            return f"not verified ({self.status.value})"
        if self.exactly_once.verified:
            return "exactly-once: verified (both streams merged under the merge rule)"
        detail = named(self.shares) or self.exactly_once.error or "the table differs"
        known = self.known_loss()
        if known is not None:  # the table is wrong as Hudi's own code leaves it, not the lab's
            return f"KNOWN LOSS (Hudi's own): {known}: {detail}"
        return "VIOLATED: " + detail

    def to_json(self) -> JsonObject:
        doc: JsonObject = {
            "status": self.status.value,
            "jobs_spec": {
                **asdict(self.spec),
                "start_s": list(self.spec.start_s),
                "overrides": [str(o) for o in self.spec.overrides],
            },
            "concurrency_mode": self.concurrency_mode,
            "verdict": self.verdict_line(),
            "known_loss": self.known_loss(),
            "exactly_once": self.exactly_once.to_json() if self.exactly_once is not None else None,
            "per_job": [s.to_json() for s in self.shares],
            "jobs": [j.to_json() for j in self.jobs],
        }
        if self.simulation is not None:
            doc["sim"] = self.simulation.to_json()
        return doc


def known_losses(protocol: str, result: JobsResult) -> str | None:
    """Hudi's own loss (:func:`runtime.lab.fault_matrix.known_loss`) when every job that lost rows
    lost them its documented way, judged on its own share of the table; None otherwise. Under
    optimistic, a job whose commit a write conflict failed after its checkpoint completed loses
    that checkpoint as Hudi 1.1 does (#19215): the failover restores the checkpoint, which holds
    none of the instant's write statuses, and the sources do not replay it."""
    by_job = {s.job: s for s in result.shares}
    found = []
    for job in result.jobs:
        share = by_job.get(str(job.config.get("job_id", "")))
        if share is None or share.intact:
            continue
        own = ExactlyOnce(
            verified=False,
            expected=share.expected,
            lost=share.lost,
            duplicated=share.duplicated,
            unexpected=share.unexpected,
            mismatched=share.mismatched,
        )
        loss = known_loss(protocol, None, dataclasses.replace(job, exactly_once=own))
        if loss is None:
            return None
        found.append(f"{share.job}: {loss}")
    return "; ".join(found) or None


COLUMNS = (
    "job",
    "status",
    "commits",
    "conflicts",
    "failovers",
    "rolled back",
    "blocked s",
    "DFS ops",
    "expected",
    "lost",
    "dup",
)


def _blocked_s(job: JobResult) -> float:
    return round(sum(job.figures.writer_blocked_s.values()), 3)


def _dfs_total(job: JobResult) -> int:
    return sum(sum(ops.values()) for ops in job.figures.dfs_ops.values())


def jobs_table(result: JobsResult) -> Table:
    """One row per job: its run, and its share of the verdict."""
    t = Table(
        title=f"two jobs on one table: {result.jobs[0].protocol}, {result.concurrency_mode}, "
        f"overlap {result.spec.overlap}",
        title_justify="left",
    )
    for col in COLUMNS:
        t.add_column(col)
    by_job = {s.job: s for s in result.shares}
    for job in result.jobs:
        name = str(job.config.get("job_id", ""))
        share = by_job.get(name)
        t.add_row(
            name,
            job.status.value,
            str(len(job.commits)),
            str(conflict_failovers(job)),
            str(len(job.failovers)),
            str(len(job.rolled_back)),
            str(_blocked_s(job)),
            str(_dfs_total(job)),
            str(share.expected) if share else "-",
            str(share.lost + share.mismatched) if share else "-",
            str(share.duplicated) if share else "-",
        )
    return t
