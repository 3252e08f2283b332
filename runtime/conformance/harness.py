"""Runs the ``conformance/`` harness, Hudi's own Flink writer in a Flink MiniCluster, as a child
process: bounded, its output kept in a log file, its JSON read back typed."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TextIO

from runtime.conformance.real_run import RealRun
from runtime.conformance.releases import HARNESS_DIR, ConformanceUnavailable, Release, check_built, java_command

DEFAULT_TIMEOUT_S = 300.0
# what the child may take beyond its own deadline to cancel the job and write its JSON
_GRACE_S = 30.0


class HarnessError(RuntimeError):
    """The harness did not produce a record of the run."""


def run_harness(
    release: Release,
    input_dir: str,
    out_json: str,
    log_path: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_line: Callable[[str], None] | None = None,
) -> RealRun:
    """Runs ``release``'s harness on the workload in ``input_dir``; its record of the run.

    The harness cancels its own job at ``timeout_s`` and still writes what it saw; this process
    waits ``timeout_s`` + a grace period for it, then kills it and says so."""
    check_built(release)
    java = java_command()
    cmd = [
        str(HARNESS_DIR / "run.sh"),
        release.hudi,
        "--input",
        input_dir,
        "--out",
        out_json,
        "--timeout-s",
        str(max(1, round(timeout_s))),
    ]
    env = {**os.environ, "JAVA": java}
    started = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        reader = threading.Thread(target=_pump, args=(proc, log, on_line), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout_s + _GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise HarnessError(
                f"Hudi {release.hudi}'s writer did not finish within {timeout_s + _GRACE_S:g} s "
                f"(--timeout {timeout_s:g} plus {_GRACE_S:g} s to stop); its output is in {log_path}"
            ) from None
        finally:
            reader.join(timeout=5.0)
    if not os.path.isfile(out_json):
        raise HarnessError(
            f"Hudi {release.hudi}'s harness exited with {code} after {time.monotonic() - started:.0f} s "
            f"without writing {out_json}; its output is in {log_path}"
        )
    return RealRun.read(out_json)


def _pump(proc: subprocess.Popen[str], log: TextIO, on_line: Callable[[str], None] | None) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        log.write(line)
        if on_line is not None:
            on_line(line.rstrip("\n"))


__all__ = ["DEFAULT_TIMEOUT_S", "ConformanceUnavailable", "HarnessError", "run_harness"]
