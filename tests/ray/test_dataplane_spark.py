"""The data plane end to end: Spark on Ray (RayDP) prepares the stream, write tasks upsert it,
the official reader verifies it. Bad input fails before anything is written."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from actors.job import run_job
from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.data.errors import InputError
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import parse_properties
from runtime.lab.report import why_not_verified

pytestmark = [pytest.mark.ray, pytest.mark.spark]


def _cfg(tmp_path, **kw) -> JobConfig:
    base = dict(
        source="spark",
        protocol="message-bus",
        writers=2,
        checkpoints=3,
        records=20_000,
        bucket_flush_rows=2_000,
        table=str(tmp_path / "table"),
    )
    base.update(kw)
    return JobConfig(**base)


def test_spark_generated_upserts_verify_exactly_once(spark, tmp_path):
    result = run_job(_cfg(tmp_path, skew="zipf", keys=5_000), str(tmp_path / "out"))
    assert result.status == "finished", result.error
    assert result.source == "spark"
    assert result.figures.rows_in == 20_000
    assert [c["checkpoint"] for c in result.commits] == [1, 2, 3]
    eo = result.exactly_once
    assert eo.verified, why_not_verified(eo)
    assert eo.expected == eo.actual == 5_000  # one row per distinct key
    assert eo.commits_checked == 3 and eo.commit_problems == []
    assert "spark_start_s" in result.timing or "prepare_s" in result.timing


def _write_input(dirpath, n=3_000, keys=1_000):
    os.makedirs(dirpath, exist_ok=True)
    t = pa.table(
        {
            "id": [f"u{i % keys}" for i in range(n)],
            "region": [["eu", "us", "ap"][(i % keys) % 3] for i in range(n)],
            "seq": [i // 2 for i in range(n)],  # ties between consecutive records
            "amount": [float(i) for i in range(n)],
        }
    )
    pq.write_table(t.slice(0, n // 2), os.path.join(dirpath, "part-0.parquet"))
    pq.write_table(t.slice(n // 2), os.path.join(dirpath, "part-1.parquet"))
    return t


def test_user_input_with_its_own_fields(spark, tmp_path):
    _write_input(tmp_path / "in")
    cfg = _cfg(
        tmp_path,
        input_path=str(tmp_path / "in"),
        key_field="id",
        partition_field="region",
        precombine_field="seq",
        protocol="coordination-rpc",
    )
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    assert result.figures.rows_in == 3_000
    assert result.exactly_once.verified, result.exactly_once
    assert result.exactly_once.expected == 1_000
    props = parse_properties((tmp_path / "table" / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.recordkey.fields"] == "id"
    assert props["hoodie.table.partition.fields"] == "region"
    # coordination-rpc models Hudi 1.1, which writes table version 9 (the ordering field's new key)
    assert props["hoodie.table.version"] == "9" and props["hoodie.table.ordering.fields"] == "seq"
    assert sorted(p for p in os.listdir(tmp_path / "table") if not p.startswith(".")) == ["ap", "eu", "us"]


def _assert_nothing_written(tmp_path):
    table = tmp_path / "table"
    assert not table.exists() or not any(
        p.name.endswith((".commit", ".inflight", ".requested")) for p in (table / ".hoodie").rglob("*")
    )


@pytest.mark.parametrize(
    "case", ["missing-key", "csv-missing-key", "missing-precombine", "null-keys", "type-change", "empty"]
)
def test_bad_input_fails_before_any_instant(spark, tmp_path, case):
    d = tmp_path / "in"
    d.mkdir()
    good = pa.table({"id": ["a", "b"], "region": ["eu", "us"], "seq": [1, 2]})
    if case == "missing-key":
        pq.write_table(good.drop(["id"]), d / "x.parquet")
        needle = "--key id: no such column"
    elif case == "csv-missing-key":
        (d / "x.csv").write_text("ident,region,seq\na,eu,1\nb,us,2\n")
        needle = "--key id: no such column"
    elif case == "missing-precombine":
        pq.write_table(good.drop(["seq"]), d / "x.parquet")
        needle = "--precombine-field seq: no such column"
    elif case == "null-keys":
        pq.write_table(pa.table({"id": ["a", None], "region": ["eu", "us"], "seq": [1, 2]}), d / "x.parquet")
        needle = "null"
    elif case == "type-change":
        pq.write_table(good, d / "a.parquet")
        pq.write_table(good.set_column(2, "seq", pa.array(["1", "2"])), d / "b.parquet")
        needle = "seq"
    else:
        pq.write_table(good.slice(0, 0), d / "x.parquet")
        needle = "empty"
    cfg = _cfg(tmp_path, input_path=str(d), key_field="id", partition_field="region", precombine_field="seq")
    with pytest.raises(InputError) as info:
        run_job(cfg, None)
    assert needle in str(info.value).lower() or needle in str(info.value)
    _assert_nothing_written(tmp_path)


def test_a_table_with_other_keys_is_refused_before_spark_work(spark, tmp_path):
    dfs, base = open_dfs(str(tmp_path / "table"))
    from runtime.core.config import ConfigError
    from runtime.hudi.table.table_config import TableProps

    HudiTable.create_or_open(dfs, base, TableProps("commitlab", "other_key", "partition", "ts"))
    # the layout check names the table's field and the flag that would match it
    with pytest.raises(ConfigError, match="recordkey.fields=other_key.*--key other_key"):
        run_job(_cfg(tmp_path), None)
    _assert_nothing_written(tmp_path)


def test_a_csv_whose_keys_recur_under_several_partitions_verifies_the_same_in_run_and_verify(spark, tmp_path, capsys):
    """With a non-global (bucket) index a record is (partition path, record key): key u7 under
    "eu" and under "us" are two records. The run's check and ``commitlab verify --input`` read the
    same table and input and must agree, record for record."""
    from runtime.cli import main

    d = tmp_path / "in"
    d.mkdir()
    n, keys = 3_000, 500
    lines = ["id,region,seq,amount"] + [f"u{i % keys},{['eu', 'us', 'ap'][i % 3]},{i},{i * 0.5}" for i in range(n)]
    (d / "events.csv").write_text("\n".join(lines) + "\n")
    cfg = _cfg(tmp_path, input_path=str(d), key_field="id", partition_field="region", precombine_field="seq", records=n)
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    eo = result.exactly_once
    assert eo.verified, why_not_verified(eo)
    # 500 keys x 3 regions: 1,500 records; the key alone would say 500 and call the rest duplicates
    assert eo.expected == eo.actual == 1_500
    assert eo.duplicated == eo.mismatched == 0
    capsys.readouterr()
    code = main(
        [
            "verify",
            "--table",
            str(tmp_path / "table"),
            "--input",
            str(d),
            "--key",
            "id",
            "--partition-field",
            "region",
            "--precombine-field",
            "seq",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "1,500" in out or "1500" in out, out
    # the command found Spark running (this session's) and left it running for its owner
    from actors.spark import spark_running

    assert spark_running() and spark.range(3).count() == 3


def _versions(n_keys: int = 40) -> pd.DataFrame:
    """Three versions of each key; the note holds a line break, quotes and commas; the precombine
    values cross a digit boundary (9 < 10, though '10' < '9' as text), and the newest arrives first."""
    rows = []
    for k in range(n_keys):
        for seq in (10, 9, 8):
            note = f'key {k}\nseq {seq}, "v{seq}"' if k % 2 else f"plain {k} {seq}"
            rows.append({"id": f"u{k}", "region": ["eu", "us"][k % 2], "seq": seq, "note": note})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("writer", ["pandas", "spark"])
def test_a_csv_with_quoted_line_breaks_is_written_record_for_record(spark, tmp_path, writer):
    """The run reads the CSV as the check does (RFC 4180, multi-line records, seq a number): every
    key holds its seq-10 version and its note intact, no junk partition, and the run verifies."""
    from hudi import HudiTableBuilder

    src = _versions()
    d = tmp_path / "in"
    if writer == "pandas":
        d.mkdir()
        src.to_csv(d / "events.csv", index=False)
    else:  # Spark's writer, RFC 4180 quoting (escape '"'): one file
        spark.createDataFrame(src).coalesce(1).write.option("header", "true").option("escape", '"').csv(str(d))
    cfg = _cfg(tmp_path, input_path=str(d), key_field="id", partition_field="region", precombine_field="seq")
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    assert result.figures.rows_in == len(src)
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    table = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(tmp_path / "table")).build().read())
    got = {r["id"]: (r["seq"], r["note"]) for r in table.select(["id", "seq", "note"]).to_pylist()}
    newest = src[src.seq == 10]
    assert got == {r.id: (10, r.note) for r in newest.itertuples()}
    assert sorted(p for p in os.listdir(tmp_path / "table") if not p.startswith(".")) == ["eu", "us"]


def test_partition_values_with_a_slash_are_written_as_nested_partition_paths(spark, tmp_path):
    """Hudi's SimpleKeyGenerator (urlencode off) writes '2024/01' as the folders 2024/01; the run
    verifies and the official reader returns the value as the partition path."""
    from hudi import HudiTableBuilder

    d = tmp_path / "in"
    d.mkdir()
    months = ["2024/01", "2024/02", "2025/01"]
    src = pa.table({"id": [f"u{i % 30}" for i in range(90)], "month": [months[i % 30 % 3] for i in range(90)]})
    pq.write_table(src.append_column("seq", pa.array(range(90), pa.int64())), d / "x.parquet")
    cfg = _cfg(tmp_path, input_path=str(d), key_field="id", partition_field="month", precombine_field="seq")
    result = run_job(cfg, None)
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, why_not_verified(result.exactly_once)
    table = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(tmp_path / "table")).build().read())
    assert sorted(set(table.column("_hoodie_partition_path").to_pylist())) == months
    assert sorted(os.listdir(tmp_path / "table" / "2024")) == ["01", "02"]
