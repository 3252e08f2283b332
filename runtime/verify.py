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

from runtime.table import INTERNAL_COLUMNS, META_COLUMNS, dedupe_latest

SAMPLE = 10


class VerifyError(RuntimeError):
    """The table cannot be read by the official reader; the message says why."""


def read_snapshot(table_uri: str) -> pa.Table:
    """The table's snapshot as the official reader returns it."""
    from hudi import HudiTableBuilder

    try:
        table = HudiTableBuilder.from_base_uri(table_uri).build()
        batches = table.read(None)
    except Exception as exc:  # the reader raises its own error types
        raise VerifyError(f"the official reader (hudi) cannot read {table_uri}: {exc}") from exc
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def read_completed_commits(table_uri: str) -> list[str]:
    from hudi import HudiTableBuilder

    t = HudiTableBuilder.from_base_uri(table_uri).build()
    return [i.timestamp for i in t.get_timeline().get_completed_commits()]


def read_incremental(table_uri: str, start: str, end: str) -> pa.Table:
    """Rows the commits in ``(start, end]`` wrote, as the official reader's incremental query."""
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    t = HudiTableBuilder.from_base_uri(table_uri).build()
    batches = t.read(HudiReadOptions().with_query_type(HudiQueryType.Incremental)
                     .with_start_timestamp(start).with_end_timestamp(end))
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
    counts = pc.value_counts(act_keys) if len(act_keys) else pa.array([], pa.struct([("values", pa.string()), ("counts", pa.int64())]))
    dup_keys = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
    duplicated = sum(c["counts"] - 1 for c in counts.to_pylist() if c["counts"] > 1)
    lost_mask = pc.invert(pc.is_in(exp_keys, value_set=act_keys))
    lost_keys = pc.filter(exp_keys, lost_mask)
    unexpected_mask = pc.invert(pc.is_in(act_keys, value_set=exp_keys))
    unexpected_keys = pc.filter(act_keys, unexpected_mask)
    mismatched: list[str] = []
    if actual.num_rows and value_cols:
        present = [c for c in value_cols if c in actual.column_names]
        missing_cols = sorted(set(value_cols) - set(present))
        if missing_cols:
            raise VerifyError(f"the table lacks the input columns {missing_cols}")
        a = actual.select(present).to_pandas().drop_duplicates(subset=[key]).set_index(key)
        e = expected.select(present).to_pandas().set_index(key)
        common = e.index.intersection(a.index)
        a, e = a.loc[common, present[:0] + [c for c in present if c != key]], \
            e.loc[common, [c for c in present if c != key]]
        diff = (a.astype(str) != e.astype(str)).any(axis=1)
        mismatched = [str(k) for k in diff[diff].index[:SAMPLE]]
        n_mismatched = int(diff.sum())
    else:
        n_mismatched = 0
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
