# ruff: noqa: F811  (the world fixture is imported from test_protocol_rules)
"""P2b ckp-meta: P1's confirming/CommitAckEvent loop reading ckp_meta (Hudi 0.11 to 1.0)."""

from __future__ import annotations

import pytest
from test_protocol_rules import WriterCtx, config, run, world  # noqa: F401 (fixture)

from runtime.core.config import JobConfig
from runtime.core.messages import CommitAckEvent
from runtime.hudi.timeline.ckp_meta import CkpMetadata
from runtime.protocols.base import InstantWaitTimeout
from runtime.protocols.ckp_meta import CkpMetaWriter
from runtime.sim import simulate

I_A, I_B = "20240101000000002", "20240101000000003"


def writer_of(world, cfg, **kw):
    ctx = WriterCtx(world.hub.env("writer-0"), cfg, world.view("writer-0"), **kw)
    return CkpMetaWriter(ctx), ctx


def test_the_writer_waits_for_a_new_instant_in_ckp_meta_not_on_the_timeline(world):
    cfg = config(wait_tick_s=0.1, checkpoint_timeout_s=10.0)
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    meta.start_instant(I_A)
    world.view("coordinator").start_instant(I_B)  # on the timeline only: a writer must not see it
    w, ctx = writer_of(world, cfg, last_checkpoint_id=1, current_instant=I_A)

    async def scenario():
        import asyncio

        async def later():
            await asyncio.sleep(0.55)
            meta.commit_instant(I_A)
            meta.start_instant(I_B)

        helper = asyncio.ensure_future(later())
        got = await w.instant_to_write(eager=True, has_data=True)
        await helper
        return got

    assert run(scenario()) == I_B
    assert ctx.blocked_log[0].releasing_mail == "CommitAckEvent"
    assert world.ops("writer-0").get("list", 0) >= 5  # one listing of ckp_meta per poll


def test_a_commit_ack_ends_confirming_and_the_instant_is_reused(world):
    cfg = config()
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    meta.start_instant(I_A)
    w, ctx = writer_of(world, cfg, last_checkpoint_id=1, current_instant=I_A)
    w.on_operator_event(CommitAckEvent(1))  # the empty round's ack ran before the flush

    assert run(w.instant_to_write(eager=True, has_data=True)) == I_A
    assert w.acks_received == 1 and not w.confirming and ctx.blocked_log == []


def test_a_deleted_ckp_meta_directory_times_out_naming_it(world):
    cfg = config(wait_tick_s=0.5, checkpoint_timeout_s=2.0, instant_wait_timeout_s=0.0)
    meta = CkpMetadata(world.dfs.for_role("coordinator"), world.path)
    meta.bootstrap()
    meta.start_instant(I_A)
    meta.delete_all()  # #8060
    w, _ = writer_of(world, cfg, last_checkpoint_id=1, current_instant=I_A)
    with pytest.raises(InstantWaitTimeout) as err:
        run(w.instant_to_write(eager=True, has_data=True))
    text = str(err.value)
    # TimeWait: 5 sleeps of 0.5 s (2.5 s > the 2 s checkpoint timeout), then the error
    assert "Timeout(2500ms) while waiting for instant initialize" in text
    assert "ckp_meta directory" in text and "#8060" in text


@pytest.mark.parametrize("protocol", ["ckp-meta", "timeline-server"])
def test_end_to_end_in_the_simulator_is_exactly_once(tmp_path, protocol):
    cfg = JobConfig(
        source="generator", writers=2, checkpoints=4, records=2000, bucket_flush_rows=300, protocol=protocol
    )
    result = simulate(cfg, seed=3, workdir=str(tmp_path), storage="memory")
    assert result.status == "finished", result.error
    assert result.exactly_once.verified, result.exactly_once


@pytest.mark.parametrize("protocol", ["ckp-meta", "timeline-server"])
def test_p1s_deadlock_survives_in_the_ckp_meta_era(tmp_path, protocol):
    """The deadlock schedule (an empty round, its completion notified late, then an eager flush)
    blocks the writer in instantToWrite while the CommitAckEvent that would end the wait sits in
    its own mailbox: the loop and the ack after an empty round are P1's."""
    from runtime.faults.scenarios import deadlock_config

    cfg = deadlock_config(JobConfig(source="generator", writers=2, protocol=protocol))
    result = simulate(cfg, seed=5, workdir=str(tmp_path), storage="memory")
    assert result.status == "deadlocked"
    assert result.deadlock.releasing_mail.startswith("CommitAckEvent")
