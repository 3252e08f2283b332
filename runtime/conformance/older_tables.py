"""Reading what Hudi 0.10 to 0.13 write: table versions 3 and 5, which the official reader (hudi-rs,
versions 6, 8 and 9) and the lab's table model refuse. Only copy-on-write: a file group's latest
base file written by a completed commit is its whole content (layout 1: ``<file id>_<write
token>_<instant>.parquet``, completed commits as ``.hoodie/<instant>.commit``). A merge-on-read
table of these versions is not read here: its outcome is the job's alone.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq


class UnreadableTable(ValueError):
    """The table is of a kind this reader does not read."""


def copy_on_write_snapshot(table_path: str) -> pa.Table:
    """The latest committed base file of every file group, read with pyarrow."""
    hoodie = os.path.join(table_path, ".hoodie")
    if os.path.isdir(os.path.join(hoodie, "timeline")):
        raise UnreadableTable(f"{table_path}: a layout-2 timeline (table version 8 or 9): use the official reader")
    names = os.listdir(hoodie)
    if any(n.endswith(".deltacommit") for n in names):
        raise UnreadableTable(f"{table_path}: merge-on-read, whose log files this reader does not merge")
    committed = {n.split(".")[0] for n in names if n.endswith(".commit")}
    latest: dict[str, tuple[str, str]] = {}  # file id -> (instant, path)
    for folder, dirs, files in os.walk(table_path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if not f.endswith(".parquet"):
                continue
            file_id, _, rest = f.partition("_")
            instant = rest.rsplit("_", 1)[-1].split(".")[0]
            if instant in committed and (file_id not in latest or instant > latest[file_id][0]):
                latest[file_id] = (instant, os.path.join(folder, f))
    parts = [pq.read_table(path) for _, path in sorted(latest.values())]
    return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})
