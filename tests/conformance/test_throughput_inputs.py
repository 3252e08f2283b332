"""What benchmarks/bench_vs_hudi.py relies on (no Java needed): the workload's preload switch, the
harness's first_emit_ms, and the files and bytes read back from a table's commits."""

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
