"""adk.serve over real HTTP (uvicorn on loopback, httpx): the event mapping, threads, interrupts and resume,
client tools, errors and multi-agent runs, each stream checked by AG-UI's own validator (ag-ui-validate)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui
from pydantic import BaseModel

from adk import AgentTool, ChatModelAgent, ToolsConfig, add_session_value, set_sub_agents
from adk.chat_model.config import OutputConfig
from adk.middlewares.approval import ApprovalMiddleware
from adk.serve import create_app
from compose import get_resume_context, interrupt
from compose.schema import Message
from tests.serve.helpers import (
    Live,
    PolicyModel,
    calling,
    city_agent,
    city_tool,
    get_thread,
    get_weather,
    live_server,
    one_round,
    only_interrupt,
    parse_sse,
    pay,
    payer,
    post_run,
    ran,
    resolve,
    run_input,
    thread_path,
    tool_results,
    types,
    user,
    weather_agent,
)

pytestmark = pytest.mark.anyio


def valid(events: list[dict[str, Any]]) -> None:
    """The protocol's validator finds no error and no warning."""
    assert_valid_agui(events, max_warnings=0)


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


@city_tool
async def get_time(city: str) -> str:
    """Local time."""
    ran.append(("get_time", city))
    return f"9:00 in {city}"


@city_tool
async def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError("the weather service is down")


@city_tool
async def remember(city: str) -> str:
    """Remember a city in the session."""
    add_session_value("city", city)
    return "noted"


@city_tool
async def ask_date(city: str) -> str:
    """Ask the user for the travel date."""
    resume = get_resume_context()
    if not resume.is_target:
        raise interrupt({"message": f"When do you travel to {city}?", "responseSchema": {"type": "object"}})
    return f"travelling on {resume.data['date']}"


@pytest.fixture(autouse=True)
def _clear_ran() -> Iterator[None]:
    ran.clear()
    yield


@pytest.fixture
def agent_app() -> Iterator[Live]:
    """A few agents on one server."""
    agents: dict[str, Any] = {
        "plain": ChatModelAgent("plain", "answers", "You answer.", PolicyModel(lambda m: "Hello there!")),
        "weather": weather_agent("weather", "weather", "Sunny in Hangzhou.", "You tell the weather."),
        "parallel": ChatModelAgent(
            "parallel",
            "weather and time",
            "You help.",
            PolicyModel(
                one_round(
                    ("c1", "get_weather", '{"city": "Hangzhou"}'),
                    "Sunny, 9:00.",
                    ("c2", "get_time", '{"city": "Hangzhou"}'),
                )
            ),
            tools=[get_weather, get_time],
        ),
        "payer": payer(instruction="You pay invoices."),
        "broken": city_agent("broken", "fails", broken, "never", call_id="b1", instruction="You fail."),
        "stateful": city_agent(
            "stateful", "remembers", remember, "Noted Hangzhou.", call_id="s1", instruction="You remember."
        ),
        "asker": city_agent("asker", "asks", ask_date, "Have a good trip.", call_id="a1", instruction="You ask."),
    }
    with live_server(create_app(agents)) as live:
        yield live


async def test_plain_answer(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        events = await post_run(client, agent_app.agui("plain"), run_input("t-plain", "r1", [user("u1", "Hi")]))
    valid(events)
    assert types(events)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert events[0]["threadId"] == "t-plain" and events[0]["runId"] == "r1"
    deltas = of(events, "TEXT_MESSAGE_CONTENT")
    assert "".join(d["delta"] for d in deltas) == "Hello there!" and len(deltas) > 1
    assert all(d["delta"] for d in deltas)
    assert events[-1] == {
        "type": "RUN_FINISHED",
        "threadId": "t-plain",
        "runId": "r1",
        "result": "Hello there!",
        "outcome": {"type": "success"},
        "timestamp": events[-1]["timestamp"],
    }


async def test_streamed_tool_round_and_thread(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        events = await post_run(client, agent_app.agui("weather"), run_input("t-w", "r1", [user("u1", "Weather?")]))
        thread = await get_thread(client, agent_app.thread_url("weather", "t-w"))
    valid(events)
    kinds = types(events)
    assert kinds.index("TOOL_CALL_START") < kinds.index("TOOL_CALL_END") < kinds.index("TOOL_CALL_RESULT")
    start = of(events, "TOOL_CALL_START")[0]
    assert start["toolCallId"] == "c1" and start["toolCallName"] == "get_weather"
    args = of(events, "TOOL_CALL_ARGS")
    assert len(args) > 1 and json.loads("".join(a["delta"] for a in args)) == {"city": "Hangzhou"}
    result = of(events, "TOOL_CALL_RESULT")[0]
    assert result["toolCallId"] == "c1" and result["content"] == "sunny in Hangzhou"
    # the thread holds the turn under the ids the client saw
    ids = [m["id"] for m in thread["messages"]]
    assert ids == [
        "u1",
        start["parentMessageId"],
        result["messageId"],
        of(events, "TEXT_MESSAGE_START")[-1]["messageId"],
    ]
    assert thread["messages"][1]["toolCalls"][0]["id"] == "c1"
    assert thread["interrupts"] == []


async def test_parallel_tool_calls(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        events = await post_run(client, agent_app.agui("parallel"), run_input("t-p", "r1", [user("u1", "Both?")]))
    valid(events)
    assert [e["toolCallId"] for e in of(events, "TOOL_CALL_START")] == ["c1", "c2"]
    assert sorted(e["toolCallId"] for e in of(events, "TOOL_CALL_RESULT")) == ["c1", "c2"]
    assert sorted(ran) == [("get_time", "Hangzhou"), ("get_weather", "Hangzhou")]
    assert events[-1]["result"] == "Sunny, 9:00."


async def test_messages_are_not_appended_twice(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        first = await post_run(client, agent_app.agui("plain"), run_input("t-d", "r1", [user("u1", "Hi")]))
        answer = {"id": of(first, "TEXT_MESSAGE_START")[0]["messageId"], "role": "assistant", "content": "Hello there!"}
        again = [user("u1", "Hi"), answer, user("u2", "Again")]
        await post_run(client, agent_app.agui("plain"), run_input("t-d", "r2", again))
        thread = await get_thread(client, agent_app.thread_url("plain", "t-d"))
    assert [(m["role"], m["content"]) for m in thread["messages"]] == [
        ("user", "Hi"),
        ("assistant", "Hello there!"),
        ("user", "Again"),
        ("assistant", "Hello there!"),
    ]
    assert [m["id"] for m in thread["messages"]][:3] == ["u1", answer["id"], "u2"]


async def test_approval_pause_and_resume_with_edits(agent_app: Live) -> None:
    url = agent_app.agui("payer")
    async with httpx.AsyncClient() as client:
        paused = await post_run(client, url, run_input("t-pay", "r1", [user("u1", "Pay invoice 7")]))
        valid(paused)
        assert ran == []
        kinds = types(paused)
        assert kinds[-2:] == ["STEP_FINISHED", "RUN_FINISHED"] and "MESSAGES_SNAPSHOT" in kinds
        outcome = paused[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (pending,) = outcome["interrupts"]
        assert pending["reason"] == "tool_call" and pending["toolCallId"] == "p1"
        assert pending["responseSchema"]["properties"]["editedArgs"]["type"] == "object"
        snapshot = of(paused, "MESSAGES_SNAPSHOT")[0]["messages"]
        assert snapshot[-1]["toolCalls"][0]["id"] == "p1"
        thread = await get_thread(client, agent_app.thread_url("payer", "t-pay"))
        assert thread["interrupts"] == [
            {"id": pending["id"], "reason": "tool_call", "message": pending["message"], "toolCallId": "p1"}
        ]
        # pending interrupts block new input
        blocked = await post_run(client, url, run_input("t-pay", "r2", [user("u1", "Pay invoice 7")]))
        assert blocked[-1]["type"] == "RUN_ERROR" and blocked[-1]["code"] == "InterruptPendingError"
        resume = [
            {
                "interruptId": pending["id"],
                "status": "resolved",
                "payload": {"approved": True, "editedArgs": {"invoice": 8}},
            }
        ]
        resumed = await post_run(client, url, run_input("t-pay", "r3", snapshot, resume=resume))
        valid(resumed)
        assert types(resumed)[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
        assert of(resumed, "TOOL_CALL_START") == []  # the paused call is not streamed again
        assert [(r["toolCallId"], r["content"]) for r in of(resumed, "TOOL_CALL_RESULT")] == [("p1", "paid invoice 8")]
        assert resumed[-1]["type"] == "RUN_FINISHED" and resumed[-1]["outcome"] == {"type": "success"}
        assert ran == [("pay", "8")]
        # the interrupt is resolved: resuming it again is an error
        again = await post_run(client, url, run_input("t-pay", "r4", snapshot, resume=resume))
        assert again[-1]["code"] == "InterruptNotFoundError"
        valid(again)
        thread = await get_thread(client, agent_app.thread_url("payer", "t-pay"))
    assert thread["interrupts"] == []
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(
    ("entry", "content"),
    [
        ({"status": "resolved", "payload": {"approved": False, "reason": "too much"}}, "rejected by the user"),
        ({"status": "cancelled"}, "rejected by the user"),
    ],
)
async def test_approval_denied_or_cancelled(agent_app: Live, entry: dict[str, Any], content: str) -> None:
    url = agent_app.agui("payer")
    async with httpx.AsyncClient() as client:
        paused = await post_run(client, url, run_input("t-deny", "r1", [user("u1", "Pay invoice 7")]))
        pending = only_interrupt(paused)
        resumed = await post_run(
            client, url, run_input("t-deny", "r2", [], resume=[{"interruptId": pending["id"], **entry}])
        )
    valid(resumed)
    (result,) = of(resumed, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "p1" and content in result["content"]
    assert ran == []


async def test_unknown_interrupt_and_partial_resume(agent_app: Live) -> None:
    url = agent_app.agui("payer")
    async with httpx.AsyncClient() as client:
        none_pending = await post_run(
            client, url, run_input("t-x", "r1", [], resume=[{"interruptId": "nope", "status": "cancelled"}])
        )
        assert none_pending[-1]["code"] == "InterruptNotFoundError"
        await post_run(client, url, run_input("t-y", "r1", [user("u1", "Pay")]))
        wrong = await post_run(
            client, url, run_input("t-y", "r2", [], resume=[{"interruptId": "nope", "status": "cancelled"}])
        )
    assert wrong[-1]["code"] == "InterruptNotFoundError"
    valid(none_pending)
    valid(wrong)


async def test_input_required_interrupt(agent_app: Live) -> None:
    url = agent_app.agui("asker")
    async with httpx.AsyncClient() as client:
        paused = await post_run(client, url, run_input("t-ask", "r1", [user("u1", "Trip")]))
        pending = only_interrupt(paused)
        assert pending["reason"] == "input_required" and pending["toolCallId"] == "a1"
        assert pending["message"] == "When do you travel to Hangzhou?"
        resume = resolve(pending, {"date": "2026-12-02"})
        resumed = await post_run(client, url, run_input("t-ask", "r2", [], resume=resume))
    valid(paused)
    valid(resumed)
    assert of(resumed, "TOOL_CALL_RESULT")[0]["content"] == "travelling on 2026-12-02"


async def test_error_is_run_error_without_traceback(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        events = await post_run(client, agent_app.agui("broken"), run_input("t-b", "r1", [user("u1", "Weather?")]))
    valid(events)
    error = events[-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "ToolExecutionError"
    assert "tool 'broken' (call 'b1') failed (RuntimeError)" in error["message"]
    assert "the weather service is down" not in error["message"]  # the tool's own text stays in the server log
    assert "Traceback" not in json.dumps(events) and "/" + "work" not in error["message"]
    assert of(events, "RUN_FINISHED") == []


def leaky(messages: list[Message]) -> Message | str:
    raise RuntimeError("cannot read /etc/pyeino/secret.toml line 3: api_key = 'sk-123'")


async def test_a_model_exception_reaches_no_client(caplog: pytest.LogCaptureFixture) -> None:
    """A model's exception text (paths, configuration) is the server log's, with the run and thread ids: the
    client gets a typed code and a safe message."""
    agent = ChatModelAgent("leaky", "fails", model=PolicyModel(leaky))
    transport = httpx.ASGITransport(app=create_app(agent))
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        events = await post_run(client, "/agents/leaky/agui", run_input("t-l", "r-l", [user("u1", "Hi")]))
    valid(events)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "NodeRunError"
    assert events[-1]["message"] == "node [ChatModel] failed (RuntimeError); the server log has the details"
    assert "secret" not in json.dumps(events)
    (logged,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "'r-l'" in logged.getMessage() and "'t-l'" in logged.getMessage() and "secret.toml" in logged.getMessage()
    assert logged.exc_info is not None


async def test_state_snapshot_and_delta(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        body = run_input("t-s", "r1", [user("u1", "Remember")], state={"user": "alice"})
        events = await post_run(client, agent_app.agui("stateful"), body)
        thread = await get_thread(client, agent_app.thread_url("stateful", "t-s"))
    valid(events)
    assert of(events, "STATE_SNAPSHOT")[0]["snapshot"] == {"user": "alice"}
    assert [d["delta"] for d in of(events, "STATE_DELTA")] == [[{"op": "add", "path": "/city", "value": "Hangzhou"}]]
    assert thread["state"] == {"user": "alice", "city": "Hangzhou"}


async def test_delete_thread(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        await post_run(client, agent_app.agui("plain"), run_input("t-del", "r1", [user("u1", "Hi")]))
        assert (await client.delete(f"{agent_app.url}/agents/plain/threads/t-del")).status_code == 204
        assert (await client.get(f"{agent_app.url}/agents/plain/threads/t-del")).status_code == 404


async def test_agents_and_health(agent_app: Live) -> None:
    async with httpx.AsyncClient() as client:
        listed = (await client.get(f"{agent_app.url}/agents")).json()["agents"]
        health = (await client.get(f"{agent_app.url}/health")).json()
    weather = next(a for a in listed if a["name"] == "weather")
    assert weather["description"] == "weather" and weather["graph"].startswith("flowchart TD")
    assert health == {"status": "ok", "runs": 0}


async def test_request_bounds_and_unknown_agent(agent_app: Live) -> None:
    app = create_app(ChatModelAgent("a", "answers", model=PolicyModel(lambda m: "hi")), max_body_bytes=200)
    with live_server(app) as small:
        async with httpx.AsyncClient() as client:
            big = run_input("t", "r", [user("u1", "x" * 500)])
            assert (await client.post(small.agui("a"), json=big)).status_code == 413
            bad = await client.post(small.agui("a"), json={"threadId": "t", "runId": "r"})
            assert bad.status_code == 422 and bad.json()["field"] == "messages"
            wrong = await client.post(small.agui("a"), json={"threadId": 3, "runId": "r", "messages": []})
            assert wrong.status_code == 422 and wrong.json()["field"] == "threadId"
            missing = await client.post(small.agui("nobody"), json=run_input("t", "r", []))
            assert missing.status_code == 404 and missing.json()["agents"] == ["a"]
            not_sse = await client.post(
                small.agui("a"), json=run_input("t", "r", []), headers={"Accept": "application/json"}
            )
            assert not_sse.status_code == 406


class Weather(BaseModel):
    city: str
    celsius: float


async def test_structured_result() -> None:
    agent = ChatModelAgent(
        "typed",
        "typed weather",
        model=PolicyModel(lambda m: '{"city": "Hangzhou", "celsius": 21.5}'),
        output=OutputConfig(Weather),
    )
    with live_server(create_app(agent)) as live:
        async with httpx.AsyncClient() as client:
            events = await post_run(client, live.agui("typed"), run_input("t", "r", [user("u1", "Weather")]))
    valid(events)
    assert events[-1]["result"] == {"city": "Hangzhou", "celsius": 21.5}


async def test_client_tool_round_and_context() -> None:
    def policy(messages: list[Message]) -> Message | str:
        results = tool_results(messages)
        if not results:
            return calling(("k1", "get_weather", '{"city": "Hangzhou"}'), ("k2", "confirm", '{"what": "trip"}'))
        return f"The user said {results[-1].content}."

    model = PolicyModel(policy)
    agent = ChatModelAgent("planner", "plans", "You plan.", model, tools=[get_weather])
    confirm = {
        "name": "confirm",
        "description": "Ask the user",
        "parameters": {"type": "object", "properties": {"what": {"type": "string"}}},
    }
    context = [{"description": "the user's city", "value": "Hangzhou"}]
    with live_server(create_app(agent)) as live:
        url = live.agui("planner")
        async with httpx.AsyncClient() as client:
            first = await post_run(
                client, url, run_input("t-c", "r1", [user("u1", "Plan")], tools=[confirm], context=context)
            )
            valid(first)
            assert [e["toolCallName"] for e in of(first, "TOOL_CALL_START")] == ["get_weather", "confirm"]
            assert [e["toolCallId"] for e in of(first, "TOOL_CALL_RESULT")] == ["k1"]  # the server's tool only
            assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["k2"]}
            messages, offered = model.calls[0]
            assert "confirm" in [t.name for t in offered] and "get_weather" in [t.name for t in offered]
            assert "the user's city: Hangzhou" in messages[0].content and messages[0].role == "system"
            thread = await get_thread(client, live.thread_url("planner", "t-c"))
            history = thread["messages"]
            assert [m["role"] for m in history] == ["user", "assistant", "tool"] and thread["interrupts"] == []
            answer = {"id": "tool-k2", "role": "tool", "toolCallId": "k2", "content": "yes"}
            second = await post_run(client, url, run_input("t-c", "r2", [*history, answer], tools=[confirm]))
            thread = await get_thread(client, live.thread_url("planner", "t-c"))
    valid(second)
    assert second[-1]["result"] == "The user said yes."
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]
    assert thread["messages"][3]["id"] == "tool-k2"
    assert ran == [("get_weather", "Hangzhou")]


async def test_transfer_and_steps() -> None:
    def desk(messages: list[Message]) -> Message | str:
        return calling(("x1", "transfer_to_agent", '{"agent_name": "weatherman"}'))

    weatherman = weather_agent("weatherman", "tells the weather", "Sunny.")
    root = set_sub_agents(ChatModelAgent("desk", "routes", model=PolicyModel(desk)), [weatherman])
    with live_server(create_app(root)) as live:
        async with httpx.AsyncClient() as client:
            events = await post_run(client, live.agui("desk"), run_input("t", "r", [user("u1", "Weather?")]))
    valid(events)
    steps = [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "desk"),
        ("STEP_FINISHED", "desk"),
        ("STEP_STARTED", "weatherman"),
        ("STEP_FINISHED", "weatherman"),
    ]
    assert [e["toolCallName"] for e in of(events, "TOOL_CALL_START")] == ["transfer_to_agent", "get_weather"]
    assert events[-1]["result"] == "Sunny."


async def test_agent_tool_subagent_attribution() -> None:
    inner = weather_agent("researcher", "looks things up", "It is sunny.")

    def lead(messages: list[Message]) -> Message | str:
        if not tool_results(messages):
            return calling(("r1", "researcher", '{"request": "weather in Hangzhou"}'))
        return "Research says: sunny."

    agent = ChatModelAgent(
        "lead", "answers", model=PolicyModel(lead), tools=ToolsConfig([AgentTool(inner)], emit_internal_events=True)
    )
    with live_server(create_app(agent)) as live:
        async with httpx.AsyncClient() as client:
            events = await post_run(client, live.agui("lead"), run_input("t", "r", [user("u1", "Weather?")]))
    valid(events)
    (started,) = of(events, "SUBAGENT_STARTED")
    assert started["name"] == "researcher" and started["parentToolCallId"] == "r1"
    sub = started["subagentRunId"]
    inner_calls = [e for e in of(events, "TOOL_CALL_START") if e.get("subagentRunId") == sub]
    assert [e["toolCallName"] for e in inner_calls] == ["get_weather"]
    finished = of(events, "SUBAGENT_FINISHED")
    assert [f["subagentRunId"] for f in finished] == [sub]
    kinds = types(events)
    outer_result = next(i for i, e in enumerate(events) if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == "r1")
    assert kinds.index("SUBAGENT_FINISHED") < outer_result
    assert events[-1]["result"] == "Research says: sunny."
    # the inner agent's part is a step named after it, inside its invocation
    steps = [(e["type"], e["stepName"], e.get("subagentRunId")) for e in events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "lead", None),
        ("STEP_STARTED", "researcher", sub),
        ("STEP_FINISHED", "researcher", sub),
        ("STEP_FINISHED", "lead", None),
    ]
    inner_step = [i for i, e in enumerate(events) if e.get("stepName") == "researcher"]
    assert kinds.index("SUBAGENT_STARTED") < inner_step[0] < inner_step[1] < kinds.index("SUBAGENT_FINISHED")


async def test_an_inner_agents_step_closes_before_its_invocation_also_when_the_run_pauses() -> None:
    from adk.events import AgentEvent, AgentOutput, MessageVariant
    from adk.serve._mapping import EventMapper

    def said(agent: str, path: tuple[str, ...], internal: bool) -> AgentEvent:
        answer = MessageVariant(False, Message(role="assistant", content=f"{agent} here"))
        return AgentEvent(agent, path, AgentOutput(answer), internal=internal)

    mapper = EventMapper()
    out: list[Any] = []
    for event in (
        said("lead", ("lead",), False),
        said("researcher", ("lead", "researcher"), True),
        said("checker", ("lead", "researcher", "checker"), True),  # a transfer inside the agent tool
    ):
        out += [e async for batch in mapper.map(event) for e in batch]
    out += mapper.finish(suspended=True)
    kinds = [e.type.value for e in out]
    shown = [(k, getattr(e, "step_name", None)) for k, e in zip(kinds, out, strict=True) if "STEP" in k or "SUB" in k]
    assert shown == [
        ("STEP_STARTED", "lead"),
        ("SUBAGENT_STARTED", None),
        ("STEP_STARTED", "researcher"),
        ("SUBAGENT_STARTED", None),
        ("STEP_STARTED", "checker"),
        ("STEP_FINISHED", "checker"),
        ("SUBAGENT_FINISHED", None),
        ("STEP_FINISHED", "researcher"),
        ("SUBAGENT_FINISHED", None),
        ("STEP_FINISHED", "lead"),
    ]


gate = threading.Event()
holding = threading.Event()


@city_tool
async def slow(city: str) -> str:
    """Held until the test releases it."""
    holding.set()
    await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
    return f"slow answer for {city}"


@pytest.fixture
def held_app() -> Iterator[Live]:
    gate.clear()
    holding.clear()
    with live_server(create_app(city_agent("held", "waits", slow, "Done waiting.", call_id="h1"))) as live:
        yield live
    gate.set()


async def _until_tool_runs(response: httpx.Response) -> AsyncIterator[str]:
    """Read the stream until the held tool runs; the rest of its lines (the iterator is not closed: closing it
    would close the response, which is a disconnect)."""
    lines = response.aiter_lines()
    while '"TOOL_CALL_END"' not in await lines.__anext__():
        pass
    await anyio.to_thread.run_sync(holding.wait)
    return lines


async def test_second_run_on_a_busy_thread(held_app: Live) -> None:
    url = held_app.agui("held")
    body = run_input("t-busy", "r1", [user("u1", "Go")])
    async with httpx.AsyncClient(timeout=30) as client, client.stream("POST", url, json=body) as first:
        lines = await _until_tool_runs(first)
        busy = await post_run(client, url, run_input("t-busy", "r2", [user("u2", "Again")]))
        gate.set()
        rest = "".join([line async for line in lines])
    assert busy[-1]["type"] == "RUN_ERROR" and busy[-1]["code"] == "SessionBusyError"
    valid(busy)
    assert '"RUN_FINISHED"' in rest


async def test_disconnect_cancels_the_run(held_app: Live) -> None:
    url = held_app.agui("held")
    tracker = held_app.app.state.tracker
    host, port = held_app.url.removeprefix("http://").split(":")
    body = json.dumps(run_input("t-gone", "r1", [user("u1", "Go")])).encode()
    head = (
        f"POST /agents/held/agui HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    # a plain socket, so that hanging up is exactly what the server sees
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(head + body)
        seen = b""
        while b"TOOL_CALL_END" not in seen:
            seen += await sock.receive()
        await anyio.to_thread.run_sync(holding.wait)
    # the client hung up mid-run: the server's run ends, its lease and streams with it
    assert await anyio.to_thread.run_sync(tracker.wait_idle, 10)
    async with httpx.AsyncClient(timeout=30) as client:
        thread = await get_thread(client, held_app.thread_url("held", "t-gone"))
        # nothing of the run was appended; it paused at the hang-up, its turn kept with its checkpoint
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant"] and thread["interrupts"] == []
        gate.set()
        again = await post_run(client, url, run_input("t-gone", "r2", [user("u1", "Go")]))
    valid(again)
    assert again[-1]["result"] == "Done waiting."


async def test_auth_and_principals() -> None:
    async def auth(request: Any) -> str | None:
        token = request.headers.get("authorization", "")
        return token.removeprefix("Bearer ") or None

    agent = payer()
    alice, bob = {"Authorization": "Bearer alice"}, {"Authorization": "Bearer bob"}
    with live_server(create_app(agent, auth=auth)) as live:
        url = live.agui("payer")
        thread_url = f"{live.url}/agents/payer/threads/t-a"
        async with httpx.AsyncClient() as client:
            assert (await client.post(url, json=run_input("t-a", "r1", []))).status_code == 401
            assert (await client.get(f"{live.url}/agents")).status_code == 401
            async with client.stream("POST", url, json=run_input("t-a", "r1", [user("u1", "Pay")]), headers=alice) as r:
                paused = [
                    json.loads(line[6:]) for line in [x async for x in r.aiter_lines()] if line.startswith("data: ")
                ]
            pending = only_interrupt(paused)
            resume = resolve(pending, {"approved": True})
            assert (await client.get(thread_url, headers=bob)).status_code == 404
            assert (
                await client.post(url, json=run_input("t-a", "r2", [user("u2", "Hi")]), headers=bob)
            ).status_code == 404
            assert (
                await client.post(url, json=run_input("t-a", "r2", [], resume=resume), headers=bob)
            ).status_code == 404
            assert (await client.delete(thread_url, headers=bob)).status_code == 404
            assert (await client.get(thread_url, headers=alice)).status_code == 200
            async with client.stream("POST", url, json=run_input("t-a", "r3", [], resume=resume), headers=alice) as r:
                body = (await r.aread()).decode()
            assert '"paid invoice 7"' in body
            assert (await client.delete(thread_url, headers=alice)).status_code == 204


async def test_cors() -> None:
    agent = ChatModelAgent("a", "answers", model=PolicyModel(lambda m: "hi"))
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    with live_server(create_app(agent)) as closed:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{closed.url}/health", headers={"Origin": "https://app.example"})
            assert "access-control-allow-origin" not in response.headers
    with live_server(create_app(agent, cors_origins=["https://app.example"])) as open_:
        async with httpx.AsyncClient() as client:
            response = await client.options(open_.agui("a"), headers=preflight)
            assert response.status_code == 200
            assert response.headers["access-control-allow-origin"] == "https://app.example"
            other = await client.options(open_.agui("a"), headers={**preflight, "Origin": "https://evil.example"})
            assert "access-control-allow-origin" not in other.headers


async def test_the_app_runs_on_the_test_loop_too() -> None:
    """The ASGI app itself is anyio only: driven in process (httpx's ASGI transport) it runs on asyncio and trio."""
    agent = payer()
    transport = httpx.ASGITransport(app=create_app(agent))
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        paused = await post_run(client, "/agents/payer/agui", run_input("t", "r1", [user("u1", "Pay")]))
        pending = only_interrupt(paused)
        resume = resolve(pending, {"approved": True})
        resumed = await post_run(client, "/agents/payer/agui", run_input("t", "r2", [], resume=resume))
    valid(paused)
    valid(resumed)
    assert resumed[-1]["result"] == "Done." and ran == [("pay", "7")]


async def test_bad_approval_payload(agent_app: Live, caplog: pytest.LogCaptureFixture) -> None:
    """A resume payload that does not fit its approval is the client's mistake: 422 naming the field, before
    anything runs (the interrupt stays pending), and one log line without a traceback."""
    caplog.set_level(logging.INFO, logger="adk.serve")
    url = agent_app.agui("payer")
    async with httpx.AsyncClient() as client:
        paused = await post_run(client, url, run_input("t-bad", "r1", [user("u1", "Pay invoice 7")]))
        pending = only_interrupt(paused)
        for payload, field in [
            ({"approve": "yes"}, "resume[0].payload.approved"),
            ({"approved": True, "editedArgs": "invoice 8"}, "resume[0].payload.editedArgs"),
            ({"approved": True, "editedArgs": [8]}, "resume[0].payload.editedArgs"),
            ("yes", "resume[0].payload"),
        ]:
            refused = await client.post(url, json=run_input("t-bad", "r2", [], resume=resolve(pending, payload)))
            assert refused.status_code == 422, (payload, refused.text)
            assert refused.json()["field"] == field and refused.json()["interruptId"] == pending["id"]
            assert field in refused.json()["error"]
        thread = await get_thread(client, agent_app.thread_url("payer", "t-bad"))
    assert [i["id"] for i in thread["interrupts"]] == [pending["id"]]  # still pending: nothing ran
    assert ran == []
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 4 and not [r for r in caplog.records if r.exc_info]


async def test_edited_arguments_are_stored_as_run() -> None:
    """Approved with edits, the call that ran is what the thread, the resume's MESSAGES_SNAPSHOT and the model's
    next call show (not the model's original arguments)."""
    model = PolicyModel(one_round(("p1", "pay", '{"invoice": 7}'), "Done."))
    agent = ChatModelAgent(
        "payer", "pays", "", model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, _args: name == "pay")]
    )
    transport = httpx.ASGITransport(app=create_app(agent))
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        url = "/agents/payer/agui"
        paused = await post_run(client, url, run_input("t", "r1", [user("u1", "Pay invoice 7")]))
        resume = resolve(only_interrupt(paused), {"approved": True, "editedArgs": {"invoice": 8}})
        resumed = await post_run(client, url, run_input("t", "r2", [], resume=resume))
        thread = await get_thread(client, thread_path("payer", "t"))
    valid(resumed)
    assert ran == [("pay", "8")]
    (snapshot,) = of(resumed, "MESSAGES_SNAPSHOT")
    assert snapshot["messages"][-1]["toolCalls"][0]["function"]["arguments"] == '{"invoice": 8}'
    assert thread["messages"][1]["toolCalls"][0]["function"]["arguments"] == '{"invoice": 8}'
    seen, _ = model.calls[-1]
    assert [c.function.arguments for m in seen for c in m.tool_calls] == ['{"invoice": 8}']


def test_interrupt_reasons() -> None:
    from adk.serve._threads import describe
    from compose.interrupt import InterruptCtx

    confirm = describe(InterruptCtx("i1", "agent:a", {"reason": "confirmation", "message": "Go on?"}), "cp")
    assert (confirm.reason, confirm.message, confirm.tool_call_id) == ("confirmation", "Go on?", None)
    asked = describe(InterruptCtx("i2", "agent:a;tool:ask:c9", "Which date?"), "cp")
    assert (asked.reason, asked.message, asked.tool_call_id) == ("input_required", "Which date?", "c9")


async def test_a_thread_whose_checkpoint_is_gone_is_not_paused() -> None:
    from compose.checkpoint import InMemoryCheckPointStore

    store = InMemoryCheckPointStore()
    agent = payer()
    transport = httpx.ASGITransport(app=create_app(agent, checkpoint_store=store))
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        paused = await post_run(client, "/agents/payer/agui", run_input("t", "r1", [user("u1", "Pay")]))
        assert paused[-1]["outcome"]["type"] == "interrupt"
        # the paused run's checkpoint disappears (say its resume completed in a process that died right after)
        for key in await store.list("pyeino.serve/run/"):
            await store.delete(key)
        again = await post_run(client, "/agents/payer/agui", run_input("t", "r2", [user("u2", "Hi")]))
        thread = await get_thread(client, thread_path("payer", "t"))
    assert again[-1]["type"] == "RUN_FINISHED" and again[-1]["outcome"]["type"] == "interrupt"
    assert [i["toolCallId"] for i in thread["interrupts"]] == ["p1"]


async def test_cross_site_requests_are_refused() -> None:
    """A page on another origin cannot run an agent as the signed-in user: a "simple" (text/plain) POST is 415,
    a request from an origin neither the server's own nor in ``cors_origins`` 403 (AG-UI, A2A, DELETE), while the
    server's own pages and the allowed origins go through."""

    async def cookie(request: Any) -> str | None:
        return request.cookies.get("session")

    agent = ChatModelAgent("a", "answers", model=PolicyModel(lambda m: "hi"))
    app = create_app(agent, auth=cookie, cors_origins=["https://app.example"], a2a=True)
    with live_server(app) as live:
        url, here = live.agui("a"), live.url
        body = json.dumps(run_input("t", "r1", [user("u1", "Hi")]))
        async with httpx.AsyncClient(cookies={"session": "alice"}) as client:
            simple = await client.post(url, content=body, headers={"Content-Type": "text/plain", "Origin": here})
            assert simple.status_code == 415 and "application/json" in simple.json()["error"]
            formish = await client.post(
                url, content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
            )
            assert formish.status_code == 415
            evil = {"Content-Type": "application/json", "Origin": "https://evil.example"}
            assert (await client.post(url, content=body, headers=evil)).status_code == 403
            jsonrpc = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}})
            assert (await client.post(f"{here}/a2a/a/", content=jsonrpc, headers=evil)).status_code == 403
            a2a_plain = {"Content-Type": "text/plain"}
            assert (await client.post(f"{here}/a2a/a/", content=jsonrpc, headers=a2a_plain)).status_code == 415
            assert (await client.delete(f"{here}/agents/a/threads/t", headers=evil)).status_code == 403
            assert app.state.tracker.started == 0  # nothing ran
            # the server's own page, an allowed origin and a client without Origin (not a browser) are served
            for n, origin in enumerate(({"Origin": here}, {"Origin": "https://app.example"}, {})):
                ok = json.dumps(run_input(f"t{n}", "r1", [user("u1", "Hi")]))
                headers = {"Content-Type": "application/json", **origin}
                async with client.stream("POST", url, content=ok, headers=headers) as response:
                    assert response.status_code == 200
                    events = parse_sse((await response.aread()).decode())
                assert events[-1]["type"] == "RUN_FINISHED"
            assert (await client.delete(f"{here}/agents/a/threads/t0", headers={"Origin": here})).status_code == 204


async def test_only_a_non_empty_string_is_a_principal(caplog: pytest.LogCaptureFixture) -> None:
    """An auth hook answering False, None or "" lets nobody in (401 on every route, A2A's too); an answer of
    another type is the hook's bug: 401, and logged naming it."""
    answers: dict[str, Any] = {"false": False, "none": None, "empty": "", "number": 42, "alice": "alice"}

    async def auth(request: Any) -> Any:
        return answers[request.headers.get("x-who", "none")]

    app = create_app(ChatModelAgent("a", "answers", model=PolicyModel(lambda m: "hi")), auth=auth, a2a=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        jsonrpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}
        for who in ("false", "none", "empty", "number"):
            headers = {"x-who": who}
            assert (
                await client.post("/agents/a/agui", json=run_input("t", "r1", []), headers=headers)
            ).status_code == 401
            assert (await client.get("/agents/a/threads/t", headers=headers)).status_code == 401
            assert (await client.get("/agents", headers=headers)).status_code == 401
            assert (await client.post("/a2a/a/", json=jsonrpc, headers=headers)).status_code == 401
        async with client.stream(
            "POST", "/agents/a/agui", json=run_input("t", "r1", [user("u1", "Hi")]), headers={"x-who": "alice"}
        ) as response:
            events = parse_sse((await response.aread()).decode())
        assert events[-1]["type"] == "RUN_FINISHED"
        # the thread is alice's, not the principal "False"'s
        assert (await client.get("/agents/a/threads/t", headers={"x-who": "false"})).status_code == 401
    bugs = [r.getMessage() for r in caplog.records if "auth hook" in r.getMessage()]
    assert bugs and all("42 (int)" in m for m in bugs)
