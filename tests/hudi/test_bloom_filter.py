"""Every base file carries, in its parquet footer, the bloom filter and key range Hudi 0.14.0 writes
(``HoodieBloomFilterWriteSupport.finalizeMetadata``) and parquet-avro's schema keys, so a file's
bytes (and a commit's, and write amplification) are what Hudi pays.

Test vectors: ``tests/fixtures/hudi-0.14-base-files/`` are base files Hudi 0.14.0's Flink writer
wrote (``commitlab conformance --table-type copy-on-write``); ``jvm-vectors.json`` holds the SHA-256
of ``BloomFilterFactory.createBloomFilter(entries, fpp, max, "DYNAMIC_V0")`` after adding
``key(i)`` for ``i < n`` and ``serializeToString()``, run on the hudi-flink1.17-bundle 0.14.0 jar, with
``key(i) = "key-" + i + SUFFIXES[i % 7]`` (large key counts: the dynamic filter's extra rows and
its round-robin once full; non-ASCII keys: UTF-8 bytes and Java's signed tail bytes).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.hudi.formats.bloom_filter import (
    FOOTER_KEYS,
    MAX_KEY_KEY,
    MIN_KEY_KEY,
    BloomFilterSpec,
    KeyFilter,
    key_range,
)
from runtime.hudi.formats.parquet_format import (
    AVRO_SCHEMA_KEY,
    WRITER_MODEL_KEY,
    ParquetWriteOptions,
    writer_schema_json,
)
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import META_COLUMNS
from tests.hudi.test_table import I1, I2, commit, read_all, table  # noqa: F401  (table: a fixture)

VECTORS = Path(__file__).parents[1] / "fixtures" / "hudi-0.14-base-files"
HUDI_FILES = sorted(VECTORS.glob("*.parquet"))
SUFFIXES = ["", "-\u00e9", "-\u65e5\u672c", "-\U0001f600", "-\uffee", "-ab", "-abc"]


def _footer(path: Path | str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (pq.ParquetFile(path).metadata.metadata or {}).items()}


@pytest.mark.parametrize("path", HUDI_FILES, ids=[p.name[:12] for p in HUDI_FILES])
def test_footer_of_a_hudi_base_file_is_rebuilt_byte_for_byte_from_its_keys(path: Path) -> None:
    hudi = _footer(path)
    keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
    ours = KeyFilter.of(keys).footer()
    assert set(ours) == set(FOOTER_KEYS)
    for key in FOOTER_KEYS:
        assert ours[key] == hudi[key], key


@pytest.mark.parametrize("path", HUDI_FILES[:1])
def test_avro_schema_text_is_hudis_flink_writer_schema(path: Path) -> None:
    schema = pq.read_schema(path).remove_metadata()
    assert writer_schema_json(schema, "commitlab", "key", META_COLUMNS) == _footer(path)[AVRO_SCHEMA_KEY]


def test_filters_past_one_row_match_the_jvm() -> None:
    """Hudi's own filter over 130,007 keys (three rows' worth: two rows, then round robin), and a
    small filter that fills its three rows, give the same serialization here."""
    vectors = json.loads((VECTORS / "jvm-vectors.json").read_text())["vectors"]
    assert vectors
    for v in vectors:
        keys = pa.array([f"key-{i}{SUFFIXES[i % 7]}" for i in range(v["n"])])
        text = KeyFilter.of(keys, BloomFilterSpec(v["entries"], v["fpp"], v["max_entries"])).serialized()
        assert len(text) == v["chars"]
        assert hashlib.sha256(text.encode()).hexdigest() == v["sha256"], v


def test_key_range_orders_as_java_strings_do() -> None:
    """``String.compareTo`` compares UTF-16 units: U+FFEE sorts after a character above U+FFFF."""
    assert key_range(pa.array(["z-\U0001f600", "z-\uffee", "a"])) == ("a", "z-\uffee")
    assert key_range(pa.array([], pa.string())) is None


def test_base_files_the_lab_writes_carry_hudis_footer_and_still_read(table: HudiTable) -> None:  # noqa: F811
    commit(table, I1, [(f"k{i:03d}", "p0", i) for i in range(40)], 1)
    # the second version merges the first, read back with its footer in its schema
    stats = commit(table, I2, [(f"k{i:03d}", "p0", i) for i in range(30, 50)], 2)
    path = f"{table.base_path}/{stats[0].path}"
    footer = _footer(path)
    keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
    assert {k: footer[k] for k in FOOTER_KEYS} == KeyFilter.of(keys).footer()
    assert (footer[MIN_KEY_KEY], footer[MAX_KEY_KEY]) == ("k000", "k049")
    assert footer[WRITER_MODEL_KEY] == "avro"
    assert json.loads(footer[AVRO_SCHEMA_KEY])["fields"][0]["name"] == "_hoodie_commit_time"
    # the filter is written once: not again into pyarrow's own schema key
    assert len(footer.get("ARROW:schema", "")) < 10_000
    assert pq.ParquetFile(path).metadata.serialized_size < 500_000
    # the official reader reads the table
    assert read_all(table).num_rows == 50


def test_bloom_filter_none_leaves_the_filter_and_key_range_out(table: HudiTable) -> None:  # noqa: F811
    table.ensure_partition("p0", I1)
    data = pa.table({c: pa.array(["x"]) for c in META_COLUMNS} | {"key": ["x"], "partition": ["p0"]})
    table.write_base_file("p0/f.parquet", data, ParquetWriteOptions(bloom_filter="none"))
    footer = _footer(f"{table.base_path}/p0/f.parquet")
    assert not set(FOOTER_KEYS) & set(footer)
    assert footer[WRITER_MODEL_KEY] == "avro" and AVRO_SCHEMA_KEY in footer


def test_an_unknown_bloom_filter_choice_names_the_flag() -> None:
    with pytest.raises(ConfigError, match="--bloom-filter"):
        JobConfig(bloom_filter="sometimes").validate()


def test_a_filter_extended_by_appended_keys_is_the_filter_of_all_of_them() -> None:
    """A copy-on-write merge keeps the old keys in order and appends new ones, so the writer
    extends the old file's filter instead of hashing every key again: the same bytes, across the
    dynamic filter's row boundaries and its round robin once full, and the same key range."""
    spec = BloomFilterSpec(50, 0.01, 120)
    keys = pa.array([f"key-{i}{SUFFIXES[i % 7]}" for i in range(260)])
    for cuts in ([0, 260], [1, 49, 50, 51, 260], [119, 120, 121, 200, 260], [30, 90, 150, 260]):
        state, start = KeyFilter.of(keys.slice(0, 0), spec), 0
        for cut in cuts:
            state, start = state.extended(keys.slice(start, cut - start)), cut
        whole = KeyFilter.of(keys, spec)
        assert state.serialized() == whole.serialized() == KeyFilter.of(keys, spec).serialized(), cuts
        assert state.bounds == whole.bounds == key_range(keys)


def test_a_writer_extends_the_filter_of_the_version_it_merges(tmp_path: Path, monkeypatch) -> None:
    """Each version's footer is the filter of its own keys; only the first version hashes keys
    it did not add (the later ones extend the filter they merged onto)."""
    from runtime.writer import file_group_writer
    from tests.writer.test_file_group_writer import T1, T2, T3, _records, _table, _writer

    monkeypatch.setattr(file_group_writer, "KEEP_FILTER_FROM_KEYS", 0)  # (large files only, by default)
    cow = _table(tmp_path / "t", "COPY_ON_WRITE")
    writer = _writer(cow)
    hashed: list[int] = []
    real = KeyFilter.extended
    monkeypatch.setattr(KeyFilter, "extended", lambda self, k: hashed.append(len(k)) or real(self, k))
    paths = []
    for instant, keys in ((T1, ["b", "a", "c"]), (T2, ["a", "d"]), (T3, ["e", "b", "f"])):
        cow.start_instant(instant)
        paths.append(writer.write("p0", 0, instant, _records(keys, int(instant[-1]))).path)
    assert hashed == [3, 1, 2]  # the keys each version added, never the old ones again
    for rel in paths:
        path = f"{cow.base_path}/{rel}"
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
        assert {k: _footer(path)[k] for k in FOOTER_KEYS} == KeyFilter.of(keys).footer()
