"""What a run reports about the cluster it ran on: where each role ran, its memory, start-up
time, and the requests an S3 endpoint served (next to the client-side DFS counters)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import ray
from ray.actor import ActorHandle

from runtime.core.dfs import Dfs
from runtime.core.roles import writer_index
from runtime.core.storage import check_location, endpoint_url
from runtime.lab.results import ProcessPlace, RunPlacement
from runtime.lab.s3_endpoint import EndpointCounts, diff_counts, fetch_endpoint_counts


def check_storage(dfs: Dfs, table: str) -> None:
    """Raises StorageError naming the fix when the table's S3 endpoint or bucket is unusable."""
    check_location(dfs.fs, table)


def endpoint_counts(table: str) -> EndpointCounts | None:
    """The request counts of the table's S3 endpoint so far, if it serves them (the loopback
    endpoint of runtime.lab.s3_endpoint does; AWS and other servers do not: None)."""
    url = endpoint_url(table)
    return fetch_endpoint_counts(url) if url else None


def endpoint_served(table: str, before: EndpointCounts | None) -> EndpointCounts | None:
    """What the endpoint served since ``before`` (None when it does not report counts)."""
    if before is None:
        return None
    after = endpoint_counts(table)
    return diff_counts(before, after) if after is not None else None


def run_placement(processes: dict[str, ActorHandle[Any]], strategy: str, slots: int) -> RunPlacement:
    """Node, process and memory of every live process, the roles each hosts, and where every
    role ran (a role's entry names its process; a task manager's memory is shared by its
    ``slots``)."""
    refs = {name: actor.where.remote() for name, actor in processes.items()}
    procs: dict[str, ProcessPlace] = {}
    for name, ref in refs.items():
        try:
            procs[name] = ray.get(ref, timeout=10)
        except ray.exceptions.RayError as exc:  # a dead actor: its place is unknown
            procs[name] = ProcessPlace(error=type(exc).__name__, roles=[])
    roles = {role: _without_roles(p) for p in procs.values() for role in p["roles"]}
    per_node = Counter(r["node_id"] for r in roles.values() if "node_id" in r)
    writer_nodes = {r["node_id"] for n, r in roles.items() if writer_index(n) is not None and "node_id" in r}
    return RunPlacement(
        strategy=strategy,
        roles_per_node=dict(per_node),
        writer_nodes=len(writer_nodes),
        processes=procs,
        roles=roles,
        slots_per_task_manager=slots,
    )


def _without_roles(process: ProcessPlace) -> ProcessPlace:
    place = process.copy()
    place.pop("roles", None)
    return place
