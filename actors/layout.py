"""Which process hosts which role: Flink's task managers and slots, on Ray.

A Flink job runs its tasks in task manager processes, each with a number of slots
(``taskmanager.numberOfTaskSlots``); a slot holds one parallel instance of each operator chain,
here a write task and the source that feeds it. The coordinator and the job manager's
checkpointing run on the job manager; here each keeps a process of its own, as do the protocol's
own roles (the timeline server, the control topic), which live through failovers.

A merge-on-read job's compaction operators take slots too (Flink's slot sharing puts one subtask of
every operator in a slot): compaction task ``compact-i`` runs in the task manager of slot ``i``
(wrapping round when there are more compaction tasks than write tasks), the plan operator and the
commit sink (parallelism 1) in the first task manager.

Every role keeps its own mailbox, coroutines, environment and counters inside its process, so a
blocked mailbox blocks only its task, as a blocked task thread does in Flink; a crash of a task
manager's process takes every task it hosts down with it, as a lost TaskManager does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime.core.roles import SOURCE, WRITER
from runtime.writer.compaction import COMMIT_SINK, COMPACT_TASK, PLAN_OPERATOR

TASK_MANAGER = "taskmanager"


@dataclass(frozen=True)
class ProcessLayout:
    writers: int
    slots: int  # write tasks (with their sources) per task manager
    compaction_tasks: int = 0  # merge-on-read: compact-0 .. compact-(n-1), with the plan operator and the sink

    @classmethod
    def for_job(
        cls, writers: int, slots_per_task_manager: int, cluster_cpus: float, compaction_tasks: int = 0
    ) -> ProcessLayout:
        """``slots_per_task_manager`` 0: two task managers per CPU (at most one per writer),
        the writers spread evenly over them."""
        if slots_per_task_manager > 0:
            slots = slots_per_task_manager
        else:
            managers = max(1, min(writers, int(2 * max(1.0, cluster_cpus))))
            slots = math.ceil(writers / managers)
        return cls(writers, max(1, slots), compaction_tasks)

    @property
    def task_managers(self) -> int:
        return math.ceil(self.writers / self.slots)

    def task_manager_of(self, task_id: int) -> int:
        return task_id // self.slots

    def process_of(self, role: str) -> str:
        """The process hosting ``role``: ``taskmanager-K`` for writer-i and source-i, else the
        role's own process (named after it)."""
        head, _, tail = role.rpartition("-")
        if head in (WRITER, SOURCE) and tail.isdigit():
            return f"{TASK_MANAGER}-{self.task_manager_of(int(tail))}"
        if self.compaction_tasks and head == COMPACT_TASK and tail.isdigit():
            return f"{TASK_MANAGER}-{self.task_manager_of(int(tail) % self.writers)}"
        if self.compaction_tasks and role in (PLAN_OPERATOR, COMMIT_SINK):
            return f"{TASK_MANAGER}-0"
        return role

    def roles_of(self, process: str) -> list[str]:
        head, _, tail = process.rpartition("-")
        if head != TASK_MANAGER:
            return [process]
        first = int(tail) * self.slots
        ids = range(first, min(first + self.slots, self.writers))
        roles = [f"{kind}-{i}" for i in ids for kind in (WRITER, SOURCE)]
        roles += [f"{COMPACT_TASK}-{i}" for i in range(self.compaction_tasks) if i % self.writers in ids]
        if self.compaction_tasks and int(tail) == 0:
            roles += [PLAN_OPERATOR, COMMIT_SINK]
        return roles

    def bundle_of(self, process: str) -> int | None:
        """The placement-group bundle of a process: K for task manager K; None for the job
        manager's side, which is not in the group (:mod:`actors.placement`)."""
        head, _, tail = process.rpartition("-")
        return int(tail) if head == TASK_MANAGER else None
