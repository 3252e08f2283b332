"""What the write path remembers of a batch by its identity (runtime.data.batch_memo): found for
that very table while it lives, never for another table (an equal one or one that took a dead
table's id), and gone with the table."""

from __future__ import annotations

import gc

import pyarrow as pa

from runtime.data.batch_memo import BatchMemo


def table(n: int) -> pa.Table:
    return pa.table({"n": list(range(n))})


def test_a_value_is_found_for_its_table_and_what_only():
    memo: BatchMemo[int] = BatchMemo()
    t = table(3)
    assert memo.get(t, "a") is None
    assert memo.put(t, 7, "a") == 7
    assert memo.get(t, "a") == 7
    assert memo.get(t, "b") is None
    assert memo.get(table(3), "a") is None  # equal rows, another table


def test_an_entry_goes_with_its_table():
    memo: BatchMemo[int] = BatchMemo()
    kept = table(2)
    memo.put(kept, 1)
    for n in range(50):  # tables that die at once: their ids are reused, their entries are gone
        t = table(n)
        assert memo.get(t) is None
        memo.put(t, n)
        del t
        gc.collect()
    assert len(memo._entries) == 1 and memo.get(kept) == 1


def test_it_is_bounded():
    memo: BatchMemo[int] = BatchMemo(size=4)
    tables = [table(i) for i in range(10)]
    for i, t in enumerate(tables):
        memo.put(t, i)
    assert len(memo._entries) <= 4 and memo.get(tables[-1]) == 9
