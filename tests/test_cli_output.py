"""The command line's output where it is not a terminal: a reader that goes away early (``| head``)
ends the output without a traceback, and ``COLUMNS`` sets the width of a pipe or a CI log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commitlab(args: list[str], stdout: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _with_reader_gone(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Runs ``commitlab args`` into a pipe whose reader closed before the first line (``| head -0``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return _commitlab(args, stdout=write_end)
    finally:
        os.close(write_end)


def test_output_into_a_closed_pipe_ends_quietly_and_the_command_keeps_its_exit_code():
    done = _with_reader_gone(["faults", "--list"])
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 0


def test_a_refusal_into_a_closed_pipe_still_exits_2_without_a_traceback(tmp_path):
    done = _with_reader_gone(["verify", "--table", str(tmp_path / "no-such-table")])
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 2


def test_output_that_is_not_a_terminal_honours_columns():
    narrow = _commitlab(["faults", "--list"], stdout=subprocess.PIPE, env={"COLUMNS": "70"})
    assert narrow.returncode == 0
    assert max(len(line) for line in narrow.stdout.splitlines()) == 70


def test_output_that_is_not_a_terminal_is_wide_without_columns():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    wide = subprocess.run(
        [sys.executable, "-m", "runtime", "faults", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert max(len(line) for line in wide.stdout.splitlines()) > 100


def test_what_the_engines_print_under_the_progress_bar_goes_to_their_log(tmp_path):
    """Ray's and Spark's Python threads write to sys.stdout and sys.stderr (a raylet's warning, a
    worker's error); with the progress bar on a terminal those lines go to the engines' log too."""
    import io
    import threading

    from rich.console import Console

    from runtime.cli.terminal import engines_to_log
    from runtime.lab.report import checkpoint_progress

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    log = tmp_path / "logs" / "ray-and-spark.log"

    def engine_thread() -> None:
        print("(raylet) a warning of Ray's", file=sys.stderr, flush=True)
        print("WARN a line of Spark's", flush=True)

    with engines_to_log(str(log)), checkpoint_progress(console, 1, "run") as progress:
        thread = threading.Thread(target=engine_thread)
        thread.start()
        thread.join()
        progress({"completed": 1, "checkpoint": 1})
    assert "a warning of Ray's" not in screen.getvalue() and "a line of Spark's" not in screen.getvalue()
    assert "(raylet) a warning of Ray's" in log.read_text() and "WARN a line of Spark's" in log.read_text()
