"""The deterministic simulator end to end: the unchanged roles on virtual time, from a seed.

The scenario tests assert the outcomes the Ray host gives for the same schedules
(tests/ray/test_job_ray.py). Runs are on the simulated disk (``storage="memory"``: no parquet,
exactly-once verified by the project's own snapshot reader) unless a test reads the parquet
files: every protocol's run writes a real Hudi table that the official reader verifies, and the
tests of the table's rows, of a used workdir and of the command line use the real disk too.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from runtime.core.config import JobConfig
from runtime.faults.scenarios import deadlock_config, lock_held_config
from runtime.protocols import PROTOCOLS
from runtime.sim import check_determinism, simulate
from runtime.sim.recorder import first_divergence

RESULT_KEYS = {
    "protocol",
    "writers",
    "table",
    "status",
    "error",
    "rows_in",
    "checkpoints",
    "commits",
    "deadlock",
    "dfs_ops",
    "rpcs",
    "exactly_once",
    "seed",
    "virtual_s",
    "wall_s",
    "trace_sha256",
    "trace_events",
}
SEED = 5
MAX_REAL_S = 120.0


@pytest.fixture
def simdir(tmp_path):
    """Tables in memory (/dev/shm) when the machine has it: the runs write many small parquet
    files, and a loaded disk makes real time, not the simulation, the slow part."""
    shm = "/dev/shm"
    if not (os.path.isdir(shm) and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = tempfile.mkdtemp(prefix="commitlab-sim-test-", dir=shm)
    try:
        yield pathlib.Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _cfg(**kw) -> JobConfig:
    base = dict(source="generator", writers=2, checkpoints=3, records=2_000, bucket_flush_rows=400)
    base.update(kw)
    return JobConfig(**base)


def _sim(cfg: JobConfig, simdir, name: str = "run", **kw):
    """A run on the simulated disk, or (``storage="disk"``) a real table under ``simdir/name``."""
    kw.setdefault("storage", "memory")
    workdir = str(simdir / name) if kw["storage"] == "disk" else None
    return simulate(cfg, workdir=workdir, max_real_s=MAX_REAL_S, **kw)


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_commits_every_checkpoint_exactly_once(simdir, protocol):
    # control-topic commits by checkpoint only with its "checkpoint" interval (Hudi's own, the
    # default, is wall time: tests/protocols/test_control_topic_connect.py)
    result = _sim(_cfg(protocol=protocol, control_topic_interval="checkpoint"), simdir, seed=SEED, storage="disk")
    assert result.status == "finished", result.error
    assert RESULT_KEYS <= set(result.to_json())
    assert [c["checkpoint"] for c in result.commits] == [1, 2, 3]
    assert result.figures.rows_in == 2_000
    eo = result.exactly_once
    assert eo.verified, eo
    assert eo.expected == eo.actual == 1_000
    assert result.deadlock is None
    # the fixed epoch: stable names (two-phase-commit's writers name theirs after the table's
    # latest instant, the Unix epoch on an empty table)
    assert result.commits[0]["instant"].startswith("1970" if protocol == "two-phase-commit" else "20260101")


@pytest.mark.parametrize("codec", ["snappy", "gzip"])
def test_base_files_carry_the_chosen_codec_and_encodings_and_the_official_reader_reads_them(simdir, codec):
    # gzip is Hudi's hoodie.parquet.compression.codec default and ours; snappy the named option (parquet_format.py)
    import pyarrow.parquet as pq

    result = _sim(_cfg(parquet_compression=codec), simdir, codec, seed=SEED, storage="disk")
    assert result.exactly_once.verified, result.exactly_once
    files = sorted((simdir / codec).rglob("*.parquet"))
    assert files
    codecs = {
        pq.ParquetFile(f).metadata.row_group(0).column(i).compression
        for f in files
        for i in range(pq.ParquetFile(f).metadata.num_columns)
    }
    assert codecs == {codec.upper()}
    # parquet-mr's first-page rule: columns distinct in every row are PLAIN, a repeated one is not
    meta = pq.ParquetFile(files[-1]).metadata
    encodings = {
        meta.schema.column(i).name: set(meta.row_group(0).column(i).encodings) for i in range(meta.num_columns)
    }
    for name in ("_hoodie_commit_seqno", "_hoodie_record_key", "key"):
        assert "RLE_DICTIONARY" not in encodings[name] and "PLAIN_DICTIONARY" not in encodings[name], encodings
    assert "RLE_DICTIONARY" in encodings["_hoodie_file_name"] or "PLAIN_DICTIONARY" in encodings["_hoodie_file_name"]


@pytest.mark.parametrize("seed", range(8))
def test_control_topic_end_of_input_while_the_last_ack_is_in_flight(simdir, seed):
    """Found by the simulator: end of input arriving while the last ACK_COMMIT is in flight once
    rolled back an instant that was already committed (seeds 0-7 include failing ones)."""
    result = _sim(_cfg(protocol="control-topic"), simdir, seed=seed, verify=False)
    assert result.status == "finished", result.error


def test_the_same_seed_gives_the_same_trace(simdir):
    # the most concurrent protocol (agents polling a topic) and the deadlock schedule
    assert check_determinism(_cfg(protocol="control-topic"), SEED, storage="memory") is None
    cfg = deadlock_config(_cfg(protocol="operator-event"))
    a = _sim(cfg, simdir, "a", seed=3, trace=True, verify=False)
    b = _sim(cfg, simdir, "b", seed=3, trace=True, verify=False)
    assert a.sim.trace_sha256 == b.sim.trace_sha256 and a.sim.trace == b.sim.trace
    assert a.deadlock == b.deadlock and a.commits == b.commits


def test_runs_of_one_process_give_the_figures_of_a_fresh_process(simdir):
    """A process runs many jobs (a search, an exploration) and keeps the last job's stream and its
    batches' byte counts: a job that differs only in its rows' payload width, run after another,
    counts and verifies what it counts in a process of its own."""
    import runtime.flink.source as source
    import runtime.sim.job_workload as job_workload

    def figures(cfg: JobConfig) -> tuple[object, ...]:
        r = _sim(cfg, simdir, seed=2)
        return (
            r.sim.trace_sha256,
            r.data_written["input_bytes"],
            r.data_written,
            r.to_json()["dfs_ops"],
            r.exactly_once.verified,
        )

    narrow, wide = _cfg(protocol="message-bus"), _cfg(protocol="message-bus", payload_bytes=64)
    after_another = (figures(narrow), figures(wide), figures(wide))
    job_workload._WORKLOAD.clear()  # what a fresh process starts with
    job_workload._EXPECTED.clear()
    source._BATCH_BYTES.clear()
    fresh = figures(wide)
    assert after_another[1] == after_another[2] == fresh
    assert after_another[0][1] < fresh[1]  # the wider payload is counted as such


def test_different_seeds_change_the_schedule_not_the_rows(simdir):
    from runtime.lab.verify import read_snapshot

    cfg = _cfg(protocol="message-bus")
    a = _sim(cfg, simdir, "a", seed=1, trace=True, storage="disk")
    b = _sim(cfg, simdir, "b", seed=2, trace=True, storage="disk")
    assert a.sim.trace_sha256 != b.sim.trace_sha256
    div = first_divergence(a.sim.trace, b.sim.trace)
    assert div is not None and div["first"][0] != div["second"][0]  # delivery times differ
    assert [(c["checkpoint"], c["rows"]) for c in a.commits] == [(c["checkpoint"], c["rows"]) for c in b.commits]
    assert a.exactly_once.verified and b.exactly_once.verified
    cols = ["key", "partition", "ts", "payload", "_hoodie_record_key", "_hoodie_partition_path"]
    rows_a, rows_b = (read_snapshot(r.table).select(cols).sort_by("key") for r in (a, b))
    assert rows_a.equals(rows_b)


@pytest.mark.parametrize("seed", [0, 7])
def test_deadlock_schedule_gives_the_ray_outcome(simdir, seed):
    # Ray: operator-event deadlocks with checkpoint 1 committed, the ack behind the blocked flush
    p1 = _sim(deadlock_config(_cfg(protocol="operator-event")), simdir, "p1", seed=seed)
    assert p1.status == "deadlocked"
    d = p1.deadlock
    assert d.releasing_mail == "CommitAckEvent(ckp=2)"
    assert d.mailbox[d.mailbox_position].kind == "CommitAckEvent"
    assert "instantToWrite" in d.running_mail and "round 3" in d.running_mail
    assert d.waiting_for.startswith("instant initialize")
    assert d.blocked_s >= 2.0 and "own mailbox" in d.explanation
    assert [c["checkpoint"] for c in p1.commits] == [1]
    assert p1.empty_rounds == [2]
    assert p1.figures.rpcs["operator_event"] == 2
    assert p1.exactly_once is None
    # Ray: message-bus finishes, rounds 1 and 3 committed, verified
    p2 = _sim(deadlock_config(_cfg(protocol="message-bus")), simdir, "p2", seed=seed)
    assert p2.status == "finished", p2.error
    assert [c["checkpoint"] for c in p2.commits] == [1, 3]
    assert p2.empty_rounds == [2]
    assert p2.exactly_once.verified
    assert "operator_event" not in p2.figures.rpcs


@pytest.mark.parametrize("protocol", ["ckp-meta", "timeline-server"])
def test_deadlock_schedule_deadlocks_in_the_ckp_meta_era_too(simdir, protocol):
    """Hudi 0.11 to 1.0 read the instant from ckp_meta but still release a writer blocked after an
    empty round only with a CommitAckEvent: P1's deadlock (docs/FIDELITY.md)."""
    result = _sim(deadlock_config(_cfg(protocol=protocol)), simdir, seed=SEED)
    assert result.status == "deadlocked"
    assert result.deadlock.releasing_mail == "CommitAckEvent(ckp=2)"
    assert [c["checkpoint"] for c in result.commits] == [1]


@pytest.mark.parametrize("protocol", ["ckp-meta", "timeline-server"])
def test_with_hudi_1_0s_empty_commits_the_quiet_round_does_not_deadlock(simdir, protocol):
    """Hudi 1.0 commits a round without data (hoodie.allow.empty.commit defaults to true since
    HUDI-7819): no instant is reused, no CommitAckEvent is needed, the writers go on."""
    result = _sim(deadlock_config(_cfg(protocol=protocol, allow_empty_commit="true")), simdir, seed=SEED)
    assert result.status == "finished", result.error
    assert result.deadlock is None and "operator_event" not in result.figures.rpcs
    assert [c["checkpoint"] for c in result.commits] == [1, 2, 3]
    assert [c["rows"] for c in result.commits][1] == 0  # checkpoint 2's empty commit
    assert result.exactly_once.verified


def test_hoodie_allow_empty_commit_is_refused_where_the_release_has_no_such_option(simdir):
    from runtime.core.config import ConfigError

    with pytest.raises(ConfigError, match="came with 0.14, HUDI-6127"):
        _sim(_cfg(protocol="operator-event", allow_empty_commit="true"), simdir, seed=SEED)


@pytest.mark.parametrize("protocol", ["coordination-rpc", "coordination-rpc-async", "control-topic"])
def test_deadlock_schedule_completes_under_every_other_protocol(simdir, protocol):
    result = _sim(deadlock_config(_cfg(protocol=protocol)), simdir, seed=SEED)
    assert result.status == "finished", result.error
    assert result.deadlock is None
    assert result.exactly_once.verified


def test_lock_held_fails_sync_rpc_and_async_rides_it_out(simdir):
    # as on Ray (tests/ray/test_job_ray.py): the request times out under the held lock, the task
    # fails, the job fails over (the spurious restart of #19902) from checkpoint 1 and finishes
    sync = _sim(lock_held_config(_cfg(protocol="coordination-rpc")), simdir, "s", seed=SEED)
    assert len(sync.failovers) == 1
    failure = sync.failovers[0]
    assert "InstantTimeRequest" in failure.error and "#19902" in failure.error
    assert failure.restored_checkpoint == 1
    assert sync.status == "finished" and sync.exactly_once.verified
    one_attempt = _sim(lock_held_config(_cfg(protocol="coordination-rpc", max_restarts=0)), simdir, "s1", seed=SEED)
    assert one_attempt.status == "failed" and "#19902" in one_attempt.error
    assert [c["checkpoint"] for c in one_attempt.commits] == [1]
    asyn = _sim(lock_held_config(_cfg(protocol="coordination-rpc-async")), simdir, "a", seed=SEED)
    assert asyn.status == "finished", asyn.error
    assert asyn.failovers == []
    assert [c["checkpoint"] for c in asyn.commits] == [1, 2, 3]
    assert asyn.exactly_once.verified
    assert max(asyn.figures.writer_blocked_s.values()) >= 1.0  # waited through the 2.5 s lock


def test_limits_end_a_run_with_a_reason(simdir):
    short = _sim(_cfg(), simdir, "v", seed=SEED, max_virtual_s=0.1)
    assert short.status == "timed-out" and "virtual-time limit" in short.error
    assert short.sim.virtual_s < 0.5
    guarded = simulate(_cfg(), seed=SEED, storage="memory", max_real_s=1e-6)
    assert guarded.status == "timed-out" and "RealTimeLimit" in guarded.error


def test_a_used_workdir_is_refused(simdir):
    from runtime.core.config import ConfigError

    _sim(_cfg(checkpoints=1, records=100), simdir, "w", seed=SEED, verify=False, storage="disk")
    with pytest.raises(ConfigError, match="already holds a table"):
        _sim(_cfg(checkpoints=1, records=100), simdir, "w", seed=SEED, storage="disk")


def test_cli_checks_determinism_and_writes_result_json(simdir):
    from runtime.cli import main

    out = simdir / "out"
    code = main(
        [
            "simulate",
            "--protocol",
            "operator-event",
            "--scenario",
            "deadlock",
            "--seed",
            "4",
            "--check-determinism",
            "--trace",
            "--no-verify",
            "--out",
            str(out),
            "--quiet",
            "--storage",
            "memory",
        ]
    )
    assert code == 3  # deadlocked, as the run command's exit code says
    with open(out / "result.json") as f:
        result = json.load(f)
    assert result["determinism"]["identical"] is True
    assert result["deadlock"]["releasing_mail"] == "CommitAckEvent(ckp=2)"
    with open(out / "trace.jsonl") as f:
        assert sum(1 for _ in f) == result["trace_events"]
    assert not os.path.exists(out / ".determinism")


def test_same_trace_in_another_process_without_ray(simdir):
    """Another interpreter, another hash seed: the same trace, and Ray never imported."""
    fields = dict(
        source="generator", writers=2, checkpoints=2, records=800, bucket_flush_rows=400, protocol="timeline-server"
    )
    here = _sim(JobConfig(**fields), simdir, "here", seed=SEED, verify=False)
    code = (
        "import sys, json\n"
        "from runtime.core.config import JobConfig\n"
        "from runtime.cli import main as _cli\n"
        "from runtime.sim import simulate\n"
        f"cfg = JobConfig(**{json.dumps(fields)})\n"
        f"r = simulate(cfg, seed={SEED}, storage='memory', verify=False)\n"
        "print(json.dumps([r.sim.trace_sha256, 'ray' in sys.modules]))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    sha, ray_imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert sha == here.sim.trace_sha256
    assert ray_imported is False
