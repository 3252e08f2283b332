"""What surrounds a simulated run in its process: before it, the interpreter frozen once and the
table held as a run on Ray holds it; after it, the loop shut down.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from typing import Any

from runtime.hudi.client.concurrency import hold_for_run
from runtime.hudi.client.lock import command_line
from runtime.job.prepare import ResolvedJob
from runtime.sim.loop import SimLoop, SimulationError
from runtime.sim.memory_dfs import MemoryStore
from runtime.sim.sim_run import SOURCE_DONE_S

CLEANUP_REAL_S = 30.0  # real-time guard of cancelling what still runs after the verdict


_frozen = False  # whether this process froze what was alive at its first simulated run


def freeze_the_interpreter() -> None:
    """Before a process's first simulated run: what is alive then (the modules, their classes and
    functions, pyarrow's and numpy's: some 75 thousand objects) is moved out of the garbage
    collector's sight (``gc.freeze``). It lives as long as the process, and every full collection
    walked all of it (about 20 ms, near every run of the speed benchmark's workload). Once: later
    runs' objects stay collectable. The flag, not ``gc.get_freeze_count()``, says it was done: that
    count walks every frozen object (about 1.5 ms, paid by every run of a bounded search)."""
    global _frozen
    if not _frozen:
        _frozen = True
        if not gc.get_freeze_count():
            gc.freeze()


def hold_table(job: ResolvedJob, store: MemoryStore | None) -> contextlib.AbstractContextManager[Any]:
    """A table on the real disk is held as a run on Ray holds it (one writer at a time): its lock's
    I/O and heartbeat are real time, outside the simulated network, disk and trace
    (:mod:`runtime.hudi.client.lock`; none under a multi-writer --concurrency-mode). The simulated
    disk has nothing to hold."""
    if store is not None:
        return contextlib.nullcontext()
    os.makedirs(job.config.table, exist_ok=True)
    return hold_for_run(job.config, command_line())


def shutdown_loop(loop: SimLoop) -> None:
    """Cancels what still runs (a deadlocked task, agents that poll forever) and closes the loop."""
    loop.disarm_guards()
    loop.arm_real_time_guard(CLEANUP_REAL_S)  # a task that ignores cancellation cannot hang us
    try:
        tasks = sorted(loop.pending_tasks(), key=lambda t: t.get_name())
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=SOURCE_DONE_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except SimulationError:
        pass  # what is left is dropped with the loop
    finally:
        loop.close()
