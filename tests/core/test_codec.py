"""Tests of runtime.core.codec with the messages of runtime.core.messages.

Every control message and every task state crosses a host boundary as these bytes, so a message
that does not survive encode/decode, or bytes that differ between two equal messages, break
replay and recovery. Errors must be a CodecError that says what is wrong.
"""

from __future__ import annotations

import dataclasses
import inspect

import msgpack
import pytest

from runtime.core import codec, messages
from runtime.core.codec import CodecError, decode, encode, roundtrip
from runtime.core.messages import (
    AppendRequest,
    Barrier,
    BlockedWait,
    CheckpointAck,
    CheckpointNotice,
    CheckpointTrigger,
    CheckpointView,
    CommitAckEvent,
    CommitRecord,
    CompactionCommitEvent,
    CompactionPlanEvent,
    CompletedCheckpoint,
    ControlMessage,
    CoordinatorState,
    CoordinatorView,
    DataBatch,
    EndOfInput,
    EventBufferState,
    FetchRequest,
    FetchResponse,
    FileSliceRequest,
    InputFinished,
    InstantRelease,
    InstantTimeReply,
    InstantTimeRequest,
    InstantWait,
    JobManagerView,
    MailInfo,
    MailRun,
    OffsetCommit,
    PartitionFiles,
    RoundEmitted,
    RpcCoordinatorState,
    SeekRequest,
    SourceState,
    TaskDump,
    TaskFailure,
    TasksReset,
    TaskState,
    TopicRecord,
    WriteMetadataEvent,
    WriteStat,
)


def stat(i: int, partition: str = "p00") -> WriteStat:
    return WriteStat(
        file_id=f"{i:08d}-aaaa-bbbb-cccc-dddddddddddd-0",
        path=f"{partition}/{i:08d}-x-0_0-0-0_20240101000000000.parquet",
        partition=partition,
        prev_commit="null" if i % 2 else "20231231000000000",
        num_writes=10 + i,
        num_inserts=i,
        num_update_writes=10,
        total_write_bytes=4096 + i,
        file_size=4096 + i,
        keys_written=i + 1,
    )


def event(task: int, ckp: int, n_stats: int, **kw) -> WriteMetadataEvent:
    return WriteMetadataEvent(
        task_id=task,
        checkpoint_id=ckp,
        instant="20240101000000123",
        write_stats=[stat(i, f"p{i % 2:02d}") for i in range(n_stats)],
        **kw,
    )


# One sample of every message class, with every field set away from its default where possible.
SAMPLES = [
    stat(3),
    WriteStat("f-0", "p/f-0_0-0-0_1.parquet", "p", "null", 0, 0, 0, 0, 0),  # keys_written default
    event(1, 7, 3, last_batch=True),
    event(0, 2, 0, end_input=True, bootstrap=True),
    WriteMetadataEvent(task_id=3, checkpoint_id=-1, instant=messages.BOOTSTRAP_INSTANT, bootstrap=True),
    CommitAckEvent(checkpoint_id=4),
    CheckpointTrigger(checkpoint_id=5, timestamp=1712345678.25),
    CheckpointNotice(checkpoint_id=6, reason="declined by writer-1"),
    TaskState(
        task_id=2,
        checkpoint_id=8,
        instant="20240101000000999",
        uncommitted=[event(2, 8, 2), event(2, 8, 1, last_batch=True)],
    ),
    TaskState(task_id=0, checkpoint_id=0, instant=""),
    SourceState(task_id=1, checkpoint_id=3, offset=12345),
    CheckpointAck(
        role="writer-0", checkpoint_id=9, state=encode(TaskState(0, 9, "20240101000000001", [event(0, 9, 1)]))
    ),
    CheckpointAck(role="source-0", checkpoint_id=1, state=bytes(range(256))),
    RoundEmitted(source="source-1", round=3, rows=500),
    TaskFailure(role="writer-1", error="RuntimeError('boom')\nwith a second line", checkpoint_id=4),
    Barrier(checkpoint_id=3),
    EndOfInput(),
    InputFinished(final_offsets={0: 1200, 1: 980}),
    TasksReset(resume_checkpoint_id=4, reason="writer-1 crashed"),
    InstantTimeRequest(task_id=1, checkpoint_id=-1),
    InstantTimeReply(checkpoint_id=3, status="PENDING"),
    InstantTimeReply(checkpoint_id=3, status="OK", instant="20240101000000123"),
    ControlMessage(
        "WRITE_STATUS",
        "20240101000000123",
        "writer-1",
        partition=1,
        offsets={0: 3},
        write_stats=[stat(2)],
        last_offset=9,
    ),
    TopicRecord(offset=5, message=ControlMessage("ACK_COMMIT", "1", "coordinator", offsets={0: 4}), appended_at=1.5),
    AppendRequest(ControlMessage("START_COMMIT", "2", "coordinator", offsets={1: 0}, seq=3)),
    FetchRequest(consumer="writer-0", offset=4, max_records=10, timeout_s=0.5),
    FetchResponse(records=[], next_offset=3, log_start_offset=3, high_watermark=8, error="OFFSET_OUT_OF_RANGE"),
    OffsetCommit(consumer="coordinator", offset=7),
    SeekRequest(offset=120),
    FileSliceRequest("p0", "20240101000000002", timeline="0f3a"),
    PartitionFiles(names=[".f-1_1.log.1_0-0-0"], sizes=[96]),
    CompactionPlanEvent(
        "20240101000000500",
        "p1",
        "f-1",
        "20240101000000100",
        "f-1_0-0-0_20240101000000100.parquet",
        [".f-1_x.log.1_0-0-0"],
        4,
    ),
    CompactionCommitEvent("20240101000000500", "f-1", 2, stat(1), "", 4),
    CompactionCommitEvent("20240101000000500", "f-2", 0, None, "OSError: disk full", 5),
    CommitRecord("20240101000000001", checkpoint=2, rows=300, files=4, committed_at=1.25),
    CoordinatorState(checkpoint_id=3, instant="20240101000000002", events=[event(1, 3, 2)]),
    EventBufferState(checkpoint_id=4, instant="20240101000000003", events=[event(0, 4, 1, last_batch=True)]),
    RpcCoordinatorState(buffers=[EventBufferState(5, "20240101000000004")]),
    CompletedCheckpoint(checkpoint_id=6, round=6, states={"writer-0": b"\x00\x01", "coordinator": b""}),
    JobManagerView(
        status="running",
        current=3,
        waiting_for="acks of checkpoint 3",
        checkpoints={2: CheckpointView("completed", 2, "", ["source-0", "writer-0"]), 3: CheckpointView("pending")},
        rounds_emitted={"source-0": 3},
        failures=[TaskFailure("writer-1", "boom", 3)],
    ),
    CoordinatorView(
        instant="20240101000000005",
        commits=[CommitRecord("20240101000000004", 2, 100, 2)],
        empty_rounds=[1],
        releases=[InstantRelease("20240101000000005", 2.5)],
        resets=[{"resume_checkpoint_id": 2, "instant": "20240101000000005"}],
        protocol={"bus_recreated": 1},
    ),
    InstantRelease("20240101000000006", 3.0),
    CheckpointView("aborted", 4, "aborted by the schedule", ["writer-0"]),
    MailInfo(1, 12, "notifyCheckpointComplete", "ckp 2 complete", 2, 0.5),
    MailRun("mail", "CommitAckEvent", "CommitAckEvent(ckp=1)", 2.0, seq=4, priority=0, ended_at=2.25),
    BlockedWait("instant initialize", "a new pending instant", 0.5),
    InstantWait("20240101000000002", 1.0, 1.5),
    TaskDump("writer-1", "unreachable: RayActorError"),
    TaskDump(
        role="writer-0",
        state="running",
        task_id=0,
        running=MailRun("default action", "defaultAction", "processElement -> instantToWrite", 1.5, step=7),
        blocked=BlockedWait("instant initialize", "a CommitAckEvent", 1.25, "CommitAckEvent", 2),
        blocked_s=2.5,
        mailbox=[MailInfo(0, 11, "CommitAckEvent", "CommitAckEvent(ckp=2)", 0, 0.75)],
        current_instant="20240101000000123",
        flushes={"bucket": 2, "barrier": 1},
        protocol={"confirming": True},
        waits=[InstantWait("20240101000000001", 0.5, 0.75)],
    ),
]


def message_classes_of(module) -> set[type]:
    return {
        obj
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if obj.__module__ == module.__name__ and dataclasses.is_dataclass(obj)
    }


def test_samples_cover_every_message_class():
    # A new message added to runtime/core/messages.py must get a sample here (and so a roundtrip test).
    # DataBatch is the one exception: its records travel as Arrow, not through the codec.
    assert message_classes_of(messages) - {DataBatch} == {type(s) for s in SAMPLES}


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_roundtrip_gives_an_equal_message_of_the_same_class(msg):
    back = decode(encode(msg))
    assert type(back) is type(msg)
    assert back == msg
    assert roundtrip(msg) == msg


def test_nested_write_stats_come_back_as_write_stats():
    ev = event(1, 7, 3)
    back = decode(encode(ev), WriteMetadataEvent)
    assert [type(s) for s in back.write_stats] == [WriteStat] * 3
    assert back.write_stats[2].keys_written == 3
    assert back.write_stats[1].partition == "p01"


def test_task_state_keeps_its_events_and_their_stats():
    st = SAMPLES[8]
    back = decode(encode(st), TaskState)
    assert len(back.uncommitted) == 2
    assert all(isinstance(e, WriteMetadataEvent) for e in back.uncommitted)
    assert back.uncommitted[1].last_batch is True
    assert back.uncommitted[0].write_stats == st.uncommitted[0].write_stats


def test_state_nested_as_bytes_in_an_ack_decodes_again():
    ack = decode(encode(SAMPLES[11]), CheckpointAck)
    assert isinstance(ack.state, bytes)
    inner = decode(ack.state, TaskState)
    assert inner.uncommitted[0].write_stats[0].file_id.startswith("00000000")


def test_lists_of_messages_and_plain_data_roundtrip():
    data = {"events": [event(0, 1, 1), CommitAckEvent(2)], "n": 3, 7: "int key"}
    assert decode(encode(data)) == data


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_equal_messages_encode_to_identical_bytes(msg):
    twin = decode(encode(msg))
    assert twin is not msg
    assert encode(twin) == encode(msg)
    # also a message built independently (not through the codec)
    assert encode(dataclasses.replace(msg)) == encode(msg)


def test_different_messages_encode_differently():
    assert encode(CommitAckEvent(1)) != encode(CommitAckEvent(2))
    assert encode(CommitAckEvent(1)) != encode(CheckpointTrigger(1))


def test_garbage_bytes_raise_codec_error():
    with pytest.raises(CodecError, match="not a msgpack message"):
        decode(b"\xc1")  # 0xc1 is never used by msgpack
    with pytest.raises(CodecError, match="not a msgpack message"):
        decode(encode(SAMPLES[8])[:-5])  # truncated
    with pytest.raises(CodecError, match="not a msgpack message"):
        decode(encode(CommitAckEvent(1)) + b"\x00")  # trailing bytes


def test_codec_error_is_a_value_error():
    # callers that catch ValueError for bad input keep working
    assert issubclass(CodecError, ValueError)


def test_unknown_message_type_is_named():
    data = msgpack.packb({"@t": "NoSuchEvent", "x": 1}, use_bin_type=True)
    with pytest.raises(CodecError, match="unknown message type 'NoSuchEvent'"):
        decode(data)


def test_unknown_field_is_named():
    data = msgpack.packb({"@t": "CommitAckEvent", "checkpoint_id": 1, "bogus": 2}, use_bin_type=True)
    with pytest.raises(CodecError, match=r"CommitAckEvent has no fields \['bogus'\]"):
        decode(data)


def test_unknown_field_inside_a_nested_message_is_named():
    plain = codec._to_plain(event(0, 1, 1))
    plain["write_stats"][0]["colour"] = "red"
    with pytest.raises(CodecError, match=r"WriteStat has no fields \['colour'\]"):
        decode(msgpack.packb(plain, use_bin_type=True))


def test_missing_required_field_is_a_codec_error():
    data = msgpack.packb({"@t": "CommitAckEvent"}, use_bin_type=True)
    with pytest.raises(CodecError, match="cannot build CommitAckEvent"):
        decode(data)


def test_expected_type_is_checked():
    data = encode(CommitAckEvent(3))
    assert decode(data, CommitAckEvent) == CommitAckEvent(3)
    with pytest.raises(CodecError, match="expected TaskState, got CommitAckEvent"):
        decode(data, TaskState)
    with pytest.raises(CodecError, match="expected TaskState, got int"):
        decode(encode(5), TaskState)


def test_two_message_classes_with_one_name_are_refused():
    @codec.message
    @dataclasses.dataclass
    class CodecTestOnly:
        x: int

    assert decode(encode(CodecTestOnly(4)), CodecTestOnly) == CodecTestOnly(4)

    with pytest.raises(TypeError, match="CodecTestOnly"):

        @codec.message
        @dataclasses.dataclass
        class CodecTestOnly:  # noqa: F811
            y: int


def test_equal_messages_with_dicts_in_different_insertion_order_encode_identically():
    from runtime.core.config import JobConfig, Schedule

    a = JobConfig(schedule=Schedule(notify_delay_s={1: 0.5, 2: 1.0}))
    b = JobConfig(schedule=Schedule(notify_delay_s={2: 1.0, 1: 0.5}))
    assert a == b
    assert encode(a) == encode(b)
