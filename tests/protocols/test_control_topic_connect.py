"""P5 control-topic does what Hudi's Kafka Connect sink does (hudi-kafka-connect,
ConnectTransactionCoordinator / ConnectTransactionParticipant): empty commits are committed, a
failed commit starts a new one, every coordinator message carries the committed offsets, and the
commit interval is wall time since START_COMMIT. Unit tests on a virtual clock (the rig of
test_protocol_rules.py), then the simulator end to end with exactly-once verified.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from harness import local_dfs, opened
from test_protocol_rules import (  # the virtual-clock rig of the protocol tests
    CoordinatorRig,
    World,
    _msg,
    now,
    participant,
    rows,
    run,
    run_messages,
    seeks,
    topic_messages,
    wait_until,
    write_file,
)

from runtime.core import codec
from runtime.core.config import ConfigError, JobConfig
from runtime.core.fault_spec import FaultSpec
from runtime.core.messages import SeekRequest, WriteMetadataEvent, WriteStat
from runtime.hudi.table.table_config import TableError
from runtime.kafka.topic import (
    ACK_COMMIT,
    END_COMMIT,
    START_COMMIT,
    AppendRequest,
    ControlMessage,
    ControlTopic,
    FetchRequest,
    FetchResponse,
    OffsetCommit,
    TopicRecord,
)
from runtime.protocols.control_topic import OFFSETS_KEY, RESTART_COMMIT_DELAY_S, START_COMMIT_INIT_DELAY_S
from runtime.sim import check_determinism, simulate

INTERVAL = 0.5


@pytest.fixture
def world(tmp_path: Any) -> Iterator[World]:
    """The protocol tests' world (test_protocol_rules.py) on a table in a local directory."""
    dfs, path = local_dfs(tmp_path / "t")
    with opened(dfs) as hub:
        yield World(hub, dfs, path)


async def stop(rig: CoordinatorRig) -> None:
    """Stops the transaction coordinator inside the scenario (cancelled by the loop's teardown
    while it waits in the fake hub's wait_for(shield(...)), it never finishes on Python 3.11)."""
    loop = rig.coord.protocol._loop
    if loop is not None:
        loop.cancel()
        await asyncio.wait([loop], timeout=5.0)


def wall_rig(world: Any, **kw: Any) -> CoordinatorRig:
    return CoordinatorRig(world, control_topic_interval="wall", kafka_commit_interval_s=INTERVAL, **kw)


# -- 4. the commit interval is wall time since START_COMMIT ------------------------------------


def test_end_commit_follows_start_commit_by_the_commit_interval_without_any_checkpoint(world):
    rig = wall_rig(world)

    async def scenario():
        await rig.coord.start()
        await rig.bootstrap()
        await rig.wait_for(START_COMMIT, 1)
        t_start = now()
        await rig.wait_for(END_COMMIT, 1)  # no checkpoint is ever triggered
        gap = now() - t_start
        await stop(rig)
        return gap

    gap = run(scenario())
    assert INTERVAL - 0.05 <= gap <= INTERVAL + 0.05


def test_the_checkpoint_interval_is_a_named_option(world):
    rig = CoordinatorRig(world, control_topic_interval="checkpoint", kafka_commit_interval_s=INTERVAL)

    async def scenario():
        await rig.coord.start()
        await rig.bootstrap()
        await rig.wait_for(START_COMMIT, 1)
        await wait_until(lambda: now() > 4 * INTERVAL, timeout=10.0)
        assert await rig.messages(END_COMMIT) == []  # wall time alone does not end it
        await rig.jm.call("coordinator", "checkpoint_coordinator", _trigger(1))
        await rig.wait_for(END_COMMIT, 1)
        await stop(rig)

    run(scenario())
    with pytest.raises(ConfigError, match="--control-topic-interval must be one of wall, checkpoint"):
        JobConfig(control_topic_interval="barrier").validate()
    with pytest.raises(ConfigError, match="--kafka-commit-interval must be a positive number of seconds"):
        JobConfig(kafka_commit_interval_s=0).validate()


def _trigger(checkpoint_id: int) -> Any:
    from runtime.core.messages import CheckpointTrigger

    return CheckpointTrigger(checkpoint_id)


# -- 1. empty commits are committed ------------------------------------------------------------


def test_a_commit_with_no_writes_is_committed_with_the_offsets(world):
    """KafkaConnectTransactionServices.endCommit calls HoodieJavaWriteClient.commit even with no
    write statuses: a completed commit with no write stats, carrying the offsets."""
    rig = wall_rig(world)

    async def scenario():
        await rig.coord.start()
        await rig.bootstrap()
        (start,) = await rig.wait_for(START_COMMIT, 1)
        await rig.wait_for(END_COMMIT, 1)
        await rig.status(0, start.commit_time, 4, [])  # partition 0 consumed 5 rows that wrote nothing
        await rig.status(1, start.commit_time, -1, [])  # partition 1 consumed none
        await rig.wait_for(ACK_COMMIT, 1)
        starts = await rig.wait_for(START_COMMIT, 2)
        await stop(rig)
        return start.commit_time, starts[1]

    inst, nxt = run(scenario())
    check = world.view("check")
    assert check.timeline().completed_commits() == [inst]
    meta = check.read_commit_metadata(inst)
    assert meta["partitionToWriteStats"] == {}
    assert meta["extraMetadata"][OFFSETS_KEY] == "0=5,1=0"
    assert rig.coord.protocol.empty_commits == [inst] and rig.coord.protocol.commits == 1
    assert nxt.offsets == {0: 5, 1: 0}
    # a restarted coordinator reads the offsets back from the empty commit
    assert rig.coord.protocol._recover_offsets() == {0: 5, 1: 0}


# -- 2. a failed commit starts a new one -------------------------------------------------------


def test_a_commit_that_throws_starts_a_new_commit_after_the_write_status_timeout(world, monkeypatch):
    """onReceiveWriteStatus logs "Fatal error while committing file" and stays ENDED_COMMIT; the
    WRITE_STATUS_TIMEOUT starts the next commit, whose startCommit rolls the failed one back."""
    rig = wall_rig(world, write_status_timeout_s=1.0)
    client = rig.coord.client
    real_commit = client.commit
    failures = {"left": 1}

    def failing_commit(instant: str, stats: list[WriteStat], extra: dict[str, str], **kw: Any) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise TableError(f"injected: the commit file of {instant} could not be written")
        real_commit(instant, stats, extra, **kw)

    monkeypatch.setattr(client, "commit", failing_commit)

    async def scenario():
        await rig.coord.start()
        await rig.bootstrap()
        (s1,) = await rig.wait_for(START_COMMIT, 1)
        i1 = s1.commit_time
        await rig.wait_for(END_COMMIT, 1)
        t_end = now()
        await rig.status(0, i1, 9, [write_file(rig.data, i1, partition="p0", task=0)])
        await rig.status(1, i1, 4, [write_file(rig.data, i1, partition="p1", task=1)])
        s2 = (await rig.wait_for(START_COMMIT, 2))[1]
        restarted_after = now() - t_end
        i2 = s2.commit_time
        await rig.wait_for(END_COMMIT, 2)
        await rig.status(0, i2, 9, [write_file(rig.data, i2, partition="p0", task=0)])
        await rig.status(1, i2, 4, [write_file(rig.data, i2, partition="p1", task=1)])
        await rig.wait_for(ACK_COMMIT, 1)
        assert not rig.coord.protocol._loop.done()  # the transaction coordinator lives on
        await stop(rig)
        return i1, s2, restarted_after

    i1, s2, restarted_after = run(scenario())
    proto = rig.coord.protocol
    assert [(f["instant"], f["phase"]) for f in proto.failed] == [(i1, "commit")]
    assert "injected" in proto.failed[0]["error"]
    assert proto.error is None and rig.coord.error is None
    # the write-status timeout (1 s after END_COMMIT), then RESTART_COMMIT_DELAY_MS
    assert 1.0 + RESTART_COMMIT_DELAY_S - 0.05 <= restarted_after <= 1.0 + RESTART_COMMIT_DELAY_S + 0.2
    assert s2.offsets == {}  # nothing was committed: the rows are consumed again
    timeline = world.view("check").timeline()
    assert timeline.completed_commits() == [s2.commit_time]
    assert i1 not in timeline.pending_commits()  # rolled back by the next startCommit
    assert not any(e.instant == i1 for e in rig.coord.events)
    assert proto.committed_offsets == {0: 10, 1: 5}


def test_a_commit_that_cannot_start_is_retried(world, monkeypatch):
    """startNewCommit: "Failed to start a new commit, will retry" after RESTART_COMMIT_DELAY_MS."""
    rig = wall_rig(world)
    table = rig.coord.table
    real_start = table.start_instant
    failures = {"left": 1}

    def failing_start(instant: str) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise OSError("injected: the timeline is unreachable")
        real_start(instant)

    monkeypatch.setattr(table, "start_instant", failing_start)

    async def scenario():
        await rig.coord.start()
        t0 = now()
        await rig.bootstrap()
        await rig.wait_for(START_COMMIT, 1)
        elapsed = now() - t0
        await stop(rig)
        return elapsed

    first_start = run(scenario())
    assert [f["phase"] for f in rig.coord.protocol.failed] == ["start commit"]
    assert first_start >= START_COMMIT_INIT_DELAY_S + RESTART_COMMIT_DELAY_S - 0.01
    assert rig.coord.protocol.error is None


# -- 3. offsets in every control message -------------------------------------------------------


def test_every_coordinator_message_carries_the_committed_offsets(world):
    rig = wall_rig(world)

    async def scenario():
        await rig.coord.start()
        await rig.bootstrap()
        for k in range(2):
            inst = (await rig.wait_for(START_COMMIT, k + 1))[k].commit_time
            await rig.wait_for(END_COMMIT, k + 1)
            await rig.status(0, inst, 10 * (k + 1) - 1, [write_file(rig.data, inst, partition="p0", task=0)])
            await rig.status(1, inst, 5 * (k + 1) - 1, [write_file(rig.data, inst, partition="p1", task=1)])
            await rig.wait_for(ACK_COMMIT, k + 1)
        await stop(rig)

    run(scenario())
    sent = [(m.kind, m.offsets) for m in run_messages(world) if m.sender == "coordinator"]
    assert sent[:6] == [
        (START_COMMIT, {}),
        (END_COMMIT, {}),
        (ACK_COMMIT, {0: 10, 1: 5}),  # the offsets just committed
        (START_COMMIT, {0: 10, 1: 5}),
        (END_COMMIT, {0: 10, 1: 5}),
        (ACK_COMMIT, {0: 20, 1: 10}),
    ]


def test_an_end_commit_of_another_commit_ends_the_ongoing_one_at_the_leaders_offset(world):
    """handleEndCommit: "A new END_COMMIT from leader caused interruption to an existing
    transaction": cleanupOngoingTransaction, then syncKafkaOffsetWithLeader from the END's offsets."""
    world.hub.register("control-topic", ControlTopic(world.hub.env("control-topic")))
    p, ctx = participant(world)
    i_a, i_b = "20240101000000001", "20240101000000002"

    async def scenario():
        await p.handle(_msg(START_COMMIT, i_a, offsets={0: 0}))
        assert p.accept(rows(0, 8), 0).num_rows == 8
        ctx.buckets = {("p0", 0): 8}
        eager = write_file(world.view("writer.data"), i_a, task=0)
        await p.on_write_event(WriteMetadataEvent(0, 1, i_a, [eager]))
        # this participant missed START_COMMIT(b): the leader is at b, with 3 committed for us
        await p.handle(_msg(END_COMMIT, i_b, offsets={0: 3}))
        assert await topic_messages(ctx.env) == []  # no WRITE_STATUS for a commit it is not in
        assert p.commit_time is None and p.stats == {}
        assert ctx.discards == 1 and ctx.buckets == {} and ctx.forgets == 1
        assert p.expected == p.write_from == 3
        assert seeks(ctx) == [("source-0", SeekRequest(3))]
        # the next START at the same offset does not seek again
        await p.handle(_msg(START_COMMIT, "20240101000000003", offsets={0: 3}))
        assert len(seeks(ctx)) == 1 and p.commit_time == "20240101000000003"

    run(scenario())


def test_ack_commit_sets_the_committed_offset_to_the_leaders(world):
    """handleAckCommit: syncKafkaOffsetWithLeader with the ACK_COMMIT's offsets."""
    world.hub.register("control-topic", ControlTopic(world.hub.env("control-topic")))
    p, ctx = participant(world)
    i_a = "20240101000000001"

    async def scenario():
        await p.handle(_msg(START_COMMIT, i_a, offsets={0: 0}))
        p.accept(rows(0, 6), 0)
        await p.handle(_msg(END_COMMIT, i_a, offsets={0: 0}))
        # the leader's offset is the truth, even where it differs from what this task reported
        await p.handle(_msg(ACK_COMMIT, i_a, offsets={0: 9, 1: 40}))
        assert p.committed_offset == 9

    run(scenario())


# -- 5. the wire messages live in runtime.core.messages ----------------------------------------

# the encoding of these messages as they moved from runtime.kafka.topic, with the three fields a
# merge-on-read write stat added since (log version, base file, log files) and the four a
# compaction's stat added (log records, log files compacted, their size, updated records)
GOLDEN_SHA256 = "b73e911362936a63d72d2ff5f4baa6272eec4b9218783d22df7b1dfd6f519a8c"


def test_the_topic_messages_are_in_core_messages_with_unchanged_bytes():
    for cls in (ControlMessage, TopicRecord, AppendRequest, FetchRequest, FetchResponse, OffsetCommit):
        assert cls.__module__ == "runtime.core.messages", cls
    st = WriteStat("f", "p0/f.parquet", "p0", "null", 1, 1, 0, 10, 10, 1)
    m = ControlMessage(
        "WRITE_STATUS", "20240101000000123", "writer-1", partition=1, offsets={0: 3, 1: 4}, write_stats=[st]
    )
    m.last_offset, m.seq = 9, 2
    r = TopicRecord(5, m, 1.5)
    msgs = [m, r, AppendRequest(m), FetchRequest("c", 4, 10, 0.5), FetchResponse([r], 6, 0, 6), OffsetCommit("c", 7)]
    assert hashlib.sha256(b"".join(codec.encode(x) for x in msgs)).hexdigest() == GOLDEN_SHA256


# -- end to end under the simulator ------------------------------------------------------------


def _cfg(**kw: Any) -> JobConfig:
    # a commit interval of the checkpoint interval: Hudi's 60 s (3 s at the default scale) would
    # end the stream inside the first commit
    base: dict[str, Any] = dict(
        protocol="control-topic",
        source="generator",
        writers=2,
        checkpoints=4,
        records=2_000,
        bucket_flush_rows=200,
        kafka_commit_interval_s=0.2,
    )
    base.update(kw)
    return JobConfig(**base)


def _sim(cfg: JobConfig, seed: int = 1) -> dict[str, Any]:
    return simulate(cfg, seed=seed, storage="memory", max_real_s=120.0)


def test_simulated_wall_interval_commits_exactly_once_with_empty_commits():
    # commits every 0.1 s while the sources pause between checkpoints: some commits hold nothing
    result = _sim(_cfg(kafka_commit_interval_s=0.1, checkpoint_interval_s=0.4))
    assert result.status == "finished", result.error
    assert result.failovers == []
    assert result.exactly_once.verified, result.exactly_once
    assert result.empty_rounds, "no commit without data: the wall interval did not run"


def test_simulated_dfs_failure_during_a_commit_starts_a_new_commit_not_a_failover():
    """dfs.transient_error@2: the coordinator's next DFS write after checkpoint 2's trigger fails
    (a start or a commit). The transaction coordinator used to die with it and fail the job over;
    Hudi's logs it and starts a new commit."""
    result = _sim(_cfg(faults=[FaultSpec("dfs.transient_error", 2)]))
    assert result.status == "finished", result.error
    assert result.failovers == []
    assert result.exactly_once.verified, result.exactly_once


def test_simulated_participant_crash_before_its_write_status_is_repaired_by_offsets():
    # writer-1 dies after its flush, before WRITE_STATUS: the commit times out, the job fails over,
    # the next START_COMMIT's offsets make the participants consume again
    result = _sim(_cfg(write_status_timeout_s=1.0, faults=[FaultSpec("task.after_flush_before_event", 2, 1)]))
    assert len(result.failovers) == 1 and "writer-1" in result.failovers[0].error
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once


def test_an_end_commit_whose_abandoned_commit_was_rolled_back_fails_no_task():
    """explore's checkpoint-timeout seed 0: writer-0's slow snapshot holds its mailbox while the
    coordinator abandons commit 146 and rolls its files back; the END_COMMIT of 146 it then runs
    cannot write onto its rolled-back flush. Hudi's handleEndCommit throws an IOException, which
    HoodieSinkTask.put turns into a RetriableException: no failover, no WRITE_STATUS, and the
    rows are consumed again. It was an unexpected failover."""
    from runtime.sim.explore import run_schedule
    from runtime.sim.schedule import draw

    verdict, result = run_schedule(draw("checkpoint-timeout", 0), "control-topic", 0, base=JobConfig())
    assert verdict.outcome == "passed", verdict.detail
    assert result.failovers == [] and result.exactly_once.verified
    participant = result.tasks["writer-0"]["protocol"]
    assert participant["end_commit_errors"] == 1 and "DfsNotFound" in participant["last_error"]


@pytest.mark.parametrize("interval", ["wall", "checkpoint"])
def test_simulated_control_topic_is_deterministic(interval):
    cfg = _cfg(control_topic_interval=interval, faults=[FaultSpec("dfs.transient_error", 2)])
    assert check_determinism(cfg, 3, storage="memory") is None


def test_a_start_commit_after_an_unacknowledged_commit_consumes_again_from_the_committed_offset(world):
    """The first commit failed or timed out after this task's WRITE_STATUS: the next START_COMMIT
    has no offset for its partition (nothing was ever committed), so the task resumes from the
    offset last acknowledged (0), not from where its status left it: those rows were never
    committed and the failed instant's files are rolled back."""
    world.hub.register("control-topic", ControlTopic(world.hub.env("control-topic")))
    p, ctx = participant(world)
    i_a, i_b = "20240101000000001", "20240101000000002"

    async def scenario():
        await p.handle(_msg(START_COMMIT, i_a, offsets={}))
        p.accept(rows(0, 8), 0)
        await p.handle(_msg(END_COMMIT, i_a, offsets={}))
        assert p.write_from == 8 and p.committed_offset == 0  # reported, never acknowledged
        await p.handle(_msg(START_COMMIT, i_b, offsets={}))
        assert p.expected == p.write_from == 0 and ctx.forgets == 1
        assert seeks(ctx) == [("source-0", SeekRequest(0))]

    run(scenario())


def test_simulated_dfs_faults_seed_5_a_failed_first_commit_loses_nothing():
    """Found by exploring dfs-faults (seed 5, one writer, region failover): the first commit's file
    write fails; the next START_COMMIT carried no offset for the partition and the participant
    went on from its unacknowledged position, merging onto the rolled-back files: the task
    failed and the job timed out."""
    from runtime.sim.explore import draw, run_schedule

    verdict, result = run_schedule(draw("dfs-faults", 5), "control-topic", 5, storage="memory")
    assert result.status == "finished", result.error
    assert verdict.outcome == "passed", verdict.detail
    assert result.exactly_once.verified, result.exactly_once
