"""The input stream: generated or read in Spark, assigned to file groups, handed to Ray by shard.

Spark (RayDP) does the heavy, columnar work; the write path only ever sees per-task Arrow tables
in Ray's object store. The pipeline is::

    df = generate_stream(spark, WorkloadSpec(records=1_000_000))     # or read_input(spark, path, ...)
    df = prepare_stream(df, "key", num_buckets=16, writers=4)        # + _bucket, _task; routed
    shards = shards_to_ray(df, writers=4)                            # list[StreamShard], one per task
    # in a source actor:  for batch in shard.iter_batches(4096): ...

Stream columns: the data columns (generated: ``key``, ``partition``, ``ts``, ``payload``) plus
``_offset`` (int64, 0..n-1, the stream position, unique), and after :func:`prepare_stream`
``_bucket`` and ``_task`` (int32).

The bucket index is a CONTRACT shared with the generator (:func:`runtime.data.generator.bucket_of`)::

    bucket = (List.hashCode([key]) & Integer.MAX_VALUE) % num_buckets   # Hudi's BucketIdentifier (runtime.data.bucket)
    file group = (partition, bucket);   owning write task = bucket % writers
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from runtime.data.bucket import bucket_column, bucket_of  # noqa: F401 - the contract, re-exported
from runtime.data.columns import BUCKET, KEY, OFFSET, PARTITION, PAYLOAD, TASK, TS
from runtime.data.errors import InputError
from runtime.data.input_format import SPARK_OPTIONS, CheckedInput, check_input
from runtime.data.spark_types import NANOS_PER_MICRO, SPARK_READ_CONF

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

# Generated ``ts``: nominal event time of record i is TS_BASE_MS + i * TS_STEP_MS (ms since epoch).
TS_BASE_MS = 1_700_000_000_000
TS_STEP_MS = 1_000

DEFAULT_SPARK_TIMEOUT_S = 600.0
DEFAULT_GET_TIMEOUT_S = 120.0

T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# Bucket index: the contract
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Generated workload
# --------------------------------------------------------------------------------------------


@dataclass
class WorkloadSpec:
    """A deterministic upsert stream of ``records`` records over a key space (same seed, same stream).

    Semantics of ``keys`` and ``update_ratio`` (two views of one number):

    - ``keys`` is the number of distinct keys in the stream; every one of them appears, so there
      are exactly ``keys`` inserts (first occurrence of a key) and ``records - keys`` updates.
    - ``update_ratio`` is the fraction of records that update an already-seen key; giving it
      alone sets ``keys = records - round(records * update_ratio)`` (at least 1). Giving both is
      allowed only if they agree. Neither: ``keys = records // 2`` (update ratio 0.5).

    Inserts are spread evenly over the stream (record i is an insert iff
    ``ceil((i+1)*keys/records) > ceil(i*keys/records)``); the j-th insert introduces
    ``key-{j:09d}``. An update picks one of the keys introduced so far: uniformly, or with
    ``skew="zipf"`` by an (approximate, continuous power-law) Zipf(``zipf_s``) over the keys in
    insertion order, so the oldest keys are the hottest.

    A key lives in one partition for its whole life (``p00``.. ``p{partitions-1}``, hash of the
    key). ``payload`` is ``payload_bytes`` ASCII hex characters.

    ``ts`` (the precombine field) is the nominal event time ``TS_BASE_MS + offset * TS_STEP_MS``,
    so later versions usually win; but a ``tie_ratio`` fraction of updates carries exactly the
    nominal ts of the key's previous version (a tie: the later offset must win), and a
    ``late_ratio`` fraction carries a ts up to 10 steps *older* than the previous version's
    (a late record: precombine must keep the earlier version).
    """

    records: int
    keys: int | None = None
    update_ratio: float | None = None
    skew: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = 1.1
    partitions: int = 4
    payload_bytes: int = 32
    seed: int = 42
    late_ratio: float = 0.05
    tie_ratio: float = 0.02

    def __post_init__(self) -> None:
        if self.records < 1:
            raise ValueError(f"records must be >= 1, got {self.records}")
        if self.keys is not None and not 1 <= self.keys <= self.records:
            raise ValueError(f"keys must be in 1..records ({self.records}), got {self.keys}")
        if self.update_ratio is not None:
            if not 0.0 <= self.update_ratio < 1.0:
                raise ValueError(f"update_ratio must be in [0, 1), got {self.update_ratio}")
            implied = max(1, self.records - round(self.records * self.update_ratio))
            if self.keys is not None and self.keys != implied:
                raise ValueError(
                    f"keys={self.keys} contradicts update_ratio={self.update_ratio} (which implies "
                    f"{implied} distinct keys of {self.records} records); give only one of them"
                )
        if self.skew not in ("uniform", "zipf"):
            raise ValueError(f"skew must be 'uniform' or 'zipf', got {self.skew!r}")
        if self.zipf_s <= 0:
            raise ValueError(f"zipf_s must be > 0, got {self.zipf_s}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        if self.payload_bytes < 0:
            raise ValueError(f"payload_bytes must be >= 0, got {self.payload_bytes}")
        if not (0 <= self.late_ratio and 0 <= self.tie_ratio and self.late_ratio + self.tie_ratio <= 1):
            raise ValueError("late_ratio and tie_ratio must be >= 0 and sum to <= 1")

    @property
    def num_keys(self) -> int:
        """Distinct keys in the stream (= number of inserts)."""
        if self.keys is not None:
            return self.keys
        if self.update_ratio is not None:
            return max(1, self.records - round(self.records * self.update_ratio))
        return max(1, self.records // 2)

    @property
    def partition_width(self) -> int:
        """Digits in a partition value (``p00``.. or ``p000``..): all values sort as their numbers."""
        return max(2, len(str(self.partitions - 1)))

    def partition_names(self) -> list[str]:
        """All partition values the stream can contain, in order."""
        return [f"p{p:0{self.partition_width}d}" for p in range(self.partitions)]

    def generate(self, spark: SparkSession) -> DataFrame:
        """Same as :func:`generate_stream`."""
        return generate_stream(spark, self)


def _uniform(seed: int, salt: int, col: Column) -> Column:
    """Deterministic uniform double in [0, 1) from (seed, salt, col): 53 bits of xxhash64."""
    from pyspark.sql import functions as F

    bits = F.pmod(F.xxhash64(F.lit(seed).cast("long"), F.lit(salt), col), F.lit(1 << 53))
    return bits.cast("double") / float(1 << 53)


def _key_index(spec: WorkloadSpec) -> Column:
    """The key of record ``id``: a new key when the count of keys introduced grows at ``id``, else
    an already-seen key drawn by ``spec.skew`` (uniform, or Zipf over the key index)."""
    from pyspark.sql import functions as F

    n, k = spec.records, spec.num_keys
    seen = F.expr(f"(id * {k} + {n - 1}) div {n}")  # keys introduced before record i
    seen_next = F.expr(f"((id + 1) * {k} + {n - 1}) div {n}")
    u_key = _uniform(spec.seed, 1, F.col("id"))
    if spec.skew == "uniform":
        rank = F.floor(u_key * seen)
    else:
        s = float(spec.zipf_s)
        n1 = (seen + 1).cast("double")
        if abs(s - 1.0) < 1e-9:
            x = F.pow(n1, u_key)
        else:
            x = F.pow(1.0 + u_key * (F.pow(n1, 1.0 - s) - 1.0), 1.0 / (1.0 - s))
        rank = F.floor(x) - 1
    upd_key = F.greatest(F.lit(0), F.least(rank.cast("long"), seen - 1))
    return F.when(seen_next > seen, seen).otherwise(upd_key)


def _payload(spec: WorkloadSpec) -> Column:
    """``payload_bytes`` hex characters hashed from the seed and ``id``."""
    from pyspark.sql import functions as F

    chunks = max(1, min(4, -(-spec.payload_bytes // 16)))
    hexes = [
        F.lpad(F.hex(F.xxhash64(F.lit(spec.seed).cast("long"), F.lit(3), F.col("id"), F.lit(c))), 16, "0")
        for c in range(chunks)
    ]
    unit = F.concat(*hexes) if len(hexes) > 1 else hexes[0]
    reps = max(1, -(-spec.payload_bytes // (16 * chunks)))
    return F.substring(F.repeat(unit, reps), 1, spec.payload_bytes) if spec.payload_bytes else F.lit("")


def generate_stream(spark: SparkSession, spec: WorkloadSpec) -> DataFrame:
    """The stream of ``spec`` as a DataFrame ``key, partition, ts, payload, _offset`` (row order unspecified).

    Built from ``spark.range`` and hash expressions only (nothing random, nothing collected), so
    it is reproducible bit for bit; ``ts`` needs the previous version of each key, one shuffle.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    n = spec.records
    i = F.col("id")
    width = spec.partition_width
    part = F.pmod(F.xxhash64(F.lit(spec.seed).cast("long"), F.lit(2), F.col("_kidx")), F.lit(spec.partitions))
    base = spark.range(0, n, numPartitions=max(1, spark.sparkContext.defaultParallelism)).select(
        i.alias(OFFSET),
        _key_index(spec).alias("_kidx"),
        _payload(spec).alias(PAYLOAD),
        _uniform(spec.seed, 4, i).alias("_u_ts"),
        _uniform(spec.seed, 5, i).alias("_u_lag"),
    )

    prev = F.lag(F.col(OFFSET)).over(Window.partitionBy("_kidx").orderBy(OFFSET))
    nominal: Callable[[Column], Column] = lambda c: F.lit(TS_BASE_MS) + c * F.lit(TS_STEP_MS)  # noqa: E731
    late = nominal(F.col("_prev")) - 1 - F.floor(F.col("_u_lag") * (10 * TS_STEP_MS)).cast("long")
    ts = (
        F.when(F.col("_prev").isNull(), nominal(F.col(OFFSET)))
        .when(F.col("_u_ts") < spec.tie_ratio, nominal(F.col("_prev")))
        .when(F.col("_u_ts") < spec.tie_ratio + spec.late_ratio, late)
        .otherwise(nominal(F.col(OFFSET)))
    )
    return base.withColumn("_prev", prev).select(
        F.format_string("key-%09d", F.col("_kidx")).alias(KEY),
        F.format_string(f"p%0{width}d", part).alias(PARTITION),
        ts.cast("long").alias(TS),
        F.col(PAYLOAD),
        F.col(OFFSET).cast("long").alias(OFFSET),
    )


# --------------------------------------------------------------------------------------------
# User input
# --------------------------------------------------------------------------------------------

_FILE = "_cl_file"
_ROW = "_cl_row"
_PID = "_cl_pid"


def _run_bounded(spark: SparkSession, what: str, timeout_s: float, fn: Callable[[], T]) -> T:
    """Run a blocking Spark action in a thread under its own job group; on timeout cancel the
    group and raise TimeoutError saying what was waited for."""
    from py4j.protocol import Py4JError

    sc = spark.sparkContext
    group = f"commitlab-{uuid.uuid4().hex[:8]}"
    values: list[T] = []  # fn's result, or the error it raised: set by the thread
    errors: list[BaseException] = []

    def body() -> None:
        try:
            sc.setJobGroup(group, what, interruptOnCancel=True)
            values.append(fn())
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)
        finally:
            try:
                sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            except (Py4JError, OSError) as exc:  # the JVM went away: the job's own outcome is what matters
                log.warning("%s: could not clear Spark job group %s: %s", what, group, exc)

    t = threading.Thread(target=body, name=f"spark-{what[:20]}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        sc.cancelJobGroup(group)
        t.join(10.0)
        raise TimeoutError(f"Spark did not finish '{what}' within {timeout_s:g} s; cancelled job group {group}")
    if errors:
        raise errors[0]
    return values[0]


def read_input(
    spark: SparkSession,
    path: str,
    key: str,
    partition_field: str,
    precombine_field: str,
    fmt: str | None = None,
    *,
    timeout_s: float = DEFAULT_SPARK_TIMEOUT_S,
    checked: CheckedInput | None = None,
) -> DataFrame:
    """Read a user's parquet / CSV / JSON Lines input as a stream, as :mod:`runtime.data.input_format`
    reads every format (RFC 4180 CSV with multi-line records; the schema its check inferred).

    Returns the input columns (``key`` and ``partition_field`` cast to string: Hudi record keys
    and partition paths are strings) plus ``_offset`` = 0..n-1 in stream order, which is: files
    in lexicographic path order (a directory is read recursively, names starting with ``.`` or
    ``_`` are skipped, directory names do NOT become columns), rows in file order.

    Everything is validated before anything is written; :class:`InputError` names the problem
    and the fix for: path not found, unsupported/mixed format, malformed JSON, a missing
    key/partition/precombine column, a column whose type differs between files (or a changed
    CSV header), a reserved column (``_offset``, ``_bucket``, ``_task``), empty input, null keys,
    null precombine values, and partition values that are not a partition path (null, empty, with
    ``\\``, an empty segment or a segment starting with ``.``; ``2024/01`` is a nested path).
    Validation costs one Spark pass (after :func:`~runtime.data.input_format.check_input`: one pass
    per CSV/JSON file, parquet's footers). The returned DataFrame is lazy: every action re-reads
    the files (cache it to reuse it).
    """
    from pyspark.sql import functions as F

    required = {"key": key, "partition": partition_field, "precombine": precombine_field}
    if checked is None:  # ``checked``: this input's check, already made before Spark started
        checked = check_input(path, fmt, key, partition_field, precombine_field)
    files = checked.files
    raw = _read_files(spark, checked)

    data_cols = list(raw.columns)
    src = raw.select(
        *[_as_written(c, checked, (key, partition_field)).alias(c) for c in data_cols],
        F.input_file_name().alias(_FILE),
        F.monotonically_increasing_id().alias(_ROW),
    )
    src = src.withColumn(_PID, F.shiftright(F.col(_ROW), 33))
    rows = _run_bounded(spark, f"validate input {path}", timeout_s, _row_stats(src, required).collect)
    rows.sort(key=lambda r: (r[_FILE], r["row0"]))
    total = sum(r["n"] for r in rows)
    if total == 0:
        raise InputError(f"--input {path}: empty ({len(files)} file(s), 0 rows); fix: point --input to non-empty data")
    deltas, first_bad = _offset_deltas(rows)
    _raise_bad_values(first_bad, total, required)
    out = _with_offsets(spark, src, deltas, data_cols)
    log.info("read_input %s: %d rows from %d %s file(s)", path, total, len(files), checked.fmt)
    return out


def _as_written(col: str, checked: CheckedInput, as_strings: tuple[str, ...]) -> Column:
    """A column of the input as the table gets it: a key or partition column as a string (Hudi's
    record keys and partition paths are strings); a parquet nanosecond timestamp, read as its
    nanoseconds, in microseconds (:mod:`runtime.data.spark_types`); a column the table holds as
    another type cast to it (:attr:`CheckedInput.casts`, the pre-check found every value exact)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    column = F.col(col)
    if col in as_strings:
        return column.cast("string")
    if col in checked.nanos:
        column = F.timestamp_micros(F.expr(f"`{col}` div {NANOS_PER_MICRO}"))
    casts = dict(checked.casts)
    return column.cast(from_arrow_type(casts[col])) if col in casts else column


def _read_files(spark: SparkSession, checked: CheckedInput) -> DataFrame:
    """The checked input in Spark, with the format's options (:data:`SPARK_OPTIONS`); a CSV or JSON file
    with the schema the check inferred, never Spark's own inference."""
    options = SPARK_OPTIONS[checked.fmt]
    if checked.fmt == "parquet":
        for name, value in SPARK_READ_CONF.items():
            spark.conf.set(name, value)
        if checked.nanos:  # else Spark refuses TIMESTAMP(NANOS): read as the nanoseconds, see _as_written
            spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
        return spark.read.options(**options).parquet(*checked.files)
    from pyspark.sql.pandas.types import from_arrow_schema

    reader = spark.read.options(**options).schema(from_arrow_schema(checked.schema))
    return reader.csv(checked.files) if checked.fmt == "csv" else reader.json(checked.files)


def _row_stats(src: DataFrame, required: dict[str, str]) -> DataFrame:
    """Per (file, Spark partition): rows, first row id, and the count and first row of null keys,
    bad partition values (with the first one) and null precombine values."""
    from pyspark.sql import functions as F

    part = F.col(required["partition"])
    # a '/' nests the partition path (SimpleKeyGenerator, urlencode off): each segment must be a name
    nested_bad = part.startswith("/") | part.endswith("/") | part.contains("//") | part.contains("/.")
    part_bad = part.isNull() | (part == "") | part.contains("\\") | part.startswith(".") | nested_bad
    key_null = F.col(required["key"]).isNull()
    pc_null = F.col(required["precombine"]).isNull()
    if src.schema[required["precombine"]].dataType.typeName() in ("float", "double"):  # NaN has no order either
        pc_null = pc_null | F.isnan(F.col(required["precombine"]))
    return src.groupBy(_FILE, _PID).agg(
        F.count(F.lit(1)).alias("n"),
        F.min(_ROW).alias("row0"),
        F.sum(key_null.cast("long")).alias("key_nulls"),
        F.min(F.when(key_null, F.col(_ROW))).alias("key_null_row"),
        F.sum(part_bad.cast("long")).alias("part_bad"),
        F.min(F.when(part_bad, F.col(_ROW))).alias("part_bad_row"),
        F.min_by(part, F.when(part_bad, F.col(_ROW))).alias("part_bad_value"),
        F.sum(pc_null.cast("long")).alias("pc_nulls"),
        F.min(F.when(pc_null, F.col(_ROW))).alias("pc_null_row"),
    )


def _offset_deltas(
    rows: list[Any],
) -> tuple[list[tuple[str, int, int]], dict[str, tuple[int, int, Any, str]]]:
    """From the per-(file, partition) stats in stream order: what turns each row id into its
    ``_offset`` (file, partition, delta), and the first bad value of each kind with its count."""
    base, deltas = 0, []
    first_bad: dict[str, tuple[int, int, Any, str]] = {}  # what -> (count, data row in its file, value, file)
    starts: dict[str, int] = {}  # each file's first offset
    for r in rows:
        delta = base - r["row0"]
        start = starts.setdefault(r[_FILE], base)
        deltas.append((r[_FILE], r[_PID], delta))
        for what, cnt, row, val in (
            ("key", r["key_nulls"], r["key_null_row"], None),
            ("part", r["part_bad"], r["part_bad_row"], r["part_bad_value"]),
            ("pc", r["pc_nulls"], r["pc_null_row"], None),
        ):
            if cnt:
                c0, off0, v0, f0 = first_bad.get(what, (0, -1, None, ""))
                if off0 < 0:
                    off0, v0, f0 = row + delta - start + 1, val, r[_FILE]
                first_bad[what] = (c0 + cnt, off0, v0, f0)
        base += r["n"]
    return deltas, first_bad


def _raise_bad_values(first_bad: dict[str, tuple[int, int, Any, str]], total: int, required: dict[str, str]) -> None:
    if "key" in first_bad:
        cnt, off, _, f = first_bad["key"]
        raise InputError(
            f"--key {required['key']}: the record key is null in {cnt} of {total} rows (first: {f!r} data row "
            f"{off:,}); fix: drop or fill those rows (Hudi needs a record key)"
        )
    if "pc" in first_bad:
        cnt, off, _, f = first_bad["pc"]
        raise InputError(
            f"--precombine-field {required['precombine']}: the ordering value is null or NaN in {cnt} of {total} rows "
            f"(first: {f!r} data row {off:,}); fix: fill them so versions can be ordered"
        )
    if "part" in first_bad:
        cnt, off, val, f = first_bad["part"]
        raise InputError(
            f"--partition-field {required['partition']}: {cnt} value(s) are not a partition path (first: {val!r} "
            f"in {f!r} data row {off:,}); a partition path is a directory name or names joined by '/' (Hudi writes "
            "'2024/01' as nested folders), non-null, without '\\', empty names or a name starting with '.'; "
            "fix: clean or map them"
        )


def _with_offsets(
    spark: SparkSession, src: DataFrame, deltas: list[tuple[str, int, int]], data_cols: list[str]
) -> DataFrame:
    """The data columns plus ``_offset`` = row id + its (file, partition) delta."""
    import pandas as pd
    from pyspark.sql import functions as F

    # From pandas (Arrow path): a list would need a Python worker on the executor (seconds).
    deltas_df = spark.createDataFrame(
        pd.DataFrame(deltas, columns=[_FILE, _PID, "_cl_delta"]).astype({_PID: "int64", "_cl_delta": "int64"}),
        f"{_FILE} string, {_PID} long, _cl_delta long",
    )
    return src.join(F.broadcast(deltas_df), on=[_FILE, _PID], how="inner").select(
        *[F.col(c) for c in data_cols], (F.col(_ROW) + F.col("_cl_delta")).alias(OFFSET)
    )


# --------------------------------------------------------------------------------------------
# Routing: bucket -> task -> Spark partition -> Ray shard
# --------------------------------------------------------------------------------------------


def _spark_murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (signed), the hash of ``HashPartitioning`` (seed 42)."""
    m = 0xFFFFFFFF
    k1 = ((value & m) * 0xCC9E2D51) & m
    k1 = ((k1 << 15) | (k1 >> 17)) & m
    k1 = (k1 * 0x1B873593) & m
    h1 = (seed & m) ^ k1
    h1 = ((h1 << 13) | (h1 >> 19)) & m
    h1 = (h1 * 5 + 0xE6546B64) & m
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & m
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & m
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def route_values(writers: int) -> list[int]:
    """For each task t an int whose Spark hash partition (of ``writers``) is exactly t.

    Why: ``repartition(writers, "_task")`` hashes the task id, so two tasks can share a Spark
    partition and another stays empty; repartitioning by these surrogates makes Spark partition
    t hold exactly task t, so the Spark -> Ray hand-off yields one block per task, no Ray-side split.
    """
    routes: list[int | None] = [None] * writers
    left, v = writers, 0
    while left:
        p = _spark_murmur3_int(v) % writers
        if routes[p] is None:
            routes[p] = v
            left -= 1
        v += 1
    return [int(r) for r in routes]  # type: ignore[arg-type]


def prepare_stream(df: DataFrame, key: str, num_buckets: int, writers: int) -> DataFrame:
    """Add ``_bucket`` and ``_task`` (int32) and route: Spark partition t holds exactly task t's rows,
    sorted by ``_offset`` (``writers`` partitions; an idle task gets an empty one).

    ``df`` needs ``key`` (non-null; cast to string for hashing) and ``_offset``.
    """
    from pyspark.sql import functions as F

    if num_buckets < 1 or writers < 1:
        raise ValueError(f"num_buckets and writers must be >= 1, got {num_buckets}, {writers}")
    for col in (key, OFFSET):
        if col not in df.columns:
            raise ValueError(f"prepare_stream needs column {col!r}; columns: {df.columns}")
    routes = F.array(*[F.lit(v).cast("int") for v in route_values(writers)])
    out = (
        df.withColumn(BUCKET, bucket_column(key, num_buckets))
        .withColumn(TASK, F.pmod(F.col(BUCKET), F.lit(writers)).cast("int"))
        .withColumn("_cl_route", F.element_at(routes, F.col(TASK) + 1))
        .repartition(writers, "_cl_route")
        .sortWithinPartitions(OFFSET)
        .drop("_cl_route")
    )
    return out


# --------------------------------------------------------------------------------------------
# Expected final state
# --------------------------------------------------------------------------------------------


def expected_state(df: DataFrame, key: str, precombine_field: str, partition_field: str = "") -> DataFrame:
    """The table after applying every upsert: per record the row with the largest precombine
    value, ties to the larger ``_offset`` (Hudi's ``preCombine``: the later record wins a tie).
    A record is (partition, key) when ``partition_field`` is given (a non-global index: Hudi's
    ``HoodieKey``), the key alone otherwise. Same columns as ``df``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    identity = [partition_field, key] if partition_field else [key]
    for col in (*identity, precombine_field, OFFSET):
        if col not in df.columns:
            raise ValueError(f"expected_state needs column {col!r}; columns: {df.columns}")
    w = Window.partitionBy(*identity).orderBy(F.col(precombine_field).desc_nulls_last(), F.col(OFFSET).desc())
    return df.withColumn("_cl_rank", F.row_number().over(w)).where(F.col("_cl_rank") == 1).drop("_cl_rank")
