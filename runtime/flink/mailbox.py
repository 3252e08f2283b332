"""An asyncio model of Flink's task mailbox (flink-streaming-java ``runtime/tasks/mailbox``).

Flink runs everything a task does on one *mailbox thread*: the default action (process the next
input record) and every mail (operator events, checkpoint notifications, timers, control mails).
Here that thread is ONE coroutine, :meth:`MailboxProcessor.run_mailbox_loop`. A mail's action, and
each default-action step, is awaited to completion before the loop takes the next mail, so an
action that awaits something (``await asyncio.sleep``, ``await event.wait()``) *blocks the mailbox*
exactly as a blocked Flink task thread does, while other coroutines of the same event loop (RPC
handlers) keep running and may put mails. That is the point of the model: a task that blocks
waiting for an operator event whose mail sits in its own mailbox is deadlocked, and
:meth:`TaskMailbox.snapshot` / :attr:`MailboxProcessor.current` show why.

Mapping to Flink:

* :class:`TaskMailbox` - ``TaskMailboxImpl``: states OPEN -> QUIESCED -> CLOSED, ``put``/``putFirst``
  only when OPEN, ``take``/``tryTake`` when OPEN or QUIESCED, ``take(priority)`` returns the oldest
  mail whose priority is >= the requested one (the batch first, then the queue); ``createBatch``
  moves every queued mail into the batch and ``tryTakeFromBatch`` takes from it only (FLINK-14304,
  Flink 1.10+); ``close`` returns the batched and queued mails and wakes takers.
* :class:`MailboxExecutor` - ``MailboxExecutorImpl``: bound to a priority; ``yield_``/``try_yield``
  only run mails of at least that priority, so an operator's executor (priority = chain index >= 1)
  never runs an operator event (sent through the main executor at ``MIN_PRIORITY``).
* :class:`MailboxProcessor` - ``MailboxProcessor.runMailboxLoop`` / ``processMail``: create a batch
  and run the mails in it (``processMailsNonBlocking``: mails put meanwhile wait for the next
  batch, so a mail that re-queues itself cannot starve the default action), block on the mailbox
  while the default action is suspended (``processMailsWhenDefaultActionUnavailable``), then run one
  step of the default action. ``close`` closes the mailbox and cancels the futures of the mails it
  dropped (``Mail.tryCancel``: a ``submit`` caller learns its action will never run).
* :class:`Mail` - ``Mail``; its ``future`` is the ``FutureTaskWithException`` of ``submit``.
* :class:`Controller` / :class:`Suspension` - ``MailboxDefaultAction.Controller`` / ``Suspension``.

Deliberate differences (documented so nobody is surprised):

* ``putFirst`` always goes to the head of the queue (Flink puts into the batch's head when called
  on the mailbox thread); the only caller here, a resume from outside the loop, is never on it.
* ``suspend()`` / ``all_actions_completed()`` set the flag directly and wake a loop blocked in
  ``take`` instead of enqueuing a "poison" control mail, so they never leave a stray mail in
  :meth:`TaskMailbox.snapshot`. ``all_actions_completed`` lets the pending mails run before the
  loop ends (Flink runs them in ``StreamTask.afterInvoke`` via ``drain``); ``suspend`` stops after
  the current mail or step and leaves the rest queued.
* After every default-action step the loop yields once to the event loop (``asyncio.sleep(0)``):
  a Flink task thread never starves the RPC threads, and neither may a step that never awaits.

Everything runs on one asyncio event loop; from another OS thread use
:meth:`TaskMailbox.put_threadsafe`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import enum
import inspect
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.core import trace_events
from runtime.core.messages import MailInfo, MailRun

__all__ = [
    "MIN_PRIORITY",
    "OPERATOR_PRIORITY",
    "MAX_PRIORITY",
    "MailboxStateError",
    "MailboxClosedError",
    "MailboxState",
    "Mail",
    "TaskMailbox",
    "MailboxExecutor",
    "MailboxProcessor",
    "Controller",
    "Suspension",
    "is_in_mailbox_thread",
]

MIN_PRIORITY = 0  # main mailbox executor and operator events (StreamTask dispatches them at MIN)
OPERATOR_PRIORITY = 1  # an operator's mailbox executor (Flink: its chain index, >= 1)
MAX_PRIORITY = 2**31 - 1  # checkpoint complete/abort notifications, control mails

Action = Callable[[], Awaitable[Any] | Any]
Clock = Callable[[], float]
MailHook = Callable[[MailRun], None]
MailEndHook = Callable[[MailRun, BaseException | None], None]


class MailboxStateError(RuntimeError):
    """An operation in the wrong state (Flink: ``IllegalStateException``)."""


class MailboxClosedError(MailboxStateError):
    """put when not OPEN, or take when CLOSED (Flink: ``MailboxClosedException``)."""


class MailboxState(str, enum.Enum):
    """Life cycle of a mailbox: OPEN -> QUIESCED -> CLOSED, never backwards."""

    OPEN = "OPEN"
    QUIESCED = "QUIESCED"
    CLOSED = "CLOSED"

    def __str__(self) -> str:
        return self.value


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
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
        return await _call(self.action)


class TaskMailbox:
    """Flink's ``TaskMailboxImpl``: a priority-aware FIFO of mails with a life cycle."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._queue: deque[Mail] = deque()
        self._batch: deque[Mail] = deque()  # taken by the processor's non-blocking drain only
        self._state = MailboxState.OPEN
        self._seq = itertools.count()
        # Blocked takers: (requested priority, future resolved to make them re-check).
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    # ----------------------------------------------------------------- state
    @property
    def state(self) -> MailboxState:
        return self._state

    @property
    def clock(self) -> Clock:
        return self._clock

    def _check_put(self) -> None:
        if self._state is not MailboxState.OPEN:
            raise MailboxClosedError(
                f"Mailbox is in state {self._state}, but is required to be in state "
                f"{MailboxState.OPEN} for put operations."
            )

    def _check_take(self) -> None:
        if self._state is MailboxState.CLOSED:
            raise MailboxClosedError(
                f"Mailbox is in state {self._state}, but is required to be in state "
                f"{MailboxState.OPEN} or {MailboxState.QUIESCED} for take operations."
            )

    def quiesce(self) -> None:
        """No more puts; queued mails can still be taken (Flink: before the final drain)."""
        if self._state is MailboxState.OPEN:
            self._state = MailboxState.QUIESCED

    def close(self) -> list[Mail]:
        """Closes for good: returns and drops the batched and queued mails, wakes blocked takers
        (they raise). Closing twice returns nothing the second time."""
        if self._state is MailboxState.CLOSED:
            return []
        dropped = self.drain()
        self._state = MailboxState.CLOSED
        self._wake_all()
        return dropped

    # ------------------------------------------------------------------- put
    def _stamp(self, mail: Mail) -> None:
        mail.seq = next(self._seq)
        mail.enqueued_at = self._clock()

    def put(self, mail: Mail) -> None:
        """Appends ``mail`` (FIFO). Raises :class:`MailboxClosedError` unless OPEN."""
        self._check_put()
        self._stamp(mail)
        self._queue.append(mail)
        self._notify(mail.priority)

    def put_first(self, mail: Mail) -> None:
        """Puts ``mail`` at the front (control mails such as "resume")."""
        self._check_put()
        self._stamp(mail)
        self._queue.appendleft(mail)
        self._notify(mail.priority)

    def put_threadsafe(self, mail: Mail, loop: asyncio.AbstractEventLoop) -> concurrent.futures.Future[None]:
        """Puts from another OS thread via ``loop.call_soon_threadsafe``.

        The returned future completes once the mail is queued (or fails with the put's error).
        """
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def _put() -> None:
            try:
                self.put(mail)
            except Exception as e:  # noqa: BLE001 - handed to the caller's future
                done.set_exception(e)
            else:
                done.set_result(None)

        loop.call_soon_threadsafe(_put)
        return done

    def _notify(self, priority: int) -> None:
        for wanted, fut in self._waiters:
            if wanted <= priority and not fut.done():
                fut.set_result(None)

    def _wake_all(self) -> None:
        """Makes every blocked taker re-check (close, or a processor flag changed)."""
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ take
    def _pop_qualifying(self, priority: int) -> Mail | None:
        for source in (self._batch, self._queue):
            for i, mail in enumerate(source):
                if mail.priority >= priority:
                    del source[i]
                    return mail
        return None

    def create_batch(self) -> bool:
        """Moves every queued mail to the end of the batch; True if the batch has mails."""
        self._batch.extend(self._queue)
        self._queue.clear()
        return bool(self._batch)

    def try_take_from_batch(self) -> Mail | None:
        """The batch's first mail, or None; mails put after :meth:`create_batch` are not in it."""
        self._check_take()
        return self._batch.popleft() if self._batch else None

    def try_take(self, priority: int) -> Mail | None:
        """The oldest mail with ``mail.priority >= priority``, or None; never waits."""
        self._check_take()
        return self._pop_qualifying(priority)

    async def take(self, priority: int) -> Mail:
        """The oldest mail with ``mail.priority >= priority``; waits until one is put.

        Lower-priority mails are skipped and stay queued in order.
        """
        mail = await self._take(priority, None)
        assert mail is not None
        return mail

    async def _take(self, priority: int, stop: Callable[[], bool] | None) -> Mail | None:
        """``take`` that also returns None once ``stop()`` is true after a wake-up."""
        loop = asyncio.get_running_loop()
        while True:
            self._check_take()
            mail = self._pop_qualifying(priority)
            if mail is not None:
                return mail
            if stop is not None and stop():
                return None
            entry: tuple[int, asyncio.Future[None]] = (priority, loop.create_future())
            self._waiters.append(entry)
            try:
                await entry[1]
            finally:
                self._waiters.remove(entry)

    def drain(self) -> list[Mail]:
        """Removes and returns all mails, batch first (Flink: ``drain``, used before closing)."""
        out = [*self._batch, *self._queue]
        self._batch.clear()
        self._queue.clear()
        return out

    def _all(self) -> list[Mail]:
        return [*self._batch, *self._queue]

    # ---------------------------------------------------------- introspection
    def has_mail(self, priority: int = MIN_PRIORITY) -> bool:
        return any(m.priority >= priority for m in self._all())

    def __len__(self) -> int:
        return len(self._batch) + len(self._queue)

    def snapshot(self) -> list[MailInfo]:
        """The queue in take order, for explaining a block ("the releasing mail is at position 0")."""
        now = self._clock()
        return [
            MailInfo(i, m.seq, m.kind, m.description, m.priority, now - m.enqueued_at)
            for i, m in enumerate(self._all())
        ]

    def find(self, kind: str) -> int | None:
        """Position of the first queued mail of ``kind``, or None."""
        for i, m in enumerate(self._all()):
            if m.kind == kind:
                return i
        return None

    def __repr__(self) -> str:
        return f"TaskMailbox(state={self._state}, mails={len(self)})"


# The "mailbox thread": (processor, task running its loop). A task spawned from a mail inherits
# the context but is a different task, so it is correctly NOT the mailbox thread.
_MAILBOX_THREAD: contextvars.ContextVar[tuple[MailboxProcessor, asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "commitlab_mailbox_thread", default=None
)


def is_in_mailbox_thread(processor: MailboxProcessor | None = None) -> bool:
    """True inside the running mailbox loop (of ``processor`` if given): its mails and steps."""
    marker = _MAILBOX_THREAD.get()
    if marker is None:
        return False
    owner, task = marker
    if processor is not None and owner is not processor:
        return False
    try:
        return asyncio.current_task() is task
    except RuntimeError:  # no running event loop
        return False


class MailboxExecutor:
    """Flink's ``MailboxExecutorImpl``: puts mails at, and yields to mails of at least, a priority."""

    def __init__(self, mailbox: TaskMailbox, priority: int, processor: MailboxProcessor | None = None) -> None:
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
                result = await _call(action)
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
        token = _MAILBOX_THREAD.set((self, task))
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
            _MAILBOX_THREAD.reset(token)
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
        await self._traced(info, lambda: _call(self._default_action, self._controller))

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
