"""P2 message-bus as Hudi PR #3915 (commit dbf8c44) shipped it.

Each test pins one behaviour of the Java that the runtime once modelled differently: the task's
checkpoint id after a restore (-1) and the coordinator's message 0 at every initInstant; the
re-read that hands a second eager flush after an abort the literal 'aborted' (and the
--p2-fix-aborted-reread variant); CkpMessage.fromBytes with Java's String.split; the
message-client map owned by the reading role, not by the process.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from harness import active, run

from runtime.core.config import ConfigError, JobConfig, Schedule
from runtime.core.dfs import open_dfs
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.hudi.timeline import dfs_message_bus as bus
from runtime.protocols.message_bus import MessageBusCoordinator, MessageBusWriter

I0, I1, I2, I3 = "20240101000000000", "20240101000000100", "20240101000000200", "20240101000000300"


class Ctx:
    def __init__(self, table: HudiTable, config: JobConfig, last_checkpoint_id: int = -1) -> None:
        # the writer's env on the test's simulator: its waits cost virtual time, its sleeps are kept
        self.env = active().env("writer-0", dfs=table.dfs)
        self.config = config
        self.table = table
        self.task_id = 0
        self.current_instant: str | None = None
        self.last_checkpoint_id = last_checkpoint_id
        self.task_names = ["writer-0"]
        self.blocked: list[Any] = []

    def set_blocked(self, wait: Any) -> None:
        self.blocked.append(wait)


@pytest.fixture
def table(tmp_path, sim) -> HudiTable:
    """The table, with the test's simulator open (the roles' envs are on it)."""
    dfs, path = open_dfs(str(tmp_path / "t"), role="coordinator")
    return HudiTable.create_or_open(dfs, path, TableProps("t", "key", "partition", "ts"))


def config(**kw: Any) -> JobConfig:
    return JobConfig(wait_tick_s=0.1, instant_wait_timeout_s=1.0, **kw)


def writer(table: HudiTable, *, last_checkpoint_id: int = -1, **kw: Any) -> tuple[MessageBusWriter, Ctx]:
    ctx = Ctx(table, config(**kw), last_checkpoint_id)
    w = MessageBusWriter(ctx)
    run(w.open())
    return w, ctx


def flush(w: MessageBusWriter, *, eager: bool) -> str | None:
    return run(w.instant_to_write(eager=eager, has_data=True))


def read(table: HudiTable, name: str) -> bytes:
    return table.dfs.read_bytes(bus.Dfs.join(bus.message_bus_path(table.base_path), name))


# -- 1. restore: the task's checkpoint id is -1, the coordinator writes message 0 again -------------


def test_a_restored_task_reads_message_0_for_its_first_eager_flush(table):
    """initializeState leaves checkpointId at -1: prevCkp(true) = max(0, -1) = 0, whatever
    checkpoint was restored (the runtime used to read the restored id's message)."""
    driver = bus.MessageDriver(table.dfs, table.base_path)
    driver.commit_ckp(5, I0, I1)  # the message of the restored checkpoint, from before the failover
    driver.commit_ckp(0, "", I2)  # the restarted coordinator's first instant
    w, _ = writer(table, last_checkpoint_id=5)  # the write task resumes after checkpoint 5
    assert w.checkpoint_id == -1
    assert flush(w, eager=True) == I2


def test_the_barrier_flush_after_a_restore_reads_the_previous_checkpoint_s_message(table):
    """snapshotState assigns the barrier's id before flushRemaining: barrier 6 reads message 5,
    which a restarted coordinator's driver deleted; the task waits, then assumes a silent cancel
    and takes the timeline's last pending instant."""
    table.start_instant(I2)
    bus.MessageDriver(table.dfs, table.base_path).commit_ckp(0, "", I2)
    w, ctx = writer(table, last_checkpoint_id=5)
    ctx.last_checkpoint_id = 6  # barrier 6
    assert flush(w, eager=False) == I2
    assert w.checkpoint_id == 6 and w.silent_cancels == 1
    assert sum(ctx.env.sleeps) >= 1.0  # the whole instant-wait timeout


def test_the_coordinator_writes_message_0_at_every_init_instant(table):
    coord = MessageBusCoordinator(Ctx(table, config()))  # type: ignore[arg-type]
    run(coord.open())
    # initInstant after a restore from checkpoint 7: startInstant() is message 0, not 7
    run(coord.on_instant_started(7, "", I1))
    run(coord.on_all_bootstrapped())
    names = set(os.listdir(bus.message_bus_path(table.base_path)))
    assert names == {"0.commit"}
    assert read(table, "0.commit") == f",{I1}".encode()  # this.instant is BOOTSTRAP_INSTANT ""
    # notifyCheckpointComplete(8) -> startInstant(8): commitCkp(8, this.instant, new)
    run(coord.on_instant_started(8, I1, I2))
    assert read(table, "8.commit") == f"{I1},{I2}".encode()
    # a region failover: every task bootstraps again and initInstant overwrites message 0
    run(coord.on_tasks_reset())
    run(coord.on_instant_started(8, "", I3))
    assert read(table, "0.commit") == f"{I2},{I3}".encode()


# -- 2. the re-read after an abort ------------------------------------------------------------------


def test_a_second_eager_flush_after_an_abort_gets_the_literal_aborted(table):
    table.start_instant(I1)
    bus.MessageDriver(table.dfs, table.base_path).abort_ckp(2)
    w, _ = writer(table)
    w.on_snapshot(2)
    assert flush(w, eager=True) == I1  # canAbort: lastPendingInstant()
    assert flush(w, eager=True) == bus.ABORTED_CKP_INSTANT  # not confirming: the message as read
    assert w.aborted_handed_out == 1


def test_the_fix_variant_keeps_the_round_s_instant(table):
    table.start_instant(I1)
    bus.MessageDriver(table.dfs, table.base_path).abort_ckp(2)
    w, _ = writer(table, p2_fix_aborted_reread=True)
    w.on_snapshot(2)
    assert flush(w, eager=True) == I1
    assert flush(w, eager=True) == I1
    assert w.aborted_handed_out == 0


def _files_of_instant(root: str, instant: str) -> list[str]:
    return [f for _, _, files in os.walk(root) for f in files if f.endswith(f"_{instant}.parquet")]


@pytest.mark.parametrize("fix", [False, True])
def test_in_a_job_eager_flushes_after_an_abort_write_files_of_instant_aborted(tmp_path, fix):
    """#3915 as shipped: after aborted checkpoint 2, the second eager flush of each task re-reads
    message 2 and writes base files of instant 'aborted'. Its WriteMetadataEvent then fails the job
    in the coordinator's handleWriteMetaEvent: checkState(compareTimestamps(this.instant,
    GREATER_THAN_OR_EQUALS, 'aborted')) is a string comparison, and 'aborted' sorts after every
    timestamp ("Receive an unexpected event for instant aborted"). After the restore (task
    checkpointId -1; the global failover restarts the coordinator, whose new MessageDriver empties
    the bus and writes message 0 at initInstant) the tasks' eager flushes
    confirm on message 0, and the barrier of the next checkpoint k re-reads message k-1, which the
    bus no longer has: flushRemaining throws "No inflight instant when flushing data!". Every
    restart fails alike; the job gives up. The fix variant keeps the round's instant and finishes."""
    from runtime.sim.host import simulate

    cfg = JobConfig(
        protocol="message-bus",
        writers=2,
        checkpoints=5,
        records=20_000,
        bucket_flush_rows=20,
        schedule=Schedule(abort_checkpoints=[2]),
        p2_fix_aborted_reread=fix,
    )
    result = simulate(cfg, seed=1, workdir=str(tmp_path))
    files = _files_of_instant(str(tmp_path / "table"), bus.ABORTED_CKP_INSTANT)
    if fix:
        assert result.status == "finished", result.error
        assert sum(t["protocol"]["aborted_handed_out"] for t in result.tasks.values()) == 0
        assert files == [] and result.exactly_once.verified
        return
    assert files, "no base file of instant 'aborted' was written"
    first, *later = result.failovers
    assert "Receive an unexpected event for instant aborted" in first.error
    assert later and all("No inflight instant when flushing data" in f.error for f in later)
    assert result.status == "failed" and "No inflight instant when flushing data" in result.error


def test_the_fix_option_is_a_bool():
    with pytest.raises(ConfigError, match="--p2-fix-aborted-reread"):
        JobConfig(p2_fix_aborted_reread="yes").validate()  # type: ignore[arg-type]


# -- 3. CkpMessage.fromBytes with Java's String.split -----------------------------------------------


@pytest.mark.parametrize(
    "text,fields",
    [("a,b", ["a", "b"]), ("a,", ["a"]), (",", []), ("", [""]), (",b", ["", "b"]), ("a,b,c", ["a", "b", "c"])],
)
def test_java_split(text, fields):
    assert bus.java_split(text, ",") == fields


@pytest.mark.parametrize("content", [b"a,", b",", b""])
def test_a_message_without_an_inflight_field_is_no_message(table, content):
    driver = bus.MessageDriver(table.dfs, table.base_path)
    table.dfs.write_bytes(bus.Dfs.join(driver.path, "3.commit"), content)
    client = bus.MessageClient(table.dfs, table.base_path)
    assert client.get_ckp_message(3) is None
    assert client.read_errors == 1 and "ArrayIndexOutOfBoundsException" in (client.last_error or "")
    assert client.ckp_cache == {}  # a failed read is not cached: the next read tries again


@pytest.mark.parametrize("content,inflight", [(b"a,b", "b"), (b"a,b,c", "b"), (b",b", "b")])
def test_a_message_with_two_fields_or_more_reads_the_first_two(table, content, inflight):
    driver = bus.MessageDriver(table.dfs, table.base_path)
    table.dfs.write_bytes(bus.Dfs.join(driver.path, "3.commit"), content)
    msg = bus.MessageClient(table.dfs, table.base_path).get_ckp_message(3)
    assert msg is not None and msg.committed and msg.inflight_instant == inflight


def test_a_writer_keeps_waiting_on_a_message_holding_a_trailing_separator(table):
    """'I1,' is no message: the writer waits (then, past ckp 0, assumes a silent cancel)."""
    table.start_instant(I1)
    driver = bus.MessageDriver(table.dfs, table.base_path)
    table.dfs.write_bytes(bus.Dfs.join(driver.path, "2.commit"), f"{I0},".encode())
    w, ctx = writer(table)
    w.on_snapshot(2)
    assert flush(w, eager=True) == I1
    assert w.silent_cancels == 1 and sum(ctx.env.sleeps) >= 1.0
    assert w.client is not None and w.client.read_errors > 1


# -- 4. no process-global client map --------------------------------------------------------------


def test_the_client_map_belongs_to_the_reading_role(table):
    assert not hasattr(bus.MessageClient, "get_singleton") and not hasattr(bus.MessageClient, "_clients")
    a, _ = writer(table)
    b, _ = writer(table)
    assert a.client is not None and b.client is not None and a.client is not b.client
    # within one role's registry: one client per table path (MessageClient.getSingleton)
    assert a.clients.get(table.dfs.for_role("other"), table.base_path) is a.client
