"""A batch split into the file groups a write task buffers it in (runtime.writer.buckets): each
group's records in stream order, a batch of one file group handed on whole, small and large
batches alike."""

from __future__ import annotations

import pyarrow as pa
import pytest

from runtime.data.columns import BUCKET
from runtime.writer.buckets import split_by_file_group


def batch(parts: list[str], buckets: list[int]) -> pa.Table:
    return pa.table({"partition": parts, BUCKET: pa.array(buckets, pa.int32()), "n": list(range(len(parts)))})


@pytest.mark.parametrize("n", [3, 64, 65, 500])
def test_a_batch_of_one_file_group_is_handed_on_whole(n):
    records = batch(["p1"] * n, [7] * n)
    [(key, group)] = split_by_file_group(records, "partition")
    assert key == ("p1", 7) and group is records


@pytest.mark.parametrize("n", [4, 64, 65, 500])
def test_each_file_group_keeps_its_records_in_stream_order(n):
    parts = [f"p{i % 2}" for i in range(n)]
    buckets = [(i // 2) % 3 for i in range(n)]
    groups = dict(split_by_file_group(batch(parts, buckets), "partition"))
    want: dict[tuple[str, int], list[int]] = {}
    for i, key in enumerate(zip(parts, buckets, strict=True)):
        want.setdefault(key, []).append(i)
    assert {k: g.column("n").to_pylist() for k, g in groups.items()} == want


@pytest.mark.parametrize("n", [5, 500])
def test_a_batch_split_again_gives_the_same_groups(n):
    # a simulator's runs of one job split the same batches again: the split is remembered
    records = batch([f"p{i % 3}" for i in range(n)], [i % 2 for i in range(n)])
    first, again = split_by_file_group(records, "partition"), split_by_file_group(records, "partition")
    assert [k for k, _ in first] == [k for k, _ in again]
    assert all(a.equals(b) for (_, a), (_, b) in zip(first, again, strict=True))
    [(_, whole)] = split_by_file_group(one := batch(["p"] * n, [1] * n), "partition")
    [(_, whole_again)] = split_by_file_group(one, "partition")
    assert whole is one and whole_again is one
