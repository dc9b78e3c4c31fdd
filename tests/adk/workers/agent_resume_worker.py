"""A worker process for the agent cross-process resume tests.

``run`` starts an agent run whose payment needs approval, prints each event as a JSON line and kills itself
with SIGKILL right after the interrupt event; ``resume`` approves the payment in a fresh process, prints the
rest of the events and a summary (what the model saw, session values, checkpoints left).

    python agent_resume_worker.py (run|resume) (sqlite PATH | postgres DSN) LOGFILE (invoke|stream) [INTERRUPT_ID]

The model's answers are functions of the messages, so the second process continues the conversation without
knowing how far the first one got.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import anyio

from adk.chat_model.agent import ChatModelAgent
from adk.events import AgentEvent
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware, ApprovalRequest
from adk.runner import Runner
from compose.checkpoint import PostgresCheckPointStore, SQLiteCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool


def build(log: str) -> tuple[ChatModelAgent, ScriptedChatModel]:
    def record(line: str) -> None:
        with open(log, "a") as f:
            f.write(line + "\n")

    @tool
    def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: the query.
        """
        record(f"lookup {q}")
        return f"found {q}"

    @tool
    def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: how much.
        """
        record(f"pay {amount}")
        return f"paid {amount}"

    def answer(messages: list[Message]) -> Message | str:
        if messages[-1].role == "user":
            return Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="c1", function=FunctionCall(name="lookup", arguments='{"q": "invoice"}')),
                    ToolCall(id="c2", function=FunctionCall(name="pay", arguments='{"amount": 42}')),
                ],
            )
        return "done: " + "; ".join(m.content for m in messages if m.role == "tool")

    model = ScriptedChatModel([answer, answer])
    agent = ChatModelAgent(
        "ops",
        "runs operations",
        "You run operations.",
        model=model,
        tools=[lookup, pay],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "pay")],
        output_key="answer",
    )
    return agent, model


async def show(event: AgentEvent) -> dict[str, Any]:
    interrupted = event.action.interrupted if event.action is not None else None
    if interrupted is not None:
        (ctx,) = interrupted.interrupt_contexts
        assert isinstance(ctx.info, ApprovalRequest)
        return {"kind": "interrupt", "id": ctx.id, "address": ctx.address, "info": ctx.info.model_dump()}
    if event.error is not None:
        return {"kind": "error", "content": repr(event.error)}
    variant = event.message
    assert variant is not None
    msg = await variant.get_message()
    kind = f"tool:{variant.tool_name}" if variant.role == "tool" else variant.role
    return {"kind": kind, "content": msg.content}


async def main(phase: str, kind: str, where: str, log: str, mode: str, target: str | None) -> None:
    store: Any = SQLiteCheckPointStore(where) if kind == "sqlite" else PostgresCheckPointStore(where)
    agent, model = build(log)
    runner = Runner(agent, enable_streaming=mode == "stream", checkpoint_store=store)
    try:
        if phase == "run":
            async with runner.query("settle invoice", checkpoint_id="job-7", session_values={"user": "alice"}) as run:
                async for event in run:
                    print(json.dumps(await show(event)), flush=True)
                    if event.action is not None and event.action.interrupted is not None:
                        os.kill(os.getpid(), signal.SIGKILL)  # die right after the interrupt event
        else:
            assert target is not None
            async with runner.resume("job-7", targets={target: ApprovalDecision(approved=True)}) as run:
                async for event in run:
                    print(json.dumps(await show(event)), flush=True)
            summary = {
                "model_saw": [[m.role, m.content] for m in model.calls[-1].messages],
                "streaming": [c.streaming for c in model.calls],
                "session_values": run.session_values,
                "remaining_checkpoints": [
                    c for c in await store.list() if c.startswith("job-7")
                ],  # the database is shared
            }
            print(json.dumps(summary), flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    phase, kind, where, log, mode = sys.argv[1:6]
    anyio.run(main, phase, kind, where, log, mode, sys.argv[6] if len(sys.argv) > 6 else None)
