"""A client that hangs up mid-run (real HTTP, a plain socket): the run pauses at once, leaving its checkpoint, and
the thread's next run with the same input continues it: what had finished does not run again."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

from adk import ChatModelAgent
from adk.serve import create_app
from compose import tool
from compose.schema import Message
from tests.serve.helpers import (
    Live,
    PolicyModel,
    calling,
    live_server,
    one_round,
    post_run,
    run_input,
    tool_results,
    user,
)

pytestmark = pytest.mark.anyio

ran: list[str] = []
gate = threading.Event()
holding = threading.Event()


@tool
async def first(city: str) -> str:
    """The first step.

    Args:
        city: the city
    """
    ran.append("first")
    return f"first for {city}"


@tool
async def second(city: str) -> str:
    """Held until the test releases it.

    Args:
        city: the city
    """
    holding.set()
    await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
    ran.append("second")
    return f"second for {city}"


def policy(messages: list[Message]) -> Message | str:
    done = len(tool_results(messages))
    if done == 0:
        return calling(("c1", "first", '{"city": "Hangzhou"}'))
    if done == 1:
        return calling(("c2", "second", '{"city": "Hangzhou"}'))
    return "Both done."


@pytest.fixture
def live() -> Iterator[tuple[Live, PolicyModel]]:
    ran.clear()
    gate.clear()
    holding.clear()
    model = PolicyModel(policy)
    agent = ChatModelAgent("steps", "two steps", model=model, tools=[first, second])
    with live_server(create_app(agent)) as server:
        yield server, model
    gate.set()


async def hang_up_mid_tool(server: Live, body: dict[str, Any]) -> None:
    """POST ``body`` on a plain socket and hang up once the held tool runs."""
    host, port = server.url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = (
        f"POST /agents/steps/agui HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(head + data)
        seen = b""
        while seen.count(b"TOOL_CALL_END") < 2:
            seen += await sock.receive()
        await anyio.to_thread.run_sync(holding.wait)


async def test_hang_up_mid_tool_then_the_same_input_continues(live: tuple[Live, PolicyModel]) -> None:
    server, model = live
    body = run_input("t", "r1", [user("u1", "Go")])
    await hang_up_mid_tool(server, body)
    assert await anyio.to_thread.run_sync(server.app.state.tracker.wait_idle, 10)
    assert ran == ["first"]
    async with httpx.AsyncClient(timeout=30) as client:
        cut = (await client.get(f"{server.url}/agents/steps/threads/t")).json()
        gate.set()
        again = await post_run(client, server.agui("steps"), {**body, "runId": "r2"})
        thread = (await client.get(f"{server.url}/agents/steps/threads/t")).json()
    assert [m["role"] for m in cut["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert cut["interrupts"] == []
    assert_valid_agui(again, max_warnings=0)
    assert [e["type"] for e in again][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert [e["toolCallId"] for e in again if e["type"] == "TOOL_CALL_RESULT"] == ["c2"]
    assert again[-1]["result"] == "Both done."
    assert ran == ["first", "second"]  # the finished step did not run again
    assert len(model.calls) == 3  # nor its model call
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


async def test_new_input_after_a_hang_up_starts_afresh(live: tuple[Live, PolicyModel]) -> None:
    server, _ = live
    await hang_up_mid_tool(server, run_input("t2", "r1", [user("u1", "Go")]))
    assert await anyio.to_thread.run_sync(server.app.state.tracker.wait_idle, 10)
    gate.set()
    async with httpx.AsyncClient(timeout=30) as client:
        fresh = await post_run(client, server.agui("steps"), run_input("t2", "r2", [user("u2", "Something else")]))
        thread = (await client.get(f"{server.url}/agents/steps/threads/t2")).json()
    assert_valid_agui(fresh, max_warnings=0)
    assert fresh[-1]["result"] == "Both done."
    assert [(m["role"], m.get("content")) for m in thread["messages"]][:1] == [("user", "Something else")]
    assert ran == ["first", "first", "second"]


answering = threading.Event()
tool_runs: list[str] = []


@tool
async def lookup(city: str) -> str:
    """A finished step before the answer.

    Args:
        city: the city
    """
    tool_runs.append(city)
    return f"looked up {city}"


class HeldAnswer(PolicyModel):
    """Calls ``lookup`` once, then streams its answer: a first delta, then held until the client hangs up (the
    read is cancelled), the whole answer when nobody holds it."""

    hold = True

    def with_tools(self, tools: Any) -> HeldAnswer:
        bound = HeldAnswer(self.policy)
        bound.tools, bound.calls = tuple(tools), self.calls
        return bound

    async def stream(self, messages: Any, **opts: Any) -> Any:
        if not tool_results(list(messages)) or not HeldAnswer.hold:
            return await super().stream(messages, **opts)
        self.calls.append((list(messages), self.tools))

        async def deltas() -> Any:
            answering.set()
            yield Message(role="assistant", content="The answer ")
            await anyio.sleep_forever()

        from compose.stream import StreamReader

        return StreamReader.from_async_iterator(deltas())


async def test_hang_up_mid_answer_keeps_the_turn_and_the_finished_tool(anyio_backend: str) -> None:
    """A hang-up while the model streams the answer after a tool finished: the run pauses there; the thread keeps
    the user message and the tool's result, and the same input again re-runs only the answer."""
    tool_runs.clear()
    answering.clear()
    HeldAnswer.hold = True
    model = HeldAnswer(one_round(("c1", "lookup", '{"city": "Hangzhou"}'), "The answer is 42."))
    agent = ChatModelAgent("answers", "answers", model=model, tools=[lookup])
    body = run_input("t3", "r1", [user("u1", "What is it?")])
    with live_server(create_app(agent)) as server:
        host, port = server.url.removeprefix("http://").split(":")
        data = json.dumps(body).encode()
        head = (
            f"POST /agents/answers/agui HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        async with await anyio.connect_tcp(host, int(port)) as sock:
            await sock.send(head + data)
            seen = b""
            while b"TEXT_MESSAGE_CONTENT" not in seen:
                seen += await sock.receive()
            assert answering.is_set()
        assert await anyio.to_thread.run_sync(server.app.state.tracker.wait_idle, 10)
        assert tool_runs == ["Hangzhou"]
        HeldAnswer.hold = False
        async with httpx.AsyncClient(timeout=30) as client:
            cut = (await client.get(f"{server.url}/agents/answers/threads/t3")).json()
            again = await post_run(client, server.agui("answers"), {**body, "runId": "r2"})
            thread = (await client.get(f"{server.url}/agents/answers/threads/t3")).json()
    assert [(m["role"], m.get("content")) for m in cut["messages"]][:1] == [("user", "What is it?")]
    assert [m["role"] for m in cut["messages"]] == ["user", "assistant", "tool"]
    assert_valid_agui(again, max_warnings=0)
    assert again[-1]["result"] == "The answer is 42."
    assert tool_runs == ["Hangzhou"]  # the finished tool did not run again
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]


def steps_agent() -> tuple[ChatModelAgent, PolicyModel]:
    model = PolicyModel(policy)
    return ChatModelAgent("steps", "two steps", model=model, tools=[first, second]), model


def sequential_tree() -> Any:
    from adk.agents.workflow import SequentialAgent

    steps, _ = steps_agent()
    closer = ChatModelAgent("closer", "closes", model=PolicyModel(lambda messages: "Closed."))
    return SequentialAgent("flow", "steps then closer", [steps, closer]), "Closed."


def agent_tool_tree() -> Any:
    from adk.agents.agent_tool import AgentTool

    steps, _ = steps_agent()

    def boss(messages: list[Message]) -> Message | str:
        if not tool_results(messages):
            return calling(("o1", "steps", '{"request": "go"}'))
        return "Boss done."

    return ChatModelAgent("flow", "asks steps", model=PolicyModel(boss), tools=[AgentTool(steps)]), "Boss done."


@pytest.mark.parametrize("tree", [sequential_tree, agent_tool_tree])
async def test_hang_up_inside_a_workflow_or_an_agent_tool_then_the_same_input_continues(
    anyio_backend: str, tree: Any
) -> None:
    """A hang-up while an agent deep in the tree runs a tool (a Sequential's child, an agent tool's agent): the
    run pauses with its checkpoint, and the same input again continues it; the finished tool does not run again."""
    ran.clear()
    gate.clear()
    holding.clear()
    agent, answer = tree()
    body = run_input("t4", "r1", [user("u1", "Go")])
    with live_server(create_app(agent)) as server:
        host, port = server.url.removeprefix("http://").split(":")
        data = json.dumps(body).encode()
        head = (
            f"POST /agents/flow/agui HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        async with await anyio.connect_tcp(host, int(port)) as sock:
            await sock.send(head + data)
            await anyio.to_thread.run_sync(holding.wait)
        assert await anyio.to_thread.run_sync(server.app.state.tracker.wait_idle, 10)
        assert ran == ["first"]
        gate.set()
        async with httpx.AsyncClient(timeout=30) as client:
            again = await post_run(client, server.agui("flow"), {**body, "runId": "r2"})
    assert_valid_agui(again, max_warnings=0)
    assert again[-1]["type"] == "RUN_FINISHED" and again[-1]["result"] == answer
    assert ran == ["first", "second"]  # the finished step did not run again
