"""The smallest failure scenario on a real release: Hudi 0.10.1's Flink writer (operator-event)
and the lab on data, an empty round, then data that reaches the write tasks before the
CommitAckEvent. Both deadlock, and the real side names the frame its write task was blocked in,
read from a thread dump of the job (Hudi's write.commit.ack.timeout, 15 s here, then fails it)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from runtime.conformance.releases import RELEASES
from runtime.conformance.scenario_run import run_scenario
from runtime.conformance.scenarios import scenario
from runtime.core.config import JobConfig

RELEASE = RELEASES["0.10.1"]
ACK_TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def built() -> None:
    if shutil.which("java") is None:
        pytest.skip("Java is needed to run Hudi's Flink writer (conformance/)")
    if not RELEASE.jar.is_file():
        if shutil.which("mvn") is None:
            pytest.skip("Maven is needed to build the conformance harness (scripts/setup.sh)")
        pytest.skip(f"{RELEASE.jar} is not built: scripts/setup.sh builds it")


def test_hudi_0_10_deadlocks_where_the_lab_does_and_names_the_blocked_frame(built, tmp_path):
    cfg = JobConfig(protocol="operator-event", source="generator", writers=2, table_type="copy-on-write").validate()
    # a shorter ack timeout than the scenario's 30 s (Hudi's = the checkpoint timeout): the run ends sooner
    sc = scenario("deadlock", cfg)
    sc = dataclasses.replace(sc, harness={**sc.harness, "checkpoint_timeout_ms": ACK_TIMEOUT_MS})
    c = run_scenario(sc, RELEASE, str(tmp_path), seed=0, timeout_s=120.0, on_phase=lambda _: None)
    assert c.lab.verdict == "deadlock", c.lab
    assert c.real.verdict == "deadlock", (c.real.status, c.real.detail)
    assert c.agrees
    # the job failed (ack timeout or the stuck checkpoint's expiry), its round-3 instant left pending
    assert c.real.status == "FAILED" and len(c.real.pending) == 1
    # the thread dump: the mailbox thread waits for an instant inside processElement's flush
    frames = c.real.frames
    assert frames[0] == "TimeWait.waitFor"
    assert "AbstractStreamWriteFunction.instantToWrite" in frames and "StreamWriteFunction.flushBucket" in frames
    assert frames[-1] == "MailboxProcessor.runMailboxLoop"
    with open(tmp_path / "copy-on-write" / "conformance.json") as f:
        doc = json.load(f)
    assert doc["outcomes"]["lab"]["verdict"] == doc["outcomes"]["real"]["verdict"] == "deadlock"
