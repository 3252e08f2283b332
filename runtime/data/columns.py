"""The record-column contract: the names of the stream's columns, shared by the generator, the
Spark workload, the Ray shards, the write path and the verifier.

Data columns (generated: ``key``, ``partition``, ``ts``, ``payload``), then the columns the runtime
adds: ``_offset`` (int64, the stream position, unique), ``_bucket`` and ``_task`` (int32, the file
group's bucket and the write task that owns it). The internal columns never reach a base file.
"""

from __future__ import annotations

KEY = "key"
PARTITION = "partition"
TS = "ts"  # the generated stream's precombine field
PAYLOAD = "payload"

OFFSET = "_offset"
BUCKET = "_bucket"
TASK = "_task"
INTERNAL_COLUMNS = (OFFSET, BUCKET, TASK)
