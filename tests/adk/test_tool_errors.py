"""Tool failures as an agent run reports them (issue 13, points 8 and 12): the tool is named, at build or run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.runner import Runner
from compose.errors import ModelResponseError, ModelServerError, NodeRunError, ToolExecutionError
from compose.models import ScriptedChatModel
from compose.schema import Message, ToolInfo
from compose.stream import StreamReader
from compose.tools import tool
from compose.tools.middleware import tool_errors_as_results
from tests.adk.helpers import call, calling, collect, kinds

pytestmark = pytest.mark.anyio


@tool
async def download(url: str) -> AsyncIterator[str]:
    """Download a page, in chunks; the connection drops after the first one.

    Args:
        url: the page.
    """
    yield f"<html>{url}"
    raise ConnectionResetError("peer went away")


def error_chain(exc: BaseException | None) -> list[BaseException]:
    chain = []
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    return chain


async def test_a_tool_stream_failing_mid_stream_is_an_error_event_naming_the_tool() -> None:
    model = ScriptedChatModel([calling(call("download", '{"url": "a.b"}', "d1")), "never"])
    agent = ChatModelAgent("browser", "browses", "You browse.", model=model, tools=[download])
    errors, stream_errors = await _events(agent, streaming=True)
    # the tool event's own stream breaks too; its event names the tool
    assert list(stream_errors) == ["download"] and "peer went away" in str(stream_errors["download"])
    (error,) = errors
    assert isinstance(error, NodeRunError)
    assert "failed to stream tool call d1 (tool 'download'): ConnectionResetError: peer went away" in str(error)
    wrapped = [e for e in error_chain(error) if isinstance(e, ToolExecutionError)]
    assert len(wrapped) == 1
    assert (wrapped[0].tool_name, wrapped[0].call_id) == ("download", "d1")
    assert isinstance(wrapped[0].__cause__, ConnectionResetError)
    assert len(model.calls) == 1  # the model was never asked again


async def test_tool_errors_as_results_turns_the_mid_stream_failure_into_the_last_chunk() -> None:
    model = ScriptedChatModel([calling(call("download", '{"url": "a.b"}', "d1")), "The page broke off."])
    tools = ToolsConfig(tools=[download], middlewares=[tool_errors_as_results()])
    agent = ChatModelAgent("browser", "browses", "You browse.", model=model, tools=tools)
    seen = await collect(Runner(agent, enable_streaming=True).query("read a.b"))
    assert kinds(seen) == ["assistant", "tool:download", "assistant"]
    failure = "[tool error] tool 'download' failed: ConnectionResetError: peer went away"
    assert seen[1].content == f"<html>a.b{failure}"
    assert model.calls[1].messages[-1].content == f"<html>a.b{failure}"
    assert seen[2].content == "The page broke off."


class Search:
    """A class-based tool with a name providers reject."""

    def info(self) -> ToolInfo:
        return ToolInfo(name="web search", description="Search the web.")

    async def run(self, arguments: str) -> str:
        return "results"


async def test_an_agent_refuses_a_class_based_tool_with_an_invalid_name_when_it_is_built() -> None:
    agent = ChatModelAgent(
        "searcher", "searches", "You search.", model=ScriptedChatModel(["x"]), tools=[download, Search()]
    )
    message = (
        "tools[1] (Search) is named 'web search', which chat model providers reject (a tool name is letters, "
        "digits, '_' and '-', at most 64): change the name its info() returns"
    )
    with pytest.raises(ValueError) as info:
        agent.runnable  # noqa: B018 (building the graph is the point)
    assert str(info.value) == message
    with pytest.raises(ValueError, match=r"tools\[1\] \(Search\) is named 'web search'"):
        await collect(Runner(agent).query("hi"))


# ----------------------------------------------------------------------------------------------------------------
# Issue 28, section 1: a failure inside a stream is blamed on its producer, and every reader sees the same error


class Numbers:
    """A class-based streaming tool whose stream yields ints, not strings."""

    def info(self) -> ToolInfo:
        return ToolInfo(name="numbers", description="numbers", parameters={"type": "object", "properties": {}})

    async def stream(self, arguments: str) -> StreamReader[str]:
        return StreamReader.from_iterable([1, 2])  # type: ignore[list-item]


async def _events(agent: ChatModelAgent, streaming: bool) -> tuple[list[BaseException], dict[str, BaseException]]:
    """The run's error events, and the error each event's own stream raised (by role/tool)."""
    errors: list[BaseException] = []
    stream_errors: dict[str, BaseException] = {}
    async with Runner(agent, enable_streaming=streaming).query("go") as run:
        async for event in run:
            if event.error is not None:
                errors.append(event.error)
                continue
            assert event.message is not None
            try:
                await event.message.get_message()
            except Exception as exc:
                stream_errors[event.message.tool_name or event.message.role] = exc
    return errors, stream_errors


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "invoke"])
@pytest.mark.parametrize("tool", [download, Numbers()], ids=["mid-stream", "non-str-chunk"])
async def test_a_failing_tool_stream_is_one_tool_execution_error_for_every_reader(streaming: bool, tool: Any) -> None:
    name = tool.info().name
    model = ScriptedChatModel([calling(call(name, '{"url": "a.b"}', "d1")), "never"])
    agent = ChatModelAgent("browser", "browses", "You browse.", model=model, tools=[tool])
    errors, stream_errors = await _events(agent, streaming)
    (error,) = errors
    assert isinstance(error, NodeRunError)
    assert error.node_path == ["ToolNode"]  # not the ChatModel node that read the tool messages
    assert "handler failed" not in str(error)
    cause = error.__cause__
    assert isinstance(cause, ToolExecutionError)
    assert (cause.tool_name, cause.call_id) == (name, "d1")
    assert f"failed to stream tool call d1 (tool '{name}')" in str(cause)
    assert "sequence item" not in str(error)
    # the tool event's reader sees the very same error, not the tool's raw one nor a pydantic ValidationError
    assert stream_errors[name] is cause
    assert len(model.calls) == 1


class BrokenStreamModel:
    """A chat model whose stream breaks after one chunk (``ModelServerError``), or yields ``chunk``."""

    def __init__(self, chunk: object = None, *, breaks: bool = True) -> None:
        self.chunk = chunk
        self.breaks = breaks

    def with_tools(self, tools: Sequence[ToolInfo]) -> BrokenStreamModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return Message(role="assistant", content="whole")

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        async def chunks() -> AsyncIterator[Any]:
            if self.breaks:
                yield Message(role="assistant", content="hel")
                raise ModelServerError("server closed the connection mid-stream")
            yield self.chunk

        return StreamReader.from_async_iterator(chunks())


@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
async def test_a_model_stream_breaking_is_an_error_naming_the_model_node(tools: bool) -> None:
    agent = ChatModelAgent("a", "d", "i", model=BrokenStreamModel(), tools=[download] if tools else [])
    errors, stream_errors = await _events(agent, True)
    (error,) = errors
    assert isinstance(error, NodeRunError)
    assert error.node_path == ["ChatModel"] and error.phase == "stream"
    assert "post handler failed" not in str(error)
    assert isinstance(error.__cause__, ModelServerError)
    assert stream_errors["assistant"] is error.__cause__


@pytest.mark.parametrize("chunk", [None, "text", 3])
async def test_a_model_streaming_non_messages_is_a_model_response_error_for_every_reader(chunk: object) -> None:
    agent = ChatModelAgent("a", "d", "i", model=BrokenStreamModel(chunk, breaks=False))
    errors, stream_errors = await _events(agent, True)
    (error,) = errors
    assert isinstance(error, NodeRunError) and error.node_path == ["ChatModel"]
    cause = error.__cause__
    assert isinstance(cause, ModelResponseError)
    assert "agent 'a': chat model BrokenStreamModel: stream() yielded" in str(cause)
    assert stream_errors["assistant"] is cause  # get_message() raises it, never returns the chunk
