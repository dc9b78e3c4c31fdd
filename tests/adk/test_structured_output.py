"""Structured output (adk.chat_model.structured_output): ``ChatModelAgent(output_type=...)`` through the real ``openai``
client against the local OpenAI-compatible server (which refuses a request without the schema), and through the
``final_answer`` tool with a scripted model: valid, invalid-then-valid, never valid; streaming and not."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from adk import ChatModelAgent, Runner
from adk.chat_model.config import OutputConfig
from adk.chat_model.structured_output import FINAL_ANSWER_TOOL_NAME, OutputSchema, strict_json_schema
from adk.errors import StructuredOutputError
from adk.events import AgentEvent
from compose.errors import ModelBadRequestError
from compose.models.openai_model import OpenAIChatModel
from compose.models.scripted import ScriptedChatModel
from compose.schema import user_message
from compose.tools import tool
from tests.adk.helpers import call, calling
from tests.compose.models.openai_server import (
    OpenAIServer,
    Reply,
    completion,
    error_reply,
    json_reply,
    sse,
    text_chunks,
)

pytestmark = pytest.mark.anyio


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: float


VALID = '{"city": "Hangzhou", "celsius": 21.5}'
MISSING = '{"city": "Hangzhou"}'


def wants_schema(body: Any) -> Reply | None:
    """The server's check: the request must carry response_format with Weather's strict JSON schema."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return error_reply(400, f"test server: no json_schema response_format in {sorted(body)}")
    spec = fmt["json_schema"]
    schema = spec.get("schema", {})
    ok = (
        spec.get("name") == "Weather"
        and spec.get("strict") is True
        and set(schema.get("properties", {})) == {"city", "celsius"}
        and schema.get("required") == ["city", "celsius"]
        and schema.get("additionalProperties") is False
    )
    return None if ok else error_reply(400, f"test server: wrong schema {spec!r}")


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(check=wants_schema) as srv:
        yield srv


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel("test-model", base_url=server.base_url, api_key="sk-test") as m:
        yield m


def reply(text: str, streaming: bool) -> Reply:
    return sse(text_chunks(text, size=5)) if streaming else json_reply(completion(text))


async def events_of(agent: ChatModelAgent, streaming: bool) -> tuple[list[AgentEvent], list[str], Any]:
    """The run's events, each message read to its end, and the run."""
    events: list[AgentEvent] = []
    texts: list[str] = []
    run = Runner(agent, enable_streaming=streaming).query("Weather in Hangzhou?")
    async with run:
        async for event in run:
            events.append(event)
            if event.message is not None:
                texts.append((await event.message.get_message()).content)
    return events, texts, run


@pytest.mark.parametrize("streaming", [False, True])
async def test_native_valid_answer(server: OpenAIServer, model: OpenAIChatModel, streaming: bool) -> None:
    server.push(reply(VALID, streaming))
    agent = ChatModelAgent("w", "weather", model=model, output=OutputConfig(Weather))
    events, texts, run = await events_of(agent, streaming)
    assert len(server.requests) == 1
    assert texts == [VALID]
    assert events[-1].message is not None and events[-1].message.is_streaming is streaming
    assert events[-1].output is not None and events[-1].output.structured == Weather(city="Hangzhou", celsius=21.5)
    assert run.final_message.content == VALID
    assert run.termination_reason == "completed"


@pytest.mark.parametrize("streaming", [False, True])
async def test_native_invalid_then_valid(server: OpenAIServer, model: OpenAIChatModel, streaming: bool) -> None:
    server.push(reply(MISSING, streaming), reply("```json\n" + VALID + "\n```", streaming))
    agent = ChatModelAgent("w", "weather", model=model, output=OutputConfig(Weather))
    events, _, _ = await events_of(agent, streaming)
    assert len(server.requests) == 2
    assert [e.output.structured if e.output else None for e in events] == [None, Weather(city="Hangzhou", celsius=21.5)]
    second = server.requests[1].json["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == MISSING
    assert "celsius: Field required" in second[2]["content"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_native_never_valid(server: OpenAIServer, model: OpenAIChatModel, streaming: bool) -> None:
    server.push(*(reply("not json", streaming) for _ in range(2)))
    agent = ChatModelAgent("w", "weather", model=model, output=OutputConfig(Weather, retries=1))
    events, _, run = await events_of(agent, streaming)
    error = events[-1].error
    assert isinstance(error, StructuredOutputError)
    assert error.raw == "not json" and error.attempts == 2 and "Invalid JSON" in error.error
    assert run.termination_reason == "structured_output"
    assert len(server.requests) == 2


async def test_the_server_check_refuses_a_request_without_the_schema(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(reply(VALID, False))
    agent = ChatModelAgent("w", "weather", model=model)  # no output_type: no response_format
    events, _, _ = await events_of(agent, False)
    assert events[-1].error is not None and "no json_schema response_format" in str(events[-1].error)


@tool
async def thermometer(city: str) -> str:
    """Read the thermometer of a city."""
    return f"{city}: 21.5"


async def test_native_with_tools_sends_the_schema_on_every_call(server: OpenAIServer, model: OpenAIChatModel) -> None:
    tool_call = {"id": "c1", "type": "function", "function": {"name": "thermometer", "arguments": '{"city": "HZ"}'}}
    server.push(json_reply(completion(None, tool_calls=[tool_call], finish_reason="tool_calls")), reply(VALID, False))
    agent = ChatModelAgent("w", "weather", model=model, tools=[thermometer], output=OutputConfig(Weather))
    events, _, _ = await events_of(agent, False)
    assert len(server.requests) == 2  # the check passed on both
    assert [e.message.role if e.message else None for e in events] == ["assistant", "tool", "assistant"]
    assert events[-1].output is not None and events[-1].output.structured == Weather(city="Hangzhou", celsius=21.5)


# ------------------------------------------------------------------------------------------------------------
# The final_answer tool (models without response_format)


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


def final(args: str, id: str) -> Any:
    return calling(call(FINAL_ANSWER_TOOL_NAME, args, id=id))


@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_mode_invalid_then_valid(streaming: bool) -> None:
    model = ScriptedChatModel([final('{"x": 1}', "f1"), final('{"x": 1, "y": 2}', "f2")])
    agent = ChatModelAgent("p", "points", model=model, output=OutputConfig(Point))
    events, texts, run = await events_of(agent, streaming)
    assert [t.name for t in model.calls[0].tools] == [FINAL_ANSWER_TOOL_NAME]
    assert model.calls[0].tools[0].parameters["required"] == ["x", "y"]
    assert model.calls[0].options.extra.get("response_format") is None
    roles = [(e.message.role, e.message.tool_name) for e in events if e.message]
    assert roles == [("assistant", None), ("tool", "final_answer"), ("assistant", None), ("tool", "final_answer")]
    assert "y: Field required" in texts[1]
    assert events[-1].output is not None and events[-1].output.structured == Point(1, 2)
    assert [e.output.structured for e in events[:-1] if e.output] == [None, None, None]
    assert json.loads(run.final_message.content) == {"x": 1, "y": 2}
    # the feedback reached the model as the call's result
    assert model.calls[1].messages[-1].tool_call_id == "f1"


async def test_tool_mode_accepts_a_valid_text_answer_and_asks_for_the_tool_otherwise() -> None:
    model = ScriptedChatModel(["I think left and right", '{"left": "a", "right": "b"}'])
    agent = ChatModelAgent("p", "pairs", model=model, output=OutputConfig(Pair))
    events, _, _ = await events_of(agent, False)
    assert "`final_answer` tool" in model.calls[1].messages[-1].content
    assert [e.output.structured if e.output else None for e in events] == [None, {"left": "a", "right": "b"}]


async def test_tool_mode_never_valid() -> None:
    model = ScriptedChatModel([final("{}", f"f{i}") for i in range(3)])
    agent = ChatModelAgent("p", "points", model=model, output=OutputConfig(Point, retries=2))
    events, _, run = await events_of(agent, False)
    error = events[-1].error
    assert isinstance(error, StructuredOutputError)
    assert error.raw == "{}" and error.attempts == 3
    assert run.termination_reason == "structured_output"


async def test_tool_mode_with_other_tools() -> None:
    model = ScriptedChatModel(
        [calling(call("thermometer", '{"city": "HZ"}', id="t1")), final('{"city": "HZ", "celsius": 21.5}', "f1")]
    )
    agent = ChatModelAgent("w", "weather", model=model, tools=[thermometer], output=OutputConfig(Weather, mode="tool"))
    events, _, run = await events_of(agent, False)
    assert events[-1].output is not None and events[-1].output.structured == Weather(city="HZ", celsius=21.5)
    assert run.termination_reason == "completed"


# ------------------------------------------------------------------------------------------------------------
# Schemas


def test_strict_where_the_schema_allows() -> None:
    class Loose(BaseModel):
        name: str
        tags: list[str] = []

    class Nested(BaseModel):
        where: Weather
        when: str

    assert OutputSchema(Weather).strict
    assert OutputSchema(Nested).strict
    nested = OutputSchema(Nested).response_format()["json_schema"]["schema"]
    assert nested["$defs"]["Weather"]["additionalProperties"] is False
    assert not OutputSchema(Loose).strict
    assert OutputSchema(Loose).response_format()["json_schema"]["strict"] is False
    assert OutputSchema(Point).strict and OutputSchema(Pair).strict
    assert strict_json_schema({"type": "array", "items": {"type": "string"}})[1] is False


def test_output_type_must_be_a_model_dataclass_or_typeddict() -> None:
    with pytest.raises(TypeError, match="pydantic model, a dataclass or a TypedDict"):
        ChatModelAgent("a", "d", model=ScriptedChatModel([]), output=OutputConfig(int))
    with pytest.raises(ValueError, match="output_mode"):
        ChatModelAgent("a", "d", model=ScriptedChatModel([]), output=OutputConfig(Point, mode="json"))  # type: ignore[arg-type]


async def test_a_malformed_response_format_is_refused_before_the_request(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    with pytest.raises(ModelBadRequestError, match="needs a 'schema' mapping"):
        bad = {"type": "json_schema", "json_schema": {"name": "x"}}
        await model.generate([user_message("hi")], response_format=bad)
    assert server.requests == []
