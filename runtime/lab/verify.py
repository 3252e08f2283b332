"""Exactly-once, checked with the official reader.

The actual state is the snapshot that ``hudi`` (hudi-rs, the official Rust reader) reads; the
expected state is the input deduplicated by record identity (largest precombine value, ties to the
later offset). They are compared record for record, in Jepsen's vocabulary: *lost* (expected, not
there), *duplicated* (an identity more than once), *unexpected* (there, never written) and
*mismatched* (there, with the wrong values).

A record's identity is Hudi's: ``HoodieKey`` (hudi-common, ``org.apache.hudi.common.model.HoodieKey``,
``equals``/``hashCode`` over ``recordKey`` and ``partitionPath``). The tables here use the bucket
index, which is not global (hudi-client-common, ``org.apache.hudi.index.bucket.HoodieBucketIndex``,
``isGlobal`` returns false; a file group is a bucket of one partition), so the same record key under
two partition paths is two records, and the identity is (``_hoodie_partition_path``,
``_hoodie_record_key``). The comparison is deterministic: where a damaged table holds an identity
twice, the row compared is the one of the latest commit time, then the smallest file name, whatever
order the reader returns rows in (``drop_duplicates`` on reader order made ``run`` and ``verify``
count mismatches differently on the same table).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.config import JobConfig
from runtime.core.storage import redact
from runtime.data.columns import INTERNAL_COLUMNS
from runtime.hudi.formats.commit_metadata import CommitMetadataDoc, CommitSummary, write_stats
from runtime.hudi.table.merge import dedupe_latest
from runtime.hudi.table.merge_rule import incoming_wins
from runtime.hudi.table.table_config import META_COLUMNS
from runtime.lab import value_compare
from runtime.lab.recent_comparisons import RecentComparisons
from runtime.lab.results import CheckpointEntry
from runtime.lab.verdicts import CommitProblem, ExactlyOnce, TableBefore

SAMPLE = 10


class VerifyError(RuntimeError):
    """The table cannot be read by the official reader; the message says why."""


def open_reader(table_uri: str) -> Any:
    """The official reader's table; an S3 URI's endpoint options become storage options."""
    from hudi import HudiTableBuilder

    from runtime.core.storage import reader_location

    base_uri, storage_options = reader_location(table_uri)
    return HudiTableBuilder.from_base_uri(base_uri).with_storage_options(storage_options).build()


def read_snapshot(table_uri: str, as_of: str | None = None) -> pa.Table:
    """The table's snapshot as the official reader returns it (``as_of``: as of that instant,
    the reader's time travel); with the merge-on-read file groups it cannot list through the
    metadata table read by its file group reader (:mod:`runtime.lab.log_only_groups`)."""
    from hudi import HudiReadOptions

    from runtime.lab.log_only_groups import read_log_only_groups

    try:
        table = open_reader(table_uri)
        batches = table.read(HudiReadOptions().with_as_of_timestamp(as_of) if as_of else None)
        batches += read_log_only_groups(table, table_uri, as_of)
    except Exception as exc:  # the reader raises its own error types
        raise VerifyError(f"the official reader (hudi) cannot read {redact(table_uri)}: {exc}") from exc
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def read_completed_commits(table_uri: str) -> list[str]:
    try:
        t = open_reader(table_uri)
        timeline = t.get_timeline()
        # commits and delta commits (a merge-on-read table's writes), in instant order
        done = timeline.get_completed_commits() + timeline.get_completed_deltacommits()
        return sorted(i.timestamp for i in done)
    except Exception as exc:
        raise VerifyError(f"the official reader (hudi) cannot read the timeline of {redact(table_uri)}: {exc}") from exc


def read_incremental(table_uri: str, start: str, end: str) -> pa.Table:
    """Rows the commits in ``(start, end]`` wrote, as the official reader's incremental query."""
    from hudi import HudiQueryType, HudiReadOptions

    try:
        t = open_reader(table_uri)
        batches = t.read(
            HudiReadOptions()
            .with_query_type(HudiQueryType.Incremental)
            .with_start_timestamp(start)
            .with_end_timestamp(end)
        )
    except Exception as exc:
        raise VerifyError(
            f"the official reader (hudi) cannot read commits ({start}, {end}] of {redact(table_uri)}: {exc}"
        ) from exc
    return pa.Table.from_batches(batches) if batches else pa.table({})


def expected_state(
    records: pa.Table, key: str, precombine: str, partition: str | None = None, before: pa.Table | None = None
) -> pa.Table:
    """The table the records should leave: one row per identity, (partition, key) when
    ``partition`` is given (a non-global index), the key alone otherwise. ``before``: the table's
    snapshot before the run (the official reader's), which the records are merged into by the
    merge rule (:mod:`runtime.hudi.table.merge_rule`), as the writer merges them into stored records."""
    state = dedupe_latest(records, key, precombine, partition=partition or None)
    if before is None or not before.num_rows:
        return state
    return merged_with_table(before, state, key, precombine, partition)


def merged_with_table(before: pa.Table, state: pa.Table, key: str, precombine: str, partition: str | None) -> pa.Table:
    """``state`` (one row per identity) merged into the snapshot ``before``: an identity only
    in one of them keeps its row; one in both keeps the row the merge rule picks."""
    cols = [c for c in state.column_names if c not in INTERNAL_COLUMNS and c not in META_COLUMNS]
    missing = sorted(set(cols) - set(before.column_names))
    if missing:
        raise VerifyError(
            f"the table before the run lacks the input's columns {missing}: schema evolution is not modelled"
        )
    stored_ids = _actual_identity(before, key, partition)
    state_ids = _expected_identity(state, key, partition)
    stored = before.select(cols)
    state = state.select(cols)
    try:
        stored = stored.cast(state.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise VerifyError(f"the table before the run holds other column types than the input: {exc}") from exc
    at = pc.index_in(state_ids, value_set=stored_ids)  # each new identity's stored row (null: none)
    found = pc.is_valid(at).to_numpy(zero_copy_only=False)
    rows = np.asarray(pc.fill_null(at, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    keep_state = np.ones(state.num_rows, dtype=bool)
    if found.any():
        where = np.flatnonzero(found)
        keep_state[where] = incoming_wins(
            state.column(precombine).take(pa.array(where)), stored.column(precombine).take(pa.array(rows[where]))
        )
    replaced = np.zeros(stored.num_rows, dtype=bool)  # stored rows a winning record replaces
    replaced[rows[found & keep_state]] = True
    kept_stored = stored.filter(pa.array(~replaced))
    return pa.concat_tables([kept_stored, state.filter(pa.array(keep_state))])


def snapshot_record(snapshot: pa.Table, key: str, partition: str | None, as_of: str | None) -> TableBefore:
    """What result.json keeps of the table before a run: its rows and a hash of its records
    (identity order, the data columns as text), and the instant it was read as of."""
    import hashlib

    digest = hashlib.sha256()
    if snapshot.num_rows:
        ids = _actual_identity(snapshot, key, partition)
        cols = sorted(c for c in snapshot.column_names if c not in INTERNAL_COLUMNS and c not in META_COLUMNS)
        table = snapshot.select(cols).append_column("_id", ids)
        table = table.take(pc.sort_indices(table, sort_keys=[("_id", "ascending")]))
        for c in ["_id", *cols]:
            text = pc.fill_null(pc.cast(table.column(c), pa.string()), "\x00")
            digest.update(c.encode() + b"\x1e" + "\x1f".join(text.to_pylist()).encode() + b"\x1d")
    return TableBefore(rows=snapshot.num_rows, content_hash=digest.hexdigest(), as_of=as_of)


@functools.cache  # (a search's every run starts a new table)
def _no_records_hash() -> str:
    return snapshot_record(pa.table({}), "", None, None).content_hash


ID_SEP = "\x1f"  # joins partition path and record key into one identity string (in neither)


def _identity(partitions: pa.ChunkedArray | pa.Array, keys: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``partition<US>key`` strings: one value per record identity."""
    parts = pc.cast(partitions, pa.string())
    ks = pc.cast(keys, pa.string())
    joined = pc.binary_join_element_wise(parts, ks, ID_SEP)
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _shown(identity: str) -> str:
    """An identity as a reader writes it: ``partition/key`` (the key alone when unpartitioned)."""
    part, _, key = identity.partition(ID_SEP)
    return f"{part}/{key}" if part else key


def _expected_identity(expected: pa.Table, key: str, partition: str | None) -> pa.Array:
    if partition and partition in expected.column_names:
        return _identity(expected.column(partition), expected.column(key))
    return _identity(pa.repeat(pa.scalar("", pa.string()), expected.num_rows), expected.column(key))


def _actual_identity(actual: pa.Table, key: str, partition: str | None) -> pa.Array:
    """The identity the table stores: the ``_hoodie_partition_path`` and ``_hoodie_record_key``
    meta columns when there, else the data columns. Without ``partition`` (a global index) the
    partition path is left out."""
    names = actual.column_names
    keys = actual.column("_hoodie_record_key") if "_hoodie_record_key" in names else None
    if keys is None:
        if key not in names:
            raise VerifyError(f"the table has no column {key!r}; it has {names}")
        keys = actual.column(key)
    if not partition:
        parts: pa.ChunkedArray | pa.Array = pa.repeat(pa.scalar("", pa.string()), actual.num_rows)
    elif "_hoodie_partition_path" in names:
        parts = actual.column("_hoodie_partition_path")
    elif partition in names:
        parts = actual.column(partition)
    else:
        raise VerifyError(f"the table has neither _hoodie_partition_path nor {partition!r}; it has {names}")
    return _identity(parts, keys)


def _one_row_per_identity(actual: pa.Table, ids: pa.Array, unique: bool = False) -> pa.Table:
    """The actual table with an ``_id`` column, one row per identity: of duplicates the one with
    the latest commit time, then the smallest file name (deterministic whatever order the reader
    returned the rows in). ``unique``: ``ids`` holds no identity twice, so every row is kept as
    it is (the callers match rows by ``_id``, in any order)."""
    t = actual.append_column("_id", ids)
    if unique:
        return t
    sort = [("_id", "ascending")]
    for col, order in (("_hoodie_commit_time", "descending"), ("_hoodie_file_name", "ascending")):
        if col in t.column_names:
            sort.append((col, order))
    t = t.take(pc.sort_indices(t, sort_keys=sort))
    if t.num_rows < 2:
        return t
    col = t.column("_id").combine_chunks()
    first = np.ones(t.num_rows, dtype=bool)
    first[1:] = pc.not_equal(col.slice(1), col.slice(0, t.num_rows - 1)).to_numpy(zero_copy_only=False)
    return t.filter(pa.array(first))


def compare(expected: pa.Table, actual: pa.Table, key: str, partition: str | None = None) -> ExactlyOnce:
    """Compares the expected final state with what the reader returned, record by record, a
    record being (partition path, record key) when ``partition`` names the partition field (a
    non-global index: Hudi's ``HoodieKey``), the key alone otherwise (a global index); a table
    compared just before: a copy of that verdict (:mod:`runtime.lab.recent_comparisons`)."""
    return _RECENT.verdict(expected, actual, key, partition, lambda: _compare(expected, actual, key, partition))


_RECENT = RecentComparisons()


def _compare(expected: pa.Table, actual: pa.Table, key: str, partition: str | None) -> ExactlyOnce:
    value_cols = [c for c in expected.column_names if c not in INTERNAL_COLUMNS and c not in META_COLUMNS]
    exp_ids = _expected_identity(expected, key, partition)
    act_ids = _actual_identity(actual, key, partition) if actual.num_rows else pa.array([], pa.string())
    dups, duplicated = _duplicates(act_ids)
    lost_ids = pc.filter(exp_ids, pc.invert(pc.is_in(exp_ids, value_set=act_ids)))
    unexpected_ids = pc.filter(act_ids, pc.invert(pc.is_in(act_ids, value_set=exp_ids)))
    mismatched: list[str] = []
    n_mismatched = 0
    if actual.num_rows and value_cols:
        missing_cols = sorted(set(value_cols) - set(actual.column_names))
        if missing_cols:
            raise VerifyError(f"the table lacks the input columns {missing_cols}")
        others = [c for c in value_cols if c not in (key, partition)]
        tie = [c for c in ("_hoodie_commit_time", "_hoodie_file_name") if c in actual.column_names]
        a = _one_row_per_identity(actual.select(value_cols + tie), act_ids, unique=not duplicated)
        e = expected.select(value_cols).append_column("_id", exp_ids)
        differing = value_compare.differing(a.select(value_cols + ["_id"]), e, others)
        n_mismatched = len(differing)
        mismatched = [_shown(k) for k in differing[:SAMPLE]]
    return ExactlyOnce(
        verified=len(lost_ids) == 0 and duplicated == 0 and len(unexpected_ids) == 0 and n_mismatched == 0,
        identity="(partition path, record key)" if partition else "record key",
        expected=expected.num_rows,
        actual=actual.num_rows,
        lost=len(lost_ids),
        duplicated=duplicated,
        unexpected=len(unexpected_ids),
        mismatched=n_mismatched,
        samples={
            "lost": _sample(lost_ids),
            "duplicated": [_shown(x) for x in dups[:SAMPLE]],
            "unexpected": _sample(unexpected_ids),
            "mismatched": mismatched,
        },
    )


def _duplicates(ids: pa.Array) -> tuple[list[str], int]:
    """The identities ``ids`` holds more than once (sorted), and how many rows are extra. In
    Arrow and numpy: a search verifies thousands of runs, and ``value_counts().to_pylist()``
    (a dict per identity) was a third of a comparison."""
    if not len(ids):
        return [], 0
    counts = pc.value_counts(ids)
    n = counts.field("counts").to_numpy(zero_copy_only=False)
    twice = n > 1
    if not twice.any():
        return [], 0
    values = counts.field("values").filter(pa.array(twice)).to_pylist()
    return sorted(values), int((n[twice] - 1).sum())


def table_partition_field(table_uri: str) -> str:
    """The partition field ``hoodie.properties`` names (empty: an unpartitioned table)."""
    from runtime.core.dfs import open_dfs
    from runtime.hudi.table.hudi_table import HudiTable
    from runtime.hudi.table.table_config import TableError

    dfs, base = open_dfs(table_uri, role="verifier")
    try:
        return HudiTable.open(dfs, base).props.partition_field
    except TableError as exc:
        raise VerifyError(str(exc)) from exc


def _sample(ids: pa.Array) -> list[str]:
    return [_shown(x) for x in sorted(ids.to_pylist())[:SAMPLE]]


def verify_table(table_uri: str, expected: pa.Table, key: str, partition: str | None = None) -> ExactlyOnce:
    """Reads the table with the official reader and compares it with ``expected``."""
    return compare(expected, read_snapshot(table_uri), key, partition)


def _rows_by_file_group(meta: CommitMetadataDoc) -> dict[str, int]:
    want: dict[str, int] = {}
    for s in write_stats(meta):
        want[s["fileId"]] = want.get(s["fileId"], 0) + s["numInserts"] + s["numUpdateWrites"]
    return want


def _commit_problem(
    instant: str, want: dict[str, int], rows: pa.Table, *, at_most: bool = False
) -> CommitProblem | None:
    """What is wrong with one commit's incremental read against its metadata (None: nothing),
    each reason spelled out in ``reasons``. ``at_most``: a delta commit's counts are the records
    its log blocks hold, and the reader merges them with the slice, so a record that loses to one
    already there (a larger ordering value), or to a later flush of the same commit, is not read:
    a file group may read fewer rows than the metadata counts, never more."""
    got: dict[str, int] = {}
    bad_time = twice = 0
    if rows.num_rows:
        for n in rows.column("_hoodie_file_name").to_pylist():
            fid = n.split("_", 1)[0]
            got[fid] = got.get(fid, 0) + 1
        bad_time = int(pc.sum(pc.not_equal(rows.column("_hoodie_commit_time"), instant)).as_py() or 0)
        # one record per (partition path, record key): a key in two partitions is two records
        ids = _identity(rows.column("_hoodie_partition_path"), rows.column("_hoodie_record_key"))
        twice = len(ids) - pc.count_distinct(ids).as_py()
    # a file group the commit rewrote without a winning record has 0 rows by metadata and none read
    diff = {
        f: (want.get(f, 0), got.get(f, 0))
        for f in sorted(set(want) | set(got))
        if (got.get(f, 0) > want.get(f, 0) if at_most else want.get(f, 0) != got.get(f, 0))
    }
    if not diff and not bad_time and not twice:
        return None
    reasons = []
    if diff:
        reasons.append(
            f"metadata says {sum(want.values())} rows, the incremental read returns {rows.num_rows}; "
            f"{len(diff)} file group(s) differ (file id: (metadata, read)): {dict(list(diff.items())[:SAMPLE])}"
        )
    if bad_time:
        reasons.append(f"{bad_time} row(s) read for this commit carry another _hoodie_commit_time")
    if twice:
        reasons.append(f"{twice} (partition path, record key) pair(s) written more than once")
    return {
        "instant": instant,
        "rows_by_metadata": sum(want.values()),
        "rows_read": rows.num_rows,
        "file_groups_differing": dict(list(diff.items())[:SAMPLE]),
        "rows_with_other_commit_time": bad_time,
        "keys_twice": twice,
        "reasons": reasons,
    }


def verify_commits(table_uri: str) -> dict[str, Any]:
    """Each commit's incremental read (the official reader, between consecutive instants) must
    hold exactly the rows its metadata says it wrote: per file group, numInserts +
    numUpdateWrites rows, each (partition path, record key) once, all stamped with that commit's
    time. A commit file that cannot be parsed, or a commit the reader cannot read, is a problem
    of its own, named by its instant and file; the other commits are still checked.
    ``unreadable``: how many commits could not be checked."""
    from runtime.core.dfs import open_dfs
    from runtime.hudi.client.cleaner import earliest_retained_by_last_clean
    from runtime.hudi.table.hudi_table import HudiTable
    from runtime.hudi.table.table_config import TableError
    from runtime.hudi.timeline.archived_timeline import archived_instants
    from runtime.hudi.timeline.instant import COMPLETED
    from runtime.hudi.timeline.timeline_actions import REPLACE_COMMIT, data_instants

    dfs, base = open_dfs(table_uri, role="verifier")
    try:
        table = HudiTable.open(dfs, base)
    except TableError as exc:
        raise VerifyError(str(exc)) from exc
    # the writers' commits, in instant order: a compaction's commit rewrites rows other commits
    # wrote (keeping their commit times), so its files are checked by the audit and the snapshot;
    # a replacecommit's rows (insert_overwrite) are its own, so the next commit's range starts
    # after it (runtime.hudi.timeline.timeline_actions)
    timeline = table.timeline()
    commits = timeline.completed_commits()
    # the cleaner deleted superseded versions of what commits before this wrote: their
    # incremental reads are not whole any more (Hudi's incremental query stops there too)
    cleaned_before = earliest_retained_by_last_clean(table, timeline) or ""
    checked = {c for c in commits if c >= cleaned_before}
    if not populates_meta_fields(table):  # rows carry no commit time or file name to check
        return {"verified": True, "commits": len(commits), "unreadable": 0, "problems": [], "no_meta_fields": True}
    writers = set(commits)
    problems: list[CommitProblem] = []
    # rows of archived commits keep their commit times: the first range starts after them
    archived = archived_instants(table)
    prev = max((a.completion or a.ts for a in archived.values()), default="19700101000000000")
    unreadable = 0
    # from table version 8 the reader's incremental range is one of completion times (Hudi 1.x's
    # incremental query); before, of instant times. The ranges follow in the order of their ends:
    # two writers' instants may complete out of instant order (multi-writer)
    completed = [(timeline.completion_of(i) or i, i, d) for i, d in data_instants(timeline.instants).items()]
    for end, instant, data in sorted(c for c in completed if c[2].state == COMPLETED):
        if instant in checked:
            where = f"{table.timeline_rel}/{table.commit_file(instant, timeline)}"
            problem = _commit_checked(table_uri, table, timeline, instant, (prev, end), where)
            if problem is not None:
                unreadable += "rows_read" not in problem
                problems.append(problem)
        if instant in writers or data.action == REPLACE_COMMIT:
            prev = end
    return {"verified": not problems, "commits": len(checked), "unreadable": unreadable, "problems": problems}


def populates_meta_fields(table: Any) -> bool:
    """``hoodie.populate.meta.fields`` (default true): whether rows carry the ``_hoodie_*`` columns."""
    from runtime.core.dfs import Dfs, DfsError
    from runtime.hudi.table.table_config import parse_properties

    try:
        text = table.dfs.read_bytes(Dfs.join(table.hoodie, "hoodie.properties")).decode()
    except (DfsError, UnicodeDecodeError):
        return True
    return parse_properties(text).get("hoodie.populate.meta.fields", "true").lower() != "false"


def _commit_checked(
    table_uri: str, table: Any, timeline: Any, instant: str, bounds: tuple[str, str], where: str
) -> CommitProblem | None:
    """One commit's problem (None: none): its metadata against its incremental read."""
    from runtime.hudi.table.table_config import TableError

    try:
        want = _rows_by_file_group(table.read_commit_metadata(instant, timeline))
    except (ValueError, KeyError, TypeError, AttributeError, TableError) as exc:
        return {"instant": instant, "reasons": [f"{where} is not valid commit metadata: {type(exc).__name__}: {exc}"]}
    try:
        rows = read_incremental(table_uri, *bounds)
    except VerifyError as exc:
        return {"instant": instant, "reasons": [f"{where}: not checked: {exc}"]}
    return _commit_problem(instant, want, rows, at_most=table.props.merge_on_read)


def verify_run(table_uri: str, expected: pa.Table, key: str, partition: str | None = None) -> ExactlyOnce:
    """The exactly-once verdict of a run: the snapshot against the expected state, and every
    commit's incremental read against its metadata. A table the reader cannot read fails.
    ``partition`` is the partition field (the record identity is (partition path, record key),
    as the table's non-global bucket index has it); None reads it from ``hoodie.properties``."""
    try:
        if partition is None:
            partition = table_partition_field(table_uri)
        verdict = verify_table(table_uri, expected, key, partition)
        commits = verify_commits(table_uri)
    except VerifyError as exc:
        return unreadable(expected, exc)
    verdict.commits_checked = commits["commits"]
    verdict.commit_problems = commits["problems"]
    verdict.verified = verdict.verified and commits["verified"]
    return verdict


def unreadable(expected: pa.Table, exc: Exception) -> ExactlyOnce:
    """The verdict on a table the reader could not read: failed, nothing counted."""
    return ExactlyOnce(verified=False, expected=expected.num_rows, error=str(exc))


@dataclass
class RecordedRun:
    """What a run's ``result.json`` says of it for ``verify --result``: its configuration (which
    regenerates or re-reads its stream), the instants it committed, its table, and the table
    as the run found it (``table_before``); for a run that did not finish, its status, its
    commits' summaries and its checkpoints, which say the prefix it committed
    (:func:`runtime.lab.prefix.verify_recorded_prefix`)."""

    config: JobConfig
    commits: list[str]
    table: str
    table_before: TableBefore | None
    status: str = "finished"
    commit_records: list[CommitSummary] = field(default_factory=list)
    checkpoints: dict[str, CheckpointEntry] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @property
    def from_generator(self) -> bool:
        """The built-in generator's stream, regenerated in process; else Spark's (``--input``
        or the Spark workload), recomputed in Spark."""
        return self.config.source == "generator" and not self.config.input_path


def recorded_run(result_path: str) -> RecordedRun:
    """The run ``result_path`` (a result.json or its directory) recorded; VerifyError when it
    cannot be read or records no configuration."""
    import json
    import os

    path = os.path.join(result_path, "result.json") if os.path.isdir(result_path) else result_path
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise VerifyError(f"--result {result_path}: cannot read a result.json: {exc}") from exc
    recorded = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(recorded, dict):
        raise VerifyError(
            f"--result {path} holds no 'config' record (the run's effective configuration), so its stream "
            "cannot be regenerated; fix: verify with --input, or re-run with a commitlab that records it"
        )
    scalar = (str, int, float, bool)
    known = {f for f in JobConfig.__dataclass_fields__}
    fields: dict[str, Any] = {k: v for k, v in recorded.items() if k in known and isinstance(v, scalar)}
    cfg = JobConfig(**fields)
    # the commits' summaries as result.json holds them (CommitSummary's JSON form)
    records = [cast("CommitSummary", c) for c in doc.get("commits") or [] if isinstance(c, dict) and "instant" in c]
    before = doc.get("table_before")
    table_before = TableBefore.from_json(before) if isinstance(before, dict) else None
    detail = (doc.get("checkpoints") or {}).get("detail") if isinstance(doc.get("checkpoints"), dict) else None
    return RecordedRun(
        cfg,
        [c["instant"] for c in records],
        str(doc.get("table") or cfg.table),
        table_before,
        str(doc.get("status") or "finished"),
        records,
        detail if isinstance(detail, dict) else {},
    )


def generator_state(cfg: JobConfig) -> pa.Table:
    """The expected state of a generator run's own stream (the generator is deterministic for a
    configuration)."""
    from runtime.data import generator

    stream = generator.generate(cfg)
    return expected_state(stream, cfg.key_field, cfg.precombine_field, cfg.partition_field).select(
        [generator.KEY_FIELD, generator.PARTITION_FIELD, generator.PRECOMBINE_FIELD, "payload"]
    )


def with_table_before(table_uri: str, state: pa.Table, run: RecordedRun) -> pa.Table:
    """``state`` (the run's stream, deduplicated) merged into the table as the run found it: read
    back as of ``table_before.as_of`` by the official reader's time travel and checked against the
    recorded content hash (a history rewritten since, e.g. by a clean, cannot be checked)."""
    before = recorded_table_before(table_uri, run)
    if before is None:
        return state
    cfg = run.config
    return merged_with_table(before, state, cfg.key_field, cfg.precombine_field, cfg.partition_field)


def recorded_table_before(table_uri: str, run: RecordedRun) -> pa.Table | None:
    """The table as the run found it (None: new or empty), read back as of ``table_before.as_of``
    by the official reader's time travel and checked against the recorded content hash."""
    rec = run.table_before
    if rec is None or rec.as_of is None:
        return None
    cfg = run.config
    before = read_snapshot(table_uri, as_of=rec.as_of)
    got = snapshot_record(before, cfg.key_field, cfg.partition_field, rec.as_of)
    if (got.rows, got.content_hash) != (rec.rows, rec.content_hash):
        raise VerifyError(
            f"the table as of {rec.as_of} (before the run) reads {got.rows} rows with hash {got.content_hash[:12]}, "
            f"but the run recorded {rec.rows} rows with hash {rec.content_hash[:12]}: the table's history changed "
            "since the run, so the run's expected state cannot be rebuilt"
        )
    return before


def read_table_before(
    completed: list[str], read: Callable[[], pa.Table], key: str, partition: str | None
) -> tuple[pa.Table | None, TableBefore]:
    """The table as a run finds it (``completed``: its completed instants; ``read``: its
    snapshot by the official reader, or the simulated disk's own), and what result.json keeps of
    it. A new or empty table is not read: nothing to merge into. A table the reader cannot read
    is refused (TableError: the user's input, exit 2), before anything is written."""
    if not completed:
        return None, TableBefore(rows=0, content_hash=_no_records_hash())
    try:
        snapshot = read()
    except VerifyError as exc:
        from runtime.hudi.table.table_config import TableError

        raise TableError(
            f"{exc}; the run's expected state is the table before the run merged with its stream, so the "
            "table must be readable first: run commitlab verify --table on it, or write to a new --table"
        ) from None
    return snapshot, snapshot_record(snapshot, key, partition, max(completed))
