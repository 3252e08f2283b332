"""The fault points a host attaches to a role's :class:`~runtime.core.env.Env` (``env.faults``).

Fault policy is not part of the environment: a role asks ``env.faults.fire(point, ...)`` at each
named point and the host decides what is armed. This is the port; the armed implementation (the
injector, its markers on the DFS, the slow- and failing-DFS state) is
``runtime.faults.points.ArmedFaultPoints``. :data:`NO_FAULTS` is what a role has when nothing is
armed: no point fires, no message is touched.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from runtime.core.fault_spec import FaultSpec


class FaultPoints(abc.ABC):
    """The faults armed for one role, and the state a fired fault leaves behind."""

    specs: Sequence[FaultSpec]
    # whether a messaging fault (message.dropped / message.delayed) is armed at all: hosts ask the
    # per-message hooks below only then, so a role without one pays one test per message
    arms_messages: bool = False

    @abc.abstractmethod
    def fire(self, point: str, *, checkpoint: int = -1, task: int = -1) -> FaultSpec | None:
        """The armed fault spec if ``point`` fires now (traced), else None."""

    @abc.abstractmethod
    def has_fired(self, spec: FaultSpec) -> bool:
        """Whether ``spec`` fired in this job, in any role or earlier attempt."""

    @abc.abstractmethod
    def slow_dfs(self, seconds_per_op: float, window_s: float) -> None:
        """From now on, for ``window_s``, each DFS operation of this role takes ``seconds_per_op``
        longer (the host's DFS hook applies it)."""

    @abc.abstractmethod
    def dfs_delay(self) -> float:
        """The extra latency of a DFS operation now (0 outside a dfs.latency window)."""

    @abc.abstractmethod
    def fail_next_dfs_write(self) -> None:
        """The dfs.transient_error fault: the next DFS write or create of this role fails."""

    @abc.abstractmethod
    def take_dfs_failure(self) -> bool:
        """True once after :meth:`fail_next_dfs_write`: this DFS write or create must fail."""

    @abc.abstractmethod
    def message_fault(self, dest: str, method: str, msg: Any) -> FaultSpec | None:
        """The armed messaging fault (``message.dropped`` / ``message.delayed``) that hits this
        message now, or None."""

    @abc.abstractmethod
    async def apply_call_fault(
        self, dest: str, method: str, msg: Any, timeout: float | None, option: str = ""
    ) -> float:
        """A host calls this before a request goes out: a lost request ends in the caller's own
        timeout (WaitTimeout); otherwise the seconds it arrives late (0 for none)."""

    @abc.abstractmethod
    def send_fault_delay(self, dest: str, method: str, msg: Any) -> float | None:
        """A host calls this before a one-way message goes out: seconds it arrives late (0 for
        none), or None when it is lost. A late message holds up the ones sent after it to the
        same receiver (Flink's RPC keeps a sender's order per receiver, as TCP does)."""


class NoFaults(FaultPoints):
    """Nothing armed: every point passes, every message goes out as sent."""

    specs: Sequence[FaultSpec] = ()

    def fire(self, point: str, *, checkpoint: int = -1, task: int = -1) -> FaultSpec | None:
        return None

    def has_fired(self, spec: FaultSpec) -> bool:
        return False

    def slow_dfs(self, seconds_per_op: float, window_s: float) -> None:
        pass

    def dfs_delay(self) -> float:
        return 0.0

    def fail_next_dfs_write(self) -> None:
        pass

    def take_dfs_failure(self) -> bool:
        return False

    def message_fault(self, dest: str, method: str, msg: Any) -> FaultSpec | None:
        return None

    async def apply_call_fault(
        self, dest: str, method: str, msg: Any, timeout: float | None, option: str = ""
    ) -> float:
        return 0.0

    def send_fault_delay(self, dest: str, method: str, msg: Any) -> float | None:
        return 0.0


NO_FAULTS = NoFaults()  # stateless: shared by every env with nothing armed
