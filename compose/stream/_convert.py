"""Readers that own a source and convert each of its items (values and signals) as they pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from compose.stream._core import _EMPTY, StreamReader, _Signal, _Tracker

T = TypeVar("T")


class ConvertingReader(StreamReader[T]):
    """A reader that owns its source and hands on each item (value or signal) through ``_convert``, which
    subclasses define; polling stays synchronous when the source has an item ready."""

    _owns = True  # its source

    def __init__(self, src: StreamReader[Any]) -> None:
        # StreamReader.__init__ inline (every node's output stream is wrapped in one)
        self._closed = False
        self._gen = _Tracker.generation
        if _Tracker.enabled:
            _Tracker.live.add(self)
        self._src = src
        self._cancel_safe = src._cancel_safe

    def _convert(self, x: object) -> object:
        raise NotImplementedError

    def _poll(self) -> object:
        x = self._src._poll()
        return x if x is _EMPTY else self._convert(x)

    async def _pull(self) -> object:
        x = self._src._poll()
        if x is _EMPTY:
            x = await self._src._pull()
        return self._convert(x)

    def _release(self) -> StreamReader[Any]:
        return self._src


class WrapErrorsReader(ConvertingReader[Any]):
    """Passes its source's values through and replaces each error item by ``on_error(exc)`` (a ``MapReader``
    without a function); owns its source."""

    _kind = "wrap-errors"

    def __init__(self, src: StreamReader[Any], on_error: Callable[[BaseException], BaseException]) -> None:
        super().__init__(src)
        self._on_error = on_error

    def _convert(self, x: object) -> object:
        if type(x) is _Signal:
            exc = x.exc
            if exc is None:
                self._done = True
                return x
            wrapped = self._on_error(exc)
            return x if wrapped is exc else _Signal(wrapped)
        return x

    def __repr__(self) -> str:
        return f"<StreamReader wrap-errors {self._state()} source={self._src!r}>"
