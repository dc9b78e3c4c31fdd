"""Lambda nodes and the derivation of the four paradigms (eino-semantics 1.7).

A component implements any subset of invoke (value -> value), stream (value -> stream), collect (stream -> value)
and transform (stream -> stream); the rest are derived with Eino's priority table::

    invoke    <- invoke | stream (concat output) | collect (wrap input) | transform (wrap input, concat output)
    stream    <- stream | transform (wrap input) | invoke (wrap output) | collect (wrap input and output)
    collect   <- collect | transform (concat output) | invoke (concat input) | stream (concat input and output)
    transform <- transform | stream (concat input) | collect (wrap output) | invoke (concat input, wrap output)

"wrap" makes a one-chunk stream; "concat" reads a stream to its end and concatenates its chunks.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from compose._types import stream_item_type
from compose.errors import GraphBuildError
from compose.stream import StreamReader, concat
from compose.stream import one_chunk as _one

__all__ = ["Lambda"]

I = TypeVar("I")  # noqa: E741 - the conventional name of an input type
O = TypeVar("O")  # noqa: E741

InvokeFn = Callable[..., Awaitable[Any]]  # (value, **opts) -> value
StreamFn = Callable[..., Awaitable[StreamReader[Any]]]  # (value, **opts) -> reader
CollectFn = Callable[..., Awaitable[Any]]  # (reader, **opts) -> value
TransformFn = Callable[..., Awaitable[StreamReader[Any]]]  # (reader, **opts) -> reader



@dataclass(frozen=True, slots=True)
class Paradigms:
    """The four run methods of a component: what it implements, and the rest derived."""

    invoke: InvokeFn
    stream: StreamFn
    collect: CollectFn
    transform: TransformFn
    implemented: frozenset[str]
    # the cheapest way to invoke with a value and no options (the component's own async function), if any
    invoke1: Callable[[Any], Awaitable[Any]] | None = None
    # what callback handlers see of an invoke: ``report[0](input)`` at the start, ``report[1](input, output)`` at
    # the end (a component's own callback types, as Eino's prompt ``CallbackInput``); None: the values themselves
    report: tuple[Callable[[Any], Any], Callable[[Any, Any], Any]] | None = None


def derive(
    invoke: InvokeFn | None = None,
    stream: StreamFn | None = None,
    collect: CollectFn | None = None,
    transform: TransformFn | None = None,
) -> Paradigms:
    """Complete a subset of the four methods with Eino's priority table (see the module docstring)."""
    implemented = frozenset(
        name for name, fn in (("invoke", invoke), ("stream", stream), ("collect", collect), ("transform", transform))
        if fn is not None
    )
    if not implemented:
        raise GraphBuildError("a lambda needs at least one of invoke, stream, collect, transform")

    if invoke is not None:
        inv: InvokeFn = invoke
    elif stream is not None:
        s = stream

        async def inv(x: Any, **o: Any) -> Any:
            return await concat(await s(x, **o))
    elif collect is not None:
        c = collect

        async def inv(x: Any, **o: Any) -> Any:
            return await c(_one(x), **o)
    else:
        t = cast(TransformFn, transform)

        async def inv(x: Any, **o: Any) -> Any:
            return await concat(await t(_one(x), **o))

    if stream is not None:
        st: StreamFn = stream
    elif transform is not None:
        t2 = transform

        async def st(x: Any, **o: Any) -> StreamReader[Any]:
            return await t2(_one(x), **o)
    elif invoke is not None:
        i2 = invoke

        async def st(x: Any, **o: Any) -> StreamReader[Any]:
            return _one(await i2(x, **o))
    else:
        c2 = cast(CollectFn, collect)

        async def st(x: Any, **o: Any) -> StreamReader[Any]:
            return _one(await c2(_one(x), **o))

    if collect is not None:
        co: CollectFn = collect
    elif transform is not None:
        t3 = transform

        async def co(r: StreamReader[Any], **o: Any) -> Any:
            return await concat(await t3(r, **o))
    elif invoke is not None:
        i3 = invoke

        async def co(r: StreamReader[Any], **o: Any) -> Any:
            return await i3(await concat(r), **o)
    else:
        s3 = cast(StreamFn, stream)

        async def co(r: StreamReader[Any], **o: Any) -> Any:
            return await concat(await s3(await concat(r), **o))

    if transform is not None:
        tr: TransformFn = transform
    elif stream is not None:
        s4 = stream

        async def tr(r: StreamReader[Any], **o: Any) -> StreamReader[Any]:
            return await s4(await concat(r), **o)
    elif collect is not None:
        c4 = collect

        async def tr(r: StreamReader[Any], **o: Any) -> StreamReader[Any]:
            return _one(await c4(r, **o))
    else:
        i4 = cast(InvokeFn, invoke)

        async def tr(r: StreamReader[Any], **o: Any) -> StreamReader[Any]:
            return _one(await i4(await concat(r), **o))

    return Paradigms(inv, st, co, tr, implemented)


# ---------------------------------------------------------------------------------------------------------------
# Normalising user functions


def _accepts_options(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _value_fn(fn: Callable[..., Any]) -> InvokeFn:
    """(value, **opts) -> value, from a sync or async function."""
    opts = _accepts_options(fn)
    if inspect.iscoroutinefunction(fn):
        if opts:
            return fn
        afn = fn

        async def call_async(x: Any, **_o: Any) -> Any:
            return await afn(x)

        return call_async

    def_fn = fn

    async def call_sync(x: Any, **o: Any) -> Any:
        return def_fn(x, **o) if opts else def_fn(x)

    return call_sync


def _stream_fn(fn: Callable[..., Any], *, input_is_stream: bool) -> StreamFn:
    """(input, **opts) -> reader, from an async generator function or an async function returning a reader."""
    opts = _accepts_options(fn)
    if inspect.isasyncgenfunction(fn):
        gen = fn

        async def from_gen(x: Any, **o: Any) -> StreamReader[Any]:
            ait = gen(x, **o) if opts else gen(x)
            if input_is_stream:
                ait = _closing_input(ait, x)
            # the body up to the first chunk belongs to the call (Eino's function returns its reader)
            return await StreamReader.from_started(ait)

        return from_gen
    return _value_fn(fn)


async def _closing_input(ait: AsyncIterator[Any], reader: StreamReader[Any]) -> AsyncIterator[Any]:
    """Close a transform's input stream when its output generator ends or is closed."""
    try:
        async for item in ait:
            yield item
    finally:
        aclose = getattr(ait, "aclose", None)
        if aclose is not None:
            await aclose()
        await reader.aclose()


def _hints(fn: Callable[..., Any]) -> tuple[Any, Any]:
    """(type of the first parameter, return type), Any where not annotated."""
    target = fn
    if not inspect.isfunction(fn) and not inspect.ismethod(fn):
        target = getattr(fn, "__call__", fn)  # noqa: B004
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable forward references: fall back to no types
        hints = {}
    try:
        params = [
            p for p in inspect.signature(target).parameters.values()
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    first = hints.get(params[0].name, Any) if params else Any
    return first, hints.get("return", Any)


class Lambda(Generic[I, O]):
    """A node built from functions: any subset of invoke, stream, collect and transform.

    * ``invoke``: ``(x) -> y``, sync or async;
    * ``stream``: ``(x) -> AsyncIterator[y]`` (an async generator function) or an async function returning a
      ``StreamReader``;
    * ``collect``: ``(reader) -> y``;
    * ``transform``: ``(reader) -> AsyncIterator[y]`` or returning a ``StreamReader``.

    Functions that take ``**opts`` receive the per-call node options. Types come from the annotations unless
    ``input_type``/``output_type`` are given.

    Example::

        async def upper(s: str) -> str:
            return s.upper()

        graph.add_lambda_node("upper", Lambda(invoke=upper))   # or simply graph.add_lambda_node("upper", upper)
    """

    def __init__(
        self,
        invoke: Callable[..., Any] | None = None,
        stream: Callable[..., Any] | None = None,
        collect: Callable[..., Any] | None = None,
        transform: Callable[..., Any] | None = None,
        *,
        input_type: Any = None,
        output_type: Any = None,
    ) -> None:
        paradigms = derive(
            _value_fn(invoke) if invoke else None,
            _stream_fn(stream, input_is_stream=False) if stream else None,
            _value_fn(collect) if collect else None,
            _stream_fn(transform, input_is_stream=True) if transform else None,
        )
        if invoke is not None and inspect.iscoroutinefunction(invoke):
            paradigms = dataclasses.replace(paradigms, invoke1=invoke)
        self.paradigms = paradigms
        in_t: Any = Any
        out_t: Any = Any
        for fn, in_stream, out_stream in (
            (invoke, False, False),
            (stream, False, True),
            (collect, True, False),
            (transform, True, True),
        ):
            if fn is None:
                continue
            a, r = _hints(fn)
            a = stream_item_type(a) if in_stream else a
            r = stream_item_type(r) if out_stream else r
            if in_t is Any:
                in_t = a
            if out_t is Any:
                out_t = r
        # whether any of its functions takes **opts (per-call node options)
        self.takes_options = any(_accepts_options(f) for f in (invoke, stream, collect, transform) if f is not None)
        self.input_type: Any = input_type if input_type is not None else in_t
        self.output_type: Any = output_type if output_type is not None else out_t
        self.type_name = next(
            (getattr(f, "__name__", "Lambda") for f in (invoke, stream, collect, transform) if f), "Lambda"
        )

    @classmethod
    def from_function(cls, fn: Callable[..., Any] | Lambda[Any, Any]) -> Lambda[Any, Any]:
        """A plain sync or async function is an invoke lambda; an async generator function a stream lambda."""
        if isinstance(fn, Lambda):
            return fn
        if inspect.isasyncgenfunction(fn):
            return cls(stream=fn)
        if not callable(fn):
            raise GraphBuildError(f"a lambda node needs a function or a Lambda, got {type(fn).__qualname__}")
        return cls(invoke=fn)

    async def invoke(self, x: I, **opts: Any) -> O:
        """Run with a value, return a value."""
        return cast(O, await self.paradigms.invoke(x, **opts))

    async def stream(self, x: I, **opts: Any) -> StreamReader[O]:
        """Run with a value, return a stream."""
        return await self.paradigms.stream(x, **opts)

    async def collect(self, reader: StreamReader[I], **opts: Any) -> O:
        """Run with a stream, return a value."""
        return cast(O, await self.paradigms.collect(reader, **opts))

    async def transform(self, reader: StreamReader[I], **opts: Any) -> StreamReader[O]:
        """Run with a stream, return a stream."""
        return await self.paradigms.transform(reader, **opts)

    def __repr__(self) -> str:
        return f"Lambda({self.type_name}, implements={sorted(self.paradigms.implemented)})"
