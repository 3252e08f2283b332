"""``commitlab soak``, short: seeds of random schedules, every run judged, RSS sampled per run."""

from __future__ import annotations

import json

from runtime.cli.command import main
from runtime.sim.soak import RssSample, SoakRecord, soak


def test_a_short_soak_verifies_every_run_and_samples_memory_after_each():
    seen: list[int] = []
    record = soak(["control-topic", "message-bus"], checkpoints=40, on_run=lambda r: seen.append(r.runs))
    assert record.checkpoints >= 40 and record.runs == len(seen) == len(record.rss)
    assert set(record.protocols) == {"control-topic", "message-bus"}
    assert sum(record.outcomes.values()) == record.runs and record.violations == 0, record.failures
    assert [s.run for s in record.rss] == list(range(1, record.runs + 1))
    assert all(s.rss_bytes > 0 for s in record.rss)


def test_the_slope_is_the_growth_per_thousand_checkpoints_after_the_warm_up():
    record = SoakRecord("random", ["message-bus"])
    # 1 MiB more every 100 checkpoints after a warm-up sample that jumped: 10 MiB per 1,000
    record.rss = [RssSample(1, 100, 500 * 2**20, 0.0)] + [
        RssSample(i, 100 * i, (100 + i) * 2**20, float(i)) for i in range(2, 21)
    ]
    assert abs(record.slope_mib_per_1000() - 10.0) < 1e-6
    record.rss = [RssSample(i, 100 * i, 300 * 2**20, float(i)) for i in range(1, 21)]
    assert record.slope_mib_per_1000() == 0.0


def test_the_command_writes_soak_json(tmp_path):
    code = main(["soak", "--protocols", "control-topic", "--checkpoints", "20", "--out", str(tmp_path), "--quiet"])
    assert code == 0
    doc = json.loads((tmp_path / "soak.json").read_text())
    assert doc["checkpoints"] >= 20 and doc["violations"] == 0
    assert len(doc["rss"]["samples"]) == doc["runs"]
    assert "slope_mib_per_1000_checkpoints" in doc["rss"]
