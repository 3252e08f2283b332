"""A simulated job's workload, kept for the last job: its stream, shards, expected table and schema.

A search or an exploration runs one job under many seeds and schedules, and these depend on the
job alone (:mod:`runtime.data.generator` makes them): the last job's are kept, and every run of it
shares them. Arrow tables and schemas are immutable and nothing changes the shards' lists.
"""

from __future__ import annotations

import pyarrow as pa

from runtime.core.config import JobConfig
from runtime.data import generator
from runtime.hudi.table.base_files import avro_schema_json
from runtime.lab.verify import expected_state

# The last job's stream and shards, and its expected table when the table started empty
_WORKLOAD: dict[tuple[object, ...], tuple[pa.Table, list[list[pa.Table]]]] = {}
_EXPECTED: dict[tuple[object, ...], pa.Table] = {}


def stream_and_shards(cfg: JobConfig) -> tuple[pa.Table, list[list[pa.Table]]]:
    """The job's stream and its shards (``[task][round-1]``)."""
    key = generator.workload_key(cfg)
    found = _WORKLOAD.get(key)
    if found is None:
        _WORKLOAD.clear()
        stream = generator.generate(cfg)
        found = _WORKLOAD[key] = (stream, generator.shards_by_round(cfg, stream))
    return found


def expected_table(cfg: JobConfig, stream: pa.Table, before: pa.Table | None) -> pa.Table:
    """What the table should hold after the run: the stream's latest record of each identity,
    merged into what the table held before."""
    key = (generator.workload_key(cfg), cfg.key_field, cfg.precombine_field, cfg.partition_field)
    if before is None and key in _EXPECTED:
        return _EXPECTED[key]
    state = expected_state(stream, cfg.key_field, cfg.precombine_field, cfg.partition_field, before)
    expected = state.select([generator.KEY_FIELD, generator.PARTITION_FIELD, generator.PRECOMBINE_FIELD, "payload"])
    if before is None:
        _EXPECTED.clear()
        _EXPECTED[key] = expected
    return expected


# The stream's Avro schema text by (schema, table name): a schema is hashed and compared by value,
# and the text is a function of the two.
_SCHEMA_JSON: dict[tuple[pa.Schema, str], str] = {}


def schema_json(schema: pa.Schema, table_name: str) -> str:
    found = _SCHEMA_JSON.get((schema, table_name))
    if found is None:
        _SCHEMA_JSON.clear()
        found = _SCHEMA_JSON[(schema, table_name)] = avro_schema_json(schema, table_name)
    return found
