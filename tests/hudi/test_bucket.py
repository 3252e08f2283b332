"""The bucket index is Hudi's BucketIdentifier: (List.hashCode([key]) & Integer.MAX_VALUE) % n."""

from __future__ import annotations

import pytest

from runtime.core.config import JobConfig
from runtime.data import generator, workload
from runtime.hudi.table import bucket


def test_java_string_hash_matches_known_java_values():
    assert bucket.java_string_hash("") == 0
    assert bucket.java_string_hash("a") == 97
    assert bucket.java_string_hash("hello") == 99162322
    assert bucket.java_string_hash("Aa") == bucket.java_string_hash("BB") == 2112
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE in Java
    assert bucket.java_string_hash("polygenelubricants") == 0x80000000
    # a character outside the BMP hashes as its two UTF-16 code units (0xD83D, 0xDE42)
    assert bucket.java_string_hash("\U0001f642") == (31 * 0xD83D + 0xDE42)


def test_bucket_of_is_list_hash_masked_modulo():
    # List.of("a").hashCode() = 31 + 97 = 128
    assert bucket.bucket_of("a", 1000) == 128
    assert bucket.bucket_of("a", 7) == 128 % 7
    # 31 + Integer.MIN_VALUE is negative in Java; & Integer.MAX_VALUE leaves 31
    assert bucket.bucket_of("polygenelubricants", 100) == 31
    assert bucket.bucket_of("", 16) == 31 % 16


def test_not_crc32_any_more():
    import zlib

    keys = [f"key-{i:09d}" for i in range(200)]
    assert any(bucket.bucket_of(k, 16) != zlib.crc32(k.encode()) % 16 for k in keys)


def test_vectorised_equals_scalar_for_every_kind_of_key():
    keys = [f"key-{i:09d}" for i in range(300)] + ["", "ключ", "键\U0001f642", "a b", "x" * 300, "0", "ÄÖÜ", "k"]
    for n in (1, 7, 13, 16):
        assert bucket.bucket_ids(keys, n).tolist() == [bucket.bucket_of(k, n) for k in keys]


def test_one_rule_for_the_data_plane_and_the_writer():
    assert workload.bucket_of is bucket.bucket_of is generator.bucket_of
    cfg = JobConfig(source="generator", records=500, writers=2, buckets=8)
    table = generator.generate(cfg)
    assert table["_bucket"].to_pylist() == [bucket.bucket_of(k, 8) for k in table["key"].to_pylist()]


def test_bad_bucket_count_is_named():
    with pytest.raises(ValueError, match="num_buckets"):
        bucket.bucket_of("a", 0)
