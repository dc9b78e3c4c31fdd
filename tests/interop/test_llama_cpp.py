"""Interop with llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``, SmolLM2-135M), a server no one
here wrote, through the real ``OpenAIChatModel``.

Skipped unless ``PYEINO_LLAMA_URL`` is set; start the server with ``eval "$(scripts/interop/llama_server.sh)"``
and run ``.venv/bin/python -m pytest -m interop tests/interop`` from the checkout (the Python the test extra is
installed in; see the README's "Interop with llama.cpp").

A 135M model's text means little, so the tests assert protocol facts: requests accepted, a forced tool call parsed
with valid JSON arguments for the named tool, the conversation with the tool result accepted, a non-empty final
text, finish reasons, and usage where the server reports it. Sampling is pinned (temperature 0, a seed) and
answers are bounded (``max_tokens``) so a run takes seconds.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from adk.chat_model.config import Limits, ModelConfig

URL = os.environ.get("PYEINO_LLAMA_URL", "")
if not URL:
    pytest.skip(
        'PYEINO_LLAMA_URL is not set: start the server with eval "$(scripts/interop/llama_server.sh)", then run '
        ".venv/bin/python -m pytest -m interop tests/interop",
        allow_module_level=True,
    )

from adk import ChatModelAgent, Runner  # noqa: E402
from compose.errors import ModelServerError  # noqa: E402
from compose.models.openai_model import OpenAIChatModel  # noqa: E402
from compose.schema import Message, concat_messages, user_message  # noqa: E402
from compose.tools import tool  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
MODEL = os.environ.get("PYEINO_LLAMA_MODEL", "smollm2")  # the alias scripts/interop/llama_server.sh serves
# temperature 0 and a seed: the server's sampling is as repeatable as it gets; max_tokens bounds every answer
SAMPLING: dict[str, Any] = {"temperature": 0.0, "seed": 7, "max_tokens": 48}
WEATHER_CALLS: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather forecast for a city.

    Args:
        city: the city name
    """
    WEATHER_CALLS.append(city)
    return json.dumps({"city": city, "forecast": "sunny", "temperature_c": 22})


@pytest.fixture
async def model() -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel(MODEL, base_url=URL, api_key="not-needed", **SAMPLING) as m:
        yield m


def assert_usage(msg: Message) -> None:
    usage = msg.response_meta.usage if msg.response_meta is not None else None
    assert usage is not None, f"no usage in {msg!r}"
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


async def test_generate(model: OpenAIChatModel) -> None:
    msg = await model.generate([user_message("Say hello in one short sentence.")])
    assert msg.role == "assistant"
    assert msg.content.strip()
    assert msg.response_meta is not None and msg.response_meta.finish_reason in ("stop", "length")
    assert_usage(msg)


async def test_stream(model: OpenAIChatModel) -> None:
    reader = await model.stream([user_message("Count from one to five.")])
    async with reader:
        chunks = [chunk async for chunk in reader]
    assert len(chunks) > 1  # tokens arrive as the server generates them
    msg = concat_messages(chunks)
    assert msg.role == "assistant" and msg.content.strip()
    assert msg.response_meta is not None and msg.response_meta.finish_reason in ("stop", "length")
    if msg.response_meta.usage is not None:  # llama-cpp-python's server does not honour include_usage
        assert msg.response_meta.usage.total_tokens > 0


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_forced_named_tool_call(model: OpenAIChatModel, streaming: bool) -> None:
    bound = model.with_tools([get_weather.info()])
    question = [user_message("What is the weather in Paris?")]
    if streaming:
        reader = await bound.stream(question, tool_choice="get_weather")
        async with reader:
            msg = concat_messages([chunk async for chunk in reader])
    else:
        msg = await bound.generate(question, tool_choice="get_weather")
        assert_usage(msg)
    assert msg.response_meta is not None and msg.response_meta.finish_reason == "tool_calls"
    (call,) = msg.tool_calls
    assert call.function.name == "get_weather" and call.id
    args = json.loads(call.function.arguments)  # the server's grammar follows the tool's JSON schema
    assert isinstance(args, dict) and isinstance(args.get("city"), str)


async def test_streaming_with_automatic_tool_choice_is_a_truncated_stream(model: OpenAIChatModel) -> None:
    """The server refuses ``tool_choice="auto"`` with ``stream=true`` only after its 200 (its log says "Automatic
    streaming tool choice is not supported") and closes the stream empty: a retryable ModelServerError, not an
    empty answer or a hang. (Without a tool_choice it offers no tools at all; "auto" works without streaming.)"""
    bound = model.with_tools([get_weather.info()])
    reader = await bound.stream([user_message("What is the weather in Paris?")], tool_choice="auto")
    async with reader:
        with pytest.raises(ModelServerError, match="stream truncated") as caught:
            async for _ in reader:
                pass
    assert caught.value.retryable


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "streaming"])
async def test_two_round_tool_conversation_through_the_runner(model: OpenAIChatModel, streaming: bool) -> None:
    """Round 1: the forced named tool call, run; its result goes back in the second request; round 2: text."""
    agent = ChatModelAgent(
        "weather_agent",
        "answers weather questions",
        "You answer questions about the weather. Use the tool, then answer in one sentence.",
        model=model,
        tools=[get_weather],
        # llama.cpp's server refuses "required"; a named function it accepts
        model_config=ModelConfig(tool_choice="get_weather"),
        limits=Limits(timeout=120),
        max_iterations=4,
    )
    WEATHER_CALLS.clear()
    roles: list[str] = []
    answers: list[Message] = []
    async with Runner(agent, enable_streaming=streaming).query("What is the weather in Paris?") as run:
        async for event in run:
            assert event.error is None, f"the run failed: {event.error!r}"
            variant = event.message
            assert variant is not None
            assert variant.is_streaming == (streaming and variant.role == "assistant")
            msg = await variant.get_message()
            roles.append(msg.role)
            if msg.role == "assistant":
                answers.append(msg)
        final = run.final_message
    assert roles == ["assistant", "tool", "assistant"]
    first, second = answers
    (call,) = first.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] == WEATHER_CALLS[0]  # the tool ran on the parsed arguments
    assert not second.tool_calls and second.content.strip()  # the request with the tool result was accepted
    assert final is not None and final.content == second.content
    if not streaming:
        assert_usage(first)
        assert_usage(second)
        assert run.total_tokens >= sum(m.response_meta.usage.total_tokens for m in answers)  # type: ignore[union-attr]


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("travel_agent_interop", ROOT / "examples" / "travel_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def test_travel_agent_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo picks the server from OPENAI_BASE_URL; its agent (three tools, streaming) runs to an answer."""
    monkeypatch.setenv("OPENAI_BASE_URL", URL)
    monkeypatch.setenv("OPENAI_MODEL", MODEL)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    demo = load_demo()
    chosen = demo.choose_model()
    assert isinstance(chosen, OpenAIChatModel) and chosen.model == MODEL
    assert str(chosen.client.base_url).rstrip("/") == URL.rstrip("/")
    await chosen.aclose()
    # the demo's agent on the same server, with sampling pinned and answers bounded as above
    out = io.StringIO()
    async with OpenAIChatModel(MODEL, base_url=URL, api_key="not-needed", **SAMPLING) as model:
        result = await demo.run_demo(model, out=out)
    assert result.answer.strip(), out.getvalue()
    assert set(result.tools) <= {"get_weather", "search_places", "estimate_route"}
    assert f"Final answer: {result.answer}" in out.getvalue()


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "streaming"])
async def test_a_run_recorded_on_the_server_replays_without_it(streaming: bool, tmp_path: Path) -> None:
    """The two-round conversation recorded on a cassette against the server, then replayed against a URL where
    nothing listens, in both paradigms: the same events and final answer; the tool does not run again."""
    from compose.testing import cassette

    async def run(url: str, mode: Any, streamed: bool) -> tuple[list[Any], Any]:
        async with cassette(tmp_path / "llama.json", mode) as tape, OpenAIChatModel(
            MODEL, base_url=url, api_key="not-needed", **SAMPLING
        ) as m:
            agent = ChatModelAgent(
                "weather_agent",
                "answers weather questions",
                "You answer questions about the weather. Use the tool, then answer in one sentence.",
                model=tape.wrap(m),
                tools=[tape.wrap_tool(get_weather)],
                model_config=ModelConfig(tool_choice="get_weather"), limits=Limits(timeout=120),
                max_iterations=4,
            )
            seen = []
            async with Runner(agent, enable_streaming=streamed).query("What is the weather in Paris?") as r:
                async for event in r:
                    assert event.error is None, f"the run failed: {event.error!r}"
                    assert event.message is not None
                    seen.append((await event.message.get_message()).model_dump())
                return seen, r.final_message

    recorded = await run(URL, "all", streaming)
    WEATHER_CALLS.clear()
    for streamed in (False, True):
        assert await run("http://127.0.0.1:9/v1", "none", streamed) == recorded
    assert WEATHER_CALLS == []
