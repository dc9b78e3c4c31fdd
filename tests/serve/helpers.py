"""Shared helpers of the server tests: a live uvicorn server on loopback, a policy model, the agents and tools the
tests serve, SSE reading, interrupts and threads."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from adk import ChatModelAgent
from adk.middlewares.approval import ApprovalMiddleware
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo
from compose.stream import StreamReader
from compose.tools import FunctionTool, tool

Policy = Callable[[list[Message]], Message | str]


class PolicyModel:
    """A chat model answering each call with ``policy(messages)``, streamed in chunks as ScriptedChatModel does
    (any number of calls, so one model serves every thread of a server)."""

    def __init__(self, policy: Policy, *, chunk_size: int = 4) -> None:
        self.policy = policy
        self.chunk_size = chunk_size
        self.tools: tuple[ToolInfo, ...] = ()
        self.calls: list[tuple[list[Message], tuple[ToolInfo, ...]]] = []

    def with_tools(self, tools: Sequence[ToolInfo]) -> PolicyModel:
        bound = PolicyModel(self.policy, chunk_size=self.chunk_size)
        bound.tools = tuple(tools)
        bound.calls = self.calls
        return bound

    def _one(self, messages: Sequence[Message]) -> ScriptedChatModel:
        self.calls.append((list(messages), self.tools))
        return ScriptedChatModel([self.policy(list(messages))], chunk_size=self.chunk_size, usage=False)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._one(messages).generate(messages, **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self._one(messages).stream(messages, **opts)


def calling(*calls: tuple[str, str, str], content: str = "") -> Message:
    """An assistant answer calling tools, each ``(call id, tool name, arguments)``."""
    return Message(
        role="assistant",
        content=content,
        tool_calls=[ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for i, n, a in calls],
    )


def tool_results(messages: list[Message]) -> list[Message]:
    """The tool messages after the last user message."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return [m for m in messages[last_user + 1 :] if m.role == "tool"]


def one_round(call: tuple[str, str, str], answer: str, *more: tuple[str, str, str]) -> Policy:
    """A policy calling tools once (``call`` and ``more``), then answering ``answer``."""

    def policy(messages: list[Message]) -> Message | str:
        if not tool_results(messages):
            return calling(call, *more)
        return answer

    return policy


ran: list[tuple[str, str]] = []  # the tools that ran, ``(tool name, argument)``; tests clear it


def city_tool(fn: Callable[[str], Awaitable[str]]) -> FunctionTool:
    """``@tool`` for a tool of one argument, ``city``: ``fn``'s docstring is the tool's description."""
    fn.__doc__ = f"{fn.__doc__}\n\nArgs:\n    city: the city\n"
    return tool(fn)


@city_tool
async def get_weather(city: str) -> str:
    """Current weather."""
    ran.append(("get_weather", city))
    return f"sunny in {city}"


@tool
async def pay(invoice: int) -> str:
    """Pay an invoice.

    Args:
        invoice: the invoice number
    """
    ran.append(("pay", str(invoice)))
    return f"paid invoice {invoice}"


def city_agent(
    name: str, description: str, tool: FunctionTool, answer: str, *, call_id: str = "c1", instruction: str = ""
) -> ChatModelAgent:
    """An agent calling ``tool`` (a :func:`city_tool`) for Hangzhou once, then answering ``answer``."""
    call = (call_id, tool.info().name, '{"city": "Hangzhou"}')
    return ChatModelAgent(name, description, instruction, PolicyModel(one_round(call, answer)), tools=[tool])


def weather_agent(name: str, description: str, answer: str, instruction: str = "") -> ChatModelAgent:
    """An agent calling ``get_weather`` for Hangzhou (call id ``c1``), then answering ``answer``."""
    return city_agent(name, description, get_weather, answer, instruction=instruction)


def payer(answer: str = "Done.", instruction: str = "") -> ChatModelAgent:
    """The agent ``payer``: it calls ``pay`` for invoice 7 (call id ``p1``), which pauses for approval, then
    answers ``answer``."""
    model = PolicyModel(one_round(("p1", "pay", '{"invoice": 7}'), answer))
    return ChatModelAgent(
        "payer",
        "pays",
        instruction,
        model,
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "pay")],
    )


@dataclass
class Live:
    """A server running in a thread: its base URL and app."""

    url: str
    app: Starlette
    server: uvicorn.Server
    thread: threading.Thread = field(repr=False)

    def agui(self, agent: str) -> str:
        return f"{self.url}/agents/{agent}/agui"

    def thread_url(self, agent: str, thread_id: str) -> str:
        return self.url + thread_path(agent, thread_id)


def thread_path(agent: str, thread_id: str) -> str:
    return f"/agents/{agent}/threads/{thread_id}"


async def get_thread(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """The thread at ``url`` (its messages, state and pending interrupts)."""
    response = await client.get(url)
    assert response.status_code == 200, response.text
    thread: dict[str, Any] = response.json()
    return thread


@contextmanager
def live_server(app: Starlette) -> Iterator[Live]:
    """``app`` on uvicorn (asyncio) in a thread, on a socket bound here (connections queue until it serves)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield Live(f"http://127.0.0.1:{port}", app, server, thread)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def run_input(thread_id: str, run_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def user(id: str, text: str) -> dict[str, Any]:
    return {"id": id, "role": "user", "content": text}


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The events of an SSE body (``data: <json>`` frames)."""
    events = []
    for frame in text.split("\n\n"):
        for line in frame.splitlines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


async def post_run(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a run and read its whole event stream."""
    async with client.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        text = (await response.aread()).decode()
    return parse_sse(text)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def only_interrupt(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The one interrupt a run that paused (its last event) left pending."""
    (pending,) = events[-1]["outcome"]["interrupts"]
    assert isinstance(pending, dict)
    return pending


def resolve(pending: dict[str, Any], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The resume entries answering ``pending`` with ``payload``."""
    return [{"interruptId": pending["id"], "status": "resolved", "payload": payload}]
