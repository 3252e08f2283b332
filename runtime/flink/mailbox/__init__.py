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

Mapping to Flink 1.10+ (FLINK-14304), a module per concept, each naming its Java file:

* :mod:`~runtime.flink.mailbox.mail` - :class:`Mail` is ``Mail``; its ``future`` is the
  ``FutureTaskWithException`` of ``submit``; the priorities (``MIN_PRIORITY`` ...).
* :mod:`~runtime.flink.mailbox.task_mailbox` - :class:`TaskMailbox` is ``TaskMailboxImpl``: states
  OPEN -> QUIESCED -> CLOSED, ``put``/``putFirst`` only when OPEN, ``take``/``tryTake`` when OPEN or
  QUIESCED, ``take(priority)`` returns the oldest mail whose priority is >= the requested one (the
  batch first, then the queue); ``createBatch`` moves every queued mail into the batch and
  ``tryTakeFromBatch`` takes from it only; ``close`` returns the batched and queued mails and wakes
  takers.
* :mod:`~runtime.flink.mailbox.executor` - :class:`MailboxExecutor` is ``MailboxExecutorImpl``:
  bound to a priority; ``yield_``/``try_yield`` only run mails of at least that priority, so an
  operator's executor (priority = chain index >= 1) never runs an operator event (sent through the
  main executor at ``MIN_PRIORITY``).
* :mod:`~runtime.flink.mailbox.processor` - :class:`MailboxProcessor` is
  ``MailboxProcessor.runMailboxLoop`` / ``processMail``: create a batch and run the mails in it
  (``processMailsNonBlocking``: mails put meanwhile wait for the next batch, so a mail that
  re-queues itself cannot starve the default action), block on the mailbox while the default action
  is suspended (``processMailsWhenDefaultActionUnavailable``), then run one step of the default
  action. ``close`` closes the mailbox and cancels the futures of the mails it dropped
  (``Mail.tryCancel``: a ``submit`` caller learns its action will never run). Beside it, as in
  Flink's file, :class:`Controller` / :class:`Suspension`: ``MailboxDefaultAction.Controller`` /
  ``Suspension``, implemented by ``MailboxController`` / ``DefaultActionSuspension``.
* :mod:`~runtime.flink.mailbox.mailbox_thread` - :func:`is_in_mailbox_thread` is
  ``TaskMailboxImpl.isMailboxThread``.

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
:meth:`TaskMailbox.put_threadsafe`. Import the names from this package
(``from runtime.flink.mailbox import MailboxProcessor``).
"""

from __future__ import annotations

from runtime.flink.mailbox.executor import MailboxExecutor
from runtime.flink.mailbox.mail import MAX_PRIORITY, MIN_PRIORITY, OPERATOR_PRIORITY, Action, Mail
from runtime.flink.mailbox.mailbox_thread import is_in_mailbox_thread
from runtime.flink.mailbox.processor import Controller, MailboxProcessor, Suspension
from runtime.flink.mailbox.task_mailbox import MailboxClosedError, MailboxState, MailboxStateError, TaskMailbox

__all__ = [
    "MIN_PRIORITY",
    "OPERATOR_PRIORITY",
    "MAX_PRIORITY",
    "Action",
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
