"""A recorded result (tests/fixtures/results: a simulated run's result.json) with the fields a unit
test of a reader needs in its place: the verdicts, the failovers."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

from runtime.lab.results import FailoverRecord, JobResult
from runtime.lab.status import Status
from runtime.lab.verdicts import ExactlyOnce

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "results"


def recorded_result(**changes: Any) -> JobResult:
    """A finished, verified run of two commits and no failover, with ``changes``."""
    doc = json.loads((FIXTURES / "region.json").read_text()) | {"config": {}}
    base: dict[str, Any] = dict(
        status=Status.FINISHED,
        error=None,
        deadlock=None,
        commits=[
            {"instant": "20260101000000100", "checkpoint": 1, "rows": 10},
            {"instant": "20260101000000200", "checkpoint": 2, "rows": 10},
        ],
        exactly_once=ExactlyOnce(verified=True, expected=20),
        failovers=[],
        faults_fired=[],
    )
    base.update(changes)
    return dataclasses.replace(JobResult.from_json(doc), **base)


def failovers(*errors: str) -> list[FailoverRecord]:
    """Global failovers with these errors."""
    return [FailoverRecord(e, 1.0, "global", 1, 2, clock="at_virtual_s") for e in errors]
