"""The app the dev page tests serve: the scripted travel agent of examples/serve_agent.py (its booking waits for
approval and records the ticket as a session value), an agent whose model fails, and a supervisor with workers.

``Gate`` holds a streamed answer after its first text chunk until the test opens it, so a test can see the answer
shown in part while the rest is still to come (no sleeps: the test waits for the page, then opens the gate).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio

from adk import ChatModelAgent, add_session_value
from adk.middlewares.approval import ApprovalMiddleware
from compose.schema import Message, ToolInfo
from compose.stream import StreamReader
from compose.tools import tool

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from serve_agent import INSTRUCTION, TOOLS, TurnScriptedModel, rounds  # noqa: E402


class Gate:
    """Open (every answer streams freely) unless closed; a closed gate holds each answer after its first text
    chunk (``at="chunk"``) or before the model call answers at all (``at="start"``) until :meth:`open`."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self.at = "chunk"

    def close(self, at: str = "chunk") -> None:
        self.at = at
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    async def wait(self) -> None:
        if not self._open.is_set():
            await anyio.to_thread.run_sync(self._open.wait, abandon_on_cancel=True)


class GatedModel:
    """``inner``'s answers, each held at ``gate`` after its first chunk with text."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self.inner = inner
        self.gate = gate

    def with_tools(self, tools: Sequence[ToolInfo]) -> GatedModel:
        return GatedModel(self.inner.with_tools(tools), self.gate)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        result: Message = await self.inner.generate(messages, **opts)
        return result

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        if self.gate.at == "start":
            await self.gate.wait()
        source: StreamReader[Message] = await self.inner.stream(messages, **opts)

        async def chunks() -> AsyncIterator[Message]:
            try:
                held = False
                async for chunk in source:
                    yield chunk
                    if chunk.content and not held and self.gate.at == "chunk":
                        held = True
                        await self.gate.wait()
            finally:
                await source.aclose()

        return StreamReader.from_async_iterator(chunks())


@tool
def book_tea_tasting(place: str, time: str) -> str:
    """预订茶艺体验（需要用户批准）

    Args:
        place: 地点
        time: 时间
    """
    add_session_value("booking", {"place": place, "time": time, "ticket": "TEA-0427"})
    return json.dumps({"booked": place, "time": time, "ticket": "TEA-0427"}, ensure_ascii=False)


def travel_agent(gate: Gate) -> ChatModelAgent:
    return ChatModelAgent(
        "travel_agent",
        "plans day trips with weather, places and routes, and books tea tastings",
        INSTRUCTION,
        model=GatedModel(TurnScriptedModel(rounds()), gate),
        tools=[*TOOLS, book_tea_tasting],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "book_tea_tasting")],
        max_iterations=10,
    )


class FailingModel:
    """A model whose every call fails (a ValueError: the server shows its message)."""

    def with_tools(self, tools: Sequence[ToolInfo]) -> FailingModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        raise ValueError("the model endpoint refused the request: quota exceeded for key sk-test")

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        raise ValueError("the model endpoint refused the request: quota exceeded for key sk-test")


def broken_agent() -> ChatModelAgent:
    return ChatModelAgent("broken", "an agent whose model always fails", "Answer.", model=FailingModel())


def lead_agent() -> ChatModelAgent:
    """An agent calling another as a tool (``AgentTool``, its events forwarded: the dev page shows the subagent)."""
    from adk import AgentTool, ToolsConfig
    from tests.serve.helpers import PolicyModel, calling, tool_results

    helper = ChatModelAgent("helper", "looks things up", model=PolicyModel(lambda m: "Hangzhou: light rain."))

    def lead(messages: list[Message]) -> Message | str:
        if tool_results(messages):
            return "Take an umbrella: the helper says light rain."
        return calling(("h1", "helper", '{"request": "weather in Hangzhou"}'))

    tools = ToolsConfig([AgentTool(helper)], emit_internal_events=True)
    return ChatModelAgent("lead", "asks its helper", model=PolicyModel(lead), tools=tools)
