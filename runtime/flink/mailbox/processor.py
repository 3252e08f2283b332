"""The mailbox loop of one task: its mails, its default action, and what it runs now.

Flink 1.10+ ``flink-streaming-java/.../runtime/tasks/mailbox/MailboxProcessor.java``
(``runMailboxLoop``, ``processMail``, ``processMailsNonBlocking``,
``processMailsWhenDefaultActionUnavailable``, ``close``): create a batch and run the mails in it
(mails put meanwhile wait for the next batch, so a mail that re-queues itself cannot starve the
default action), block on the mailbox while the default action is suspended, then run one step of
the default action. ``close`` closes the mailbox and cancels the futures of the mails it dropped
(``Mail.tryCancel``: a ``submit`` caller learns its action will never run).

What a default-action step is handed, :class:`Controller`, and the handle of a suspension,
:class:`Suspension`, are the interfaces of ``MailboxDefaultAction.java`` (same folder), implemented
in ``MailboxProcessor.java`` by its inner classes ``MailboxController`` (``suspendDefaultAction``:
on the mailbox thread only, once per suspension; ``allActionsCompleted``) and
``DefaultActionSuspension`` (``resume``: directly on the mailbox thread, else by a
``MAX_PRIORITY`` mail put first). How ``suspend`` and ``all_actions_completed`` stop the loop, and
the yield after each step, are deliberate differences listed in :mod:`runtime.flink.mailbox`.

Each mail and step runs in :meth:`MailboxProcessor._traced`: a
:class:`~runtime.core.messages.MailRun` on :attr:`MailboxProcessor.stack` while it runs (what
:attr:`MailboxProcessor.current` and :meth:`MailboxProcessor.describe` show of a stuck task),
and the ``on_mail_start`` / ``on_mail_end`` hooks the task's trace listens with (Flink has no
such record).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from runtime.core import trace_events
from runtime.core.messages import MailRun
from runtime.flink.mailbox.executor import MailboxExecutor
from runtime.flink.mailbox.mail import MAX_PRIORITY, MIN_PRIORITY, Mail, call_action
from runtime.flink.mailbox.mailbox_thread import MAILBOX_THREAD, is_in_mailbox_thread
from runtime.flink.mailbox.task_mailbox import MailboxClosedError, MailboxStateError, TaskMailbox

__all__ = ["MailboxProcessor", "Controller", "Suspension", "MailHook", "MailEndHook"]

MailHook = Callable[[MailRun], None]
MailEndHook = Callable[[MailRun, BaseException | None], None]


class Suspension:
    """Handle of a suspended default action (Flink: ``DefaultActionSuspension``)."""

    def __init__(self, processor: MailboxProcessor, reason: str = "") -> None:
        self._processor = processor
        self.reason = reason
        self._resume_sent = False

    @property
    def is_resumed(self) -> bool:
        return self._processor._suspension is not self

    def resume(self) -> None:
        """Resumes the default action. Idempotent.

        On the mailbox thread it resumes directly; elsewhere it puts a MAX_PRIORITY "resume" mail
        first in the mailbox (as Flink), which wakes a loop blocked in take and resumes when run.
        If the mailbox no longer accepts mails, it resumes directly and wakes the loop.
        """
        p = self._processor
        if p._suspension is not self:
            return
        if is_in_mailbox_thread(p):
            p._resume_internal(self)
            return
        if self._resume_sent:
            return
        what = f"resume default action ({self.reason})" if self.reason else "resume default action"
        try:
            p.mailbox.put_first(Mail(lambda: p._resume_internal(self), MAX_PRIORITY, "resume", what))
        except MailboxClosedError:
            p._resume_internal(self)
            return
        self._resume_sent = True

    def __repr__(self) -> str:
        return f"Suspension(reason={self.reason!r}, resumed={self.is_resumed})"


class Controller:
    """Passed to each default-action step (Flink: ``MailboxDefaultAction.Controller``)."""

    def __init__(self, processor: MailboxProcessor) -> None:
        self._processor = processor

    def suspend_default_action(self, reason: str = "") -> Suspension:
        """The loop stops calling the default action until the returned suspension is resumed.

        Must be called on the mailbox thread, at most once per suspension (as Flink).
        """
        p = self._processor
        if not is_in_mailbox_thread(p):
            raise MailboxStateError("Suspending must only be called from the mailbox thread!")
        if p._suspension is not None:
            raise MailboxStateError("Default action has already been suspended")
        p._suspension = Suspension(p, reason)
        return p._suspension

    def all_actions_completed(self) -> None:
        """The default action has no more input: the loop ends after the pending mails ran."""
        self._processor.all_actions_completed()


class MailboxProcessor:
    """Flink's ``MailboxProcessor``: the mailbox loop of one task."""

    def __init__(
        self,
        default_action: Callable[[Controller], Awaitable[None] | None],
        mailbox: TaskMailbox | None = None,
        *,
        on_mail_start: MailHook | None = None,
        on_mail_end: MailEndHook | None = None,
    ) -> None:
        self._default_action = default_action
        self._default_action_name = getattr(default_action, "__qualname__", None) or repr(default_action)
        self._mailbox = mailbox if mailbox is not None else TaskMailbox()
        self._on_mail_start = on_mail_start
        self._on_mail_end = on_mail_end
        self._controller = Controller(self)
        self._suspended = False  # suspend(): the loop stops after the current mail/step
        self._completed = False  # all_actions_completed(): ends after the pending mails ran
        self._suspension: Suspension | None = None
        self._stack: list[MailRun] = []  # running mail/step, nested by yields
        self._loop_task: asyncio.Task[Any] | None = None
        self._waiting_for_mail = False
        self._executors: dict[int, MailboxExecutor] = {}
        self._steps = 0
        self._mails_run = 0

    # ------------------------------------------------------------- accessors
    @property
    def mailbox(self) -> TaskMailbox:
        return self._mailbox

    @property
    def controller(self) -> Controller:
        return self._controller

    def get_main_executor(self) -> MailboxExecutor:
        return self.get_mailbox_executor(MIN_PRIORITY)

    def get_mailbox_executor(self, priority: int) -> MailboxExecutor:
        ex = self._executors.get(priority)
        if ex is None:
            ex = self._executors[priority] = MailboxExecutor(self._mailbox, priority, self)
        return ex

    def is_default_action_available(self) -> bool:
        return self._suspension is None

    @property
    def suspension(self) -> Suspension | None:
        """The current suspension of the default action, if any."""
        return self._suspension

    @property
    def is_running(self) -> bool:
        """True while run_mailbox_loop is active."""
        return self._loop_task is not None

    @property
    def is_waiting_for_mail(self) -> bool:
        """True while the loop is blocked in take (default action suspended, no mail)."""
        return self._waiting_for_mail

    @property
    def all_actions_done(self) -> bool:
        return self._completed

    @property
    def default_action_steps(self) -> int:
        return self._steps

    @property
    def mails_run(self) -> int:
        return self._mails_run

    @property
    def current(self) -> MailRun | None:
        """What the mailbox thread runs now, the innermost if a yield nests a mail; None when
        idle or waiting for mail."""
        return dataclasses.replace(self._stack[-1]) if self._stack else None

    @property
    def stack(self) -> list[MailRun]:
        """Outermost first: e.g. [default action, mail run by its yield_]."""
        return [dataclasses.replace(i) for i in self._stack]

    def describe(self) -> dict[str, Any]:
        """Everything needed to explain a stuck task in one dict."""
        return {
            "state": str(self._mailbox.state),
            "running": self.is_running,
            "current": self.current,
            "stack": self.stack,
            "waiting_for_mail": self._waiting_for_mail,
            "default_action_suspended": self._suspension is not None,
            "suspension_reason": self._suspension.reason if self._suspension else None,
            "default_action_steps": self._steps,
            "mails_run": self._mails_run,
            "mails": self._mailbox.snapshot(),
        }

    # --------------------------------------------------------------- control
    def suspend(self) -> None:
        """Stops the loop after the current mail or step; the rest stays queued.

        A later run_mailbox_loop continues (Flink: ``suspended = !mailboxLoopRunning``).
        """
        self._suspended = True
        self._mailbox._wake_all()

    def all_actions_completed(self) -> None:
        """No more default-action input: the loop runs the pending mails and ends."""
        self._completed = True
        self._mailbox._wake_all()

    def _resume_internal(self, suspension: Suspension) -> None:
        if self._suspension is suspension:
            self._suspension = None
            self._mailbox._wake_all()

    # ------------------------------------------------------------------ loop
    async def run_mailbox_loop(self) -> None:
        """Runs until all_actions_completed() (after pending mails) or suspend().

        Each iteration: run all pending mails; while the default action is suspended, block in
        take(MIN_PRIORITY) and run mails; then run one default-action step. An exception from a
        mail or step propagates (the task fails); the mailbox is left as it is.
        """
        if self._loop_task is not None:
            raise MailboxStateError("the mailbox loop is already running")
        task = asyncio.current_task()
        assert task is not None
        self._loop_task = task
        token = MAILBOX_THREAD.set((self, task))
        try:
            while not self._suspended:
                await self._run_pending_mails()
                if self._suspended or self._completed:
                    break
                await self._run_mails_while_default_action_unavailable()
                if self._suspended:
                    break
                if self._completed:
                    continue  # drain what is left, then end
                await self._run_default_action_step()
                await asyncio.sleep(0)  # let other coroutines (RPC handlers) run, as threads would
        finally:
            MAILBOX_THREAD.reset(token)
            self._loop_task = None
            self._suspended = False
            self._waiting_for_mail = False

    async def drain(self) -> int:
        """Runs every queued mail once, then returns how many (Flink: after the loop, on close)."""
        mails = self._mailbox.drain()
        for mail in mails:
            await self._run_mail(mail)
        return len(mails)

    async def _run_pending_mails(self) -> int:
        """``processMailsNonBlocking``: runs the mails present when the batch is created; mails
        put meanwhile (one that re-queues itself included) wait until after the next step."""
        n = 0
        if not self._mailbox.create_batch():
            return n
        while not self._suspended:
            mail = self._mailbox.try_take_from_batch()
            if mail is None:
                break
            await self._run_mail(mail)
            n += 1
        return n

    def close(self) -> list[Mail]:
        """Closes the mailbox and cancels the futures of the mails it dropped (Flink:
        ``MailboxProcessor.close``, ``Mail.tryCancel(false)``); returns the dropped mails."""
        dropped = self._mailbox.close()
        for mail in dropped:
            mail.try_cancel()
        return dropped

    def _should_stop_waiting(self) -> bool:
        return self._suspended or self._completed or self._suspension is None

    async def _run_mails_while_default_action_unavailable(self) -> None:
        while not self._should_stop_waiting():
            mail = self._mailbox.try_take(MIN_PRIORITY)
            if mail is None:
                self._waiting_for_mail = True
                try:
                    mail = await self._mailbox._take(MIN_PRIORITY, self._should_stop_waiting)
                finally:
                    self._waiting_for_mail = False
                if mail is None:
                    continue
            await self._run_mail(mail)

    async def _run_mail(self, mail: Mail) -> Any:
        info = MailRun(trace_events.MAIL, mail.kind, mail.description, self._mailbox.clock(), mail.seq, mail.priority)
        self._mails_run += 1
        return await self._traced(info, mail.run)

    async def _run_default_action_step(self) -> None:
        self._steps += 1
        info = MailRun(
            "default action", "defaultAction", self._default_action_name, self._mailbox.clock(), step=self._steps
        )
        await self._traced(info, lambda: call_action(self._default_action, self._controller))

    async def _traced(self, info: MailRun, fn: Callable[[], Awaitable[Any]]) -> Any:
        self._stack.append(info)
        error: BaseException | None = None
        try:
            if self._on_mail_start is not None:
                self._on_mail_start(info)
            return await fn()
        except BaseException as e:
            error = e
            raise
        finally:
            for i in range(len(self._stack) - 1, -1, -1):
                if self._stack[i] is info:
                    del self._stack[i]
                    break
            info.ended_at = self._mailbox.clock()
            if self._on_mail_end is not None:
                self._on_mail_end(info, error)

    def __repr__(self) -> str:
        return (
            f"MailboxProcessor(running={self.is_running}, steps={self._steps}, "
            f"suspended_default_action={self._suspension is not None}, {self._mailbox!r})"
        )
