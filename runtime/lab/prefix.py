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

# Which records of the stream a prefix holds: none, the first ones of each partition by the
# offsets text of the last commit, or those before an offset (the end of the last closed round).
Selection = tuple[str, str | int]


def _selection(
    commits: list[CommitSummary],
    checkpoints: dict[str, CheckpointEntry],
    round_bounds: list[int],
    last_commit_extra: dict[str, str],
) -> tuple[Selection, str]:
    """Which records the run's commits must hold (a value: the stream is not read), in words."""
    if not commits:
        return ("none", 0), "nothing: the run committed no instant"
    if OFFSETS_KEY in last_commit_extra:
        text = last_commit_extra[OFFSETS_KEY]
        return ("offsets", text), f"the offsets of its last commit ({text})"
    ckp = max(c["checkpoint"] for c in commits)
    entry = checkpoints.get(str(ckp))
    if entry is None:
        raise ValueError(f"the job manager recorded no round for checkpoint {ckp}, the last committed one")
    closed = entry["round"]
    return ("below", round_bounds[closed]), f"rounds 1 to {closed} (closed by checkpoint {ckp}, the last committed)"


def _selected(stream: pa.Table, selection: Selection) -> pa.Table:
    kind, value = selection
    if kind == "none":
        return stream.slice(0, 0)
    if kind == "offsets":
        return _first_per_partition(stream, parse_offsets(str(value)))
    return stream.filter(pc.less(stream.column(OFFSET), value))


def prefix_rows(
    stream: pa.Table,
    commits: list[CommitSummary],
    checkpoints: dict[str, CheckpointEntry],
    round_bounds: list[int],
    last_commit_extra: dict[str, str],
) -> tuple[pa.Table, str]:
    """The records the run's commits must hold, and in words which. ``stream`` has ``_offset``
    and ``_task``; ``round_bounds[k]`` is the offset where round ``k + 1`` starts."""
    selection, what = _selection(commits, checkpoints, round_bounds, last_commit_extra)
    return _selected(stream, selection), what


def _first_per_partition(stream: pa.Table, offsets: dict[int, int]) -> pa.Table:
    """The first ``offsets[p]`` records of each partition (source shard) ``p``, in stream order."""
    order = np.argsort(stream.column(OFFSET).to_numpy(), kind="stable")
    tasks = stream.column(TASK).to_numpy()[order]
    keep = np.zeros(len(order), dtype=bool)
    for p, n in offsets.items():
        in_p = np.flatnonzero(tasks == p)[:n]
        keep[order[in_p]] = True
    return stream.filter(pa.array(keep))


class _PrefixStates:
    """The expected state of each prefix of one stream, computed once: a bounded search verifies
    the committed prefix of thousands of runs of one job, and they commit the same few prefixes.
    Pure: an Arrow table is immutable, the entry is for the stream object it holds (the same
    object, so the same records) and the selection and fields it is keyed by, and the state is a
    function of them alone (merged into no earlier table). A new stream replaces them all."""

    def __init__(self) -> None:
        self.stream: pa.Table | None = None
        self.states: dict[tuple[Selection, str, str, str | None], pa.Table] = {}

    def expected(
        self, stream: pa.Table, selection: Selection, key: str, precombine: str, partition: str | None
    ) -> pa.Table:
        if stream is not self.stream:
            self.stream, self.states = stream, {}
        at = (selection, key, precombine, partition)
        found = self.states.get(at)
        if found is None:
            found = self.states[at] = expected_state(_selected(stream, selection), key, precombine, partition)
        return found


_PREFIXES = _PrefixStates()


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
    selection, what = _selection(commits, checkpoints, round_bounds, last_commit_extra)
    if before is not None:
        expected = expected_state(_selected(stream, selection), key, precombine, partition, before)
    else:
        expected = _PREFIXES.expected(stream, selection, key, precombine, partition)
    v = compare(expected, actual, key, partition)
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
