"""A run knows from its environment that it is a submitted Ray job and how long ``ray job stop``
gives it (Ray 2.52.1's ``JobSupervisor``), and says so when that is too short for a checked prefix."""

from __future__ import annotations

import json

from actors.submitted_job import CHECKED_STOP_WAIT_S, submitted_job

# what Ray's JobSupervisor._get_driver_env_vars puts in the entrypoint's environment
SUPERVISED = {
    "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(
        {"runtime_env": {}, "metadata": {"job_submission_id": "raysubmit_abc", "job_name": "raysubmit_abc"}}
    )
}


def test_a_run_not_submitted_as_a_ray_job_is_none():
    assert submitted_job({}) is None
    assert submitted_job({"RAY_ADDRESS": "127.0.0.1:6379"}) is None
    assert submitted_job({"RAY_JOB_CONFIG_JSON_ENV_VAR": "not json"}) is None
    assert submitted_job({"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {}})}) is None


def test_at_rays_default_wait_the_run_says_it_may_be_killed_before_its_check_and_the_fix():
    job = submitted_job(SUPERVISED)
    assert job is not None and job.submission_id == "raysubmit_abc"
    assert (job.stop_signal, job.stop_wait_s) == ("SIGTERM", 3)
    warning = job.stop_warning()
    assert warning is not None
    assert "SIGTERM, then SIGKILL 3 s later (RAY_JOB_STOP_WAIT_TIME_S)" in warning
    assert '{"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "30"}}' in warning


def test_a_long_enough_wait_says_nothing_and_a_stop_signal_of_sigint_is_named():
    assert submitted_job({**SUPERVISED, "RAY_JOB_STOP_WAIT_TIME_S": str(CHECKED_STOP_WAIT_S)}).stop_warning() is None
    job = submitted_job({**SUPERVISED, "RAY_JOB_STOP_WAIT_TIME_S": "10", "RAY_JOB_STOP_SIGNAL": "SIGINT"})
    assert job is not None and (job.stop_signal, job.stop_wait_s) == ("SIGINT", 10)
    assert "SIGINT, then SIGKILL 10 s later" in (job.stop_warning() or "")
    unreadable = submitted_job({**SUPERVISED, "RAY_JOB_STOP_WAIT_TIME_S": "ten"})
    assert unreadable is not None and "an unreadable time" in (unreadable.stop_warning() or "")
