"""Branches: choose a node's successors at run time (eino-semantics 1.2).

``GraphBranch(condition, end_nodes)``: ``condition(value) -> key``. ``StreamGraphBranch``: ``condition(reader) ->
key``; it receives its own copy of the node's output stream and may decide on a prefix (the engine closes the copy
afterwards if the condition forgot); with ``value_condition=`` (a pyeino extension), an invoke run calls that
equivalent condition on the whole value instead of wrapping the value in a one-chunk stream. The multi variants
return a set of keys, possibly empty. A condition may be sync or async. Returning a key outside ``end_nodes``
raises ``BranchError``.

Paradigm crossing, as in Eino: a value branch on a streaming node sees the concatenated stream (it waits for the
stream to end); a stream branch in an invoke run receives a one-chunk stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from compose._types import stream_item_type
from compose.errors import BranchError, NodeRunError, RuntimeTypeError
from compose.lambdas import _hints
from compose.state import is_async_callable, is_awaitable
from compose.stream import StreamReader, concat

__all__ = ["GraphBranch", "GraphMultiBranch", "StreamGraphBranch", "StreamGraphMultiBranch"]

T = TypeVar("T")


class _Branch(Generic[T]):
    """Common machinery; ``_stream`` and ``_multi`` say what the condition takes and returns."""

    _stream = False
    _multi = False

    def __init__(
        self,
        condition: Callable[[Any], Any],
        end_nodes: Iterable[str],
        *,
        value_condition: Callable[[Any], Any] | None = None,
    ) -> None:
        if not callable(condition):
            raise TypeError(f"a branch condition must be callable, got {type(condition).__qualname__}")
        if value_condition is not None and not self._stream:
            raise TypeError("value_condition= is for stream branches (a value branch's condition takes values)")
        self.condition = condition
        # a stream branch's equivalent condition on a whole value: an invoke run calls it instead of wrapping
        # the value in a one-chunk stream for ``condition``
        self.value_condition = value_condition
        self.end_nodes: frozenset[str] = frozenset(end_nodes)
        if not self.end_nodes:
            raise BranchError("a branch needs at least one end node")
        self._is_async = is_async_callable(condition)
        arg, _ = _hints(condition)
        self.input_type: Any = stream_item_type(arg) if self._stream else arg

    def _check(self, chosen: Any, node: str) -> frozenset[str]:
        if self._multi:
            if isinstance(chosen, str) or not isinstance(chosen, Iterable):
                raise BranchError(
                    f"multi-branch condition of node '{node}' must return a set of node keys, got {chosen!r}",
                    node=node,
                )
            keys = frozenset(chosen)
        else:
            if not isinstance(chosen, str):
                raise BranchError(
                    f"branch condition of node '{node}' must return a node key, got {chosen!r}", node=node
                )
            keys = frozenset((chosen,))
        for key in keys:
            if key not in self.end_nodes:
                raise BranchError(
                    f"branch invocation returns unintended end node: {key} (node '{node}', end nodes: "
                    f"{sorted(self.end_nodes)})",
                    node=node,
                )
        return keys

    async def _call(self, arg: Any, node: str, condition: Callable[[Any], Any] | None = None) -> Any:
        try:
            chosen = (condition or self.condition)(arg)
            if (self._is_async and condition is None) or is_awaitable(chosen):
                chosen = await chosen
            return chosen
        except (BranchError, RuntimeTypeError, NodeRunError):
            # a runtime type check on the condition's input stream failed, or the stream it read broke: the node
            # that produced it is named already (compose._engine.blame)
            raise
        except Exception as exc:
            raise self.failed(exc, node) from exc

    def failed(self, exc: Exception, node: str) -> BranchError:
        """The error for a condition that raised ``exc``."""
        return BranchError(f"branch condition of node '{node}' failed: {type(exc).__name__}: {exc}", node=node)

    async def settle(self, chosen: Any, node: str) -> str:
        """The one key a synchronous single-choice condition's result ``chosen`` stands for: awaited if it is
        awaitable, then checked (raises ``BranchError``). The engine's fused loop calls the condition itself and
        comes here only when the result is not already one of the end nodes."""
        try:
            if is_awaitable(chosen):
                chosen = await chosen
        except BranchError:
            raise
        except Exception as exc:
            raise self.failed(exc, node) from exc
        (key,) = self._check(chosen, node)
        return key

    async def decide_value(self, value: Any, node: str) -> frozenset[str]:
        """Choose successors for a value (an invoke run)."""
        if not self._stream:
            return self._check(await self._call(value, node), node)
        if self.value_condition is not None:
            return self._check(await self._call(value, node, self.value_condition), node)
        reader = StreamReader.from_iterable((value,))
        try:
            return self._check(await self._call(reader, node), node)
        finally:
            await reader.aclose()

    async def decide_stream(self, reader: StreamReader[Any], node: str) -> frozenset[str]:
        """Choose successors for a stream (a streaming run); owns and closes ``reader``."""
        try:
            if self._stream:
                chosen = await self._call(reader, node)
            else:
                chosen = await self._call(await concat(reader), node)
        finally:
            await reader.aclose()
        return self._check(chosen, node)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(end_nodes={sorted(self.end_nodes)})"


class GraphBranch(_Branch[T]):
    """Choose one successor from the node's output value: ``condition(value) -> key``."""


class GraphMultiBranch(_Branch[T]):
    """Choose any number of successors (possibly none): ``condition(value) -> set of keys``."""

    _multi = True


class StreamGraphBranch(_Branch[T]):
    """Choose one successor while reading the node's output stream: ``condition(reader) -> key``."""

    _stream = True


class StreamGraphMultiBranch(_Branch[T]):
    """Choose any number of successors from the node's output stream: ``condition(reader) -> set of keys``."""

    _stream = True
    _multi = True
