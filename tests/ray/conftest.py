"""Every test under tests/ray/ needs Ray (and some Spark): they are marked here, and Ray and Spark
start once per test session, never per test.

The suite runs on two pytest-xdist workers (``--dist loadgroup``, pyproject's addopts): the tests
here are one group, so one worker starts Ray and Spark once and runs them all while the other runs
the tests without Ray; xdist hands out the largest group first, so the two overlap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before xdist reads the group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.xdist_group("ray"))
            if "spark" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray cluster for the whole session (2 CPUs: the machine's size)."""
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    started = False
    if not ray.is_initialized():
        # a session of its own, even when a `ray start` cluster runs on this machine
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        started = True
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="session")
def spark(ray_session):
    """RayDP Spark on the session's Ray cluster, started once (10-25 s) and stopped at the end."""
    from actors.spark import SparkConfig, start_spark, stop_spark

    session = start_spark(SparkConfig())
    yield session
    stop_spark()
