"""Exactly-once, checked with the official reader.

The actual state is the snapshot that ``hudi`` (hudi-rs, the official Rust reader) reads; the
expected state is the input deduplicated by key (largest precombine value, ties to the later
offset). They are compared row for row, in Jepsen's vocabulary: *lost* (expected, not there),
*duplicated* (a key more than once), *unexpected* (there, never written) and *mismatched* (there,
with the wrong values).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.storage import redact
from runtime.hudi.table import INTERNAL_COLUMNS, META_COLUMNS, dedupe_latest

SAMPLE = 10


class VerifyError(RuntimeError):
    """The table cannot be read by the official reader; the message says why."""


def _open_reader(table_uri: str) -> Any:
    """The official reader's table; an S3 URI's endpoint options become storage options."""
    from hudi import HudiTableBuilder

    from runtime.core.storage import reader_location

    base_uri, storage_options = reader_location(table_uri)
    return HudiTableBuilder.from_base_uri(base_uri).with_storage_options(storage_options).build()


def read_snapshot(table_uri: str) -> pa.Table:
    """The table's snapshot as the official reader returns it."""
    try:
        table = _open_reader(table_uri)
        batches = table.read(None)
    except Exception as exc:  # the reader raises its own error types
        raise VerifyError(f"the official reader (hudi) cannot read {redact(table_uri)}: {exc}") from exc
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def read_completed_commits(table_uri: str) -> list[str]:
    try:
        t = _open_reader(table_uri)
        return [i.timestamp for i in t.get_timeline().get_completed_commits()]
    except Exception as exc:
        raise VerifyError(f"the official reader (hudi) cannot read the timeline of {redact(table_uri)}: {exc}") from exc


def read_incremental(table_uri: str, start: str, end: str) -> pa.Table:
    """Rows the commits in ``(start, end]`` wrote, as the official reader's incremental query."""
    from hudi import HudiQueryType, HudiReadOptions

    try:
        t = _open_reader(table_uri)
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


def expected_state(records: pa.Table, key: str, precombine: str) -> pa.Table:
    return dedupe_latest(records, key, precombine)


def compare(expected: pa.Table, actual: pa.Table, key: str) -> dict[str, Any]:
    """Compares the expected final state with what the reader returned."""
    value_cols = [c for c in expected.column_names if c not in INTERNAL_COLUMNS and c not in META_COLUMNS]
    exp_keys = expected.column(key).cast(pa.string())
    if actual.num_rows == 0:
        act_keys = pa.array([], pa.string())
    else:
        if key not in actual.column_names:
            raise VerifyError(f"the table has no column {key!r}; it has {actual.column_names}")
        act_keys = actual.column(key).cast(pa.string()).combine_chunks()
    counts = (
        pc.value_counts(act_keys)
        if len(act_keys)
        else pa.array([], pa.struct([("values", pa.string()), ("counts", pa.int64())]))
    )
    dup_keys = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
    duplicated = sum(c["counts"] - 1 for c in counts.to_pylist() if c["counts"] > 1)
    lost_mask = pc.invert(pc.is_in(exp_keys, value_set=act_keys))
    lost_keys = pc.filter(exp_keys, lost_mask)
    unexpected_mask = pc.invert(pc.is_in(act_keys, value_set=exp_keys))
    unexpected_keys = pc.filter(act_keys, unexpected_mask)
    mismatched: list[str] = []
    n_mismatched = 0
    if actual.num_rows and value_cols:
        missing_cols = sorted(set(value_cols) - set(actual.column_names))
        if missing_cols:
            raise VerifyError(f"the table lacks the input columns {missing_cols}")
        others = [c for c in value_cols if c != key]
        a = actual.select(value_cols).to_pandas().drop_duplicates(subset=[key]).set_index(key)
        e = expected.select(value_cols).to_pandas().set_index(key)
        common = e.index.intersection(a.index)
        diff = (a.loc[common, others].astype(str) != e.loc[common, others].astype(str)).any(axis=1)
        mismatched = [str(k) for k in diff[diff].index[:SAMPLE]]
        n_mismatched = int(diff.sum())
    verdict = {
        "verified": len(lost_keys) == 0 and duplicated == 0 and len(unexpected_keys) == 0 and n_mismatched == 0,
        "expected": expected.num_rows,
        "actual": actual.num_rows,
        "lost": len(lost_keys),
        "duplicated": duplicated,
        "unexpected": len(unexpected_keys),
        "mismatched": n_mismatched,
        "samples": {
            "lost": lost_keys.slice(0, SAMPLE).to_pylist(),
            "duplicated": dup_keys[:SAMPLE],
            "unexpected": unexpected_keys.slice(0, SAMPLE).to_pylist(),
            "mismatched": mismatched,
        },
    }
    return verdict


def verify_table(table_uri: str, expected: pa.Table, key: str) -> dict[str, Any]:
    """Reads the table with the official reader and compares it with ``expected``."""
    return compare(expected, read_snapshot(table_uri), key)


def verify_commits(table_uri: str) -> dict[str, Any]:
    """Each commit's incremental read (the official reader, between consecutive instants) must
    hold exactly the rows its metadata says it wrote: per file group, numInserts +
    numUpdateWrites rows, each once, all stamped with that commit's time."""
    from runtime.core.dfs import open_dfs
    from runtime.hudi.table import HudiTable

    dfs, base = open_dfs(table_uri, role="verifier")
    table = HudiTable.open(dfs, base)
    commits = read_completed_commits(table_uri)
    problems: list[dict[str, Any]] = []
    prev = "19700101000000000"
    for instant in commits:
        meta = table.read_commit_metadata(instant)
        want: dict[str, int] = {}
        for stats in meta.get("partitionToWriteStats", {}).values():
            for s in stats:
                want[s["fileId"]] = want.get(s["fileId"], 0) + s["numInserts"] + s["numUpdateWrites"]
        rows = read_incremental(table_uri, prev, instant)
        got: dict[str, int] = {}
        bad_time = 0
        dup_keys = 0
        if rows.num_rows:
            names = rows.column("_hoodie_file_name").to_pylist()
            for n in names:
                fid = n.split("_", 1)[0]
                got[fid] = got.get(fid, 0) + 1
            bad_time = int(pc.sum(pc.not_equal(rows.column("_hoodie_commit_time"), instant)).as_py() or 0)
            keys = rows.column("_hoodie_record_key")
            dup_keys = keys.length() - pc.count_distinct(keys).as_py()
        if got != want or bad_time or dup_keys:
            diff = {f: (want.get(f, 0), got.get(f, 0)) for f in set(want) | set(got) if want.get(f, 0) != got.get(f, 0)}
            problems.append(
                {
                    "instant": instant,
                    "rows_by_metadata": sum(want.values()),
                    "rows_read": rows.num_rows,
                    "file_groups_differing": dict(list(diff.items())[:SAMPLE]),
                    "rows_with_other_commit_time": bad_time,
                    "keys_twice": dup_keys,
                }
            )
        prev = instant
    return {"verified": not problems, "commits": len(commits), "problems": problems}


def verify_run(table_uri: str, expected: pa.Table, key: str) -> dict[str, Any]:
    """The exactly-once verdict of a run: the snapshot against the expected state, and every
    commit's incremental read against its metadata. A table the reader cannot read fails."""
    try:
        verdict = verify_table(table_uri, expected, key)
        commits = verify_commits(table_uri)
    except VerifyError as exc:
        return {
            "verified": False,
            "expected": expected.num_rows,
            "actual": None,
            "lost": None,
            "duplicated": None,
            "unexpected": None,
            "mismatched": None,
            "error": str(exc),
            "samples": {},
        }
    verdict["commits_checked"] = commits["commits"]
    verdict["commit_problems"] = commits["problems"]
    verdict["verified"] = verdict["verified"] and commits["verified"]
    return verdict
