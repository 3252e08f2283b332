"""What a failover restarts and where the restarted roles resume: shared by the Ray host
(``actors/ray_host.py``) and the simulation host (``runtime/sim/sim_run.py``), so both decide alike."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.config import JobConfig
from runtime.core.messages import CompletedCheckpoint
from runtime.protocols import get_protocol


def region_failover_applies(cfg: JobConfig, *, coordinator_sound: bool) -> bool:
    """Region failover needs ``failover=region``, a protocol whose tasks restore from their
    checkpointed state (the control topic replays from the offsets in its commits instead) and a
    coordinator that is alive and sound; otherwise the failover is global."""
    return (
        cfg.failover == "region"
        and coordinator_sound
        and not get_protocol(cfg.protocol).writer_side.replays_from_committed_offsets
    )


def resume_checkpoint_id(last_triggered: int, restore: CompletedCheckpoint | None) -> int:
    """The last checkpoint id handed out before the failover: restored tasks resume after it."""
    return max(last_triggered, restore.checkpoint_id if restore is not None else 0)


@dataclass(frozen=True)
class ResumePoint:
    """Where the restarted roles resume: the last checkpoint id handed out before the failover
    (the tasks and the coordinator resume after it), the job manager's next id, and the round
    the sources start at."""

    resume_checkpoint_id: int
    start_checkpoint_id: int
    start_round: int


def resume_plan(
    cfg: JobConfig, last_triggered: int, restore: CompletedCheckpoint | None
) -> tuple[CompletedCheckpoint | None, ResumePoint]:
    """(the checkpoint the roles restore from, where they resume) after a failover from
    ``restore`` (the last completed checkpoint, or None)."""
    if get_protocol(cfg.protocol).writer_side.replays_from_committed_offsets:
        restore = None  # the sources replay everything; the protocol's offsets skip the rest
    resume_id = resume_checkpoint_id(last_triggered, restore)
    start_round = (restore.round if restore is not None else 0) + 1
    return restore, ResumePoint(resume_id, resume_id + 1, start_round)


def resume_summary(cfg: JobConfig, last_triggered: int, restore: CompletedCheckpoint | None) -> tuple[int | None, int]:
    """What a failover record says about where the job resumes, (the restored checkpoint, the
    resumed round), as :func:`resume_plan` decides: the control topic restores no checkpoint
    and replays from round 1."""
    planned, resume = resume_plan(cfg, last_triggered, restore)
    return (planned.checkpoint_id if planned is not None else None), resume.start_round
