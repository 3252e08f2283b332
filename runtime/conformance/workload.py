"""The lab run's records, handed to the harness: one file per write task and round, in order.

Round k of task t is what the lab's source t emits before checkpoint barrier k
(:func:`runtime.data.generator.shards_by_round`); the harness's source t emits the same rows in the
same order and holds round k+1 back until barrier k has passed, so both writers see the same data
between the same barriers. Newline-delimited JSON keeps the Java side free of a Parquet reader.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pyarrow as pa

from runtime.core.config import JobConfig
from runtime.data.columns import BUCKET, KEY, OFFSET, PARTITION, TASK, TS
from runtime.data.generator import generate, shards_by_round

# the stream's own columns, not the table's
_INTERNAL = (OFFSET, BUCKET, TASK)

_JSON_TYPES = {
    pa.string(): "string",
    pa.large_string(): "string",
    pa.int64(): "long",
    pa.int32(): "int",
    pa.float64(): "double",
    pa.bool_(): "boolean",
}

HUDI_TABLE_TYPES = {"copy-on-write": "COPY_ON_WRITE", "merge-on-read": "MERGE_ON_READ"}


@dataclass(frozen=True)
class ExportedWorkload:
    directory: str
    rows: int
    rounds: list[list[str]]  # [task][round - 1] -> file, relative to ``directory``


def export_workload(
    cfg: JobConfig,
    directory: str,
    real_table: str,
    checkpoint_interval_ms: int,
    *,
    preload: bool = False,
    watch_stalls: bool = True,
) -> ExportedWorkload:
    """Writes ``workload.json`` and the round files the harness reads (the contract in
    ``conformance/README.md``). ``preload``: the harness's sources read every round before the
    first record goes out (a throughput run: reading the input is then outside the write).
    ``watch_stalls`` false: no thread dump every 250 ms looking for a Hudi wait that does not end
    (each dump stops every thread of the JVM at a safepoint: a throughput run turns it off)."""
    stream = generate(cfg)
    data = stream.drop_columns([c for c in _INTERNAL if c in stream.column_names])
    schema = [{"name": f.name, "type": _json_type(f)} for f in data.schema]
    rounds: list[list[str]] = []
    for task, parts in enumerate(shards_by_round(cfg, stream)):
        os.makedirs(os.path.join(directory, f"task-{task}"), exist_ok=True)
        rounds.append([])
        for k, part in enumerate(parts, start=1):
            rel = f"task-{task}/round-{k}.jsonl"
            _write_jsonl(os.path.join(directory, rel), part.drop_columns(list(_INTERNAL)))
            rounds[task].append(rel)
    doc = {
        "table_path": os.path.abspath(real_table),
        "table_name": cfg.table_name,
        "table_type": HUDI_TABLE_TYPES[cfg.table_type],
        "writers": cfg.writers,
        "checkpoints": cfg.checkpoints,
        "checkpoint_interval_ms": checkpoint_interval_ms,
        "num_buckets": cfg.num_buckets,
        "record_key": KEY,
        "precombine": TS,
        "partition_field": PARTITION,
        "schema": schema,
        "hudi_options": {},
        "rounds": rounds,
        "preload_rounds": preload,
        "watch_stalls": watch_stalls,
    }
    with open(os.path.join(directory, "workload.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return ExportedWorkload(directory, data.num_rows, rounds)


def _json_type(field: pa.Field) -> str:
    if field.type not in _JSON_TYPES:
        raise ValueError(f"column {field.name!r} of type {field.type} has no type the harness reads")
    return _JSON_TYPES[field.type]


def _write_jsonl(path: str, table: pa.Table) -> None:
    with open(path, "w") as f:
        for row in table.to_pylist():
            f.write(json.dumps(row, separators=(",", ":")))
            f.write("\n")
