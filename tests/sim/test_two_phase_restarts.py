"""The restart scenarios (runtime.sim.explore.RESTART_SCENARIOS) on two-phase-commit: two jobs in
sequence on one table, the official reader verifying the second. They are the shapes of the
Iceberg Flink sink's restart issues (#10892, #18098, #16011), with Iceberg's rule modelled: a
checkpoint at or below the job's max committed checkpoint id counts as committed already."""

from __future__ import annotations

import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.lab.fault_matrix import PASSED, VIOLATION
from runtime.protocols.two_phase_commit import instant_of
from runtime.sim import simulate
from runtime.sim.explore import RESTART_SCENARIOS, restart_replay_command, run_restart_scenario

PROTOCOL = "two-phase-commit"
TABLE_TYPES = ["copy-on-write", "merge-on-read"]


def _run(tmp_path, scenario: str, table_type: str, **kw):
    return run_restart_scenario(scenario, PROTOCOL, str(tmp_path / "w"), table_type=table_type, **kw)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_restore_from_an_older_checkpoint_under_a_kept_job_id_loses_the_new_checkpoints(tmp_path, table_type):
    """#10892: checkpoints 4 and 5 of the restored job are at or below the max committed 5."""
    verdict, _, second = _run(tmp_path, "restore-older-checkpoint", table_type)
    assert verdict.outcome == VIOLATION and verdict.invariant == "exactly-once", verdict
    assert second.exactly_once.mismatched > 0 and second.exactly_once.lost == 0
    assert second.coordinator.protocol["already_committed"] == [3, 4, 5]  # 3: the restored one, committed


def test_restore_from_an_older_checkpoint_under_a_new_job_id_renames_and_commits(tmp_path):
    """Without --job-id the writers see the restored job's next names taken and name anew."""
    verdict, _, second = _run(tmp_path, "restore-older-checkpoint", "copy-on-write", job_id="")
    assert verdict.outcome == PASSED, verdict
    assert all(t["protocol"]["rewound"] for t in second.tasks.values())
    assert [c["checkpoint"] for c in second.commits][-2:] == [4, 5]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_restart_without_state_under_the_same_job_id_drops_every_commit(tmp_path, table_type):
    """#18098: the checkpoint ids start from 1 again, below the table's max committed 5."""
    verdict, first, second = _run(tmp_path, "restart-without-state", table_type)
    assert verdict.outcome == VIOLATION and verdict.invariant == "exactly-once", verdict
    assert len(second.commits) == len(first.commits)  # nothing of the second job's
    assert second.coordinator.protocol["already_committed"] == [1, 2, 3, 4, 5]


def test_a_restart_without_state_under_a_new_job_id_commits(tmp_path):
    verdict, _, second = _run(tmp_path, "restart-without-state", "copy-on-write", job_id="")
    assert verdict.outcome == PASSED, verdict
    assert second.coordinator.protocol["already_committed"] == []


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_changed_job_id_does_not_commit_a_restored_checkpoint_twice(tmp_path, table_type):
    """#16011's shape: under the new id the restored checkpoint 5 looks uncommitted; its instant's
    name is on the timeline, so it is skipped, and the table holds no row twice."""
    verdict, first, second = _run(tmp_path, "changed-job-id", table_type)
    assert verdict.outcome == PASSED, verdict
    job = first.coordinator.protocol["job_id"]
    assert second.coordinator.protocol["skipped_committed"] == [instant_of(job, 5)]
    assert [c["checkpoint"] for c in second.commits] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_every_scenario_has_a_replay_command_with_its_flags():
    for scenario in RESTART_SCENARIOS:
        cmd = restart_replay_command(scenario, PROTOCOL, "merge-on-read")
        assert cmd.count("commitlab run --protocol two-phase-commit") == 2 and "--table T" in cmd
    assert "--from-checkpoint 3" in restart_replay_command("restore-older-checkpoint", PROTOCOL, "copy-on-write")


def test_from_checkpoint_the_store_does_not_hold_is_refused_naming_the_flag(tmp_path):
    cfg = JobConfig(protocol=PROTOCOL, records=500, checkpoints=2, from_checkpoint=7)
    with pytest.raises(ConfigError, match="--from-checkpoint 7: the table's checkpoint store holds no checkpoint"):
        simulate(cfg, seed=0, workdir=str(tmp_path / "w"), storage="disk")
