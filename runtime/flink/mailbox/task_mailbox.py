"""The mailbox of one task: a priority-aware FIFO of mails with a life cycle.

Flink 1.10+ ``flink-streaming-java/.../runtime/tasks/mailbox/TaskMailboxImpl.java`` (the
interface, its ``State`` and ``MailboxClosedException``: ``TaskMailbox.java``): states OPEN ->
QUIESCED -> CLOSED, ``put``/``putFirst`` only when OPEN, ``take``/``tryTake`` when OPEN or
QUIESCED, ``take(priority)`` returns the oldest mail whose priority is >= the requested one (the
batch first, then the queue); ``createBatch`` moves every queued mail into the batch and
``tryTakeFromBatch`` takes from it only (FLINK-14304); ``close`` returns the batched and queued
mails and wakes takers. ``putFirst`` differs from Flink's: see the deliberate differences in
:mod:`runtime.flink.mailbox`.

Everything runs on one asyncio event loop; from another OS thread use
:meth:`TaskMailbox.put_threadsafe`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import itertools
import time
from collections import deque
from collections.abc import Callable

from runtime.core.messages import MailInfo
from runtime.flink.mailbox.mail import MIN_PRIORITY, Mail

__all__ = ["MailboxStateError", "MailboxClosedError", "MailboxState", "TaskMailbox", "Clock"]

Clock = Callable[[], float]


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
