"""A Kafka client's own thread: librdkafka's blocking calls, one at a time, off the event loop,
each awaited for a bounded time.

librdkafka blocks its caller, and some of its calls have no time limit: a synchronous
``commit`` waits until the group's coordinator answers, which never happens once the client has
lost every broker (confluent-kafka 2.16 / librdkafka: a metadata response listing no broker, as a
KRaft broker in controlled shutdown sends, makes it drop the broker it knew, and it starts no
re-bootstrap when that broker had already gone down: librdkafka issue #5301), and
``consumer.close`` can wait for a coordinator forever (librdkafka issue #3740). So every call is
awaited for a bound that names what was awaited; a call past its bound raises
:class:`ClientStuck`, and its client must not be used again (its thread is still inside it).

The thread is a daemon: a call librdkafka never returns from must not keep the process from
exiting (``ThreadPoolExecutor``'s threads are joined at exit).
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from runtime.core.env import WaitTimeout, waited_text

T = TypeVar("T")
_Call = tuple[Callable[[], Any], "Future[Any]"]


class ClientStuck(WaitTimeout):
    """A client's call did not return within its bound: the client is abandoned."""


class ClientThread:
    """One client's thread. Started on first use and again after a shutdown (a message published
    after its role's agent stopped still goes out)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: queue.SimpleQueue[_Call | None] | None = None

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queues ``fn(*args)`` behind the calls before it; nothing waits for it."""
        if self._calls is None:
            self._calls = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._calls,), name=self.name, daemon=True).start()
        done: Future[T] = Future()
        self._calls.put((functools.partial(fn, *args), done))
        return done

    async def run(self, fn: Callable[..., T], *args: Any, timeout_s: float, what: str, option: str) -> T:
        """``fn(*args)`` on this thread; raises :class:`ClientStuck` (saying ``what`` was awaited
        and which ``option`` sets the bound) when it has not returned within ``timeout_s``."""
        waiter = asyncio.wrap_future(self.submit(fn, *args))
        done, _ = await asyncio.wait({waiter}, timeout=timeout_s)
        if not done:
            waiter.cancel()  # its late result is dropped, even after the loop closed
            raise ClientStuck(waited_text(self.name, timeout_s, what, option))
        return waiter.result()

    def shutdown(self) -> None:
        """The thread ends after the calls already queued (never, behind one that never returns)."""
        calls, self._calls = self._calls, None
        if calls is not None:
            calls.put(None)


def _serve(calls: queue.SimpleQueue[_Call | None]) -> None:
    while (call := calls.get()) is not None:
        fn, done = call
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, as an executor does
                done.set_exception(exc)
