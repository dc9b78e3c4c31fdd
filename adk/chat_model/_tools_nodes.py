"""The tools nodes of a ChatModelAgent's ReAct graph besides a plain ``ToolsNode``: ``auto`` execution (parallel
only when every called tool is parallel-safe) and the per-run node an agent with ``before_agent`` middlewares
uses (the tools its hooks chose)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from adk.chat_model._context import ReactContext, current_react
from compose.schema import Message
from compose.tools.node import ToolsNode

__all__ = ["ModeToolsNode", "RunTools"]


class ModeToolsNode:
    """``auto`` execution: run a round's calls in parallel only when there are several and every called tool
    is parallel-safe (seed 000); otherwise one after the other."""

    def __init__(self, parallel: ToolsNode, serial: ToolsNode, unsafe: frozenset[str]) -> None:
        self.parallel = parallel
        self.serial = serial
        self.unsafe = unsafe

    def _pick(self, message: Message) -> ToolsNode:
        calls = message.tool_calls
        if len(calls) > 1 and not any(c.function.name in self.unsafe for c in calls):
            return self.parallel
        return self.serial

    async def invoke(self, message: Message, **opts: Any) -> list[Message]:
        return await self._pick(message).invoke(message, **opts)

    async def stream(self, message: Message, **opts: Any) -> Any:
        return await self._pick(message).stream(message, **opts)

    def __repr__(self) -> str:
        return f"ToolsNode(auto, unsafe={sorted(self.unsafe)})"


class RunTools:
    """The tools node of an agent with ``before_agent`` middlewares: each run uses the ToolsNode its hooks chose
    (``run.tools_node``). A run without one (a resumed run: its tools are not saved, only their infos) gets it
    from ``choose(run)``, the agent calling its hooks again."""

    def __init__(self, default: Any, choose: Callable[[ReactContext], Awaitable[Any]]) -> None:
        self.default = default
        self.choose = choose

    async def _node(self) -> Any:
        run = current_react.get()
        if run is None:
            return self.default
        if run.tools_node is None:
            run.tools_node = await self.choose(run)
        return run.tools_node

    async def invoke(self, message: Message, **opts: Any) -> list[Message]:
        node = await self._node()
        result: list[Message] = await node.invoke(message, **opts)
        return result

    async def stream(self, message: Message, **opts: Any) -> Any:
        node = await self._node()
        return await node.stream(message, **opts)

    def __repr__(self) -> str:
        return f"RunTools({self.default!r})"
