"""The simulator's disk: an in-memory file system, base files kept unencoded.

FoundationDB's simulator stubs out the disk as it stubs out the clock and the network; this is
that stub. Every role still talks to a :class:`~runtime.core.dfs.Dfs` (so every operation is counted
and the protocols see the same listings, renames and markers), but

* the file system is pyarrow's in-memory one: no syscalls, nothing left behind;
* a base file is not parquet-encoded: ``write_parquet`` keeps the rows as it is given them (an
  Arrow table, or a copy-on-write version's :class:`~runtime.hudi.table.file_rows.FileRows`, whose
  size model it reports) and writes a small placeholder under the file's name (so listings,
  sizes and deletes behave as on a disk), ``read_parquet`` hands them back as a table. Encoding
  is the data plane's cost, not the protocol's, and it dominated a simulated checkpoint.

The official reader cannot read such a table; :func:`read_snapshot` reads it back through the
project's own snapshot rules (the latest committed version of each file group), and the real
parquet path (``simulate(..., storage="disk")``) stays available where ``hudi`` verifies.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from runtime.core import roles
from runtime.core.dfs import Dfs, DfsCounters, DfsNotFound, FaultHook, FileEntry, KeptRows
from runtime.hudi.table.file_rows import FileRows
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.merge import FILE_NAME

PLACEHOLDER = b"commitlab-sim base file (kept in memory)\n"


def _key(path: str) -> str:
    return path.strip("/")


class _Listing:
    """One directory's listing as last built, and the names changed in it since."""

    __slots__ = ("path", "names", "view", "changed")

    def __init__(self, path: str, entries: list[FileEntry]) -> None:
        self.path = path  # as listed: the entries' paths take its form
        self.names = [e.name for e in entries]  # in the file system's order (by name)
        self.view = entries  # the entries of those names, in that order
        self.changed: set[str] = set()

    def current(self, fs: pafs.FileSystem) -> list[FileEntry]:
        """The listing now: each changed name looked up alone and put in its place (a partition
        holds hundreds of files, and a commit changes a few), the rest as it was."""
        if not self.changed:  # (most listings: nothing written in the directory since)
            return self.view
        names, view = self.names, self.view
        for name in self.changed:
            info = fs.get_file_info(f"{self.path.rstrip('/')}/{name}")
            at = bisect.bisect_left(names, name)
            listed = at < len(names) and names[at] == name
            if info.mtime_ns is None:  # gone (only a missing path has no time)
                if listed:
                    del names[at], view[at]
                continue
            entry = FileEntry(name, info.path, info.size or 0, info.size is None)
            if listed:
                view[at] = entry
            else:
                names.insert(at, name)
                view.insert(at, entry)
        self.changed.clear()
        return view


class ListedFileSystem:
    """pyarrow's in-memory file system, with each directory's listing kept and brought up to date
    name by name: a partition is listed several times a commit (the cleaner, the file-system view,
    the rollback), and each listing built an entry per file anew. Reads go to the file system
    itself; every change marks the name it touches in its directory's listing."""

    def __init__(self) -> None:
        fs = pafs._MockFileSystem()
        self._fs = fs
        self.listings: dict[str, _Listing] = {}  # directory (no outer slashes) -> its listing
        # the base files' rows by path (no outer slashes): what a read of a base file hands back,
        # let go when the file goes (a run's cleaner deletes old versions all run long)
        self.tables: dict[str, pa.Table | KeptRows] = {}
        # the same paths by their directory: a directory's delete (a marker folder's, a hundred a
        # run) lets go of the tables in it without a look at every base file of the table
        self._tables_in: dict[str, set[str]] = {}
        self.get_file_info = fs.get_file_info
        self.open_input_stream = fs.open_input_stream
        self.open_input_file = fs.open_input_file

    def _changed(self, path: str) -> None:
        parent, _, name = path.strip("/").rpartition("/")  # (_key, inline: 40,000 calls a check)
        listing = self.listings.get(parent)
        if listing is not None:
            listing.changed.add(name)

    def _changed_tree(self, path: str) -> None:
        """A directory moved or went: the listings in it and below are dropped."""
        key = _key(path)
        inside = f"{key}/"
        for listed in [k for k in self.listings if k == key or k.startswith(inside)]:
            del self.listings[listed]
        self._changed(path)

    def open_output_stream(self, path: str, *args: Any, **kwargs: Any) -> Any:
        key = _key(path)
        parent, _, name = key.rpartition("/")  # (_changed, inline: every write of a run comes here)
        listing = self.listings.get(parent)
        if listing is not None:
            listing.changed.add(name)
        if key in self.tables:
            self.drop_table(key)  # (a base file's write sets its rows after this)
        return self._fs.open_output_stream(path, *args, **kwargs)

    def keep_table(self, key: str, rows: pa.Table | KeptRows) -> None:
        """``rows`` are what a read of the file ``key`` (no outer slashes) hands back."""
        self.tables[key] = rows
        directory = key.rpartition("/")[0]
        keys = self._tables_in.get(directory)
        if keys is None:
            keys = self._tables_in[directory] = set()
        keys.add(key)

    def drop_table(self, key: str) -> pa.Table | KeptRows | None:
        """The rows kept for the file ``key``, let go (None: none kept)."""
        rows = self.tables.pop(key, None)
        if rows is not None:
            directory = key.rpartition("/")[0]
            keys = self._tables_in[directory]
            keys.discard(key)
            if not keys:
                del self._tables_in[directory]
        return rows

    def _tables_under(self, path: str) -> list[str]:
        """The files in and below the directory ``path`` that have rows kept."""
        key = _key(path)
        inside = f"{key}/"
        return [k for d, keys in self._tables_in.items() if d == key or d.startswith(inside) for k in keys]

    def _tables_gone(self, path: str) -> None:
        """The tables of the files in and below the directory ``path``, let go."""
        for gone in self._tables_under(path):
            self.drop_table(gone)

    def delete_file(self, path: str) -> None:
        self._changed(path)
        self._fs.delete_file(path)
        self.drop_table(_key(path))

    def delete_dir(self, path: str) -> None:
        self._changed_tree(path)
        self._fs.delete_dir(path)
        self._tables_gone(path)

    def delete_dir_contents(self, path: str, *args: Any, **kwargs: Any) -> None:
        self._changed_tree(path)
        self._fs.delete_dir_contents(path, *args, **kwargs)
        self._tables_gone(path)

    def create_dir(self, path: str, *, recursive: bool = True) -> None:
        listings = self.listings
        key = _key(path)
        while key:  # a recursive create may add a directory at every level
            parent, _, name = key.rpartition("/")  # (_changed and _parent, inline: a handle's
            listing = listings.get(parent)  # mkdirs marks every level of a deep path)
            if listing is not None:
                listing.changed.add(name)
            key = parent.strip("/")
        self._fs.create_dir(path, recursive=recursive)

    def move(self, src: str, dest: str) -> None:
        self._changed_tree(src)
        self._changed_tree(dest)
        self._fs.move(src, dest)
        self._tables_gone(dest)
        self.drop_table(_key(dest))
        moved = self.drop_table(_key(src))
        if moved is not None:
            self.keep_table(_key(dest), moved)
        inside = f"{_key(src)}/"
        for key in self._tables_under(src):
            rows = self.drop_table(key)
            if rows is not None:
                self.keep_table(f"{_key(dest)}/{key[len(inside) :]}", rows)

    def copy_file(self, src: str, dest: str) -> None:
        self._changed(dest)
        self._fs.copy_file(src, dest)
        copied = self.tables.get(_key(src))
        if copied is not None:
            self.keep_table(_key(dest), copied)  # (rows are never changed in place)
        else:
            self.drop_table(_key(dest))


class MemoryStore:
    """One simulated disk: the in-memory file system, which keeps the base files' tables by path."""

    def __init__(self) -> None:
        self.fs = ListedFileSystem()


class MemoryDfs(Dfs):
    """A :class:`Dfs` on a :class:`MemoryStore` (same counting, same fault hook)."""

    encodes_parquet = False  # it keeps the table itself: no codec, no dictionary to decide

    def __init__(
        self,
        store: MemoryStore,
        *,
        role: str = roles.DRIVER,
        counters: DfsCounters | None = None,
        fault_hook: FaultHook | None = None,
    ) -> None:
        super().__init__(store.fs, role=role, counters=counters, fault_hook=fault_hook)
        self.store = store

    def for_role(self, role: str) -> MemoryDfs:
        return MemoryDfs(self.store, role=role, counters=self.counters, fault_hook=self.fault_hook)

    # pyarrow builds a ``FileType`` enum (a Python call) at every ``FileInfo.type``: tens of
    # thousands of listed entries a run. On the in-memory file system a file always has a size
    # and a directory none, and only a missing path has no modification time: the same answers.
    @staticmethod
    def _found(info: pafs.FileInfo) -> bool:
        return info.mtime_ns is not None

    @staticmethod
    def _entries(infos: list[pafs.FileInfo]) -> list[FileEntry]:
        return [FileEntry(i.base_name, i.path, i.size or 0, i.size is None) for i in infos]

    def _listing(self, path: str) -> list[FileEntry]:
        """The directory's entries, from its kept listing when there is one."""
        fs = self.store.fs
        key = _key(path)
        listing = fs.listings.get(key)
        if listing is None or listing.path != path:
            listing = fs.listings[key] = _Listing(path, super()._listing(path))
        return list(listing.current(fs))  # the caller's own list: the kept one stays as listed

    def probe(self, op: str, path: str) -> None:
        """Counted, and the fault hook acts on it: its answer is unused, so the simulated disk
        gives none (a per-handle timeline listing was a sixth of a simulated checkpoint)."""
        self._op(op, path)

    def write_parquet(self, path: str, table: pa.Table | KeptRows, **write_args: Any) -> int:  # no codec
        self._op("write", path)
        # the placeholder appears in one step, as the rename of a real write would
        with self.fs.open_output_stream(path) as f:
            f.write(PLACEHOLDER)
        self.store.fs.keep_table(_key(path), table)
        if isinstance(table, pa.Table):
            size: int = table.get_total_buffer_size()  # (``nbytes`` walks every buffer: slow)
            return size
        return table.nbytes

    def read_parquet(self, path: str, columns: list[str] | None = None) -> pa.Table:
        kept = self.read_kept(path)
        table = kept if isinstance(kept, pa.Table) else kept.to_arrow()
        return table if columns is None else table.select(columns)

    def read_kept(self, path: str) -> pa.Table | KeptRows:
        """A base file's rows as they were written (a read, counted as :meth:`read_parquet`'s)."""
        self._op("read", path)
        kept = self.store.fs.tables.get(_key(path))
        if kept is None or not self._found(self.fs.get_file_info(path)):
            raise DfsNotFound(f"file {path} does not exist")
        return kept


def read_snapshot(dfs: MemoryDfs, base_path: str) -> pa.Table:
    """The table's snapshot by the project's own rules: in every partition, the latest version of
    each file group written by a completed commit (what a snapshot query returns)."""
    table = HudiTable.open(dfs, base_path)
    timeline = table.timeline()
    parts = []
    for entry in sorted(dfs.list_dir(table.base_path), key=lambda e: e.name):
        if not entry.is_dir or entry.name.startswith("."):
            continue
        for _, rel in sorted(table.committed_base_files(entry.name, timeline).values()):
            parts.append(dfs.read_kept(Dfs.join(table.base_path, rel)))
    if not parts:
        return pa.table({})
    return _concatenated(parts)


def _concatenated(parts: list[pa.Table | KeptRows]) -> pa.Table:
    """The rows of ``parts`` in order, as one table. Versions kept as rows of one schema are
    converted to Arrow together, a column at a time (the verifier reads every run's snapshot, and
    a conversion per file version was most of it); others one by one, then concatenated."""
    held = [p for p in parts if isinstance(p, FileRows)]
    schema = held[0].schema if held else None
    if len(held) == len(parts) and all(p.schema == schema for p in held):
        assert schema is not None
        rows = [r for p in held for r in p.rows]
        names = [p.file_name for p in held for _ in p.rows]
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [()] * (len(schema) - 1)
        columns.insert(schema.get_field_index(FILE_NAME), names)
        arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
        return pa.Table.from_arrays(arrays, schema=schema)
    tables = [p if isinstance(p, pa.Table) else p.to_arrow() for p in parts]
    return pa.concat_tables(tables, promote_options="default")
