"""OpenAIChatModel on the wire: answers of the wrong shape, requests that cannot be encoded, and what servers
other than OpenAI accept (llama.cpp's), through the real ``openai`` client against the local server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adk.chat_model.config import ModelConfig
from compose.errors import ModelBadRequestError, ModelResponseError
from compose.models.openai_model import OpenAIChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, assistant_message, tool_message, user_message
from tests.adk.helpers import collect, kinds
from tests.compose.models.openai_server import (
    CLOSES_STREAM_EARLY,
    OpenAIServer,
    Reply,
    completion,
    delta_chunk,
    json_reply,
    llama_cpp_check,
    raw_reply,
    sse,
    text_chunks,
    tool_call_chunks,
)

pytestmark = pytest.mark.anyio

HI = [user_message("hi")]
WEATHER = ToolInfo(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def message_body(message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


# --- answers of the wrong shape: ModelResponseError quoting the part ----------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (raw_reply(b"<html>gateway</html>"), "the body is not JSON: b'<html>gateway</html>'"),
        (json_reply("just text"), 'the body is a string, not an object: "just text"'),
        (json_reply([1, 2]), "the body is a list, not an object: [1, 2]"),
        (json_reply({"choices": "abc"}), 'choices is a string, not a list: "abc"'),
        (json_reply({"choices": ["x"]}), 'choices[0] is a string, not an object: "x"'),
        (json_reply(message_body("hi")), 'choices[0].message is a string, not an object: "hi"'),
        (json_reply(message_body({"content": 3})), "choices[0].message.content is a number, not a string: 3"),
        (
            json_reply(message_body({"content": "", "tool_calls": {"id": "c"}})),
            'choices[0].message.tool_calls is an object, not a list: {"id": "c"}',
        ),
        (
            json_reply(message_body({"tool_calls": [{"id": "c", "function": "f"}]})),
            'choices[0].message.tool_calls[0].function is a string, not an object: "f"',
        ),
        (json_reply({**completion("ok"), "usage": "lots"}), 'usage is a string, not an object: "lots"'),
    ],
    ids=["not-json", "string", "list", "choices", "choice", "message", "content", "calls", "function", "usage"],
)
async def test_a_completion_of_the_wrong_shape_is_a_response_error(
    server: OpenAIServer, model: OpenAIChatModel, reply: Reply, expected: str
) -> None:
    server.push(reply)
    with pytest.raises(ModelResponseError) as info:
        await model.generate(HI)
    assert str(info.value) == f"unexpected response: {expected}"
    assert not info.value.retryable


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        ({"choices": "abc"}, 'choices is a string, not a list: "abc"'),
        ({"choices": {"index": 0}}, 'choices is an object, not a list: {"index": 0}'),
        ({"choices": [3]}, "choices[0] is a number, not an object: 3"),
        (delta_chunk("oops"), 'choices[0].delta is a string, not an object: "oops"'),  # type: ignore[arg-type]
        (delta_chunk({"tool_calls": "abc"}), 'choices[0].delta.tool_calls is a string, not a list: "abc"'),
        (delta_chunk({"tool_calls": ["abc"]}), 'choices[0].delta.tool_calls[0] is a string, not an object: "abc"'),
        (
            delta_chunk({"tool_calls": [{"index": "0", "function": {}}]}),
            'choices[0].delta.tool_calls[0].index is a string, not a number: "0"',
        ),
        (
            delta_chunk({"tool_calls": [{"index": 0, "function": ["f"]}]}),
            'choices[0].delta.tool_calls[0].function is a list, not an object: ["f"]',
        ),
        (delta_chunk({"content": 5}), "choices[0].delta.content is a number, not a string: 5"),
        ({"choices": [], "usage": [1]}, "usage is a list, not an object: [1]"),
    ],
    ids=["choices-str", "choices-obj", "choice", "delta", "calls", "call", "index", "function", "content", "usage"],
)
@CLOSES_STREAM_EARLY
async def test_a_chunk_of_the_wrong_shape_is_a_response_error(
    server: OpenAIServer, model: OpenAIChatModel, chunk: dict[str, Any], expected: str
) -> None:
    server.push(sse([*text_chunks("ab"), chunk, *text_chunks("never")]))
    reader = await model.stream(HI)
    got: list[str] = []
    with pytest.raises(ModelResponseError) as info:
        async with reader:
            async for piece in reader:
                got.append(piece.content)
    assert got == ["ab"]
    assert str(info.value) == f"unexpected chunk in the stream: {expected}"


# --- requests that cannot be encoded -------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize(
    ("message", "where"),
    [
        (
            user_message("bad \udc80 byte"),
            "request message 1 (role 'user'): its content holds a lone surrogate '\\udc80' at offset 4",
        ),
        (
            assistant_message("", [ToolCall(id="c", function=FunctionCall(name="f", arguments='{"a": "\ud83d"}'))]),
            "request message 1 (role 'assistant'): its tool_calls[0].function.arguments holds a lone surrogate "
            "'\\ud83d' at offset 7",
        ),
        (tool_message("x\udfffy", "c"), "request message 1 (role 'tool'): its content holds a lone surrogate"),
    ],
    ids=["content", "arguments", "tool"],
)
async def test_a_lone_surrogate_names_the_message(
    server: OpenAIServer, model: OpenAIChatModel, message: Message, where: str, streaming: bool
) -> None:
    messages = [user_message("fine: 日本語 ✓"), message]
    with pytest.raises(ModelBadRequestError) as info:
        if streaming:
            await model.stream(messages)
        else:
            await model.generate(messages)
    assert str(info.value).startswith(where)
    assert "cannot be encoded as UTF-8" in str(info.value)
    assert not info.value.retryable
    assert server.requests == []  # refused before sending


async def test_non_ascii_text_without_surrogates_is_sent(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(json_reply(completion("ok")))
    assert (await model.generate([user_message("日本語 😀 ✓")])).content == "ok"
    assert server.requests[0].json["messages"][0]["content"] == "日本語 😀 ✓"


# --- interoperability: what llama.cpp's server accepts --------------------------------------------------------


@pytest.fixture
def strict_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(check=llama_cpp_check) as srv:
        yield srv


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize(
    "choice",
    ["get_weather", {"type": "function", "function": {"name": "get_weather"}}],
    ids=["name", "mapping"],
)
async def test_an_agent_run_passes_llama_cpps_checks(strict_server: OpenAIServer, streaming: bool, choice: Any) -> None:
    from adk.chat_model.agent import ChatModelAgent
    from adk.runner import Runner
    from compose.tools import tool

    @tool
    async def get_weather(city: str) -> str:
        """Weather for a city.

        Args:
            city: the city
        """
        return f"sunny in {city}"

    args = '{"city": "Rome"}'
    if streaming:
        strict_server.push(
            sse(tool_call_chunks(0, "call_1", "get_weather", args), finish_reason="tool_calls"),
            sse(text_chunks("Sunny in Rome.")),
        )
    else:
        calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args}}]
        strict_server.push(
            json_reply(completion(None, tool_calls=calls, finish_reason="tool_calls")),
            json_reply(completion("Sunny in Rome.")),
        )
    async with OpenAIChatModel("m", base_url=strict_server.base_url, api_key="k") as model:
        agent = ChatModelAgent("a", "d", model=model, tools=[get_weather], model_config=ModelConfig(tool_choice=choice))
        run = Runner(agent, enable_streaming=streaming).query("Weather in Rome?")
        seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:get_weather", "assistant"]
    assert run.final_message is not None and run.final_message.content == "Sunny in Rome."
    first, second = (r.json for r in strict_server.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "tool_choice" not in second  # first round only
    assert second["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args}}],
    }


async def test_the_strict_server_refuses_what_llama_cpp_refuses(strict_server: OpenAIServer) -> None:
    # the check the test above relies on: a null content and tool_choice="required" are refused
    async with OpenAIChatModel("m", base_url=strict_server.base_url, api_key="k") as model:
        with pytest.raises(ModelBadRequestError, match="Invalid tool_choice"):
            await model.with_tools([WEATHER]).generate(HI, tool_choice="required")
    assert llama_cpp_check({"messages": [{"role": "assistant", "content": None}]}) is not None
    assert llama_cpp_check({"messages": [{"role": "assistant", "content": ""}], "tool_choice": "auto"}) is None
