"""Graph-local state (eino-semantics 1.6).

A graph built with ``state=factory`` calls the factory once per run. The state lives in a frame of a per-run chain
held in a ``ContextVar``: a sub-graph's frame links to its parent's, so ``process_state(T)`` finds the nearest
enclosing state whose type is ``T`` (inner shadows outer) and holds that graph's lock while the caller uses it.

Handlers: ``pre(input, state) -> input`` runs under the lock before a node, ``post(output, state) -> output``
after it; stream handlers take and return a ``StreamReader`` (the lock is held only while the handler function
runs, not while the returned stream is read). Locks are not re-entrant: a handler must not call ``process_state``
for its own graph's state.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from types import CoroutineType, GeneratorType
from typing import Any, Generic, TypeGuard, TypeVar

import anyio

from compose.errors import StateError

__all__ = ["process_state"]

S = TypeVar("S")


class _StateLock:
    """A FIFO lock that costs nothing when uncontended: acquiring a free lock does not touch the event loop (a
    ReAct round takes it three times). On release with waiters the lock is handed to the first waiter directly."""

    __slots__ = ("_locked", "_waiters")

    def __init__(self) -> None:
        self._locked = False
        # made on first contention: an empty deque costs 760 bytes, and every run of a graph with state has a
        # lock that is rarely contended (10,000 runs held in flight would pay 7 MiB for empty deques)
        self._waiters: deque[anyio.Event] | None = None

    def __repr__(self) -> str:
        return f"_StateLock(locked={self._locked}, waiters={len(self._waiters or ())})"

    def acquire_nowait(self) -> bool:
        """Take the lock if it is free (never touches the event loop); False if it is held."""
        if self._locked:
            return False
        self._locked = True
        return True

    async def __aenter__(self) -> None:
        if not self._locked:
            self._locked = True
            return
        event = anyio.Event()
        waiters = self._waiters
        if waiters is None:
            waiters = self._waiters = deque()  # kept once made
        waiters.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():  # handed the lock just as we were cancelled: pass it on
                self._release()
            else:
                waiters.remove(event)
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()  # ownership passes to the first waiter; the lock stays taken
        else:
            self._locked = False


class _StateFrame(_StateLock):
    """One graph run's state and the enclosing graph's frame; the frame is the lock of its state (one object
    per run, not two)."""

    __slots__ = ("parent", "state")

    def __init__(self, state: Any, parent: _StateFrame | None) -> None:
        self._locked = False
        self._waiters = None
        self.state = state
        self.parent = parent

    def __repr__(self) -> str:
        return f"_StateFrame({type(self.state).__qualname__}, locked={self._locked})"

    @property
    def lock(self) -> _StateLock:
        """The lock held while the state is used (the frame itself)."""
        return self


_current_frame: ContextVar[_StateFrame | None] = ContextVar("pyeino_state_frame", default=None)


def _find_frame(state_type: type[Any]) -> _StateFrame:
    frame = _current_frame.get()
    if frame is None:
        raise StateError(
            f"get state from context fail: have not set state (asked for {state_type.__qualname__}); "
            "process_state works inside a node, handler or tool of a graph built with state="
        )
    first = frame
    while frame is not None:
        if isinstance(frame.state, state_type):
            return frame
        frame = frame.parent
    raise StateError(
        f"get state from context fail: cannot find state with type: {state_type.__qualname__} in states chain, "
        f"current state type: {type(first.state).__qualname__}"
    )


class _StateAccess(Generic[S]):
    """What ``process_state`` returns: finds the state when entered, holds its graph's lock until left."""

    __slots__ = ("_lock", "_type")

    def __init__(self, state_type: type[S]) -> None:
        self._type = state_type
        self._lock: _StateLock | None = None

    async def __aenter__(self) -> S:
        lock = frame = _find_frame(self._type)
        if not lock.acquire_nowait():
            await lock.__aenter__()
        self._lock = lock
        return frame.state  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: object) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock._release()


def process_state(state_type: type[S]) -> AbstractAsyncContextManager[S]:
    """Use the nearest enclosing graph state of type ``state_type``, under that graph's lock.

    Example::

        async def node(x: str) -> str:
            async with process_state(MyState) as st:
                st.seen.append(x)
            return x
    """
    return _StateAccess(state_type)


async def call_handler(
    handler: Callable[[Any, Any], Any], value: Any, frame: _StateFrame
) -> Any:
    """Run a state handler under its graph's lock (sync or async handler). Every state handler of every run
    comes this way (three per ReAct round): the lock's uncontended paths and the common awaitable are inline."""
    if frame._locked:
        await frame.__aenter__()
    else:
        frame._locked = True
    try:
        result = handler(value, frame.state)
        if result.__class__ is CoroutineType or is_awaitable(result):
            result = await result
    finally:
        if frame._waiters:
            frame._release()
        else:
            frame._locked = False
    return result


def is_awaitable(x: Any) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable``, answering the common cases (a coroutine, a plain value) without its ABC check."""
    cls = x.__class__
    return cls is CoroutineType or hasattr(cls, "__await__") or (cls is GeneratorType and inspect.isawaitable(x))


def is_async_callable(fn: Callable[..., Any]) -> bool:
    target = fn
    call = getattr(fn, "__call__", None)  # noqa: B004 - objects with an async __call__
    if not inspect.isfunction(fn) and not inspect.ismethod(fn) and call is not None:
        target = call
    return inspect.iscoroutinefunction(target)

