"""The fork search's tests need a process with one thread, not connected to Ray. An xdist worker
that also runs the Ray group (``--dist loadgroup`` hands ungrouped tests to it too) has Ray's
threads; there a test marked ``one_thread`` runs in a fresh interpreter instead, and passes or
fails as it does there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.sim.fork_search import NotForkable, check_forkable

ROOT = Path(__file__).resolve().parents[2]
FRESH_TIMEOUT_S = 600


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker("one_thread") is None:
        return None
    try:
        check_forkable()
    except NotForkable:
        pass
    else:
        return None  # this process can fork: the test runs here
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", pyfuncitem.nodeid]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=FRESH_TIMEOUT_S)
    assert r.returncode == 0, f"in a fresh interpreter ({' '.join(cmd)}):\n{r.stdout[-4000:]}{r.stderr[-2000:]}"
    return True
