"""A deterministic asyncio event loop on virtual time (the simulator's scheduler).

Why an event loop and not a scheduler of our own: the roles are ordinary asyncio code
(``asyncio.sleep``, ``asyncio.wait_for``, ``Event``, ``Lock``, ``Condition``), so the cheapest
faithful simulator is asyncio itself with two things replaced, FoundationDB-simulation style:

* the clock: :meth:`SimLoop.time` returns virtual seconds. When no callback is ready the loop does
  not sleep; its "selector" jumps the clock to the next timer. ``sleep``, ``wait_for`` and
  ``call_later`` therefore all run on virtual time, and a 30 s timeout costs no real time;
* the I/O: there is none. ``run_in_executor`` (and so ``asyncio.to_thread``) runs the function
  inline, on this thread, so no thread pool can reorder anything.

Ready callbacks run in FIFO order (asyncio's deque), or in the order a
:class:`~runtime.sim.chooser.Chooser` that ``orders_ready`` picks, and timers in (time, insertion)
order (asyncio's heap compares times only, so timers due at the same virtual instant get a
sequence number here);
with the clock and the executor pinned, a run is a pure function of its inputs and the seed. Two
guards bound every run: a virtual-time limit and a real-time limit, each raising a
:class:`SimulationError` that names what ran out.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import gc
import heapq
import itertools
import time
import weakref
from asyncio import format_helpers
from collections.abc import Callable
from contextvars import Context, copy_context
from typing import Any, NoReturn, TypeVar, TypeVarTuple, Unpack

from runtime.sim.chooser import ChoicePoint, Chooser

__all__ = ["SimLoop", "SimulationError", "SimulationStuck", "VirtualTimeLimit", "RealTimeLimit", "SimulationAborted"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


class SimulationError(RuntimeError):
    """The simulated run was stopped by the simulator itself; the message says why."""


class SimulationStuck(SimulationError):
    """No callback is ready and no timer is pending: every coroutine waits for something that
    nothing will ever deliver (in a real system: a hang with no timeout anywhere)."""


class VirtualTimeLimit(SimulationError):
    """The next timer lies beyond the virtual-time limit."""


class RealTimeLimit(SimulationError):
    """The run took longer in real (wall-clock) time than allowed."""


class SimulationAborted(SimulationError):
    """Someone asked the loop to stop (e.g. the trace diverged from a reference run)."""


class _VirtualSelector:
    """Stands in for the selector: ``select(timeout)`` advances the virtual clock instead of
    waiting. There are no file descriptors to watch."""

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        self._loop._advance(timeout)
        return []

    def register(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("the simulator has no real I/O: roles reach the outside through Env")

    modify = unregister = register

    def get_map(self) -> dict[Any, Any]:
        return {}

    def close(self) -> None:
        pass


class _Call:
    """A ready callback: what ``asyncio.Handle`` holds and does (the callback, its args and
    context; ``cancel``), without its debug fields and its ``__init__``'s look-ups. The loop
    makes tens of thousands a run; it reads the same attributes as asyncio's handles (a debug
    loop's ``call_soon`` puts asyncio's own in the queue, and the search reads these)."""

    __slots__ = ("_callback", "_args", "_context", "_cancelled")
    _source_traceback = None  # asyncio's handles keep one in debug mode; these never do

    def __init__(self, callback: Any, args: tuple[Any, ...], context: Context) -> None:
        self._callback = callback
        self._args = args
        self._context = context
        self._cancelled = False

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            self._callback = None
            self._args = None  # type: ignore[assignment]

    def cancelled(self) -> bool:
        return self._cancelled

    def get_context(self) -> Context:
        return self._context

    def __repr__(self) -> str:
        state = " cancelled" if self._cancelled else ""
        if self._callback is None:
            return f"<{type(self).__name__}{state}>"
        source = format_helpers._format_callback_source(self._callback, self._args)
        return f"<{type(self).__name__}{state} {source}>"


class _Timer(_Call):
    """A timer (``asyncio.TimerHandle``'s part the loop uses); the loop's heap holds
    ``(when, sequence, timer)``, so equal virtual times fire in the order they were set and the
    heap compares tuples in C, never timers."""

    __slots__ = ("_when", "_scheduled", "_loop")

    def __init__(self, callback: Any, args: tuple[Any, ...], context: Context, when: float, loop: SimLoop) -> None:
        self._callback = callback
        self._args = args
        self._context = context
        self._cancelled = False
        self._when = when
        self._scheduled = True
        self._loop = loop

    def cancel(self) -> None:
        """``TimerHandle.cancel``: the loop counts the cancelled timers still in its heap (a
        bounded wait that ends in time cancels its timer)."""
        if not self._cancelled:
            if self._scheduled:
                self._loop._timer_cancelled_count += 1
            self._cancelled = True
            self._callback = None
            self._args = None  # type: ignore[assignment]

    def when(self) -> float:
        return self._when


_Entry = tuple[float, int, _Timer]
_heappush = heapq.heappush


_MAXIMUM_SELECT_TIMEOUT = 24 * 3600  # asyncio.base_events.MAXIMUM_SELECT_TIMEOUT
_MIN_SCHEDULED_TIMER_HANDLES = 100  # asyncio's thresholds for purging cancelled timers
_CANCELLED_FRACTION = 0.5
_REAL_TIME_CHECK_MASK = 63  # the real-time guard reads the clock once in 64 iterations
# The collector's youngest generation while the loop runs (CPython's default is 700). A run
# allocates tens of thousands of objects that outlive a few hundred allocations (messages, file
# versions' rows, trace events) and almost no cycles: at 700 the collector walked them about 70
# times a default speed-benchmark run, a tenth of its CPU, and collected nothing young.
_YOUNG_GENERATION_THRESHOLD = 20_000


class SimLoop(asyncio.BaseEventLoop):
    """An event loop whose clock is virtual and advances only between callbacks.

    ``max_virtual_s`` bounds virtual time (the loop raises :class:`VirtualTimeLimit` rather than
    jump past it); ``max_real_s`` bounds real time from the first ``run_*`` call (or from
    :meth:`arm_real_time_guard`); either may be None.
    """

    # BaseEventLoop's private members used here, which typeshed does not declare: the timer heap
    # (only call_at below fills it: it holds (when, sequence, timer) entries), the ready queue,
    # the cancelled-timer count, the stop flag and the closed-loop check
    _scheduled: list[_Entry]
    _ready: collections.deque[Any]  # _Call and _Timer (asyncio's own Handle in debug mode)
    _timer_cancelled_count: int
    _stopping: bool
    _closed: bool
    _clock_resolution: float
    _debug: bool
    _check_closed: Callable[[], None]

    def __init__(
        self, *, max_virtual_s: float | None = None, max_real_s: float | None = None, chooser: Chooser | None = None
    ) -> None:
        super().__init__()
        # who picks among ready callbacks (None or a FIFO chooser: asyncio's order, no call)
        self.chooser = chooser
        self._orders_ready = chooser is not None and chooser.orders_ready
        self._selector = _VirtualSelector(self)
        self._now = 0.0
        self.max_virtual_s = max_virtual_s
        self.max_real_s = max_real_s
        self._real_deadline: float | None = None
        self._abort_reason: str | None = None
        self.iterations = 0  # loop iterations (one per select)
        self.clock_jumps = 0  # times the clock moved forward
        self.inline_executor_calls = 0
        self._timer_seq = itertools.count()
        # this loop's tasks, weakly as asyncio's own registry holds them (a finished task still goes
        # when nothing else holds it): what ``asyncio.all_tasks(loop)`` finds without walking the
        # tasks of every loop not yet collected (a search's earlier runs': 0.2 ms at each run's end)
        self._tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    def create_task(self, coro: Any, *, name: object = None, context: Context | None = None) -> asyncio.Task[Any]:
        task = super().create_task(coro, name=name, context=context)
        self._tasks.add(task)
        return task

    def pending_tasks(self) -> list[asyncio.Task[Any]]:
        """This loop's tasks not done yet: ``asyncio.all_tasks(self)``, every task here being made
        by :meth:`create_task` (``asyncio``'s ``ensure_future``, ``gather``, ``wait_for`` call it)."""
        return [t for t in self._tasks if not t.done()]

    # -- the clock ----------------------------------------------------------------------------

    def time(self) -> float:
        return self._now

    def _advance(self, timeout: float | None) -> None:
        """Called where a real loop would block in select: jump to the next timer."""
        self.iterations += 1
        if self._abort_reason is not None:
            reason, self._abort_reason = self._abort_reason, None
            raise SimulationAborted(reason)
        if self._real_deadline is not None and time.monotonic() > self._real_deadline:
            self._real_deadline = None  # raise once; clean-up after the error may run
            raise RealTimeLimit(
                f"the simulation ran past its real-time guard of {self.max_real_s:.0f}s "
                f"(virtual time {self._now:.3f}s, {self.iterations} loop iterations)"
            )
        if timeout is None:
            self._stuck()
        if timeout <= 0:
            return
        when = self._scheduled[0][0] if self._scheduled else self._now + timeout
        target = when if when - self._now <= timeout else self._now + timeout
        if self.max_virtual_s is not None and target > self.max_virtual_s:
            self._past_limit(target)
        self._now = target
        self.clock_jumps += 1

    def _stuck(self) -> NoReturn:
        raise SimulationStuck(
            f"at virtual time {self._now:.3f}s no callback is ready and no timer is pending: every "
            "coroutine waits for something nothing will deliver"
        )

    def _past_limit(self, target: float) -> NoReturn:
        raise VirtualTimeLimit(
            f"the next timer is at virtual time {target:.3f}s, past the limit of {self.max_virtual_s:.3f}s"
        )

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: Unpack[_Ts],
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:
            self._check_closed()
        timer = _Timer(callback, args, context if context is not None else copy_context(), when, self)
        _heappush(self._scheduled, (when, next(self._timer_seq), timer))
        return timer  # type: ignore[return-value]  # (not ``cast``: a call, and a run sets 22,000 timers)

    def call_later(
        self,
        delay: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: Unpack[_Ts],
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_soon(
        self,
        callback: Callable[[Unpack[_Ts]], object],
        *args: Unpack[_Ts],
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        if self._closed:
            self._check_closed()
        handle = _Call(callback, args, context if context is not None else copy_context())
        self._ready.append(handle)
        return handle  # type: ignore[return-value]  # (not ``cast``: a call, and a run makes 22,000)

    # -- the iteration ------------------------------------------------------------------------
    # asyncio's BaseEventLoop._run_once (3.11) step for step, over the (when, sequence, timer)
    # heap: the same callbacks run in the same order; it is most of what the loop itself costs.
    # ``run_forever`` calls ``_run_once`` until ``_stopping``: here one call runs the iterations
    # until then (the same check, made here), with ``_advance`` inline, so an iteration costs no
    # method call of its own. A run makes about as many iterations as callbacks (one or two
    # ready at a time), so the iteration's own work is kept to tests of locals: the counters are
    # added up on the way out, and the real-time guard reads the clock every
    # ``_REAL_TIME_CHECK_EVERY`` iterations (a guard of seconds; no callback is interrupted anyway).

    def _run_once(self) -> None:
        if self._orders_ready:
            self._run_once_chosen()
            return
        scheduled = self._scheduled
        ready = self._ready
        popleft = ready.popleft
        append = ready.append
        heappop = heapq.heappop
        monotonic = time.monotonic
        resolution = self._clock_resolution
        max_virtual_s = self.max_virtual_s
        iterations = jumps = 0
        try:
            while True:
                n = len(scheduled)  # ``_worth_purging`` inline (a call an iteration otherwise)
                if n > _MIN_SCHEDULED_TIMER_HANDLES and self._timer_cancelled_count / n > _CANCELLED_FRACTION:
                    scheduled = self._purge_cancelled()
                else:
                    while scheduled and scheduled[0][2]._cancelled:
                        self._timer_cancelled_count -= 1
                        heappop(scheduled)[2]._scheduled = False
                # ``_advance`` inline while no guard has anything to say (it raises what one says)
                if self._abort_reason is not None or (
                    not iterations & _REAL_TIME_CHECK_MASK
                    and self._real_deadline is not None
                    and monotonic() > self._real_deadline
                ):
                    self._advance(0)
                iterations += 1
                if ready or self._stopping:
                    pass
                elif scheduled:
                    jumps += self._jump_to(scheduled[0][0], max_virtual_s)
                else:
                    self._stuck()
                end_time = self._now + resolution
                while scheduled and scheduled[0][0] < end_time:
                    timer = heappop(scheduled)[2]
                    timer._scheduled = False
                    append(timer)
                for _ in range(len(ready)):
                    handle: Any = popleft()
                    if handle._cancelled:
                        continue
                    # ``_run_callback`` inline: one frame less for every callback of the run
                    try:
                        handle._context.run(handle._callback, *handle._args)
                    except (SystemExit, KeyboardInterrupt):
                        raise
                    except BaseException as exc:  # noqa: BLE001 - reported as Handle._run reports it
                        self._callback_failed(handle, exc)
                if self._stopping:
                    return
        finally:
            self.iterations += iterations
            self.clock_jumps += jumps

    def _jump_to(self, when: float, max_virtual_s: float | None) -> int:
        """No callback is ready: the clock jumps to the next timer, ``when`` (1), unless it is due
        already (0); past the virtual-time limit, the run ends (:meth:`_past_limit`)."""
        now = self._now
        if when <= now:
            return 0
        target = when if when - now <= _MAXIMUM_SELECT_TIMEOUT else now + _MAXIMUM_SELECT_TIMEOUT
        if max_virtual_s is not None and target > max_virtual_s:
            self._past_limit(target)
        self._now = target
        return 1

    def _worth_purging(self, n: int) -> bool:
        """asyncio's rule: purge when the heap is large and cancelled timers are most of it."""
        return n > _MIN_SCHEDULED_TIMER_HANDLES and self._timer_cancelled_count / n > _CANCELLED_FRACTION

    def _timeout_to_next(self, scheduled: list[_Entry]) -> float | None:
        """How long a real loop would block in select: until the next timer (None: no timer)."""
        return min(max(0.0, scheduled[0][0] - self._now), _MAXIMUM_SELECT_TIMEOUT) if scheduled else None

    def _purge_cancelled(self) -> list[_Entry]:
        """asyncio's purge of cancelled timers once they are most of the heap; the new heap."""
        kept = []
        for entry in self._scheduled:
            if entry[2]._cancelled:
                entry[2]._scheduled = False
            else:
                kept.append(entry)
        heapq.heapify(kept)
        self._scheduled = kept
        self._timer_cancelled_count = 0
        return kept

    def _run_once_chosen(self) -> None:
        """One iteration, with the ready callbacks in the order the chooser picks."""
        scheduled = self._scheduled
        if self._worth_purging(len(scheduled)):
            scheduled = self._purge_cancelled()
        else:
            while scheduled and scheduled[0][2]._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(scheduled)[2]._scheduled = False
        ready = self._ready
        timeout = 0.0 if ready or self._stopping else self._timeout_to_next(scheduled)
        self._advance(timeout)
        end_time = self._now + self._clock_resolution
        while scheduled and scheduled[0][0] < end_time:
            timer = heapq.heappop(scheduled)[2]
            timer._scheduled = False
            ready.append(timer)
        self._run_chosen(len(ready))

    def _run_callback(self, handle: Any) -> None:
        """``Handle._run``: the callback, its exception to the loop's exception handler."""
        try:
            handle._context.run(handle._callback, *handle._args)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - reported as Handle._run reports it
            self._callback_failed(handle, exc)

    def _callback_failed(self, handle: Any, exc: BaseException) -> None:
        """What ``Handle._run`` does with a callback's exception: the loop's exception handler."""
        context = {
            "message": "Exception in callback "
            + format_helpers._format_callback_source(handle._callback, handle._args),
            "exception": exc,
            "handle": handle,
        }
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        self.call_exception_handler(context)

    def _run_chosen(self, n: int) -> None:
        """Runs the ``n`` callbacks ready now in the order the chooser picks (callbacks they make
        ready wait for the next iteration, as in FIFO order)."""
        assert self.chooser is not None
        ready = self._ready
        for remaining in range(n, 0, -1):
            k = self.chooser.choose(ChoicePoint.READY_ORDER, remaining) if remaining > 1 else 0
            if k:
                handle = ready[k]
                del ready[k]
            else:
                handle = ready.popleft()
            if not handle._cancelled:
                self._run_callback(handle)

    # -- guards -------------------------------------------------------------------------------

    def arm_real_time_guard(self, seconds: float | None = None) -> None:
        """Starts (or restarts) the real-time budget: ``seconds`` from now, or ``max_real_s``."""
        if seconds is not None:
            self.max_real_s = seconds
        self._real_deadline = None if self.max_real_s is None else time.monotonic() + self.max_real_s

    def extend_real_time_guard(self, seconds: float) -> None:
        """Moves the real-time deadline ``seconds`` later: time the run spent paused (a forked
        search's parent waiting for its children) is not the run's."""
        if self._real_deadline is not None:
            self._real_deadline += seconds

    def disarm_guards(self) -> None:
        """For clean-up after a run ended: no real-time or virtual-time limit any more."""
        self._real_deadline = None
        self.max_virtual_s = None

    def abort(self, reason: str) -> None:
        """Stops the run at the next loop iteration with :class:`SimulationAborted`."""
        self._abort_reason = reason

    def run_until_complete(self, future: Any) -> Any:
        if self._real_deadline is None and self.max_real_s is not None:
            self.arm_real_time_guard()
        threshold = gc.get_threshold()  # the process's own, back when the loop stops
        gc.set_threshold(max(threshold[0], _YOUNG_GENERATION_THRESHOLD), *threshold[1:])
        try:
            return super().run_until_complete(future)
        finally:
            gc.set_threshold(*threshold)

    # -- no real I/O, no threads --------------------------------------------------------------

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        # call_soon_threadsafe pokes the self-pipe; there is one thread and the next iteration
        # sees the callback anyway
        pass

    def run_in_executor(
        self, executor: concurrent.futures.Executor | None, func: Callable[[Unpack[_Ts]], _T], *args: Unpack[_Ts]
    ) -> asyncio.Future[_T]:
        """Runs ``func`` inline (no thread pool: threads would make the order nondeterministic)
        and returns a finished future."""
        self._check_closed()
        self.inline_executor_calls += 1
        fut: asyncio.Future[_T] = self.create_future()
        try:
            fut.set_result(func(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            fut.set_exception(exc)
        return fut

    def set_default_executor(self, executor: concurrent.futures.Executor) -> None:
        raise NotImplementedError("the simulator runs executor work inline; it has no executor")
