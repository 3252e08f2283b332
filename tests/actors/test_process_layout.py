"""Flink's task managers and slots: which process hosts which role."""

from __future__ import annotations

from actors.layout import ProcessLayout


def test_slots_hold_a_write_task_and_its_source_together():
    layout = ProcessLayout(writers=5, slots=2)
    assert layout.task_managers == 3
    assert [layout.process_of(r) for r in ("writer-0", "source-1", "writer-2", "source-4")] == [
        "taskmanager-0",
        "taskmanager-0",
        "taskmanager-1",
        "taskmanager-2",
    ]
    assert layout.roles_of("taskmanager-1") == ["writer-2", "source-2", "writer-3", "source-3"]
    assert layout.roles_of("taskmanager-2") == ["writer-4", "source-4"]  # the last one is not full
    assert layout.process_of("coordinator") == "coordinator" and layout.roles_of("coordinator") == ["coordinator"]


def test_the_default_is_two_task_managers_a_cpu_and_never_an_empty_one():
    assert ProcessLayout.for_job(2, 0, cluster_cpus=2).slots == 1  # two writers: a process each
    assert ProcessLayout.for_job(256, 0, cluster_cpus=2).slots == 64  # four task managers of 64 slots
    assert ProcessLayout.for_job(256, 0, cluster_cpus=2).task_managers == 4
    assert ProcessLayout.for_job(10, 0, cluster_cpus=16).slots == 1  # no more managers than writers
    assert ProcessLayout.for_job(10, 3, cluster_cpus=2).task_managers == 4  # --slots-per-task-manager 3


def test_compaction_operators_share_the_task_managers_slots():
    """Flink's slot sharing: compaction task i in slot i's task manager (wrapping round), the plan
    operator and the commit sink in the first one; a failover kills a task manager with them."""
    layout = ProcessLayout(writers=3, slots=2, compaction_tasks=4)
    assert [layout.process_of(f"compact-{i}") for i in range(4)] == [
        "taskmanager-0",
        "taskmanager-0",
        "taskmanager-1",
        "taskmanager-0",
    ]
    assert layout.process_of("compaction-plan") == layout.process_of("compaction-commit") == "taskmanager-0"
    assert layout.roles_of("taskmanager-0") == [
        "writer-0",
        "source-0",
        "writer-1",
        "source-1",
        "compact-0",
        "compact-1",
        "compact-3",
        "compaction-plan",
        "compaction-commit",
    ]
    assert layout.roles_of("taskmanager-1") == ["writer-2", "source-2", "compact-2"]
    assert ProcessLayout(writers=3, slots=2).roles_of("taskmanager-0") == [
        "writer-0",
        "source-0",
        "writer-1",
        "source-1",
    ]
