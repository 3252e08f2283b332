"""Where the job's processes run: a placement group spreads the task managers over the nodes.

Bundle K holds task manager K (:mod:`actors.layout`), with its slots' write tasks and sources, as
Flink's resource manager gives each TaskManager its own container. The job manager's side (the
coordinator's, the job manager's and the protocol roles' processes) is not in the group: it is
Flink's JobManager, a process apart, and Ray's default scheduling places it. Were it a bundle of
the group, SPREAD over N nodes could give it a node of its own and put task managers together
(three bundles on two nodes: two share one, whichever two). The processes reserve no CPU (their
roles are I/O-bound coroutines), so each bundle reserves a token of Ray's memory resource only
because Ray needs a non-empty bundle to place it. Not a share of a CPU: the group is made while
Spark prepares the stream, and a fraction of a CPU held would leave a one-CPU Ray task (Ray Data's,
in the hand-off) no whole CPU beside Spark's executor, waiting for ever.

Strategies (``--placement``): ``spread`` (default; best effort, also fine on one node), ``pack``,
``strict-spread`` (one task manager per node: needs as many nodes as task managers) and ``none``
(Ray's default scheduling, no placement group).
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from runtime.core.errors import UserError

STRATEGIES = {"spread": "SPREAD", "pack": "PACK", "strict-spread": "STRICT_SPREAD", "none": None}
BUNDLE = {"memory": 1 << 20}  # 1 MiB of Ray's logical memory resource: a token, see the docstring
log = logging.getLogger(__name__)


class PlacementError(UserError, RuntimeError):
    """The placement group cannot be placed; the message names the strategy and the fix."""


class Placement:
    """The job's placement group (None for ``none``) and each role's bundle."""

    def __init__(self, strategy: str, task_managers: int, *, timeout_s: float = 60.0) -> None:
        if strategy not in STRATEGIES:
            raise PlacementError(f"unknown placement {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        self.strategy = strategy
        self.task_managers = task_managers
        self.pg: PlacementGroup | None = None
        if STRATEGIES[strategy] is None:
            return
        bundles = [dict(BUNDLE) for _ in range(task_managers)]
        self.pg = placement_group(bundles, strategy=STRATEGIES[strategy], name="")
        try:
            ray.get(self.pg.ready(), timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            nodes = len([n for n in ray.nodes() if n.get("Alive")])
            remove_placement_group(self.pg)
            self.pg = None
            hint = (
                f"strict-spread needs {task_managers} nodes (one per task manager), the cluster has {nodes}; "
                "use --placement spread, or more --slots-per-task-manager"
                if strategy == "strict-spread"
                else f"each bundle needs {BUNDLE['memory']} bytes of Ray's memory resource; check the cluster's "
                "free memory (ray status)"
            )
            raise PlacementError(
                f"the placement group ({task_managers} bundles, {strategy}) was not "
                f"placed within {timeout_s:.0f}s: {hint}"
            ) from None

    def options(self, bundle: int | None) -> dict[str, Any]:
        """Extra ``.options()`` for a process actor placed in ``bundle`` (``ProcessLayout.bundle_of``;
        None: the job manager's side, outside the group)."""
        if self.pg is None or bundle is None:
            return {}
        return {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=bundle
            )
        }

    def remove(self) -> None:
        if self.pg is not None:
            try:
                remove_placement_group(self.pg)
            except Exception as exc:  # noqa: BLE001 - the cluster may be gone already
                log.info("the placement group was not removed: %s", exc)
            self.pg = None
