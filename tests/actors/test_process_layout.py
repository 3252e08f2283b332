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
