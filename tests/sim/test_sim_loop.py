"""The simulator's parts on their own: the virtual-time loop, the network, the trace."""

from __future__ import annotations

import asyncio
import gc
import random
import threading
import time

import pytest

from runtime.core import codec
from runtime.core.codec import from_wire, to_wire
from runtime.core.env import WaitTimeout
from runtime.core.messages import CheckpointNotice, CommitAckEvent
from runtime.sim.loop import SimLoop, SimulationAborted, SimulationStuck, VirtualTimeLimit
from runtime.sim.network import Delay, SimNetwork
from runtime.sim.recorder import SimTracer, TraceRecorder, first_divergence, trace_sha256
from runtime.sim.sim_env import SIM_EPOCH, SimEnv


def run(coro, **kw):
    loop = SimLoop(**kw)
    try:
        return loop.run_until_complete(coro), loop
    finally:
        loop.close()


# -- the loop ----------------------------------------------------------------------------------


def test_an_hour_of_sleep_takes_no_real_time():
    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        return loop.time()

    t = time.perf_counter()
    now, _ = run(main())
    assert now == pytest.approx(3600)
    assert time.perf_counter() - t < 1.0


def test_wait_for_times_out_on_virtual_time():
    async def main():
        loop = asyncio.get_running_loop()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 30)
        return loop.time()

    now, _ = run(main())
    assert now == pytest.approx(30)


def test_timers_at_the_same_time_run_in_the_order_they_were_set():
    order = []

    async def main():
        loop = asyncio.get_running_loop()
        for i in range(50):
            loop.call_at(1.0, order.append, i)
        loop.call_at(0.5, order.append, "early")
        await asyncio.sleep(2)

    run(main())
    assert order == ["early", *range(50)]


def test_executor_work_runs_inline_on_the_loop_thread():
    async def main():
        return await asyncio.to_thread(threading.get_ident)

    ident, loop = run(main())
    assert ident == threading.get_ident()
    assert loop.inline_executor_calls == 1


def test_a_run_collects_young_objects_less_often_and_gives_the_process_its_collector_back():
    before = gc.get_threshold()

    async def main():
        return gc.get_threshold()

    during, _ = run(main())
    assert during[0] >= 20_000 and during[1:] == before[1:]
    assert gc.get_threshold() == before

    async def fails():
        raise ValueError("the run's own error")

    with pytest.raises(ValueError):
        run(fails())
    assert gc.get_threshold() == before


def test_a_wait_nothing_can_end_is_reported_not_hung():
    async def main():
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimulationStuck, match="no callback is ready and no timer is pending"):
        run(main())


def test_the_virtual_time_limit_stops_the_loop():
    with pytest.raises(VirtualTimeLimit, match="past the limit"):
        run(asyncio.sleep(100), max_virtual_s=10)


def test_abort_stops_at_the_next_iteration():
    async def main():
        asyncio.get_running_loop().abort("enough")
        await asyncio.sleep(1)

    with pytest.raises(SimulationAborted, match="enough"):
        run(main())


# -- the network -------------------------------------------------------------------------------


class Sink:
    RPC_METHODS = ("take", "slow", "boom")

    def __init__(self) -> None:
        self.got: list[object] = []

    def take(self, msg):
        self.got.append(msg)
        return CommitAckEvent(len(self.got))

    async def slow(self, _msg):
        await asyncio.sleep(5)

    def boom(self, _msg):
        raise ValueError("no")

    def hidden(self, _msg):
        return "should not be reachable"


def _pair(loop, recorder, delay=None):
    from runtime.sim.memory_dfs import MemoryDfs, MemoryStore

    net = SimNetwork(loop, seed=7, recorder=recorder, delay=delay or Delay.uniform(0.0, 0.01))
    dfs = MemoryDfs(MemoryStore())
    a = SimEnv("a", dfs, net, seed=7, recorder=recorder)
    SimEnv("b", dfs, net, seed=7, recorder=recorder)
    sink = Sink()
    net.bind("b", sink)
    net.bind("a", object())
    return a, sink


def test_messages_of_one_pair_arrive_in_order_whatever_the_delays():
    async def main():
        loop = asyncio.get_running_loop()
        a, sink = _pair(loop, TraceRecorder(loop.time))
        for i in range(200):
            a.send("b", "take", CheckpointNotice(i))
        await asyncio.sleep(1)
        return sink.got

    got, _ = run(main())
    assert [m.checkpoint_id for m in got] == list(range(200))


def test_a_call_decodes_what_was_encoded_and_the_reply_too():
    async def main():
        loop = asyncio.get_running_loop()
        a, sink = _pair(loop, TraceRecorder(loop.time))
        notice = CheckpointNotice(3, "why")
        reply = await a.call("b", "take", notice, timeout=1.0)
        return notice, sink.got[0], reply, a

    notice, received, reply, a = run(main())[0]
    assert received == notice and received is not notice  # a copy, through the codec
    assert reply == CommitAckEvent(1)
    assert a.metrics.snapshot().rpcs == {"take": 1}


def test_a_message_delivered_to_a_role_killed_before_it_runs_is_not_handled():
    async def main():
        loop = asyncio.get_running_loop()
        recorder = TraceRecorder(loop.time)
        a, sink = _pair(loop, recorder, delay=Delay.fixed(0.5))
        a.send("b", "take", CheckpointNotice(1))
        # set after the delivery's timer, for the same instant: runs after the delivery, before
        # the handler (as a dispatch task cancelled before its first step)
        loop.call_at(loop.time() + 0.5, a.network.kill, "b")
        await asyncio.sleep(1)
        return sink.got, recorder

    (got, recorder), _ = run(main())
    assert got == []
    assert [e[1] for e in recorder.events if e[1] == "deliver"] == ["deliver"]


def test_a_handler_look_up_that_fails_reaches_the_caller_as_the_error():
    class Gone:
        RPC_METHODS = ("take",)

        def rpc_handler(self, method):
            raise ConnectionError("gone")

    async def main():
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        a, _ = _pair(loop, TraceRecorder(loop.time))
        a.network.bind("b", Gone())
        with pytest.raises(ConnectionError, match="gone"):
            await a.call("b", "take", None, timeout=1.0)
        return errors

    errors, _ = run(main())
    assert errors == []


def test_the_memory_disk_lists_and_finds_as_the_file_system_under_it_does():
    from runtime.core.dfs import Dfs
    from runtime.sim.memory_dfs import MemoryDfs, MemoryStore

    memory = MemoryDfs(MemoryStore())
    memory.mkdirs("t/.hoodie/sub")
    memory.create_empty("t/.hoodie/empty")
    memory.write_bytes("t/.hoodie/full", b"abc")
    plain = Dfs(memory.fs)
    for path in ("t", "t/.hoodie", "t/.hoodie/sub", "t/.hoodie/empty", "t/.hoodie/full", "t/none", "t/.hoodie/full/x"):
        assert memory.exists(path) == plain.exists(path), path
    for path in ("t", "t/.hoodie", "t/.hoodie/sub"):
        assert memory.list_dir(path) == plain.list_dir(path), path
    assert [(e.name, e.size, e.is_dir) for e in memory.list_dir("t/.hoodie")] == [
        ("empty", 0, False),
        ("full", 3, False),
        ("sub", 0, True),
    ]


def test_wire_format_is_the_ray_hosts():
    msg = CheckpointNotice(9, "x")
    assert to_wire(msg) == codec.encode(msg)
    assert from_wire(to_wire(msg)) == msg
    ray_env = pytest.importorskip("actors.ray_env")
    assert ray_env.to_wire(msg) == to_wire(msg)
    assert ray_env.from_wire(to_wire(msg)) == from_wire(to_wire(msg))


def test_calls_time_out_on_virtual_time_and_errors_reach_the_caller():
    async def main():
        loop = asyncio.get_running_loop()
        a, _ = _pair(loop, TraceRecorder(loop.time))
        # a timeout that fires names the option that sets it: the RPC ask timeout unless the
        # caller says which (the job manager's calls are bounded by the checkpoint timeout)
        with pytest.raises(WaitTimeout, match=r"^a waited 1.0s for the reply of b.slow \(--rpc-timeout\)$"):
            await a.call("b", "slow", None, timeout=1.0)
        with pytest.raises(WaitTimeout, match=r"b.slow \(--checkpoint-timeout\)$"):
            await a.call("b", "slow", None, timeout=1.0, option="--checkpoint-timeout")
        with pytest.raises(WaitTimeout, match=r"^a waited 0.5s for a reply \(--job-timeout\)$"):
            await a.wait_for(asyncio.Event().wait(), 0.5, "a reply", option="--job-timeout")
        with pytest.raises(ValueError, match="no"):
            await a.call("b", "boom", None, timeout=1.0)
        with pytest.raises(ValueError, match="has no RPC method 'hidden'"):
            await a.call("b", "hidden", None, timeout=1.0)
        with pytest.raises(LookupError, match="no handle for 'c'"):
            await a.call("c", "take", None)
        a.send("b", "boom", None)
        await asyncio.sleep(0.1)
        return a.send_errors

    errors, _ = run(main())
    assert errors == ["b.boom: ValueError: no"]


def test_wall_time_starts_at_the_fixed_epoch():
    async def main():
        loop = asyncio.get_running_loop()
        a, _ = _pair(loop, TraceRecorder(loop.time))
        await asyncio.sleep(2.5)
        return a.wall_time()

    assert run(main())[0] == SIM_EPOCH + 2.5


def test_delay_parsing():
    assert repr(Delay.parse("uniform:0.001:0.002")) == "uniform:0.001:0.002"
    assert Delay.parse("fixed:0.5")(random.Random(1)) == 0.5
    assert 0 <= Delay.parse("exp:0.001:0.01")(random.Random(1)) <= 0.01
    with pytest.raises(ValueError, match="bad delay"):
        Delay.parse("normal:1")


# -- the trace ---------------------------------------------------------------------------------


def test_the_recorder_scrubs_paths_and_addresses_and_spots_divergence():
    now = [0.0]
    seen = []
    ref = TraceRecorder(lambda: now[0], scrub={"/tmp/x/table": "<table>"})
    ref.add("e", "r", "/tmp/x/table/.hoodie", "<obj at 0x7f00deadbeef>", {"b": 1, "a": 2})
    assert ref.events == [(0, "e", "r", "<table>/.hoodie", "<obj at 0x?>", '{"a": 2, "b": 1}')]
    replay = TraceRecorder(
        lambda: now[0], scrub={"/tmp/y/table": "<table>"}, expected=ref.events, on_divergence=seen.append
    )
    replay.add("e", "r", "/tmp/y/table/.hoodie", "<obj at 0x7f00cafe0000>", {"a": 2, "b": 1})
    assert replay.divergence is None
    replay.add("extra", "r")
    assert seen and seen[0]["index"] == 1 and seen[0]["first"] is None
    assert first_divergence(ref.events, replay.events) == seen[0]
    assert trace_sha256(ref.events) == trace_sha256(replay.events[:1])


def test_a_step_records_the_same_trace_event_with_chrome_tracing_on_or_off():
    """SimTracer.complete skips building the Chrome event when Chrome tracing is off; the
    simulator's trace (and so its hash) must not depend on that switch."""
    events = []
    for chrome in (True, False):
        recorder = TraceRecorder(lambda: 1.5)
        tracer = SimTracer("writer-0", recorder, enabled=chrome, clock=lambda: 1.5)
        tracer.complete("processElement", 1.0, 1.25, thread="mailbox", cat="default-action")
        tracer.complete("flush p0/1", 1.25, 1.0, args={"rows": 3})  # clock skew: no negative duration
        events.append(recorder.events)
        assert len(tracer.events) == (2 if chrome else 0)
    assert events[0] == events[1]


def test_a_failing_callback_goes_to_the_loops_exception_handler_and_the_run_goes_on():
    seen, ran = [], []

    def boom():
        raise ValueError("boom")

    loop = SimLoop()
    try:
        loop.set_exception_handler(lambda _loop, context: seen.append(context))
        loop.call_soon(boom)
        loop.call_soon(ran.append, 1)
        loop.call_later(1.0, loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    assert ran == [1]
    assert [type(c["exception"]) for c in seen] == [ValueError]
    assert seen[0]["message"].startswith("Exception in callback") and "boom" in seen[0]["message"]


def test_the_loops_pending_tasks_are_asyncios_all_tasks_of_it():
    """What a run's end cancels: every task asyncio knows of on this loop (gather's, wait_for's,
    ensure_future's, a task's own), not those of an earlier loop still alive, none done."""
    seen = []

    async def forever():
        await asyncio.sleep(3600)

    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)
        asyncio.ensure_future(forever())
        loop.create_task(forever(), name="named")
        gathered = asyncio.gather(forever(), forever())
        waited = loop.create_task(asyncio.wait_for(forever(), 10))
        await asyncio.sleep(1)
        seen.append((set(loop.pending_tasks()), asyncio.all_tasks(loop)))
        gathered.cancel()
        waited.cancel()
        await asyncio.sleep(0)
        seen.append((set(loop.pending_tasks()), asyncio.all_tasks(loop)))
        rest = [t for t in loop.pending_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, gathered, return_exceptions=True)

    other = SimLoop()
    left_behind = other.create_task(forever())  # another loop's task, not done
    other.run_until_complete(asyncio.sleep(0))
    try:
        run(main())
    finally:
        left_behind.cancel()
        other.run_until_complete(asyncio.gather(left_behind, return_exceptions=True))
        other.close()
    (mine, theirs), (after, theirs_after) = seen
    assert mine == theirs and len(mine) == 7 and left_behind not in mine
    assert after == theirs_after and len(after) < len(mine)
