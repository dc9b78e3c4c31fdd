"""ToolsNode: Eino's semantics (order, unknown tools, handlers, middlewares, errors, concurrency, streams)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from compose.errors import (
    GraphInterrupt,
    NodeRunError,
    StreamEnd,
    ToolArgumentsError,
    ToolArgumentsHandlerError,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from compose.graph import END, START, Graph
from compose.interrupt import InterruptSignal
from compose.models import ScriptedChatModel
from compose.schema import (
    FunctionCall,
    Message,
    ToolCall,
    ToolInfo,
    assistant_message,
    concat_message_lists,
    tool_message,
    user_message,
)
from compose.stream import StreamReader, StreamWriter, concat, pipe
from compose.tools import tool
from compose.tools.middleware import (
    InvokableToolEndpoint,
    StreamableToolEndpoint,
    StreamToolOutput,
    ToolInput,
    ToolMiddleware,
    ToolOutput,
    get_tool_call_id,
    tool_errors_as_results,
)
from compose.tools.node import ToolsNode

pytestmark = pytest.mark.anyio


def call(name: str, arguments: Any = None, call_id: str | None = None) -> ToolCall:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=call_id or f"id-{name}", function=FunctionCall(name=name, arguments=args))


def ask(*calls: ToolCall) -> Message:
    return assistant_message("", tool_calls=list(calls))


@asynccontextmanager
async def no_new_tasks() -> AsyncIterator[None]:
    """Fail if the block leaves a task running (checked from the test's own task)."""
    before = {t.id for t in anyio.get_running_tasks()}
    yield
    await anyio.wait_all_tasks_blocked()
    left = [t.name for t in anyio.get_running_tasks() if t.id not in before]
    assert not left, f"tasks left running: {left}"


async def read_all(reader: StreamReader[list[Message | None]]) -> list[list[Message | None]]:
    async with reader:
        return [chunk async for chunk in reader]


@tool
async def upper(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@tool
async def spell(word: str) -> AsyncIterator[str]:
    """Spell a word, one letter per chunk."""
    for letter in word:
        yield letter


# ----------------------------------------------------------------------------------------------------------
# Input, output, order


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (user_message("hi"), "expected message role is assistant, got user"),
        (assistant_message("no calls"), "no tool call found in input message"),
        ("not a message", "ToolsNode expects an assistant Message, got str"),
    ],
)
async def test_input_must_be_an_assistant_message_with_tool_calls(message: Any, error: str) -> None:
    node = ToolsNode([upper])
    with pytest.raises(ToolInputError, match=error):
        await node.invoke(message)
    with pytest.raises(ToolInputError, match=error):
        await node.stream(message)


async def test_invoke_returns_tool_messages_in_call_order() -> None:
    node = ToolsNode([upper, spell])
    out = await node.invoke(
        ask(
            call("spell", {"word": "ab"}, "c1"),
            call("upper", {"text": "x"}, "c2"),
            call("spell", {"word": "z"}, "c3"),
        )
    )
    assert out == [
        tool_message("ab", "c1", tool_name="spell"),
        tool_message("X", "c2", tool_name="upper"),
        tool_message("z", "c3", tool_name="spell"),
    ]


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_order_is_call_order_when_tools_finish_in_reverse(paradigm: str) -> None:
    gates = {key: anyio.Event() for key in "abcd"}
    finished: list[str] = []

    @tool
    async def inv(key: str) -> str:
        await gates[key].wait()
        finished.append(key)
        return f"inv-{key}"

    @tool
    async def streamer(key: str) -> AsyncIterator[str]:
        await gates[key].wait()
        finished.append(key)
        yield "str-"
        yield key

    node = ToolsNode([inv, streamer])
    message = ask(
        call("streamer", {"key": "a"}, "c0"),
        call("inv", {"key": "b"}, "c1"),
        call("streamer", {"key": "c"}, "c2"),
        call("inv", {"key": "d"}, "c3"),
    )
    result: list[Message | None] = []

    async def run() -> None:
        if paradigm == "invoke":
            result.extend(await node.invoke(message))
        else:
            result.extend(concat_message_lists(await read_all(await node.stream(message))))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        for key in "dcba":
            await anyio.wait_all_tasks_blocked()
            gates[key].set()
    # in both paradigms every call runs while the node starts the calls (streaming tools up to their first chunk)
    assert finished == ["d", "c", "b", "a"]
    assert result == [
        tool_message("str-a", "c0", tool_name="streamer"),
        tool_message("inv-b", "c1", tool_name="inv"),
        tool_message("str-c", "c2", tool_name="streamer"),
        tool_message("inv-d", "c3", tool_name="inv"),
    ]


async def test_stream_fills_one_slot_per_chunk_and_concat_rebuilds_the_messages() -> None:
    node = ToolsNode([upper, spell])
    message = ask(call("spell", {"word": "abc"}, "c0"), call("upper", {"text": "hi"}, "c1"))
    chunks = await read_all(await node.stream(message))
    assert len(chunks) == 4
    for chunk in chunks:
        assert len(chunk) == 2
        assert sum(m is not None for m in chunk) == 1
    spelled = [c[0].content for c in chunks if c[0] is not None]
    assert spelled == ["a", "b", "c"]
    assert [c[1].content for c in chunks if c[1] is not None] == ["HI"]
    assert concat_message_lists(chunks) == [
        tool_message("abc", "c0", tool_name="spell"),
        tool_message("HI", "c1", tool_name="upper"),
    ]


async def test_stream_chunks_interleave_in_arrival_order() -> None:
    gates = [anyio.Event(), anyio.Event()]

    @tool
    async def slow(i: int) -> AsyncIterator[str]:
        yield f"start-{i}"  # the node starts each call up to its first chunk
        await gates[i].wait()
        yield f"chunk-{i}"

    node = ToolsNode([slow])
    reader = await node.stream(ask(call("slow", {"i": 0}, "c0"), call("slow", {"i": 1}, "c1")))
    starts = [await reader.recv(), await reader.recv()]
    assert sorted(m.content for chunk in starts for m in chunk if m is not None) == ["start-0", "start-1"]
    first: list[list[Message | None]] = []

    async def read_first() -> None:
        first.append(await reader.recv())

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_first)
        await anyio.wait_all_tasks_blocked()
        gates[1].set()
        await anyio.wait_all_tasks_blocked()
        gates[0].set()
    assert first == [[None, tool_message("chunk-1", "c1", tool_name="slow")]]
    assert await reader.recv() == [tool_message("chunk-0", "c0", tool_name="slow"), None]
    with pytest.raises(StreamEnd):
        await reader.recv()


async def test_tool_infos_in_order() -> None:
    node = ToolsNode([spell, upper])
    assert [i.name for i in node.tool_infos()] == ["spell", "upper"]
    assert node.tool_infos()[0] == spell.info()
    assert node.tools == (spell, upper)
    assert repr(node) == "ToolsNode(tools=['spell', 'upper'], parallel, middlewares=0)"
    assert repr(ToolsNode([upper], execute_sequentially=True, max_concurrency=2)) == (
        "ToolsNode(tools=['upper'], sequential, max_concurrency=2, middlewares=0)"
    )


def test_construction_errors() -> None:
    class NotATool:
        def info(self) -> ToolInfo:
            return ToolInfo(name="nope")

    with pytest.raises(TypeError, match="tool nope is not invokable or streamable"):
        ToolsNode([NotATool()])
    with pytest.raises(ValueError, match="two tools are named 'upper'"):
        ToolsNode([upper, tool(lambda: "", name="upper")])
    with pytest.raises(ValueError, match="max_concurrency must be at least 1, got 0"):
        ToolsNode([upper], max_concurrency=0)
    with pytest.raises(TypeError, match=r"tools\[1\] is not a tool: function .*@tool"):
        ToolsNode([upper, lambda: ""])  # a bare function, not wrapped with @tool


class NamedTool:
    """A class-based tool whose name is whatever it is given."""

    def __init__(self, name: str) -> None:
        self.name = name

    def info(self) -> ToolInfo:
        return ToolInfo(name=self.name, description="a class-based tool")

    async def run(self, arguments: str) -> str:
        return self.name


@pytest.mark.parametrize("name", ["web search", "", "a" * 65, "ünïcode", "dot.ted", "slash/ed"])
def test_class_based_tools_with_names_providers_reject_are_refused(name: str) -> None:
    with pytest.raises(ValueError) as info:
        ToolsNode([upper, NamedTool(name)])
    assert str(info.value) == (
        f"tools[1] (NamedTool) is named {name!r}, which chat model providers reject (a tool name is letters, "
        "digits, '_' and '-', at most 64): change the name its info() returns"
    )


def test_class_based_tools_with_valid_names_are_accepted() -> None:
    names = ["get_weather", "kv-get", "A1", "x" * 64]
    node = ToolsNode([NamedTool(n) for n in names])
    assert [i.name for i in node.tool_infos()] == names


async def test_unknown_options_are_ignored() -> None:
    node = ToolsNode([upper])
    out = await node.invoke(ask(call("upper", {"text": "a"}, "c")), some_option=1)
    assert out == [tool_message("A", "c", tool_name="upper")]


# ----------------------------------------------------------------------------------------------------------
# Unknown tools and the arguments handler


async def test_unknown_tool_fails_the_node_before_any_tool_runs() -> None:
    ran: list[str] = []

    @tool
    async def known() -> str:
        ran.append("known")
        return ""

    node = ToolsNode([known])
    message = ask(call("known"), call("ghost"))
    with pytest.raises(ToolNotFoundError, match="tool ghost not found in toolsNode indexes") as info:
        await node.invoke(message)
    assert info.value.tool_name == "ghost"
    with pytest.raises(ToolNotFoundError):
        await node.stream(message)
    assert ran == []


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_unknown_tools_handler_answers(paradigm: str) -> None:
    seen: list[tuple[str, str, str | None]] = []

    async def handler(name: str, arguments: str) -> str:
        seen.append((name, arguments, get_tool_call_id()))
        return f"no tool named {name}"

    node = ToolsNode([upper], unknown_tools_handler=handler)
    message = ask(call("ghost", '{"a": 1}', "c0"), call("upper", {"text": "b"}, "c1"))
    if paradigm == "invoke":
        out = await node.invoke(message)
    else:
        out = concat_message_lists(await read_all(await node.stream(message)))  # type: ignore[assignment]
    assert out == [
        tool_message("no tool named ghost", "c0", tool_name="ghost"),
        tool_message("B", "c1", tool_name="upper"),
    ]
    assert seen == [("ghost", '{"a": 1}', "c0")]


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_arguments_handler_runs_first_in_call_order_and_rewrites(paradigm: str) -> None:
    log: list[str] = []

    async def fix_arguments(name: str, arguments: str) -> str:
        log.append(f"handler {name} {arguments} {get_tool_call_id()}")
        return arguments.replace("wrong", "right")

    @tool
    async def echo(text: str) -> str:
        log.append(f"tool {text}")
        return text

    def record(next_: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            log.append(f"middleware {inp.arguments}")
            return await next_(inp)

        return endpoint

    node = ToolsNode(
        [echo],
        tool_arguments_handler=fix_arguments,
        middlewares=[ToolMiddleware(invokable=record)],
        execute_sequentially=True,
    )
    message = ask(call("echo", {"text": "wrong1"}, "c1"), call("echo", {"text": "wrong2"}, "c2"))
    if paradigm == "invoke":
        out = await node.invoke(message)
    else:
        out = concat_message_lists(await read_all(await node.stream(message)))  # type: ignore[assignment]
    assert [m.content for m in out if m] == ["right1", "right2"]
    assert log == [
        'handler echo {"text": "wrong1"} c1',
        'handler echo {"text": "wrong2"} c2',
        'middleware {"text": "right1"}',
        "tool right1",
        'middleware {"text": "right2"}',
        "tool right2",
    ]


async def test_arguments_handler_failure_fails_the_node_before_any_tool_runs() -> None:
    ran: list[str] = []

    @tool
    async def echo(text: str) -> str:
        ran.append(text)
        return text

    async def handler(name: str, arguments: str) -> str:
        if "bad" in arguments:
            raise ValueError("cannot repair")
        return arguments

    node = ToolsNode([echo], tool_arguments_handler=handler)
    message = ask(call("echo", {"text": "ok"}, "c1"), call("echo", {"text": "bad"}, "c2"))
    with pytest.raises(ToolArgumentsHandlerError) as info:
        await node.invoke(message)
    assert str(info.value) == (
        'failed to execute tool[name:echo arguments:{"text": "bad"}] arguments handler: '
        "ValueError: cannot repair"
    )
    assert (info.value.tool_name, info.value.call_id) == ("echo", "c2")
    assert isinstance(info.value, ToolExecutionError)
    assert isinstance(info.value.__cause__, ValueError)
    assert ran == []


# ----------------------------------------------------------------------------------------------------------
# Middlewares


def tracing(tag: str, log: list[str]) -> ToolMiddleware:
    def invokable(next_: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            log.append(f"{tag} invokable in {inp.name}")
            out = await next_(inp)
            log.append(f"{tag} invokable out {out.result}")
            return out

        return endpoint

    def streamable(next_: StreamableToolEndpoint) -> StreamableToolEndpoint:
        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            log.append(f"{tag} streamable in {inp.name}")
            out = await next_(inp)
            log.append(f"{tag} streamable out")
            return out

        return endpoint

    return ToolMiddleware(invokable=invokable, streamable=streamable)


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_first_middleware_is_outermost(paradigm: str) -> None:
    log: list[str] = []
    node = ToolsNode([upper], middlewares=[tracing("outer", log), tracing("inner", log)])
    message = ask(call("upper", {"text": "a"}))
    if paradigm == "invoke":
        await node.invoke(message)
    else:
        await read_all(await node.stream(message))
    assert log == [
        "outer invokable in upper",
        "inner invokable in upper",
        "inner invokable out A",
        "outer invokable out A",
    ]


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_stream_only_tool_goes_through_the_streamable_middlewares(paradigm: str) -> None:
    log: list[str] = []
    node = ToolsNode([spell], middlewares=[tracing("outer", log), tracing("inner", log)])
    message = ask(call("spell", {"word": "ok"}, "c"))
    if paradigm == "invoke":
        out = await node.invoke(message)
    else:
        out = concat_message_lists(await read_all(await node.stream(message)))  # type: ignore[assignment]
    assert out == [tool_message("ok", "c", tool_name="spell")]
    assert log == [
        "outer streamable in spell",
        "inner streamable in spell",
        "inner streamable out",
        "outer streamable out",
    ]


async def test_a_tool_with_both_paradigms_uses_the_matching_one() -> None:
    log: list[str] = []

    class Both:
        def info(self) -> ToolInfo:
            return ToolInfo(name="both")

        async def run(self, arguments: str) -> str:
            log.append("run")
            return "ran"

        async def stream(self, arguments: str) -> StreamReader[str]:
            log.append("stream")
            return StreamReader.from_iterable(["stre", "amed"])

    node = ToolsNode([Both()], middlewares=[tracing("mw", log)])
    assert await node.invoke(ask(call("both", "", "c"))) == [tool_message("ran", "c", tool_name="both")]
    chunks = await read_all(await node.stream(ask(call("both", "", "c"))))
    assert concat_message_lists(chunks) == [tool_message("streamed", "c", tool_name="both")]
    assert log == [
        "mw invokable in both",
        "run",
        "mw invokable out ran",
        "mw streamable in both",
        "stream",
        "mw streamable out",
    ]


async def test_middlewares_rewrite_input_and_output() -> None:
    def rewrite(next_: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            inp.arguments = json.dumps({"text": json.loads(inp.arguments)["text"] + "!"})
            out = await next_(inp)
            return ToolOutput(f"<{out.result}>")

        return endpoint

    def rewrite_stream(next_: StreamableToolEndpoint) -> StreamableToolEndpoint:
        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            out = await next_(ToolInput(inp.name, json.dumps({"word": "xy"}), inp.call_id))
            return StreamToolOutput(out.result.map(str.upper))

        return endpoint

    node = ToolsNode(
        [upper, spell], middlewares=[ToolMiddleware(invokable=rewrite, streamable=rewrite_stream)]
    )
    out = await node.invoke(ask(call("upper", {"text": "a"}, "c1"), call("spell", {"word": "ignored"}, "c2")))
    assert [m.content for m in out] == ["<A!>", "XY"]


async def test_a_middleware_can_tee_a_stream_and_key_it_by_call_id() -> None:
    """What the agent kit will do: copy(2) a streaming result and key side data by get_tool_call_id()."""
    side: dict[str, list[str]] = {}
    tasks_done = anyio.Event()

    def tee(next_: StreamableToolEndpoint) -> StreamableToolEndpoint:
        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            call_id = get_tool_call_id()
            assert call_id == inp.call_id
            out = await next_(inp)
            mine, theirs = out.result.copy(2)
            side[call_id] = []

            async def mirror(reader: StreamReader[str]) -> AsyncIterator[str]:
                async with mine:
                    async for chunk in reader:
                        side[call_id].append(chunk)
                        yield chunk

            return StreamToolOutput(StreamReader.from_async_iterator(mirror(theirs)))

        return endpoint

    node = ToolsNode([spell], middlewares=[ToolMiddleware(streamable=tee)])
    chunks = await read_all(
        await node.stream(ask(call("spell", {"word": "ab"}, "x1"), call("spell", {"word": "c"}, "x2")))
    )
    tasks_done.set()
    assert [m.content if m else None for m in concat_message_lists(chunks)] == ["ab", "c"]
    assert side == {"x1": ["a", "b"], "x2": ["c"]}


# ----------------------------------------------------------------------------------------------------------
# Failures


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_first_failure_in_call_order_wins_and_every_call_runs(paradigm: str) -> None:
    second_failed = anyio.Event()
    finished: list[str] = []

    @tool
    async def work(key: str) -> str:
        if key == "b":
            await second_failed.wait()  # fail after "c" did
            finished.append(key)
            raise RuntimeError("b broke")
        if key == "c":
            finished.append(key)
            second_failed.set()
            raise KeyError("c broke")
        finished.append(key)
        return key

    node = ToolsNode([work])
    message = ask(
        call("work", {"key": "a"}, "c-a"),
        call("work", {"key": "b"}, "c-b"),
        call("work", {"key": "c"}, "c-c"),
    )
    async with no_new_tasks():
        with pytest.raises(ToolExecutionError) as info:
            if paradigm == "invoke":
                await node.invoke(message)
            else:
                await node.stream(message)
    err = info.value
    assert (err.tool_name, err.call_id) == ("work", "c-b")
    assert isinstance(err.__cause__, RuntimeError)
    if paradigm == "invoke":
        assert str(err) == "failed to invoke tool[name:work id:c-b]: RuntimeError: b broke"
    else:
        assert str(err) == "failed to stream tool call c-b (tool 'work'): RuntimeError: b broke"
    assert sorted(finished) == ["a", "b", "c"]


async def test_bad_arguments_are_a_tool_failure_naming_the_field() -> None:
    node = ToolsNode([upper])
    with pytest.raises(ToolExecutionError) as info:
        await node.invoke(ask(call("upper", {"txt": "a"}, "c9")))
    cause = info.value.__cause__
    assert isinstance(cause, ToolArgumentsError)
    assert (cause.tool_name, cause.field) == ("upper", "text")
    assert info.value.call_id == "c9"


async def test_stream_start_failure_closes_the_streams_already_started() -> None:
    closed: list[str] = []

    @tool
    async def endless() -> AsyncIterator[str]:
        try:
            while True:
                yield "x"
        finally:
            closed.append("endless")

    @tool
    async def broken() -> str:
        raise ValueError("nope")

    class PipeTool:
        def info(self) -> ToolInfo:
            return ToolInfo(name="piped")

        async def stream(self, arguments: str) -> StreamReader[str]:
            reader: StreamReader[str]
            writer: StreamWriter[str]
            reader, writer = pipe(1)
            await writer.send("p")
            await writer.aclose()
            return reader

    node = ToolsNode([endless, broken, PipeTool()])
    with pytest.raises(ToolExecutionError, match="nope"):
        await node.stream(ask(call("piped"), call("endless"), call("broken")))
    # the generator was started (up to its first chunk) and is closed with the node; the leak check proves
    # every reader was closed
    assert closed == ["endless"]


async def test_interrupts_are_not_failures() -> None:
    @tool
    async def pause() -> str:
        raise GraphInterrupt(info="need approval")

    @tool
    async def fail() -> str:
        raise ValueError("real failure")

    node = ToolsNode([pause, upper])
    with pytest.raises(InterruptSignal) as info:
        await node.invoke(ask(call("upper", {"text": "a"}), call("pause")))
    # one composite interrupt for the node: it keeps the finished call's result and names the paused one
    assert info.value.info == {"rerun_tools": ["id-pause"], "executed_tools": ["id-upper"]}
    (sub,) = info.value.subs
    assert sub.info == "need approval" and sub.segment == "tool:pause:id-pause"
    assert info.value.state["executed"] == {"id-upper": "A"}
    # a real failure wins over an interrupt, whatever the order
    node = ToolsNode([pause, fail])
    with pytest.raises(ToolExecutionError, match="real failure"):
        await node.invoke(ask(call("pause"), call("fail")))


async def test_error_inside_a_tool_stream_reaches_the_reader() -> None:
    @tool
    async def half() -> AsyncIterator[str]:
        yield "part"
        raise OSError("disk gone")

    node = ToolsNode([half])
    reader = await node.stream(ask(call("half", "", "c")))
    async with reader:
        assert await reader.recv() == [tool_message("part", "c", tool_name="half")]
        with pytest.raises(ToolExecutionError) as item:
            await reader.recv()
    # the item names the tool and the call (as a failure to start does), the tool's error is its cause
    assert str(item.value) == "failed to stream tool call c (tool 'half'): OSError: disk gone"
    assert (item.value.tool_name, item.value.call_id) == ("half", "c")
    assert isinstance(item.value.__cause__, OSError)
    with pytest.raises(ToolExecutionError) as info:
        await node.invoke(ask(call("half", "", "c")))
    assert isinstance(info.value.__cause__, OSError)


def error_chain(exc: BaseException | None) -> list[BaseException]:
    chain = []
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    return chain


@tool
async def broken_mid_stream() -> AsyncIterator[str]:
    """Fails after its first chunk."""
    yield "part "
    raise OSError("disk gone")


@tool
async def unserialisable() -> AsyncIterator[object]:
    """Yields a value JSON cannot hold after its first chunk."""
    yield "ok"
    yield object()


class RawStream:
    """A class-based streaming tool whose stream yields what it is given, strings or not."""

    def __init__(self, *chunks: object) -> None:
        self.chunks = chunks

    def info(self) -> ToolInfo:
        return ToolInfo(name="raw")

    async def stream(self, arguments: str) -> StreamReader[str]:
        return StreamReader.from_iterable(self.chunks)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("t", "cause", "expected"),
    [
        (broken_mid_stream, OSError, "OSError: disk gone"),
        (
            unserialisable,
            TypeError,
            "TypeError: a chunk of type object cannot be serialised to JSON (Unable to serialize unknown type: "
            "<class 'object'>): yield a str or a JSON-serialisable value",
        ),
        (RawStream("a", 7), TypeError, "TypeError: a tool stream chunk must be a str, got int: 7"),
    ],
    ids=["raises", "unserialisable", "not-a-str"],
)
async def test_a_stream_failing_after_its_first_chunk_names_tool_and_call_downstream(
    t: Any, cause: type[Exception], expected: str
) -> None:
    """Issue 13.8: the next node concatenating the tool messages fails with the tool named in the chain."""
    name = t.info().name
    g = Graph[Message, Message]()
    g.add_tools_node("tools", ToolsNode([upper, t]))
    g.add_chat_model_node("model", ScriptedChatModel(["done"]))
    g.add_edge(START, "tools")
    g.add_edge("tools", "model")
    g.add_edge("model", END)
    r = g.compile(name="G")
    message = ask(call("upper", {"text": "a"}, "u1"), call(name, "", "c1"))
    with pytest.raises(NodeRunError) as info:
        await concat(await r.stream(message))
    wrapped = [e for e in error_chain(info.value) if isinstance(e, ToolExecutionError)]
    assert len(wrapped) == 1
    assert (wrapped[0].tool_name, wrapped[0].call_id) == (name, "c1")
    assert str(wrapped[0]) == f"failed to stream tool call c1 (tool '{name}'): {expected}"
    assert type(wrapped[0].__cause__) is cause
    assert f"tool '{name}'" in str(info.value)
    # the same failure through invoke: the node fails, as it always did
    with pytest.raises(NodeRunError) as info:
        await r.invoke(message)
    assert isinstance(info.value.__cause__, ToolExecutionError)
    assert (info.value.__cause__.tool_name, info.value.__cause__.call_id) == (name, "c1")
    assert type(info.value.__cause__.__cause__) is cause


async def test_only_failures_in_a_tool_stream_are_wrapped() -> None:
    """Interrupt items and a later chunk after an error item pass as they are."""

    class Piped:
        def info(self) -> ToolInfo:
            return ToolInfo(name="piped")

        async def stream(self, arguments: str) -> StreamReader[str]:
            reader: StreamReader[str]
            writer: StreamWriter[str]
            reader, writer = pipe(8)
            await writer.send("a")
            await writer.send_error(ValueError("bad chunk"))
            await writer.send_error(GraphInterrupt(info="wait"))
            await writer.send("b")
            await writer.aclose()
            return reader

    reader = await ToolsNode([Piped()]).stream(ask(call("piped", "", "p")))
    async with reader:
        assert await reader.recv() == [tool_message("a", "p", tool_name="piped")]
        with pytest.raises(ToolExecutionError, match=r"tool call p \(tool 'piped'\): ValueError: bad chunk"):
            await reader.recv()
        with pytest.raises(GraphInterrupt) as paused:
            await reader.recv()
        assert type(paused.value) is GraphInterrupt
        assert await reader.recv() == [tool_message("b", "p", tool_name="piped")]
        with pytest.raises(StreamEnd):
            await reader.recv()
    assert "tool-slot(piped:p)" in repr(reader)


async def test_tool_errors_as_results_sees_the_raw_mid_stream_error_first() -> None:
    seen: list[BaseException] = []

    def formatter(inp: ToolInput, exc: Exception) -> str:
        seen.append(exc)
        return f"[{inp.name} failed: {type(exc).__name__}]"

    node = ToolsNode([broken_mid_stream, unserialisable], middlewares=[tool_errors_as_results(formatter)])
    message = ask(call("broken_mid_stream", "", "b"), call("unserialisable", "", "s"))
    out = concat_message_lists(await read_all(await node.stream(message)))
    assert [m and m.content for m in out] == [
        "part [broken_mid_stream failed: OSError]",
        "ok[unserialisable failed: TypeError]",
    ]
    assert sorted(type(e).__name__ for e in seen) == ["OSError", "TypeError"]


async def test_a_finished_call_saved_at_an_interrupt_is_read_with_the_node_rules() -> None:
    @tool
    async def pause() -> str:
        raise GraphInterrupt(info="approve?")

    @tool
    async def silent() -> AsyncIterator[str]:
        for chunk in "":
            yield chunk

    node = ToolsNode([pause, silent, broken_mid_stream])
    # an empty stream is "" (as invoke answers), not a failed concat
    with pytest.raises(InterruptSignal) as info:
        await node.stream(ask(call("silent", "", "e"), call("pause", "", "p")))
    assert info.value.state["executed"] == {"e": ""}
    # a stream that breaks while it is saved fails the node, naming the call
    with pytest.raises(ToolExecutionError) as failed:
        await node.stream(ask(call("broken_mid_stream", "", "b"), call("pause", "", "p")))
    assert str(failed.value) == "failed to stream tool call b (tool 'broken_mid_stream'): OSError: disk gone"


# ----------------------------------------------------------------------------------------------------------
# Concurrency


async def test_sequential_mode_runs_in_call_order() -> None:
    events: list[str] = []

    @tool
    async def step(key: str) -> str:
        events.append(f"start {key}")
        await anyio.lowlevel.checkpoint()
        events.append(f"end {key}")
        return key

    node = ToolsNode([step], execute_sequentially=True)
    out = await node.invoke(ask(*(call("step", {"key": k}, k) for k in "abc")))
    assert [m.content for m in out] == ["a", "b", "c"]
    assert events == ["start a", "end a", "start b", "end b", "start c", "end c"]


async def test_sequential_mode_runs_every_call_after_a_failure() -> None:
    ran: list[str] = []

    @tool
    async def step(key: str) -> str:
        ran.append(key)
        if key == "a":
            raise ValueError("first")
        return key

    node = ToolsNode([step], execute_sequentially=True)
    with pytest.raises(ToolExecutionError, match="first"):
        await node.invoke(ask(*(call("step", {"key": k}, k) for k in "abc")))
    assert ran == ["a", "b", "c"]


async def test_parallel_mode_runs_calls_at_the_same_time() -> None:
    started = 0
    all_started = anyio.Event()

    @tool
    async def meet() -> str:
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await all_started.wait()  # deadlocks (and times out) unless all three run together
        return "met"

    out = await ToolsNode([meet]).invoke(
        ask(call("meet", "", "a"), call("meet", "", "b"), call("meet", "", "c"))
    )
    assert [m.content for m in out] == ["met"] * 3


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_max_concurrency_is_honoured(paradigm: str) -> None:
    events: list[str] = []
    gates = {k: anyio.Event() for k in "abcde"}
    running: set[str] = set()

    @tool
    async def job(key: str) -> str:
        events.append(f"start {key}")
        running.add(key)
        await gates[key].wait()
        running.discard(key)
        events.append(f"end {key}")
        return key

    node = ToolsNode([job], max_concurrency=2)
    message = ask(*(call("job", {"key": k}, k) for k in "abcde"))
    out: list[Message | None] = []

    async def run() -> None:
        if paradigm == "invoke":
            out.extend(await node.invoke(message))
        else:
            out.extend(concat_message_lists(await read_all(await node.stream(message))))

    peak = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        for _ in range(5):
            await anyio.wait_all_tasks_blocked()
            assert len(running) <= 2, events
            peak = max(peak, len(running))
            gates[max(running)].set()  # release the latest started call first: out of call order
    assert [m.content for m in out if m] == list("abcde")
    assert peak == 2
    assert events == [
        "start a",
        "start b",
        "end b",
        "start c",
        "end c",
        "start d",
        "end d",
        "start e",
        "end e",
        "end a",
    ]


async def test_get_tool_call_id_inside_tools_and_streams() -> None:
    seen: list[tuple[str, str | None]] = []

    @tool
    async def inv() -> str:
        seen.append(("inv", get_tool_call_id()))
        return ""

    @tool
    async def gen() -> AsyncIterator[str]:
        seen.append(("gen start", get_tool_call_id()))
        yield "1"
        seen.append(("gen after", get_tool_call_id()))

    @tool
    def sync_inline() -> str:
        seen.append(("sync", get_tool_call_id()))
        return ""

    @tool(run_in_thread=True)
    def threaded() -> str:
        seen.append(("thread", get_tool_call_id()))
        return ""

    assert get_tool_call_id() is None
    node = ToolsNode([inv, gen, sync_inline, threaded])
    message = ask(
        call("inv", "", "i1"),
        call("gen", "", "g1"),
        call("sync_inline", "", "s1"),
        call("threaded", "", "t1"),
    )
    expected = [("gen after", "g1"), ("gen start", "g1"), ("inv", "i1"), ("sync", "s1"), ("thread", "t1")]
    await node.invoke(message)
    assert sorted(seen) == expected
    seen.clear()
    await read_all(await node.stream(message))
    assert sorted(seen) == expected
    assert get_tool_call_id() is None


# ----------------------------------------------------------------------------------------------------------
# Timeouts, cancellation


async def test_timeout_fails_the_call_naming_tool_and_timeout() -> None:
    never = anyio.Event()

    @tool(timeout=0.01)
    async def hang() -> str:
        await never.wait()
        return ""

    node = ToolsNode([hang, upper])
    with pytest.raises(ToolExecutionError) as info:
        await node.invoke(ask(call("upper", {"text": "a"}), call("hang", "", "h1")))
    cause = info.value.__cause__
    assert isinstance(cause, ToolTimeoutError)
    assert isinstance(cause, TimeoutError)
    assert str(cause) == "tool 'hang' timed out after 0.01s"
    assert info.value.call_id == "h1"


async def test_timeout_covers_reading_a_tool_stream() -> None:
    never = anyio.Event()

    @tool(timeout=0.01)
    async def trickle() -> AsyncIterator[str]:
        yield "first"
        await never.wait()
        yield "never"

    node = ToolsNode([trickle])
    reader = await node.stream(ask(call("trickle", "", "t")))
    async with reader:
        assert await reader.recv() == [tool_message("first", "t", tool_name="trickle")]
        with pytest.raises(ToolExecutionError) as item:
            await reader.recv()
    assert str(item.value) == (
        "failed to stream tool call t (tool 'trickle'): ToolTimeoutError: tool 'trickle' timed out after 0.01s"
    )
    assert isinstance(item.value.__cause__, ToolTimeoutError)


async def test_a_timeout_error_raised_by_the_tool_itself_is_not_a_tool_timeout() -> None:
    @tool(timeout=60)
    async def own() -> str:
        raise TimeoutError("upstream API")

    with pytest.raises(ToolExecutionError) as info:
        await ToolsNode([own]).invoke(ask(call("own")))
    assert type(info.value.__cause__) is TimeoutError


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_cancelling_the_node_cancels_every_running_tool(paradigm: str) -> None:
    log: list[str] = []
    never = anyio.Event()

    @tool
    async def wait(key: str) -> str:
        try:
            log.append(f"start {key}")
            await never.wait()
        finally:
            log.append(f"stop {key}")
        return key

    node = ToolsNode([wait, spell], middlewares=[tool_errors_as_results()])
    # the spell stream is started before the others are cancelled: the leak check proves it gets closed
    message = ask(*(call("wait", {"key": k}, k) for k in "abc"), call("spell", {"word": "w"}))
    async with no_new_tasks():
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(node.invoke if paradigm == "invoke" else node.stream, message)
                await anyio.wait_all_tasks_blocked()
                assert sorted(log) == ["start a", "start b", "start c"]
                scope.cancel()
    assert scope.cancelled_caught
    assert sorted(log) == ["start a", "start b", "start c", "stop a", "stop b", "stop c"]


async def test_closing_the_node_stream_closes_every_tool_stream() -> None:
    closed: list[str] = []

    @tool
    async def endless(key: str) -> AsyncIterator[str]:
        try:
            while True:
                await anyio.lowlevel.checkpoint()  # lets the merge start both streams before either yields
                yield key
        finally:
            closed.append(key)

    node = ToolsNode([endless])
    reader = await node.stream(ask(call("endless", {"key": "a"}, "a"), call("endless", {"key": "b"}, "b")))
    first = await reader.recv()
    assert sum(m is not None for m in first) == 1
    await reader.aclose()
    assert sorted(closed) == ["a", "b"]


# ----------------------------------------------------------------------------------------------------------
# tool_errors_as_results


@pytest.mark.parametrize("paradigm", ["invoke", "stream"])
async def test_tool_errors_as_results_lets_the_model_read_the_error(paradigm: str) -> None:
    @tool
    async def divide(a: int, b: int) -> float:
        return a / b

    node = ToolsNode([divide, upper], middlewares=[tool_errors_as_results()])
    message = ask(
        call("divide", {"a": 1, "b": 0}, "d"), call("upper", {"text": "ok"}, "u"), call("divide", "{", "e")
    )
    if paradigm == "invoke":
        out = await node.invoke(message)
    else:
        out = concat_message_lists(await read_all(await node.stream(message)))  # type: ignore[assignment]
    assert out == [
        tool_message(
            "[tool error] tool 'divide' failed: ZeroDivisionError: division by zero", "d", tool_name="divide"
        ),
        tool_message("OK", "u", tool_name="upper"),
        tool_message(
            "[tool error] tool 'divide' failed: ToolArgumentsError: invalid arguments for tool 'divide': "
            "arguments are not valid JSON: EOF while parsing an object at line 1 column 1",
            "e",
            tool_name="divide",
        ),
    ]


async def test_tool_errors_as_results_ends_a_broken_stream_with_the_error() -> None:
    @tool
    async def half() -> AsyncIterator[str]:
        yield "part "
        raise OSError("disk gone")

    node = ToolsNode([half], middlewares=[tool_errors_as_results(lambda inp, exc: f"{inp.call_id}: {exc}")])
    chunks = await read_all(await node.stream(ask(call("half", "", "h"))))
    assert [c[0].content for c in chunks if c[0]] == ["part ", "h: disk gone"]
    assert await node.invoke(ask(call("half", "", "h"))) == [
        tool_message("part h: disk gone", "h", tool_name="half")
    ]


async def test_tool_errors_as_results_keeps_interrupts_and_timeouts_are_results() -> None:
    never = anyio.Event()

    @tool
    async def pause() -> str:
        raise GraphInterrupt(info="approve?")

    @tool(timeout=0.01)
    async def hang() -> str:
        await never.wait()
        return ""

    node = ToolsNode([pause, hang], middlewares=[tool_errors_as_results()])
    with pytest.raises(GraphInterrupt):
        await node.invoke(ask(call("pause")))
    with pytest.raises(GraphInterrupt):
        await node.stream(ask(call("pause")))
    out = await node.invoke(ask(call("hang", "", "h")))
    assert out == [
        tool_message(
            "[tool error] tool 'hang' failed: ToolTimeoutError: tool 'hang' timed out after 0.01s",
            "h",
            tool_name="hang",
        )
    ]
