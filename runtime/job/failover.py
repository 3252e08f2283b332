"""What a failover restarts and where the restarted roles resume: shared by the Ray host
(``actors/job.py``) and the simulation host (``runtime/sim/host.py``), so both decide alike."""

from __future__ import annotations

from typing import Any

from runtime.core.config import JobConfig
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


def resume_checkpoint_id(last_triggered: int, restore: Any) -> int:
    """The last checkpoint id handed out before the failover: restored tasks resume after it."""
    return max(last_triggered, restore.checkpoint_id if restore is not None else 0)


def resume_plan(cfg: JobConfig, last_triggered: int, restore: Any) -> tuple[Any, dict[str, int]]:
    """(the checkpoint the roles restore from, the ids and round they resume at) after a
    failover from ``restore`` (the last completed checkpoint, or None)."""
    if get_protocol(cfg.protocol).writer_side.replays_from_committed_offsets:
        restore = None  # the sources replay everything; the protocol's offsets skip the rest
    resume_id = resume_checkpoint_id(last_triggered, restore)
    return restore, {
        "resume_checkpoint_id": resume_id,
        "start_checkpoint_id": resume_id + 1,
        "start_round": (restore.round if restore is not None else 0) + 1,
    }


def resume_summary(cfg: JobConfig, last_triggered: int, restore: Any) -> dict[str, Any]:
    """What a failover record says about where the job resumes (as :func:`resume_plan` decides:
    the control topic restores no checkpoint and replays from round 1)."""
    planned, resume = resume_plan(cfg, last_triggered, restore)
    return {
        "restored_checkpoint": planned.checkpoint_id if planned is not None else None,
        "resumed_round": resume["start_round"],
    }
