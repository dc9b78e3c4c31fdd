"""The compile-time type rules (eino-semantics 1.5): ``assignable`` says YES (checked now), MAY (a runtime check is
inserted on the edge) or NO (``TypeMismatchError``); ``runtime_checker`` is that runtime check."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any, Literal, NewType, Optional, Protocol, TypedDict, TypeVar, Union, runtime_checkable

import pytest

from compose._types import (
    Assignable,
    assignable,
    instance_check,
    runtime_checker,
    stream_item_type,
    type_name,
    zero_value,
)
from compose.schema import Message
from compose.stream import StreamReader

T = TypeVar("T")
YES, MAY, NO = Assignable.YES, Assignable.MAY, Assignable.NO


class Base: ...


class Child(Base): ...


class Greets(Protocol):
    def greet(self) -> str: ...


@runtime_checkable
class Named(Protocol):
    name: str


@pytest.mark.parametrize(
    ("out", "in_", "expected"),
    [
        (str, str, YES),
        (int, Any, YES),
        (int, object, YES),
        (Any, int, MAY),
        (object, int, MAY),
        (int, str, NO),
        (Child, Base, YES),
        (Base, Child, MAY),  # a base-class value may be the subclass
        (int, Union[int, str], YES),  # noqa: UP007 - the typing spelling is what users may write
        (int, Optional[int], YES),  # noqa: UP045
        (int, str | bytes, NO),
        (Any, str | None, MAY),
        (int | str, int | str | bytes, YES),
        (int | str, int, MAY),  # the str half fails at run time only
        (int | str, bytes, NO),
        (list[int], list[int], YES),
        (list[int], list[str], NO),
        (list[int], list, YES),
        (list, list[int], MAY),
        (list[Any], list[int], MAY),
        (dict[str, int], dict[str, Any], YES),
        (list[int], Sequence[int], YES),
        (Base, Greets, MAY),  # protocols are checked at run time
        (Greets, int, MAY),  # a protocol-typed value may be an int (issubclass() refuses the protocol)
        (T, int, MAY),
        (Literal["a"], str, MAY),
        (list[Message], list[Message], YES),
    ],
)
def test_assignable(out: Any, in_: Any, expected: Assignable) -> None:
    assert assignable(out, in_) is expected


def test_runtime_checker_is_shallow_and_knows_unions_literals_none_and_protocols() -> None:
    assert runtime_checker(Any)(object()) and runtime_checker(object)(3)
    check = runtime_checker(int | str)
    assert check(1) and check("x") and not check(b"x")
    lit = runtime_checker(Literal["a", "b"])
    assert lit("a") and not lit("c")
    none = runtime_checker(type(None))
    assert none(None) and not none(0)
    assert runtime_checker(list[int])([1]) and runtime_checker(list[int])(["shallow"])
    assert not runtime_checker(list[int])((1,))

    class HasName:
        name = "x"

    assert runtime_checker(Named)(HasName()) and not runtime_checker(Named)(3)
    assert runtime_checker(Greets)(3)  # not runtime-checkable: nothing to check


class Point(TypedDict):
    x: int


def test_runtime_checker_takes_a_typeddict_as_a_dict() -> None:
    assert runtime_checker(Point)({"x": 1}) and not runtime_checker(Point)([1])


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (int, int),
        (float, (float, int)),  # PEP 484: an int is a fine float
        (complex, (complex, float, int)),
        (list[Message], list),  # shallow: the origin only
        (int | None, (int, type(None))),
        (Optional[str], (str, type(None))),  # noqa: UP045
        (float | int, (float, int)),
        (None, type(None)),
        (Point, dict),
        (Annotated[int, "meta"], int),
        (Message, Message),
        (Any, None),
        (object, None),
        (T, None),
        (int | T, None),  # a member no isinstance tells: nothing is checked
        (Greets, None),
        (Named, None),  # runtime-checkable, but neither exact nor cheap
        (Literal["a"], None),
        (NewType("UserId", int), None),
        ("int", None),  # an unresolved forward reference
    ],
)
def test_instance_check_is_one_exact_isinstance_or_none(tp: Any, expected: Any) -> None:
    assert instance_check(tp) == expected


def test_zero_values_and_stream_item_types_and_names() -> None:
    assert (zero_value(str), zero_value(int), zero_value(list[int]), zero_value(dict[str, Any])) == ("", 0, [], {})
    assert zero_value(Any) is None and zero_value(int | None) is None and zero_value(type(None)) is None

    class NeedsArgs:
        def __init__(self, x: int) -> None: ...

    assert zero_value(NeedsArgs) is None
    assert zero_value(T) is None
    assert stream_item_type(AsyncIterator[str]) is str
    assert stream_item_type(StreamReader[int]) is int
    assert stream_item_type(list[int]) is Any and stream_item_type(str) is Any
    assert type_name(Any) == "Any" and type_name(Message) == "Message"
    assert type_name(list[Message]) == "list[Message]" and type_name(int | None) == "int | None"
