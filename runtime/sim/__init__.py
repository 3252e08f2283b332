"""The deterministic simulator: the same roles, one process, virtual time, a seed.

FoundationDB-simulation / TigerBeetle-VOPR / madsim in miniature: :mod:`runtime.sim.loop` is an
asyncio event loop whose clock is virtual, :mod:`runtime.sim.sim_env` the roles' environment on it,
:mod:`runtime.sim.network` the in-process network with seeded delays, :mod:`runtime.sim.chooser`
the one place every nondeterministic decision of a run is made, :mod:`runtime.sim.host` runs
a job (:mod:`runtime.sim.sim_run` builds and supervises it like ``actors/job.py`` does). Nothing
here imports Ray.
"""

from __future__ import annotations

from runtime.sim.host import check_determinism, simulate
from runtime.sim.loop import SimLoop, SimulationError
from runtime.sim.network import Delay

__all__ = ["simulate", "check_determinism", "SimLoop", "SimulationError", "Delay"]
