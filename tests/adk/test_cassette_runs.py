"""Cassettes end to end: agent runs recorded through the real ``openai`` client against the loopback server, then
replayed with the server stopped: the same events and the same final answer, in invoke and streaming runs, for a
ReAct agent, an agent with an agent tool (two concurrent calls), a run paused for approval and resumed, and
parallel tool calls whose results arrive in another order than at recording."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from adk.agents.agent_tool import AgentTool
from adk.chat_model.agent import ChatModelAgent
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import AgentRun, Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import CassetteMismatchError
from compose.models import OpenAIChatModel
from compose.schema import Message, ToolInfo
from compose.testing import Cassette, cassette
from compose.tools import tool
from tests.compose.models.openai_server import (
    OpenAIServer,
    Reply,
    completion,
    json_reply,
    sse,
    text_chunks,
    tool_call_chunks,
)

pytestmark = pytest.mark.anyio

API_KEY = "sk-test-CASSETTE-SECRET-0042"
DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens there: a replay that made a request would fail


@tool
def get_weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city.
    """
    return json.dumps({"city": city, "forecast": "rain after 3pm"})


@tool
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


# --- what a run looked like ------------------------------------------------------------------------------------


def shape(msg: Message) -> dict[str, Any]:
    return msg.model_dump(mode="json")


async def events(run: AgentRun | Any) -> tuple[list[tuple[Any, ...]], Any]:
    """Every event of the run, each message read whole; and the run's final message (or its interrupt ids)."""
    out: list[tuple[Any, ...]] = []
    paused: list[str] | None = None
    async with run:
        async for ev in run:
            msg = await ev.message.get_message() if ev.message is not None else None
            action = ev.action
            if action is not None and action.interrupted is not None:
                paused = action.interrupted.ids
                action = None
            out.append(
                (
                    ev.agent_name,
                    ev.run_path,
                    ev.message.role if ev.message is not None else None,
                    ev.message.tool_name if ev.message is not None else None,
                    shape(msg) if msg is not None else None,
                    repr(action),
                    repr(ev.error),
                    ev.internal,
                )
            )
        final = run.final_message
    return out, (paused if paused is not None else shape(final) if final is not None else None)


@asynccontextmanager
async def openai_model(url: str) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel("test-model", base_url=url, api_key=API_KEY) as m:
        yield m


def reply(streaming: bool, *, text: str = "", calls: list[tuple[str, str, str]] = ()) -> Reply:  # type: ignore[assignment]
    """One model answer as the server sends it: SSE chunks when streaming, else a chat.completion body."""
    if streaming:
        chunks = text_chunks(text, size=4) if text else []
        for i, (id_, name, args) in enumerate(calls):
            chunks += tool_call_chunks(i, id_, name, args, size=5)
        return sse(chunks, finish_reason="tool_calls" if calls else "stop", usage=(11, 7))
    wire = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
    body = completion(text, tool_calls=wire or None, finish_reason="tool_calls" if calls else "stop", usage=(11, 7))
    return json_reply(body)


async def record_and_replay(
    path: Path,
    replies: Callable[[bool], list[Reply]],
    scenario: Callable[[Cassette, str, bool], Any],
    recorded_streaming: bool,
) -> tuple[Any, dict[bool, Any]]:
    """Record ``scenario`` (an async function of the cassette, base URL and streaming mode) against the server,
    then replay it with the server stopped in both paradigms."""
    with OpenAIServer(replies(recorded_streaming)) as server:
        async with cassette(path, "all") as tape:
            recorded = await scenario(tape, server.base_url, recorded_streaming)
        assert len(server.requests) == len(replies(recorded_streaming))
    replayed = {}
    for streaming in (False, True):
        async with cassette(path, "none") as tape:
            replayed[streaming] = await scenario(tape, DEAD_URL, streaming)
            assert tape.recorded == 0
    assert API_KEY not in text_of(path)
    return recorded, replayed


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --- a ReAct agent ---------------------------------------------------------------------------------------------


def weather_replies(streaming: bool) -> list[Reply]:
    return [
        reply(streaming, text="Checking.", calls=[("call_w", "get_weather", '{"city": "Hangzhou"}')]),
        reply(streaming, text="Rain after 3pm: take an umbrella."),
    ]


async def weather_run(tape: Cassette, url: str, streaming: bool) -> Any:
    async with openai_model(url) as model:
        agent = ChatModelAgent("travel", "trips", "Plan trips.", tape.wrap(model), [tape.wrap_tool(get_weather)])
        return await events(Runner(agent, enable_streaming=streaming).query("Weather tomorrow?"))


@pytest.mark.parametrize("recorded_streaming", [False, True])
async def test_react_agent_replays_the_same_events_in_both_paradigms(tmp_path: Path, recorded_streaming: bool) -> None:
    recorded, replayed = await record_and_replay(tmp_path / "c.json", weather_replies, weather_run, recorded_streaming)
    seen, final = recorded
    assert [e[2:4] for e in seen] == [("assistant", None), ("tool", "get_weather"), ("assistant", None)]
    assert final["content"] == "Rain after 3pm: take an umbrella."
    for streaming in (False, True):
        assert replayed[streaming] == recorded


async def test_a_cassette_never_holds_the_api_key_or_an_authorization_header(tmp_path: Path) -> None:
    path = tmp_path / "secret.json"
    with OpenAIServer([reply(False, text="hi")]) as server:
        async with cassette(path, "all", secret_keys=["x-team-key"]) as tape, openai_model(server.base_url) as m:
            answer = await tape.wrap(m).generate(
                [Message(role="user", content="hello")],
                extra_headers={"Authorization": f"Bearer {API_KEY}", "X-Team-Key": "team-1", "X-Trace": "t1"},
                api_key=API_KEY,
                temperature=0.5,
            )
        assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"  # the call itself had the key
    assert answer.content == "hi"
    text = text_of(path)
    assert API_KEY not in text and "team-1" not in text
    options = json.loads(text)["interactions"][0]["request"]["options"]
    assert options == {
        "api_key": "<redacted>",
        "extra_headers": {"Authorization": "<redacted>", "X-Team-Key": "<redacted>", "X-Trace": "t1"},
        "temperature": 0.5,
    }


async def test_a_different_request_fails_the_replay_with_a_diff_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    await record_and_replay(path, weather_replies, weather_run, True)
    async with cassette(path, "none") as tape, openai_model(DEAD_URL) as model:
        agent = ChatModelAgent("travel", "trips", "Plan trips.", tape.wrap(model), [tape.wrap_tool(get_weather)])
        async with Runner(agent).query("Weather the day after?") as run:
            errors = [ev.error async for ev in run if ev.error is not None]
    (error,) = errors
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, CassetteMismatchError):
        cause = cause.__cause__
    assert isinstance(cause, CassetteMismatchError), repr(error)
    assert cause.kind == "model" and cause.field == "messages[1].content"
    assert "messages[1].content" in str(cause)
    assert '-      "content": "Weather tomorrow?",' in cause.diff
    assert '+      "content": "Weather the day after?",' in cause.diff


# --- an agent with an agent tool, called twice at once ------------------------------------------------------


def agent_tool_replies(streaming: bool) -> list[Reply]:
    ask = [
        ("call_a", "researcher", '{"request": "tea houses"}'),
        ("call_b", "researcher", '{"request": "snack streets"}'),
    ]
    return [
        reply(streaming, calls=ask),
        # the two inner runs ask at the same time: whichever request arrives first gets the first answer
        reply(streaming, text="Found one."),
        reply(streaming, text="Found two."),
        reply(streaming, text="Here is the plan."),
    ]


async def agent_tool_run(tape: Cassette, url: str, streaming: bool) -> Any:
    async with openai_model(url) as outer_model, openai_model(url) as inner_model:
        researcher = ChatModelAgent("researcher", "finds places", "Research.", tape.wrap(inner_model))
        agent = ChatModelAgent("planner", "plans", "Plan.", tape.wrap(outer_model), [AgentTool(researcher)])
        return await events(Runner(agent, enable_streaming=streaming).query("Plan a day"))


@pytest.mark.parametrize("recorded_streaming", [False, True])
async def test_agent_tool_calls_replay_by_content(tmp_path: Path, recorded_streaming: bool) -> None:
    recorded, replayed = await record_and_replay(
        tmp_path / "c.json", agent_tool_replies, agent_tool_run, recorded_streaming
    )
    seen, final = recorded
    assert final["content"] == "Here is the plan."
    assert sorted(e[4]["content"] for e in seen if e[2] == "tool") == ["Found one.", "Found two."]
    for streaming in (False, True):
        got, got_final = replayed[streaming]
        assert got_final == final
        assert parallel_tools_sorted(got) == parallel_tools_sorted(seen)


def parallel_tools_sorted(seen: list[tuple[Any, ...]]) -> list[Any]:
    """The events with each run of consecutive tool events sorted (parallel tools' events follow completion)."""
    out: list[Any] = []
    group: list[Any] = []
    for e in seen:
        if e[2] == "tool":
            group.append(e)
            continue
        out += sorted(group, key=repr)
        group = []
        out.append(e)
    return out + sorted(group, key=repr)


# --- a run paused for approval, then resumed ----------------------------------------------------------------


def approval_replies(streaming: bool) -> list[Reply]:
    return [
        reply(streaming, text="Paying.", calls=[("call_p", "pay", '{"amount": 5}')]),
        reply(streaming, text="All paid."),
    ]


async def approval_run(tape: Cassette, url: str, streaming: bool) -> Any:
    async with openai_model(url) as model:
        agent = ChatModelAgent(
            "ops",
            "pays",
            "Pay.",
            tape.wrap(model),
            [tape.wrap_tool(pay)],
            middlewares=[ApprovalMiddleware(lambda n, a: n == "pay")],
        )
        runner = Runner(agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())
        first, paused = await events(runner.query("pay 5", checkpoint_id="job"))
        targets = {i: ApprovalDecision(approved=True) for i in paused}
        second, final = await events(runner.resume("job", targets=targets))
        return first, len(paused), second, final  # interrupt ids are fresh per run (uuids)


@pytest.mark.parametrize("recorded_streaming", [False, True])
async def test_a_paused_and_resumed_run_replays(tmp_path: Path, recorded_streaming: bool) -> None:
    recorded, replayed = await record_and_replay(
        tmp_path / "c.json", approval_replies, approval_run, recorded_streaming
    )
    _, paused, second, final = recorded
    assert paused == 1 and final["content"] == "All paid."
    assert [e[4]["content"] for e in second if e[2] == "tool"] == ["paid 5"]
    for streaming in (False, True):
        assert replayed[streaming] == recorded


# --- parallel tool calls finishing in another order at replay ------------------------------------------------


class Ordered:
    """A tool that finishes only after ``after`` is set, and then sets ``done`` (the test orders completions)."""

    def __init__(self, inner: Any, after: anyio.Event | None, done: anyio.Event) -> None:
        self.inner, self.after, self.done = inner, after, done

    def info(self) -> ToolInfo:
        return self.inner.info()  # type: ignore[no-any-return]

    async def run(self, arguments: str) -> str:
        if self.after is not None:
            await self.after.wait()
        try:
            return await self.inner.run(arguments)  # type: ignore[no-any-return]
        finally:
            self.done.set()


def parallel_replies(streaming: bool) -> list[Reply]:
    calls = [("c1", "get_weather", '{"city": "Hangzhou"}'), ("c2", "get_weather", '{"city": "Suzhou"}')]
    return [reply(streaming, calls=calls), reply(streaming, text="Both rainy.")]


def parallel_scenario(order: list[str]) -> Callable[[Cassette, str, bool], Any]:
    async def scenario(tape: Cassette, url: str, streaming: bool) -> Any:
        finished: list[str] = []

        @tool(name="get_weather")
        def weather(city: str) -> str:
            """Weather for a city.

            Args:
                city: the city.
            """
            finished.append(city)
            return f"rain in {city}"

        first, second = anyio.Event(), anyio.Event()
        by_city = {order[0]: Ordered(tape.wrap_tool(weather), None, first)}
        by_city[order[1]] = Ordered(tape.wrap_tool(weather), first, second)

        class Router:
            def info(self) -> ToolInfo:
                return get_weather.info()

            async def run(self, arguments: str) -> str:
                return await by_city[json.loads(arguments)["city"]].run(arguments)

        async with openai_model(url) as model:
            agent = ChatModelAgent("w", "weather", "Weather.", tape.wrap(model), [Router()])
            seen, final = await events(Runner(agent, enable_streaming=streaming).query("Weather in two cities?"))
        tool_order = [e[4]["content"] for e in seen if e[2] == "tool"]
        return seen, final, tool_order, finished

    return scenario


@pytest.mark.parametrize("recorded_streaming", [False, True])
async def test_parallel_tool_results_arriving_in_another_order_replay(tmp_path: Path, recorded_streaming: bool) -> None:
    path = tmp_path / "c.json"
    with OpenAIServer(parallel_replies(recorded_streaming)) as server:
        async with cassette(path, "all") as tape:
            seen, final, order, ran = await parallel_scenario(["Hangzhou", "Suzhou"])(
                tape, server.base_url, recorded_streaming
            )
    assert ran == ["Hangzhou", "Suzhou"] and order == ["rain in Hangzhou", "rain in Suzhou"]
    for streaming in (False, True):
        async with cassette(path, "none") as tape:
            got, got_final, got_order, got_ran = await parallel_scenario(["Suzhou", "Hangzhou"])(
                tape, DEAD_URL, streaming
            )
        assert got_ran == []  # replayed: the tool did not run
        assert got_order == ["rain in Suzhou", "rain in Hangzhou"]  # the events follow completion
        assert got_final == final
        assert parallel_tools_sorted(got) == parallel_tools_sorted(seen)


async def test_a_mismatch_is_not_retried(tmp_path: Path) -> None:
    from adk.chat_model.retry import ModelRetryConfig, default_is_retryable
    from compose.models import ScriptedChatModel

    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        await tape.wrap(ScriptedChatModel(["hi"])).generate([Message(role="user", content="hello")])
    async with cassette(path, "none") as tape:
        model = tape.wrap(ScriptedChatModel([]))
        retry = ModelRetryConfig(max_retries=3, backoff=lambda attempt: 0.0)
        agent = ChatModelAgent("a", "d", model=model, model_retry=retry)
        async with Runner(agent).query("something else") as run:
            errors = [ev.error async for ev in run if ev.error is not None]
        assert tape.replayed == 0
    (error,) = errors
    assert isinstance(error, CassetteMismatchError) or isinstance(error.__cause__, CassetteMismatchError), repr(error)
    mismatch = CassetteMismatchError("x", kind="model", field=None, request={}, nearest=None, diff="")
    assert not default_is_retryable(mismatch)
