"""The Ray job a run was submitted as (``ray job submit``), and the time ``ray job stop`` gives it.

Ray 2.52.1's job supervisor (``ray/dashboard/modules/job/job_supervisor.py``, ``JobSupervisor``)
starts the entrypoint with a copy of its own environment plus ``RAY_JOB_CONFIG_JSON_ENV_VAR``, the
job's runtime environment and metadata, ``job_submission_id`` among them
(``_get_driver_env_vars``). ``ray job stop`` makes ``JobSupervisor.run`` send
``RAY_JOB_STOP_SIGNAL`` (SIGTERM unless it is SIGINT) to the entrypoint and every process under
it, then SIGKILL to the same processes ``RAY_JOB_STOP_WAIT_TIME_S`` later
(``DEFAULT_RAY_JOB_STOP_WAIT_TIME_S``, 3 s), both read in the supervisor's environment: the job's
runtime environment sets them, and the driver's environment holds the same values. So the driver
knows, as it starts, how long a stop will leave it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"
STOP_WAIT_VAR = "RAY_JOB_STOP_WAIT_TIME_S"
STOP_SIGNAL_VAR = "RAY_JOB_STOP_SIGNAL"
DEFAULT_STOP_WAIT_S = 3  # JobSupervisor.DEFAULT_RAY_JOB_STOP_WAIT_TIME_S
# the wait with which every `ray job stop` measured on a loaded two-core head left the record with
# its committed prefix checked (docs/COMMANDS.md#stopping-a-run)
CHECKED_STOP_WAIT_S = 30
RUNTIME_ENV = f'--runtime-env-json \'{{"env_vars": {{"{STOP_WAIT_VAR}": "{CHECKED_STOP_WAIT_S}"}}}}\''


@dataclass(frozen=True)
class SubmittedJob:
    submission_id: str
    stop_signal: str  # what `ray job stop` sends first
    stop_wait_s: int | None  # from that signal to SIGKILL; None: not a number (the stop then fails in Ray)

    def stop_warning(self) -> str | None:
        """The line a run prints as it starts when ``ray job stop`` would SIGKILL it sooner than
        a stop's record and check were measured to need; None when the wait is long enough."""
        if self.stop_wait_s is not None and self.stop_wait_s >= CHECKED_STOP_WAIT_S:
            return None
        wait = f"{self.stop_wait_s} s" if self.stop_wait_s is not None else "an unreadable time"
        return (
            f"Ray job {self.submission_id}: `ray job stop` sends {self.stop_signal}, then SIGKILL {wait} later "
            f"({STOP_WAIT_VAR}); a stopped run writes its record first and checks its committed prefix only if "
            f"that ends in time (else the record says not checked). For a checked prefix, submit with {RUNTIME_ENV}"
        )


def submitted_job(environ: Mapping[str, str] = os.environ) -> SubmittedJob | None:
    """The submitted Ray job this process is the entrypoint of (or runs under), from the
    environment its supervisor gave it; None for a run started any other way (a terminal, a
    script, a driver connecting with ``RAY_ADDRESS``)."""
    try:
        config = json.loads(environ.get(JOB_CONFIG_VAR, ""))
    except ValueError:
        return None
    metadata = config.get("metadata") if isinstance(config, dict) else None
    submission_id = metadata.get("job_submission_id") if isinstance(metadata, dict) else None
    if not submission_id:
        return None
    signal = "SIGINT" if environ.get(STOP_SIGNAL_VAR) == "SIGINT" else "SIGTERM"
    try:
        wait: int | None = int(environ.get(STOP_WAIT_VAR, DEFAULT_STOP_WAIT_S))
    except ValueError:
        wait = None
    return SubmittedJob(str(submission_id), signal, wait)
