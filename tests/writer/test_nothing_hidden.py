"""What a run went through is in its record, its summary and its picture: every failover (cause,
strategy, restored checkpoint, down time), every instant rolled back and why, the faults armed,
fired and never fired, and every attempt on the timeline."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.fault_spec import FaultSpec
from runtime.core.messages import CoordinatorView
from runtime.hudi.client.write_client import WriteClient
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.job.driver import JobDriver
from runtime.job.prepare import prepare_job
from runtime.job.record import rollbacks
from runtime.lab.report import summary_table
from runtime.lab.timeline_plot import render_timeline, validate_trace
from runtime.sim import simulate


def _cfg(**kw) -> JobConfig:
    base = dict(source="generator", writers=2, checkpoints=5, records=3_000, bucket_flush_rows=300)
    return JobConfig(**{**base, **kw})


def _summary(result: dict) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(result))
    return console.export_text()


def test_a_failover_its_rollback_and_the_faults_are_recorded_and_printed(tmp_path):
    # with data in every round, operator-event sends no operator event: the second fault is legal
    # but never fires, and the record must say so
    faults = [FaultSpec("task.in_snapshot", 2, 1), FaultSpec("message.dropped", 3, target="operator_event")]
    result = simulate(_cfg(protocol="operator-event", faults=faults), seed=1, workdir=str(tmp_path))
    assert result.status == "finished" and result.exactly_once.verified
    (failover,) = result.failovers
    assert failover.strategy == "global" and failover.restored_checkpoint == 1
    assert "writer-1" in failover.error and failover.down_s is not None
    assert result.faults_armed == ["task.in_snapshot@2#1", "message.dropped:operator_event@3"]
    assert [f["point"] for f in result.faults_fired] == ["task.in_snapshot"]
    assert result.faults_not_fired == ["message.dropped:operator_event@3"]
    # the instant writer-1 flushed into before it died was rolled back by the next coordinator
    assert result.rollbacks and all(r["reason"].startswith("left pending by attempt 1") for r in result.rollbacks)
    assert result.rolled_back == [r["instant"] for r in result.rollbacks]
    text = _summary(result)
    assert "failover 1" in text and "global, restored checkpoint 1" in text and "writer-1" in text
    assert "rolled back" in text and "left pending by attempt 1" in text
    assert "never fired: message.dropped:operator_event@3" in text
    assert "read by the last attempt" in text


def test_the_timeline_shows_both_attempts_and_the_failover(tmp_path):
    trace = tmp_path / "trace.json"
    result = simulate(
        _cfg(faults=[FaultSpec("task.in_snapshot", 2, 1)], protocol="coordination-rpc"),
        seed=1,
        workdir=str(tmp_path / "run"),
        chrome_trace_path=str(trace),
    )
    doc = json.loads(trace.read_text())
    assert validate_trace(doc) == []
    drawn = render_timeline(doc, str(tmp_path / "timeline.png"), checkpoints=result.to_json()["checkpoints"])
    assert drawn.counts["failover"] == 1
    # the commit of checkpoint 1 (before the failover) and the later ones are all on the picture
    assert drawn.counts["commit"] == len(result.commits) >= 2
    assert "job" not in drawn.lanes  # a failover spans the lanes, it has none of its own


def test_instants_pending_before_the_run_are_reported_as_an_earlier_runs(tmp_path):
    dfs, base = open_dfs(str(tmp_path / "table"))
    job = prepare_job(_cfg())
    table = HudiTable.create_or_open(dfs, base, TableProps.for_job(job.config))
    table.start_instant("20240101000000001")
    driver = JobDriver(job, table, schema_json="")
    driver.note_pending("left pending by an earlier run of this table")
    WriteClient(table).rollback("20240101000000001")  # what the coordinator does when it starts
    table.start_instant("20240101000000002")  # the run's own instant, still pending at the end
    coord = CoordinatorView(instant="20240101000000002", rolled_back=["20240101000000001", "20240101000000003"])
    assert rollbacks(driver, coord) == [
        {"instant": "20240101000000001", "reason": "left pending by an earlier run of this table"},
        {"instant": "20240101000000003", "reason": "a failed commit the coordinator rolled back"},
    ]


@pytest.mark.parametrize(
    "protocol,fault,message",
    [
        ("coordination-rpc", "bus.deleted@2", "keeps no messages on the DFS"),
        ("message-bus", "message.dropped:instant_time_request@2", "no role of a message-bus job has an RPC method"),
    ],
)
def test_a_fault_that_could_never_fire_is_refused_before_the_run(tmp_path, protocol, fault, message):
    from runtime.core.config import ConfigError
    from runtime.core.fault_spec import parse_faults

    with pytest.raises(ConfigError, match=message):
        simulate(_cfg(protocol=protocol, faults=parse_faults(fault)), seed=1, workdir=str(tmp_path))
    assert not (tmp_path / "table").exists()
