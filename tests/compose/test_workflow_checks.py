"""Workflow field mappings are checked like edges (issue 28, section 5): a mapping whose types only may fit gets
Eino's run-time check, TypedDict targets are checked at compile for keys and types, a Workflow's ``graph_info()``
tells data-only and control-only edges apart, and a chat template node's callbacks see Eino's prompt callback
input and output."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest

from compose import (
    END,
    START,
    CallbackHandler,
    ChatTemplate,
    FieldMappingError,
    FieldMappingTypeError,
    Graph,
    GraphBuildError,
    MessagesPlaceholder,
    NodeRunError,
    RunInfo,
    RuntimeTypeError,
    TypeMismatchError,
    Workflow,
    from_field,
    map_fields,
    to_field,
)
from compose.prompt import PromptCallbackInput, PromptCallbackOutput
from compose.schema import Message, system_message, user_message
from compose.stream import StreamReader

pytestmark = pytest.mark.anyio


async def _stream(r: Any, x: Any) -> Any:
    async with await r.stream(x) as reader:
        return [chunk async for chunk in reader]


RUNS: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
    "invoke": lambda r, x: r.invoke(x),
    "stream": _stream,
    "collect": lambda r, x: r.collect(StreamReader.from_iterable([x])),
    "transform": lambda r, x: _stream_transform(r, x),
}


async def _stream_transform(r: Any, x: Any) -> Any:
    async with await r.transform(StreamReader.from_iterable([x])) as reader:
        return [chunk async for chunk in reader]


async def double(x: int) -> int:
    return x * 2


def doubling() -> Any:
    """START's ``n`` (a ``dict[str, Any]`` value: may be an int) -> double(int) -> END's ``out``."""
    wf = Workflow[dict[str, Any], dict[str, Any]]()
    wf.add_lambda_node("double", double).add_input(START, from_field("n"))
    wf.end().add_input("double", to_field("out"))
    return wf.compile()


@pytest.mark.parametrize("paradigm", sorted(RUNS))
@pytest.mark.parametrize("bad", [None, "3", 2.5], ids=["None", "str", "float"])
async def test_a_value_that_only_may_fit_is_checked_at_run_time(paradigm: str, bad: object) -> None:
    r = doubling()
    assert await r.invoke({"n": 3}) == {"out": 6}
    with pytest.raises(FieldMappingTypeError) as info:
        await RUNS[paradigm](r, {"n": bad})
    err = info.value
    assert isinstance(err, FieldMappingError) and isinstance(err, RuntimeTypeError)
    assert err.node_path == ["double"] and err.predecessor == START and err.field_path == ["n"]
    assert (err.expected, err.actual) == (int, type(bad))
    assert (
        f"runtime check failed for mapping n -> <whole input>, field[{type(bad).__qualname__}]-[int] "
        "is absolutely not assignable"
    ) in str(err)


class Animal:
    pass


class Dog(Animal):
    def bark(self) -> str:
        return "woof"


class Cat(Animal):
    pass


@dataclass
class Pets:
    pet: Animal


@dataclass
class Kennel:
    dog: Dog


async def adopt(p: Pets) -> Pets:
    return p


async def kennel(k: Kennel) -> str:
    return k.dog.bark()


@pytest.mark.parametrize("paradigm", sorted(RUNS))
async def test_a_base_class_value_that_is_not_the_subclass_never_reaches_the_node(paradigm: str) -> None:
    wf = Workflow[Pets, str]()
    wf.add_lambda_node("adopt", adopt).add_input(START)
    wf.add_lambda_node("kennel", kennel).add_input("adopt", map_fields("pet", "dog"))
    wf.end().add_input("kennel")
    r = wf.compile()
    assert await r.invoke(Pets(Dog())) == "woof"
    with pytest.raises(FieldMappingTypeError) as info:
        await RUNS[paradigm](r, Pets(Cat()))
    assert info.value.node_path == ["kennel"] and info.value.predecessor == "adopt"
    assert "field[Cat]-[Dog] is absolutely not assignable" in str(info.value)


async def test_a_mapping_that_surely_fits_costs_no_check() -> None:
    async def inc(d: dict[str, int]) -> dict[str, int]:
        return {"x": d["x"] + 1}

    wf = Workflow[dict[str, int], dict[str, int]]()
    wf.add_lambda_node("inc", inc).add_input(START, map_fields("x", "x"))
    wf.end().add_input("inc", map_fields("x", "x"))
    r = wf.compile()
    assert all(not m.checks for m in r._tables.edge_maps.values())  # type: ignore[attr-defined]
    assert await r.invoke({"x": 1}) == {"x": 2}


async def test_an_optional_target_takes_none() -> None:
    async def maybe(x: int | None) -> str:
        return repr(x)

    wf = Workflow[dict[str, Any], str]()
    wf.add_lambda_node("maybe", maybe).add_input(START, from_field("n"))
    wf.end().add_input("maybe")
    r = wf.compile()
    assert await r.invoke({"n": None}) == "None"
    with pytest.raises(FieldMappingTypeError):
        await r.invoke({"n": "x"})


# ------------------------------------------------------------------------------------------- TypedDict targets


class Order(TypedDict):
    item: str
    count: int


async def describe(o: Order) -> str:
    return f"{o['count']} x {o['item']}"


def test_a_typed_dict_target_refuses_an_unknown_key_at_compile() -> None:
    wf = Workflow[dict[str, str], str]()
    wf.add_lambda_node("describe", describe).add_input(START, map_fields("name", "itme"))
    wf.end().add_input("describe")
    with pytest.raises(GraphBuildError, match=r"has no field\[itme\]"):
        wf.compile()


def test_a_typed_dict_target_checks_the_field_type_at_compile() -> None:
    @dataclass
    class Source:
        label: str

    wf = Workflow[Source, str]()
    wf.add_lambda_node("describe", describe).add_input(START, map_fields("label", "count"))
    wf.end().add_input("describe")
    with pytest.raises(TypeMismatchError, match=r"type\[str\] cannot be assigned to type\[int\]"):
        wf.compile()


def test_a_typed_dict_source_refuses_an_unknown_key_at_compile() -> None:
    async def show(o: Order) -> Order:
        return o

    wf = Workflow[Order, dict[str, Any]]()
    wf.add_lambda_node("show", show).add_input(START)
    wf.end().add_input("show", map_fields("colour", "c"))
    with pytest.raises(GraphBuildError, match=r"type\[.*Order\] has no field\[colour\]"):
        wf.compile()


@pytest.mark.parametrize("paradigm", sorted(RUNS))
async def test_a_typed_dict_target_is_built_and_its_fields_checked_at_run_time(paradigm: str) -> None:
    wf = Workflow[dict[str, Any], str]()
    wf.add_lambda_node("describe", describe).add_input(START, map_fields("name", "item"), map_fields("n", "count"))
    wf.end().add_input("describe")
    r = wf.compile()
    assert await r.invoke({"name": "tea", "n": 2}) == "2 x tea"
    with pytest.raises(FieldMappingTypeError, match=r"field\[str\]-\[int\]"):
        await RUNS[paradigm](r, {"name": "tea", "n": "two"})


# ------------------------------------------------------------------------------------------- graph_info


async def passthrough(x: dict[str, Any]) -> dict[str, Any]:
    return x


def test_a_workflows_graph_info_tells_data_only_and_control_only_edges_apart() -> None:
    wf = Workflow[dict[str, Any], dict[str, Any]]()
    wf.add_lambda_node("a", passthrough).add_input(START)
    wf.add_lambda_node("b", passthrough).add_input("a", map_fields("x", "x")).add_input(
        START, map_fields("x", "y"), direct_dependency=False
    )
    wf.add_lambda_node("c", passthrough).add_dependency("b").add_input("a", map_fields("x", "z"))
    wf.end().add_input("c")
    info = wf.compile().graph_info()
    assert info.edges == ((START, "a"), ("a", "b"), ("a", "c"), ("c", END))
    assert info.data_edges == ((START, "b"),)
    assert info.control_edges == (("b", "c"),)
    mermaid = info.to_mermaid()
    assert "START -->|data| n1" in mermaid
    assert "n1 ==>|control| n2" in mermaid
    assert "START --> n1" not in mermaid and "n1 --> n2" not in mermaid


# ------------------------------------------------------------------------------------------- chat template callbacks


class Recorder(CallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        if run_info.component == "ChatTemplate":
            self.seen.append(("start", input))

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        if run_info.component == "ChatTemplate":
            self.seen.append(("end", output))


@pytest.mark.parametrize("paradigm", sorted(RUNS))
async def test_chat_template_callbacks_see_the_variables_result_and_templates(paradigm: str) -> None:
    template = ChatTemplate.from_messages(
        "f-string", system_message("You plan trips to {city}."), MessagesPlaceholder("history", optional=True)
    )
    g = Graph[dict[str, Any], list[Message]]()
    g.add_chat_template_node("prompt", template)
    g.add_edge(START, "prompt")
    g.add_edge("prompt", END)
    r = g.compile()
    recorder = Recorder()
    variables = {"city": "Hangzhou", "history": [user_message("hi")]}
    run: dict[str, Callable[[], Awaitable[Any]]] = {
        "invoke": lambda: r.invoke(variables, callbacks=[recorder]),
        "stream": lambda: _read(r.stream(variables, callbacks=[recorder])),
        "collect": lambda: r.collect(StreamReader.from_iterable([variables]), callbacks=[recorder]),
        "transform": lambda: _read(r.transform(StreamReader.from_iterable([variables]), callbacks=[recorder])),
    }
    await run[paradigm]()
    expected = [system_message("You plan trips to Hangzhou."), user_message("hi")]
    assert recorder.seen == [
        ("start", PromptCallbackInput(variables, template.templates)),
        ("end", PromptCallbackOutput(expected, template.templates)),
    ]


async def _read(reader: Awaitable[StreamReader[Any]]) -> list[Any]:
    async with await reader as r:
        return [chunk async for chunk in r]


async def test_a_chat_template_failing_is_still_a_node_error() -> None:
    template = ChatTemplate.from_messages("f-string", user_message("{question}"))
    g = Graph[dict[str, Any], list[Message]]()
    g.add_chat_template_node("prompt", template)
    g.add_edge(START, "prompt")
    g.add_edge("prompt", END)
    with pytest.raises(NodeRunError):
        await g.compile().invoke({}, callbacks=[Recorder()])
