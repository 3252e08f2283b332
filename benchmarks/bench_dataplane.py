"""Data plane: commitlab runs (Hudi copy-on-write, merge-on-read) against Spark and pyarrow writing the same rows.

    .venv/bin/python benchmarks/bench_dataplane.py [--records 1000000] [--writers 4] [--checkpoints 10]
                                                  [--table-types copy-on-write,merge-on-read] [--runs 3]
                                                  [--parquet-compression CODEC]
                                                  [--out benchmarks/results/dataplane] [--no-precompile]

First the project's bytecode is written (``__pycache__``, as an installed package has it;
``--no-precompile`` leaves it as found): with ``PYTHONDONTWRITEBYTECODE`` set, every role process
would otherwise compile the project's sources as it starts, inside the measured start of the job's
processes. Then one process, one Ray, one Spark session:

1. Spark generates the workload commitlab would generate (same ``WorkloadSpec``, same seed) and
   prepares it (``prepare_stream``: bucket, task, routing), cached; then
   (a) ``df.write.parquet`` of that prepared DataFrame: a warm-up write, then three timed, the
       median the figure;
   (b) the same rows handed to Ray (``shards_to_ray``, the hand-off commitlab uses), assembled into
       one Arrow table in memory.
2. ``--runs`` rounds (3), each: ``pq.write_table`` of that table with the runs' codec (its wall
   time and its CPU seconds), then one ``commitlab`` run per table type (``--table-types``, in that
   order), each with ``source="spark"``, ``protocol="message-bus"`` on the same workload and a new
   table (its own prepare and hand-off in the warm Spark session, then the streaming write into a
   Hudi copy-on-write or merge-on-read table, merge-on-read compacting every
   ``compaction_delta_commits`` delta commits, then exactly-once verification by the official
   reader), while a background thread samples the RSS and the CPU seconds of every role actor's
   process with psutil (nothing is added to the runtime). A figure is the median of the rounds.

Why CPU seconds too: on a shared machine a short single-threaded write (pyarrow's, under a second)
gets one process's share of the cores while the job's six processes get six, so the ratio of wall
times moves with the machine's load; the CPU each side spent moves much less. Each round puts
pyarrow's write beside the runs, at the same load, and the per-round ratios are reported too.

Reports rows/s of each and the ratios (each table type over Spark's and pyarrow's write, in wall
time and in CPU seconds; merge-on-read over copy-on-write in rows/s, per CPU second and in bytes
written), for the run phase and for its part after the roles are up (``stream``: the run phase
less ``actors_up_s``, the roles' start). The job's processes start while Spark hands the stream
over (``actors.job``), as Spark's executors are up before its write: on two cores their start's
CPU is then paid in the hand-off, so compare end to end too; per run the timing breakdown,
the bytes its commits and compactions wrote (the run's ``data_written``) and the write
amplification (bytes written / input bytes), the base and log files written, the compactions
completed, and peak RSS per write task; writes ``<out>.json`` and ``<out>.png``. Measures and
prints; asserts nothing (exit 1 only when a run failed or was not verified).

``PYTHONPATH=<a checkout of another commit>`` runs that commit's job with this script (the
before/after figures in docs/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

COW, MOR = "copy-on-write", "merge-on-read"
SHORT = {COW: "cow", MOR: "mor"}
LABEL = {"copy-on-write": "COW", "merge-on-read": "MOR"}
COLOR = {"copy-on-write": "tab:blue", "merge-on-read": "tab:red"}
SPARK_WRITES = 3  # timed df.write.parquet runs after the warm-up; the median is the figure
LIGHT = {"copy-on-write": "lightsteelblue", "merge-on-read": "lightsalmon"}


def dir_bytes(path: str) -> tuple[int, int]:
    """(bytes, files) of the parquet files under ``path``."""
    total = files = 0
    for root, _, names in os.walk(path):
        for n in names:
            if n.endswith(".parquet"):
                total += os.path.getsize(os.path.join(root, n))
                files += 1
    return total, files


def table_files_on_disk(table: str) -> dict[str, int]:
    """What lies under a Hudi table (``.hoodie`` left out): base files (``<fileId>_<token>_<instant>
    .parquet``), log files (``.<fileId>_<baseInstant>.log.<version>_<token>``), their bytes, the file
    groups, and the bytes of each group's latest file slice (the base file and the log files of
    its latest slice instant)."""
    from runtime.hudi.formats.log_format import LogFileName
    from runtime.hudi.table.base_files import parse_base_file_name

    out = dict.fromkeys(("base_files", "log_files", "bytes", "file_groups", "latest_slice_bytes"), 0)
    slices: dict[tuple[str, str], dict[str, int]] = {}  # (directory, file id) -> slice instant -> bytes
    for root, dirs, names in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for n in names:
            base = parse_base_file_name(n)
            log = None if base else LogFileName.parse(n)
            if base is not None:
                file_id, instant, kind = base[0], base[2], "base_files"
            elif log is not None:
                file_id, instant, kind = log.file_id, log.base_instant, "log_files"
            else:
                continue
            size = os.path.getsize(os.path.join(root, n))
            out[kind] += 1
            out["bytes"] += size
            group = slices.setdefault((root, file_id), {})
            group[instant] = group.get(instant, 0) + size
    out["file_groups"] = len(slices)
    out["latest_slice_bytes"] = sum(g[max(g)] for g in slices.values())
    return out


def parse_args() -> argparse.Namespace:
    from runtime.core.job_options import PARQUET_CODECS, TABLE_TYPES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_workload_args(ap)
    ap.add_argument(
        "--table-types",
        default=",".join(TABLE_TYPES),
        help=f"comma-separated, one commitlab run each, in this order (of {', '.join(TABLE_TYPES)})",
    )
    ap.add_argument(
        "--parquet-compression",
        default=None,
        choices=PARQUET_CODECS,
        help="the runs' base-file codec and pyarrow's (default: JobConfig's, Hudi's gzip)",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=3,
        help="rounds, each pyarrow's write and one run per table type (a new table each); the median is the figure",
    )
    ap.add_argument("--out", default="benchmarks/results/dataplane", help="writes OUT.json and OUT.png")
    ap.add_argument("--tmp", default=None, help="scratch directory for the tables (default: a new temp dir)")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the written tables")
    ap.add_argument("--step-timeout", type=float, default=600.0, help="bound on each Spark/pyarrow step, s")
    ap.add_argument("--job-timeout", type=float, default=600.0, help="JobConfig.job_timeout_s of each run")
    ap.add_argument("--sample-interval", type=float, default=0.1, help="RSS sampling period, s")
    ap.add_argument(
        "--no-precompile",
        action="store_true",
        help="do not write the project's bytecode first (with PYTHONDONTWRITEBYTECODE set, every role process "
        "then compiles the project's sources as it starts)",
    )
    args = ap.parse_args()
    types = [t.strip() for t in args.table_types.split(",") if t.strip()]
    bad = [t for t in types if t not in TABLE_TYPES]
    if not types or bad or len(set(types)) != len(types):
        ap.error(f"--table-types: one or more of {', '.join(TABLE_TYPES)}, each once (got {args.table_types!r})")
    args.table_types = types
    if args.runs < 1:
        ap.error(f"--runs: at least 1 (got {args.runs})")
    return args


def job_configs(args: argparse.Namespace, scratch: str) -> dict[str, Any]:
    """One validated JobConfig per table type, each writing its own table under ``scratch``."""
    from runtime.core.config import JobConfig

    base = JobConfig(
        source="spark",
        protocol="message-bus",
        records=args.records,
        writers=args.writers,
        checkpoints=args.checkpoints,
        table=os.path.join(scratch, "hudi-table"),
        job_timeout_s=args.job_timeout,
    )
    if args.parquet_compression is not None:
        base = base.replace(parquet_compression=args.parquet_compression)
    out = {}
    for t in args.table_types:
        cfg = base.replace(table_type=t, table=os.path.join(scratch, f"hudi-{t}"))
        cfg.validate()
        out[t] = cfg
    return out


def params(args: argparse.Namespace, cfg: Any) -> dict[str, Any]:
    return {
        "records": args.records,
        "writers": args.writers,
        "checkpoints": args.checkpoints,
        "table_types": args.table_types,
        "runs": args.runs,
        "protocol": cfg.protocol,
        "source": cfg.source,
        "buckets_per_partition": cfg.num_buckets,
        "partitions": cfg.partitions,
        "payload_bytes": cfg.payload_bytes,
        "bucket_flush_rows": cfg.bucket_flush_rows,
        "checkpoint_interval_s": cfg.checkpoint_interval_s,
        "parquet_compression": cfg.parquet_compression,
        "compaction_delta_commits": cfg.compaction_delta_commits,
        "compaction_tasks": cfg.compaction_parallelism,
        "spark_executors": cfg.spark_executors,
        "spark_executor_cores": cfg.spark_executor_cores,
    }


class Steps:
    """The script's steps: a log line each (``[i/n] what``) and an overall progress bar."""

    def __init__(self, con: Any, progress: Any, names: list[str]) -> None:
        self.con, self.progress, self.names = con, progress, names
        self.bar = progress.add_task(names[0], total=len(names))
        self.i = 0

    def start(self, name: str) -> None:
        self.i = self.names.index(name)
        self.progress.update(self.bar, completed=self.i, description=name)
        self.con.log(f"[{self.i + 1}/{len(self.names)}] {name}")

    def done(self) -> None:
        self.progress.update(self.bar, completed=len(self.names), description="done")


def start_services(steps: Steps, cfg: Any, doc: dict[str, Any], precompile: bool = True) -> Any:
    """Ray, then Spark on Ray: once each for the whole script; returns the Spark session.
    ``precompile``: the project's bytecode written first (:func:`_common.compile_project`)."""
    from actors.spark import SparkConfig, start_spark

    compiled = common.compile_project() if precompile else {"project_bytecode": "as found"}
    steps.start("ray.init")
    ray_s = common.start_ray()
    doc["environment"] = {**common.environment(), **compiled}
    steps.start("start Spark on Ray")
    t = time.monotonic()
    spark = start_spark(
        SparkConfig(
            executors=cfg.spark_executors,
            executor_cores=cfg.spark_executor_cores,
            executor_memory=cfg.spark_executor_memory,
        )
    )
    spark_start_s = time.monotonic() - t
    doc["startup"] = {"ray_init_s": round(ray_s, 3), "spark_start_s": round(spark_start_s, 3)}
    steps.con.log(f"    ray.init {ray_s:.1f} s, Spark on Ray {spark_start_s:.1f} s")
    return spark


def prepare_workload(steps: Steps, spark: Any, cfg: Any, timeout_s: float) -> tuple[Any, int, float]:
    """The prepared DataFrame, as plan_spark builds it, cached and materialized: (df, rows, seconds)."""
    from runtime.data import workload as wl

    steps.start("Spark: generate + prepare (cached)")
    spec = wl.WorkloadSpec(
        records=cfg.records,
        keys=cfg.keys or None,
        update_ratio=cfg.update_ratio if cfg.update_ratio >= 0 else None,
        skew=cfg.skew,
        zipf_s=cfg.zipf_s,
        partitions=cfg.partitions,
        payload_bytes=cfg.payload_bytes,
        seed=cfg.seed,
    )
    t = time.monotonic()
    prepared = wl.prepare_stream(spec.generate(spark), cfg.key_field, cfg.num_buckets, cfg.writers).cache()
    n = int(wl._run_bounded(spark, "materialize the prepared stream", timeout_s, prepared.count))
    materialize_s = time.monotonic() - t
    steps.con.log(f"    {n:,} rows prepared and cached in {materialize_s:.1f} s")
    return prepared, n, materialize_s


def spark_write(
    steps: Steps, spark: Any, prepared: Any, n: int, materialize_s: float, scratch: str, timeout_s: float
) -> dict[str, Any]:
    """(a) Spark writes the prepared rows straight to parquet: a warm-up write, then
    ``SPARK_WRITES`` timed ones, the median the figure (one write is no stable yardstick: its
    time moved from 3.3 to 8.0 s between two days of this machine with nothing else changed)."""
    from runtime.data import workload as wl

    spark_dir = os.path.join(scratch, "spark-parquet")

    def write() -> float:
        t = time.monotonic()
        wl._run_bounded(
            spark, "df.write.parquet", timeout_s, lambda: prepared.write.mode("overwrite").parquet(spark_dir)
        )
        return time.monotonic() - t

    steps.start("Spark: df.write.parquet (warm-up)")
    warm_up_s = write()
    steps.start(f"Spark: df.write.parquet x {SPARK_WRITES}")
    writes = [write() for _ in range(SPARK_WRITES)]
    write_s = statistics.median(writes)
    size, files = dir_bytes(spark_dir)
    steps.con.log(
        f"    df.write.parquet: median {write_s:.2f} s of {', '.join(f'{w:.2f}' for w in writes)} "
        f"(warm-up {warm_up_s:.2f} s), {n / write_s:,.0f} rows/s, {files} files, {size / common.MiB:.1f} MiB"
    )
    return {
        "rows": n,
        "materialize_s": round(materialize_s, 3),
        "write_s": round(write_s, 3),
        "writes_s": [round(w, 3) for w in writes],
        "warm_up_s": round(warm_up_s, 3),
        "rows_per_s": round(n / write_s, 1),
        "rows_per_s_end_to_end": round(n / (materialize_s + write_s), 1),
        "bytes": size,
        "files": files,
    }


def pyarrow_table(steps: Steps, prepared: Any, writers: int, timeout_s: float) -> tuple[Any, dict[str, Any]]:
    """(b) the same rows in Ray's object store, then one Arrow table (written by :func:`pyarrow_write`)."""
    import pyarrow as pa

    from actors.shards import shards_to_ray

    steps.start("hand-off to Ray + one Arrow table")
    t = time.monotonic()
    shards = shards_to_ray(prepared, writers, timeout_s=timeout_s)
    handoff_s = time.monotonic() - t
    t = time.monotonic()
    table = pa.concat_tables([s.table() for s in shards if s.num_rows])
    assemble_s = time.monotonic() - t
    steps.con.log(f"    hand-off {handoff_s:.2f} s, one Arrow table of {table.num_rows:,} rows")
    return table, {
        "rows": table.num_rows,
        "handoff_s": round(handoff_s, 3),
        "assemble_s": round(assemble_s, 3),
        "table_bytes_in_memory": table.nbytes,
        "columns": table.column_names,
    }


def pyarrow_write(steps: Steps, table: Any, scratch: str, timeout_s: float, compression: str) -> dict[str, Any]:
    """One ``pq.write_table`` of the Arrow table from memory, with the lab's codec (and level), else
    pyarrow's defaults: its wall time and its CPU seconds (the writing thread's: pyarrow writes one
    file on one thread)."""
    import pyarrow.parquet as pq

    from runtime.hudi.formats.parquet_format import ParquetWriteOptions

    pa_path = os.path.join(scratch, "pyarrow.parquet")
    options = ParquetWriteOptions(compression)
    if hasattr(options, "codec_args"):
        codec_args = options.codec_args()
    else:  # a checkout from before the codec's level was set (PYTHONPATH=<it> measures it): pyarrow's level
        codec_args = {"compression": "none" if compression == "uncompressed" else compression}
    codec = codec_args["compression"]

    def write() -> float:
        cpu = time.thread_time()
        pq.write_table(table, pa_path, **codec_args)
        return time.thread_time() - cpu

    t = time.monotonic()
    cpu_s = common.bounded(write, timeout_s, "pq.write_table")
    write_s = time.monotonic() - t
    size = os.path.getsize(pa_path)
    steps.con.log(
        f"    pq.write_table ({codec}): {write_s:.2f} s ({cpu_s:.2f} s of CPU), "
        f"{table.num_rows / write_s:,.0f} rows/s, {size / common.MiB:.1f} MiB"
    )
    return {
        "rows": table.num_rows,
        "compression": codec,
        "write_s": round(write_s, 3),
        "cpu_s": round(cpu_s, 3),
        "rows_per_s": round(table.num_rows / write_s, 1),
        "rows_per_cpu_s": round(table.num_rows / cpu_s, 1) if cpu_s > 0 else None,
        "bytes": size,
    }


def run_step(table_type: str, k: int, runs: int) -> str:
    return f"round {k + 1}/{runs}: commitlab run ({table_type}, message-bus, Spark source)"


def pyarrow_step(k: int, runs: int) -> str:
    return f"round {k + 1}/{runs}: pyarrow pq.write_table"


def run_commitlab(steps: Steps, cfg: Any, scratch: str, sample_interval: float) -> dict[str, Any]:
    """One commitlab run, its write-task processes sampled from outside: its figures, memory included.
    A run that raises is recorded (its error and traceback) so the other table types still run."""
    con, progress = steps.con, steps.progress
    run_bar = progress.add_task(f"  checkpoints ({SHORT[cfg.table_type]})", total=cfg.checkpoints)
    seen: dict[str, Any] = {"completed": -1}

    def on_progress(p: dict[str, Any]) -> None:
        if p:
            progress.update(run_bar, completed=p.get("completed", 0))
            if not con.is_terminal and p.get("completed") != seen["completed"]:
                seen["completed"] = p.get("completed")
                con.log(f"    {p.get('completed')}/{p.get('total')} checkpoints completed")

    t0 = time.monotonic()
    try:
        result, memory, wall = common.run_job_sampled(
            cfg,
            os.path.join(scratch, f"commitlab-out-{cfg.table_type}"),
            interval_s=sample_interval,
            on_progress=on_progress,
        )
    except Exception as e:  # noqa: BLE001 - recorded in the JSON and printed; the other runs go on
        row = common.error_row(e, t0) | {"table_type": cfg.table_type}
        con.log(f"    [red]{cfg.table_type} run raised[/red]: {row['error']}")
        return row
    progress.update(run_bar, completed=result.figures.checkpoints.completed)
    c = commitlab_figures(result, wall, cfg.table) | {"memory": memory} | cpu_figures(result, memory)
    w = c["data_written"]
    con.log(
        f"    {c['status']}, exactly-once {'verified' if c['verified'] else 'NOT verified'}: "
        f"{c['rows_per_s_run']:,.0f} rows/s in the run phase ({_num(c['cpu_s_run'], '.2f')} s of the roles' CPU); "
        f"{w.get('bytes', 0) / common.MiB:.1f} MiB written "
        f"(write amplification {c['write_amplification']}), {c['compactions_completed']} compactions"
    )
    return c


def cpu_figures(result: JobResult, memory: dict[str, Any]) -> dict[str, Any]:
    """The CPU seconds the job's processes (job manager, coordinator, task managers) spent in the
    run phase, sampled from outside, and the rows per such second."""
    per = memory.get("run_phase_cpu_s") or {}
    cpu = round(sum(per.values()), 3) if per else None
    return {
        "cpu_s_run": cpu,
        "cpu_s_run_per_process": per,
        "rows_per_cpu_s_run": round(result.records / cpu, 1) if cpu else None,
    }


def commitlab_figures(result: JobResult, wall: float, table: str) -> dict[str, Any]:
    """A run's figures: status, verdict, rows/s, the timing breakdown, what it wrote."""
    tm = {k: v or 0.0 for k, v in result.timing.items()}
    spark_start = tm.get("spark_start_s", 0.0)
    prepare = tm.get("prepare_s", 0.0)
    expected = tm.get("expected_s", 0.0)
    actors_start = tm["setup_s"] - spark_start - prepare - expected
    collect = tm["total_s"] - tm["setup_s"] - tm["run_s"]
    verify = wall - tm["total_s"]
    e2e = prepare + actors_start + tm["run_s"]
    roles_up = tm.get("actors_up_s", 0.0)
    stream = tm["run_s"] - roles_up
    eo, fig = result.exactly_once, result.figures
    return {
        "table_type": result.config.get("table_type"),
        "status": result.status.value,
        "error": result.error,
        "verified": eo.verified if eo else None,
        "rows_in": fig.rows_in,
        "records": result.records,
        "commits": len(result.commits),
        "checkpoints_completed": fig.checkpoints.completed,
        "rows_per_s_run": result.rows_per_s,
        "rows_per_s_stream": round(result.records / stream, 1) if stream > 0 else None,
        "rows_per_s_end_to_end": round(result.records / e2e, 1) if e2e > 0 else None,
        "breakdown_s": {
            "spark_start (in the run; warm session)": round(spark_start, 3),
            "prepare + hand-off (Spark -> Ray)": round(prepare, 3),
            "expected state (Spark, for verification)": round(expected, 3),
            "actor start": round(actors_start, 3),
            "run (stream -> Hudi commits)": round(tm["run_s"], 3),
            "  of it: the roles start (actors_up_s)": round(roles_up, 3),
            "  of it: roles up, stream -> Hudi commits": round(stream, 3),
            "collect counters": round(collect, 3),
            "verification + teardown": round(verify, 3),
            "total wall": round(wall, 3),
        },
        "timing": result.timing,
        "writer_blocked_s": fig.writer_blocked_s,
        "commit_to_unblock_s": fig.commit_to_unblock_s,
        "dfs_ops_per_checkpoint": fig.dfs_ops_per_checkpoint,
        "writer_data_dfs_ops": fig.dfs_ops.get("writer.data", {}),
        **written_figures(result, table),
    }


def written_figures(result: JobResult, table: str) -> dict[str, Any]:
    """What a run wrote: its ``data_written`` record (the files its commits and compactions list,
    their bytes, against the sources' input bytes), its compactions, and the files on disk."""
    w = result.data_written
    comp = result.compactions
    return {
        "data_written": w,
        "bytes_written": w.get("bytes"),
        "input_bytes": w.get("input_bytes"),
        "write_amplification": w.get("write_amplification"),
        "base_files_written": w.get("base_files"),
        "log_files_written": w.get("log_files"),
        "compaction_base_files_written": w.get("compaction_base_files"),
        "compactions_completed": len(comp.get("completed", [])),
        "compactions_scheduled": comp.get("scheduled", 0),
        "compactions_pending": len(comp.get("pending", [])),
        "compactions_postponed": comp.get("postponed", 0),
        "compactions": comp.get("completed", []),
        "on_disk": table_files_on_disk(table),
    }


def ok_runs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The runs that produced figures (a run that raised has none)."""
    return {t: r for t, r in doc["runs"].items() if "rows_per_s_run" in r}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def ratios(doc: dict[str, Any]) -> dict[str, float | None]:
    """Each table type over Spark's and pyarrow's write; merge-on-read over copy-on-write."""
    s, p, runs = doc["spark"], doc["pyarrow"], ok_runs(doc)
    out: dict[str, float | None] = {}
    for t, c in runs.items():
        k = SHORT[t]
        out[f"{k}_run_over_spark_write"] = _ratio(c["rows_per_s_run"], s["rows_per_s"])
        out[f"{k}_run_over_pyarrow_write"] = _ratio(c["rows_per_s_run"], p["rows_per_s"])
        out[f"{k}_end_to_end_over_spark_end_to_end"] = _ratio(c["rows_per_s_end_to_end"], s["rows_per_s_end_to_end"])
        out[f"{k}_stream_over_spark_write"] = _ratio(c.get("rows_per_s_stream"), s["rows_per_s"])
        out[f"{k}_run_cpu_over_pyarrow_cpu"] = _ratio(c.get("rows_per_cpu_s_run"), p.get("rows_per_cpu_s"))
        out[f"{k}_run_over_pyarrow_write_round_median"] = _median(
            [_ratio(r["runs"][t].get("rows_per_s_run"), r["pyarrow"]["rows_per_s"]) for r in doc["rounds"]]
        )
    cow, mor = runs.get(COW), runs.get(MOR)
    if cow and mor:
        out["mor_over_cow_rows_per_s"] = _ratio(mor["rows_per_s_run"], cow["rows_per_s_run"])
        out["mor_over_cow_rows_per_s_end_to_end"] = _ratio(mor["rows_per_s_end_to_end"], cow["rows_per_s_end_to_end"])
        out["mor_over_cow_bytes_written"] = _ratio(mor["bytes_written"], cow["bytes_written"])
        out["mor_over_cow_rows_per_s_stream"] = _ratio(mor.get("rows_per_s_stream"), cow.get("rows_per_s_stream"))
        out["mor_over_cow_rows_per_cpu_s"] = _ratio(mor.get("rows_per_cpu_s_run"), cow.get("rows_per_cpu_s_run"))
        out["mor_over_cow_rows_per_s_round_median"] = _median(
            [_ratio(r["runs"][MOR].get("rows_per_s_run"), r["runs"][COW].get("rows_per_s_run")) for r in doc["rounds"]]
        )
    return out


def main() -> int:
    args = parse_args()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    con = common.console()
    scratch = args.tmp or tempfile.mkdtemp(prefix="commitlab-bench-dataplane-")
    os.makedirs(scratch, exist_ok=True)
    cfgs = job_configs(args, scratch)
    first = next(iter(cfgs.values()))
    doc: dict[str, Any] = {"benchmark": "dataplane", "params": params(args, first), "runs": {}}
    names = [
        "ray.init",
        "start Spark on Ray",
        "Spark: generate + prepare (cached)",
        "Spark: df.write.parquet (warm-up)",
        f"Spark: df.write.parquet x {SPARK_WRITES}",
        "hand-off to Ray + one Arrow table",
        *[
            name
            for k in range(args.runs)
            for name in (pyarrow_step(k, args.runs), *[run_step(t, k, args.runs) for t in cfgs])
        ],
        "write JSON and plot",
    ]
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*columns, TimeElapsedColumn(), console=con, disable=not con.is_terminal) as progress:
        steps = Steps(con, progress, names)
        spark = start_services(steps, first, doc, precompile=not args.no_precompile)
        try:
            measure(steps, spark, cfgs, args, scratch, doc)
        finally:
            from actors.spark import stop_spark

            stop_spark()
        doc["ratios"] = ratios(doc)
        doc["environment"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
        steps.start("write JSON and plot")
        common.write_json(args.out + ".json", doc)
        png = plot(doc, args.out + ".png")
        steps.done()

    print_report(con, doc)
    con.print(f"results: {args.out}.json, {png}")
    if not args.keep_tmp and not args.tmp:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        con.print(f"tables kept under {scratch}")
    import ray

    ray.shutdown()
    every = [r for rnd in doc.get("rounds", []) for r in rnd["runs"].values()]
    return 0 if all(r.get("verified") for r in every) else 1


def measure(
    steps: Steps, spark: Any, cfgs: dict[str, Any], args: argparse.Namespace, scratch: str, doc: dict[str, Any]
) -> None:
    """Spark's writes of the prepared rows, then ``--runs`` rounds of pyarrow's write and one
    commitlab run per table type (each on a new table), the same load for all in a round."""
    first = next(iter(cfgs.values()))
    prepared, n, materialize_s = prepare_workload(steps, spark, first, args.step_timeout)
    doc["spark"] = spark_write(steps, spark, prepared, n, materialize_s, scratch, args.step_timeout)
    table, handoff = pyarrow_table(steps, prepared, first.writers, args.step_timeout)
    prepared.unpersist()
    rounds: list[dict[str, Any]] = []
    for k in range(args.runs):
        steps.start(pyarrow_step(k, args.runs))
        rnd: dict[str, Any] = {
            "pyarrow": pyarrow_write(steps, table, scratch, args.step_timeout, first.parquet_compression)
        }
        rnd["runs"] = {}
        for t, cfg in cfgs.items():
            cfg_k = cfg.replace(table=f"{cfg.table}-{k + 1}")
            steps.start(run_step(t, k, args.runs))
            rnd["runs"][t] = run_commitlab(steps, cfg_k, scratch, args.sample_interval)
            if not args.keep_tmp:  # (a round's tables are not read again)
                shutil.rmtree(cfg_k.table, ignore_errors=True)
        rounds.append(rnd)
    doc["rounds"] = rounds
    doc["pyarrow"] = handoff | median_pyarrow([r["pyarrow"] for r in rounds])
    doc["runs"] = {t: median_run([r["runs"][t] for r in rounds]) for t in cfgs}


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def median_pyarrow(writes: list[dict[str, Any]]) -> dict[str, Any]:
    """pyarrow's figure over the rounds: the median wall time and the median CPU seconds."""
    rows, write_s, cpu_s = (
        writes[0]["rows"],
        statistics.median(w["write_s"] for w in writes),
        _median([w["cpu_s"] for w in writes]),
    )
    return writes[0] | {
        "write_s": round(write_s, 3),
        "writes_s": [w["write_s"] for w in writes],
        "cpu_s": cpu_s,
        "cpus_s": [w["cpu_s"] for w in writes],
        "rows_per_s": round(rows / write_s, 1),
        "rows_per_cpu_s": round(rows / cpu_s, 1) if cpu_s else None,
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A table type's figure over the rounds: the run of the median run-phase rows/s (the lower
    middle of an even count), with every run's rows/s and the median of the runs' CPU seconds."""
    good = [r for r in runs if "rows_per_s_run" in r]
    if not good:
        return runs[0]
    mid = sorted(good, key=lambda r: r["rows_per_s_run"])[(len(good) - 1) // 2]
    cpu = _median([r.get("cpu_s_run") for r in good])
    return mid | {
        "runs": len(runs),
        "runs_ok": len(good),
        "rows_per_s_run_each": [r.get("rows_per_s_run") for r in runs],
        "run_s_each": [r["timing"]["run_s"] if "timing" in r else None for r in runs],
        "cpu_s_run_each": [r.get("cpu_s_run") for r in runs],
        "cpu_s_run": cpu,
        "rows_per_cpu_s_run": round(mid["records"] / cpu, 1) if cpu else None,
        "verified_each": [r.get("verified") for r in runs],
    }


# ---- the report -------------------------------------------------------------------------------


def _mib(v: float | None) -> str:
    return "-" if v is None else f"{v / common.MiB:,.1f}"


def _num(v: float | None, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def print_report(con: Any, doc: dict[str, Any]) -> None:
    for t, r in doc["runs"].items():
        if "rows_per_s_run" not in r:
            con.print(f"[red]{t} run failed[/red]: {r.get('error')}")
    print_rounds(con, doc)
    print_throughput(con, doc)
    runs = ok_runs(doc)
    if runs:
        print_table_types(con, doc, runs)
        print_breakdown(con, doc, runs)
        print_memory(con, runs)
    print_ratios(con, doc)


def print_rounds(con: Any, doc: dict[str, Any]) -> None:
    """Each round side by side (the same load for its writes): wall and CPU seconds, the ratios."""
    from rich.table import Table

    types = list(doc["runs"])
    t = Table(title="rounds: wall s (CPU s); the medians are the figures below", title_justify="left")
    t.add_column("round")
    t.add_column("pyarrow write", justify="right")
    for tt in types:
        t.add_column(f"{LABEL[tt]} run phase", justify="right")
    for tt in types:
        t.add_column(f"{LABEL[tt]} / pyarrow rows/s", justify="right")
    if COW in types and MOR in types:
        t.add_column("MOR / COW rows/s", justify="right")
    for k, r in enumerate(doc["rounds"], start=1):
        p, runs = r["pyarrow"], r["runs"]
        cells = [str(k), f"{p['write_s']:.2f} ({_num(p['cpu_s'], '.2f')})"]
        for tt in types:
            c = runs[tt]
            cells.append(f"{c['timing']['run_s']:.2f} ({_num(c['cpu_s_run'], '.2f')})" if "timing" in c else "failed")
        cells += [_num(_ratio(runs[tt].get("rows_per_s_run"), p["rows_per_s"]), ".3f") for tt in types]
        if COW in types and MOR in types:
            cells.append(_num(_ratio(runs[MOR].get("rows_per_s_run"), runs[COW].get("rows_per_s_run")), ".3f"))
        t.add_row(*cells)
    con.print(t)


def print_throughput(con: Any, doc: dict[str, Any]) -> None:
    """Every writer's rows/s, each over Spark's write (end-to-end rows over Spark's end to end)."""
    from rich.table import Table

    s, p, prm = doc["spark"], doc["pyarrow"], doc["params"]
    t = Table(
        title=f"data plane: {prm['records']:,} records, {prm['writers']} writers, {prm['checkpoints']} checkpoints",
        title_justify="left",
    )
    for col in ("writer", "rows", "seconds", "rows/s", "rows/s over Spark's", "output MiB"):
        t.add_column(col, justify="left" if col == "writer" else "right")
    runs = ok_runs(doc)
    for tt, c in runs.items():
        t.add_row(
            f"commitlab run phase (message-bus, Hudi {LABEL[tt]})",
            f"{c['rows_in']:,}",
            f"{c['timing']['run_s']:.2f}",
            f"{c['rows_per_s_run']:,.0f}",
            _num(_ratio(c["rows_per_s_run"], s["rows_per_s"]), ".3f"),
            f"{_mib(c['bytes_written'])} written",
        )
        stream_s = c["timing"]["run_s"] - (c["timing"].get("actors_up_s") or 0.0)
        t.add_row(
            f"  of it, with the roles up (less {c['timing'].get('actors_up_s') or 0:.2f} s of the roles' start)",
            f"{c['rows_in']:,}",
            f"{stream_s:.2f}",
            _num(c.get("rows_per_s_stream")),
            _num(_ratio(c.get("rows_per_s_stream"), s["rows_per_s"]), ".3f"),
            "",
        )
    t.add_row(
        "Spark df.write.parquet (cached, prepared)",
        f"{s['rows']:,}",
        f"{s['write_s']:.2f}",
        f"{s['rows_per_s']:,.0f}",
        "1",
        _mib(s["bytes"]),
    )
    t.add_row(
        "pyarrow pq.write_table (one table in memory)",
        f"{p['rows']:,}",
        f"{p['write_s']:.2f}",
        f"{p['rows_per_s']:,.0f}",
        _num(_ratio(p["rows_per_s"], s["rows_per_s"]), ".3f"),
        _mib(p["bytes"]),
    )
    for tt, c in runs.items():
        e2e = c["rows_per_s_end_to_end"]
        t.add_row(
            f"commitlab {LABEL[tt]} end to end (prepare+start+run)",
            f"{c['records']:,}",
            _num(c["records"] / e2e if e2e else None, ".2f"),
            _num(e2e),
            "e2e/e2e " + _num(_ratio(e2e, s["rows_per_s_end_to_end"]), ".3f"),
            "",
        )
    t.add_row(
        "Spark end to end (generate+prepare+write)",
        f"{s['rows']:,}",
        f"{s['materialize_s'] + s['write_s']:.2f}",
        f"{s['rows_per_s_end_to_end']:,.0f}",
        "1",
        "",
    )
    con.print(t)


def print_table_types(con: Any, doc: dict[str, Any], runs: dict[str, dict[str, Any]]) -> None:
    """The runs side by side: verdict, rows/s, what each wrote, compactions."""
    from rich.table import Table

    t = Table(title="what each table type wrote (data_written: the files its commits and compactions list)")
    t.add_column("")
    for tt in runs:
        t.add_column(tt, justify="right")

    def row(name: str, fn: Any) -> None:
        t.add_row(name, *[fn(c) for c in runs.values()])

    row("status, exactly-once", lambda c: f"{c['status']}, {'verified' if c['verified'] else 'NOT verified'}")
    row("commits (delta commits on MOR)", lambda c: str(c["commits"]))
    row("rows/s, run phase", lambda c: _num(c["rows_per_s_run"]))
    row("rows/s, end to end", lambda c: _num(c["rows_per_s_end_to_end"]))
    row("input MiB (sources' Arrow bytes)", lambda c: _mib(c["input_bytes"]))
    row("MiB written (commits + compactions)", lambda c: _mib(c["bytes_written"]))
    row("  of which by compactions", lambda c: _mib(c["data_written"].get("compaction_bytes")))
    row("write amplification (written / input)", lambda c: _num(c["write_amplification"], ".3f"))
    row("base files written", lambda c: _num(c["base_files_written"]))
    row("log files written", lambda c: _num(c["log_files_written"]))
    row("compaction base files written", lambda c: _num(c["compaction_base_files_written"]))
    row(
        "compactions completed / scheduled / pending",
        lambda c: f"{c['compactions_completed']} / {c['compactions_scheduled']} / {c['compactions_pending']}",
    )
    row("on disk: MiB (base + log files)", lambda c: _mib(c["on_disk"]["bytes"]))
    row("on disk: latest file slices MiB", lambda c: _mib(c["on_disk"]["latest_slice_bytes"]))
    row("on disk: file groups", lambda c: str(c["on_disk"]["file_groups"]))
    row("task-manager peak RSS mean / max MiB", _peak_rss)
    con.print(t)
    con.print(f"Spark's parquet of the prepared rows (extra routing columns): {_mib(doc['spark']['bytes'])} MiB")


def _peak_rss(c: dict[str, Any]) -> str:
    m = c["memory"]
    if "task_manager_peak_rss_mean_mib" not in m:
        return "-"
    return f"{m['task_manager_peak_rss_mean_mib']:.0f} / {m['task_manager_peak_rss_max_mib']:.0f}"


def print_breakdown(con: Any, doc: dict[str, Any], runs: dict[str, dict[str, Any]]) -> None:
    from rich.table import Table

    b = Table(title="wall time of each commitlab run, s", title_justify="left")
    b.add_column("phase")
    for tt in runs:
        b.add_column(tt, justify="right")
    first = next(iter(runs.values()))
    for k in first["breakdown_s"]:
        b.add_row(k, *[f"{c['breakdown_s'][k]:.2f}" for c in runs.values()])
    st = doc["startup"]
    b.add_row("(this script, once) ray.init / Spark start", f"{st['ray_init_s']:.2f} / {st['spark_start_s']:.2f}")
    con.print(b)


def print_memory(con: Any, runs: dict[str, dict[str, Any]]) -> None:
    from rich.table import Table

    first = next(iter(runs.values()))["memory"]
    mt = Table(
        title=f"peak RSS per role process, MiB (psutil every {first['interval_s']} s)",
        title_justify="left",
    )
    mt.add_column("process")
    for tt in runs:
        mt.add_column(f"{LABEL[tt]}: first / peak / peak-shared", justify="right")
    procs = [n for n in first["peak_rss_mib"] if n.startswith(("taskmanager-", "coordinator", "job-manager"))]
    for name in procs:
        cells = []
        for c in runs.values():
            m = c["memory"]
            if name in m["peak_rss_mib"]:
                cells.append(
                    f"{m['first_rss_mib'].get(name, 0):.0f} / {m['peak_rss_mib'][name]:.0f} / "
                    f"{m['peak_private_mib'].get(name, 0):.0f}"
                )
            else:
                cells.append("-")
        mt.add_row(name, *cells)
    mt.add_row("[bold]task managers: peak mean / max[/bold]", *[_peak_rss(c) for c in runs.values()])
    con.print(mt)


def ratio_labels() -> dict[str, str]:
    """What each key of the JSON's ``ratios`` divides, as the report prints it."""
    out = {}
    for t, k in SHORT.items():
        out[f"{k}_run_over_spark_write"] = f"{LABEL[t]} run phase / Spark df.write.parquet (rows/s)"
        out[f"{k}_run_over_pyarrow_write"] = f"{LABEL[t]} run phase / pyarrow pq.write_table (rows/s)"
        out[f"{k}_end_to_end_over_spark_end_to_end"] = f"{LABEL[t]} end to end / Spark end to end (rows/s)"
        out[f"{k}_stream_over_spark_write"] = (
            f"{LABEL[t]} run phase with its roles up / Spark df.write.parquet on warm executors (rows/s)"
        )
        out[f"{k}_run_cpu_over_pyarrow_cpu"] = f"{LABEL[t]} run phase / pyarrow pq.write_table (rows per CPU second)"
        out[f"{k}_run_over_pyarrow_write_round_median"] = (
            f"{LABEL[t]} run phase / pyarrow pq.write_table in the same round, median of the rounds (rows/s)"
        )
    return out | {
        "mor_over_cow_rows_per_s": "MOR / COW, run phase (rows/s)",
        "mor_over_cow_rows_per_s_end_to_end": "MOR / COW, end to end (rows/s)",
        "mor_over_cow_bytes_written": "MOR / COW, bytes written (commits + compactions)",
        "mor_over_cow_rows_per_s_stream": "MOR / COW, run phase with the roles up (rows/s)",
        "mor_over_cow_rows_per_cpu_s": "MOR / COW, run phase (rows per CPU second of the job's processes)",
        "mor_over_cow_rows_per_s_round_median": "MOR / COW, run phase in the same round, median of the rounds (rows/s)",
    }


def print_ratios(con: Any, doc: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title="ratios", title_justify="left")
    t.add_column("ratio")
    t.add_column("value", justify="right")
    t.add_column("key in the JSON's ratios")
    for k, v in doc["ratios"].items():
        t.add_row(ratio_labels().get(k, k), _num(v, ".3f"), k)
    con.print(t)
    for tt, c in ok_runs(doc).items():
        bd = c["breakdown_s"]
        before = bd["prepare + hand-off (Spark -> Ray)"] + bd["expected state (Spark, for verification)"]
        con.print(
            f"{LABEL[tt]}: before the first write, prepare + hand-off "
            f"{bd['prepare + hand-off (Spark -> Ray)']:.1f} s, with the expected state {before:.1f} s"
        )


# ---- the plot ---------------------------------------------------------------------------------


def plot(doc: dict[str, Any], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4.8), gridspec_kw={"width_ratios": [1.5, 1, 1.1]})
    plot_rows_per_s(ax1, doc)
    plot_bytes(ax2, doc)
    plot_memory(ax3, ok_runs(doc))
    fig.suptitle(f"commitlab data plane ({doc['environment']['date'][:10]}, {doc['environment']['cpus']} cores)")
    return common.save_figure(fig, path)


def plot_rows_per_s(ax: Any, doc: dict[str, Any]) -> None:
    s, p, r, runs = doc["spark"], doc["pyarrow"], doc["ratios"], ok_runs(doc)
    names, vals, colors, notes = [], [], [], []
    for tt, c in runs.items():
        k = SHORT[tt]
        note = f"{LABEL[tt]}/Spark\n= {_num(r.get(f'{k}_run_over_spark_write'), '.3f')}"
        if k == "mor" and r.get("mor_over_cow_rows_per_s") is not None:
            note += f"\nMOR/COW\n= {r['mor_over_cow_rows_per_s']:.3f}"
        names.append(f"commitlab {LABEL[tt]}\nrun phase")
        vals.append(c["rows_per_s_run"])
        colors.append(COLOR[tt])
        notes.append(note)
    for tt, c in runs.items():
        names.append(f"commitlab {LABEL[tt]}\nend to end")
        vals.append(c["rows_per_s_end_to_end"] or 0)
        colors.append(LIGHT[tt])
        notes.append("")
    names += ["Spark\ndf.write.parquet", "pyarrow\npq.write_table"]
    vals += [s["rows_per_s"], p["rows_per_s"]]
    colors += ["tab:orange", "tab:green"]
    notes += ["", ""]
    bars = ax.bar(names, vals, color=colors)
    ax.set_yscale("log")
    ax.set_ylabel("rows/s (log)")
    for b, v, note in zip(bars, vals, notes, strict=True):
        text = f"{v:,.0f}" + (f"\n{note}" if note else "")
        ax.text(b.get_x() + b.get_width() / 2, v * 1.08, text, ha="center", va="bottom", fontsize=7)
    positive = [v for v in vals if v > 0]
    ax.set_ylim(min(positive) / 3, max(positive) * 20)
    ax.tick_params(axis="x", labelsize=7)
    prm = doc["params"]
    ax.set_title(f"{prm['records']:,} rows, {prm['writers']} writers, {prm['checkpoints']} checkpoints", fontsize=10)


def plot_bytes(ax: Any, doc: dict[str, Any]) -> None:
    """Bytes written: Spark's parquet, then each run's commits and compactions, over its input bytes."""
    runs = ok_runs(doc)
    names = ["Spark\nparquet"] + [LABEL[tt] for tt in runs]
    commits = [doc["spark"]["bytes"] / common.MiB]
    compactions = [0.0]
    for c in runs.values():
        w = c["data_written"]
        compactions.append(w.get("compaction_bytes", 0) / common.MiB)
        commits.append(w.get("bytes", 0) / common.MiB - compactions[-1])
    colors = ["tab:orange"] + [COLOR[tt] for tt in runs]
    ax.bar(names, commits, color=colors)  # Spark's files; a run's commits: base files (COW), log files (MOR)
    ax.bar(names, compactions, bottom=commits, color="tab:purple", label="compactions (new base files)")
    ax.text(0, commits[0] * 1.02, f"{commits[0]:,.1f} MiB", ha="center", va="bottom", fontsize=8)
    for i, c in enumerate(runs.values(), start=1):
        total = commits[i] + compactions[i]
        label = f"{total:,.1f} MiB\n(compactions {compactions[i]:,.1f})\namp. {_num(c['write_amplification'], '.2f')}"
        ax.text(i, total * 1.02, label, ha="center", va="bottom", fontsize=8)
    inputs = [c["input_bytes"] for c in runs.values() if c["input_bytes"]]
    if inputs:
        ax.axhline(
            inputs[0] / common.MiB, color="grey", linestyle="--", linewidth=1, label="input (sources' Arrow bytes)"
        )
    r = doc["ratios"].get("mor_over_cow_bytes_written")
    ax.set_title("MiB written" + (f" (MOR/COW = {r:.3f})" if r is not None else ""), fontsize=10)
    ax.set_ylabel("MiB")
    ax.set_ylim(0, max(a + b for a, b in zip(commits, compactions, strict=True)) * 1.4)
    ax.legend(fontsize=7, loc="upper left")


def plot_memory(ax: Any, runs: dict[str, dict[str, Any]]) -> None:
    """Peak RSS (and peak RSS minus shared) of each task manager, one pair of bars per table type."""
    tms = sorted({n for c in runs.values() for n in c["memory"].get("task_manager_peak_rss_mib", {})})
    tms.sort(key=lambda n: int(n.rpartition("-")[2]) if n.rpartition("-")[2].isdigit() else -1)
    width = 0.8 / max(1, 2 * len(runs))
    peaks: list[float] = []
    for j, (tt, c) in enumerate(runs.items()):
        m = c["memory"]
        peak = [m.get("task_manager_peak_rss_mib", {}).get(n, 0.0) for n in tms]
        priv = [m["peak_private_mib"].get(n, 0.0) for n in tms]
        peaks += peak
        x0 = -0.4 + width * (2 * j + 0.5)
        ax.bar([i + x0 for i in range(len(tms))], peak, width=width, color=COLOR[tt], label=f"{LABEL[tt]} peak RSS")
        ax.bar(
            [i + x0 + width for i in range(len(tms))],
            priv,
            width=width,
            color=LIGHT[tt],
            label=f"{LABEL[tt]} peak RSS - shared",
        )
    ax.set_xticks(list(range(len(tms))), tms, fontsize=7)
    ax.set_ylabel("MiB")
    if peaks:
        ax.set_ylim(0, max(peaks) * 1.35)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.set_title("write-task process memory (psutil, from outside)", fontsize=10)


if __name__ == "__main__":
    sys.exit(main())
