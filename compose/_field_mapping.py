"""Field mappings of a Workflow (eino-semantics 1.13, Eino's ``field_mapping.go``).

A mapping takes a value at a path of the predecessor's output (the whole output for the empty path, or what a
custom extractor returns) to a path of the successor's input. Along each edge the predecessor's output becomes a
``{to_path: value}`` dict; the dicts arriving at a node are fan-in merged (paths never collide: the compile-time
check) and the node's input is built from them. Fields are attributes of dataclasses, pydantic models or other
objects, and keys of ``dict[str, ...]`` (and TypedDicts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

from compose._types import type_name
from compose.errors import GraphBuildError, GraphRunError

__all__ = [
    "FieldMapping",
    "FieldMappingError",
    "from_field",
    "from_field_path",
    "map_field_paths",
    "map_fields",
    "to_field",
    "to_field_path",
]

Path = tuple[str, ...]


class FieldMappingError(GraphRunError, LookupError):
    """A Workflow field mapping failed at run time: a map key is missing, or an intermediate value is None."""


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
    if isinstance(origin, type) and issubclass(origin, Mapping):
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


def read_path(value: Any, path: Path, src: str) -> Any:
    for i, name in enumerate(path):
        if value is None:
            where = ".".join(path[:i]) or "<output>"
            raise FieldMappingError(f"field mapping from node '{src}': intermediate source value {where} is None")
        if isinstance(value, Mapping):
            if name not in value:
                raise FieldMappingError(
                    f"field mapping from node '{src}': map key [{'.'.join(path[: i + 1])}] not found"
                )
            value = value[name]
        else:
            try:
                value = getattr(value, name)
            except AttributeError:
                raise FieldMappingError(
                    f"field mapping from node '{src}': type[{type(value).__name__}] has no field[{name}]"
                ) from None
    return value


def gather(src: str, mappings: Sequence[FieldMapping]) -> Callable[[Any], dict[Path, Any]]:
    """The edge transform: ``src``'s output as ``{to_path: value}``."""

    def transform(out: Any) -> dict[Path, Any]:
        return {
            m.to_path: m.extractor(out) if m.extractor is not None else read_path(out, m.from_path, src)
            for m in mappings
        }

    return transform


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
