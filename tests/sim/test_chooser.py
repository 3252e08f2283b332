"""The simulator's chooser: every nondeterministic decision of a run asks it, and the default
seeded random chooser gives the runs of before (the same trace for the same seed)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from runtime.core.config import JobConfig
from runtime.sim.chooser import ChoicePoint, RandomChooser
from runtime.sim.explore import run_schedule
from runtime.sim.host import simulate
from runtime.sim.loop import SimLoop
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.network import SimNetwork
from runtime.sim.recorder import TraceRecorder
from runtime.sim.schedule import draw
from runtime.sim.sim_env import SimEnv

CFG = JobConfig(protocol="message-bus", source="generator", writers=3, checkpoints=3, records=300, buckets=3)


class Recording(RandomChooser):
    """The random strategy, counting the decisions it is asked for by kind."""

    def __init__(self, seed: int, *, orders_ready: bool = False, reverse: bool = False) -> None:
        super().__init__(seed)
        self.orders_ready = orders_ready
        self.reverse = reverse
        self.asked: Counter[ChoicePoint] = Counter()

    def choose(self, point: ChoicePoint, n: int, stream: str = "") -> int:
        self.asked[point] += 1
        if point is ChoicePoint.READY_ORDER and self.reverse:
            return n - 1
        return super().choose(point, n, stream)

    def draw(self, point: ChoicePoint, stream: str, model: Callable[[random.Random], float]) -> float:
        self.asked[point] += 1
        return super().draw(point, stream, model)

    def source(self, point: ChoicePoint, stream: str) -> random.Random:
        self.asked[point] += 1
        return super().source(point, stream)


def _run(chooser: RandomChooser | None = None, seed: int = 3) -> str:
    return simulate(CFG, seed=seed, storage="memory", verify=False, chooser=chooser).sim.trace_sha256


def test_the_default_chooser_is_the_seeded_random_one():
    assert _run(RandomChooser(3)) == _run() == _run(Recording(3))
    assert _run(RandomChooser(4)) != _run()


def test_every_delay_and_role_draw_of_a_run_asks_the_chooser():
    chooser = Recording(3)
    _run(chooser)
    assert chooser.asked[ChoicePoint.MESSAGE_DELAY] > 100  # one per message and per reply
    assert chooser.asked[ChoicePoint.ROLE_DRAW] == 0  # message-bus's roles draw nothing of their own
    assert chooser.asked[ChoicePoint.READY_ORDER] == 0  # FIFO: the loop does not ask


def test_a_roles_own_draws_come_from_the_chooser_at_its_first_draw() -> None:
    """A role's ``env.rng`` is the chooser's source of the role's name, a new one per incarnation
    (a restarted process draws new numbers), asked for when the role first draws."""
    chooser = Recording(3)
    loop = SimLoop(chooser=chooser)
    try:
        recorder = TraceRecorder(loop.time)
        network = SimNetwork(loop, 3, recorder, chooser=chooser)
        dfs = MemoryDfs(MemoryStore(), role="writer-0")
        first, again = (SimEnv("writer-0", dfs, network, seed=3, recorder=recorder, incarnation=i) for i in (0, 1))
        assert chooser.asked[ChoicePoint.ROLE_DRAW] == 0
        assert first.rng.random() == random.Random("commitlab-sim/3/role/writer-0").random()
        assert first.rng is first.rng is chooser.source(ChoicePoint.ROLE_DRAW, "writer-0")
        assert again.rng.random() == random.Random("commitlab-sim/3/role/writer-0#1").random()
    finally:
        loop.close()


def test_a_scenario_draws_what_it_leaves_open_from_the_chooser():
    chooser = Recording(5)
    assert draw("task-crash", 5, chooser) == draw("task-crash", 5)
    assert chooser.asked[ChoicePoint.SCHEDULE] == 1


def test_the_loop_runs_ready_callbacks_in_the_order_the_chooser_picks():
    order: list[int] = []
    loop = SimLoop(chooser=Recording(0, orders_ready=True, reverse=True))
    try:
        for i in range(4):
            loop.call_soon(order.append, i)
        loop.call_later(1.0, loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    assert order == [3, 2, 1, 0]


def test_a_chooser_that_reorders_ready_callbacks_steers_the_run():
    # Reversing every ready queue may also reorder one connection's deliveries, which Ray never
    # does, so its runs are not all schedules the real system can take (commitlab check reorders
    # only callbacks that neither a role's own order nor a connection's fixes): this seed's is one.
    chooser = Recording(2, orders_ready=True, reverse=True)
    schedule = draw("checkpoint-abort", 2)
    verdict, result = run_schedule(schedule, "message-bus", 2, storage="memory", chooser=chooser)
    fifo = run_schedule(schedule, "message-bus", 2, storage="memory")[1]
    assert chooser.asked[ChoicePoint.READY_ORDER] > 0
    assert result.sim.trace_sha256 != fifo.sim.trace_sha256
    assert result.status.value == fifo.status.value == "finished"
