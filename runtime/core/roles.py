"""The names of a job's roles: how one role addresses another, how the hosts key their tables.

A role's name is its address on either host (a Ray actor's hosted role, the simulator's network
entry) and the key of its counters, traces and checkpointed state, so the names are a contract
between every layer: spelled here once. The protocols' own roles (the timeline server, the control
topic) and the compaction operators name themselves in their modules.
"""

from __future__ import annotations

COORDINATOR = "coordinator"  # Hudi's StreamWriteOperatorCoordinator (or the protocol's coordinator side)
JOB_MANAGER = "job-manager"  # Flink's checkpoint coordinator, on the JobManager
DRIVER = "driver"  # the process that starts the job: its own DFS traffic and trace events
WRITER = "writer"  # a write task's kind; the tasks are writer-0, writer-1, ...
SOURCE = "source"  # a source's kind; source-i feeds writer-i


# the roles Flink runs inside its JobManager process (the JobMaster holds the checkpoint
# coordinator and the operator coordinators): what passes between them is a method call, never a
# network message that could be lost
JOB_MANAGER_PROCESS = frozenset((COORDINATOR, JOB_MANAGER))


def writer_name(task_id: int) -> str:
    return f"{WRITER}-{task_id}"


def source_name(task_id: int) -> str:
    return f"{SOURCE}-{task_id}"


def writer_index(name: str) -> int | None:
    """The task id of a write task's name, None for any other role."""
    head, _, tail = name.rpartition("-")
    return int(tail) if head == WRITER and tail.isdigit() else None
