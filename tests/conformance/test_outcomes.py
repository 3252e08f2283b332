"""The real side's outcome in the lab's words, from what the harness recorded (no Java needed)."""

from __future__ import annotations

from runtime.conformance.outcomes import real_outcome, table_instants
from runtime.conformance.real_run import RealRun
from runtime.lab.verdicts import ExactlyOnce

_FRAMES = [
    "TimeWait.waitFor",
    "AbstractStreamWriteFunction.instantToWrite",
    "StreamWriteFunction.flushBucket",
    "StreamWriteFunction.processElement",
    "MailboxProcessor.runMailboxLoop",
]


def _run(status: str, frames: list[str] | None) -> RealRun:
    doc = {"release": "0.13.1", "flink": "1.16.3", "table_type": "COPY_ON_WRITE", "writers": 2, "checkpoints": 3}
    doc |= {"job_status": status, "error": "Timeout(21000ms) while waiting for instant initialize"}
    if frames is not None:
        doc["blocked"] = {
            "thread": "bucket_write (1/2)#0",
            "state": "TIMED_WAITING",
            "waited_ms": 4100,
            "frames": frames,
        }
    return RealRun.from_json(doc)


def test_a_mailbox_thread_waiting_for_an_instant_inside_processelement_is_a_deadlock(tmp_path):
    out = real_outcome(_run("FAILED", _FRAMES), None, str(tmp_path))
    assert out.verdict == "deadlock" and out.frames == _FRAMES
    assert "TimeWait.waitFor <- AbstractStreamWriteFunction.instantToWrite" in (out.blocked or "")


def test_a_job_that_failed_elsewhere_is_a_stall_not_a_deadlock(tmp_path):
    assert real_outcome(_run("FAILED", ["BoundedInMemoryExecutor.execute"]), None, str(tmp_path)).verdict == "stall"
    assert real_outcome(_run("FAILED", None), None, str(tmp_path)).verdict == "stall"


def test_a_committed_job_is_judged_by_its_table(tmp_path):
    lost = ExactlyOnce(verified=False, expected=10, actual=8, lost=2, duplicated=0, unexpected=0, mismatched=0)
    dup = ExactlyOnce(verified=False, expected=10, actual=11, lost=0, duplicated=1, unexpected=0, mismatched=0)
    ok = ExactlyOnce(verified=True, expected=10, actual=10, lost=0, duplicated=0, unexpected=0, mismatched=0)
    assert real_outcome(_run("COMMITTED", None), lost, str(tmp_path)).verdict == "loss"
    assert real_outcome(_run("COMMITTED", None), dup, str(tmp_path)).verdict == "duplicate"
    assert real_outcome(_run("COMMITTED", None), ok, str(tmp_path)).verdict == "exactly-once"


def test_rollbacks_and_pending_instants_from_either_timeline_layout(tmp_path):
    one = tmp_path / "v5" / ".hoodie"
    one.mkdir(parents=True)
    for name in [
        "1.commit.requested",
        "1.inflight",
        "1.commit",
        "2.commit.requested",
        "2.inflight",
        "3.rollback.requested",
        "3.rollback.inflight",
        "3.rollback",
        "4.commit.requested",
        "4.inflight",
    ]:
        (one / name).touch()
    assert table_instants(str(tmp_path / "v5")) == (["3"], ["2", "4"])
    two = tmp_path / "v9" / ".hoodie" / "timeline"
    two.mkdir(parents=True)
    for name in [
        "1.deltacommit.requested",
        "1.deltacommit.inflight",
        "1_5.deltacommit",
        "6.deltacommit.requested",
        "7.rollback.requested",
        "7_8.rollback",
    ]:
        (two / name).touch()
    assert table_instants(str(tmp_path / "v9")) == (["7"], ["6"])
