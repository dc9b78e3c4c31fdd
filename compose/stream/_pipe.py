"""``pipe()``: a channel between one writer and one reader, built on a deque and anyio Events.

Invariants of ``_Pipe``:

* ``buf`` holds at most ``capacity`` raw items; a send that finds it full (or finds senders already waiting)
  queues itself in ``senders`` and waits until the reader takes its item into ``buf`` (or directly, for
  capacity 0). Items therefore arrive in the order their sends started.
* The reader never waits while ``buf`` or ``senders`` hold something; it only waits on ``recv_ev``, which any
  state change it cares about sets. Items are only ever removed inside ``_poll()``, which does not suspend,
  so a cancelled ``recv()`` loses nothing.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import anyio

from compose.errors import StreamError
from compose.stream._core import _EMPTY, _END, StreamReader, _finalize, _Signal, closed_signal

T = TypeVar("T")


class _Sender:
    __slots__ = ("dropped", "event", "item", "taken")

    def __init__(self, item: object) -> None:
        self.item = item
        self.event = anyio.Event()
        self.taken = False
        self.dropped = False


class _Pipe:
    __slots__ = ("buf", "capacity", "rclosed", "recv_ev", "senders", "wclosed")

    def __init__(self, capacity: int) -> None:
        self.buf: deque[object] = deque()
        self.capacity = capacity
        self.senders: deque[_Sender] = deque()
        self.recv_ev: anyio.Event | None = None
        self.wclosed = False
        self.rclosed = False

    def wake_reader(self) -> None:
        ev = self.recv_ev
        if ev is not None:
            self.recv_ev = None
            ev.set()

    async def send(self, item: object) -> bool:
        if self.rclosed:
            return True
        if self.wclosed:
            raise StreamError("send() on a closed stream writer")
        if not self.senders and len(self.buf) < self.capacity:
            self.buf.append(item)
            self.wake_reader()
            return False
        sender = _Sender(item)
        self.senders.append(sender)
        self.wake_reader()
        try:
            await sender.event.wait()
        except BaseException:
            # Like anyio's memory streams: a send cancelled after its item was taken has still delivered it.
            if not (sender.taken or sender.dropped):
                self.senders.remove(sender)
            raise
        return sender.dropped


class _PipeReader(StreamReader[T]):
    _kind = "pipe"
    __del__ = _finalize  # collected open, it drops the waiting senders' items and wakes them

    def __init__(self, pipe: _Pipe) -> None:
        super().__init__()
        self._p = pipe

    def _poll(self) -> object:
        p = self._p
        buf = p.buf
        if buf:
            x = buf.popleft()
            if p.senders:
                s = p.senders.popleft()
                buf.append(s.item)
                s.taken = True
                s.event.set()
            return x
        if p.senders:  # capacity 0: take straight from a waiting sender
            s = p.senders.popleft()
            s.taken = True
            s.event.set()
            return s.item
        if p.rclosed:
            return closed_signal()
        if p.wclosed:
            self._done = True
            return _END
        return _EMPTY

    async def _pull(self) -> object:
        p = self._p
        while True:
            x = self._poll()
            if x is not _EMPTY:
                return x
            if p.recv_ev is not None:
                raise StreamError("another task is already receiving from this stream reader")
            ev = p.recv_ev = anyio.Event()
            try:
                await ev.wait()
            finally:
                if p.recv_ev is ev:
                    p.recv_ev = None

    def _release(self) -> None:
        p = self._p
        p.rclosed = True
        p.buf.clear()
        senders, p.senders = p.senders, deque()
        for s in senders:
            s.dropped = True
            s.event.set()
        p.wake_reader()  # a recv() waiting in another task now sees the reader closed

    def __repr__(self) -> str:
        p = self._p
        waiting = f" waiting_senders={len(p.senders)}" if p.senders else ""
        return (
            f"<StreamReader pipe {self._state()} buffered={len(p.buf)} capacity={p.capacity}"
            f"{' writer_closed' if p.wclosed else ''}{waiting}>"
        )


class StreamWriter(Generic[T]):
    """The write end of a :func:`pipe`. Whoever holds it is the producer and must close it.

    ``send()`` reports that the reader has closed, so a producer can stop early. A writer garbage-collected
    without ``aclose()`` ends the stream with a :class:`~compose.errors.StreamError` error item, so the reader
    never waits forever.

    Example:
        >>> import anyio
        >>> async def main() -> list[str]:
        ...     reader, writer = pipe(2)
        ...     async with writer:
        ...         await writer.send("a")
        ...         await writer.send("b")
        ...     async with reader:
        ...         return [chunk async for chunk in reader]
        >>> anyio.run(main)
        ['a', 'b']
    """

    def __init__(self, pipe: _Pipe) -> None:
        self._p = pipe

    async def send(self, item: T) -> bool:
        """Send a chunk, waiting while the buffer is full.

        Returns:
            True if the reader has closed (the chunk was dropped: stop producing), else False.

        Raises:
            StreamError: if this writer was closed.
        """
        p = self._p
        # The common case inline: room in the buffer, nobody queued.
        if not p.senders and len(p.buf) < p.capacity and not (p.rclosed or p.wclosed):
            p.buf.append(item)
            if p.recv_ev is not None:
                p.wake_reader()
            return False
        return await p.send(item)

    async def send_error(self, exc: Exception) -> bool:
        """Send an error item: the reader's ``recv()`` raises ``exc``, and the stream continues after it.

        Returns:
            True if the reader has closed, else False.
        """
        if not isinstance(exc, Exception):
            raise TypeError(f"send_error() needs an Exception instance, got {exc!r}")
        return await self._p.send(_Signal(exc))

    async def aclose(self) -> None:
        """End the stream: once the buffered chunks are read, the reader gets ``StreamEnd``. Idempotent."""
        p = self._p
        p.wclosed = True
        p.wake_reader()

    @property
    def closed(self) -> bool:
        """True once ``aclose()`` was called."""
        return self._p.wclosed

    async def __aenter__(self) -> StreamWriter[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        p = self._p
        state = ("closed" if p.wclosed else "open") + (" reader-closed" if p.rclosed else "")
        return f"<StreamWriter {state} buffered={len(p.buf)} capacity={p.capacity}>"

    def __del__(self) -> None:
        p = getattr(self, "_p", None)
        if p is None or p.wclosed or p.rclosed:
            return
        p.buf.append(
            _Signal(StreamError("the stream writer was garbage-collected without aclose(): the stream was cut"))
        )
        p.wclosed = True
        p.wake_reader()


def pipe(capacity: int = 0) -> tuple[StreamReader[T], StreamWriter[T]]:
    """Create a channel: a reader and the writer that feeds it.

    The producer is whoever holds the writer, typically a task the caller starts in its own task group.

    Args:
        capacity: how many chunks the writer may send ahead of the reader; 0 means each ``send()`` waits until
            the reader has taken the chunk.

    Returns:
        ``(reader, writer)``. Annotate the variables to fix the chunk type, e.g.
        ``reader: StreamReader[str]; writer: StreamWriter[str]``.
    """
    if type(capacity) is not int:
        raise TypeError(f"pipe(capacity) takes an int, got {type(capacity).__qualname__}")
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0, got {capacity}")
    p = _Pipe(capacity)
    return _PipeReader(p), StreamWriter(p)
