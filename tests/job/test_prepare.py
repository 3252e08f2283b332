"""A run's options are checked and resolved once, by whoever starts it (runtime.job.prepare), and a
prepared job runs as its plain configuration does."""

from __future__ import annotations

import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.job.failover import ResumePoint
from runtime.job.prepare import ResolvedJob, prepare_job
from runtime.job.roles import JobRoles, Resume, RoleArgs, restartable, role_specs
from runtime.sim import simulate

SMALL = dict(source="generator", writers=2, checkpoints=3, records=600, bucket_flush_rows=100)


def test_a_prepared_job_simulates_as_its_plain_configuration_does_and_is_checked_once(monkeypatch):
    cfg = JobConfig(**SMALL)  # type: ignore[arg-type]
    plain = simulate(cfg, seed=3, storage="memory", verify=False)
    checks = []
    real = JobConfig.validate
    monkeypatch.setattr(JobConfig, "validate", lambda self, *a: checks.append(1) or real(self, *a))
    prepared = simulate(prepare_job(cfg.replace(table="/unused")), seed=3, storage="memory", verify=False)
    assert prepared.sim.trace_sha256 == plain.sim.trace_sha256
    assert len(checks) == 1  # by prepare_job; the simulator took the job as prepared
    checks.clear()
    simulate(cfg, seed=3, storage="memory", verify=False)
    assert len(checks) == 1


def test_prepare_job_resolves_the_release_table_version_and_refuses_as_before():
    job = prepare_job(JobConfig(source="generator", protocol="coordination-rpc"))
    assert isinstance(job, ResolvedJob) and job.config.table_version == "9"
    with pytest.raises(ConfigError, match="--allow-empty-commit true: the Hudi release"):
        prepare_job(JobConfig(source="generator", protocol="message-bus", allow_empty_commit="true"))


def test_a_region_failover_keeps_the_coordinator_and_the_protocols_roles():
    roles = JobRoles.of(JobConfig(source="generator", protocol="timeline-server", writers=2), "{}")
    every = restartable(roles, region=False)
    assert every == ["coordinator", "job-manager", "writer-0", "writer-1", "source-0", "source-1"]
    assert restartable(roles, region=True) == every[1:]
    specs = role_specs([*roles.extra, "writer-1", "source-1"], roles, Resume(ResumePoint(4, 5, 5)))
    assert [(s.name, s.kind) for s in specs] == [
        (roles.extra[0], roles.extra[0]),
        ("writer-1", "writer"),
        ("source-1", "source"),
    ]
    assert specs[1].args == RoleArgs(task_id=1, resume_checkpoint_id=4, restored_state=None)
    assert specs[2].args == RoleArgs(task_id=1, writer="writer-1", start_round=5, start_offset=0)


def test_a_prepared_job_carries_its_input_check_so_the_spark_job_does_not_read_the_input_to_check_it(tmp_path):
    data = tmp_path / "in.csv"
    data.write_text('id,region,seq,note\n1,eu,10,"two\nlines"\n2,us,9,plain\n1,eu,11,later\n')
    cfg = JobConfig(
        source="spark",
        input_path=str(data),
        key_field="id",
        partition_field="region",
        precombine_field="seq",
        table=str(tmp_path / "table"),
    )
    job = prepare_job(cfg)
    assert job.input is not None and job.input.rows == 3 and job.input.files == [str(data)]
    assert prepare_job(JobConfig(**SMALL, table=str(tmp_path / "t2"))).input is None  # type: ignore[arg-type]
