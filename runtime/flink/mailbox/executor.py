"""The executor an operator (or the task itself) puts mails through and yields to mails with.

Flink 1.10+ ``flink-streaming-java/.../runtime/tasks/mailbox/MailboxExecutorImpl.java`` (its
interface: ``flink-streaming-java/.../streaming/api/operators/MailboxExecutor.java``): bound to a
priority; ``yield_``/``try_yield`` only run mails of at least that priority, so an operator's
executor (priority = chain index >= 1) never runs an operator event (sent through the main
executor at ``MIN_PRIORITY``); ``submit`` hands the action's result or error to a future (the
mail's ``FutureTaskWithException``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from runtime.flink.mailbox.mail import Action, Mail, call_action
from runtime.flink.mailbox.task_mailbox import TaskMailbox

__all__ = ["MailboxExecutor", "MailRunner"]


class MailRunner(Protocol):
    """Runs a mail a yield took as the loop runs its own (the processor: it traces the mail)."""

    async def _run_mail(self, mail: Mail) -> Any: ...


class MailboxExecutor:
    """Flink's ``MailboxExecutorImpl``: puts mails at, and yields to mails of at least, a priority."""

    def __init__(self, mailbox: TaskMailbox, priority: int, processor: MailRunner | None = None) -> None:
        self._mailbox = mailbox
        self._priority = priority
        self._processor = processor

    @property
    def priority(self) -> int:
        return self._priority

    @property
    def mailbox(self) -> TaskMailbox:
        return self._mailbox

    def execute(self, action: Action, kind: str, description: str = "") -> Mail:
        """Puts a mail at this executor's priority (returns it, for introspection)."""
        mail = Mail(action, self._priority, kind, description)
        self._mailbox.put(mail)
        return mail

    def submit(self, action: Action, kind: str, description: str = "") -> asyncio.Future[Any]:
        """Like execute, but the result or error goes to the returned future, not the loop."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def _run() -> None:
            try:
                result = await call_action(action)
            except Exception as e:  # noqa: BLE001 - Flink's FutureTaskWithException
                if not fut.done():
                    fut.set_exception(e)
            else:
                if not fut.done():
                    fut.set_result(result)

        mail = Mail(_run, self._priority, kind, description, future=fut)
        self._mailbox.put(mail)
        return fut

    async def _run(self, mail: Mail) -> None:
        if self._processor is not None:
            await self._processor._run_mail(mail)
        else:
            await mail.run()

    async def yield_(self) -> None:
        """Takes the oldest mail of priority >= own (waiting for one) and runs it here."""
        mail = await self._mailbox.take(self._priority)
        await self._run(mail)

    async def try_yield(self) -> bool:
        """Runs one mail of priority >= own if there is one; False (and nothing runs) otherwise."""
        mail = self._mailbox.try_take(self._priority)
        if mail is None:
            return False
        await self._run(mail)
        return True

    def __repr__(self) -> str:
        return f"MailboxExecutor(priority={self._priority})"
