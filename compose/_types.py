"""Type compatibility for graph edges: the Python counterpart of Eino's ``checkAssignable`` (eino-semantics 1.5).

``assignable(out, in_)`` answers YES (always fine), MAY (fine only for some values: the engine inserts a runtime
check) or NO (a build error). ``Any`` on the output side is MAY; on the input side YES.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import AsyncIterator, Callable
from typing import Any, Union, get_args, get_origin

__all__ = ["Assignable", "assignable", "instance_check", "runtime_checker", "type_name", "zero_value"]


class Assignable(enum.Enum):
    YES = "yes"
    MAY = "may"
    NO = "no"


_UNION_TYPES: tuple[Any, ...] = (Union, types.UnionType)


def type_name(tp: Any) -> str:
    """A short readable name for a type or typing construct."""
    if tp is Any:
        return "Any"
    if isinstance(tp, type) and not get_args(tp):
        return tp.__qualname__
    text = repr(tp)
    return text.replace("typing.", "").replace("compose.schema.", "").replace("compose.stream.", "")


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in _UNION_TYPES


def assignable(out: Any, in_: Any) -> Assignable:
    """Can a value of type ``out`` be delivered where ``in_`` is expected?"""
    if in_ is Any or in_ is object or out == in_:
        return Assignable.YES
    if out is Any or out is object:
        return Assignable.MAY
    if _is_union(out):  # every member must fit (checked first: int | str fits int | str | bytes)
        results = [assignable(member, in_) for member in get_args(out)]
        if all(r is Assignable.YES for r in results):
            return Assignable.YES
        return Assignable.NO if all(r is Assignable.NO for r in results) else Assignable.MAY
    if _is_union(in_):  # one member must fit
        results = [assignable(out, member) for member in get_args(in_)]
        if Assignable.YES in results:
            return Assignable.YES
        return Assignable.MAY if Assignable.MAY in results else Assignable.NO
    out_origin, in_origin = get_origin(out) or out, get_origin(in_) or in_
    if not isinstance(out_origin, type) or not isinstance(in_origin, type):
        return Assignable.MAY  # TypeVars, Protocol aliases, Literal...: only a runtime check can tell
    if _is_protocol(in_origin) or _is_protocol(out_origin):  # issubclass() refuses most protocols
        return Assignable.MAY
    if issubclass(out_origin, in_origin):
        out_args, in_args = get_args(out), get_args(in_)
        if not in_args or not out_args or len(out_args) != len(in_args):
            return Assignable.YES if not in_args else Assignable.MAY
        results = [assignable(o, i) for o, i in zip(out_args, in_args, strict=True)]
        if all(r is Assignable.YES for r in results):
            return Assignable.YES
        return Assignable.NO if Assignable.NO in results else Assignable.MAY
    if issubclass(in_origin, out_origin):
        return Assignable.MAY  # out is a base class: the concrete value may be the subclass
    return Assignable.NO


def _is_protocol(tp: type) -> bool:
    return bool(getattr(tp, "_is_protocol", False))


def runtime_checker(tp: Any) -> Callable[[object], bool]:
    """A predicate telling whether a value conforms (shallowly) to ``tp``."""
    if tp is Any or tp is object:
        return lambda _v: True
    if _is_union(tp):
        checks = [runtime_checker(m) for m in get_args(tp)]
        return lambda v: any(c(v) for c in checks)
    origin = get_origin(tp) or tp
    if origin is typing.Literal:
        allowed = get_args(tp)
        return lambda v: v in allowed
    if tp is None or tp is type(None):
        return lambda v: v is None
    if typing.is_typeddict(origin):  # isinstance() refuses TypedDicts: their values are dicts
        return lambda v: isinstance(v, dict)
    if isinstance(origin, type) and (not _is_protocol(origin) or getattr(origin, "_is_runtime_protocol", False)):
        return lambda v: isinstance(v, origin)
    return lambda _v: True


ClassInfo = type | tuple[type, ...]

# PEP 484's numeric tower: an int is a fine float (and both are fine complex numbers)
_PROMOTED: dict[type, tuple[type, ...]] = {float: (float, int), complex: (complex, float, int)}


def instance_check(tp: Any) -> ClassInfo | None:
    """The class (or tuple of classes) that a value of type ``tp`` is an instance of, for one ``isinstance``
    that checks it shallowly (``list[Message]``: a list); None when no ``isinstance`` tells exactly or cheaply:
    ``Any``, ``object``, TypeVars, Protocols, ``Literal``, NewTypes, unions with such a member.

    The engine checks a node's output with it: a value that fails is not of the declared type, and a type that
    gives None is not checked."""
    if tp is Any or tp is object:
        return None
    if tp is None or tp is type(None):
        return type(None)
    if get_origin(tp) is typing.Annotated:
        return instance_check(tp.__origin__)
    if _is_union(tp):
        members: list[type] = []
        for m in get_args(tp):
            info = instance_check(m)
            if info is None:
                return None
            members.extend(info if isinstance(info, tuple) else (info,))
        return tuple(dict.fromkeys(members))
    origin = get_origin(tp) or tp
    meta = getattr(origin, "__pydantic_generic_metadata__", None)
    if meta and meta.get("origin") is not None:  # Model[int]: a Model() built unparametrised is one too
        origin = meta["origin"]
    if typing.is_typeddict(origin):
        return dict
    if not isinstance(origin, type) or _is_protocol(origin):
        return None
    return _PROMOTED.get(origin, origin)


def zero_value(tp: Any) -> Any:
    """The zero value of a type (Eino gives it to a DAG node whose data predecessors were all skipped)."""
    if tp is Any or tp is None or tp is type(None) or _is_union(tp):
        return None
    origin = get_origin(tp) or tp
    if isinstance(origin, type):
        try:
            return origin()
        except Exception:  # a type without a no-argument constructor has no zero value but None
            return None
    return None


def stream_item_type(tp: Any) -> Any:
    """``T`` for ``AsyncIterator[T]``-like annotations, else ``Any``."""
    args = get_args(tp)
    origin = get_origin(tp)
    if origin is not None and isinstance(origin, type) and issubclass(origin, AsyncIterator) and args:
        return args[0]
    if origin is not None and getattr(origin, "__name__", "") == "StreamReader" and args:
        return args[0]
    return Any


class TypedBuilder:
    """The ``input_type`` and ``output_type`` of a builder (``Graph``, ``Chain``): the types given to its
    constructor, else its type arguments (``Graph[int, str]()`` records them in ``__orig_class__``, set after
    ``__init__``), else ``Any``."""

    _input_type: Any
    _output_type: Any

    @property
    def input_type(self) -> Any:
        """The input type (START's output)."""
        return self._input_type if self._input_type is not None else self._type_argument(0)

    @property
    def output_type(self) -> Any:
        """The output type (END's input)."""
        return self._output_type if self._output_type is not None else self._type_argument(1)

    def _type_argument(self, index: int) -> Any:
        args = get_args(getattr(self, "__orig_class__", None))
        return args[index] if len(args) > index else Any
