"""Tool failures as an agent run reports them (issue 13, points 8 and 12): the tool is named, at build or run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adk.chat_model_agent import ChatModelAgent, ToolsConfig
from adk.runner import Runner
from compose.errors import NodeRunError, ToolExecutionError
from compose.models import ScriptedChatModel
from compose.schema import ToolInfo
from compose.tool_node import tool_errors_as_results
from compose.tools import tool
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
    errors: list[BaseException] = []
    tool_stream_errors: list[BaseException] = []
    async with Runner(agent, enable_streaming=True).query("read a.b") as run:
        async for event in run:
            if event.error is not None:
                errors.append(event.error)
                continue
            assert event.message is not None
            try:
                await event.message.get_message()
            except Exception as exc:  # the tool event's own stream breaks too; its event names the tool
                assert event.message.tool_name == "download"
                tool_stream_errors.append(exc)
    assert len(tool_stream_errors) == 1 and "peer went away" in str(tool_stream_errors[0])
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
