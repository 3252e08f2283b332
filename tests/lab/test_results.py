"""result.json is a contract (docs/RESULT_JSON.md): the typed result record writes the same
document as before it was typed, key for key and in the same order, and reads it back."""

from __future__ import annotations

import json
import pathlib

import pytest

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.faults.scenarios import deadlock_config
from runtime.lab.results import JobResult
from runtime.lab.status import Status
from runtime.sim import simulate

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "results"


def _cfg(**kw) -> JobConfig:
    base = dict(source="generator", writers=2, checkpoints=3, records=2_000, bucket_flush_rows=400)
    base.update(kw)
    return JobConfig(**base)


# the runs whose result.json the fixtures hold, as the untyped record wrote it
RUNS = {
    "deadlocked": (deadlock_config(_cfg(protocol="operator-event")), 0),
    "region": (
        _cfg(
            protocol="coordination-rpc",
            checkpoints=4,
            bucket_flush_rows=200,
            failover="region",
            faults=[FaultSpec("task.in_snapshot", 2, 1)],
        ),
        1,
    ),
    "failed": (_cfg(protocol="message-bus", faults=[FaultSpec("task.in_snapshot", -1, 0, times=5)], max_restarts=2), 1),
}


def _comparable(doc: dict) -> dict:
    """The document without what differs between two runs of the same seed (wall-clock times),
    without the configuration record (JobConfig.record, which grows with every option) and the
    trace's hash (the trace's bytes are the simulator's determinism tests' to pin)."""
    doc = json.loads(json.dumps(doc))
    for key in ("wall_s", "verify_s", "config", "trace_sha256"):
        doc.pop(key, None)
    doc["timing"].pop("prepare_s", None)
    for fired in doc["faults_fired"]:
        fired["at"] = 0.0
    return doc


@pytest.fixture(scope="module")
def results() -> dict[str, JobResult]:
    return {name: simulate(cfg, seed=seed, storage="memory", max_real_s=120.0) for name, (cfg, seed) in RUNS.items()}


@pytest.mark.parametrize("name", list(RUNS))
def test_result_json_is_the_document_it_always_was(results, name):
    want = _comparable(json.loads((FIXTURES / f"{name}.json").read_text()))
    got = _comparable(results[name].to_json())
    assert list(got) == list(want)  # the keys, in order
    assert json.dumps(got) == json.dumps(want)  # nested keys in order, and every value


@pytest.mark.parametrize("name", list(RUNS))
def test_a_result_json_reads_back_as_the_same_record(results, name):
    doc = json.loads(json.dumps(results[name].to_json()))  # as result.json holds it
    back = JobResult.from_json(doc)
    assert back.to_json() == doc
    assert JobResult.from_json(back.to_json()) == back


def test_the_record_reads_as_attributes(results):
    deadlocked, region, failed = results["deadlocked"], results["region"], results["failed"]
    assert deadlocked.status == Status.DEADLOCKED == "deadlocked"
    assert deadlocked.deadlock is not None and deadlocked.deadlock.releasing_mail == "CommitAckEvent(ckp=2)"
    assert deadlocked.committed_prefix is not None and deadlocked.committed_prefix.verified
    assert region.finished and region.exactly_once is not None and region.exactly_once.verified
    assert [f.strategy for f in region.failovers] == ["region"]
    assert failed.status == Status.FAILED and len(failed.failovers) == 2 and failed.exactly_once is None
    assert failed.sim.trace_sha256 == failed.to_json()["trace_sha256"]


def test_a_record_of_a_run_that_lost_its_ray_cluster_reads_back_and_exits_4(results):
    """``cluster_lost`` (a Ray run whose head's GCS went away) travels through result.json, and
    ``run`` exits 4 for it whatever its status, 1 for the same failure without it."""
    from runtime.cli.exits import ExitCode, of_run
    from runtime.lab.results import ClusterLost, RayRecord

    record = JobResult.from_json(json.loads(json.dumps(results["failed"].to_json())))
    record.simulation = None
    assert of_run(record) == ExitCode.FAILED
    placement = {"strategy": "pack", "roles_per_node": {}, "writer_nodes": 0, "processes": {}, "roles": {}}
    lost = ClusterLost("10.0.0.1:6379", 10.1, "it did not answer 4 probes in 10.1 s")
    record.ray = RayRecord(placement | {"slots_per_task_manager": 1}, None, None, None, lost)  # type: ignore[arg-type]
    doc = json.loads(json.dumps(record.to_json()))
    assert doc["cluster_lost"] == {"gcs_address": "10.0.0.1:6379", "unreachable_s": 10.1, "seen": lost.seen}
    back = JobResult.from_json(doc)
    assert back.ray is not None and back.ray.cluster_lost == lost
    assert of_run(back) == ExitCode.CLUSTER_LOST == 4
