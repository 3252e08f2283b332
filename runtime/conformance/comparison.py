"""The lab's run against Hudi's own, part by part: what each table holds, the shape of each
timeline, files and bytes per commit, DFS calls per checkpoint by component and role, latency.

Both tables are read by the same code (the official reader for the rows, :class:`HudiTable` for
the timeline and the commit metadata), so a difference is the writers', not the readers'. Counts are
per checkpoint over the whole run, start-up included, on both sides; the lab's driver (which creates
the table before the job, where Hudi's coordinator does it inside the job) and its stand-in for
Flink's checkpoint storage (:attr:`Component.LAB`; the harness keeps Flink's checkpoints off the
counted file system) are left out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import pyarrow as pa

from runtime.conformance.real_run import OPS, RealRun
from runtime.core.dfs import DfsComponentOps, open_dfs
from runtime.core.dfs_components import Component
from runtime.core.json_doc import JsonObject
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import META_COLUMNS
from runtime.lab.results import JobResult

# A ratio lab/real inside this band conforms; outside it, docs/FIDELITY.md explains it or the model is wrong.
RATIO_BAND = (0.9, 1.1)

# The lab's roles as the harness names Hudi's (the driver and the job manager are the lab's own).
LAB_ROLES = {
    "coordinator": "coordinator",
    "writer": "write_task",
    "writer.data": "write_task",
    "timeline-server": "timeline_server",
}
_LAB_ONLY_ROLES = ("driver", "job-manager")

# Timeline differences docs/FIDELITY.md names: an action Hudi's writer completes that the lab does
# not model yet (or the other way round) is reported, not failed.
NAMED_DIFFERENCES = {
    "clean": "the lab cleans on the coordinator right after a commit, Hudi's Flink job on its clean task from "
    "the next checkpoint (docs/FIDELITY.md, 'Cleaning and archiving')",
    "metadata table": "the lab writes no metadata table (docs/FIDELITY.md, 'Against Hudi's own writer')",
}


@dataclass(frozen=True)
class TimelineShape:
    """What a table's timeline holds at the end of a run."""

    completed: dict[str, int]  # action -> completed instants
    pending: dict[str, int]  # action -> pending instants
    write_instants: int
    files_per_commit: float
    bytes_per_commit: float
    records_per_commit: float
    metadata_table: bool
    table_version: int


@dataclass
class Contents:
    rows_lab: int
    rows_real: int
    equal: bool
    only_lab: int = 0  # keys only the lab's table holds
    only_real: int = 0
    different: int = 0  # keys both hold with other values
    examples: list[str] = field(default_factory=list)


@dataclass
class Ratio:
    lab: float
    real: float

    @property
    def ratio(self) -> float | None:
        return None if self.real == 0 else round(self.lab / self.real, 2)

    @property
    def conforms(self) -> bool:
        r = self.ratio
        return (self.lab == 0) if r is None else RATIO_BAND[0] <= r <= RATIO_BAND[1]


@dataclass
class Comparison:
    protocol: str
    table_type: str
    release: str
    contents: Contents
    lab_timeline: TimelineShape
    real_timeline: TimelineShape
    timeline_differences: list[str]  # not named: fail the check
    named_differences: list[str]
    per_checkpoint: dict[str, Ratio]  # DFS calls per checkpoint by component
    per_role: dict[str, Ratio]  # by role, every component
    by_op: dict[str, Ratio]
    files_per_commit: Ratio
    bytes_per_commit: Ratio
    real_commit_latency_s: list[float]
    real_error: str | None
    # per component, the Hudi methods behind Hudi's calls per checkpoint, most first
    real_callers: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    @property
    def conforms(self) -> bool:
        return self.contents.equal and not self.timeline_differences and self.real_error is None

    def to_json(self) -> JsonObject:
        def ratios(d: dict[str, Ratio]) -> JsonObject:
            return {k: {"lab": v.lab, "real": v.real, "ratio": v.ratio, "conforms": v.conforms} for k, v in d.items()}

        return {
            "protocol": self.protocol,
            "table_type": self.table_type,
            "release": self.release,
            "conforms": self.conforms,
            "contents": asdict(self.contents),
            "timeline": {"lab": asdict(self.lab_timeline), "real": asdict(self.real_timeline)},
            "timeline_differences": self.timeline_differences,
            "named_differences": self.named_differences,
            "dfs_per_checkpoint_by_component": ratios(self.per_checkpoint),
            "dfs_per_checkpoint_by_role": ratios(self.per_role),
            "dfs_per_checkpoint_by_op": ratios(self.by_op),
            "files_per_commit": ratios({"files": self.files_per_commit})["files"],
            "bytes_per_commit": ratios({"bytes": self.bytes_per_commit})["bytes"],
            "real_commit_latency_s": [round(x, 4) for x in self.real_commit_latency_s],
            "real_callers_per_checkpoint": {c: dict(v) for c, v in self.real_callers.items()},
            "real_error": self.real_error,
        }


def timeline_shape(table_path: str) -> TimelineShape:
    """The timeline of the table at ``table_path`` and its commits' files, bytes and records."""
    dfs, base = open_dfs(table_path)
    table = HudiTable.open(dfs, base)
    timeline = table.timeline()
    completed: dict[str, int] = defaultdict(int)
    pending: dict[str, int] = defaultdict(int)
    for inst in timeline.instants:
        (completed if inst.state == "completed" else pending)[inst.action] += 1
    writes = [c for c in table.completed_metadata(timeline) if not c.compaction and c.doc.get("partitionToWriteStats")]
    n = max(1, len(writes))
    stats = [s for c in writes for s in c.stats]
    return TimelineShape(
        completed=dict(sorted(completed.items())),
        pending=dict(sorted(pending.items())),
        write_instants=len(writes),
        files_per_commit=round(len(stats) / n, 2),
        bytes_per_commit=round(sum(int(s.get("fileSizeInBytes", 0)) for s in stats) / n, 1),
        records_per_commit=round(sum(int(s.get("numWrites", 0)) for s in stats) / n, 1),
        metadata_table=dfs.exists(f"{base.rstrip('/')}/.hoodie/metadata/.hoodie/hoodie.properties"),
        table_version=table.version.number,
    )


def compare_contents(lab: pa.Table, real: pa.Table, key: str) -> Contents:
    """Row by row, by record key, the data columns only (the meta columns name instants and files,
    which differ by construction)."""
    columns = [c for c in lab.column_names if c not in META_COLUMNS]
    missing = [c for c in columns if c not in real.column_names]
    if missing:
        return Contents(
            lab.num_rows, real.num_rows, False, examples=[f"the real table has no column {c!r}" for c in missing]
        )
    lab_rows = {r[key]: r for r in lab.select(columns).to_pylist()}
    real_rows = {r[key]: r for r in real.select(columns).to_pylist()}
    only_lab = sorted(set(lab_rows) - set(real_rows))
    only_real = sorted(set(real_rows) - set(lab_rows))
    different = sorted(k for k in set(lab_rows) & set(real_rows) if lab_rows[k] != real_rows[k])
    examples = [f"{k}: only in the lab's table" for k in only_lab[:3]]
    examples += [f"{k}: only in the real table" for k in only_real[:3]]
    examples += [f"{k}: lab {lab_rows[k]} real {real_rows[k]}" for k in different[:3]]
    equal = not (only_lab or only_real or different) and lab.num_rows == real.num_rows
    return Contents(lab.num_rows, real.num_rows, equal, len(only_lab), len(only_real), len(different), examples)


class Call(NamedTuple):
    """DFS calls of one kind, in the harness's names."""

    role: str
    component: str
    op: str
    n: int


def lab_calls(result: JobResult) -> list[Call]:
    """The lab's DFS operations, in the harness's names."""
    by_component: DfsComponentOps = result.figures.dfs_ops_by_component
    out = []
    for role, components in by_component.items():
        if role in _LAB_ONLY_ROLES:
            continue
        for comp, ops in components.items():
            if comp == Component.LAB:
                continue
            for op, n in ops.items():
                name = LAB_ROLES.get(role, "compaction" if role.startswith("compact") else role)
                out.append(Call(name, str(comp), OPS.get(op, op), n))
    return out


def _per_checkpoint(calls: list[Call], by: str, checkpoints: int) -> dict[str, float]:
    """Calls per checkpoint, added up by ``by`` (a field of :class:`Call`)."""
    out: dict[str, float] = defaultdict(float)
    for call in calls:
        out[getattr(call, by)] += call.n
    return {k: round(v / max(1, checkpoints), 2) for k, v in sorted(out.items())}


def _ratios(lab: dict[str, float], real: dict[str, float]) -> dict[str, Ratio]:
    return {k: Ratio(lab.get(k, 0.0), real.get(k, 0.0)) for k in sorted(set(lab) | set(real))}


def timeline_differences(lab: TimelineShape, real: TimelineShape) -> tuple[list[str], list[str]]:
    """The differences in the timelines' shape: (unexplained, named in docs/FIDELITY.md)."""
    unexplained, named = [], []
    for kind, lab_n, real_n in _timeline_counts(lab, real):
        if lab_n == real_n:
            continue
        text = f"{kind}: the lab's table {lab_n}, Hudi's {real_n}"
        action = kind.split()[-1]
        if action in NAMED_DIFFERENCES:
            named.append(f"{text} ({NAMED_DIFFERENCES[action]})")
        else:
            unexplained.append(text)
    if lab.metadata_table != real.metadata_table:
        has = {True: "has one", False: "has none"}
        text = f"metadata table: the lab's table {has[lab.metadata_table]}, Hudi's {has[real.metadata_table]}"
        named.append(f"{text} ({NAMED_DIFFERENCES['metadata table']})")
    if lab.table_version != real.table_version:
        unexplained.append(f"table version: the lab's {lab.table_version}, Hudi's {real.table_version}")
    return unexplained, named


def _timeline_counts(lab: TimelineShape, real: TimelineShape) -> list[tuple[str, int, int]]:
    out = []
    for action in sorted(set(lab.completed) | set(real.completed)):
        out.append((f"completed {action}", lab.completed.get(action, 0), real.completed.get(action, 0)))
    for action in sorted(set(lab.pending) | set(real.pending)):
        out.append((f"pending {action}", lab.pending.get(action, 0), real.pending.get(action, 0)))
    return out


@dataclass(frozen=True)
class RunPair:
    """One workload, run by the lab and by Hudi's own writer, with what their tables hold."""

    protocol: str
    table_type: str
    lab: JobResult
    real: RealRun
    lab_shape: TimelineShape
    real_shape: TimelineShape


def compare_runs(pair: RunPair, contents: Contents) -> Comparison:
    """Everything :class:`Comparison` holds, from the two runs and their tables."""
    lab, real, lab_shape, real_shape = pair.lab, pair.real, pair.lab_shape, pair.real_shape
    k = lab.figures.checkpoints.completed or real.checkpoints
    lab_c = lab_calls(lab)
    real_c = [Call(c.role, c.component, c.op, c.count) for c in real.fs_calls]
    unexplained, named = timeline_differences(lab_shape, real_shape)

    def side_by_side(by: str) -> dict[str, Ratio]:
        return _ratios(_per_checkpoint(lab_c, by, k), _per_checkpoint(real_c, by, real.checkpoints))

    return Comparison(
        protocol=pair.protocol,
        table_type=pair.table_type,
        release=real.release,
        contents=contents,
        lab_timeline=lab_shape,
        real_timeline=real_shape,
        timeline_differences=unexplained,
        named_differences=named,
        per_checkpoint=_ratios(
            _per_checkpoint(lab_c, "component", k), _per_checkpoint(real_c, "component", real.checkpoints)
        ),
        per_role=_ratios(_per_checkpoint(lab_c, "role", k), _per_checkpoint(real_c, "role", real.checkpoints)),
        by_op=_ratios(_per_checkpoint(lab_c, "op", k), _per_checkpoint(real_c, "op", real.checkpoints)),
        files_per_commit=Ratio(lab_shape.files_per_commit, real_shape.files_per_commit),
        bytes_per_commit=Ratio(lab_shape.bytes_per_commit, real_shape.bytes_per_commit),
        real_commit_latency_s=real.commit_latencies_s(),
        real_error=real.error,
        real_callers=_callers(real),
    )


def _callers(real: RealRun, top: int = 8) -> dict[str, list[tuple[str, float]]]:
    """Per component, Hudi's calls per checkpoint by the method that made them (and the operation)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for c in real.callers:
        out[c.component][f"{c.method} ({c.op})"] += c.count / max(1, real.checkpoints)
    return {
        comp: [(m, round(n, 2)) for m, n in sorted(by.items(), key=lambda kv: -kv[1])[:top]]
        for comp, by in sorted(out.items())
    }
