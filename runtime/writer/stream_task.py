"""The task a write function runs in: Flink's StreamTask around its mailbox thread.

Sources: Apache Flink 1.14+ ``StreamTask`` (``processInput`` is the mailbox's default action;
``notifyCheckpointCompleteAsync`` / ``notifyCheckpointAbortAsync`` put highest-priority mails; an
exception out of ``runMailboxLoop`` fails the task, which is reported to the JobMaster) and its
input gate, whose bounded buffers hold a sender back while they are full (back-pressure).
:mod:`runtime.flink.mailbox` models the mailbox itself.

RPC-facing methods (``push_input``, ``notify_*``) run on the host's event loop outside the mailbox
thread; they only queue input or mails.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any

from runtime.core import trace_events
from runtime.core.config import JobConfig
from runtime.core.env import Env
from runtime.core.messages import BlockedWait, CheckpointNotice, MailRun, TaskFailure
from runtime.flink.mailbox import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    Action,
    Controller,
    Mail,
    MailboxProcessor,
    Suspension,
    TaskMailbox,
)


class FlushError(RuntimeError):
    """The task cannot take input or flush (it is failing, or a barrier found no instant): it fails."""


class StreamTask(ABC):
    """The mailbox loop of one task, its bounded input queue, its mails, the waits its mailbox
    thread blocks in, and the report of its failure. A subclass processes the input."""

    RPC_METHODS: tuple[str, ...] = ("push_input", "notify_checkpoint_complete", "notify_checkpoint_aborted")

    def __init__(self, env: Env, config: JobConfig, job_manager: str) -> None:
        self.env = env
        self.config = config
        self.job_manager = job_manager
        self.last_checkpoint_id = -1
        self.processor = MailboxProcessor(
            self._default_action,
            TaskMailbox(clock=env.now),
            on_mail_start=self._on_mail_start,
            on_mail_end=self._on_mail_end,
        )
        self.mailbox = self.processor.mailbox
        self._inputs: list[Any] = []
        self._input_space: asyncio.Condition | None = None  # created on start (needs the running loop)
        self._suspension: Suspension | None = None
        self.blocked: BlockedWait | None = None
        self._ended_wait: tuple[float, float] | None = None
        self.state = "created"
        self.error: str | None = None

    @abstractmethod
    async def _default_action(self, controller: Controller) -> None:
        """One step of ``processInput`` (defined by the subclass: the trace names its step by it)."""

    @abstractmethod
    def _on_checkpoint_complete(self, notice: CheckpointNotice) -> None: ...

    # -- the mailbox loop ----------------------------------------------------------------------

    def _start_mailbox_loop(self) -> None:
        self.state = "running"
        self.loop = self.env.spawn(self._run_loop(), f"{self.env.role}-mailbox")

    async def _run_loop(self) -> None:
        try:
            await self.processor.run_mailbox_loop()
            self.state = "finished"
        except asyncio.CancelledError:
            self.state = "cancelled"
            raise
        except Exception as exc:  # noqa: BLE001 - the task failed: report it to the job manager
            self._fail(f"{type(exc).__name__}: {exc}")
        # a KeyboardInterrupt or SystemExit is the process's stop (Ctrl-C in the simulator's one
        # process), not the task's failure: it ends the run instead of failing the job over

    def _fail(self, error: str) -> None:
        self.state = "failed"
        self.error = error
        self.env.send(self.job_manager, "task_failed", TaskFailure(self.env.role, error, self.last_checkpoint_id))

    def set_blocked(self, wait: BlockedWait | None) -> None:
        """What the mailbox thread is blocked on (None: the wait is over, traced with its length)."""
        if wait is None and self.blocked is not None:
            self._ended_wait = (self.blocked.since, self.env.now())
            seconds = self.env.now() - self.blocked.since
            self.env.metrics.blocked(self.env.role, seconds)
            self.env.tracer.complete(
                "blocked: " + self.blocked.what,
                self.blocked.since,
                self.env.now(),
                thread="mailbox",
                cat=trace_events.BLOCKED,
                args={"waiting_on": self.blocked.waiting_on},
            )
        self.blocked = wait

    def _on_mail_start(self, info: MailRun) -> None:
        if info.what == "mail":
            self.env.metrics.mail(info.kind)

    def _on_mail_end(self, info: MailRun, error: BaseException | None) -> None:
        self.env.tracer.complete(
            info.description or info.kind,
            info.started_at,
            self.env.now(),
            thread="mailbox",
            cat=info.what,
            args={"error": repr(error)} if error else None,
        )

    # -- the input queue -----------------------------------------------------------------------

    def _open_input(self) -> None:
        self._input_space = asyncio.Condition()

    async def push_input(self, item: Any) -> None:
        """Enqueues a batch or barrier; waits while the bounded input queue is full (back-pressure)."""
        assert self._input_space is not None
        async with self._input_space:
            await self._input_space.wait_for(
                lambda: len(self._inputs) < self.config.input_queue_batches or self.state != "running"
            )
            if self.state != "running":
                raise FlushError(f"{self.env.role} is {self.state}, not accepting input")
            self._inputs.append(item)
        if self._suspension is not None:
            suspension, self._suspension = self._suspension, None
            suspension.resume()

    async def _next_input(self, controller: Controller) -> Any:
        """The next input; None when there is none (the default action is suspended until one comes)."""
        if not self._inputs:
            self._suspension = controller.suspend_default_action()
            return None
        item = self._inputs.pop(0)
        assert self._input_space is not None
        async with self._input_space:
            self._input_space.notify_all()
        return item

    # -- mails ---------------------------------------------------------------------------------

    def put_mail(self, action: Action, kind: str, description: str, priority: int = MIN_PRIORITY) -> None:
        """Queues work for the mailbox thread (what a protocol's own agent delivers)."""
        self.mailbox.put(Mail(action, priority, kind, description, 0, self.env.now()))

    def notify_checkpoint_complete(self, notice: CheckpointNotice) -> None:
        kind = "notifyCheckpointComplete"
        self.put_mail(
            lambda: self._on_checkpoint_complete(notice), kind, f"{kind}(ckp={notice.checkpoint_id})", MAX_PRIORITY
        )

    def notify_checkpoint_aborted(self, notice: CheckpointNotice) -> None:
        kind = "notifyCheckpointAborted"
        self.put_mail(lambda: None, kind, f"{kind}(ckp={notice.checkpoint_id})", MAX_PRIORITY)
