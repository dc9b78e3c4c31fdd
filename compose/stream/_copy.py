"""``copy(n)`` (a broadcast over one shared linked list, as Eino's ``Copy``) and ``map`` (Eino's convert).

The copy hub's invariants:

* The copies share a singly linked list of elements ``[item, next]`` (two-slot lists: the cheapest object
  to allocate per item); each copy's cursor is the element it reads next. Every element but the tail holds a
  raw item; the tail is unfilled (``_EMPTY``) until some copy pulls the parent's
  next item into it, or holds the end (``_END``), which cursors never move past.
* Only the cursors (and the list itself, from the slowest cursor on) reference elements, so an element is
  freed as soon as every open copy has passed it; a closed copy drops its cursor.
* At most one copy pulls from the parent at a time (``hub.pulling``); the others wait for ``hub.pull_done``.
  The item is stored before the puller lets go, and a cancelled pull stores nothing, so with a cancel-safe
  parent a cancelled copy loses nothing, for itself or the others.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from compose.errors import StreamError
from compose.stream import _core
from compose.stream._core import (
    _EMPTY,
    _END,
    SKIP,
    StreamReader,
    _finalize,
    _IterReader,
    _Signal,
    _track,
    _Tracker,
    become_copied,
    closed_signal,
    detach,
)

T = TypeVar("T")


_Elem = list[Any]  # [raw item or _EMPTY, next element or None]

# A closed copy's cursor: an element that yields a closed-reader error and points to itself.
_CLOSED: _Elem = [closed_signal(), None]
_CLOSED[1] = _CLOSED


class _CopyHub:
    __slots__ = ("n", "open", "parent", "pull_done", "pulling")

    def __init__(self, parent: StreamReader[Any], n: int) -> None:
        self.parent = parent
        self.n = n
        self.open = n
        self.pulling = False
        self.pull_done: anyio.Event | None = None


def broadcast(reader: StreamReader[T], n: int) -> list[StreamReader[T]]:
    """Implement ``reader.copy(n)`` for ``n >= 2`` on an open reader."""
    if type(reader) is _IterReader:
        items, start = reader._items, reader._i
        become_copied(reader)
        if n == 2:
            return [_IterReader(items, start), _IterReader(items, start)]
        return [_IterReader(items, start) for _ in range(n)]
    return _copies(detach(reader), n)


def copies_of_own(reader: StreamReader[T], n: int) -> list[StreamReader[T]]:
    """``reader.copy(n)`` (``n >= 2``) for a reader its caller has just made and hands over: nobody else holds
    it, so the copies read it as it is (no husk left for a user's handle to it, as ``copy`` leaves)."""
    if reader._closed:
        raise StreamError(f"cannot copy a closed stream reader: {reader!r}")
    if type(reader) is _IterReader:  # values: each copy a cursor of its own over them, the reader the first
        items, i = reader._items, reader._i
        return [reader, _IterReader(items, i)] if n == 2 else [reader, *(_IterReader(items, i) for _ in range(n - 1))]
    return _copies(reader, n)


def ready_mapped(src: StreamReader[Any], fn: Callable[[Any], Any]) -> StreamReader[Any] | None:
    """``src.map(fn)`` computed now, for a pure synchronous ``fn`` that never returns ``SKIP`` (a check, a
    conversion): when ``src`` is an open reader of values (``from_iterable``) and ``fn`` raises for none of them,
    ``src`` itself, its values replaced by their images (the map owns ``src``: nobody else reads it); else None,
    and ``src`` is untouched (the caller maps lazily: a failure becomes an error item in its place)."""
    if type(src) is not _IterReader or src._closed:
        return None
    i = src._i
    try:
        src._items = tuple(map(fn, src._items if i == 0 else src._items[i:]))
    except Exception:
        return None
    src._i = 0
    src._n = len(src._items)
    return src


def _copies(parent: StreamReader[T], n: int) -> list[StreamReader[T]]:
    hub = _CopyHub(parent, n)
    head: _Elem = [_EMPTY, None]
    poll, safe = parent._poll, parent._cancel_safe
    if n == 2:  # the common case (a model stream for its event and for the graph): no comprehension
        return [_CopyReader(hub, head, 0, poll, safe), _CopyReader(hub, head, 1, poll, safe)]
    return [_CopyReader(hub, head, i, poll, safe) for i in range(n)]


class _CopyReader(StreamReader[T]):
    _kind = "copy"
    _owns = True  # the last copy closes the parent
    __del__ = _finalize  # the hub counts its open copies: the last one collected releases the parent

    def __init__(
        self, hub: _CopyHub, head: _Elem, index: int, parent_poll: Callable[[], object], cancel_safe: bool
    ) -> None:
        # StreamReader.__init__ inline (n of these per copy)
        self._closed = False
        if _Tracker.enabled:
            _track(self)
        self._hub = hub
        self._cur = head
        self._index = index
        self._parent_poll = parent_poll  # the hub's parent's (shared by the copies)
        self._cancel_safe = cancel_safe

    def _poll(self) -> object:
        e = self._cur
        x = e[0]
        if x is _EMPTY:
            if self._hub.pulling:
                return _EMPTY
            x = self._parent_poll()
            if x is _EMPTY:
                return _EMPTY
            e[0] = x
            if x is _END:
                self._done = True
                return x
            self._cur = e[1] = [_EMPTY, None]
            return x
        if x is _END:
            self._done = True
            return x
        self._cur = e[1]
        return x

    async def _pull(self) -> object:
        hub = self._hub
        while True:
            x = self._poll()
            if x is not _EMPTY:
                return x
            if hub.pulling:
                ev = hub.pull_done
                if ev is None:
                    ev = hub.pull_done = anyio.Event()
                await ev.wait()
                continue
            e = self._cur
            hub.pulling = True
            try:
                x = await hub.parent._pull()
                e[0] = x
                if x is not _END:
                    e[1] = [_EMPTY, None]
            finally:
                hub.pulling = False
                ev = hub.pull_done
                if ev is not None:
                    hub.pull_done = None
                    ev.set()

    def _release(self) -> StreamReader[Any] | None:
        self._cur = _CLOSED
        hub = self._hub
        hub.open -= 1
        return hub.parent if hub.open == 0 else None  # the last copy closes the parent

    def _gc_release(self) -> None:
        parent = self._release()
        if parent is not None and not parent._closed:
            parent._closed = True
            parent._gc_release()

    def __repr__(self) -> str:
        behind = 0
        e: _Elem | None = self._cur
        while e is not None and e is not _CLOSED and e[0] is not _EMPTY and e[0] is not _END:
            behind += 1
            e = e[1]
            if behind >= 1000:
                break
        return (
            f"<StreamReader copy {self._index + 1}/{self._hub.n} {self._state()} buffered={behind}"
            f"{'+' if behind >= 1000 else ''}>"
        )


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


class MapReader(StreamReader[Any]):
    """``reader.map(fn)``: lazy; owns its source.

    ``on_error`` (Eino's ``WithErrWrapper``) replaces each error item of the source by what it returns; errors
    raised by ``fn`` itself are not passed to it. The engine uses it to blame a node's output stream's errors
    on that node (with ``fn`` None: the values pass unchanged). ``is_async`` says whether ``fn`` is async when
    the caller knows (saving the inspection).
    """

    _kind = "map"
    _owns = True  # its source
    _on_error: Callable[[BaseException], BaseException] | None = None

    def __init__(
        self,
        src: StreamReader[Any],
        fn: Callable[[Any], Any] | None,
        on_error: Callable[[BaseException], BaseException] | None = None,
        *,
        is_async: bool | None = None,
    ) -> None:
        # StreamReader.__init__ inline (every chunk check and blame of a node's stream makes one)
        self._closed = False
        if _Tracker.enabled:
            _track(self)
        self._src = src
        self._fn = fn
        self._on_error = on_error
        self._async = fn is not None and (_is_async_callable(fn) if is_async is None else is_async)
        self._lost = False  # an async fn was cancelled while holding an item
        self._cancel_safe = src._cancel_safe and not self._async

    def _poll(self) -> object:
        if self._async:
            return _EMPTY
        src, fn = self._src, self._fn
        while True:
            x = src._poll()
            if x is _EMPTY:
                return x
            if type(x) is _Signal:
                if x is _END:
                    self._done = True
                    return x
                return x if self._on_error is None else self._wrapped(x)
            if fn is None:
                return x
            try:
                y = fn(x)
            except Exception as exc:
                return _Signal(exc)
            if y is not SKIP:
                return y

    def _wrapped(self, x: _Signal) -> _Signal:
        assert x.exc is not None and self._on_error is not None
        exc = self._on_error(x.exc)
        return x if exc is x.exc else _Signal(exc)

    async def _pull(self) -> object:
        src, fn = self._src, self._fn
        if self._lost:
            self._lost = False
            return _Signal(
                StreamError("a recv() was cancelled while the map function processed an item: that item was lost")
            )
        while True:
            x = src._poll()
            if x is _EMPTY:
                x = await src._pull()
            if type(x) is _Signal:
                if x is _END:
                    self._done = True
                    return x
                return x if self._on_error is None else self._wrapped(x)
            if fn is None:
                return x
            try:
                y = await fn(x) if self._async else fn(x)
            except Exception as exc:
                return _Signal(exc)
            except BaseException:
                self._lost = True
                raise
            if y is not SKIP:
                return y

    def _release(self) -> StreamReader[Any]:
        return self._src

    def __repr__(self) -> str:
        if self._fn is None:
            return f"<StreamReader wrap-errors {self._state()} source={self._src!r}>"
        name = getattr(self._fn, "__qualname__", None) or type(self._fn).__name__
        return f"<StreamReader map({name}) {self._state()} source={self._src!r}>"


_core._broadcast = broadcast
_core._map_reader = MapReader  # type: ignore[assignment]  # a class is its own constructor
