"""Tests mirror runtime/'s packages; every test that needs Ray or Spark lives under tests/ray/,
whose conftest starts them once per session. ``pytest --ignore=tests/ray`` is the fast loop.

Tests that run roles without Ray share one environment, tests/harness.py (the simulator's loop,
network and env); its ``sim`` fixture is available everywhere.

``--cpu-durations=N`` lists the N tests that used the most CPU time (setup, call and teardown;
the pytest process and the subprocesses it waited for): unlike ``--durations`` (wall time) it
means about the same on a loaded machine. Work in Ray's or Spark's processes is not counted.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator
from typing import Any

import pytest
from harness import sim  # noqa: F401 - the shared fixture, for every test package

_CPU = pytest.StashKey[dict[str, float]]()

if os.environ.get("PYTEST_XDIST_WORKER"):
    # an xdist worker is given COLUMNS=80; the commands' output is then folded where a plain pytest
    # run (no COLUMNS: 150 columns, runtime/cli/terminal.py) keeps a long path on one line
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-durations",
        type=int,
        default=None,
        metavar="N",
        help="show the N tests that used the most CPU time in the pytest process (0: all)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CPU] = {}


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that ended (a subprocess a test ran)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    t0 = _cpu_s()
    try:
        return (yield)
    finally:
        item.config.stash[_CPU][item.nodeid] = _cpu_s() - t0


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    n = config.getoption("--cpu-durations")
    if n is None:
        return
    cpu = config.stash[_CPU]
    ranked = sorted(cpu.items(), key=lambda kv: -kv[1])
    terminalreporter.section(f"CPU time: {sum(cpu.values()):.2f}s in {len(cpu)} tests; slowest {n or 'all'}")
    for nodeid, seconds in ranked[: n or None]:
        terminalreporter.write_line(f"{seconds:8.2f}s  {nodeid}")


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's and Spark's start replaced by a failure: a check that must come first (bad options,
    a table's layout) fails the test instead of starting them."""
    import actors.job
    import actors.spark

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("Ray or Spark started before the options were checked")

    monkeypatch.setattr(actors.job, "ensure_ray", refuse)
    monkeypatch.setattr(actors.spark, "start_spark", refuse)


S3_BUCKET = "lab"


@pytest.fixture(scope="module")
def s3() -> Generator[Any, None, None]:
    """A real S3-compatible endpoint (moto's server) on loopback, with bucket ``lab``."""
    pytest.importorskip("moto", reason="the S3 tests need moto[server] (the test extra)")
    from runtime.lab.s3_endpoint import S3Endpoint

    ep = S3Endpoint("127.0.0.1", 0).start()
    ep.create_bucket(S3_BUCKET)
    yield ep
    ep.stop()
