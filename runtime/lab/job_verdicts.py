"""The verdict of several jobs on one table, and each job's share of it.

The expected state is every job's stream merged under the lab's merge rule (the precombine field:
the larger ordering value wins, :func:`runtime.lab.verify.expected_state`), merged into what the
table held before the jobs started. The table's snapshot is compared with it as one run's is
(:func:`runtime.lab.verify.compare`), and every difference is charged to a job:

* an identity missing from the table, or holding another row than the expected one
  (``mismatched``: typically an older version, or the other job's losing record), is charged to
  the job whose record the merge rule picked: that job's row was lost;
* an identity held twice is charged to the job whose record it expects (``duplicated``);
* a row the table should not hold at all is charged to the job its payload names (every job's
  payload starts with its name, :mod:`runtime.data.job_streams`).

What a conflict aborted is no exception: a job replays an aborted round from its last checkpoint
(the sources rewind), so a finished job's stream is expected whole; a job that did not finish is
judged on its committed prefix instead (:mod:`runtime.job.record`), not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.core.json_doc import JsonObject
from runtime.data import generator
from runtime.data.job_streams import JOB_COLUMN, job_of_payload
from runtime.lab.verdicts import ExactlyOnce, emit, known_fields
from runtime.lab.verify import _actual_identity, _expected_identity, expected_state, read_snapshot, verify_run

PAYLOAD = "payload"
SAMPLE = 5


@dataclass
class JobShare:
    """One job's part of the verdict: its expected rows and what happened to them."""

    job: str
    expected: int
    lost: int = 0
    mismatched: int = 0
    duplicated: int = 0
    unexpected: int = 0
    samples: list[str] = field(default_factory=list)  # identities of its rows lost or mismatched

    _ORDER = ("job", "expected", "lost", "mismatched", "duplicated", "unexpected", "samples")

    @property
    def intact(self) -> bool:
        return not (self.lost or self.mismatched or self.duplicated or self.unexpected)

    def to_json(self) -> JsonObject:
        return emit(self, self._ORDER, frozenset())

    @classmethod
    def from_json(cls, doc: JsonObject) -> JobShare:
        return cls(**known_fields(cls, doc))

    def line(self) -> str:
        what = ", ".join(
            f"{n} {k}"
            for k, n in (
                ("lost", self.lost),
                ("mismatched", self.mismatched),
                ("duplicated", self.duplicated),
                ("unexpected", self.unexpected),
            )
            if n
        )
        return f"{self.job}: {self.expected} rows expected, " + (what or "all intact")


def merged_expected(
    streams: list[tuple[str, pa.Table]], key: str, precombine: str, partition: str | None, before: pa.Table | None
) -> pa.Table:
    """Every job's stream merged under the merge rule (into ``before``), with each row's job in
    :data:`JOB_COLUMN` (a row of ``before`` that no stream replaced has none)."""
    tagged = [s.append_column(JOB_COLUMN, pa.array([name] * s.num_rows, pa.string())) for name, s in streams]
    both = pa.concat_tables(tagged)
    # ties across jobs are impossible (job_streams makes the ordering values distinct); within a
    # job the later offset wins, as one job's merge does: order by (ordering value, offset)
    return expected_state(both, key, precombine, partition, before)


def expected_rows(tagged: pa.Table) -> pa.Table:
    """The columns of :func:`merged_expected`'s rows the table is compared on."""
    return tagged.select([generator.KEY_FIELD, generator.PARTITION_FIELD, generator.PRECOMBINE_FIELD, PAYLOAD])


def verify_jobs_on_disk(
    table: str,
    streams: list[tuple[str, pa.Table]],
    key: str,
    precombine: str,
    partition: str,
    before: pa.Table | None = None,
) -> tuple[ExactlyOnce, list[JobShare]]:
    """The table at ``table`` (a path or URI), read by the official reader, against every stream
    merged under the merge rule into ``before`` (what it held when the jobs started), and each
    job's share of the verdict."""
    tagged = merged_expected(streams, key, precombine, partition, before)
    verdict = verify_run(table, expected_rows(tagged), key, partition)
    actual = read_snapshot(table) if verdict.error is None else pa.table({})
    return verdict, shares(tagged, actual, verdict, [name for name, _ in streams], key, partition)


def shares(
    expected: pa.Table, actual: pa.Table, verdict: ExactlyOnce, jobs: list[str], key: str, partition: str | None
) -> list[JobShare]:
    """Each job's share of ``verdict`` (``expected`` from :func:`merged_expected`)."""
    out = {j: JobShare(j, 0) for j in jobs}
    owner = expected.column(JOB_COLUMN).to_pylist() if JOB_COLUMN in expected.column_names else [None] * len(expected)
    for j in owner:
        if j in out:
            out[j].expected += 1
    if verdict.error is not None or not actual.num_rows:
        for share in out.values():  # nothing readable: every expected row is lost
            share.lost = share.expected
        return list(out.values())
    exp_ids = _expected_identity(expected, key, partition)
    act_ids = _actual_identity(actual, key, partition)
    at = pc.index_in(exp_ids, value_set=act_ids)
    found = pc.is_valid(at).to_numpy(zero_copy_only=False)
    where = np.asarray(pc.fill_null(at, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    exp_payload = expected.column(PAYLOAD).to_pylist()
    act_payload = actual.column(PAYLOAD).to_pylist()
    counts = {c["values"]: c["counts"] for c in pc.value_counts(act_ids).to_pylist()}
    ids = exp_ids.to_pylist()
    for i, j in enumerate(owner):
        owned = out.get(j) if j is not None else None
        if owned is None:
            continue
        if not found[i]:
            owned.lost += 1
        elif counts.get(ids[i], 1) > 1:
            owned.duplicated += counts[ids[i]] - 1
        elif act_payload[where[i]] != exp_payload[i]:
            owned.mismatched += 1
        else:
            continue
        if len(owned.samples) < SAMPLE:
            owned.samples.append(str(ids[i]))
    expected_set = pa.array(ids, pa.string())
    stray = pc.invert(pc.is_in(act_ids, value_set=expected_set)).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(stray):
        j = job_of_payload(str(act_payload[i]))
        if j in out:
            out[j].unexpected += 1
    return list(out.values())


def named(shares_: list[JobShare]) -> str:
    """Which jobs' rows were lost or duplicated, for a verdict line ("" when none)."""
    bad = [s for s in shares_ if not s.intact]
    return "; ".join(s.line() for s in bad)
