"""Workflows with every node kind (chat template, chat model, ToolsNode, sub-graph, sub-chain, sub-workflow,
passthrough) and with interrupts and checkpoints, which behave as in graphs (eino-semantics 1.9, 1.13)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from compose import (
    END,
    START,
    Chain,
    ChatTemplate,
    FieldMapping,
    FunctionCall,
    Graph,
    GraphBranch,
    GraphInterrupt,
    Lambda,
    Message,
    ScriptedChatModel,
    ToolCall,
    ToolsNode,
    Workflow,
    assistant_message,
    from_field,
    map_fields,
    to_field,
    user_message,
)
from compose.checkpoint import InMemoryCheckPointStore
from compose.interrupt import get_resume_context, interrupt
from compose.stream import StreamReader, concat
from compose.tools import tool

pytestmark = pytest.mark.anyio


async def run(r: Any, x: Any, streaming: bool, **opts: Any) -> Any:
    return await concat(await r.stream(x, **opts)) if streaming else await r.invoke(x, **opts)


MODES = pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])


# ----------------------------------------------------------------------------------------------------------
# Node kinds


@MODES
async def test_chat_template_and_chat_model_nodes(streaming: bool) -> None:
    model = ScriptedChatModel([assistant_message("hello there")], chunk_size=3)
    wf = Workflow[dict[str, Any], dict[str, Any]]()
    template = ChatTemplate.from_messages("f-string", user_message("say {word}"))
    wf.add_chat_template_node("prompt", template).add_input(START, map_fields("w", "word"))
    wf.add_chat_model_node("model", model).add_input("prompt")
    wf.end().add_input("model", map_fields("content", "answer")).add_input(START, map_fields("w", "word"))
    r = wf.compile()
    assert await run(r, {"w": "hi"}, streaming) == {"answer": "hello there", "word": "hi"}
    assert model.calls[0].messages == [user_message("say hi")]


async def test_chat_model_chunks_are_mapped_one_by_one() -> None:
    model = ScriptedChatModel([assistant_message("abcdef")], chunk_size=2, usage=False)
    wf = Workflow[list[Message], dict[str, Any]]()
    wf.add_chat_model_node("model", model).add_input(START)
    wf.end().add_input("model", map_fields("content", "text"))
    reader = await wf.compile().stream([user_message("go")])
    async with reader:
        got = [c async for c in reader]
    assert got[:3] == [{"text": "ab"}, {"text": "cd"}, {"text": "ef"}]
    assert all(set(c) == {"text"} for c in got)


@tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@MODES
async def test_tools_node(streaming: bool) -> None:
    call = ToolCall(id="c1", function=FunctionCall(name="shout", arguments=json.dumps({"text": "hey"})))
    model = ScriptedChatModel([assistant_message("", tool_calls=[call])])
    wf = Workflow[list[Message], dict[str, Any]]()
    wf.add_chat_model_node("model", model).add_input(START)
    wf.add_tools_node("tools", ToolsNode([shout])).add_input("model")

    def contents(msgs: list[Message]) -> list[str]:
        return [m.content for m in msgs]

    wf.add_lambda_node("contents", contents).add_input("tools")
    # an extractor sees each chunk of a stream: here the tool name, which only the first fragment carries
    wf.end().add_input("contents", to_field("results")).add_input(
        "model", to_field("tool", extractor=lambda m: m.tool_calls[0].function.name if m.tool_calls else "")
    )
    out = await run(wf.compile(), [user_message("go")], streaming)
    assert out == {"results": ["HEY"], "tool": "shout"}


@dataclass
class Doc:
    title: str = ""
    words: int = 0


@MODES
async def test_sub_graph_sub_chain_and_sub_workflow(streaming: bool) -> None:
    sub_graph = Graph[str, str]()
    sub_graph.add_lambda_node("up", str.upper)
    sub_graph.add_edge(START, "up")
    sub_graph.add_edge("up", END)

    sub_chain = Chain[str, int]().append_lambda(lambda s: len(s.split()))

    inner = Workflow[Doc, dict[str, Any]]()
    inner.end().add_input(START, map_fields("title", "t"), map_fields("words", "n"))

    wf = Workflow[dict[str, Any], dict[str, Any]]()
    wf.add_graph_node("graph", sub_graph).add_input(START, from_field("title"))
    wf.add_graph_node("chain", sub_chain).add_input(START, from_field("body"))
    wf.add_graph_node("workflow", inner.compile()).add_input("graph", to_field("title")).add_input(
        "chain", to_field("words")
    )
    wf.end().add_input("workflow", to_field("doc"))
    r = wf.compile()
    out = await run(r, {"title": "news", "body": "one two three"}, streaming)
    assert out == {"doc": {"t": "NEWS", "n": 3}}

    # a compiled workflow is a sub-graph of a Graph as well
    outer = Graph[dict[str, Any], dict[str, Any]]()
    outer.add_graph_node("wf", r)
    outer.add_edge(START, "wf")
    outer.add_edge("wf", END)
    assert await run(outer.compile(), {"title": "a", "body": "b"}, streaming) == {"doc": {"t": "A", "n": 1}}


@MODES
async def test_passthrough_node_carries_its_built_input(streaming: bool) -> None:
    wf = Workflow[dict[str, Any], dict[str, Any]]()
    wf.add_passthrough_node("pass").add_input(START, map_fields("a", "x")).set_static_value("k", "v")
    wf.add_lambda_node("up", str.upper).add_input("pass", from_field("x"), direct_dependency=False)
    wf.add_branch("pass", GraphBranch(lambda d: "up" if d["x"] == "go" else END, {"up", END}))
    wf.end().add_input("up", to_field("up")).add_input("pass", to_field("seen"), direct_dependency=False)
    r = wf.compile()
    assert await run(r, {"a": "go"}, streaming) == {"up": "GO", "seen": {"x": "go", "k": "v"}}
    assert await run(r, {"a": "no"}, streaming) == {"seen": {"x": "no", "k": "v"}}


# ----------------------------------------------------------------------------------------------------------
# Interrupts and checkpoints


def pipeline() -> Workflow[dict[str, Any], dict[str, Any]]:
    wf = Workflow[dict[str, Any], dict[str, Any]]()
    wf.add_lambda_node("a", lambda s: s + "a").add_input(START, from_field("x"))
    wf.add_lambda_node("b", lambda s: s + "b").add_input("a")
    wf.end().add_input("b", to_field("b")).add_input("a", to_field("a")).add_input(START, map_fields("x", "x"))
    return wf


@MODES
@pytest.mark.parametrize("where", ["before", "after"])
async def test_interrupt_before_or_after_a_workflow_node(streaming: bool, where: str) -> None:
    store = InMemoryCheckPointStore()
    option = {"interrupt_before": ["b"]} if where == "before" else {"interrupt_after": ["a"]}
    r = pipeline().compile(name="wf", checkpoint_store=store, **option)  # type: ignore[arg-type]
    with pytest.raises(GraphInterrupt) as info:
        await run(r, {"x": ">"}, streaming, checkpoint_id="k")
    ii = info.value.info
    assert (ii.before_nodes, ii.after_nodes) == ((["b"], []) if where == "before" else ([], ["a"]))
    # resumed from the checkpoint (the input is ignored) in the same paradigm
    assert await run(r, {"x": "ignored"}, streaming, checkpoint_id="k") == {"b": ">ab", "a": ">a", "x": ">"}


@MODES
async def test_node_interrupt_and_resume_with_data(streaming: bool) -> None:
    seen: list[Any] = []

    async def review(d: dict[str, Any]) -> str:
        ctx = get_resume_context()
        seen.append((d, ctx.is_target))
        if not ctx.is_target:
            raise interrupt({"draft": d.get("draft")})
        return f"{d.get('draft')}:{ctx.data}"

    wf = Workflow[dict[str, Any], dict[str, Any]]()
    wf.add_lambda_node("draft", lambda s: s + "!").add_input(START, from_field("x"))
    wf.add_lambda_node("review", review).add_input("draft", to_field("draft")).set_static_value("policy", "p")
    wf.end().add_input("review", to_field("verdict"))
    store = InMemoryCheckPointStore()
    r = wf.compile(name="wf", checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await run(r, {"x": "hi"}, streaming, checkpoint_id="k")
    (ctx,) = info.value.info.interrupt_contexts
    assert ctx.address == "runnable:wf;node:review" and ctx.info == {"draft": "hi!"}
    out = await run(r, {}, streaming, checkpoint_id="k", resume={ctx.id: "ok"})
    # as in a graph, the re-run node gets the zero value of its input (the run does not keep it)
    assert out == {"verdict": "None:ok"}
    assert seen == [({"draft": "hi!", "policy": "p"}, False), ({}, True)]


@MODES
async def test_data_only_mapping_across_branch_with_interrupt_before(streaming: bool) -> None:
    # TestIndirectDependencyWithBranch "with interrupt after branch"
    def first(xs: list[int]) -> int:
        if not xs:
            raise ValueError("input list is empty")
        return xs[0]

    wf = Workflow[list[int], dict[str, Any]]()
    wf.add_lambda_node("1", lambda x: x + 1).add_input(START, FieldMapping(extractor=first), direct_dependency=False)
    wf.add_branch(START, GraphBranch(lambda xs: "1" if xs else END, {"1", END}))
    wf.end().add_input("1", to_field("output")).set_static_value(["static"], 2)
    r = wf.compile(checkpoint_store=InMemoryCheckPointStore(), interrupt_before=["1"])
    assert await run(r, [], streaming) == {"static": 2}
    with pytest.raises(GraphInterrupt):
        await run(r, [1], streaming, checkpoint_id="123")
    assert await run(r, [], streaming, checkpoint_id="123") == {"output": 2, "static": 2}


async def test_interrupt_inside_a_sub_workflow() -> None:
    async def ask(s: str) -> str:
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt("which?")
        return f"{s}={ctx.data}"

    inner = Workflow[dict[str, Any], str]()
    inner.add_lambda_node("ask", ask).add_input(START, from_field("q"))
    inner.end().add_input("ask")
    wf = Workflow[str, dict[str, Any]]()
    wf.add_graph_node("sub", inner.compile()).add_input(START, to_field("q"))
    wf.end().add_input("sub", to_field("answer"))
    r = wf.compile(name="root", checkpoint_store=InMemoryCheckPointStore())
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke("q1", checkpoint_id="k")
    (ctx,) = info.value.info.interrupt_contexts
    assert ctx.address == "runnable:root;node:sub;node:ask"
    assert await r.invoke("", checkpoint_id="k", resume={ctx.id: "A"}) == {"answer": "=A"}


async def test_stream_lambda_feeds_a_transform_node_field_by_field() -> None:
    async def letters(s: str) -> AsyncIterator[str]:
        for c in s:
            yield c

    async def tag(chunks: StreamReader[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async for c in chunks:
            yield {k: f"<{v}>" for k, v in c.items()}

    wf = Workflow[str, dict[str, Any]]()
    wf.add_lambda_node("letters", Lambda(stream=letters)).add_input(START)
    wf.add_lambda_node("tag", Lambda(transform=tag)).add_input("letters", to_field("l")).add_input(
        START, to_field("whole")
    )
    wf.end().add_input("tag")
    r = wf.compile()
    out = await concat(await r.stream("ab"))
    assert out == {"l": "<a><b>", "whole": "<ab>"}
    assert await r.invoke("ab") == {"l": "<ab>", "whole": "<ab>"}


# ----------------------------------------------------------------------------------------------------------
# Eino's TestWorkflow: sub-graph, sub-chain and sub-workflow (input and output keys) feeding a transform node with
# stream state handlers and an invoke node with a state pre-handler, in invoke and stream mode


@dataclass
class StructA:
    Field1: str = ""
    Field2: int = 0
    Field3: list[Any] = field(default_factory=list)


@dataclass
class StructB:
    Field1: str = ""
    Field2: int = 0


@dataclass
class StructC:
    Field1: str = ""


@dataclass
class StructE:
    Field1: str = ""
    Field2: str = ""
    Field3: list[Any] = field(default_factory=list)


@dataclass
class StructF:
    Field1: str = ""
    Field2: str = ""
    Field3: list[Any] = field(default_factory=list)
    B: int = 0
    StateTemp: str = ""


@dataclass
class StructEnd:
    Field1: str = ""


@dataclass
class Struct2:
    F: dict[str, Any] = field(default_factory=dict)


@dataclass
class Temp:
    temp: str = ""


def eino_workflow() -> Workflow[StructA, StructEnd]:
    sub_graph = Graph[str, StructB]()
    sub_graph.add_lambda_node("1", lambda s: StructB(s, 33))
    sub_graph.add_edge(START, "1")
    sub_graph.add_edge("1", END)

    def to_c(x: Any) -> StructC:
        return StructC(str(x))

    sub_chain = Chain[Any, StructC]().append_lambda(to_c)

    def same(x: list[Any]) -> list[Any]:
        return x

    def unwrap(s: Struct2) -> dict[str, Any]:
        return s.F

    sub_wf = Workflow[list[Any], list[Any]]()
    sub_wf.add_lambda_node("1", same, output_key="key").add_input(START)
    sub_wf.add_lambda_node("2", same, input_key="key", output_key="key1").add_input("1")
    sub_wf.add_lambda_node("3", unwrap).add_input("2", to_field("F"))
    sub_wf.add_lambda_node("4", same, input_key="key1").add_input("3")
    sub_wf.end().add_input("4")

    def keep_temp(out: StructB, st: Temp) -> StructB:
        st.temp = out.Field1
        return out

    async def e(chunks: StreamReader[StructE]) -> AsyncIterator[StructE]:
        async for c in chunks:
            yield StructE(f"E:{c.Field1}" if c.Field1 else "", f"E:{c.Field2}" if c.Field2 else "", c.Field3)

    def e_pre(chunks: StreamReader[StructE], st: Temp) -> StreamReader[StructE]:
        temp = st.temp
        return chunks.map(lambda v: StructE(v.Field1, v.Field2, [*v.Field3, f"Pre:{temp}"] if v.Field3 else []))

    def e_post(chunks: StreamReader[StructE], st: Temp) -> StreamReader[StructE]:
        return chunks.map(lambda v: StructE(f"{v.Field1}+Post" if v.Field1 else "", v.Field2, v.Field3))

    def f(x: StructF) -> str:
        return f"{x.Field1}_{x.Field2}_{x.Field3}_{x.B}_{x.StateTemp}"

    def f_pre(x: StructF, st: Temp) -> StructF:
        x.StateTemp = st.temp
        return x

    w = Workflow[StructA, StructEnd](state=Temp)
    w.add_graph_node("B", sub_graph, post_handler=keep_temp).add_input(START, from_field("Field1"))
    w.add_graph_node("C", sub_chain).add_input(START, from_field("Field2"))
    w.add_graph_node("D", sub_wf.compile()).add_input(START, from_field("Field3"))
    w.add_lambda_node(
        "E", Lambda(transform=e), stream_pre_handler=e_pre, stream_post_handler=e_post
    ).add_input("B", map_fields("Field1", "Field1")).add_input("C", map_fields("Field1", "Field2")).add_input(
        "D", to_field("Field3")
    )
    w.add_lambda_node("F", f, pre_handler=f_pre).add_input("B", map_fields("Field2", "B")).add_input(
        "E", map_fields("Field1", "Field1"), map_fields("Field2", "Field2"), map_fields("Field3", "Field3")
    )
    w.end().add_input("F", to_field("Field1"))
    return w


async def test_eino_workflow() -> None:
    r = eino_workflow().compile()
    x = StructA("1", 2, [1, "good"])
    want = StructEnd("E:1+Post_E:2_[1, 'good', 'Pre:1']_33_1")
    assert await r.invoke(x) == want
    reader = await r.stream(x)
    async with reader:
        assert [c async for c in reader] == [want]
