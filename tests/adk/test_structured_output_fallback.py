"""Structured output against a server that refuses ``response_format`` json_schema (llama.cpp's answers HTTP 500
"Input should be 'text' or 'json_object'"), over real HTTP on loopback: the refusal is not retried, and
``output_mode="auto"`` goes on with the ``final_answer`` tool, forced."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from adk import ChatModelAgent, ModelRetryConfig, Runner
from adk.chat_model.config import OutputConfig
from adk.chat_model.structured_output import FINAL_ANSWER_TOOL_NAME
from adk.events import AgentEvent
from compose.errors import ResponseFormatUnsupportedError
from compose.models.openai_model import OpenAIChatModel
from compose.tools import tool
from tests.compose.models.openai_server import (
    OpenAIServer,
    Reply,
    completion,
    json_reply,
    llama_cpp_check,
    sse,
    tool_call_chunks,
)

pytestmark = pytest.mark.anyio

ANSWER = '{"city": "Oslo", "celsius": 3.5}'
RETRY = ModelRetryConfig(max_retries=3, backoff=lambda attempt: 0.0)


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: float


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(check=llama_cpp_check) as srv:
        yield srv


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel("m", base_url=server.base_url, api_key="k") as m:
        yield m


def final_answer(streaming: bool, call_id: str = "c1") -> Reply:
    if streaming:
        return sse(tool_call_chunks(0, call_id, FINAL_ANSWER_TOOL_NAME, ANSWER), finish_reason="tool_calls")
    calls = [{"id": call_id, "type": "function", "function": {"name": FINAL_ANSWER_TOOL_NAME, "arguments": ANSWER}}]
    return json_reply(completion(None, tool_calls=calls, finish_reason="tool_calls"))


async def run_once(agent: ChatModelAgent, streaming: bool) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    async with Runner(agent, enable_streaming=streaming).query("Weather in Oslo?") as run:
        async for event in run:
            if event.message is not None:
                await event.message.get_message()
            events.append(event)
    return events


def sent(server: OpenAIServer) -> list[dict[str, Any]]:
    """What each request asked for: its response_format type, its tools and its tool_choice."""
    return [
        {
            "response_format": (r.json.get("response_format") or {}).get("type"),
            "tools": [t["function"]["name"] for t in r.json.get("tools", ())],
            "tool_choice": r.json.get("tool_choice"),
        }
        for r in server.requests
    ]


FORCED = {"type": "function", "function": {"name": FINAL_ANSWER_TOOL_NAME}}


@pytest.mark.parametrize("streaming", [False, True])
async def test_auto_falls_back_to_the_forced_final_answer_tool(
    server: OpenAIServer, model: OpenAIChatModel, streaming: bool
) -> None:
    server.push(final_answer(streaming), final_answer(streaming, "c2"))
    agent = ChatModelAgent("w", "weather", model=model, output=OutputConfig(Weather), model_retry=RETRY)
    events = await run_once(agent, streaming)
    assert [e.error for e in events if e.error is not None] == []
    assert events[-1].output is not None and events[-1].output.structured == Weather(city="Oslo", celsius=3.5)
    # one refused request (not retried), then the same call in the tool mode
    assert sent(server) == [
        {"response_format": "json_schema", "tools": [], "tool_choice": None},
        {"response_format": None, "tools": [FINAL_ANSWER_TOOL_NAME], "tool_choice": FORCED},
    ]
    # the agent stays in the tool mode: its next run asks for the tool at once
    events = await run_once(agent, streaming)
    assert events[-1].output is not None and events[-1].output.structured == Weather(city="Oslo", celsius=3.5)
    assert sent(server)[2:] == [{"response_format": None, "tools": [FINAL_ANSWER_TOOL_NAME], "tool_choice": FORCED}]


async def test_with_other_tools_the_final_answer_tool_is_offered_beside_them(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    @tool
    async def forecast(city: str) -> str:
        """The forecast.

        Args:
            city: where.
        """
        return "cold"

    server.push(final_answer(False))
    agent = ChatModelAgent(
        "w", "weather", model=model, tools=[forecast], output=OutputConfig(Weather), model_retry=RETRY
    )
    events = await run_once(agent, False)
    assert events[-1].output is not None and events[-1].output.structured == Weather(city="Oslo", celsius=3.5)
    assert sent(server) == [
        {"response_format": "json_schema", "tools": ["forecast"], "tool_choice": None},
        {"response_format": None, "tools": ["forecast", FINAL_ANSWER_TOOL_NAME], "tool_choice": None},
    ]


async def test_explicit_native_mode_fails_at_once_with_the_typed_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    agent = ChatModelAgent("w", "weather", model=model, output=OutputConfig(Weather, mode="native"), model_retry=RETRY)
    events = await run_once(agent, False)
    errors = [e.error for e in events if e.error is not None]
    assert len(errors) == 1 and isinstance(errors[0].__cause__, ResponseFormatUnsupportedError)
    assert "Input should be 'text' or 'json_object'" in str(errors[0])
    assert sent(server) == [{"response_format": "json_schema", "tools": [], "tool_choice": None}]  # not retried
