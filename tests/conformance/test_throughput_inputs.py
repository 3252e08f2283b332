"""What benchmarks/bench_vs_hudi.py relies on (no Java needed): the workload's preload switch, the
harness's first_emit_ms and CPU and GC times, the lab's CPU seconds over a span, and the files and
bytes read back from a table's commits."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from runtime.conformance.real_run import RealRun
from runtime.conformance.workload import export_workload
from runtime.core.config import JobConfig
from runtime.sim import simulate

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_vs_hudi.py"


def _bench():
    sys.path.insert(0, str(_BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_vs_hudi", _BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cfg(table_type: str = "copy-on-write") -> JobConfig:
    return JobConfig(
        protocol="ckp-meta", source="generator", writers=2, checkpoints=3, records=600, table_type=table_type
    )


def test_preload_is_asked_only_by_a_throughput_run_and_the_rounds_are_the_same(tmp_path):
    cfg = _cfg().validate()
    plain = export_workload(cfg, str(tmp_path / "plain"), str(tmp_path / "t"), 200)
    loaded = export_workload(cfg, str(tmp_path / "loaded"), str(tmp_path / "t"), 200, preload=True)
    assert json.loads((tmp_path / "plain" / "workload.json").read_text())["preload_rounds"] is False
    assert json.loads((tmp_path / "loaded" / "workload.json").read_text())["preload_rounds"] is True
    assert plain.rounds == loaded.rounds and plain.rows == loaded.rows == 600
    for task in plain.rounds:
        for rel in task:
            assert (tmp_path / "plain" / rel).read_bytes() == (tmp_path / "loaded" / rel).read_bytes()


def test_the_stall_watch_is_on_unless_a_throughput_run_turns_it_off(tmp_path):
    cfg = _cfg().validate()
    export_workload(cfg, str(tmp_path / "plain"), str(tmp_path / "t"), 200)
    export_workload(cfg, str(tmp_path / "fast"), str(tmp_path / "t"), 200, preload=True, watch_stalls=False)
    assert json.loads((tmp_path / "plain" / "workload.json").read_text())["watch_stalls"] is True
    assert json.loads((tmp_path / "fast" / "workload.json").read_text())["watch_stalls"] is False


def test_the_write_phase_cost_is_from_the_first_record_to_the_last_commit_and_absent_when_not_recorded():
    doc = {"release": "0.14.0", "flink": "1.17.2", "table_type": "COPY_ON_WRITE", "writers": 2, "checkpoints": 2}
    detail = [
        {"id": 1, "commit_completed_ms": 10.0, "commit_cpu_ms": 9_000, "commit_gc_ms": 400},
        {"id": 2, "commit_completed_ms": 20.0, "commit_cpu_ms": 15_500, "commit_gc_ms": 700},
    ]
    run = RealRun.from_json(
        doc
        | {
            "first_emit_cpu_ms": 6_000,
            "first_emit_gc_ms": 100,
            "checkpoints_detail": detail,
            "jvm": {"collectors": ["G1 Young Generation"]},
        }
    )
    cost = run.write_cost(2)
    assert cost is not None and (cost.cpu_ms, cost.gc_ms) == (9_500.0, 600.0)
    assert run.collectors == ["G1 Young Generation"]
    assert RealRun.from_json(doc | {"checkpoints_detail": detail}).write_cost(2) is None
    assert run.write_cost(3) is None


def test_the_lab_s_cpu_seconds_over_a_span_are_read_between_samples():
    bench = _bench()
    series = [(100.0, 1.0), (101.0, 2.0), (102.0, 4.0)]
    assert bench.common.cpu_in_span(series, 100.5, 101.5) == 1.5
    assert bench.common.cpu_in_span(series, 100.0, 102.0) == 3.0
    assert bench.common.cpu_in_span(series, 99.0, 101.0) is None  # before the first sample
    assert bench.common.cpu_in_span(series[:1], 100.0, 100.0) is None


def test_the_harness_s_first_record_time_is_read_and_absent_from_an_older_harness():
    doc = {"release": "0.14.0", "flink": "1.17.2", "table_type": "COPY_ON_WRITE", "writers": 2, "checkpoints": 3}
    assert RealRun.from_json(doc | {"first_emit_ms": 1_795_934_580_455}).first_emit_ms == 1_795_934_580_455.0
    assert RealRun.from_json(doc).first_emit_ms is None


def test_the_bytes_and_files_read_from_the_table_are_the_lab_s_own_record(tmp_path):
    bench = _bench()
    for table_type in ("copy-on-write", "merge-on-read"):
        result = simulate(_cfg(table_type), seed=0, workdir=str(tmp_path / table_type), storage="disk")
        written = bench.table_written(result.table)
        assert written["data_commits"] == 3 and written["last_at"] is not None
        for k in ("bytes", "base_files", "log_files", "compaction_bytes"):
            assert written[k] == result.data_written[k], k
        assert written["base_files" if table_type == "copy-on-write" else "log_files"] > 0
