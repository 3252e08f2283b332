"""The trace events other code reads back (the timeline picture): their categories, the args that
carry what a reader needs, and the phases of a checkpoint and of a failover.

An event's name is for people (Perfetto shows it, and it may change); a reader goes by the
event's ``cat`` and ``args``, whose spellings are these constants.
"""

from __future__ import annotations

# -- categories (``cat``) ---------------------------------------------------------------------------
RUN = "run"  # a complete event's category when the emitter names none (Tracer.complete)
EVENT = "event"  # an instant event's category when the emitter names none (Tracer.instant)
MAIL = "mail"  # a mail on a task's mailbox thread (MailRun.what; a default-action step is another)
SNAPSHOT = "checkpoint"  # a write task's snapshotState (the barrier), on its mailbox thread
BLOCKED = "blocked"  # a wait on the mailbox thread, from its start to its end
FLUSH = "flush"  # a write task writing a file group (the io thread)
COMMIT = "commit"  # the coordinator committing an instant
INSTANT = "instant"  # the coordinator starting an instant
FAULT = "fault"  # an injected fault firing
FAILOVER = "failover"  # the job failing over, and its roles back (the driver's markers)
MESSAGE = "msg"  # a message's flow (start at the sender, end at the receiver)
CLEAN = "clean"  # the coordinator's cleaner holding the table lock
COMPACTION = "compaction"  # merge-on-read: a compaction scheduled, run or committed
TOPIC = "topic"  # the Kafka control topic appending or serving a record

# -- args a reader goes by (``args``) ---------------------------------------------------------------
CHECKPOINT_ID = "checkpoint_id"  # the checkpoint a checkpoint's event is about (an int)
CHECKPOINT_PHASE = "checkpoint_phase"  # where in the checkpoint's life the event is: a phase below
FAILOVER_NUMBER = "failover"  # the job's n-th failover (1-based)
FAILOVER_PHASE = "failover_phase"  # FAILED or RESTARTED
# The keys above were added to events that existed before them, without renaming or dropping any:
# stripped of these keys, a run's trace is what it was.
READER_ARG_KEYS = (CHECKPOINT_ID, CHECKPOINT_PHASE, FAILOVER_NUMBER, FAILOVER_PHASE)

# checkpoint phases
TRIGGERED = "triggered"  # the job manager triggered the checkpoint
SNAPSHOT_TAKEN = "snapshot"  # a write task took the barrier (snapshotState)
COMPLETED = "complete"  # the job manager recorded the checkpoint complete
NOTIFIED = "notified"  # a write task had the completion notification
NOTIFICATION_SUBSUMED = "notification_subsumed"  # a later checkpoint's notification went out first
ABORTED = "aborted"  # the job manager aborted the checkpoint (by the schedule, timed out, subsumed)
# failover phases
FAILED = "failed"  # the job failed over
RESTARTED = "restarted"  # every restarted role was up again


def checkpoint_args(checkpoint_id: int, phase: str) -> dict[str, int | str]:
    """The args of a checkpoint's event (a new dict each time: a tracer keeps it)."""
    return {CHECKPOINT_ID: checkpoint_id, CHECKPOINT_PHASE: phase}


def failover_args(number: int, phase: str) -> dict[str, int | str]:
    """The args of a failover's marker (a new dict each time)."""
    return {FAILOVER_NUMBER: number, FAILOVER_PHASE: phase}
