"""The simulator keeps the interpreter's own objects out of the garbage collector's full
collections (``gc.freeze`` before a process's first run), once: a later run's objects, its
garbage included, stay collectable."""

from __future__ import annotations

import gc

from runtime.core.config import JobConfig
from runtime.sim.host import simulate

CFG = JobConfig(protocol="message-bus", source="generator", writers=2, checkpoints=2, records=80, buckets=2)


def test_the_interpreter_is_frozen_once_and_later_runs_stay_collectable():
    first = simulate(CFG, seed=0, storage="memory", verify=False)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    second = simulate(CFG, seed=0, storage="memory", verify=False)
    assert gc.get_freeze_count() == frozen  # the second run froze nothing of the first's
    assert second.sim.trace_sha256 == first.sim.trace_sha256
