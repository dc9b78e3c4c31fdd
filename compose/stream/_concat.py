"""``concat``: turn a stream of chunks into one value (Eino's ``concatStreamReader`` and ``ConcatItems``).

The rule for a list of chunks is looked up by the type of the first chunk that is not ``None``: the registry
(exact type, then the MRO), then the built-in rules, else the fallback (all empty -> the first; exactly one
non-empty -> it; otherwise ``ConcatError``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from compose.errors import ConcatError, EmptyStreamError
from compose.stream._core import _EMPTY, _END, StreamReader, _IterReader, _Signal
from compose.stream._merge import SourceEOF

T = TypeVar("T")

_ConcatFn = Callable[[list[Any]], Any]
_registry: dict[type, _ConcatFn] = {}


def register_concat(tp: type[T], fn: Callable[[list[T]], T]) -> None:
    """Register how to concatenate chunks of type ``tp`` (and of its subclasses without a rule of their own).

    ``fn`` receives every chunk of a stream (at least two, in order; ``None`` chunks included) and returns the
    whole. A later registration for the same type replaces the earlier one.

    Example:
        >>> class Path(tuple[str, ...]): ...
        >>> register_concat(Path, lambda chunks: Path(step for chunk in chunks for step in chunk))
        >>> concat_items([Path(["a"]), Path(["b", "c"])])
        ('a', 'b', 'c')
    """
    _registry[tp] = fn


def concat_items(items: Sequence[T]) -> T:
    """Concatenate chunks with the registered rules (the graph engine's fan-in and ``concat`` use this).

    Built-in rules: ``str`` and ``bytes`` are joined; ``int``, ``float`` and ``bool`` take the last value;
    ``dict`` merges key-wise, the values of one key concatenated by these same rules; ``Message`` uses
    ``compose.schema.concat_messages``; a ``list`` of ``Message | None`` is merged slot by slot with
    ``compose.schema.concat_message_lists``. Anything else: if all chunks are empty (``None`` or equal to
    ``type(x)()``) the first, if exactly one is non-empty that one, otherwise ``ConcatError``.

    Raises:
        EmptyStreamError: if there is no chunk.
        ConcatError: if the chunks cannot be concatenated.

    Example:
        >>> concat_items([{"a": "x", "n": 1}, {"a": "y", "n": 2}])
        {'a': 'xy', 'n': 2}
    """
    if not items:
        raise EmptyStreamError()
    if len(items) == 1:
        return items[0]
    first = next((x for x in items if x is not None), None)
    if first is None:
        return items[0]
    fn = _lookup(type(first))
    if fn is None:
        return _concat_fallback(items)
    return fn(list(items))  # type: ignore[no-any-return]


async def concat(reader: StreamReader[T]) -> T:
    """Read ``reader`` to the end and concatenate its chunks with :func:`concat_items`; always close it.

    ``SourceEOF`` error items are skipped; any other error item is raised (after closing the reader).

    Raises:
        EmptyStreamError: ``"stream reader is empty, concat fail"`` if the stream had no chunk.
        ConcatError: if the chunks cannot be concatenated.
    """
    if type(reader) is _IterReader and not reader._closed:  # values only, never waits: no loop, no close to await
        values: tuple[T, ...] = reader.take_remaining()
        return values[0] if len(values) == 1 else concat_items(values)  # one chunk (a value made a stream): it
    items: list[T] = []
    try:
        while True:
            x = reader._poll()
            if x is _EMPTY:
                x = await reader._pull()
            if type(x) is _Signal:
                if x is _END:
                    break
                if isinstance(x.exc, SourceEOF):
                    continue
                x.raise_()
            items.append(x)  # type: ignore[arg-type]
    finally:
        await reader.aclose()
    return concat_items(items)


def _lookup(tp: type) -> _ConcatFn | None:
    for cls in tp.__mro__:
        fn = _registry.get(cls)
        if fn is None:
            fn = _builtin.get(cls) or _deferred.get((cls.__module__, cls.__qualname__))
        if fn is not None:
            return fn
    return None


def _is_empty(x: object) -> bool:
    if x is None:
        return True
    try:
        return bool(x == type(x)())
    except Exception:  # no zero value to compare with: count it as non-empty
        return False


def _concat_fallback(items: Sequence[T]) -> T:
    non_empty = [x for x in items if not _is_empty(x)]
    if not non_empty:
        return items[0]
    if len(non_empty) == 1:
        return non_empty[0]
    raise ConcatError(f"cannot concat multiple non-zero value of type {type(non_empty[0]).__qualname__}")


def _check_types(items: list[Any], tp: type) -> None:
    for x in items:
        if not isinstance(x, tp):
            raise ConcatError(f"cannot concat a chunk of type {type(x).__qualname__} with chunks of type {tp.__name__}")


def _concat_str(items: list[Any]) -> Any:
    _check_types(items, str)
    return "".join(items)


def _concat_bytes(items: list[Any]) -> Any:
    _check_types(items, bytes)
    return b"".join(items)


def _last_value(items: list[Any]) -> Any:
    for x in items:
        if x is not None and not isinstance(x, (int, float)):  # bool is an int
            raise ConcatError(f"cannot concat a chunk of type {type(x).__qualname__} with number chunks")
    return next(x for x in reversed(items) if x is not None)


def _concat_dicts(items: list[Any]) -> Any:
    values: dict[Any, list[Any]] = {}
    for chunk in items:
        if chunk is None:
            continue
        if not isinstance(chunk, dict):
            raise ConcatError(f"cannot concat a chunk of type {type(chunk).__qualname__} with dict chunks")
        for key, value in chunk.items():
            values.setdefault(key, []).append(value)
    return {key: vs[0] if len(vs) == 1 else concat_items(vs) for key, vs in values.items()}


def _concat_lists(items: list[Any]) -> Any:
    from compose.schema import Message, concat_message_lists

    if all(isinstance(chunk, list) and all(m is None or isinstance(m, Message) for m in chunk) for chunk in items):
        return concat_message_lists(items)
    return _concat_fallback(items)


def _concat_message_chunks(items: list[Any]) -> Any:
    from compose.schema import concat_messages

    return concat_messages(items)


_builtin: dict[type, _ConcatFn] = {
    str: _concat_str,
    bytes: _concat_bytes,
    int: _last_value,
    float: _last_value,
    bool: _last_value,
    dict: _concat_dicts,
    list: _concat_lists,
}
# Rules for types of modules imported lazily (compose.schema may import this package's stream module).
_deferred: dict[tuple[str, str], _ConcatFn] = {("compose.schema", "Message"): _concat_message_chunks}
