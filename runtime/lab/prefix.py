"""The committed prefix of a run that did not finish: what its commits must hold, checked.

A failed or interrupted run still committed something, and a user must know whether that part
is right. The Flink protocols commit checkpoint by checkpoint, and checkpoint ``c`` closes round
``r`` of every source (the job manager records which), so the table must hold exactly the state
of the stream's rounds ``1..r`` of the last committed checkpoint. The Kafka Connect sink commits
offsets instead: the table must hold the first ``offsets[p]`` records of every partition ``p``
(``kafka.commit.offsets`` of the last commit). Either way the expected state is computed as for a
finished run (:func:`~runtime.lab.verify.expected_state`, merged into the table as the run
found it) and compared record by record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.data.columns import OFFSET, TASK
from runtime.hudi.formats.commit_metadata import CommitSummary
from runtime.lab.results import CheckpointEntry
from runtime.lab.verdicts import CommittedPrefix
from runtime.lab.verify import (
    RecordedRun,
    VerifyError,
    compare,
    expected_state,
    read_snapshot,
    recorded_table_before,
)
from runtime.protocols.control_topic import OFFSETS_KEY, parse_offsets


def prefix_rows(
    stream: pa.Table,
    commits: list[CommitSummary],
    checkpoints: dict[str, CheckpointEntry],
    round_bounds: list[int],
    last_commit_extra: dict[str, str],
) -> tuple[pa.Table, str]:
    """The records the run's commits must hold, and in words which. ``stream`` has ``_offset``
    and ``_task``; ``round_bounds[k]`` is the offset where round ``k + 1`` starts."""
    if not commits:
        return stream.slice(0, 0), "nothing: the run committed no instant"
    if OFFSETS_KEY in last_commit_extra:
        text = last_commit_extra[OFFSETS_KEY]
        return _first_per_partition(stream, parse_offsets(text)), f"the offsets of its last commit ({text})"
    ckp = max(c["checkpoint"] for c in commits)
    entry = checkpoints.get(str(ckp))
    if entry is None:
        raise ValueError(f"the job manager recorded no round for checkpoint {ckp}, the last committed one")
    closed = entry["round"]
    rows = stream.filter(pc.less(stream.column(OFFSET), round_bounds[closed]))
    return rows, f"rounds 1 to {closed} (closed by checkpoint {ckp}, the last committed)"


def _first_per_partition(stream: pa.Table, offsets: dict[int, int]) -> pa.Table:
    """The first ``offsets[p]`` records of each partition (source shard) ``p``, in stream order."""
    order = np.argsort(stream.column(OFFSET).to_numpy(), kind="stable")
    tasks = stream.column(TASK).to_numpy()[order]
    keep = np.zeros(len(order), dtype=bool)
    for p, n in offsets.items():
        in_p = np.flatnonzero(tasks == p)[:n]
        keep[order[in_p]] = True
    return stream.filter(pa.array(keep))


def verify_prefix(
    actual: pa.Table,
    stream: pa.Table,
    commits: list[CommitSummary],
    checkpoints: dict[str, CheckpointEntry],
    round_bounds: list[int],
    last_commit_extra: dict[str, str],
    *,
    key: str,
    precombine: str,
    partition: str | None,
    before: pa.Table | None = None,
) -> CommittedPrefix:
    """The verdict on a run's committed prefix: ``compare``'s record plus ``prefix`` (which
    records the commits must hold), merged into ``before`` (the table as the run found it)."""
    rows, what = prefix_rows(stream, commits, checkpoints, round_bounds, last_commit_extra)
    v = compare(expected_state(rows, key, precombine, partition, before), actual, key, partition)
    counts = (v.expected, v.actual, v.lost, v.duplicated, v.unexpected, v.mismatched)
    return CommittedPrefix(v.verified, what, v.identity, *counts, samples=v.samples)


def verify_recorded_prefix(run: RecordedRun, table_uri: str, stream: pa.Table) -> CommittedPrefix:
    """``verify --result`` of a run that did not finish (a record written before its own check,
    which a second signal or ``ray job stop``'s SIGKILL cut short): its committed prefix, checked
    as the run checks it, from what the record says it committed and ``stream`` (its stream,
    regenerated), merged into the table as the run found it (read back by time travel)."""
    from runtime.core.dfs import open_dfs
    from runtime.hudi.table.hudi_table import HudiTable

    cfg, commits = run.config, run.commit_records
    extra: dict[str, str] = {}
    if commits:
        dfs, base = open_dfs(table_uri, role="verifier")
        extra = HudiTable.open(dfs, base).read_commit_metadata(commits[-1]["instant"]).get("extraMetadata", {})
    try:
        return verify_prefix(
            read_snapshot(table_uri),
            stream,
            commits,
            run.checkpoints,
            cfg.round_bounds(),
            extra,
            key=cfg.key_field,
            precombine=cfg.precombine_field,
            partition=cfg.partition_field,
            before=recorded_table_before(table_uri, run),
        )
    except (VerifyError, ValueError) as exc:
        return CommittedPrefix(verified=False, prefix="not checked", error=str(exc))
