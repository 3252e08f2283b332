"""The data plane without Spark: the workload spec, the bucket and routing rules, Java and Spark option checks."""

from __future__ import annotations

import pytest

from actors import spark as S
from runtime.core.config import JobConfig
from runtime.data import workload as W
from runtime.data.generator import bucket_of, generate
from runtime.data.workload import WorkloadSpec

# ---------------------------------------------------------------------------------------------
# Pure Python: no Ray, no Spark
# ---------------------------------------------------------------------------------------------


def test_bucket_of_is_hudis_bucket_identifier():
    for key in ["key-000000123", "", "ключ", "键🙂"]:
        for n in (1, 7, 16):
            java_list_hash = (31 + _java_hash(key)) & 0xFFFFFFFF
            assert W.bucket_of(key, n) == (java_list_hash & 0x7FFFFFFF) % n


def test_generated_records_go_to_the_bucket_of_their_key_and_the_task_owning_it():
    cfg = JobConfig(source="generator", writers=3, checkpoints=2, records=500)
    t = generate(cfg)
    buckets = t.column("_bucket").to_pylist()
    assert buckets == [bucket_of(k, cfg.num_buckets) for k in t.column("key").to_pylist()]
    assert t.column("_task").to_pylist() == [b % 3 for b in buckets]
    assert len(set(buckets)) > 3  # the keys spread over the buckets


def _java_hash(s: str) -> int:
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def test_spec_keys_and_update_ratio_are_one_number():
    assert WorkloadSpec(records=1000).num_keys == 500
    assert WorkloadSpec(records=4000, update_ratio=0.75).num_keys == 1000
    assert WorkloadSpec(records=4000, keys=1000, update_ratio=0.75).num_keys == 1000
    assert WorkloadSpec(records=10, update_ratio=0.99).num_keys == 1
    assert WorkloadSpec(records=1).num_keys == 1
    with pytest.raises(ValueError, match="contradicts"):
        WorkloadSpec(records=4000, keys=900, update_ratio=0.75)
    with pytest.raises(ValueError, match="keys"):
        WorkloadSpec(records=10, keys=11)
    with pytest.raises(ValueError, match="skew"):
        WorkloadSpec(records=10, skew="pareto")  # type: ignore[arg-type]
    assert WorkloadSpec(records=10, partitions=120).partition_names()[:2] == ["p000", "p001"]


def test_route_values_cover_every_task_once():
    for writers in range(1, 40):
        routes = W.route_values(writers)
        assert len(set(routes)) == writers
        assert [W._spark_murmur3_int(v) % writers for v in routes] == list(range(writers))


def test_java_version_parsing_and_missing_java(monkeypatch, tmp_path):
    assert S._parse_java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert S._parse_java_major('java version "1.8.0_292"') == 8
    assert S._parse_java_major('openjdk version "21" 2023-09-19') == 21
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(S.SparkStartError, match="openjdk-17-jre-headless"):
        S.check_java()


def test_spark_configs_keep_java_flags_when_user_adds_options():
    confs = S.spark_configs(
        S.SparkConfig(extra_configs={"spark.executor.extraJavaOptions": "-Dfoo=1", "spark.sql.shuffle.partitions": "8"})
    )
    for k in (
        "spark.driver.extraJavaOptions",
        "spark.executor.extraJavaOptions",
        "spark.ray.raydp_app_master.extraJavaOptions",
    ):
        assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in confs[k]
    assert confs["spark.executor.extraJavaOptions"].endswith("-Dfoo=1")
    assert confs["spark.sql.shuffle.partitions"] == "8"
