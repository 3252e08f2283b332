"""scripts/setup.sh checks the interpreter first (Python 3.11: the pinned matplotlib and fastavro
need it) and says what it found: the version of a wrong one, or that ``PYTHON`` names nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_with(python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")],
        env={**os.environ, "PYTHON": python},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_python_that_does_not_exist_is_named_as_not_found(tmp_path):
    missing = str(tmp_path / "python3.11")
    done = _setup_with(missing)
    assert done.returncode == 1
    assert f"'{missing}' was not found" in done.stderr and "PYTHON=/path/to/python3.11" in done.stderr


def test_a_python_of_another_version_is_named_with_its_version(tmp_path):
    old = tmp_path / "python3.10"
    old.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "Python 3.10.14"; exit 0; fi\nexit 1\n')
    old.chmod(0o755)
    done = _setup_with(str(old))
    assert done.returncode == 1
    assert "needs Python 3.11" in done.stderr and "Python 3.10.14" in done.stderr
    assert not (tmp_path / ".venv").exists()


def test_the_package_floor_is_the_one_the_pins_need():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.11,<3.12"' in text
    assert "- python=3.11" in (ROOT / "environment.yml").read_text()
