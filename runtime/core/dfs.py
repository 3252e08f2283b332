"""The one door to the distributed file system.

Every byte the runtime reads or writes on the table, the message bus or the state backend goes
through :class:`Dfs`, a thin layer over ``pyarrow.fs`` that counts each operation by type and by
role. Those counts are what the protocol comparison is about (RFC-50 exists because writers listed
the timeline too often), so nothing may bypass this layer.

Paths are plain strings in the file system's own namespace (for the local file system: absolute
paths; for S3: ``bucket/key``). :func:`open_dfs` turns a user's path or URI into a ``Dfs``.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.core.dfs_components import component_of
from runtime.core.roles import DRIVER

# ``{role: {op: count}}`` and ``{role: {component: {op: count}}}``
DfsOps = dict[str, dict[str, int]]
DfsComponentOps = dict[str, dict[str, dict[str, int]]]

# Operation names in the counters and results: exists, list, read, write, create, delete, mkdir, rename, stat.


class KeptRows(Protocol):
    """A file's rows as a storage keeps them instead of encoding them (the simulated disk keeps
    a small file version's rows as Python values: :class:`runtime.hudi.table.file_rows.FileRows`)."""

    @property
    def nbytes(self) -> int: ...  # the size the storage reports for the file

    def to_arrow(self) -> pa.Table: ...


Held = TypeVar("Held")  # the rows a caller holds of a file it wrote (read_parquet_held)


class DfsError(IOError):
    """A DFS operation failed; the message names the operation and the path."""


class DfsNotFound(DfsError, FileNotFoundError):
    """The path does not exist."""


class DfsCounters:
    """Thread-safe counts of DFS operations by role, by the table component the path lies in
    (:mod:`runtime.core.dfs_components`) and by operation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, str], int] = defaultdict(int)

    def add(self, role: str, op: str, path: str, n: int = 1) -> None:
        key = (role, component_of(path), op)
        with self._lock:
            self._counts[key] += n

    # (plain dicts, not nested defaultdicts: a bounded check takes every role's counts at the end
    # of each of its thousands of runs; the same counts in the same order)
    def snapshot(self) -> DfsOps:
        """``{role: {op: count}}``, every component added up."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            for (role, _component, op), n in self._counts.items():
                ops = out.get(role)
                if ops is None:
                    ops = out[role] = {}
                ops[op] = ops.get(op, 0) + n
        return out

    def by_component(self) -> DfsComponentOps:
        """``{role: {component: {op: count}}}``."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        with self._lock:
            for (role, component, op), n in self._counts.items():
                _ops_of(out, role, component)[op] = n
        return out

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    @staticmethod
    def merge(parts: Iterable[DfsOps]) -> DfsOps:
        """Adds several snapshots (one per process) into one."""
        total: dict[str, dict[str, int]] = {}
        for part in parts:
            for role, ops in part.items():
                if not ops:  # (a role with none adds no entry)
                    continue
                into = total.get(role)
                if into is None:
                    into = total[role] = {}
                for op, n in ops.items():
                    into[op] = into.get(op, 0) + n
        return total

    @staticmethod
    def merge_components(parts: Iterable[DfsComponentOps]) -> DfsComponentOps:
        """Adds several :meth:`by_component` snapshots into one."""
        total: dict[str, dict[str, dict[str, int]]] = {}
        for part in parts:
            for role, components in part.items():
                for component, ops in components.items():
                    if not ops:  # (a component with none adds no entry)
                        continue
                    into = _ops_of(total, role, component)
                    for op, n in ops.items():
                        into[op] = into.get(op, 0) + n
        return total


def _ops_of(out: DfsComponentOps, role: str, component: str) -> dict[str, int]:
    """``out[role][component]``, made empty where missing."""
    parts = out.get(role)
    if parts is None:
        parts = out[role] = {}
    ops = parts.get(component)
    if ops is None:
        ops = parts[component] = {}
    return ops


class OneThreadCounters(DfsCounters):
    """:class:`DfsCounters` for a process whose every DFS operation runs on one thread (the
    simulator runs I/O inline): the same counts without taking the lock per operation, and
    :class:`Dfs` adds to :attr:`counts` itself (a simulated run counts 20,000 operations)."""

    @property
    def counts(self) -> dict[tuple[str, str, str], int]:
        """``(role, component, op) -> count``, kept in place for the counters' life (a reset empties it)."""
        return self._counts

    def add(self, role: str, op: str, path: str, n: int = 1) -> None:
        self._counts[(role, component_of(path), op)] += n


@dataclass(frozen=True)
class FileEntry:
    """One entry of a directory listing."""

    name: str
    path: str
    size: int
    is_dir: bool


# A pure function of its strings, so cached by them: a simulated run joins 12,000 paths, most of
# them again and again (a table's properties file, an instant's file, a base file's path).
@functools.lru_cache(maxsize=1 << 14)
def _joined(*parts: str) -> str:
    if len(parts) == 2:  # the commonest (a folder and a name): the same path, without the loop
        return f"{parts[0].rstrip('/')}/{parts[1].strip('/')}"
    head, *rest = parts
    out = head.rstrip("/")
    for part in rest:
        out = f"{out}/{part.strip('/')}"
    return out


# what a probe's read takes of a file: its tail, where a parquet footer is
_PROBE_READ_BYTES = 64 * 1024

# A hook the fault injector installs: called as hook(role, op, path) before every operation;
# it may sleep or raise to simulate a slow or failing DFS.
FaultHook = Callable[[str, str, str], None]


class Dfs:
    """Counting facade over a ``pyarrow.fs.FileSystem`` for one role.

    ``for_role`` gives another role's view of the same file system and the same counters.
    """

    # whether write_parquet encodes the table to parquet bytes, so its write_args (the codec,
    # the dictionary columns) matter and are worth working out
    encodes_parquet = True

    def __init__(
        self,
        fs: pafs.FileSystem,
        *,
        role: str = DRIVER,
        counters: DfsCounters | None = None,
        fault_hook: FaultHook | None = None,
    ) -> None:
        self.fs = fs
        self.role = role
        self.counters = counters if counters is not None else DfsCounters()
        self.fault_hook = fault_hook
        # one-thread counters are added to here, without a call to ``add`` per operation
        self._one_thread_counts = self.counters.counts if type(self.counters) is OneThreadCounters else None

    def for_role(self, role: str) -> Dfs:
        return Dfs(self.fs, role=role, counters=self.counters, fault_hook=self.fault_hook)

    # -- bookkeeping -------------------------------------------------------------------------

    def _op(self, op: str, path: str) -> None:
        counts = self._one_thread_counts
        if counts is not None:
            counts[(self.role, component_of(path), op)] += 1  # OneThreadCounters.add, inline
        else:
            self.counters.add(self.role, op, path)
        if self.fault_hook is not None:
            self.fault_hook(self.role, op, path)

    def probe(self, op: str, path: str) -> None:
        """An operation whose answer the caller does not use (a check Hudi makes that the lab
        models for its cost, :mod:`runtime.hudi.table.meta_client`): counted, and made on the storage:
        ``stat`` a status, ``read`` an open and a read of the file's tail (a footer, a small
        file), ``list`` a listing. A missing path is no error."""
        self._op(op, path)
        try:
            if op == "list":
                self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
            elif op == "read":
                with self.fs.open_input_file(path) as f:
                    f.seek(max(0, f.size() - _PROBE_READ_BYTES))
                    f.read()
            else:
                self.fs.get_file_info(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if "not found" not in str(exc).lower() and "no such file" not in str(exc).lower():
                raise DfsError(f"{op}({path}) failed: {exc}") from exc

    join = staticmethod(_joined)  # a path of its parts, with a slash between each two

    # -- operations --------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        self._op("exists", path)
        try:
            return self._found(self.fs.get_file_info(path))
        except OSError as exc:
            raise DfsError(f"exists({path}) failed: {exc}") from exc

    @staticmethod
    def _found(info: pafs.FileInfo) -> bool:
        return bool(info.type != pafs.FileType.NotFound)

    @staticmethod
    def _entries(infos: list[pafs.FileInfo]) -> list[FileEntry]:
        """A listing's entries (what :meth:`list_dir` returns)."""
        return [FileEntry(i.base_name, i.path, i.size or 0, i.type == pafs.FileType.Directory) for i in infos]

    def is_dir(self, path: str) -> bool:
        self._op("stat", path)
        try:
            return bool(self.fs.get_file_info(path).type == pafs.FileType.Directory)
        except OSError as exc:
            raise DfsError(f"stat({path}) failed: {exc}") from exc

    def list_dir(self, path: str) -> list[FileEntry]:
        """Lists one directory (not recursive); raises DfsNotFound when it does not exist."""
        self._op("list", path)
        return self._listing(path)

    def _listing(self, path: str) -> list[FileEntry]:
        """The storage's listing of ``path`` (:meth:`list_dir` without the count)."""
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=False))
        except FileNotFoundError as exc:
            raise DfsNotFound(f"directory {path} does not exist") from exc
        except OSError as exc:
            if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
                raise DfsNotFound(f"directory {path} does not exist") from exc
            raise DfsError(f"list({path}) failed: {exc}") from exc
        return self._entries(infos)

    def read_bytes(self, path: str) -> bytes:
        self._op("read", path)
        try:
            with self.fs.open_input_stream(path) as f:
                data: bytes = f.read()
                return data
        except FileNotFoundError as exc:
            raise DfsNotFound(f"file {path} does not exist") from exc
        except OSError as exc:
            if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
                raise DfsNotFound(f"file {path} does not exist") from exc
            raise DfsError(f"read({path}) failed: {exc}") from exc

    def write_bytes(self, path: str, data: bytes, *, atomic: bool = True) -> None:
        """Writes (overwrites) a file. ``atomic`` writes a temporary name and renames it, so a
        reader never sees half a file (object stores are atomic per object anyway)."""
        self._op("write", path)
        try:
            if atomic and isinstance(self.fs, pafs.LocalFileSystem):
                tmp = f"{path}.{uuid.uuid4().hex}.tmp"
                with self.fs.open_output_stream(tmp) as f:
                    f.write(data)
                self.fs.move(tmp, path)
            else:
                with self.fs.open_output_stream(path) as f:
                    f.write(data)
        except OSError as exc:
            raise DfsError(f"write({path}) failed: {exc}") from exc

    def create_empty(self, path: str) -> None:
        """Creates an empty marker file (Hadoop's createNewFile)."""
        self._op("create", path)
        try:
            with self.fs.open_output_stream(path):
                pass
        except OSError as exc:
            raise DfsError(f"create({path}) failed: {exc}") from exc

    def create_new(self, path: str, data: bytes) -> bool:
        """Creates ``path`` holding ``data`` only if it does not exist (Hadoop's
        ``create(path, overwrite=false)``); False when it exists. Atomic on a local file system
        (the content is written under a temporary name and hard-linked into place, so a reader
        sees the whole file or none). Object stores have no create-if-absent: there it is a check
        and a write, and two callers may both succeed (see :mod:`runtime.hudi.client.lock`)."""
        self._op("create", path)
        try:
            if isinstance(self.fs, pafs.LocalFileSystem):
                return _link_new(path, data)
            if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
                return False
            with self.fs.open_output_stream(path) as f:
                f.write(data)
            return True
        except OSError as exc:
            raise DfsError(f"create({path}) failed: {exc}") from exc

    def modified(self, path: str) -> float:
        """When ``path`` was last written, seconds since the epoch, by the storage's clock
        (Hadoop's ``FileStatus.getModificationTime``)."""
        self._op("stat", path)
        try:
            info = self.fs.get_file_info(path)
        except OSError as exc:
            raise DfsError(f"stat({path}) failed: {exc}") from exc
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            raise DfsNotFound(f"file {path} does not exist")
        return float(info.mtime.timestamp())

    def delete(self, path: str, *, recursive: bool = False, missing_ok: bool = True) -> None:
        self._op("delete", path)
        try:
            info = self.fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                if missing_ok:
                    return
                raise DfsNotFound(f"cannot delete {path}: it does not exist")
            if info.type == pafs.FileType.Directory:
                if not recursive:
                    raise DfsError(f"cannot delete directory {path} without recursive=True")
                self.fs.delete_dir(path)
            else:
                self.fs.delete_file(path)
        except DfsError:
            raise
        except OSError as exc:
            raise DfsError(f"delete({path}) failed: {exc}") from exc

    def mkdirs(self, path: str) -> None:
        self._op("mkdir", path)
        try:
            self.fs.create_dir(path, recursive=True)
        except OSError as exc:
            raise DfsError(f"mkdir({path}) failed: {exc}") from exc

    def rename(self, src: str, dst: str) -> None:
        self._op("rename", src)
        try:
            self.fs.move(src, dst)
        except OSError as exc:
            raise DfsError(f"rename({src} -> {dst}) failed: {exc}") from exc

    def write_parquet(self, path: str, table: pa.Table | KeptRows, **write_args: Any) -> int:
        """Writes a parquet file under a temporary name, then renames it into place, so a
        half-written ``*.parquet`` never exists (the reader fails on names it cannot parse).
        ``write_args`` go to ``pyarrow.parquet.write_table`` (the codec), but for
        ``key_value_metadata``: entries for the footer's key-value metadata (given to the writer,
        not the table's schema, which pyarrow would also copy into ``ARROW:schema``). Returns the size in bytes."""
        self._op("write", path)
        if not isinstance(table, pa.Table):
            table = table.to_arrow()
        if not isinstance(self.fs, pafs.LocalFileSystem):
            # object stores publish an object whole when its upload completes, and their
            # "rename" is a copy plus a delete: write in place
            try:
                _write_table(table, path, self.fs, write_args)
                return self.fs.get_file_info(path).size or 0
            except OSError as exc:
                raise DfsError(f"write_parquet({path}) failed: {exc}") from exc
        tmp = f"{path}.{uuid.uuid4().hex}.inprogress"
        try:
            _write_table(table, tmp, self.fs, write_args)
            self.fs.move(tmp, path)
            return self.fs.get_file_info(path).size or 0
        except OSError as exc:
            raise DfsError(f"write_parquet({path}) failed: {exc}") from exc

    def read_parquet(self, path: str, columns: list[str] | None = None) -> pa.Table:
        self._op("read", path)
        try:
            # one file: ParquetFile, without read_table's dataset discovery (a tenth of a small read)
            with self.fs.open_input_file(path) as f:
                return pq.ParquetFile(f).read(columns=columns)
        except FileNotFoundError as exc:
            raise DfsNotFound(f"file {path} does not exist") from exc
        except (OSError, pa.ArrowException) as exc:  # a truncated file: ArrowInvalid
            raise DfsError(f"read_parquet({path}) failed: {exc}") from exc

    def read_parquet_held(self, path: str, held: Held) -> Held:
        """A read of a parquet file whose rows the caller holds already, as they decode (it wrote
        the file): counted and opened as :meth:`read_parquet` is (a missing file fails alike),
        ``held`` returned instead of decoding the same bytes again."""
        self._op("read", path)
        try:
            with self.fs.open_input_file(path):
                return held
        except FileNotFoundError as exc:
            raise DfsNotFound(f"file {path} does not exist") from exc
        except OSError as exc:
            raise DfsError(f"read_parquet({path}) failed: {exc}") from exc

    def read_parquet_metadata(self, path: str) -> pq.FileMetaData:
        """The footer of a parquet file (row count, row groups, schema), without its data."""
        self._op("read", path)
        try:
            with self.fs.open_input_file(path) as f:
                return pq.ParquetFile(f).metadata
        except FileNotFoundError as exc:
            raise DfsNotFound(f"file {path} does not exist") from exc
        except (OSError, pa.ArrowException) as exc:  # a truncated footer: ArrowInvalid
            raise DfsError(f"read_parquet_metadata({path}) failed: {exc}") from exc


def _link_new(path: str, data: bytes) -> bool:
    """``data`` at ``path`` unless it exists: written aside, then hard-linked (atomic, fails if present)."""
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def open_dfs(uri_or_path: str, *, role: str = DRIVER, counters: DfsCounters | None = None) -> tuple[Dfs, str]:
    """Opens the file system behind a path or URI (``/tmp/t``, ``file:///tmp/t``,
    ``s3://bucket/t?endpoint_override=...``: see runtime.core.storage). Returns the Dfs and the path
    inside it."""
    from runtime.core.storage import StorageError, open_filesystem

    try:
        fs, path = open_filesystem(uri_or_path)
    except StorageError as exc:
        raise DfsError(str(exc)) from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise DfsError(
            f"cannot open {uri_or_path!r}: {exc}. Use a local path or a pyarrow.fs URI "
            "such as file:///abs/path or s3://bucket/prefix"
        ) from exc
    return Dfs(fs, role=role, counters=counters), path.rstrip("/")


def _write_table(table: pa.Table, where: str, fs: pafs.FileSystem, write_args: dict[str, Any]) -> None:
    args = dict(write_args)
    footer = args.pop("key_value_metadata", None)
    if not footer:
        pq.write_table(table, where, filesystem=fs, **args)
        return
    with pq.ParquetWriter(where, table.schema, filesystem=fs, **args) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(footer)
