"""A worker process for the AgentTool cross-process resume test: two agent tools deep, a payment needing approval.

    python agent_tool_worker.py run (sqlite PATH | postgres DSN) LOGFILE
    python agent_tool_worker.py resume (sqlite PATH | postgres DSN) LOGFILE INTERRUPT_ID

``run`` prints the interrupt as a JSON line and kills itself with SIGKILL; ``resume`` builds everything anew,
approves, and prints the final answer and the tools that ran. Tool executions are appended to LOGFILE. The
models answer from the conversation they are given, so the fresh process needs no script position.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import anyio

from adk.agents import AgentTool
from adk.chat_model.agent import ChatModelAgent
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from compose.checkpoint import PostgresCheckPointStore, SQLiteCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool


def calling(*calls: tuple[str, str, str]) -> Message:
    return Message(
        role="assistant",
        tool_calls=[ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for n, a, i in calls],
    )


def build(log: str) -> ChatModelAgent:
    def record(line: str) -> None:
        with open(log, "a") as f:
            f.write(line + "\n")

    @tool
    def lookup(q: str) -> str:
        """Look up.

        Args:
            q: query.
        """
        record(f"lookup {q}")
        return f"found {q}"

    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        record(f"pay {amount}")
        return f"paid {amount}"

    def leaf_answer(messages: list[Message]) -> Message | str:
        if messages[-1].role == "user":
            return calling(("lookup", '{"q": "invoice"}', "l1"), ("pay", '{"amount": 7}', "p1"))
        return "payer done"

    def caller(callee: str, call_id: str, done: str) -> Any:
        def answer(messages: list[Message]) -> Message | str:
            return calling((callee, '{"request": "pay it"}', call_id)) if messages[-1].role == "user" else done

        return answer

    payer = ChatModelAgent(
        "payer",
        "pays",
        model=ScriptedChatModel([leaf_answer] * 2),
        tools=[lookup, pay],
        middlewares=[ApprovalMiddleware(lambda name, args: name == "pay")],
    )
    mid = ChatModelAgent(
        "mid", "middle", model=ScriptedChatModel([caller("payer", "t0", "mid done")] * 2), tools=[AgentTool(payer)]
    )
    return ChatModelAgent(
        "outer", "top", model=ScriptedChatModel([caller("mid", "t1", "outer done")] * 2), tools=[AgentTool(mid)]
    )


def store(kind: str, where: str) -> Any:
    return SQLiteCheckPointStore(where) if kind == "sqlite" else PostgresCheckPointStore(where)


async def main(command: str, kind: str, where: str, log: str, *rest: str) -> None:
    async with store(kind, where) as s:
        runner = Runner(build(log), checkpoint_store=s)
        if command == "run":
            async with runner.query("go", checkpoint_id="agent-tool-job") as run:
                async for event in run:
                    info = event.action.interrupted if event.action is not None else None
                    if info is not None:
                        [ctx] = info.interrupt_contexts
                        print(json.dumps({"id": ctx.id, "address": ctx.address}), flush=True)
                        os.kill(os.getpid(), signal.SIGKILL)
                    elif event.message is not None:
                        await event.message.get_message()
            return
        async with runner.resume("agent-tool-job", targets={rest[0]: ApprovalDecision(approved=True)}) as run:
            async for event in run:
                if event.error is not None:
                    raise event.error
                if event.message is not None:
                    await event.message.get_message()
        assert run.final_message is not None
        print(json.dumps({"final": run.final_message.content, "left": await s.get("agent-tool-job") is not None}))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
