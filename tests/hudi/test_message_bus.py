"""Tests of runtime.hudi.timeline.dfs_message_bus (HUDI-2677, PR #3915) on a real local DFS.

The first three tests port Hudi's TestMessageBus (hudi-flink, sink/message/TestMessageBus.java)
one to one; the rest pin what the runtime adds: the driver's fresh directory, read errors as
"no message" with a diagnosis, the deleted-bus diagnosis (#8060), one client per process and the
DFS operation counts.
"""

from __future__ import annotations

import os

import pytest

from runtime.core.dfs import open_dfs
from runtime.hudi.timeline import dfs_message_bus as bus
from runtime.hudi.timeline.dfs_message_bus import (
    ABORTED_CKP_INSTANT,
    CkpMessage,
    MessageBusError,
    MessageClient,
    MessageClientRegistry,
    MessageDriver,
    message_bus_path,
)


@pytest.fixture
def base(tmp_path):
    dfs, path = open_dfs(str(tmp_path / "table"), role="coordinator")
    dfs.mkdirs(path)
    return dfs, path


@pytest.fixture
def driver(base):
    dfs, path = base
    return MessageDriver(dfs, path)


def bus_files(path: str) -> set[str]:
    return set(os.listdir(message_bus_path(path)))


def ids(keys) -> str:
    return ",".join(str(k) for k in keys)


# -- Hudi's TestMessageBus ------------------------------------------------------------------------


def test_write_and_read_message(base, driver):
    dfs, path = base
    client = MessageClient(dfs, path)

    # write and read 5 committed checkpoints
    for i in range(5):
        driver.commit_ckp(i, str(i), str(i + 1))
    for i in range(5):
        msg = client.get_ckp_message(i)
        assert msg is not None
        assert msg.committed
        assert msg.checkpoint_id == i
        assert msg.commit_instant == str(i)
        assert msg.inflight_instant == str(i + 1)

    # write and read 5 aborted checkpoints
    for i in range(5, 10):
        driver.abort_ckp(i)
    for i in range(5, 10):
        msg = client.get_ckp_message(i)
        assert msg is not None
        assert not msg.committed
        assert msg.commit_instant == ABORTED_CKP_INSTANT
        assert msg.inflight_instant == ABORTED_CKP_INSTANT


def test_write_cleaning(base, driver):
    _, path = base
    # write 20 committed checkpoints
    for i in range(20):
        driver.commit_ckp(i, str(i), str(i + 1))
    assert len(driver.ckp_id_cache) == 20, "the id cache should not be cleaned"

    # write 9 aborted checkpoints
    for i in range(20, 29):
        driver.abort_ckp(i)
    assert len(driver.ckp_id_cache) == 29, "the id cache should not be cleaned"

    driver.commit_ckp(29, "29", "30")
    assert len(driver.ckp_id_cache) == 20, "the cache should be cleaned"
    assert ids(driver.ckp_id_cache) == "10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29"

    # ... and so is the directory: the files of 0..9 are gone, 10..29 remain
    expected = {f"{i}.commit" for i in range(10, 20)} | {f"{i}.aborted" for i in range(20, 29)} | {"29.commit"}
    assert bus_files(path) == expected


def test_read_cleaning(base, driver):
    dfs, path = base
    client = MessageClient(dfs, path)

    # write 20 committed checkpoints
    for i in range(20):
        driver.commit_ckp(i, str(i), str(i + 1))

    for i in range(10):
        client.get_ckp_message(i)
    assert len(client.ckp_cache) == 10, "the checkpoint cache should not be cleaned"

    client.get_ckp_message(10)
    assert len(client.ckp_cache) == 10, "the checkpoint cache should be cleaned"

    for i in range(11, 15):
        client.get_ckp_message(i)
    assert len(client.ckp_cache) == 10, "the checkpoint cache should be cleaned"
    assert ids(client.ckp_cache) == "5,6,7,8,9,10,11,12,13,14"


def test_the_read_cache_is_kept_by_checkpoint_id_whatever_the_order_of_reads(base, driver):
    dfs, path = base
    client = MessageClient(dfs, path)
    for i in range(20):
        driver.commit_ckp(i, str(i), str(i + 1))
    for i in [*range(10, 19), 3]:  # an earlier checkpoint read last
        client.get_ckp_message(i)
    assert ids(client.ckp_cache) == "3,10,11,12,13,14,15,16,17,18"
    client.get_ckp_message(19)  # the lowest id goes first (TreeMap.pollFirstEntry), not the oldest read
    assert ids(client.ckp_cache) == "10,11,12,13,14,15,16,17,18,19"


# -- the runtime's additions ----------------------------------------------------------------------


def test_bus_lives_under_the_auxiliary_folder(base):
    _, path = base
    assert message_bus_path(path) == f"{path}/.hoodie/.aux/message_bus"


def test_commit_and_abort_file_formats(base, driver):
    _, path = base
    driver.commit_ckp(3, "20240101000000001", "20240101000000002")
    driver.abort_ckp(4)
    d = message_bus_path(path)
    with open(f"{d}/3.commit", "rb") as f:
        assert f.read() == b"20240101000000001,20240101000000002"
    assert os.path.getsize(f"{d}/4.aborted") == 0
    # commit overwrites
    driver.commit_ckp(3, "a", "b")
    with open(f"{d}/3.commit", "rb") as f:
        assert f.read() == b"a,b"


def test_driver_recreates_an_empty_bus_directory_at_start(base, driver):
    dfs, path = base
    for i in range(3):
        driver.commit_ckp(i, str(i), str(i + 1))
    driver.abort_ckp(3)
    stray = os.path.join(message_bus_path(path), "leftover.tmp")
    open(stray, "w").close()
    assert len(bus_files(path)) == 5

    restarted = MessageDriver(dfs, path)
    assert os.path.isdir(message_bus_path(path))
    assert bus_files(path) == set()
    assert len(restarted.ckp_id_cache) == 0
    # a fresh client sees none of the old messages
    assert MessageClient(dfs, path).get_ckp_message(0) is None


def test_driver_creates_the_directory_when_missing(base):
    dfs, path = base
    assert not os.path.exists(message_bus_path(path))
    MessageDriver(dfs, path)
    assert os.path.isdir(message_bus_path(path))


def test_a_message_not_yet_written_reads_as_none_and_is_found_later(base, driver):
    dfs, path = base
    client = MessageClient(dfs, path)
    assert client.get_ckp_message(1) is None
    assert 1 not in client.ckp_cache  # "none yet" is never cached
    driver.commit_ckp(1, "x", "y")
    assert client.get_ckp_message(1) == CkpMessage(1, True, "x", "y")


def test_commit_is_preferred_over_aborted_for_the_same_id(base, driver):
    dfs, path = base
    driver.abort_ckp(2)
    driver.commit_ckp(2, "c", "i")
    msg = MessageClient(dfs, path).get_ckp_message(2)
    assert msg.committed and msg.inflight_instant == "i"


@pytest.mark.parametrize("content", [b"garbage-without-separator", b""])
def test_a_malformed_commit_file_reads_as_no_message_and_is_recorded(base, driver, content):
    dfs, path = base
    with open(os.path.join(message_bus_path(path), "5.commit"), "wb") as f:
        f.write(content)
    client = MessageClient(dfs, path)
    assert client.last_error is None
    assert client.get_ckp_message(5) is None
    assert client.read_errors == 1
    assert client.last_error is not None
    assert "5.commit" in client.last_error
    assert "a message is '<committed instant>,<inflight instant>'" in client.last_error
    assert 5 not in client.ckp_cache
    # once the driver rewrites it properly, the message is read
    driver.commit_ckp(5, "c5", "i5")
    assert client.get_ckp_message(5).inflight_instant == "i5"


def test_from_bytes_raises_message_bus_error_naming_the_file():
    with pytest.raises(MessageBusError, match="x/7.commit"):
        CkpMessage.from_bytes(7, b"nonsense", path="x/7.commit")
    assert CkpMessage.from_bytes(7, b"a,b") == CkpMessage(7, True, "a", "b")
    assert CkpMessage.aborted(7) == CkpMessage(7, False, "aborted", "aborted")


def test_a_deleted_bus_directory_reads_as_none_and_is_diagnosed(base, driver):
    dfs, path = base
    driver.commit_ckp(0, "", "20240101000000000")
    client = MessageClient(dfs, path)
    assert client.get_ckp_message(0).inflight_instant == "20240101000000000"
    assert client.bus_exists()
    dfs.delete(message_bus_path(path), recursive=True)
    assert client.get_ckp_message(1) is None
    assert client.bus_exists() is False
    # a missing file is "no message yet", not a read error
    assert client.read_errors == 0
    # a message read before the deletion is still served from the cache
    assert client.get_ckp_message(0).inflight_instant == "20240101000000000"


def test_registry_returns_one_client_per_path(base, tmp_path):
    """MessageClient.getSingleton: one client per base path (Hudi keys its map by path only)."""
    dfs, path = base
    clients = MessageClientRegistry()
    a = clients.get(dfs, path)
    assert clients.get(dfs, path) is a
    assert clients.get(dfs.for_role("writer"), path) is a
    assert clients.get(dfs, str(tmp_path / "other")) is not a
    # another process owns another registry: another client
    assert MessageClientRegistry().get(dfs, path) is not a


def test_dfs_counters_count_operations_by_role(base):
    dfs, path = base
    counters = dfs.counters
    counters.reset()
    drv = MessageDriver(dfs, path)  # exists + mkdir (the directory is new)
    drv.commit_ckp(0, "", "i0")  # write
    drv.abort_ckp(1)  # create
    snap = counters.snapshot()
    assert snap == {"coordinator": {"exists": 1, "mkdir": 1, "write": 1, "create": 1}}

    client = MessageClient(dfs.for_role("writer"), path)
    assert client.get_ckp_message(0).inflight_instant == "i0"  # exists + read
    assert client.get_ckp_message(1).committed is False  # exists(.commit) + exists(.aborted)
    assert client.get_ckp_message(2) is None  # exists + exists
    snap = counters.snapshot()
    assert snap["writer"] == {"exists": 5, "read": 1}
    assert snap["coordinator"] == {"exists": 1, "mkdir": 1, "write": 1, "create": 1}

    # a cached message costs no DFS operation
    client.get_ckp_message(0)
    client.get_ckp_message(1)
    assert counters.snapshot()["writer"] == {"exists": 5, "read": 1}


def test_driver_restart_counts_the_delete(base, driver):
    dfs, path = base
    dfs.counters.reset()
    MessageDriver(dfs, path)
    assert dfs.counters.snapshot() == {"coordinator": {"exists": 1, "delete": 1, "mkdir": 1}}


def test_driver_cleaning_counts_one_delete_per_removed_message(base, driver):
    dfs, _ = base
    for i in range(29):
        driver.commit_ckp(i, str(i), str(i + 1))
    dfs.counters.reset()
    driver.commit_ckp(29, "29", "30")
    assert dfs.counters.snapshot() == {"coordinator": {"write": 1, "delete": 10}}


def test_driver_cleaning_handles_ids_written_out_of_order(base, driver):
    # ids are kept in id order (Hudi's TreeMap), so the oldest *ids* are removed
    _, path = base
    for i in list(range(10, 30)) + list(range(0, 10)):
        driver.commit_ckp(i, str(i), str(i + 1))
    assert ids(driver.ckp_id_cache) == ids(range(10, 30))
    assert bus_files(path) == {f"{i}.commit" for i in range(10, 30)}


def test_close_clears_the_caches(base, driver):
    dfs, path = base
    driver.commit_ckp(0, "", "i")
    client = MessageClient(dfs, path)
    client.get_ckp_message(0)
    client.close()
    driver.close()
    assert len(client.ckp_cache) == 0 and len(driver.ckp_id_cache) == 0


def test_helpers():
    assert bus.can_abort("aborted", 3)
    assert not bus.can_abort("aborted", 0)  # the initial message is never an abort
    assert not bus.can_abort("20240101000000000", 3)
    assert not bus.can_abort(None, 3)
    assert bus.not_initial_ckp(1) and not bus.not_initial_ckp(0)
