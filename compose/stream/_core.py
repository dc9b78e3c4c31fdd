"""The reader base class, its internal item protocol, leak tracking, and the simple reader kinds.

Internal protocol (shared by every reader kind, never exposed):

* ``_poll()`` is synchronous and never waits. It returns the next *raw item*, or ``_EMPTY`` when the reader
  would have to wait. A raw item is the value itself, or a ``_Signal``: ``_END`` (the end, repeated on every
  later call) or an error item ``_Signal(exc)``.
* ``await _pull()`` returns the next raw item (never ``_EMPTY``), waiting as needed. It is called only after
  ``_poll()`` returned ``_EMPTY``, and starts by polling again.
* ``cancel_safe``: when True, a ``_pull()`` cancelled from outside consumed nothing.

Values are passed through unwrapped, so a value costs no allocation; only error items and the end are signals.
Owners (copy hubs, maps, merges) read their sources through this protocol, never through ``recv()``.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, ClassVar, Final, Generic, Self, TypeVar, overload

import anyio

from compose.errors import StreamEnd, StreamError

T = TypeVar("T")
U = TypeVar("U")


class SkipType(enum.Enum):
    """The type of :data:`SKIP`."""

    SKIP = "SKIP"


SKIP: Final = SkipType.SKIP
"""Returned by a ``map`` function to drop the chunk."""


# ``copy(n)`` and ``map`` are built by ``compose.stream._copy``, the layer above this one: importing it (the
# package does) sets these two
def _broadcast(reader: StreamReader[Any], n: int) -> list[StreamReader[Any]]:
    raise RuntimeError("compose.stream._copy is not imported")


def _map_reader(reader: StreamReader[Any], fn: Callable[[Any], Any]) -> StreamReader[Any]:
    raise RuntimeError("compose.stream._copy is not imported")


class _Signal:
    """A raw item that is not a value: the end (``exc is None``) or an error item."""

    __slots__ = ("exc", "tb")

    def __init__(self, exc: BaseException | None) -> None:
        self.exc = exc
        self.tb = None if exc is None else exc.__traceback__

    def raise_(self) -> None:
        """Raise the error item (with the traceback it was produced with), or ``StreamEnd`` at the end."""
        if self.exc is None:
            raise StreamEnd()
        raise self.exc.with_traceback(self.tb)

    def __repr__(self) -> str:
        return "<end>" if self.exc is None else f"<error {self.exc!r}>"


class _EmptyType:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<empty>"


_EMPTY: Final = _EmptyType()
_END: Final = _Signal(None)


def closed_signal() -> _Signal:
    """The error item a closed reader returns from ``recv()``."""
    return _Signal(StreamError("recv() on a closed stream reader"))


# ----------------------------------------------------------------------------------------------------------
# Leak tracking, off unless a test turns it on (tests/conftest.py, ``compose.testing.assert_no_leaks``): when on,
# it costs one WeakSet insertion per reader, never per item, and every kind has a finalizer (``_finalize``); when
# off, nothing is recorded (a long-running service must not accumulate reports of readers its clients abandoned)
# and only the kinds sharing state (pipe, copy) have one: other readers are freed without running Python.


class _Tracker:
    enabled = False
    generation = 0
    live: ClassVar[weakref.WeakSet[StreamReader[Any]]] = weakref.WeakSet()
    collected: ClassVar[list[str]] = []


def _reset_leak_tracking(enabled: bool = True) -> None:
    """Forget every reader created so far; readers created from now on are tracked if ``enabled``."""
    _set_leak_tracking(enabled)
    _Tracker.generation += 1
    _Tracker.live = weakref.WeakSet()
    _Tracker.collected.clear()


def _set_leak_tracking(enabled: bool) -> bool:
    """Turn tracking of new readers on or off, keeping what was tracked; returns the previous setting."""
    previous, _Tracker.enabled = _Tracker.enabled, enabled
    if enabled and "__del__" not in StreamReader.__dict__:
        StreamReader.__del__ = _finalize  # type: ignore[attr-defined]  # every kind, the subclasses included
    elif not enabled and "__del__" in StreamReader.__dict__:
        del StreamReader.__del__  # type: ignore[attr-defined]
    return previous


def _track(reader: StreamReader[Any]) -> None:
    reader._gen = _Tracker.generation
    _Tracker.live.add(reader)


def _open_reader_report() -> list[str]:
    """Reprs of tracked readers neither closed nor read to the end, including garbage-collected ones."""
    gen = _Tracker.generation
    open_now = [repr(r) for r in list(_Tracker.live) if not (r._closed or r._done) and r._gen == gen]
    return open_now + list(_Tracker.collected)


# ----------------------------------------------------------------------------------------------------------
# The public reader


class StreamReader(Generic[T]):
    """The read end of a stream of chunks of type ``T``.

    Read with ``await recv()`` or ``async for``. An error item sent into the stream is raised by ``recv()``
    and the stream continues after it; at the end ``recv()`` raises :class:`~compose.errors.StreamEnd` (an
    ``EOFError``), and again on every later call. Every reader has one owner who must close it
    (``await aclose()`` or ``async with reader:``); a reader read to ``StreamEnd`` counts as finished.

    Streams are pull-based and lazy: a reader does its work inside ``recv()``, in the consumer's task, so no
    stream needs a background task. A reader must not be read by two tasks at once (copy it instead).

    Readers come from :func:`~compose.stream.pipe`, :meth:`from_iterable`, :meth:`from_async_iterator`,
    :meth:`copy`, :meth:`map` and the merge functions; the kinds are private subclasses.

    Example:
        >>> import anyio
        >>> async def main() -> list[int]:
        ...     async with StreamReader.from_iterable([1, 2, 3]).map(lambda x: x * 10) as reader:
        ...         return [x async for x in reader]
        >>> anyio.run(main)
        [10, 20, 30]
    """

    _kind: ClassVar[str] = "reader"
    _cancel_safe: bool = True
    _closed: bool = True  # until ``__init__`` ran (``__del__`` of a reader whose construction failed does nothing)
    _gen: int = -1  # the leak tracking generation it was created in (tracked readers only)
    # whether the kind closes something it owns: a source (``_release`` returns it; such kinds set ``_owns``) or
    # what ``_aclose_owned`` closes (``_owns_more``, set per subclass). A reader that owns nothing, like a reader
    # of values, closes with no more than its ``_release``.
    _owns: ClassVar[bool] = False
    _owns_more: ClassVar[bool] = False
    # returned the end to someone: finished even if never closed (a class default: a reader sets it at its end)
    _done: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._owns_more = cls._aclose_owned is not StreamReader._aclose_owned
        cls._owns = cls._owns or cls._owns_more

    def __init__(self) -> None:
        self._closed = False
        if _Tracker.enabled:
            _track(self)

    # -- internal protocol, overridden per kind

    def _poll(self) -> object:
        return _EMPTY

    async def _pull(self) -> object:
        return self._poll()

    def _release(self) -> StreamReader[Any] | None:
        """Free this reader's own resources, synchronously (also called when it is garbage-collected). Return
        the one reader it owns that closes with it (its source; ``aclose()`` closes it next), or None."""
        return None

    async def _aclose_owned(self) -> None:
        """Close what else this reader owns (iterators, several sources); called once, by ``aclose()``."""

    def _gc_release(self) -> None:
        self._release()

    def _state(self) -> str:
        return "closed" if self._closed else "ended" if self._done else "open"

    # -- public API

    @property
    def cancel_safe(self) -> bool:
        """True when a ``recv()`` cancelled from outside loses nothing and leaves the reader usable."""
        return self._cancel_safe

    @property
    def closed(self) -> bool:
        """True once ``aclose()`` was called (or the reader was handed over to its copies)."""
        return self._closed

    async def recv(self) -> T:
        """Return the next chunk.

        Raises:
            StreamEnd: at the end of the stream, and on every later call.
            StreamError: if the reader was closed, or handed over to its copies.
            Exception: an error item sent into the stream (the stream continues after it).
        """
        x = self._poll()
        if x is _EMPTY:
            x = await self._pull()
        if type(x) is _Signal:
            x.raise_()
        return x  # type: ignore[return-value]

    def __aiter__(self) -> StreamReader[T]:
        return self

    async def __anext__(self) -> T:
        x = self._poll()
        if x is _EMPTY:
            x = await self._pull()
        if type(x) is _Signal:
            if x is _END:
                raise StopAsyncIteration
            x.raise_()
        return x  # type: ignore[return-value]

    async def aclose(self) -> None:
        """Close the reader and what it owns (a pipe's ``send()`` then returns True). Idempotent.

        A close suspends only where it runs its producer's code (the ``aclose()`` of the async iterator behind
        :meth:`from_async_iterator`), and that part is shielded: a caller in a cancelled scope closes every
        reader it owns, and the cleanup of each runs to its end (the cancellation is raised at its next
        checkpoint). Every other kind closes without suspending (but a ``stream_mode`` reader, which waits for
        its run's task: a task group's exit, never cut off), so owners closing readers (copies, maps, merges,
        runs) need no cancel scope of their own.
        """
        if self._closed:
            return
        self._closed = True
        source = self._release()
        if not self._owns:
            return
        # what it owns closes now, in this one frame: what ``_aclose_owned`` closes, then its source, the source's
        # (a copy of a map of a model's stream), ...
        reader = self
        while True:
            if reader._owns_more:
                await reader._aclose_owned()
            if source is None or source._closed:
                return
            reader = source
            reader._closed = True
            source = reader._release()

    async def __aenter__(self) -> StreamReader[T]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def copy(self, n: int) -> list[StreamReader[T]]:
        """Split the stream into ``n`` readers that each see every chunk and every error item, in order.

        A broadcast over one shared buffer: the fastest copy pulls from this reader, slower copies read
        what it buffered; a chunk is freed once every open copy has passed it (so a copy that is not read pins
        memory until it is closed). This reader is closed when the last copy closes; it must not be used
        directly afterwards (``recv()`` raises :class:`~compose.errors.StreamError`). Copies of copies work.

        Args:
            n: the number of copies; for ``n < 2`` the result is ``[self]``.

        Returns:
            The copies.
        """
        if type(n) is not int:
            raise TypeError(f"copy(n) takes an int, got {type(n).__qualname__}")
        if n < 2:
            return [self]
        if self._closed:
            raise StreamError(f"cannot copy a closed stream reader: {self!r}")
        return _broadcast(self, n)

    @overload
    def map(self, fn: Callable[[T], Awaitable[U | SkipType]]) -> StreamReader[U]: ...
    @overload
    def map(self, fn: Callable[[T], U | SkipType]) -> StreamReader[U]: ...
    def map(self, fn: Callable[[T], Any]) -> StreamReader[Any]:
        """Return a reader of ``fn(chunk)`` for each chunk, computed lazily inside ``recv()``.

        ``fn`` may be sync or async (detected with ``inspect.iscoroutinefunction``). Returning
        :data:`~compose.stream.SKIP` drops the chunk; an exception raised by ``fn`` becomes an error item and
        the stream continues; error items of this reader pass through unchanged. Closing the result closes
        this reader, which it owns from now on.

        Example:
            >>> from compose.stream import SKIP
            >>> evens = StreamReader.from_iterable(range(6)).map(lambda x: x if x % 2 == 0 else SKIP)
        """
        if not callable(fn):
            raise TypeError(f"map(fn) takes a function, got {type(fn).__qualname__}")
        if self._closed:
            raise StreamError(f"cannot map a closed stream reader: {self!r}")
        return _map_reader(self, fn)

    @classmethod
    def from_iterable(cls, items: Iterable[T]) -> StreamReader[T]:
        """A reader of the given values (taken into a tuple now). Its copies are independent cursors."""
        return _IterReader(items if type(items) is tuple else tuple(items))

    @classmethod
    def from_async_iterator(cls, ait: AsyncIterable[T] | AsyncIterator[T]) -> StreamReader[T]:
        """A reader pulling from an async iterator (or async generator), one item per ``recv()``.

        An exception raised by the iterator is delivered once as an error item, then the stream ends.
        ``aclose()`` calls the iterator's ``aclose()`` when it has one. Not cancel-safe: a ``recv()``
        cancelled while the iterator was producing breaks it, and the next ``recv()`` raises a
        :class:`~compose.errors.StreamError` saying so (then the stream ends).
        """
        return _AsyncIterReader(ait)

    @classmethod
    async def from_started(cls, ait: AsyncIterable[T] | AsyncIterator[T]) -> StreamReader[T]:
        """Drive ``ait`` to its first item now, in the caller's task; return a reader of every item.

        The Python form of a Go function that does its work and *returns* a ``StreamReader``: what an async
        generator does before its first ``yield`` (fail, interrupt, record something in the caller's context)
        happens inside this call, and an exception raised there propagates from it (the iterator is closed).
        The first item is not lost: the reader returns it first, then pulls the rest lazily, like
        :meth:`from_async_iterator`. An iterator that ends at once gives an empty reader.

        Example:
            >>> import anyio
            >>> async def numbers():
            ...     print("started")
            ...     yield 1
            ...     yield 2
            >>> async def main() -> list[int]:
            ...     reader = await StreamReader.from_started(numbers())
            ...     return [x async for x in reader]
            >>> anyio.run(main)
            started
            [1, 2]
        """
        it = ait if isinstance(ait, AsyncIterator) else aiter(ait)
        try:
            head = await it.__anext__()
        except StopAsyncIteration:
            await _aclose_iterator(it)
            return _IterReader(())
        except BaseException:
            await _aclose_iterator(it)
            raise
        return _StartedIterReader(it, head)

    def __repr__(self) -> str:
        return f"<StreamReader {self._kind} {self._state()}>"


def _finalize(reader: StreamReader[Any]) -> None:
    """``__del__`` (see "Leak tracking"): a reader garbage-collected open is reported (if tracked) and released."""
    if reader._closed:
        return
    if _Tracker.enabled and not reader._done and reader._gen == _Tracker.generation:
        _Tracker.collected.append(f"{reader!r} (garbage-collected while open)")
    reader._closed = True
    reader._gc_release()


class _CopiedReader(StreamReader[Any]):
    """What a reader becomes once ``copy()`` handed its state over to a new (owned) parent object: closed, so
    ``copy`` and ``map`` refuse it, naming it by this repr."""

    _kind = "copied"

    def _poll(self) -> object:
        return _Signal(StreamError("this stream reader was copied: read its copies instead"))

    def __repr__(self) -> str:
        return "<StreamReader copied (read its copies)>"


def become_copied(reader: StreamReader[Any]) -> None:
    """Turn ``reader`` into a finished husk whose use raises ``StreamError`` (its state moved elsewhere)."""
    reader.__dict__ = {"_closed": True, "_done": True, "_gen": reader._gen}
    reader.__class__ = _CopiedReader


def detach(reader: StreamReader[T]) -> StreamReader[T]:
    """Move ``reader``'s state into a new object of the same kind, and turn ``reader`` into a husk.

    The new object shares no reference with the husk, so a copy hub can own it while the user's handle to the
    original reader raises on use.
    """
    twin: StreamReader[T] = object.__new__(type(reader))
    twin.__dict__ = reader.__dict__
    if _Tracker.enabled:
        _Tracker.live.add(twin)
    become_copied(reader)
    return twin


# ----------------------------------------------------------------------------------------------------------
# Readers over values and over async iterators


class _IterReader(StreamReader[T]):
    """A reader over a tuple of values: never waits; copies and merges of these stay plain tuples."""

    _kind = "iterable"
    _closed = False  # its construction cannot fail

    def __init__(self, items: tuple[T, ...], start: int = 0) -> None:
        # StreamReader.__init__ inline: the commonest reader (every one-chunk stream) is made without a call
        if _Tracker.enabled:
            _track(self)
        self._items = items
        self._i = start
        self._n = len(items)

    def _poll(self) -> object:
        i = self._i
        if i < self._n:
            self._i = i + 1
            return self._items[i]
        if self._closed:
            return closed_signal()
        self._done = True
        return _END

    async def _pull(self) -> object:
        return self._poll()

    def _release(self) -> None:
        self._items = ()
        self._n = 0

    def take_remaining(self) -> tuple[T, ...]:
        """Hand the unread values over to a new owner (a merge), leaving this reader finished."""
        i = self._i
        rest = self._items if i == 0 else self._items[i:]
        self._closed = self._done = True
        self._items = ()  # _release, inline
        self._n = 0
        return rest

    def __repr__(self) -> str:
        return f"<StreamReader iterable {self._state()} remaining={max(self._n - self._i, 0)}>"


_RUNNING, _FINISHED, _BROKEN = 0, 1, 2


class ReaderRelay(Generic[T]):
    """Base of the framework's async iterators that pass one reader through (adding a check, a deadline, a
    marker: ``adk.chat_model._model``, ``adk.cancel``): ``aclose()`` closes that reader and runs nothing else, so
    a reader over a relay closes it without a cancel scope of its own (the inner reader shields what it must).
    A subclass sets ``_reader``, the reader it passes through."""

    __slots__ = ("_reader",)
    _reader: StreamReader[T]

    def __aiter__(self) -> Self:
        return self

    async def aclose(self) -> None:
        await self._reader.aclose()


class _AsyncIterReader(StreamReader[T]):
    """A reader pulling from an async iterator; not cancel-safe (a cancelled ``__anext__`` breaks it)."""

    _kind = "async-iterator"
    _cancel_safe = False

    def __init__(self, ait: AsyncIterable[T] | AsyncIterator[T]) -> None:
        super().__init__()
        it = ait if isinstance(ait, AsyncIterator) else aiter(ait)
        self._ait: AsyncIterator[T] = it
        self._status = _RUNNING
        self._busy = False

    def _poll(self) -> object:
        if self._closed:
            return closed_signal()
        if self._status == _RUNNING:
            return _EMPTY
        if self._status == _BROKEN:
            self._status = _FINISHED
            return _Signal(
                StreamError(
                    "the async iterator behind this stream reader was cancelled while producing an item; "
                    "it cannot continue (the stream ends here)"
                )
            )
        self._done = True
        return _END

    async def _pull(self) -> object:
        x = self._poll()
        if x is not _EMPTY:
            return x
        if self._busy:
            raise StreamError("another task is already receiving from this stream reader")
        self._busy = True
        try:
            item = await self._ait.__anext__()
        except StopAsyncIteration:
            self._status = _FINISHED
            self._done = True
            return _END
        except Exception as exc:
            self._status = _FINISHED
            return _Signal(exc)
        except BaseException:
            # Cancelled (or interrupted) inside __anext__: a generator is finished by the exception, and any
            # other iterator is in an unknown state, so the stream cannot continue silently.
            self._status = _BROKEN
            raise
        finally:
            self._busy = False
        return item

    async def _aclose_owned(self) -> None:
        ait = self._ait
        if isinstance(ait, ReaderRelay):  # closes a reader, which shields what it must
            await ait.aclose()
            return
        aclose = getattr(ait, "aclose", None)
        if aclose is not None:
            # the iterator's own code (a generator's ``finally``) may await: shielded (see StreamReader.aclose)
            with anyio.CancelScope(shield=True):
                await aclose()

    def __repr__(self) -> str:
        broken = " broken" if self._status == _BROKEN else ""
        return f"<StreamReader async-iterator {self._state()}{broken}>"


class _StartedIterReader(_AsyncIterReader[T]):
    """An async-iterator reader whose first item was pulled when it was made (``from_started``)."""

    def __init__(self, ait: AsyncIterator[T], head: T) -> None:
        super().__init__(ait)
        self._head: object = head

    def _poll(self) -> object:
        head = self._head
        if head is not _EMPTY and not self._closed:
            self._head = _EMPTY
            return head
        return super()._poll()

    def _release(self) -> None:
        self._head = _EMPTY


async def _aclose_iterator(it: AsyncIterator[Any]) -> None:
    """Close an iterator that failed or ended while it was being started (shielded: the caller is leaving)."""
    aclose = getattr(it, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()
