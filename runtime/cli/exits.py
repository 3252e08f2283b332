"""The exit codes of ``commitlab`` and, per command, the rule from its outcome to its code."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from runtime.core.json_doc import JsonObject
from runtime.lab.results import JobResult
from runtime.lab.status import Status


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # the run failed, was not verified, or a check found a problem
    USAGE = 2  # bad input: an option, a file, a table, a location (nothing ran)
    DEADLOCK = 3  # the job deadlocked (the watchdog diagnosed it)
    CLUSTER_LOST = 4  # the run lost its Ray cluster's head (its record is written; run again on a live cluster)
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as a shell reports it; SIGTERM 143, SIGHUP 129 (128 + signal)


def of_run(result: JobResult, stopped_by: int = ExitCode.INTERRUPTED) -> int:
    """``run``: OK only when the job finished and exactly-once was verified; an interrupted job
    exits as the signal that stopped it (``stopped_by``: 128 + its number), even when its Ray
    cluster was lost too; any other run that lost its Ray cluster exits :data:`ExitCode.CLUSTER_LOST`."""
    if result.status == Status.DEADLOCKED:
        return ExitCode.DEADLOCK
    if result.status == Status.INTERRUPTED:
        return stopped_by
    if result.ray is not None and result.ray.cluster_lost is not None:
        return ExitCode.CLUSTER_LOST
    eo = result.exactly_once
    return ExitCode.OK if result.status == Status.FINISHED and eo and eo.verified else ExitCode.FAILED


def of_deadlock(result: JobResult, expect: str) -> ExitCode:
    """``deadlock``: ``--expect any`` accepts a deadlock or commits; ``deadlock`` / ``commits``
    accept only that outcome."""
    if result.status == Status.DEADLOCKED:
        return ExitCode.OK if expect != "commits" else ExitCode.FAILED
    committed = result.status == Status.FINISHED and bool(result.commits)
    if expect == "deadlock":
        return ExitCode.FAILED
    return ExitCode.OK if committed else ExitCode.FAILED


def of_verify(audit_ok: bool, verified: bool) -> ExitCode:
    """``verify``: the table's own audit and the check against what was written both pass."""
    return ExitCode.OK if audit_ok and verified else ExitCode.FAILED


def of_compare(not_verified: list[str]) -> ExitCode:
    """``compare``: every protocol that did not deadlock verified exactly-once."""
    return ExitCode.FAILED if not_verified else ExitCode.OK


def of_faults(counts: dict[str, int]) -> ExitCode:
    """``faults``: no cell violated exactly-once or failed."""
    return ExitCode.FAILED if counts["VIOLATION"] or counts["FAILED"] else ExitCode.OK


def of_simulation(result: JobResult, determinism: JsonObject | None = None) -> ExitCode:
    """``simulate``: as ``run`` (with ``--no-verify`` the status decides); a replay that differs
    (``--check-determinism``) fails it."""
    if determinism is not None and not determinism["identical"]:
        return ExitCode.FAILED
    if result.status == Status.DEADLOCKED:
        return ExitCode.DEADLOCK
    eo = result.exactly_once
    verified = eo is None or eo.verified
    return ExitCode.OK if result.status == Status.FINISHED and verified else ExitCode.FAILED


def of_exploration(failures: list[dict[str, Any]]) -> ExitCode:
    """``explore``: no seed failed (a protocol's known failure is no failure)."""
    return ExitCode.FAILED if failures else ExitCode.OK


def of_conformance(conforms: list[bool]) -> ExitCode:
    """``conformance``: every table type's tables and timelines agree (beyond named differences)."""
    return ExitCode.OK if conforms and all(conforms) else ExitCode.FAILED


def of_replay(failing: bool) -> ExitCode:
    """``replay``: the seed's verdict."""
    return ExitCode.FAILED if failing else ExitCode.OK


def of_check(failures: int, interrupted: bool = False) -> ExitCode:
    """``check``: no schedule the search ran violated an invariant or failed (a protocol's known
    failure is no failure); a search Ctrl-C stopped exits 130 once its partial certificate is
    written, as a stopped run does, never 0 as if it had certified the bound."""
    if interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.FAILED if failures else ExitCode.OK
