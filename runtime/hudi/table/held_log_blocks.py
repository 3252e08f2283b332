"""The records of the log files written in this process, for a compaction here to take instead of
decoding the same bytes again.

A lab shortcut, invisible in what is written and read: a merge-on-read flush encodes its records
as a log file of one Avro data block (:mod:`runtime.hudi.table.log_writer`) and holds the file's bytes
and the records; a compaction still reads every log file (counted, opened: a missing file fails as
always) and frames its blocks, and when the file's bytes are exactly those held, its block's
records are the ones held (a block's Avro encoding is a function of its records: decoding it
gives them back, in the Arrow types of its schema, which the held table must have), taken once.

On Ray a task manager hosts write task ``i`` and compaction task ``i``
(:mod:`actors.layout`), and the plan operator deals a plan's file groups round robin in file id
order, which starts with the bucket number: with every bucket of a partition in the plan and as
many compaction tasks as write tasks, compaction task ``i`` compacts the file groups write task
``i`` writes (``bucket % writers``), whose log files its process holds.

Held within :data:`HELD_LOG_BYTES` (bytes and rows, per process; the oldest let go first): a
log file no compaction takes (one written after the last plan, one rolled back) costs memory
until then.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import pyarrow as pa

HELD_LOG_BYTES = 128 << 20


@dataclass(frozen=True)
class _Held:
    data: bytes  # the log file's bytes
    rows: pa.Table  # its one block's records, one chunk a column, as they decode

    @property
    def size(self) -> int:
        return len(self.data) + int(self.rows.get_total_buffer_size())


class HeldLogBlocks:
    """Log files' bytes and records by path; the roles of one process share one (write tasks
    hold, compaction tasks take: from their executor threads, hence the lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: OrderedDict[str, _Held] = OrderedDict()
        self._bytes = 0

    def hold(self, path: str, data: bytes, rows: pa.Table) -> None:
        """The log file written at ``path``: its bytes, one Avro data block of ``rows``."""
        held = _Held(data, _own_buffers(rows.replace_schema_metadata(None).combine_chunks()))
        with self._lock:
            self._drop(path)
            if held.size > HELD_LOG_BYTES:
                return
            while self._files and self._bytes + held.size > HELD_LOG_BYTES:
                self._drop(next(iter(self._files)))
            self._files[path] = held
            self._bytes += held.size

    def take(self, path: str, data: bytes, schema: pa.Schema) -> pa.Table | None:
        """The records of the block of the log file read at ``path`` (``data``), when this
        process wrote those very bytes there from records of ``schema``; None otherwise. Let go."""
        with self._lock:
            held = self._files.get(path)
            if held is None:
                return None
            self._drop(path)
        return held.rows if held.data == data and held.rows.schema.equals(schema) else None

    def _drop(self, path: str) -> None:
        held = self._files.pop(path, None)
        if held is not None:
            self._bytes -= held.size


def _own_buffers(rows: pa.Table) -> pa.Table:
    """``rows`` with a column that is a slice of larger buffers (a flush's records are slices of
    the batches the task received) copied into buffers of its own: held, it would keep them all."""
    columns = [
        pa.concat_arrays(column.chunks) if column.get_total_buffer_size() > 2 * column.nbytes else column
        for column in rows.columns
    ]
    return pa.Table.from_arrays(columns, schema=rows.schema)


HELD_LOG_FILES = HeldLogBlocks()  # this process's
