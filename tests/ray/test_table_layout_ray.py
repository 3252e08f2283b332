"""A second run with another --writers on a table: the table's bucket count is used, so every key
stays in its one file group and the run verifies exactly-once (before, the count followed the
writer count: 6 buckets over the table's 4, the same key in two file groups, VIOLATED)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from runtime.core.config import JobConfig
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.table_config import BUCKETS_KEY
from runtime.sim.host import simulate

SMALL = dict(records=1_000, checkpoints=2, partitions=2, bucket_flush_rows=10_000)


def test_writers_3_on_a_table_of_4_buckets_uses_4_and_verifies(ray_session, tmp_path):
    from hudi import HudiTableBuilder

    from runtime.cli import main

    first = simulate(JobConfig(writers=2, **SMALL), seed=1, workdir=str(tmp_path / "first"))
    assert first.exactly_once.verified
    table = tmp_path / "first" / "table"
    assert f"{BUCKETS_KEY}=4\n" in (table / ".hoodie" / "hoodie.properties").read_text()
    out = tmp_path / "second"
    args = ["run", "--source", "generator", "--writers", "3", "--table", str(table), "--out", str(out), "--quiet"]
    args += ["--records", "1000", "--checkpoints", "2", "--partitions", "2", "--bucket-flush-rows", "10000"]
    rc = main(args)
    result = json.loads((out / "result.json").read_text())
    assert rc == 0, (result["error"], result["exactly_once"])
    assert result["writers"] == 3 and result["exactly_once"]["verified"] is True
    # every base file is one of the table's 4 buckets in its partition
    buckets = {
        (p.parent.name, int(parsed[0][:8]))
        for p in Path(table).glob("*/*.parquet")
        if (parsed := parse_base_file_name(p.name)) is not None
    }
    assert buckets and {b for _, b in buckets} <= set(range(4))
    rows = HudiTableBuilder.from_base_uri(str(table)).build().read(None)
    keys = Counter((r["_hoodie_partition_path"], r["_hoodie_record_key"]) for b in rows for r in b.to_pylist())
    assert max(keys.values()) == 1  # no key twice in a partition
