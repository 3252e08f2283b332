"""The data plane's input: generator, user input validation, bucket contract, Spark -> Ray shards."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from actors import spark as S
from actors.shards import shards_to_ray
from runtime.data import workload as W
from runtime.data.errors import InputError
from runtime.data.generator import bucket_of
from runtime.data.workload import WorkloadSpec

# ---------------------------------------------------------------------------------------------
# Spark (RayDP on the session's Ray)
# ---------------------------------------------------------------------------------------------


def _sdf(spark, rows, schema: str):
    """A small Spark DataFrame via pandas/Arrow (a Python list would start Python workers: slow)."""
    names = [c.strip().split()[0] for c in schema.split(",")]
    return spark.createDataFrame(pd.DataFrame(rows, columns=names), schema)


def _pdf(df) -> pd.DataFrame:
    return df.toPandas().sort_values(W.OFFSET).reset_index(drop=True)


@pytest.mark.spark
def test_bucket_column_agrees_with_python(spark):
    from pyspark.sql import functions as F

    keys = [f"key-{i:09d}" for i in range(990)] + [
        "",
        "ключ",
        "键🙂",
        "a b",
        "x" * 300,
        "0",
        "-1",
        "1.5",
        "key-000000001 ",
        "ÄÖÜ",
    ]
    df = _sdf(spark, [(k,) for k in keys], "k string")
    got = df.select("k", W.bucket_column("k", 13).alias("b")).collect()
    assert {r["k"]: r["b"] for r in got} == {k: bucket_of(k, 13) for k in keys}
    # Non-string keys hash as their string form (the runtime sees str(key)).
    ints = spark.range(0, 50).select(F.col("id").alias("k"), W.bucket_column("id", 7).alias("b")).collect()
    assert all(r["b"] == bucket_of(str(r["k"]), 7) for r in ints)


@pytest.mark.spark
def test_route_values_match_spark_hash_partitioning(spark):
    from pyspark.sql import functions as F

    for writers in (1, 2, 3, 4, 5, 8, 16):
        routes = W.route_values(writers)
        df = _sdf(spark, [(v,) for v in routes], "v int")
        got = [r[0] for r in df.select(F.pmod(F.hash("v"), F.lit(writers))).collect()]
        assert got == list(range(writers))
    df = _sdf(spark, list(enumerate(W.route_values(5))), "t int, v int")
    placed = df.repartition(5, "v").select("t", F.spark_partition_id().alias("p")).collect()
    assert all(r["t"] == r["p"] for r in placed)


@pytest.mark.spark
def test_spark_waits_are_bounded_and_cancelled(spark):
    slow = spark.range(0, 10**10).selectExpr("sum(id * id)")
    with pytest.raises(TimeoutError, match="'slow sum' within 0.3 s"):
        W._run_bounded(spark, "slow sum", 0.3, slow.collect)
    assert spark.range(3).count() == 3  # the session survives the cancellation
    assert S.start_spark() is spark  # idempotent


@pytest.fixture(scope="module")
def small_stream(spark):
    spec = WorkloadSpec(records=6000, keys=1500, partitions=5, seed=11)
    return spec, _pdf(W.generate_stream(spark, spec))


@pytest.mark.spark
def test_generator_is_deterministic(spark, small_stream):
    spec, pdf = small_stream
    again = _pdf(W.generate_stream(spark, WorkloadSpec(records=6000, keys=1500, partitions=5, seed=11)))
    pd.testing.assert_frame_equal(pdf, again)
    other = _pdf(W.generate_stream(spark, WorkloadSpec(records=6000, keys=1500, partitions=5, seed=12)))
    assert not other["payload"].equals(pdf["payload"])


@pytest.mark.spark
def test_generator_honours_spec(spark, small_stream):
    spec, pdf = small_stream
    schema = dict(W.generate_stream(spark, spec).dtypes)
    assert schema == {"key": "string", "partition": "string", "ts": "bigint", "payload": "string", "_offset": "bigint"}
    assert len(pdf) == spec.records and pdf["_offset"].tolist() == list(range(spec.records))
    assert pdf["key"].nunique() == spec.num_keys
    first = pdf.drop_duplicates("key")
    assert len(first) == spec.num_keys  # exactly `keys` inserts, the rest are updates
    # Keys are introduced in order key-000000000, key-000000001, ... spread over the stream.
    assert first["key"].tolist() == [f"key-{j:09d}" for j in range(spec.num_keys)]
    assert first["_offset"].iloc[-1] > spec.records * 0.9
    assert (pdf.groupby("key")["partition"].nunique() == 1).all()
    assert set(pdf["partition"]) == set(spec.partition_names())
    assert (pdf["payload"].str.len() == spec.payload_bytes).all()
    # ts: usually increasing per key, but ties and late (smaller) versions exist.
    prev = pdf.groupby("key")["ts"].shift()
    upd = pdf[prev.notna()]
    up_prev = prev[prev.notna()]
    ties, late = (upd["ts"] == up_prev).mean(), (upd["ts"] < up_prev).mean()
    assert 0.005 < ties < 0.05 and 0.02 < late < 0.1, (ties, late)
    assert (upd["ts"] > up_prev).mean() > 0.85


@pytest.mark.spark
def test_zipf_skews_updates_to_hot_keys(spark):
    counts = {}
    for skew in ("uniform", "zipf"):
        pdf = W.generate_stream(spark, WorkloadSpec(records=6000, keys=600, skew=skew, seed=3)).toPandas()
        counts[skew] = pdf["key"].value_counts()
        assert pdf["key"].nunique() == 600
    assert counts["zipf"].iloc[0] > 10 * counts["uniform"].iloc[0]
    assert counts["zipf"].index[0] == "key-000000000"  # the oldest key is the hottest


@pytest.mark.spark
def test_shards_hold_exactly_their_tasks_in_offset_order(spark, ray_session, small_stream):
    import ray

    spec, pdf = small_stream
    buckets, writers = 8, 3
    prepared = W.prepare_stream(W.generate_stream(spark, spec), "key", buckets, writers)
    shards = shards_to_ray(prepared, writers)
    assert [s.task for s in shards] == list(range(writers))
    schema = shards[0].table().schema
    assert [(f.name, str(f.type)) for f in schema] == [
        ("key", "string"),
        ("partition", "string"),
        ("ts", "int64"),
        ("payload", "string"),
        ("_offset", "int64"),
        ("_bucket", "int32"),
        ("_task", "int32"),
    ]
    seen = []
    for s in shards:
        t = s.table().to_pandas()
        assert len(t) == s.num_rows > 0
        assert t["_task"].eq(s.task).all()
        assert t["_bucket"].tolist() == [bucket_of(k, buckets) for k in t["key"]]
        assert (t["_bucket"] % writers == s.task).all()
        assert t["_offset"].is_monotonic_increasing and t["_offset"].is_unique
        assert (s.first_offset, s.last_offset) == (t["_offset"].iloc[0], t["_offset"].iloc[-1])
        seen.append(t)
    union = pd.concat(seen).sort_values("_offset").reset_index(drop=True)
    assert len(union) == spec.records
    pd.testing.assert_frame_equal(union[list(pdf.columns)], pdf)

    @ray.remote(num_cpus=0)
    class Reader:
        def read(self, shard, batch_size, start=None, stop=None):
            return [
                (b.num_rows, b.column(W.OFFSET).to_pylist())
                for b in shard.iter_batches(batch_size, start_offset=start, stop_offset=stop)
            ]

        def read_dataset(self, shard, batch_size):
            return [
                b.column(W.OFFSET).to_pylist()
                for b in shard.to_dataset().iter_batches(batch_size=batch_size, batch_format="pyarrow")
            ]

    reader = Reader.remote()
    offs = seen[1]["_offset"].tolist()
    got = ray.get(reader.read.remote(shards[1], 100), timeout=60)
    assert [n for n, _ in got[:-1]] == [100] * (len(got) - 1) and 0 < got[-1][0] <= 100
    assert [o for _, os_ in got for o in os_] == offs
    lo, hi = offs[10], offs[250]
    got = ray.get(reader.read.remote(shards[1], 64, lo, hi), timeout=60)
    assert [o for _, os_ in got for o in os_] == offs[10:250]
    got = ray.get(reader.read_dataset.remote(shards[1], 128), timeout=60)
    assert [o for os_ in got for o in os_] == offs
    ray.kill(reader)


@pytest.mark.spark
def test_idle_tasks_get_empty_shards(spark, ray_session):
    spec = WorkloadSpec(records=500, seed=5)
    shards = shards_to_ray(W.prepare_stream(W.generate_stream(spark, spec), "key", 2, 4), 4)
    assert [s.num_rows > 0 for s in shards] == [True, True, False, False]
    assert sum(s.num_rows for s in shards) == 500
    assert list(shards[3].iter_batches(10)) == []
    with pytest.raises(ValueError, match="prepare_stream"):
        shards_to_ray(W.prepare_stream(W.generate_stream(spark, spec), "key", 2, 4), 3)


@pytest.mark.spark
def test_expected_state_keeps_largest_precombine_ties_to_later_offset(spark, small_stream):
    rows = [
        ("a", "p0", 5, "a0", 0),
        ("a", "p0", 7, "a1", 1),
        ("a", "p0", 6, "a2", 2),
        ("b", "p1", 3, "b0", 3),
        ("b", "p1", 3, "b1", 4),
        ("c", "p0", 1, "c0", 5),
    ]
    df = _sdf(spark, rows, "key string, partition string, ts long, payload string, _offset long")
    got = {r["key"]: r["payload"] for r in W.expected_state(df, "key", "ts").collect()}
    assert got == {"a": "a1", "b": "b1", "c": "c0"}

    spec, pdf = small_stream
    state = _pdf(W.expected_state(W.generate_stream(spark, spec), "key", "ts"))
    want = (
        pdf.sort_values(["key", "ts", "_offset"]).groupby("key").tail(1).sort_values("_offset").reset_index(drop=True)
    )
    assert len(state) == spec.num_keys
    pd.testing.assert_frame_equal(state, want)


# --- user input ------------------------------------------------------------------------------


def _parquet(path, **cols):
    pq.write_table(pa.table(cols), str(path))
    return path


@pytest.mark.spark
def test_read_input_orders_files_then_rows_and_casts_key(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    _parquet(d / "b.parquet", id=pa.array([30, 10, 20]), region=["eu", "us", "eu"], ver=[1, 1, 2])
    _parquet(d / "a.parquet", id=pa.array([2, 1]), region=["us", "us"], ver=[5, 6])
    (d / "_SUCCESS").write_text("")
    (d / ".a.parquet.crc").write_text("junk")
    df = W.read_input(spark, str(d), key="id", partition_field="region", precombine_field="ver")
    assert dict(df.dtypes)["id"] == "string" and dict(df.dtypes)["_offset"] == "bigint"
    got = [(r["_offset"], r["id"]) for r in df.orderBy("_offset").collect()]
    assert got == [(0, "2"), (1, "1"), (2, "30"), (3, "10"), (4, "20")]


@pytest.mark.spark
def test_read_input_csv_and_json(spark, tmp_path):
    (tmp_path / "x.csv").write_text("k,part,ts,v\nk1,p0,1,a\nk2,p1,2,b\nk1,p0,3,c\n")
    df = W.read_input(spark, str(tmp_path / "x.csv"), "k", "part", "ts")
    assert [r["v"] for r in df.orderBy("_offset").collect()] == ["a", "b", "c"]
    assert dict(df.dtypes)["ts"] == "bigint"  # the type the check inferred, not Spark's own inference
    j = tmp_path / "j"
    j.mkdir()
    (j / "1.jsonl").write_text("\n".join(json.dumps({"k": f"k{i}", "p": "x", "t": i}) for i in range(4)))
    (j / "2.jsonl").write_text(json.dumps({"k": "k9", "p": "y", "t": 10_000_000_000}))
    df = W.read_input(spark, str(j), "k", "p", "t")
    assert df.count() == 5 and dict(df.dtypes)["t"] == "bigint"


@pytest.mark.spark
def test_read_input_rejects_bad_input_before_writing(spark, tmp_path):
    def err(path, key="k", part="p", pc="ts", fmt=None) -> str:
        with pytest.raises(InputError) as e:
            W.read_input(spark, str(path), key, part, pc, fmt)
        return str(e.value)

    # missing column: names it and lists the available ones
    f = _parquet(tmp_path / "m.parquet", k=["a"], p=["x"], other=[1])
    msg = err(f)
    assert "--precombine-field ts: no such column" in msg and "['k', 'p', 'other']" in msg
    assert "did you mean 'K'" in err(_parquet(tmp_path / "case.parquet", K=["a"], p=["x"], ts=[1]))

    # null keys: the first, by its file and data row (the pre-check's scan, before Spark reads)
    (tmp_path / "n.csv").write_text("k,p,ts\na,x,1\n,x,2\nb,x,3\n,y,4\n")
    msg = err(tmp_path / "n.csv")
    assert "--key k: the record key is null in" in msg and "n.csv' data row 2" in msg

    # a column whose type changes between files: column, both types, both files
    d = tmp_path / "types"
    d.mkdir()
    _parquet(d / "1.parquet", k=["a"], p=["x"], ts=pa.array([1], pa.int64()))
    _parquet(d / "2.parquet", k=["b"], p=["x"], ts=["late"])
    msg = err(d)
    assert "'ts'" in msg and "int64" in msg and "string" in msg
    assert "1.parquet" in msg and "2.parquet" in msg

    # empty: a file with a schema but no rows, and a directory without data files
    assert "empty" in err(
        _parquet(
            tmp_path / "e.parquet",
            k=pa.array([], pa.string()),
            p=pa.array([], pa.string()),
            ts=pa.array([], pa.int64()),
        )
    )
    (tmp_path / "nothing").mkdir()
    assert "empty" in err(tmp_path / "nothing")

    # not found, unsupported format, mixed formats
    assert "no such file" in err(tmp_path / "missing.parquet")
    (tmp_path / "x.orc").write_text("")
    assert "pass --input-format" in err(tmp_path / "x.orc")
    assert "--input-format avro: not a supported format" in err(f, fmt="avro")

    # partition values that are not a partition path ('2024/01' is one: nested folders)
    (tmp_path / "slash.csv").write_text("k,p,ts\na,2024/01,1\nb,2024//01,2\n")
    msg = err(tmp_path / "slash.csv")
    assert "--partition-field p" in msg and "'2024//01'" in msg and "slash.csv' data row 2" in msg

    # JSON that is not one object per line
    (tmp_path / "arr.json").write_text('[{"k": "a",\n "p": "x", "ts": 1}]')
    assert "JSON Lines" in err(tmp_path / "arr.json")

    # CSV files whose headers differ (Spark would match columns by position)
    h = tmp_path / "hdr"
    h.mkdir()
    (h / "1.csv").write_text("k,p,ts\na,x,1\n")
    (h / "2.csv").write_text("p,k,ts\nx,b,2\n")
    assert "header" in err(h)

    # a reserved column
    assert "'_offset'" in err(_parquet(tmp_path / "r.parquet", k=["a"], p=["x"], ts=[1], _offset=[0]))
