"""The Hangzhou travel assistant with its tools on an MCP server: ``mcp_tools()`` starts
``examples/mcp_travel_server.py`` over stdio and the agent calls the server's tools like its own.

Run it (needs the extra: ``pip install 'pyeino[mcp]'``)::

    python examples/mcp_agent.py                           # offline: the scripted model of travel_agent.py
    OPENAI_API_KEY=sk-... python examples/mcp_agent.py     # a real model (OPENAI_MODEL, OPENAI_BASE_URL)

The server process lives as long as the ``async with mcp_tools(...)`` block; a failing MCP tool is returned to
the model as the tool's answer (``tool_errors_as_results``), so it can recover.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))  # travel_agent.py, beside this file

from travel_agent import INSTRUCTION, TASK, choose_model

from adk import ChatModelAgent, Runner, ToolsConfig
from compose import tool_errors_as_results
from compose.mcp import mcp_tools
from compose.models import OpenAIChatModel

SERVER = [sys.executable, str(Path(__file__).resolve().parent / "mcp_travel_server.py")]


@dataclass
class MCPDemoResult:
    """What the demo did, for tests: the MCP tools offered, the tools called, and the final answer."""

    answer: str = ""
    offered: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)


async def amain(argv: Sequence[str] | None = None, out: TextIO | None = None) -> MCPDemoResult:
    out = out or sys.stdout
    result = MCPDemoResult()
    model = choose_model()
    try:
        async with mcp_tools(stdio=SERVER, tool_timeout=30) as tools:
            result.offered = [t.name for t in tools]
            print(f"MCP server '{tools.server}' offers {result.offered}\n", file=out)
            agent = ChatModelAgent(
                "travel_agent",
                "plans day trips with the company's MCP travel tools",
                INSTRUCTION,
                model=model,
                tools=ToolsConfig(list(tools), middlewares=[tool_errors_as_results()]),
                max_iterations=10,
            )
            print(f"User: {TASK}\n", file=out)
            async with Runner(agent).query(TASK) as run:
                async for event in run:
                    if event.error is not None:
                        raise event.error
                    if event.message is None:
                        continue
                    msg = await event.message.get_message()
                    if msg.role == "tool":
                        print(f"  ← {msg.tool_name}: {msg.content}", file=out)
                        continue
                    if msg.content:
                        print(f"Assistant: {msg.content}", file=out)
                    for call in msg.tool_calls:
                        result.called.append(call.function.name)
                        print(f"  → {call.function.name}({call.function.arguments})", file=out)
                final = run.final_message
            result.answer = final.content if final is not None else ""
    finally:
        if isinstance(model, OpenAIChatModel):
            await model.aclose()
    print(f"\nFinal answer: {result.answer}", file=out)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    anyio.run(amain, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
