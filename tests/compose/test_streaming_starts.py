"""A stream producer's body up to its first chunk runs inside the call that starts it (issue 12, point 1).

In Eino a streamable tool, a stream lambda or a streaming chat model runs its body and *returns* a reader, so
what it does before returning (fail, interrupt, record something) happens inside the call. The Python
equivalent of "returning the reader" is the first ``yield`` of an async generator: pyeino drives a generator to
its first chunk (or its end, or its exception) inside the call, and stays lazy after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import GraphInterrupt, NodeRunError, ToolExecutionError
from compose.graph import END, START, Graph
from compose.interrupt import get_resume_context, interrupt
from compose.schema import FunctionCall, Message, ToolCall, assistant_message
from compose.stream import concat
from compose.tools import tool
from compose.tools.middleware import get_tool_call_id
from compose.tools.node import ToolsNode
from tests.compose.helpers import line

pytestmark = pytest.mark.anyio


def call(name: str, args: str, cid: str) -> ToolCall:
    return ToolCall(id=cid, function=FunctionCall(name=name, arguments=args))


def tools_graph(node: ToolsNode) -> Any:
    g = Graph[Message, list[Message]]()
    g.add_tools_node("tools", node)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile(name="G", checkpoint_store=InMemoryCheckPointStore())


async def test_a_streaming_tool_runs_to_its_first_chunk_when_started(anyio_backend: Any) -> None:
    log: list[str] = []

    @tool
    async def counter(n: int) -> AsyncIterator[str]:
        log.append(f"start {get_tool_call_id()}")
        for i in range(n):
            log.append(f"yield {i}")
            yield str(i)

    reader = await counter.stream('{"n": 3}')
    try:
        assert log == ["start None", "yield 0"]  # driven to the first chunk, and no further
        assert await reader.recv() == "0"  # the first chunk is not lost
        assert log == ["start None", "yield 0"]
        assert [c async for c in reader] == ["1", "2"]
    finally:
        await reader.aclose()

    empty = await counter.stream('{"n": 0}')
    assert [c async for c in empty] == []


async def test_tool_streams_started_by_the_tools_node_in_every_mode(anyio_backend: Any) -> None:
    seen: list[str | None] = []

    @tool
    async def echo(text: str) -> AsyncIterator[str]:
        seen.append(get_tool_call_id())  # before the first chunk: inside the call, with its id
        yield text
        yield "!"

    msg = assistant_message("", [call("echo", '{"text": "a"}', "c1"), call("echo", '{"text": "b"}', "c2")])
    node = ToolsNode([echo])
    reader = await node.stream(msg)
    assert sorted(c for c in seen if c) == ["c1", "c2"]  # both started before stream() returned
    messages = await concat(reader)
    assert [m.content for m in messages] == ["a!", "b!"]


async def test_an_exception_before_the_first_chunk_fails_the_call(anyio_backend: Any) -> None:
    @tool
    async def broken(x: int) -> AsyncIterator[str]:
        if x:
            raise ValueError("cannot start")
        yield "never"

    @tool
    async def late(x: int) -> AsyncIterator[str]:
        yield "first"
        raise ValueError("after the first chunk")

    msg = assistant_message("", [call("broken", '{"x": 1}', "c7")])
    r = tools_graph(ToolsNode([broken, late]))
    for run in (r.invoke, r.stream):
        with pytest.raises(NodeRunError) as info:
            out = await run(msg)
            await concat(out)
        cause = info.value.__cause__
        assert isinstance(cause, ToolExecutionError)
        assert cause.tool_name == "broken" and cause.call_id == "c7"
    # an error after the first chunk stays an error item of the stream, naming the call
    node = ToolsNode([late])
    reader = await node.stream(assistant_message("", [call("late", '{"x": 0}', "c8")]))
    async with reader:
        first = await reader.recv()
        assert first[0] is not None and first[0].content == "first"
        with pytest.raises(ToolExecutionError, match=r"tool call c8 .*after the first chunk") as item:
            await reader.recv()
        assert isinstance(item.value.__cause__, ValueError)


async def test_parallel_invokable_and_streaming_interrupts_in_a_streaming_run(anyio_backend: Any) -> None:
    runs: list[str] = []

    @tool
    async def approve(action: str) -> str:
        ctx = get_resume_context()
        runs.append(f"approve:{ctx.is_target}")
        if not ctx.is_target:
            raise interrupt({"approve": action})
        return f"{action}: {ctx.data}"

    @tool
    async def report(topic: str) -> AsyncIterator[str]:
        ctx = get_resume_context()
        runs.append(f"report:{ctx.is_target}")
        if not ctx.is_target:
            raise interrupt({"report": topic})
        yield f"{topic} "
        yield str(ctx.data)

    @tool
    async def lookup(q: str) -> AsyncIterator[str]:
        runs.append("lookup")
        yield f"found {q}"

    msg = assistant_message(
        "",
        [
            call("lookup", '{"q": "x"}', "c1"),
            call("approve", '{"action": "pay"}', "c2"),
            call("report", '{"topic": "sales"}', "c3"),
        ],
    )
    r = tools_graph(ToolsNode([lookup, approve, report]))
    for paradigm in ("invoke", "stream"):
        runs.clear()
        run = r.invoke if paradigm == "invoke" else r.stream
        with pytest.raises(GraphInterrupt) as info:
            out = await run(msg, checkpoint_id=paradigm)
            await concat(out)
        ctxs = {c.address: c for c in info.value.info.interrupt_contexts}
        assert sorted(ctxs) == ["runnable:G;node:tools;tool:approve:c2", "runnable:G;node:tools;tool:report:c3"]
        assert all(c.is_root_cause for c in ctxs.values())
        resume = {
            ctxs["runnable:G;node:tools;tool:approve:c2"].id: "ok",
            ctxs["runnable:G;node:tools;tool:report:c3"].id: 42,
        }
        out = await run(None, checkpoint_id=paradigm, resume=resume)
        messages = out if paradigm == "invoke" else await concat(out)
        assert [m.content for m in messages] == ["found x", "pay: ok", "sales 42"]
        assert runs.count("lookup") == 1  # the finished streaming call is not run again


async def test_a_stream_lambda_interrupt_before_its_first_chunk_pauses_the_node(anyio_backend: Any) -> None:
    started: list[str] = []

    async def gen(x: str) -> AsyncIterator[str]:
        started.append(x)
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt("wait")
        yield x
        yield str(ctx.data)

    g = line(("gen", gen))
    r = g.compile(name="L", checkpoint_store=InMemoryCheckPointStore())
    reader_or_interrupt: Any = None
    with pytest.raises(GraphInterrupt) as info:
        reader_or_interrupt = await r.stream("in", checkpoint_id="k")  # the pause surfaces from stream() itself
    assert reader_or_interrupt is None
    (ctx,) = info.value.info.interrupt_contexts
    assert ctx.address == "runnable:L;node:gen"
    out = await r.stream("", checkpoint_id="k", resume={ctx.id: 7})
    assert await concat(out) == "7"


async def test_a_stream_lambda_failure_before_its_first_chunk_fails_the_node(anyio_backend: Any) -> None:
    async def gen(x: str) -> AsyncIterator[str]:
        if x == "bad":
            raise LookupError("no such thing")
        yield x

    g = line(("gen", gen))
    r = g.compile()
    with pytest.raises(NodeRunError) as info:
        await r.stream("bad")  # raised by stream(), not by the first recv()
    assert info.value.node_path == ["gen"]
    assert isinstance(info.value.__cause__, LookupError)
