"""``merge_streams`` and ``merge_named_streams``: fan-in of several readers without a background task.

``recv()`` first polls the live sources round-robin (each ``_poll()`` is synchronous); only when none can
yield does it race them: one fetch task per live source, in a task group that lives inside this ``recv()``.
The first fetch to get an item cancels the fetches of cancel-safe sources (which lose nothing) and lets the
others finish; every fetched item goes to ``_buf`` (per-source FIFO, global arrival order), and later
``recv()`` calls drain ``_buf`` before touching the sources again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import anyio

from compose.errors import SourceEOF as SourceEOF
from compose.errors import StreamError
from compose.stream._core import _EMPTY, _END, StreamReader, _IterReader, _Signal

T = TypeVar("T")


class _Race:
    __slots__ = ("scopes", "won")

    def __init__(self) -> None:
        self.won = False
        self.scopes: list[anyio.CancelScope] = []


class _MergeReader(StreamReader[Any]):
    _kind = "merge"

    def __init__(self, sources: list[StreamReader[Any]], names: list[str] | None) -> None:
        super().__init__()
        self._srcs = sources
        self._names = names
        self._live = list(range(len(sources)))  # indices of sources that have not ended
        self._buf: deque[object] = deque()
        self._rr = 0  # where the next round-robin poll starts, in _live
        self._cancel_safe = all(s.cancel_safe for s in sources)

    def _ended(self, i: int) -> _Signal | None:
        self._live.remove(i)
        return None if self._names is None else _Signal(SourceEOF(self._names[i]))

    def _poll(self) -> object:
        if self._buf:
            return self._buf.popleft()
        live, srcs = self._live, self._srcs
        while live:
            n = len(live)
            start = self._rr
            for k in range(n):
                j = (start + k) % n
                i = live[j]
                x = srcs[i]._poll()
                if x is _EMPTY:
                    continue
                if x is _END:
                    self._rr = j
                    eof = self._ended(i)
                    if eof is not None:
                        return eof
                    break  # rescan the remaining sources
                self._rr = j + 1
                return x
            else:
                return _EMPTY
        if self._closed:
            return _Signal(StreamError("recv() on a closed stream reader"))
        self._done = True
        return _END

    def _accept(self, i: int, x: object) -> None:
        if x is _END:
            eof = self._ended(i)
            if eof is not None:
                self._buf.append(eof)
        else:
            self._buf.append(x)

    async def _pull(self) -> object:
        while True:
            x = self._poll()
            if x is not _EMPTY:
                return x
            live = list(self._live)
            if len(live) == 1:
                src = self._srcs[live[0]]
                self._accept(live[0], await src._pull())
                continue
            race = _Race()
            async with anyio.create_task_group() as tg:
                for i in live:
                    tg.start_soon(self._fetch, i, race)

    async def _fetch(self, i: int, race: _Race) -> None:
        if race.won:
            return
        src = self._srcs[i]
        x: object = _EMPTY
        if src.cancel_safe:
            with anyio.CancelScope() as scope:
                race.scopes.append(scope)
                x = await src._pull()
            if x is _EMPTY:
                return  # cancelled: the source kept its item
        else:
            x = await src._pull()
        self._accept(i, x)
        if not race.won:
            race.won = True
            for scope in race.scopes:
                scope.cancel()

    def _release(self) -> None:
        self._buf.clear()
        self._live.clear()

    async def _aclose_owned(self) -> None:
        error: BaseException | None = None
        for src in self._srcs:
            try:
                await src.aclose()
            except BaseException as exc:  # close every source, then re-raise the first failure
                error = error or exc
        if error is not None:
            raise error

    def __repr__(self) -> str:
        named = " named" if self._names is not None else ""
        return (
            f"<StreamReader merge{named} {self._state()} sources={len(self._srcs)} live={len(self._live)} "
            f"buffered={len(self._buf)}>"
        )


def _check_sources(readers: Sequence[Any], names: Sequence[str] | None = None) -> None:
    for i, r in enumerate(readers):
        if not isinstance(r, StreamReader):
            label = repr(names[i]) if names is not None else str(i)
            raise TypeError(f"merge: source {label} is {type(r).__qualname__}, not a StreamReader")
    if len({id(r) for r in readers}) != len(readers):
        raise StreamError("cannot merge the same stream reader twice (copy it first)")
    for r in readers:
        if r.closed:
            raise StreamError(f"cannot merge a closed stream reader: {r!r}")


def merge_streams(readers: Sequence[StreamReader[T]]) -> StreamReader[T]:
    """Merge readers into one that yields every chunk of every source as it arrives.

    Each source's order is preserved; across sources chunks interleave in arrival order. Error items are
    forwarded (the stream continues); the merged reader ends when every source has ended, and closing it
    closes every source (the merged reader owns them). Merging only readers built by ``from_iterable``
    gives one such reader over their concatenation. The result is cancel-safe iff every source is.

    Args:
        readers: the sources; none gives an empty reader, one gives that reader.

    Returns:
        The merged reader.
    """
    readers = list(readers)
    if not readers:
        return StreamReader.from_iterable(())
    _check_sources(readers)
    if len(readers) == 1:
        return readers[0]
    if all(type(r) is _IterReader for r in readers):
        items: list[T] = []
        for r in readers:
            items.extend(r.take_remaining())  # type: ignore[attr-defined]
        return StreamReader.from_iterable(tuple(items))
    return _MergeReader(readers, None)


def merge_named_streams(readers: Mapping[str, StreamReader[T]]) -> StreamReader[T]:
    """Like :func:`merge_streams`, and when a source ends ``recv()`` raises ``SourceEOF(name)`` once.

    The merged reader ends (``StreamEnd``) after every source has ended and been reported. Used for fan-in in
    stream mode, where ``SourceEOF.name`` tells which predecessor finished.

    Args:
        readers: the sources by name; none gives an empty reader.

    Returns:
        The merged reader.
    """
    if not readers:
        return StreamReader.from_iterable(())
    sources = list(readers.values())
    _check_sources(sources, list(readers))
    return _MergeReader(sources, list(readers))
