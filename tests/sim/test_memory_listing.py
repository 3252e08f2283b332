"""The simulated disk keeps each directory's listing until something under it changes: every
listing must still be what the file system holds, after every kind of change."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.fs as pafs

from runtime.core.dfs import Dfs
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore


def _fresh(store: MemoryStore, path: str) -> list[tuple[str, int, bool]]:
    infos = store.fs._fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [(i.base_name, i.size or 0, i.type == pafs.FileType.Directory) for i in infos]


def _listed(dfs: Dfs, path: str) -> list[tuple[str, int, bool]]:
    return [(e.name, e.size, e.is_dir) for e in dfs.list_dir(path)]


def test_a_kept_listing_follows_every_change_under_its_directory():
    store = MemoryStore()
    dfs = MemoryDfs(store, role="writer.data")
    dfs.mkdirs("/t/p0")
    dfs.mkdirs("/t/p1")
    dfs.write_bytes("/t/p0/a", b"1")
    steps = [
        lambda: dfs.write_bytes("/t/p0/b", b"22"),  # a new file
        lambda: dfs.write_bytes("/t/p0/a", b"333"),  # the same name, another size
        lambda: dfs.create_empty("/t/p0/.marker"),
        lambda: dfs.create_new("/t/p0/c", b"4444"),
        lambda: dfs.rename("/t/p0/b", "/t/p1/b"),  # out of one directory, into another
        lambda: dfs.delete("/t/p0/a"),
        lambda: dfs.mkdirs("/t/p0/sub/deeper"),  # new directories at two levels
        lambda: dfs.write_parquet("/t/p0/sub/f.parquet", pa.table({"x": [1]})),
        lambda: dfs.rename("/t/p0/sub", "/t/p2"),  # a directory with its files
        lambda: dfs.delete("/t/p2", recursive=True),
    ]
    watched = ["/t", "/t/p0", "/t/p0/sub", "/t/p1", "/t/p2", "/t/p0/sub/deeper"]
    for step in steps:
        for path in watched:  # listed (and kept) before the change
            if dfs.exists(path):
                _listed(dfs, path)
        step()
        for path in watched:
            if dfs.exists(path):
                assert _listed(dfs, path) == _fresh(store, path), (path, step)


def test_a_caller_sorting_its_listing_leaves_the_kept_one_as_listed():
    dfs = MemoryDfs(MemoryStore())
    dfs.mkdirs("/t")
    for name in ("b", "a", "c"):
        dfs.write_bytes(f"/t/{name}", b"x")
    mine = dfs.list_dir("/t")
    mine.sort(key=lambda e: e.name, reverse=True)
    assert [e.name for e in dfs.list_dir("/t")] == ["a", "b", "c"]


def test_a_base_file_s_rows_go_with_the_file_and_follow_a_rename():
    # the cleaner deletes old versions all run long: their rows must not stay behind in memory
    store = MemoryStore()
    dfs = MemoryDfs(store, role="writer.data")
    dfs.mkdirs("/t/p0")
    one, two = pa.table({"x": [1]}), pa.table({"x": [2]})
    dfs.write_parquet("/t/p0/a.parquet", one)
    dfs.write_parquet("/t/p0/b.parquet", two)
    dfs.delete("/t/p0/a.parquet")
    assert list(store.fs.tables) == ["t/p0/b.parquet"]
    dfs.rename("/t/p0", "/t/p1")  # a directory with its files
    assert dfs.read_parquet("/t/p1/b.parquet").equals(two)
    dfs.write_bytes("/t/p1/b.parquet", b"not parquet")  # a file written over a base file
    assert not store.fs.tables
    dfs.write_parquet("/t/p1/c.parquet", one)
    dfs.delete("/t/p1", recursive=True)
    assert not store.fs.tables


def test_a_directory_s_delete_lets_go_of_the_rows_in_and_below_it_only():
    store = MemoryStore()
    dfs = MemoryDfs(store, role="writer.data")
    rows = pa.table({"x": [1]})
    for path in ("/t/p/a.parquet", "/t/p/q/b.parquet", "/t/p0/c.parquet", "/t/pa.parquet"):
        dfs.mkdirs(path.rpartition("/")[0])
        dfs.write_parquet(path, rows)
    dfs.delete("/t/p", recursive=True)  # not its sibling p0, nor the file pa.parquet beside it
    assert sorted(store.fs.tables) == ["t/p0/c.parquet", "t/pa.parquet"]
    dfs.rename("/t/p0", "/t/p")
    assert dfs.read_parquet("/t/p/c.parquet").equals(rows)
    dfs.delete("/t/p", recursive=True)
    assert list(store.fs.tables) == ["t/pa.parquet"]


def test_a_kept_listing_follows_many_changes_between_two_listings():
    # several names changed at once, each put in its place among many (as a commit changes a few
    # files of a partition of hundreds)
    rng = random.Random(3)
    store = MemoryStore()
    dfs = MemoryDfs(store, role="writer.data")
    dfs.mkdirs("/t/p")
    names = [f"f{i:03d}" for i in range(60)]
    for _ in range(40):
        for name in rng.sample(names, rng.randrange(1, 8)):
            if rng.random() < 0.4:
                dfs.delete(f"/t/p/{name}")
            else:
                dfs.write_bytes(f"/t/p/{name}", b"x" * rng.randrange(1, 9))
        assert _listed(dfs, "/t/p") == _fresh(store, "/t/p")
