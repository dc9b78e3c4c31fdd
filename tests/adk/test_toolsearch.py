"""Tool search (Eino's ``dynamictool/toolsearch`` tests, ported): the search, and dynamic tools hidden from the
model until a search in the run reveals them."""

from __future__ import annotations

import json

import pytest

from adk import ChatModelAgent, Runner
from adk.middlewares import ToolSearchMiddleware
from adk.middlewares._toolsearch_prompts import TOOL_SEARCH_DESCRIPTION
from adk.middlewares.toolsearch import REMINDER_KEY, _split_camel, search_tools
from compose.errors import ToolArgumentsError
from compose.models import ScriptedChatModel
from compose.schema import ToolInfo
from compose.tools import tool
from tests.adk.helpers import call, calling, collect

pytestmark = pytest.mark.anyio

TOOLS = {
    name: ToolInfo(name=name, description=desc, parameters={"type": "object", "properties": {}})
    for name, desc in [
        ("get_weather", "Get current weather for a city"),
        ("search_flights", "Search available flights"),
        ("mcp__slack__send_message", "Send a message to Slack channel"),
        ("mcp__slack__read_channel", "Read messages from Slack channel"),
        ("create_calendar_event", "Create a new calendar event"),
        ("NotebookEdit", "Edit Jupyter notebook cells"),
    ]
}


def search(query: str, max_results: int | None = None) -> list[str]:
    args: dict[str, object] = {"query": query}
    if max_results is not None:
        args["max_results"] = max_results
    return search_tools(json.dumps(args), TOOLS)


def test_search_by_keywords_and_selection() -> None:
    assert search("weather") == ["get_weather"]
    assert sorted(search("slack")) == ["mcp__slack__read_channel", "mcp__slack__send_message"]
    assert search("send message")[0] == "mcp__slack__send_message"
    assert sorted(search("+slack send")) == ["mcp__slack__read_channel", "mcp__slack__send_message"]
    assert search("+github send") == []
    assert search("select:get_weather") == ["get_weather"]
    assert search("select:get_weather,NotebookEdit") == ["get_weather", "NotebookEdit"]
    assert search("select:nonexistent") == []
    assert len(search("slack", 1)) == 1
    assert search("notebook") == ["NotebookEdit"]
    assert search("jupyter") == ["NotebookEdit"]
    with pytest.raises(ToolArgumentsError, match="query is required"):
        search("")


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("hello", ["hello"]),
        ("NotebookEdit", ["Notebook", "Edit"]),
        ("camelCase", ["camel", "Case"]),
        ("HTMLParser", ["HTML", "Parser"]),
        ("getURL", ["get", "URL"]),
        ("A", ["A"]),
        ("AB", ["AB"]),
        ("HTTP", ["HTTP"]),
    ],
)
def test_split_camel_case(text: str, parts: list[str]) -> None:
    assert _split_camel(text) == parts


@tool
def get_weather(city: str) -> str:
    """Get current weather for a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@tool
def get_stock(symbol: str) -> str:
    """Get a stock price.

    Args:
        symbol: the ticker.
    """
    return f"{symbol}: 42"


@tool
def echo(text: str) -> str:
    """Echo.

    Args:
        text: what.
    """
    return text


async def test_dynamic_tools_are_offered_only_after_a_search_reveals_them() -> None:
    model = ScriptedChatModel(
        [
            calling(call("tool_search", '{"query": "weather"}', "s1")),
            calling(call("get_weather", '{"city": "Hangzhou"}', "w1")),
            "It is sunny.",
        ]
    )
    mw = ToolSearchMiddleware([get_weather, get_stock])
    agent = ChatModelAgent("a", "d", "You help.", model=model, tools=[echo], middlewares=[mw])
    seen = await collect(Runner(agent).query("weather in Hangzhou?"))
    assert [s.content for s in seen][1:4:2] == ['{"matches":["get_weather"]}', "sunny in Hangzhou"]
    offered = [[t.name for t in c.tools] for c in model.calls]
    assert offered == [
        ["echo", "tool_search"],
        ["echo", "tool_search", "get_weather"],
        ["echo", "tool_search", "get_weather"],
    ]
    search_tool = model.calls[0].tools[1]
    assert search_tool.description == TOOL_SEARCH_DESCRIPTION and search_tool.parameters["required"] == ["query"]
    first = model.calls[0].messages
    assert [m.role for m in first] == ["system", "user", "user"]
    assert first[1].content == "<available-deferred-tools>\nget_weather\nget_stock\n</available-deferred-tools>"
    assert first[1].extra == {REMINDER_KEY: True}
    assert sum(m.extra.get(REMINDER_KEY) is True for m in model.calls[2].messages) == 1  # added once


async def test_no_match_answers_null_and_reveals_nothing() -> None:
    model = ScriptedChatModel([calling(call("tool_search", '{"query": "select:nothing"}', "s1")), "none"])
    agent = ChatModelAgent("a", "d", model=model, middlewares=[ToolSearchMiddleware([get_weather])])
    seen = await collect(Runner(agent).query("x"))
    assert seen[1].content == '{"matches":null}'
    assert [t.name for t in model.calls[1].tools] == ["tool_search"]


def test_construction_checks() -> None:
    with pytest.raises(ValueError, match="tools is required"):
        ToolSearchMiddleware([])
    with pytest.raises(ValueError, match="duplicate dynamic tool name: get_weather"):
        ToolSearchMiddleware([get_weather, get_weather])
