"""The travel agent served over HTTP with AG-UI, offline on the scripted model, booking a tea tasting only once
you approve it.

Serve it (any AG-UI client can talk to it: CopilotKit, ``@ag-ui/client``'s ``HttpAgent``, curl)::

    python -m adk.serve examples.serve_agent:build --port 8000      # threads kept in runs.db

    curl -N http://127.0.0.1:8000/agents/travel_agent/agui -H 'Content-Type: application/json' -d \\
      '{"threadId": "t1", "runId": "r1", "messages": [{"id": "u1", "role": "user", "content": "Plan my day"}]}'

Or watch a whole round trip (a run that pauses for approval, then its resume) in one process::

    python examples/serve_agent.py
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import uvicorn

from adk.middlewares.approval import ApprovalMiddleware

sys.path.insert(0, str(Path(__file__).parent))
from travel_agent import INSTRUCTION, TASK, TOOLS, scripted_messages

from adk import ChatModelAgent
from adk.serve import create_app
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo
from compose.stream import StreamReader
from compose.tools import tool

T = TypeVar("T")


@tool
def book_tea_tasting(place: str, time: str) -> str:
    """预订茶艺体验（需要用户批准）

    Args:
        place: 地点
        time: 时间
    """
    return json.dumps({"booked": place, "time": time, "ticket": "TEA-0427"}, ensure_ascii=False)


def rounds() -> list[Message]:
    """The travel agent's scripted rounds, with a booking (which needs approval) before the final answer."""
    script = scripted_messages()
    booking = Message(
        role="assistant",
        content="下午下雨，帮你订茶博物馆的茶艺体验。",
        tool_calls=[
            ToolCall(
                id="call_book",
                function=FunctionCall(
                    name="book_tea_tasting", arguments='{"place": "中国茶叶博物馆", "time": "15:00"}'
                ),
            )
        ],
    )
    return [*script[:-1], booking, script[-1]]


class TurnScriptedModel:
    """The scripted model for a server: each call plays the round of the conversation's current turn (how many
    tool results follow the last user message), so every thread gets the whole script."""

    def __init__(self, script: Sequence[Message], tools: Sequence[ToolInfo] = ()) -> None:
        self.script = list(script)
        self.tools = tuple(tools)

    def with_tools(self, tools: Sequence[ToolInfo]) -> TurnScriptedModel:
        return TurnScriptedModel(self.script, tools)

    def _round(self, messages: Sequence[Message]) -> ScriptedChatModel:
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        answered = {m.tool_call_id for m in messages[last_user + 1 :] if m.role == "tool"}
        k = sum(1 for m in self.script[:-1] if any(c.id in answered for c in m.tool_calls))
        return ScriptedChatModel([self.script[min(k, len(self.script) - 1)]], chunk_size=6)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._round(messages).generate(messages, **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self._round(messages).stream(messages, **opts)


def build() -> ChatModelAgent:
    """The served agent (``python -m adk.serve examples.serve_agent:build``)."""
    return ChatModelAgent(
        "travel_agent",
        "plans day trips with weather, places and routes, and books tea tastings",
        INSTRUCTION,
        model=TurnScriptedModel(rounds()),
        tools=[*TOOLS, book_tea_tasting],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "book_tea_tasting")],
        max_iterations=10,
    )


def _events(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


async def round_trip(url: str, out: Any = None) -> list[list[dict[str, Any]]]:
    """Run the agent through ``url`` (its AG-UI endpoint): a run that pauses for approval, then its resume."""
    out = out or sys.stdout
    runs: list[list[dict[str, Any]]] = []
    body: dict[str, Any] = {
        "threadId": "demo",
        "runId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": TASK}],
    }
    async with httpx.AsyncClient(timeout=60) as client:
        for _ in range(2):
            response = await client.post(url, json=body)
            events = _events(response.text)
            runs.append(events)
            for e in events:
                if e["type"] == "TEXT_MESSAGE_CONTENT":
                    print(e["delta"], end="", file=out, flush=True)
                elif e["type"] == "TOOL_CALL_START":
                    print(f"\n  → {e['toolCallName']}", file=out)
                elif e["type"] == "TOOL_CALL_RESULT":
                    print(f"  ← {e['content']}", file=out)
                elif e["type"] in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"):
                    print(f"\n[{e['type']}]", file=out)
            finished = events[-1]
            outcome = finished.get("outcome", {})
            if outcome.get("type") != "interrupt":
                print(f"\nFinal answer: {finished.get('result')}", file=out)
                break
            (pending,) = outcome["interrupts"]
            print(f"  ? {pending['message']}  (approved)", file=out)
            body = {
                "threadId": "demo",
                "runId": "run-2",
                "messages": [],
                "resume": [{"interruptId": pending["id"], "status": "resolved", "payload": {"approved": True}}],
            }
    return runs


async def serve_locally(app: Any, client: Callable[[str], Awaitable[T]]) -> T:
    """Serve ``app`` on a free loopback port (uvicorn, in memory) while ``client(base_url)`` runs; its result."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            try:
                return await client(f"http://127.0.0.1:{port}")
            finally:
                server.should_exit = True
    finally:
        sock.close()


async def demo(out: Any = None) -> list[list[dict[str, Any]]]:
    """Serve the agent on a free loopback port and make the round trip."""
    return await serve_locally(create_app(build()), lambda base: round_trip(f"{base}/agents/travel_agent/agui", out))


if __name__ == "__main__":
    anyio.run(demo, backend="asyncio")
