"""The lab's data plane against Hudi's own Flink writer: the same records, writers and checkpoints,
both table types, rows/s of the write phase, bytes and files written, write amplification.

    [PYTHONPATH=<checkout>] .venv/bin/python benchmarks/bench_vs_hudi.py [--records 1000000] [--writers 4]
                                   [--checkpoints 10] [--runs 3] [--table-types copy-on-write,merge-on-read]
                                   [--release 0.14.0] [--gc g1] [--lab-parquet-compression gzip]
                                   [--out benchmarks/results/vs-hudi.json]

Every run, in one command on one machine: for each round (``--runs``) and each table type, the lab
on Ray (``ckp-meta``, the protocol Hudi 0.11-0.15's Flink writer runs, ``source=generator``) and
Hudi's own Flink writer (the ``conformance/`` harness, the release's bundle in a Flink
MiniCluster) write the same records (``runtime.conformance.workload.export_workload``: source t's
round k on both sides) into a new table each; the order of the two alternates from round to round.
Figures are the median of the runs.

The write phase, the same span on both sides: from the first record handed to the write tasks to
the completion of the last checkpoint's commit (the last data instant's completed file on the
timeline; a merge-on-read compaction still running then is not in it).

* Hudi: the harness's ``first_emit_ms`` (the first ``collect`` of a source subtask; every source
  parses all its rounds before any emits, ``preload_rounds``, as the lab's sources hold theirs in memory)
  to its ``checkpoints_detail[-1].commit_completed_ms`` (when its counting file system saw the
  last commit's completed instant file created).
* The lab: ``result.json``'s ``timing.sources_started_at`` (when the job began starting its
  sources; their first records go out from then) to the modification time of the last data
  instant's completed file in the lab's table.

CPU seconds of the write phase, each side's cost whatever else runs on the machine: Hudi, its
JVM's CPU time (every thread: Flink, Hudi, the harness; ``getProcessCpuTime``) and its collectors'
time between the first record and the last commit, recorded by the harness; the lab, the CPU
time of its actor processes (coordinator, job manager, task managers), sampled every 0.25 s and
read at the same two moments.

Hudi runs as a user would run it: the JVM's default collector here (G1; ``--gc serial`` is the
harness's collector for the protocol scenarios), no stall-watch thread dumps (each stops every
thread at a safepoint), permissions set without a ``chmod`` child process (the harness's file
system; Hadoop's local one forks one per file without libhadoop).

Both sides use the same checkpoint interval (the lab's default, ``--checkpoint-interval-ms``
overrides both) and each side's defaults otherwise. Bytes and files: what the completed data
instants' commit metadata lists (``totalWriteBytes`` per file written: a log append counts the
bytes it appended), read the same way from both tables; write amplification is those bytes over
the records' Arrow bytes (the lab's sources' ``input_bytes``, the same records on both sides);
compactions are counted apart. Measures and prints; asserts nothing (exit 1 when a run failed or
the lab's run was not verified, 2 when the harness is not built).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

from runtime.conformance.harness import HarnessError, run_harness  # noqa: E402
from runtime.conformance.releases import RELEASES, Release, check_built, java_command  # noqa: E402
from runtime.conformance.workload import export_workload  # noqa: E402
from runtime.core.config import JobConfig  # noqa: E402
from runtime.core.errors import UserError  # noqa: E402
from runtime.core.job_options import PARQUET_CODECS, TABLE_TYPES  # noqa: E402

SHORT = {"copy-on-write": "cow", "merge-on-read": "mor"}
SYSTEMS = ("lab", "hudi")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_workload_args(ap)
    ap.add_argument(
        "--runs", type=int, default=3, help="rounds of every (table type, system); the median is the figure"
    )
    ap.add_argument("--table-types", default=",".join(TABLE_TYPES))
    ap.add_argument("--release", default="0.14.0", choices=list(RELEASES), help="Hudi release whose writer runs")
    ap.add_argument(
        "--checkpoint-interval-ms", type=int, default=0, help="both sides' checkpoint interval (0: the lab's default)"
    )
    ap.add_argument(
        "--lab-parquet-compression",
        default=None,
        choices=PARQUET_CODECS,
        help="the lab's base-file codec (default: the lab's own, gzip, which is what Hudi writes)",
    )
    ap.add_argument("--timeout", type=float, default=900.0, help="bound on each run (lab job and Hudi harness), s")
    ap.add_argument("--xmx", default="3g", help="the harness JVM's heap (it holds every round in memory)")
    ap.add_argument(
        "--gc",
        default="g1",
        choices=("g1", "serial"),
        help="the harness JVM's collector (g1: the JVM's default here, which Flink's scripts leave in place)",
    )
    ap.add_argument("--out", default="benchmarks/results/vs-hudi.json")
    ap.add_argument("--tmp", default=None, help="scratch directory (default: a new temp dir, removed at the end)")
    args = ap.parse_args()
    types = [t.strip() for t in args.table_types.split(",") if t.strip()]
    if not types or any(t not in TABLE_TYPES for t in types):
        ap.error(f"--table-types: one or more of {', '.join(TABLE_TYPES)} (got {args.table_types!r})")
    if args.runs < 1 or args.records < args.writers or args.writers < 1 or args.checkpoints < 1:
        ap.error("--runs, --writers and --checkpoints must be at least 1, and --records at least --writers")
    args.table_types = types
    return args


def config(args: argparse.Namespace, table_type: str, table: str) -> JobConfig:
    cfg = JobConfig(
        protocol="ckp-meta",
        source="generator",
        records=args.records,
        writers=args.writers,
        checkpoints=args.checkpoints,
        table_type=table_type,
        table=table,
        job_timeout_s=args.timeout,
    )
    if args.checkpoint_interval_ms:
        cfg = cfg.replace(checkpoint_interval_s=args.checkpoint_interval_ms / 1000.0)
    if args.lab_parquet_compression:
        cfg = cfg.replace(parquet_compression=args.lab_parquet_compression)
    return cfg.validate()


# ---- what a table holds, read the same way from both ------------------------------------------


def table_written(table_path: str) -> dict[str, Any]:
    """From the table's completed instants: files and bytes written by the data commits and by
    compactions (``files_written``), the data commits, and when the last one completed (the
    modification time of its completed instant file, epoch s)."""
    from runtime.core.dfs import open_dfs
    from runtime.hudi.formats.commit_metadata import files_written
    from runtime.hudi.table.hudi_table import HudiTable

    dfs, base = open_dfs(table_path)
    table = HudiTable.open(dfs, base)
    timeline = table.timeline()
    done = table.completed_metadata(timeline)
    data = [c for c in done if not c.compaction and c.doc.get("partitionToWriteStats")]
    last = data[-1].instant if data else None
    last_at = os.path.getmtime(table.timeline_file(table.metadata_file(last, timeline))) if last else None
    return {**files_written(done), "data_commits": len(data), "compactions": len(done) - len(data), "last_at": last_at}


# ---- one run of each side ---------------------------------------------------------------------


def run_lab(cfg: JobConfig, out_dir: str) -> dict[str, Any]:
    result, memory, wall = common.run_job_sampled(cfg, out_dir, interval_s=0.25, record_cpu=True)
    w = table_written(cfg.table)
    started = result.timing.get("sources_started_at")
    write_s = w["last_at"] - started if started and w["last_at"] else None
    cpu_s = common.cpu_in_span(memory.get("cpu_series") or [], started, w["last_at"]) if started and write_s else None
    verified = bool(result.exactly_once and result.exactly_once.verified)
    return {
        "status": result.status.value,
        "verified": verified,
        "error": result.error,
        "rows": result.records,
        "write_s": round(write_s, 3) if write_s else None,
        "cpu_s": round(cpu_s, 3) if cpu_s is not None else None,
        "input_bytes": result.data_written.get("input_bytes"),
        "timing": dict(result.timing),
        "wall_s": round(wall, 3),
        **w,
    }


def run_hudi(release: Release, input_dir: str, table: str, out_dir: str, timeout_s: float) -> dict[str, Any]:
    doc_path = os.path.join(input_dir, "workload.json")
    with open(doc_path) as f:
        doc = json.load(f)
    doc["table_path"] = os.path.abspath(table)  # a new table each run, the same records
    with open(doc_path, "w") as f:
        json.dump(doc, f, indent=1)
    os.makedirs(out_dir, exist_ok=True)
    real = run_harness(
        release,
        input_dir,
        os.path.join(out_dir, "real.json"),
        os.path.join(out_dir, "harness.log"),
        timeout_s=timeout_s,
    )
    last_ms = real.commit_completed_ms.get(real.checkpoints)
    if real.first_emit_ms is None and not real.error:
        raise HarnessError(
            "the harness did not report first_emit_ms: its jar predates it; rebuild it (scripts/setup.sh, or "
            f"mvn -q -f conformance/pom.xml -P {release.profile} package -DskipTests)"
        )
    write_s = (last_ms - real.first_emit_ms) / 1000.0 if last_ms and real.first_emit_ms else None
    cost = real.write_cost(real.checkpoints)
    w = table_written(table) if os.path.isdir(os.path.join(table, ".hoodie")) else {}
    return {
        "status": real.job_status,
        "error": real.error,
        "write_s": round(write_s, 3) if write_s else None,
        "cpu_s": round(cost.cpu_ms / 1000.0, 3) if cost else None,
        "gc_s": round(cost.gc_ms / 1000.0, 3) if cost else None,
        "collectors": real.collectors,
        "checkpoints_s": _checkpoint_spans(real),
        "wall_s": real.wall_s,
        "last_at_file_mtime": w.get("last_at"),
        "last_at_harness": last_ms / 1000.0 if last_ms else None,
        **w,
    }


def _checkpoint_spans(real: Any) -> list[float | None]:
    """Seconds from the first record (then from each commit) to each checkpoint's commit."""
    out: list[float | None] = []
    prev = real.first_emit_ms
    for k in range(1, real.checkpoints + 1):
        at = real.commit_completed_ms.get(k)
        out.append(round((at - prev) / 1000.0, 3) if at and prev else None)
        prev = at
    return out


# ---- the figures ------------------------------------------------------------------------------


def _median(xs: list[float | None]) -> float | None:
    ok = [x for x in xs if x is not None]
    return round(statistics.median(ok), 4) if ok else None


def summarise(runs: list[dict[str, Any]], rows: int, input_bytes: int | None) -> dict[str, Any]:
    """The medians of one (table type, system)'s runs."""
    rate = [rows / r["write_s"] if r.get("write_s") else None for r in runs]
    data_bytes = [r["bytes"] - r["compaction_bytes"] if "bytes" in r else None for r in runs]
    return {
        "runs": len(runs),
        "write_s": _median([r.get("write_s") for r in runs]),
        "rows_per_s": _median(rate),
        "rows_per_s_each": [round(x, 1) if x else None for x in rate],
        "cpu_s": _median([r.get("cpu_s") for r in runs]),
        "rows_per_cpu_s": _median([rows / r["cpu_s"] if r.get("cpu_s") else None for r in runs]),
        "gc_s": _median([r.get("gc_s") for r in runs]),
        "bytes": _median(data_bytes),
        "base_files": _median([r.get("base_files") for r in runs]),
        "log_files": _median([r.get("log_files") for r in runs]),
        "data_commits": _median([r.get("data_commits") for r in runs]),
        "write_amplification": _median([b / input_bytes if b and input_bytes else None for b in data_bytes]),
        "compaction_bytes": _median([r.get("compaction_bytes") for r in runs]),
        "compactions": _median([r.get("compactions") for r in runs]),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def print_report(con: Any, doc: dict[str, Any]) -> None:
    from rich.table import Table

    p = doc["params"]
    t = Table(
        title=f"the lab (ckp-meta, Ray) against Hudi {doc['release']}'s Flink writer: {p['records']:,} records, "
        f"{p['writers']} writers, {p['checkpoints']} checkpoints, median of {p['runs']} run(s) each",
        title_justify="left",
    )
    for col in (
        "table",
        "",
        "write phase s",
        "rows/s",
        "lab/Hudi rows/s",
        "CPU s (GC s)",
        "lab/Hudi rows/CPU s",
        "MiB written",
        "base files",
        "log files",
        "write amp.",
        "compactions (MiB)",
    ):
        t.add_column(col, justify="left" if col in ("table", "") else "right")
    for tt, s in doc["summary"].items():
        for system in SYSTEMS:
            m = s[system]
            t.add_row(
                tt if system == "lab" else "",
                system,
                _fmt(m["write_s"], ".2f"),
                _fmt(m["rows_per_s"], ",.0f"),
                _fmt(s["lab_over_hudi_rows_per_s"], ".3f") if system == "lab" else "",
                _fmt(m["cpu_s"], ".1f") + (f" ({_fmt(m['gc_s'], '.1f')})" if system == "hudi" else ""),
                _fmt(s["lab_over_hudi_rows_per_cpu_s"], ".3f") if system == "lab" else "",
                _fmt(m["bytes"] / common.MiB if m["bytes"] else None, ",.1f"),
                _fmt(m["base_files"], ".0f"),
                _fmt(m["log_files"], ".0f"),
                _fmt(m["write_amplification"], ".3f"),
                f"{_fmt(m['compactions'], '.0f')} ({_fmt((m['compaction_bytes'] or 0) / common.MiB, ',.1f')})",
            )
    con.print(t)
    if "mor_over_cow_rows_per_s" in doc:
        con.print(
            "merge-on-read over copy-on-write, rows/s of the write phase: "
            f"lab {doc['mor_over_cow_rows_per_s']['lab']}, Hudi {doc['mor_over_cow_rows_per_s']['hudi']}"
        )


def _fmt(v: float | None, f: str) -> str:
    return "-" if v is None else format(v, f)


def main() -> int:
    args = parse_args()
    con = common.console()
    release = RELEASES[args.release]
    try:
        check_built(release)
        java_command()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.environ["CONFORMANCE_XMX"] = args.xmx
    os.environ["CONFORMANCE_GC"] = args.gc
    scratch = args.tmp or tempfile.mkdtemp(prefix="commitlab-bench-vs-hudi-")
    doc: dict[str, Any] = {
        "benchmark": "vs-hudi",
        "release": release.hudi,
        "flink": release.flink,
        "write_phase": "first record handed to the write tasks -> the last checkpoint's commit completed "
        "(Hudi: harness first_emit_ms -> checkpoints_detail[-1].commit_completed_ms; the lab: result.json "
        "timing.sources_started_at -> mtime of the last data instant's completed file)",
        "runs": {tt: {s: [] for s in SYSTEMS} for tt in args.table_types},
    }
    inputs: dict[str, tuple[str, JobConfig]] = {}
    for tt in args.table_types:
        cfg = config(args, tt, os.path.join(scratch, "unused"))
        t = time.monotonic()
        directory = os.path.join(scratch, f"input-{SHORT[tt]}")
        export_workload(
            cfg,
            directory,
            os.path.join(scratch, "unused"),
            round(cfg.checkpoint_interval_s * 1000),
            preload=True,
            watch_stalls=False,
        )
        con.log(f"{tt}: {args.records:,} records exported for Hudi's harness in {time.monotonic() - t:.1f} s")
        inputs[tt] = (directory, cfg)
    first = inputs[args.table_types[0]][1]
    common.compile_project()  # the project's bytecode first, as an installed package has it
    con.log("ray.init")
    common.start_ray()
    doc["environment"] = common.environment()
    doc["params"] = {
        "records": args.records,
        "writers": args.writers,
        "checkpoints": args.checkpoints,
        "runs": args.runs,
        "table_types": args.table_types,
        "checkpoint_interval_ms": round(first.checkpoint_interval_s * 1000),
        "lab_protocol": first.protocol,
        "lab_source": first.source,
        "lab_parquet_compression": first.parquet_compression,
        "num_buckets": first.num_buckets,
        "partitions": first.partitions,
        "harness_xmx": args.xmx,
        "harness_gc": args.gc,
        "harness_stall_watch": False,
    }
    failed = False
    total = args.runs * len(args.table_types) * 2
    n = 0
    for r in range(args.runs):
        for tt in args.table_types:
            directory, cfg = inputs[tt]
            order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                n += 1
                where = os.path.join(scratch, f"{SHORT[tt]}-{system}-{r}")
                con.log(f"[{n}/{total}] run {r + 1}/{args.runs}, {tt}: {system} writing {args.records:,} records")
                t0 = time.monotonic()
                load_before = os.getloadavg()[0]
                try:
                    if system == "lab":
                        row = run_lab(cfg.replace(table=os.path.join(where, "table")), os.path.join(where, "out"))
                        failed |= not row["verified"]
                    else:
                        row = run_hudi(release, directory, os.path.join(where, "table"), where, args.timeout)
                        failed |= row["status"] != "COMMITTED"
                except Exception as exc:  # noqa: BLE001 - recorded; the other runs go on
                    row = common.error_row(exc, t0)
                    failed = True
                row["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                doc["runs"][tt][system].append(row)
                rate = args.records / row["write_s"] if row.get("write_s") else None
                con.log(
                    f"    {row.get('status')}: write phase {_fmt(row.get('write_s'), '.2f')} s, "
                    f"{_fmt(rate, ',.0f')} rows/s, CPU {_fmt(row.get('cpu_s'), '.1f')} s, "
                    f"load {row['load_avg_1m'][0]:.1f}-{row['load_avg_1m'][1]:.1f}, "
                    f"{_fmt((row.get('bytes') or 0) / common.MiB, ',.1f')} MiB, {row.get('error') or ''} "
                    f"({time.monotonic() - t0:.0f} s with start and verification)"
                )
                shutil.rmtree(os.path.join(where, "table"), ignore_errors=True)
    doc["summary"] = {}
    for tt in args.table_types:
        runs = doc["runs"][tt]
        input_bytes = next((x["input_bytes"] for x in runs["lab"] if x.get("input_bytes")), None)
        s: dict[str, Any] = {system: summarise(runs[system], args.records, input_bytes) for system in SYSTEMS}
        s["input_bytes"] = input_bytes
        s["lab_over_hudi_rows_per_s"] = _ratio(s["lab"]["rows_per_s"], s["hudi"]["rows_per_s"])
        s["lab_over_hudi_rows_per_cpu_s"] = _ratio(s["lab"]["rows_per_cpu_s"], s["hudi"]["rows_per_cpu_s"])
        s["lab_over_hudi_bytes"] = _ratio(s["lab"]["bytes"], s["hudi"]["bytes"])
        doc["summary"][tt] = s
    if {"copy-on-write", "merge-on-read"} <= set(doc["summary"]):
        cow, mor = doc["summary"]["copy-on-write"], doc["summary"]["merge-on-read"]
        doc["mor_over_cow_rows_per_s"] = {
            system: _ratio(mor[system]["rows_per_s"], cow[system]["rows_per_s"]) for system in SYSTEMS
        }
    doc["environment"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    common.write_json(args.out, doc)
    print_report(con, doc)
    con.print(f"results: {args.out}")
    if not args.tmp:
        shutil.rmtree(scratch, ignore_errors=True)
    import ray

    ray.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
