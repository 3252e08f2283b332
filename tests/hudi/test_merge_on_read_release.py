"""Merge-on-read as the modelled Hudi release runs it: a flush keeps its duplicate keys
(``write.precombine`` is off for merge-on-read), the plan operator runs a compaction one checkpoint
after the coordinator scheduled it, the ``num_commits`` trigger counts delta commits per release,
and the lab's compaction guard against pending writer instants is an option."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.hudi.log_format import AVRO_DATA_BLOCK, avro_records, read_blocks
from runtime.hudi.merge import log_records
from runtime.sim import simulate
from tests.hudi.test_merge_on_read import _records


def _log_keys(table: Path) -> Counter[str]:
    """How often each key was written to a log data block of the table."""
    keys: Counter[str] = Counter()
    for path in table.glob("p*/.*.log.*"):
        for block in read_blocks(path.read_bytes(), str(path)):
            if block.block_type == AVRO_DATA_BLOCK:
                keys.update(r["_hoodie_record_key"] for r in avro_records(block))
    return keys


def _mor_job(**changes: object) -> JobConfig:
    base = JobConfig(
        source="generator",
        writers=2,
        checkpoints=4,
        records=2_000,
        keys=200,
        table_type="merge-on-read",
        compaction_delta_commits=0,
    )
    return base.replace(**changes)


def test_a_merge_on_read_flush_keeps_duplicate_keys_in_arrival_order():
    flush = _records(["a", "b", "a", "a"], [1, 1, 3, 2])
    where = {"instant": "1", "partition": "p0", "file_id": "f", "key": "key", "precombine": "ts"}
    rows = log_records(flush, **where, partition_id=0, seqno=1)
    assert rows.column("key").to_pylist() == ["a", "b", "a", "a"]  # Hudi's append handle: the buffer as it came
    assert rows.column("_hoodie_commit_seqno").to_pylist() == ["1_0_1", "1_0_2", "1_0_3", "1_0_4"]
    deduped = log_records(flush, **where, partition_id=0, seqno=1, precombined=True)
    assert sorted(zip(deduped.column("key").to_pylist(), deduped.column("ts").to_pylist(), strict=True)) == [
        ("a", 3),
        ("b", 1),
    ]


@pytest.mark.parametrize("precombine", ["release", "true"])
def test_merge_on_read_logs_hold_every_update_by_default_and_the_reader_still_sees_each_key_once(tmp_path, precombine):
    result = simulate(_mor_job(write_precombine=precombine), workdir=str(tmp_path / "run"), seed=3, storage="disk")
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once  # the reader merges by the precombine field
    logged = _log_keys(tmp_path / "run" / "table")
    if precombine == "release":  # write.precombine is off for merge-on-read: duplicates reach the log
        assert sum(logged.values()) == 2_000 and max(logged.values()) > 1
    else:
        assert sum(logged.values()) < 2_000


def test_write_precombine_false_on_copy_on_write_is_refused_naming_the_flag():
    with pytest.raises(ConfigError, match="--write-precombine false.*--table-type merge-on-read"):
        JobConfig(write_precombine="false").validate()
