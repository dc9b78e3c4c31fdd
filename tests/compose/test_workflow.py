"""Workflow and field mapping (eino-semantics 1.13), ported from Eino's workflow_test.go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from compose import (
    END,
    START,
    FieldMappingError,
    GraphBranch,
    GraphBuildError,
    InvalidGraphError,
    Workflow,
    from_field,
    from_field_path,
    map_field_paths,
    map_fields,
    to_field,
    to_field_path,
)

pytestmark = pytest.mark.anyio


@dataclass
class Inner:
    f1: str = ""
    f2: int = 0


@dataclass
class Outer:
    inner: Inner | None = None
    name: str = ""


async def test_field_mapping_nested_from_and_to() -> None:
    wf = Workflow[Outer, dict[str, Any]]()
    wf.add_lambda_node("upper", str.upper).add_input(START, from_field_path(["inner", "f1"]))
    wf.end().add_input("upper", to_field_path(["a", "b"])).add_input(START, map_fields("name", "name"))
    r = wf.compile()
    assert await r.invoke(Outer(Inner("x", 1), "n")) == {"a": {"b": "X"}, "name": "n"}


async def test_map_into_dataclass_target() -> None:
    wf = Workflow[dict[str, Any], Inner]()
    wf.end().add_input(START, map_fields("s", "f1"), map_field_paths(["deep", "n"], ["f2"]))
    assert await wf.compile().invoke({"s": "v", "deep": {"n": 3}}) == Inner("v", 3)


async def test_whole_output_and_custom_extractor() -> None:
    wf = Workflow[str, dict[str, Any]]()
    wf.add_lambda_node("len", len).add_input(START)
    wf.end().add_input("len", to_field("n")).add_input(START, to_field("first", extractor=lambda s: s[0]))
    assert await wf.compile().invoke("hello") == {"n": 5, "first": "h"}


async def test_static_values() -> None:
    wf = Workflow[str, dict[str, Any]]()
    node = wf.add_lambda_node("echo", lambda d: d).add_input(START, to_field("q"))
    node.set_static_value(["cfg", "k"], 7).set_static_value("top", True)
    wf.end().add_input("echo")
    assert await wf.compile().invoke("x") == {"q": "x", "cfg": {"k": 7}, "top": True}


async def test_indirect_data_only_edge_and_control_dependency() -> None:
    order: list[str] = []

    def a(s: str) -> str:
        order.append("a")
        return s + "-a"

    def b(_: Any) -> str:
        order.append("b")
        return "b"

    wf = Workflow[str, dict[str, Any]]()
    wf.add_lambda_node("a", a).add_input(START)
    wf.add_lambda_node("b", b).add_dependency("a")  # control only: its input is the zero value
    wf.end().add_input("b", to_field("b")).add_input("a", to_field("a"), direct_dependency=False).add_input(
        START, to_field("start"), direct_dependency=False
    )
    assert await wf.compile().invoke("s") == {"b": "b", "a": "s-a", "start": "s"}
    assert order == ["a", "b"]


async def test_branch_passes_no_data() -> None:
    def build(choice: str) -> Any:
        wf = Workflow[dict[str, Any], dict[str, Any]]()
        wf.add_lambda_node("b1", lambda d: "b1:" + str(d)).add_input(START, from_field("s"), direct_dependency=False)
        wf.add_branch(START, GraphBranch(lambda d: choice, {"b1", END}))
        wf.end().add_input("b1", to_field("b1")).add_input(START, map_fields("s", "start"), direct_dependency=False)
        return wf.compile()

    assert await build("b1").invoke({"s": "world"}) == {"b1": "b1:world", "start": "world"}
    assert await build(END).invoke({"s": "world"}) == {"start": "world"}


async def test_all_data_predecessors_skipped_gives_zero_value() -> None:
    wf = Workflow[str, dict[str, Any]]()
    wf.add_lambda_node("b1", str.upper).add_input(START, direct_dependency=False)
    wf.add_lambda_node("b2", str.lower).add_input(START, direct_dependency=False)
    wf.add_branch(START, GraphBranch(lambda s: "b2", {"b1", "b2"}))
    wf.end().add_input("b1", to_field("b1"))
    wf.end().add_dependency("b2")
    assert await wf.compile().invoke("Hi") == {}


async def test_runtime_missing_key_and_none_intermediate() -> None:
    wf = Workflow[dict[str, Any], str]()
    wf.end().add_input(START, from_field_path(["a", "b"]))
    r = wf.compile()
    with pytest.raises(FieldMappingError, match=r"map key \[a\] not found"):
        await r.invoke({})
    with pytest.raises(FieldMappingError, match="is None"):
        await r.invoke({"a": None})


def test_compile_checks() -> None:
    wf = Workflow[Inner, str]()
    wf.end().add_input(START, from_field("nope"))
    with pytest.raises(GraphBuildError, match=r"has no field\[nope\]"):
        wf.compile()

    wf2 = Workflow[str, str]()
    wf2.end().add_input(START, from_field("x"))
    with pytest.raises(GraphBuildError, match="predecessor output type should be struct or map"):
        wf2.compile()

    wf3 = Workflow[dict[str, Any], str]()
    wf3.end().add_input(START, to_field("x"))
    with pytest.raises(GraphBuildError, match="successor input type should be struct or map"):
        wf3.compile()

    wf4 = Workflow[dict[int, Any], str]()
    wf4.end().add_input(START, from_field("x"))
    with pytest.raises(GraphBuildError, match="not a map with string"):
        wf4.compile()

    wf5 = Workflow[dict[str, Any], dict[str, Any]]()
    wf5.end().add_input(START, map_fields("a", "x"), map_field_paths(["b"], ["x", "y"]))
    with pytest.raises(GraphBuildError, match="two terminal field paths conflict for node end"):
        wf5.compile()

    wf6 = Workflow[dict[str, Any], dict[str, Any]]()
    wf6.add_lambda_node("n", lambda d: d).add_input(START)
    wf6.end().add_input(START).add_input("n", to_field("x"))
    with pytest.raises(GraphBuildError, match="entire output has already been mapped for node: end"):
        wf6.compile()

    wf7 = Workflow[str, str]()
    wf7.add_lambda_node("n", str.upper).add_input(START)
    with pytest.raises(InvalidGraphError, match="end node not set"):
        wf7.compile()


def test_data_only_node_without_control_fails() -> None:
    wf = Workflow[str, str]()
    wf.add_lambda_node("n", str.upper).add_input(START, direct_dependency=False)
    wf.end().add_input("n")
    with pytest.raises(InvalidGraphError, match="no control predecessor"):
        wf.compile()


async def test_fan_in_to_pydantic_target() -> None:
    from pydantic import BaseModel

    class Out(BaseModel):
        up: str
        low: str

    wf = Workflow[str, Out]()
    wf.add_lambda_node("u", str.upper).add_input(START)
    wf.add_lambda_node("l", str.lower).add_input(START)
    wf.end().add_input("u", to_field("up")).add_input("l", to_field("low"))
    assert await wf.compile().invoke("Hi") == Out(up="HI", low="hi")


async def test_field_mapping_error_names_node_path_predecessor_and_field() -> None:
    inner = Workflow[dict[str, Any], str]()
    inner.add_lambda_node("up", str.upper).add_input(START, from_field_path(["a", "b"]))
    inner.end().add_input("up")
    outer = Workflow[dict[str, Any], str]()
    outer.add_graph_node("sub", inner.compile()).add_input(START)
    outer.end().add_input("sub")
    r = outer.compile()
    for run in (r.invoke, lambda x: _concat(r.stream(x))):
        with pytest.raises(FieldMappingError) as info:
            await run({"a": None})
        err = info.value
        assert (err.node_path, err.predecessor, err.field_path) == (["sub", "up"], START, ["a", "b"])
        assert "node path: [sub, up]" in str(err) and "from node 'start' to node 'up'" in str(err)
    with pytest.raises(FieldMappingError, match=r"map key \[a\] not found") as missing:
        await r.invoke({})
    assert missing.value.node_path == ["sub", "up"]
    assert isinstance(missing.value, LookupError)


async def test_custom_extractor_failure_is_a_field_mapping_error() -> None:
    wf = Workflow[list[int], dict[str, Any]]()
    wf.end().add_input(START, to_field("first", extractor=lambda xs: xs[0]))
    r = wf.compile()
    assert await r.invoke([5]) == {"first": 5}
    with pytest.raises(FieldMappingError, match="custom extractor raised IndexError") as info:
        await r.invoke([])
    assert isinstance(info.value.__cause__, IndexError) and info.value.field_path == ["first"]


async def _concat(reader: Any) -> Any:
    from compose.stream import concat

    return await concat(await reader)
