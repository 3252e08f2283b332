"""One test environment for every test that runs roles without Ray: the simulator's own parts.

A :class:`Sim` is one test's world: the simulator's event loop on virtual time
(:class:`~runtime.sim.loop.SimLoop`: ``sleep``, ``wait_for`` and every timeout cost no real time,
a hang raises instead of blocking, a real-time guard stops a busy loop), its network
(:class:`~runtime.sim.network.SimNetwork`: the codec on the wire, per-pair FIFO, seeded delays), a
DFS (in memory by default, :class:`~runtime.sim.memory_dfs.MemoryDfs`; a local directory when a
test looks at the files), and one :class:`TestEnv` per role: the simulator's
:class:`~runtime.sim.sim_env.SimEnv` that also records what the role asked of it (calls, sends,
sleeps, I/O), so a test can assert on it.

Small helpers on top: :meth:`Sim.run` (run a coroutine to the end), :func:`wait_until` (poll a
condition on virtual time), :meth:`Sim.drain` (every one-way message sent so far has been
handled), :meth:`Sim.down` (a role whose every RPC fails), :func:`mailbox` (a role that only
collects what it is sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from runtime.core.dfs import Dfs, open_dfs
from runtime.core.env import RPC_TIMEOUT_FLAG
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.table_config import TableProps
from runtime.sim.loop import SimLoop, SimulationError
from runtime.sim.memory_dfs import MemoryDfs, MemoryStore
from runtime.sim.network import DEFAULT_DELAY, Delay, SimNetwork
from runtime.sim.recorder import TraceRecorder
from runtime.sim.sim_env import SimEnv

__all__ = [
    "Sim",
    "TestEnv",
    "RecordingEnv",
    "Inbox",
    "memory_dfs",
    "local_dfs",
    "now",
    "wait_until",
    "run",
    "active",
    "opened",
    "new_table",
    "table_props",
]

E = TypeVar("E", bound="TestEnv")
T = TypeVar("T")

REAL_TIME_GUARD_S = 60.0  # real seconds one test may spend in its loop (a busy loop that never waits)
MEMORY_TABLE = "/commitlab-test/t"


def memory_dfs(role: str = "setup") -> tuple[MemoryDfs, str]:
    """A fresh in-memory DFS and the table path on it."""
    return MemoryDfs(MemoryStore(), role=role), MEMORY_TABLE


def local_dfs(directory: Any, role: str = "setup") -> tuple[Dfs, str]:
    """A DFS on a local directory (for tests that look at the files with ``os``)."""
    return open_dfs(str(directory), role=role)


def table_props() -> TableProps:
    return TableProps("t", "key", "partition", "ts")


class TestEnv(SimEnv):
    """A role's :class:`SimEnv` that records what the role did: ``calls`` (dest, method, msg),
    ``sent`` (dest, method, msg; and, when ``send_probe`` is set, what it returned at the send),
    ``sleeps``, ``io_calls``."""

    __test__ = False  # not a test class, whatever its name says

    def __init__(self, role: str, dfs: Dfs, network: SimNetwork, *, seed: int, recorder: TraceRecorder) -> None:
        super().__init__(role, dfs, network, seed=seed, recorder=recorder)
        self.calls: list[tuple[str, str, Any]] = []
        self.sent: list[tuple[Any, ...]] = []
        self.sleeps: list[float] = []
        self.io_calls = 0
        self.send_probe: Callable[[], Any] | None = None

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await super().sleep(seconds)

    async def call(
        self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None, option: str = RPC_TIMEOUT_FLAG
    ) -> Any:
        self.calls.append((dest, method, msg))
        return await super().call(dest, method, msg, timeout=timeout, option=option)

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        if self.send_probe is None:
            self.sent.append((dest, method, msg))
        else:
            self.sent.append((dest, method, msg, self.send_probe()))
        super().send(dest, method, msg)

    async def io(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.io_calls += 1
        return await super().io(fn, *args)


class RecordingEnv(TestEnv):
    """A :class:`TestEnv` that delivers nothing: ``calls`` and ``sent`` (dest, method, msg) and
    ``events`` (dest, method, msg, on_failure) are only recorded, for a role tested alone. A call
    answers None, once ``call_gate`` (when set) is open."""

    def __init__(self, role: str, dfs: Dfs, network: SimNetwork, *, seed: int, recorder: TraceRecorder) -> None:
        super().__init__(role, dfs, network, seed=seed, recorder=recorder)
        self.events: list[tuple[str, str, Any, Callable[[str], None]]] = []
        self.call_gate: asyncio.Event | None = None  # when set, every call waits for it

    async def call(
        self, dest: str, method: str, msg: Any = None, *, timeout: float | None = None, option: str = RPC_TIMEOUT_FLAG
    ) -> Any:
        self.calls.append((dest, method, msg))
        if self.call_gate is not None:
            await self.call_gate.wait()
        return None

    def send(self, dest: str, method: str, msg: Any = None) -> None:
        self.sent.append((dest, method, msg))

    def send_event(
        self,
        dest: str,
        method: str,
        msg: Any,
        *,
        timeout: float,
        on_failure: Callable[[str], None],
        option: str = RPC_TIMEOUT_FLAG,
    ) -> None:
        self.events.append((dest, method, msg, on_failure))


class _TrackingNetwork(SimNetwork):
    """The simulator's network, which also keeps the completion of every one-way message, so
    :meth:`Sim.drain` can wait for them (a one-way message travels as a call whose reply nobody
    reads; its error still reaches the sender's ``send_errors``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.one_way: list[asyncio.Future[Any]] = []

    def post(
        self,
        sender: str,
        dest: str,
        method: str,
        msg: Any,
        *,
        want_reply: bool,
        on_error: Callable[[str], None] | None = None,
        late_s: float = 0.0,
    ) -> asyncio.Future[Any] | None:
        if want_reply:
            return super().post(sender, dest, method, msg, want_reply=True, late_s=late_s)
        done = super().post(sender, dest, method, msg, want_reply=True, late_s=late_s)
        assert done is not None

        def landed(fut: asyncio.Future[Any]) -> None:
            if fut.cancelled() or fut.exception() is None:
                return
            exc = fut.exception()
            if on_error is not None:
                on_error(f"{dest}.{method}: {type(exc).__name__}: {exc}"[:500])

        done.add_done_callback(landed)
        self.one_way.append(done)
        return None


class _Down:
    """A role whose every RPC raises ``error`` (a role that is gone)."""

    class _Every:
        def __contains__(self, method: object) -> bool:
            return True

    RPC_METHODS = _Every()

    def __init__(self, error: BaseException) -> None:
        self._error = error

    def __getattr__(self, method: str) -> Callable[[Any], Any]:
        def fail(_msg: Any) -> Any:
            raise self._error

        return fail


class _DownRoles:
    def __init__(self, network: SimNetwork) -> None:
        self._network = network

    def __setitem__(self, name: str, error: BaseException) -> None:
        self._network.bind(name, _Down(error))


class Inbox:
    """A role that only collects the messages of ``methods`` it receives: (method, message)."""

    def __init__(self, *methods: str) -> None:
        self.RPC_METHODS = methods
        self.received: list[tuple[str, Any]] = []

    def __getattr__(self, method: str) -> Callable[[Any], None]:
        if method not in self.__dict__.get("RPC_METHODS", ()):
            raise AttributeError(method)
        return lambda msg: self.received.append((method, msg))


class Sim:
    """One test's world: a virtual-time loop, the simulated network, a DFS, envs by role."""

    def __init__(
        self,
        dfs: Dfs | None = None,
        *,
        seed: int = 0,
        delay: Delay = DEFAULT_DELAY,
        max_real_s: float = REAL_TIME_GUARD_S,
    ) -> None:
        self.loop = SimLoop(max_real_s=max_real_s)
        self.errors: list[dict[str, Any]] = []  # what the loop's exception handler saw
        self.loop.set_exception_handler(lambda _loop, context: self.errors.append(context))
        self.recorder = TraceRecorder(self.loop.time)
        self.seed = seed
        self.network = _TrackingNetwork(self.loop, seed, self.recorder, delay)
        self.dfs = dfs if dfs is not None else memory_dfs()[0]
        self.envs: dict[str, TestEnv] = {}

    # -- roles -------------------------------------------------------------------------------

    @property
    def roles(self) -> dict[str, Any]:
        """Role objects by name (None: a name with an env but no role bound)."""
        return self.network.roles

    def env(self, role: str, *, seed: int | None = None, dfs: Dfs | None = None) -> TestEnv:
        """A new env for ``role`` on this world's DFS (its operations counted for ``role``)."""
        return self._add_env(TestEnv, role, seed, dfs)

    def recording_env(self, role: str, *, dfs: Dfs | None = None) -> RecordingEnv:
        """A new :class:`RecordingEnv` for ``role``: what the role sends is recorded, not delivered."""
        return self._add_env(RecordingEnv, role, None, dfs)

    def _add_env(self, kind: type[E], role: str, seed: int | None, dfs: Dfs | None) -> E:
        env = kind(
            role,
            dfs if dfs is not None else self.dfs.for_role(role),
            self.network,
            seed=self.seed if seed is None else seed,
            recorder=self.recorder,
        )
        self.envs[role] = env
        return env

    def register(self, name: str, role: Any) -> Any:
        """Messages to ``name`` now reach ``role`` (its ``RPC_METHODS``)."""
        self.network.bind(name, role)
        return role

    @property
    def down(self) -> _DownRoles:
        """``sim.down[name] = error``: every call to ``name`` fails with ``error`` from now on."""
        return _DownRoles(self.network)

    async def drain(self) -> None:
        """Waits until every one-way message sent so far has been handled, and none failed."""
        while any(not f.done() for f in self.network.one_way):
            await asyncio.gather(*self.network.one_way, return_exceptions=True)
        errors = [e for env in self.envs.values() for e in env.send_errors]
        assert not errors, errors

    # -- running -----------------------------------------------------------------------------

    def run(
        self,
        coro: Coroutine[Any, Any, Any],
        timeout: float = 600.0,
        *,
        background_errors: list[dict[str, Any]] | None = None,
    ) -> Any:
        """Runs ``coro`` to its end on the virtual clock, bounded by ``timeout`` VIRTUAL seconds.

        The clock goes on from where the previous run left it. A background task that died with
        an exception nobody retrieved fails the test, unless the caller collects such errors in
        ``background_errors``.
        """
        asyncio.set_event_loop(self.loop)
        try:
            result = self.loop.run_until_complete(asyncio.wait_for(coro, timeout))
        finally:
            asyncio.set_event_loop(None)
        # finalize the tasks that ended in this run now, while the handler records their errors:
        # the young generations hold them (a full collection costs a fifth of a second once the
        # suite has imported everything, and some tests run many short runs)
        gc.collect(1)
        seen, self.errors[:] = list(self.errors), []
        if background_errors is not None:
            background_errors.extend(seen)
        else:
            failures = [e["exception"] for e in seen if "exception" in e]
            if failures:
                raise AssertionError(f"background tasks failed: {failures!r}")
        return result

    def now(self) -> float:
        return self.loop.time()

    def close(self) -> None:
        """Cancels what still runs and closes the loop."""
        loop = self.loop
        if loop.is_closed():
            return
        loop.disarm_guards()
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except SimulationError:
            pass  # a task that ignores its cancellation is dropped with the loop
        finally:
            loop.close()


def now() -> float:
    """The running loop's clock (virtual in a :class:`Sim`)."""
    return asyncio.get_running_loop().time()


async def wait_until(
    pred: Callable[[], Any], timeout: float = 10.0, step: float = 0.01, what: str = "the condition"
) -> None:
    """Polls ``pred`` (which may be a coroutine function) every ``step`` virtual seconds; fails
    the test if it does not hold within ``timeout``."""
    deadline = now() + timeout
    while True:
        result = pred()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if now() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s (virtual)")
        await asyncio.sleep(step)


def run_virtual(coro: Coroutine[Any, Any, T], max_real_s: float = 60.0) -> T:
    """Runs ``coro`` to its end on a fresh simulator loop (virtual time), as ``asyncio.run`` would
    on the real clock: a test's sleeps and timeouts cost no real time and a loaded machine cannot
    change what it sees."""
    loop = SimLoop(max_real_s=max_real_s)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.disarm_guards()
        loop.close()


def new_table(dfs: Dfs, path: str) -> HudiTable:
    return HudiTable.create_or_open(dfs, path, table_props())


# -- the test's Sim ----------------------------------------------------------------------------
# Module-level helpers of older test files (``run(coro)``) reach the Sim of the test being run
# through :func:`active`; :func:`opened` sets it for the test's duration and closes the Sim after.

_ACTIVE: list[Sim] = []


@contextlib.contextmanager
def opened(dfs: Dfs | None = None, **kwargs: Any) -> Iterator[Sim]:
    """A :class:`Sim` that is :func:`active` until the block ends, then closed."""
    world = Sim(dfs, **kwargs)
    _ACTIVE.append(world)
    try:
        yield world
    finally:
        _ACTIVE.remove(world)
        world.close()


def active() -> Sim:
    """The Sim of the test being run (opened by its fixture)."""
    if not _ACTIVE:
        raise RuntimeError("no Sim is open: use the `sim` fixture (or harness.opened) in this test")
    return _ACTIVE[-1]


def run(coro: Coroutine[Any, Any, Any], timeout: float = 600.0, **kwargs: Any) -> Any:
    """:meth:`Sim.run` on the active Sim."""
    return active().run(coro, timeout, **kwargs)


@pytest.fixture
def sim() -> Iterator[Sim]:
    """A :class:`Sim` on an in-memory DFS, active for the test and closed after it."""
    with opened() as world:
        yield world
