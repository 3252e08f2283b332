"""Hudi's own Flink writer (0.14.0, the conformance/ harness) and the lab's ckp-meta on the same
records: the official reader reads the same rows from both tables, the timelines have the same
shape, and Hudi's file-system calls are counted by part of the table."""

from __future__ import annotations

import shutil

import pytest

from runtime.conformance.output import write_conformance
from runtime.conformance.releases import RELEASES
from runtime.conformance.run import run_check
from runtime.core.config import JobConfig
from runtime.lab.html_report import build_report

RELEASE = RELEASES["0.14.0"]


@pytest.fixture(scope="module")
def built() -> None:
    if not RELEASE.jar.is_file():
        if shutil.which("mvn") is None or shutil.which("java") is None:
            pytest.skip("Java and Maven are needed to build the conformance harness (scripts/setup.sh)")
        pytest.fail(f"{RELEASE.jar} is missing: scripts/setup.sh builds it")


def test_hudi_s_writer_and_the_lab_commit_the_same_rows_in_the_same_timeline(built, tmp_path):
    cfg = JobConfig(protocol="ckp-meta", source="generator", writers=2, checkpoints=3, records=1_500).validate()
    c = run_check(cfg, RELEASE, str(tmp_path), seed=0, timeout_s=240.0, on_phase=lambda _: None)
    assert c.contents.equal, c.contents.examples
    assert c.contents.rows_real == c.contents.rows_lab > 0
    assert c.lab_timeline.write_instants == c.real_timeline.write_instants == 3
    assert c.timeline_differences == []
    assert c.conforms
    # Hudi's own calls, counted through the harness's file system, by part of the table
    assert c.per_checkpoint["data"].real > 0 and c.per_checkpoint["timeline"].real > 0
    assert c.per_checkpoint["markers"].real > 0  # Hudi 0.14 writes a marker per new file
    assert c.per_role["write_task"].real > 0 and c.per_role["coordinator"].real > 0
    assert len(c.real_commit_latency_s) == 3
    # each count traced to the Hudi method that made it: a write task's markers, DirectWriteMarkers
    assert any(m.startswith("DirectWriteMarkers.create") for m, _ in c.real_callers["markers"])
    # conformance.json and its section of the HTML report
    ran = {"protocol": "ckp-meta", "release": "0.14.0", "flink": "1.17.2", "writers": 2, "checkpoints": 3}
    write_conformance(str(tmp_path), [c], ran)
    page = build_report(str(tmp_path))
    assert "against Hudi 0.14.0" in page and "DFS calls/ckp, markers" in page and "conforms" in page
