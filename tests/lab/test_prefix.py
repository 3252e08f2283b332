"""A run that did not finish: its commits must hold exactly a prefix of the stream, the rounds its
last committed checkpoint closed (the Flink protocols) or its committed offsets (Kafka Connect)."""

from __future__ import annotations

import pytest
from rich.console import Console

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.data import generator
from runtime.lab.prefix import prefix_rows, verify_prefix
from runtime.lab.report import summary_table
from runtime.lab.verify import expected_state
from runtime.sim import simulate

CFG = JobConfig(source="generator", writers=2, checkpoints=4, records=800)
DETAIL = {"1": {"round": 1}, "2": {"round": 2}, "5": {"round": 3}}  # checkpoint 5 closed round 3 after a failover


def test_the_last_committed_checkpoint_names_the_rounds():
    stream = generator.generate(CFG)
    rows, what = prefix_rows(stream, [{"checkpoint": 1}, {"checkpoint": 5}], DETAIL, CFG.round_bounds(), {})
    assert rows.column("_offset").to_pylist() == list(range(600))  # rounds 1 to 3 of 200 records
    assert what == "rounds 1 to 3 (closed by checkpoint 5, the last committed)"


def test_kafka_offsets_take_the_first_records_of_each_partition():
    stream = generator.generate(CFG)
    rows, what = prefix_rows(stream, [{"checkpoint": 0}], {}, CFG.round_bounds(), {"kafka.commit.offsets": "0=3,1=5"})
    tasks = rows.column("_task").to_pylist()
    assert tasks.count(0) == 3 and tasks.count(1) == 5
    first = {
        t: [
            o
            for o, tt in zip(stream.column("_offset").to_pylist(), stream.column("_task").to_pylist(), strict=True)
            if tt == t
        ]
        for t in (0, 1)
    }
    assert sorted(rows.column("_offset").to_pylist()) == sorted(first[0][:3] + first[1][:5])
    assert "0=3,1=5" in what


def test_no_commit_means_an_empty_table_is_right():
    rows, what = prefix_rows(generator.generate(CFG), [], {}, CFG.round_bounds(), {})
    assert rows.num_rows == 0 and "no instant" in what


def _verify(actual, stream, commits):
    return verify_prefix(
        actual, stream, commits, DETAIL, CFG.round_bounds(), {}, key="key", precombine="ts", partition="partition"
    )


def test_a_table_missing_a_committed_record_is_caught():
    stream = generator.generate(CFG)
    good = expected_state(stream.slice(0, 400), "key", "ts", "partition")
    commits = [{"checkpoint": 2}]
    ok = verify_prefix(
        good, stream, commits, DETAIL, CFG.round_bounds(), {}, key="key", precombine="ts", partition="partition"
    )
    assert ok.verified and ok.expected == good.num_rows
    lost = verify_prefix(
        good.slice(1),
        stream,
        commits,
        DETAIL,
        CFG.round_bounds(),
        {},
        key="key",
        precombine="ts",
        partition="partition",
    )
    assert not lost.verified and lost.lost == 1
    later = expected_state(stream.slice(0, 600), "key", "ts", "partition")  # round 3 too: not committed
    extra = verify_prefix(
        later, stream, commits, DETAIL, CFG.round_bounds(), {}, key="key", precombine="ts", partition="partition"
    )
    assert not extra.verified


@pytest.mark.parametrize("protocol", ["message-bus", "coordination-rpc", "control-topic"])
def test_a_failed_run_verifies_what_it_committed(protocol):
    cfg = CFG.replace(
        protocol=protocol,
        records=3_000,
        checkpoints=5,
        bucket_flush_rows=300,
        max_restarts=0,
        faults=[FaultSpec("task.in_snapshot", 3, 0)],
        kafka_commit_interval_s=0.2,
    )
    result = simulate(cfg, seed=1, storage="memory")
    assert result.status == "failed" and result.exactly_once is None
    prefix = result.committed_prefix
    assert result.commits and prefix.verified and prefix.expected == prefix.actual > 0
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(result))
    text = console.export_text()
    assert "committed prefix" in text and "verified" in text


def test_a_finished_run_has_no_prefix_record():
    assert simulate(CFG, seed=1, storage="memory").committed_prefix is None


def _failed_run_on_disk(tmp_path):
    """A run that did not finish on disk (checkpoints 1 and 2 committed, the job failed in 3) and
    its result.json: what ``verify --result`` reads after a stop ended a run before its own check
    (a second signal, or ``ray job stop``'s SIGKILL)."""
    from runtime.lab.run_output import write_result

    cfg = CFG.replace(
        records=2_000, bucket_flush_rows=400, max_restarts=0, faults=[FaultSpec("task.in_snapshot", 3, 0)]
    )
    result = simulate(cfg, seed=1, workdir=str(tmp_path), storage="disk")
    assert result.status == "failed" and len(result.commits) == 2, result.to_json()
    write_result(str(tmp_path / "out"), result)
    return tmp_path / "out"


def test_verify_result_of_a_run_that_did_not_finish_checks_its_committed_prefix(tmp_path, capsys):
    from runtime.cli import main

    out = _failed_run_on_disk(tmp_path)
    assert main(["verify", "--result", str(out)]) == 0
    assert "committed prefix of the failed run: the table holds rounds 1 to 2" in capsys.readouterr().out


def test_verify_result_says_violated_when_the_table_holds_more_than_the_record_committed(tmp_path, capsys):
    import json

    from runtime.cli import main

    out = _failed_run_on_disk(tmp_path)
    doc = json.loads((out / "result.json").read_text())
    doc["commits"] = doc["commits"][:-1]  # the table holds a commit the record does not
    (out / "result.json").write_text(json.dumps(doc))
    assert main(["verify", "--result", str(out)]) == 1
    assert "rounds 1 to 1 (closed by checkpoint 1, the last committed): VIOLATED" in capsys.readouterr().out
