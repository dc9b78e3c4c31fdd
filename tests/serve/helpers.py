"""Shared helpers of the server tests: a live uvicorn server on loopback, a policy model, SSE reading."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo
from compose.stream import StreamReader

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


@dataclass
class Live:
    """A server running in a thread: its base URL and app."""

    url: str
    app: Starlette
    server: uvicorn.Server
    thread: threading.Thread = field(repr=False)

    def agui(self, agent: str) -> str:
        return f"{self.url}/agents/{agent}/agui"


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
