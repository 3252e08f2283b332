"""The trace events other code reads back (the timeline picture): their categories.

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
