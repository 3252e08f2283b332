"""A mail and its priority: one unit of work for a task's mailbox thread.

Flink 1.10+ ``flink-streaming-java/.../runtime/tasks/mailbox/Mail.java`` (``Mail``: an action,
a priority, a description; ``tryCancel``). The priorities are those a ``MailboxExecutor`` is
bound to (``TaskMailbox.MIN_PRIORITY``; an operator's executor gets its chain index). The
package docstring (:mod:`runtime.flink.mailbox`) maps the whole model and lists its deliberate
differences.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_PRIORITY", "OPERATOR_PRIORITY", "MAX_PRIORITY", "Action", "Mail", "call_action"]

MIN_PRIORITY = 0  # main mailbox executor and operator events (StreamTask dispatches them at MIN)
OPERATOR_PRIORITY = 1  # an operator's mailbox executor (Flink: its chain index, >= 1)
MAX_PRIORITY = 2**31 - 1  # checkpoint complete/abort notifications, control mails

Action = Callable[[], Awaitable[Any] | Any]


async def call_action(fn: Callable[..., Any], *args: Any) -> Any:
    """Calls a sync or async callable and awaits its result if it is awaitable."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


@dataclass(eq=False)
class Mail:
    """One unit of work for the mailbox thread. ``seq`` and ``enqueued_at`` are set on put.

    Equality is identity: two mails with the same fields are still two mails.
    """

    action: Action = field(repr=False)
    priority: int = MIN_PRIORITY
    kind: str = "mail"
    description: str = ""
    seq: int = -1
    enqueued_at: float = 0.0
    # the result of a submitted action (Flink: the mail's RunnableFuture); cancelled if dropped
    future: asyncio.Future[Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.description:
            self.description = self.kind

    def try_cancel(self) -> bool:
        """Cancels the mail's future if it has one that is not done (Flink: ``tryCancel``)."""
        return self.future is not None and self.future.cancel()

    async def run(self) -> Any:
        """Runs the action; awaits it if it returns an awaitable (this is what blocks the loop)."""
        return await call_action(self.action)
