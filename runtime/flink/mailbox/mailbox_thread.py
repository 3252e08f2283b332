"""The "mailbox thread" of a task: the coroutine running its mailbox loop, and the test for it.

Flink 1.10+ ``flink-streaming-java/.../runtime/tasks/mailbox/TaskMailboxImpl.java``
``isMailboxThread`` (``MailboxProcessor.suspendDefaultAction`` checks it): Flink compares the
calling thread with the task thread; here the mailbox thread is the asyncio task running
:meth:`~runtime.flink.mailbox.processor.MailboxProcessor.run_mailbox_loop`, marked in a context
variable while it runs.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

__all__ = ["MAILBOX_THREAD", "is_in_mailbox_thread"]

# The "mailbox thread": (processor, task running its loop); the processor is compared by identity
# only, so this module needs not know its class. A task spawned from a mail inherits
# the context but is a different task, so it is correctly NOT the mailbox thread.
MAILBOX_THREAD: contextvars.ContextVar[tuple[object, asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "commitlab_mailbox_thread", default=None
)


def is_in_mailbox_thread(processor: object | None = None) -> bool:
    """True inside the running mailbox loop (of ``processor`` if given): its mails and steps."""
    marker = MAILBOX_THREAD.get()
    if marker is None:
        return False
    owner, task = marker
    if processor is not None and owner is not processor:
        return False
    try:
        return asyncio.current_task() is task
    except RuntimeError:  # no running event loop
        return False
