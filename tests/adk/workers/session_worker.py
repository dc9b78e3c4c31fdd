"""A worker process for the cross-process session tests.

    python session_worker.py converse (sqlite PATH | postgres DSN) FIRST LAST [KILL_AT]
        runs turns FIRST..LAST-1 of the conversation "chat", printing one JSON line per turn (how many messages
        the model saw first); with KILL_AT, kills itself with SIGKILL inside the tool of that turn (lease held).
    python session_worker.py race (sqlite PATH | postgres DSN) NAME GATE WAIT
        one run on the session "shared" whose tool waits for the file GATE; prints "running" once its tool runs
        (the lease is held), "busy" on SessionBusyError; WAIT is "wait" (session_wait=None) or "fail" (0).

The model's answers are functions of the messages, so a new process continues where the old one stopped.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import anyio

from adk.chat_model.agent import ChatModelAgent
from adk.errors import SessionBusyError
from adk.runner import Runner
from adk.sessions import PostgresSessionStore, SQLiteSessionStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool


def store_for(kind: str, where: str, lease_ttl: float = 1.0) -> Any:
    # a short lease by default, so that the lease of a killed worker expires quickly
    if kind == "sqlite":
        return SQLiteSessionStore(where, lease_ttl=lease_ttl)
    return PostgresSessionStore(where, table="sess_procs", lease_ttl=lease_ttl)


def answer(messages: list[Message]) -> Message:
    last = messages[-1]
    if last.role == "user":
        work = FunctionCall(name="work", arguments=json.dumps({"q": last.content}))
        call = ToolCall(id=f"c-{last.content}", function=work)
        return Message(role="assistant", tool_calls=[call])
    return Message(role="assistant", content=f"answer to {messages[-3].content} after {len(messages)} messages")


async def converse(kind: str, where: str, first: int, last: int, kill_at: int | None) -> None:
    current = {"turn": -1}

    @tool
    def work(q: str) -> str:
        """Do the work.

        Args:
            q: the question.
        """
        if current["turn"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"worked on {q}"

    model = ScriptedChatModel([answer] * (2 * (last - first)))
    agent = ChatModelAgent("chat", "chats", "You chat.", model=model, tools=[work])
    async with store_for(kind, where) as store:
        runner = Runner(agent, session_store=store, session_wait=30.0)
        for i in range(first, last):
            current["turn"] = i
            calls = len(model.calls)
            async with runner.query(f"q{i}", session_id="chat") as run:
                async for event in run:
                    if event.error is not None:
                        raise event.error
                    await event.aclose()
            print(json.dumps({"turn": i, "saw": len(model.calls[calls].messages)}), flush=True)


async def race(kind: str, where: str, name: str, gate: str, wait: str) -> None:
    @tool
    async def work(q: str) -> str:
        """Do the work.

        Args:
            q: the question.
        """
        print("running", flush=True)
        while not await anyio.Path(gate).exists():
            await anyio.sleep(0.01)
        return f"worked on {q}"

    agent = ChatModelAgent("chat", "chats", "", model=ScriptedChatModel([answer] * 2), tools=[work])
    # nobody dies here: a long lease, so that a loaded machine (a late renewal) cannot let the other run in
    async with store_for(kind, where, lease_ttl=30.0) as store:
        runner = Runner(agent, session_store=store, session_wait=None if wait == "wait" else 0.0)
        try:
            async with runner.query(name, session_id="shared") as run:
                async for event in run:
                    if event.error is not None:
                        raise event.error
                    await event.aclose()
        except SessionBusyError:
            print("busy", flush=True)


if __name__ == "__main__":
    command, kind, where, *rest = sys.argv[1:]
    if command == "converse":
        kill = int(rest[2]) if len(rest) > 2 else None
        anyio.run(converse, kind, where, int(rest[0]), int(rest[1]), kill)
    else:
        anyio.run(race, kind, where, rest[0], rest[1], rest[2])
