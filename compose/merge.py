"""Fan-in: merging the values that reach one node in one step (eino-semantics 1.4).

1. a merge function registered for the value type (``register_values_merge``) is used;
2. dicts merge key-wise, a duplicate key is an error naming it;
3. streams merge (interleaved; with ``FanInMergeConfig(stream_merge_with_source_eof=True)`` a ``SourceEOF`` error
   item names each predecessor as its stream ends) when their chunk type is a dict or has a merge function;
4. anything else is an error naming the node and the types: give each predecessor an ``output_key`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, get_origin

from compose._types import type_name
from compose.errors import FanInMergeError
from compose.stream import StreamReader, merge_named_streams, merge_streams

__all__ = ["register_values_merge"]

T = TypeVar("T")

_registry: dict[type, Callable[[list[Any]], Any]] = {}


def register_values_merge(tp: type[T], fn: Callable[[list[T]], T]) -> None:
    """Register how several values of type ``tp`` arriving at one node in one step are merged into one."""
    _registry[tp] = fn


def _merge_fn(tp: type) -> Callable[[list[Any]], Any] | None:
    for klass in tp.__mro__:
        fn = _registry.get(klass)
        if fn is not None:
            return fn
    return None


def merge_values(node: str, values: Sequence[Any]) -> Any:
    """Merge plain values (an invoke run)."""
    first = values[0]
    fn = _merge_fn(type(first))
    if fn is not None:
        return fn(list(values))
    if all(isinstance(v, dict) for v in values):
        merged: dict[Any, Any] = {}
        for v in values:
            for k, item in v.items():
                if k in merged:
                    raise FanInMergeError(
                        f"(values merge map) duplicated key ('{k}') found while merging the inputs of node '{node}'"
                    )
                merged[k] = item
        return merged
    kinds = sorted({type(v).__qualname__ for v in values})
    raise FanInMergeError(
        f"(mergeValues) unsupported type: {', '.join(kinds)}: node '{node}' received {len(values)} values in one "
        "step; only dicts or types with register_values_merge() can be merged (give each predecessor an output_key)"
    )


def _stream_mergeable(tp: Any) -> bool:
    if tp is Any or tp is None:
        return True
    origin = get_origin(tp) or tp
    if origin is dict:
        return True
    return isinstance(origin, type) and _merge_fn(origin) is not None


def merge_stream_values(
    node: str, readers: Sequence[tuple[str, StreamReader[Any], Any]], *, source_eof: bool
) -> StreamReader[Any]:
    """Merge streams (a streaming run); ``readers`` are (predecessor key, reader, declared chunk type)."""
    bad = [(key, tp) for key, _, tp in readers if not _stream_mergeable(tp)]
    if bad:
        kinds = ", ".join(f"{key}: {type_name(tp)}" for key, tp in bad)
        raise FanInMergeError(
            f"(mergeValues | stream type) unsupported chunk type ({kinds}) while merging the input streams of node "
            f"'{node}'; only dict chunks or types with register_values_merge() can be merged"
        )
    if source_eof:
        return merge_named_streams({key: r for key, r, _ in readers})
    return merge_streams([r for _, r, _ in readers])
