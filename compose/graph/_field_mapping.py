"""Field mappings of a Workflow (eino-semantics 1.13, Eino's ``field_mapping.go``).

A mapping takes a value at a path of the predecessor's output (the whole output for the empty path, or what a
custom extractor returns) to a path of the successor's input. Along each edge the predecessor's output becomes a
``{to_path: value}`` dict (``EdgeMap``); the dicts arriving at a node are fan-in merged (paths never collide: the
compile-time check) and the node's input is built from them (``InputBuild``). Fields are attributes of
dataclasses, pydantic models or other objects, and keys of ``dict[str, ...]`` (and TypedDicts).

In a streaming run both work chunk by chunk, as Eino's ``streamFieldMap``: each chunk of the predecessor's
stream is mapped on its own, a mapping whose map key the chunk lacks is skipped for that chunk (a chunk left
with nothing mapped is dropped), a None on the way to a field is an error item. A node input that is a dict
(or untyped, or a TypedDict) is built per chunk, with the static values as one extra chunk first, so the
chunks concatenate key by key with the engine's rules; a dataclass or model input is built once, from the
concatenated chunks, and arrives as a one-chunk stream. A stream that yields nothing gives the input's zero
value, as in invoke mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

from compose._engine.tables import NodePath
from compose._types import ClassInfo, type_name, zero_value
from compose.errors import FieldMappingError, FieldMappingTypeError, GraphBuildError
from compose.stream._concat import concat_items
from compose.stream._copy import MapReader
from compose.stream._core import _EMPTY, _END, SKIP, StreamReader, _Signal, closed_signal

__all__ = [
    "FieldMapping",
    "FieldMappingError",  # re-exported from compose.errors
    "from_field",
    "from_field_path",
    "map_field_paths",
    "map_fields",
    "to_field",
    "to_field_path",
]

Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FieldMapping:
    """From ``from_path`` of the predecessor's output (``()``: all of it) to ``to_path`` of the successor's input
    (``()``: all of it); ``extractor(output)`` replaces reading ``from_path``."""

    from_path: Path = ()
    to_path: Path = ()
    extractor: Callable[[Any], Any] | None = None

    def __str__(self) -> str:
        src = "<extractor>" if self.extractor is not None else ".".join(self.from_path) or "<whole output>"
        return f"{src} -> {'.'.join(self.to_path) or '<whole input>'}"


def _path(path: Sequence[str], what: str) -> Path:
    if isinstance(path, str) or not path or not all(isinstance(p, str) and p for p in path):
        raise GraphBuildError(f"{what} must be a non-empty list of non-empty field names, got {path!r}")
    return tuple(path)


def from_field(name: str) -> FieldMapping:
    """The predecessor's field ``name`` is the successor's whole input (Eino's ``FromField``)."""
    return FieldMapping(_path([name], "from field"), ())


def to_field(name: str, *, extractor: Callable[[Any], Any] | None = None) -> FieldMapping:
    """The predecessor's whole output (or ``extractor(output)``) goes to the successor's field ``name``."""
    return FieldMapping((), _path([name], "to field"), extractor)


def map_fields(from_name: str, to_name: str) -> FieldMapping:
    """The predecessor's field ``from_name`` goes to the successor's field ``to_name``."""
    return FieldMapping(_path([from_name], "from field"), _path([to_name], "to field"))


def from_field_path(path: Sequence[str]) -> FieldMapping:
    """The value at the nested ``path`` of the predecessor's output is the successor's whole input."""
    return FieldMapping(_path(path, "from field path"), ())


def to_field_path(path: Sequence[str], *, extractor: Callable[[Any], Any] | None = None) -> FieldMapping:
    """The predecessor's whole output (or ``extractor(output)``) goes to the nested ``path`` of the input."""
    return FieldMapping((), _path(path, "to field path"), extractor)


def map_field_paths(from_path: Sequence[str], to_path: Sequence[str]) -> FieldMapping:
    """The value at ``from_path`` of the predecessor's output goes to ``to_path`` of the successor's input."""
    return FieldMapping(_path(from_path, "from field path"), _path(to_path, "to field path"))


# ---------------------------------------------------------------------------------------------- static checks


def _is_open(tp: Any) -> bool:
    return tp is Any or tp is object or tp is None


def field_type(tp: Any, name: str, *, side: str) -> Any:
    """The type of field ``name`` of ``tp``; raises ``GraphBuildError`` as Eino's static check does."""
    if _is_open(tp):
        return Any
    if get_origin(tp) in (Union, UnionType):  # an optional struct: None is caught at run time
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == 1:
            tp = members[0]
    origin = get_origin(tp) or tp
    # a TypedDict is a dict subclass: its keys and their types are its fields, checked like a dataclass's
    if not is_typeddict(tp) and isinstance(origin, type) and issubclass(origin, Mapping):
        args = get_args(tp)
        if args and args[0] is not str and not _is_open(args[0]):
            raise GraphBuildError(f"type[{type_name(tp)}] is not a map with string or string alias key")
        return args[1] if len(args) > 1 else Any
    if is_typeddict(tp) or dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        if name not in hints:
            raise GraphBuildError(f"type[{type_name(tp)}] has no field[{name}]")
        return hints[name]
    model_fields = getattr(tp, "model_fields", None)
    if isinstance(model_fields, dict):
        if name not in model_fields:
            raise GraphBuildError(f"type[{type_name(tp)}] has no field[{name}]")
        return model_fields[name].annotation
    if name.startswith("_"):
        raise GraphBuildError(f"type[{type_name(tp)}] has an unexported field[{name}]")
    raise GraphBuildError(f"static check fail: {side} type should be struct or map, got {type_name(tp)}")


def path_type(tp: Any, path: Path, *, side: str) -> Any:
    for name in path:
        tp = field_type(tp, name, side=side)
    return tp


def check_conflicts(node: str, paths: Sequence[Path]) -> None:
    """No two terminal paths of one node's input may be equal or one a prefix of the other."""
    for i, a in enumerate(paths):
        for b in paths[i + 1 :]:
            if not a or not b:
                raise GraphBuildError(f"entire output has already been mapped for node: {node}")
            if a[: len(b)] == b or b[: len(a)] == a:
                raise GraphBuildError(
                    f"two terminal field paths conflict for node {node}: {'.'.join(a)}, {'.'.join(b)}"
                )


# ---------------------------------------------------------------------------------------------- run time

_MISSING: Any = object()  # a map key the chunk lacks (streaming: the mapping is skipped for that chunk)


@dataclass(frozen=True, slots=True)
class FieldCheck:
    """A run-time check of one mapping whose types only may fit (Eino's request-time field checker): the value
    must be an instance of ``cls`` (the target field's type ``expected``, shallowly)."""

    mapping: FieldMapping
    cls: ClassInfo
    expected: Any


class EdgeMap:
    """The mapping of one (predecessor, node) edge: the predecessor's output as ``{to_path: value}``; ``checks``
    are the run-time checks of its mappings whose types only may fit."""

    __slots__ = ("checks", "dst", "mappings", "src")

    def __init__(
        self, src: str, dst: str, mappings: Sequence[FieldMapping], checks: Sequence[FieldCheck] = ()
    ) -> None:
        self.src = src
        self.dst = dst
        self.mappings = tuple(mappings)
        self.checks = tuple(checks)

    def invoke(self, value: Any, path: NodePath) -> dict[Path, Any]:
        out = {m.to_path: self._take(m, value, path, lenient=False) for m in self.mappings}
        if self.checks:
            self._check(out, path)
        return out

    def stream(self, reader: StreamReader[Any], path: NodePath) -> StreamReader[Any]:
        return _EdgeReader(reader, partial(self._chunk, path))

    def _chunk(self, path: NodePath, chunk: Any) -> Any:
        out: dict[Path, Any] = {}
        for m in self.mappings:
            v = self._take(m, chunk, path, lenient=True)
            if v is not _MISSING:
                out[m.to_path] = v
        if self.checks and out:
            self._check(out, path)
        return out or SKIP

    def _check(self, out: Mapping[Path, Any], path: NodePath) -> None:
        for c in self.checks:
            m = c.mapping
            v = out.get(m.to_path, _MISSING)
            if v is not _MISSING and not isinstance(v, c.cls):
                raise FieldMappingTypeError(
                    f"runtime check failed for mapping {m}, field[{type(v).__qualname__}]-"
                    f"[{type_name(c.expected)}] is absolutely not assignable",
                    node_path=(*path, self.dst),
                    predecessor=self.src,
                    field_path=m.from_path,
                    expected=c.expected,
                    actual=type(v),
                )

    def _take(self, m: FieldMapping, value: Any, path: NodePath, *, lenient: bool) -> Any:
        def fail(problem: str, field_path: Path) -> FieldMappingError:
            return FieldMappingError(
                problem, node_path=(*path, self.dst), predecessor=self.src, field_path=field_path
            )

        if m.extractor is not None:
            try:
                return m.extractor(value)
            except Exception as exc:
                raise fail(f"custom extractor raised {type(exc).__name__}: {exc}", m.to_path) from exc
        for i, name in enumerate(m.from_path):
            if value is None:
                where = ".".join(m.from_path[:i]) or "<output>"
                raise fail(f"intermediate source value {where} is None", m.from_path)
            if isinstance(value, Mapping):
                if name not in value:
                    if lenient:
                        return _MISSING
                    raise fail(f"map key [{'.'.join(m.from_path[: i + 1])}] not found", m.from_path)
                value = value[name]
            else:
                try:
                    value = getattr(value, name)
                except AttributeError:
                    raise fail(f"type[{type(value).__name__}] has no field[{name}]", m.from_path) from None
        return value

    def __repr__(self) -> str:
        return f"EdgeMap({self.src!r} -> {self.dst!r}: {', '.join(map(str, self.mappings)) or 'no data'})"


def _per_chunk(tp: Any) -> bool:
    """Whether an input of type ``tp`` is built chunk by chunk in a streaming run (a dict-like value)."""
    if get_origin(tp) in (Union, UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        tp = members[0] if len(members) == 1 else Any
    if _is_open(tp) or is_typeddict(tp):
        return True
    origin = get_origin(tp) or tp
    return isinstance(origin, type) and issubclass(origin, Mapping)


class _EdgeReader(MapReader):
    """``reader.map(fn)`` for a synchronous ``fn`` known in advance (no inspection per run)."""

    _kind = "workflow-edge"

    def __init__(self, src: StreamReader[Any], fn: Callable[[Any], Any]) -> None:
        StreamReader.__init__(self)
        self._src = src
        self._fn = fn
        self._async = False
        self._lost = False
        self._cancel_safe = src.cancel_safe


def _plain(tp: Any, paths: Sequence[Path]) -> bool:
    """Whether an input of type ``tp`` built from values at ``paths`` is nested plain dicts: ``tp`` and every
    type on the way to a value is untyped or a ``dict``/``Mapping`` (no field types to consult, nothing to
    construct)."""

    def dict_like(t: Any) -> bool:
        if _is_open(t):
            return True
        if get_origin(t) in (Union, UnionType):
            members = [a for a in get_args(t) if a is not type(None)]
            return len(members) == 1 and dict_like(members[0])
        return get_origin(t) in (dict, Mapping) or t in (dict, Mapping)

    try:
        return all(
            dict_like(path_type(tp, p[:i], side="successor input")) for p in paths for i in range(len(p))
        ) and dict_like(tp)
    except GraphBuildError:
        return False


def _nest(gathered: Mapping[Path, Any]) -> Any:
    """``build_input`` for a plain type: the values at their paths of nested dicts."""
    if () in gathered:
        return gathered[()]
    out: dict[str, Any] = {}
    for path, value in gathered.items():
        d = out
        for name in path[:-1]:
            d = d.setdefault(name, {})
        d[path[-1]] = value
    return out


class InputBuild:
    """A Workflow node's input, built from its gathered ``{to_path: value}`` and its static values."""

    __slots__ = ("build", "in_t", "per_chunk", "static")

    def __init__(self, in_t: Any, static: Mapping[Path, Any], paths: Sequence[Path]) -> None:
        self.in_t = in_t
        self.static = dict(static)
        self.per_chunk = _per_chunk(in_t)
        plain = _plain(in_t, paths)  # paths: the mapped and the static ones
        self.build: Callable[[Mapping[Path, Any]], Any] = _nest if plain else partial(build_input, in_t)

    def invoke(self, gathered: Mapping[Path, Any], path: NodePath) -> Any:
        if not gathered and not self.static:
            return zero_value(self.in_t)  # only control (or skipped data) predecessors: the zero value, as Eino
        return self.build({**self.static, **gathered} if self.static else gathered)

    def stream(self, reader: StreamReader[Any], path: NodePath) -> StreamReader[Any]:
        return _BuildReader(reader, self)


_MORE: Any = object()


class _BuildReader(StreamReader[Any]):
    """A node's input stream built from its merged gathered chunks (``InputBuild.stream``); owns its source."""

    _kind = "workflow-input"

    def __init__(self, src: StreamReader[Any], build: InputBuild) -> None:
        super().__init__()
        self._src = src
        self._build = build
        self._cancel_safe = src.cancel_safe
        self._head: list[Any] = []  # what to return before reading the source again
        self._gathered: list[Any] = []  # built once at the end (an input that is not dict-like)
        self._emitted = False
        self._ended = False
        if build.static and build.per_chunk:
            self._head.append(_safe(build.build, build.static))
            self._emitted = True

    def _poll(self) -> object:
        while True:
            x = self._ready()
            if x is not _MORE:
                return x
            y = self._src._poll()
            if y is _EMPTY:
                return y
            x = self._step(y)
            if x is not _MORE:
                return x

    async def _pull(self) -> object:
        while True:
            x = self._poll()
            if x is not _EMPTY:
                return x
            x = self._step(await self._src._pull())  # the source has nothing ready: wait for its next item
            if x is not _MORE:
                return x

    def _ready(self) -> object:
        if self._closed:
            return closed_signal()
        if self._head:
            return self._head.pop(0)
        if self._ended:
            self._done = True
            return _END
        return _MORE

    def _step(self, x: object) -> object:
        build = self._build
        if type(x) is _Signal:
            if x is not _END:
                return x  # an error item (or a SourceEOF) passes through
            self._ended = True
            if not build.per_chunk and (self._gathered or build.static):
                gathered = concat_items(self._gathered) if self._gathered else {}
                return _safe(build.invoke, gathered, ())
            if not self._emitted:
                return _safe(zero_value, build.in_t)
            return _MORE
        if not build.per_chunk:
            self._gathered.append(x)
            return _MORE
        self._emitted = True
        return _safe(build.build, x)

    async def _aclose_owned(self) -> None:
        await self._src.aclose()


def _safe(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        return _Signal(exc)


def build_input(tp: Any, gathered: Mapping[Path, Any]) -> Any:
    """The node input of type ``tp`` holding the gathered values (missing intermediate dicts are created; a
    dataclass or pydantic model is constructed from its gathered fields)."""
    if () in gathered:
        return gathered[()]
    groups: dict[str, dict[Path, Any]] = {}
    for path, value in gathered.items():
        groups.setdefault(path[0], {})[path[1:]] = value
    fields = {
        name: build_input(Any if _is_open(tp) else field_type(tp, name, side="successor input"), sub)
        for name, sub in groups.items()
    }
    if get_origin(tp) in (Union, UnionType):
        tp = next(a for a in get_args(tp) if a is not type(None))
    if _is_open(tp) or is_typeddict(tp):
        return fields
    origin = get_origin(tp) or tp
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return fields if origin in (dict, Mapping) else origin(fields)  # type: ignore[call-arg]
    return tp(**fields)
