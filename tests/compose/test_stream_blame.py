"""A failure inside a stream is blamed on the node that produced it (issue 28, section 1): an error item of a node's
output stream is a ``NodeRunError`` naming that node (``phase="stream"``, the node's own error as ``__cause__``),
raised as it is by every reader (the next node, its handler, a branch, the caller), in the four paradigms and from
nested graphs; chunk types are checked where the declared type is concrete (a chat model's: ``Message``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from compose.errors import (
    ModelResponseError,
    ModelServerError,
    NodeOutputTypeError,
    NodeRunError,
    ToolExecutionError,
)
from compose.graph import END, START, Graph
from compose.graph.branch import StreamGraphBranch
from compose.lambdas import Lambda
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, assistant_message, user_message
from compose.stream import StreamReader
from compose.tools.node import ToolsNode
from tests.compose.helpers import line

pytestmark = pytest.mark.anyio


async def _read(reader: Awaitable[StreamReader[Any]]) -> Any:
    async with await reader as r:
        return [chunk async for chunk in r]


# The streaming paradigms, each reading the graph's output to its end.
STREAMING: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
    "stream": lambda r, x: _read(r.stream(x)),
    "collect": lambda r, x: r.collect(StreamReader.from_iterable([x])),
    "transform": lambda r, x: _read(r.transform(StreamReader.from_iterable([x]))),
}


class BrokenModel:
    """Streams one chunk, then its stream breaks (the server closed the connection), or streams ``chunk``."""

    def __init__(self, chunk: object = None, *, breaks: bool = True) -> None:
        self.chunk = chunk
        self.breaks = breaks

    def with_tools(self, tools: Sequence[ToolInfo]) -> BrokenModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return assistant_message("whole")

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        async def chunks() -> AsyncIterator[Any]:
            if self.breaks:
                yield assistant_message("hel")
                raise ModelServerError("server closed the connection mid-stream")
            yield self.chunk

        return StreamReader.from_async_iterator(chunks())


@dataclass
class Seen:
    messages: list[Message] = field(default_factory=list)


def model_graph(model: Any, *, post_handler: bool = True) -> Any:
    """START -> chat (with a post handler, as an agent's model node has) -> END."""

    async def keep(out: Message, st: Seen) -> Message:
        st.messages.append(out)
        return out

    g = Graph[list[Message], Message](state=Seen)
    g.add_chat_model_node("chat", model, **({"post_handler": keep} if post_handler else {}))
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g.compile()


def assert_blames(err: BaseException, path: list[str], cause: type[BaseException]) -> None:
    assert isinstance(err, NodeRunError)
    assert err.node_path == path
    assert err.phase == "stream"
    assert isinstance(err.__cause__, cause), err.__cause__
    assert "handler failed" not in str(err)


@pytest.mark.parametrize("paradigm", sorted(STREAMING))
@pytest.mark.parametrize("post_handler", [True, False])
async def test_a_model_stream_breaking_is_blamed_on_the_model_node(paradigm: str, post_handler: bool) -> None:
    r = model_graph(BrokenModel(), post_handler=post_handler)
    with pytest.raises(NodeRunError) as info:
        await STREAMING[paradigm](r, [user_message("hi")])
    assert_blames(info.value, ["chat"], ModelServerError)
    assert "server closed the connection mid-stream" in str(info.value)


@pytest.mark.parametrize("paradigm", sorted(STREAMING))
@pytest.mark.parametrize("chunk", [None, "text", 3])
async def test_a_model_streaming_non_messages_fails_with_a_model_response_error_naming_the_node(
    paradigm: str, chunk: object
) -> None:
    r = model_graph(BrokenModel(chunk, breaks=False))
    with pytest.raises(NodeRunError) as info:
        await STREAMING[paradigm](r, [user_message("hi")])
    assert_blames(info.value, ["chat"], ModelResponseError)
    shown = "None" if chunk is None else f"{type(chunk).__qualname__} {chunk!r}"
    assert f"chat model node 'chat' (BrokenModel): stream() yielded {shown}, not a Message" in str(info.value)


async def broken_words(x: str) -> AsyncIterator[str]:
    yield x
    raise ConnectionResetError("peer went away")


async def shout(x: str) -> str:
    return x.upper()


async def pre(x: str, st: Seen) -> str:
    return x


def reader_graph(*, dag: bool = False, handler: bool = True, branch: bool = False) -> Any:
    """START -> words (a stream lambda that breaks) -> upper (invoke; a pre handler reads the stream) -> END."""
    g = Graph[str, str](state=Seen)
    g.add_lambda_node("words", broken_words)
    g.add_lambda_node("upper", shout, **({"pre_handler": pre} if handler else {}))
    g.add_edge(START, "words")
    if branch:

        async def first(reader: StreamReader[str]) -> str:
            async with reader:
                async for _ in reader:
                    pass
            return "upper"

        g.add_branch("words", StreamGraphBranch(first, {"upper"}))
    else:
        g.add_edge("words", "upper")
    g.add_edge("upper", END)
    return g.compile(trigger_mode="all_predecessor" if dag else "any_predecessor")


@pytest.mark.parametrize("paradigm", sorted(STREAMING))
@pytest.mark.parametrize(
    "shape", ["pre handler", "no handler", "dag", "stream branch"], ids=lambda s: s.replace(" ", "-")
)
async def test_a_lambda_stream_failing_is_blamed_on_the_lambda_not_its_reader(paradigm: str, shape: str) -> None:
    r = reader_graph(dag=shape == "dag", handler=shape != "no handler", branch=shape == "stream branch")
    with pytest.raises(NodeRunError) as info:
        await STREAMING[paradigm](r, "a")
    assert_blames(info.value, ["words"], ConnectionResetError)


async def test_the_caller_reading_the_stream_sees_the_same_error_once_named() -> None:
    g = line(("words", broken_words))
    r = g.compile()
    async with await r.stream("a") as reader:
        assert await reader.recv() == "a"
        with pytest.raises(NodeRunError) as info:
            await reader.recv()
    assert_blames(info.value, ["words"], ConnectionResetError)
    assert str(info.value).count("node path") == 1


@pytest.mark.parametrize("paradigm", ["invoke", *sorted(STREAMING)])
async def test_a_stream_failing_in_a_nested_graph_names_the_inner_node(paradigm: str) -> None:
    inner = line(("words", broken_words))
    g = Graph[str, str](state=Seen)
    g.add_graph_node("sub", inner)
    g.add_lambda_node("upper", shout, pre_handler=pre)
    g.add_edge(START, "sub")
    g.add_edge("sub", "upper")
    g.add_edge("upper", END)
    run = (lambda r, x: r.invoke(x)) if paradigm == "invoke" else STREAMING[paradigm]
    with pytest.raises(NodeRunError) as info:
        await run(g.compile(), "a")
    if paradigm == "invoke":  # the lambda's stream is read inside the node (its derived invoke)
        assert info.value.node_path == ["sub", "words"] and info.value.phase == ""
        assert isinstance(info.value.__cause__, ConnectionResetError)
    else:
        assert_blames(info.value, ["sub", "words"], ConnectionResetError)


async def test_a_separate_graph_streamed_by_a_lambda_is_named_after_the_lambda_too() -> None:
    inner = line(("words", broken_words))
    separate = inner.compile()

    async def relay(reader: StreamReader[str]) -> StreamReader[str]:
        return await separate.transform(reader)

    g = Graph[str, str]()
    g.add_lambda_node("relay", Lambda(transform=relay, input_type=str, output_type=str))
    g.add_lambda_node("upper", shout)
    g.add_edge(START, "relay")
    g.add_edge("relay", "upper")
    g.add_edge("upper", END)
    with pytest.raises(NodeRunError) as info:
        await _read(g.compile().stream("a"))
    # the relaying node's stream failed; the separate graph's own error (its own root) is the cause
    assert_blames(info.value, ["relay"], NodeRunError)
    assert info.value.__cause__.node_path == ["words"]  # type: ignore[union-attr]


async def test_a_wrong_chunk_is_still_a_node_output_type_error_naming_its_node() -> None:
    async def numbers(x: str) -> AsyncIterator[str]:
        yield 3  # type: ignore[misc]

    g = Graph[str, str](state=Seen)
    g.add_lambda_node("numbers", numbers)
    g.add_lambda_node("upper", shout, pre_handler=pre)
    g.add_edge(START, "numbers")
    g.add_edge("numbers", "upper")
    g.add_edge("upper", END)
    with pytest.raises(NodeOutputTypeError) as info:
        await _read(g.compile().stream("a"))
    assert info.value.node_path == ["numbers"]


# ----------------------------------------------------------------------------------------------------------------
# Tools: the ToolsNode's stream names the tool call; the node's reader names the ToolsNode


def _info(name: str) -> ToolInfo:
    return ToolInfo(name=name, description=name, parameters={"type": "object", "properties": {}})


class Numbers:
    """A class-based streaming tool whose stream yields ints."""

    def info(self) -> ToolInfo:
        return _info("numbers")

    async def stream(self, arguments: str) -> StreamReader[str]:
        return StreamReader.from_iterable([1, 2])  # type: ignore[list-item]


class Dropping:
    """A class-based streaming tool whose connection drops after the first chunk."""

    def info(self) -> ToolInfo:
        return _info("dropping")

    async def stream(self, arguments: str) -> StreamReader[str]:
        return StreamReader.from_async_iterator(broken_words("<html>"))


def _calling(name: str) -> Message:
    return assistant_message("", [ToolCall(id="c1", function=FunctionCall(name=name, arguments="{}"))])


@pytest.mark.parametrize("tool", [Numbers(), Dropping()], ids=["non-str-chunk", "mid-stream"])
async def test_a_stream_only_tool_failing_in_invoke_is_a_streaming_tool_execution_error(tool: Any) -> None:
    name = tool.info().name
    with pytest.raises(ToolExecutionError) as info:
        await ToolsNode([tool]).invoke(_calling(name))
    err = info.value
    assert (err.tool_name, err.call_id) == (name, "c1")
    assert f"failed to stream tool call c1 (tool '{name}')" in str(err)
    assert "sequence item" not in str(err)
    assert not isinstance(err.__cause__, ToolExecutionError)


def tools_graph(tool: Any) -> Any:
    """START -> tools -> answer (a pre handler concatenates the tool messages) -> END."""

    async def pre_msgs(x: list[Message], st: Seen) -> list[Message]:
        return x

    async def answer(msgs: list[Message]) -> Message:
        return assistant_message(msgs[0].content)

    g = Graph[Message, Message](state=Seen)
    g.add_tools_node("tools", ToolsNode([tool]))
    g.add_lambda_node("answer", answer, pre_handler=pre_msgs)
    g.add_edge(START, "tools")
    g.add_edge("tools", "answer")
    g.add_edge("answer", END)
    return g.compile()


@pytest.mark.parametrize("paradigm", ["invoke", *sorted(STREAMING)])
@pytest.mark.parametrize("tool", [Numbers(), Dropping()], ids=["non-str-chunk", "mid-stream"])
async def test_a_tool_stream_failing_in_a_graph_names_the_tools_node_and_the_call(paradigm: str, tool: Any) -> None:
    r = tools_graph(tool)
    run = (lambda r, x: r.invoke(x)) if paradigm == "invoke" else STREAMING[paradigm]
    with pytest.raises(NodeRunError) as info:
        await run(r, _calling(tool.info().name))
    err = info.value
    assert err.node_path == ["tools"]
    assert err.phase == ("" if paradigm == "invoke" else "stream")
    cause = err.__cause__
    assert isinstance(cause, ToolExecutionError)
    assert (cause.tool_name, cause.call_id) == (tool.info().name, "c1")
    assert "failed to stream tool call c1" in str(cause)


async def test_every_reader_of_a_failing_model_stream_sees_the_same_error() -> None:
    r = model_graph(BrokenModel(), post_handler=False)
    reader = await r.stream([user_message("hi")])
    first, second = reader.copy(2)
    errors = []
    for copy in (first, second):
        async with copy:
            await copy.recv()
            with pytest.raises(NodeRunError) as info:
                await copy.recv()
            errors.append(info.value)
    assert errors[0] is errors[1]
