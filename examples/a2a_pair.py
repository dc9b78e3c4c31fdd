"""Two agents talking A2A, offline in one process: the travel agent of ``serve_agent.py`` served by
``adk.serve`` (its A2A endpoint at ``/a2a/travel_agent/``), and a supervisor that delegates to it through
``RemoteA2AAgent`` used as an ``AgentTool``. The travel agent's tea-tasting booking waits for approval: the
remote task goes ``input-required``, the supervisor's run pauses on it, and its resume (approved) answers the
remote task, which books and finishes.

    python examples/a2a_pair.py

Any A2A client can talk to the served agent as well (card at ``/a2a/travel_agent/.well-known/agent-card.json``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from serve_agent import build, serve_locally

from adk import AgentTool, ApprovalDecision, ChatModelAgent, Runner
from adk.agents import RemoteA2AAgent
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall

REQUEST = "Plan tomorrow's day trip in Hangzhou for me."


def supervisor(travel: RemoteA2AAgent) -> ChatModelAgent:
    """A scripted supervisor: it asks the remote travel agent, then passes its plan on."""
    ask = Message(
        role="assistant",
        content="",
        tool_calls=[
            ToolCall(id="call_travel", function=FunctionCall(name=travel.name, arguments=f'{{"request": "{REQUEST}"}}'))
        ],
    )
    done = Message(role="assistant", content="Here is the plan from the travel agent.")
    return ChatModelAgent(
        "assistant",
        "answers the user, asking specialists",
        "You delegate trip planning to the travel agent.",
        model=ScriptedChatModel([ask, done]),
        tools=[AgentTool(travel)],
    )


async def conversation(url: str, out: Any = None) -> dict[str, Any]:
    """The supervisor's run through the remote agent at ``url``: paused on the remote approval, then resumed."""
    out = out or sys.stdout
    travel = await RemoteA2AAgent.connect(url)  # the card names and describes it
    print(f"remote agent: {travel.name}: {travel.description}", file=out)
    runner = Runner(supervisor(travel), enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())
    seen: dict[str, Any] = {"paused": None, "answer": None, "tool_result": None}
    async with runner.query(REQUEST, checkpoint_id="trip") as run:
        async for event in run:
            await event.aclose()
            if event.action is not None and event.action.interrupted is not None:
                [cause] = [c for c in event.action.interrupted.interrupt_contexts if c.is_root_cause]
                seen["paused"] = cause.info
                print(f"  ? {cause.info['message']}  (approved)", file=out)
    assert seen["paused"] is not None, "the remote booking waits for approval"
    async with runner.resume("trip", {cause.id: ApprovalDecision(approved=True)}) as resumed:
        async for event in resumed:
            if event.message is not None:
                message = await event.message.get_message()
                if message.role == "tool":
                    seen["tool_result"] = message.content
                    print(f"  ← {message.content[:60]}…", file=out)
    assert resumed.final_message is not None
    seen["answer"] = resumed.final_message.content
    print(f"Final answer: {seen['answer']}", file=out)
    return seen


async def demo(out: Any = None) -> dict[str, Any]:
    """Serve the travel agent on a free loopback port and run the supervisor against it."""
    from adk.serve import create_app

    return await serve_locally(create_app(build()), lambda base: conversation(f"{base}/a2a/travel_agent/", out))


if __name__ == "__main__":
    anyio.run(demo, backend="asyncio")  # the a2a-sdk's server is asyncio-only
