"""The ckp_meta directory as Hudi's CkpMetadata/CkpMessage write and read it (0.11 to 1.0)."""

from __future__ import annotations

import os

import pytest

from runtime.core.dfs import open_dfs
from runtime.hudi.timeline.ckp_meta import (
    MAX_RETAIN_CKP_NUM,
    CkpMessage,
    CkpMetadata,
    CkpMetaError,
    State,
    ckp_meta_path,
    reduce_messages,
)

I1, I2, I3, I4, I5 = (f"2024010100000000{i}" for i in range(1, 6))


@pytest.fixture
def meta(tmp_path):
    dfs, base = open_dfs(str(tmp_path / "t"), role="coordinator")
    m = CkpMetadata(dfs, base)
    m.bootstrap()
    return m


def files(m: CkpMetadata) -> list[str]:
    return sorted(os.listdir(m.path))


def test_layout_is_one_empty_file_per_instant_and_state_under_aux_ckp_meta(meta, tmp_path):
    assert meta.path == str(tmp_path / "t" / ".hoodie" / ".aux" / "ckp_meta")
    assert ckp_meta_path("/b", "w1") == "/b/.hoodie/.aux/ckp_meta_w1"  # write.client.id set
    meta.start_instant(I1)
    meta.commit_instant(I1)
    meta.start_instant(I2)
    meta.abort_instant(I2)
    assert files(meta) == [f"{I1}.COMPLETED", f"{I1}.INFLIGHT", f"{I2}.ABORTED", f"{I2}.INFLIGHT"]
    assert all(os.path.getsize(os.path.join(meta.path, f)) == 0 for f in files(meta))


def test_last_pending_instant_is_the_last_instant_unless_completed(meta):
    assert meta.last_pending_instant() is None  # empty
    meta.start_instant(I1)
    assert meta.last_pending_instant() == I1
    meta.abort_instant(I1)
    assert meta.last_pending_instant() == I1, "an aborted instant is reused: still pending"
    meta.commit_instant(I1)
    assert meta.last_pending_instant() is None, "COMPLETED outranks ABORTED and INFLIGHT"
    meta.start_instant(I2)
    assert meta.last_pending_instant() == I2
    assert meta.load() == [CkpMessage(I1, State.COMPLETED), CkpMessage(I2, State.INFLIGHT)]


def test_only_the_last_message_counts(meta):
    # 0.13 to 1.0 look at the last message only: a pending instant before a completed one is not pending
    meta.start_instant(I1)
    meta.start_instant(I2)
    meta.commit_instant(I2)
    assert meta.last_pending_instant() is None


def test_the_driver_keeps_the_last_three_started_instants(meta):
    for i in (I1, I2, I3, I4, I5):
        meta.start_instant(i)
        meta.commit_instant(i)
    kept = sorted({f.split(".")[0] for f in files(meta)})
    assert kept == [I3, I4, I5] and len(kept) == MAX_RETAIN_CKP_NUM
    assert meta.instant_cache == [I3, I4, I5]


def test_bootstrap_cleans_every_message_and_a_missing_directory_reads_as_empty(meta):
    meta.start_instant(I1)
    meta.bootstrap()
    assert files(meta) == [] and meta.last_pending_instant() is None
    meta.start_instant(I2)
    meta.delete_all()  # #8060: someone removes the directory under the job
    assert not meta.exists()
    assert meta.last_pending_instant() is None, "a missing directory reads as no message, no error"


def test_a_foreign_file_is_a_clear_error(meta):
    open(os.path.join(meta.path, "junk.txt.bak"), "w").close()
    with pytest.raises(CkpMetaError, match="not a ckp_meta file"):
        meta.load()


def test_reduce_keeps_each_instants_highest_state_sorted_by_instant():
    msgs = [CkpMessage(I2, State.INFLIGHT), CkpMessage(I1, State.ABORTED), CkpMessage(I1, State.INFLIGHT)]
    assert reduce_messages(msgs) == [CkpMessage(I1, State.ABORTED), CkpMessage(I2, State.INFLIGHT)]
    assert CkpMessage.parse(f"{I1}.COMPLETED") == CkpMessage(I1, State.COMPLETED)
