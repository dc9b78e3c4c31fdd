"""A support assistant that remembers a customer across runs and processes (issue 17's sessions).

Run it::

    python examples/chat_session.py                 # offline: a scripted model, the session in a temp SQLite file
    python examples/chat_session.py --db chat.db    # keep the file: run it again and the conversation goes on

Each turn is its own ``Runner.query(..., session_id="customer-7")`` (as a web service would handle one request per
turn, in any worker): the agent sees the stored history, looks an order up with a tool, and the turn is appended
to the session when the run completes. At the end the stored conversation is printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import anyio

from adk import ChatModelAgent, Runner, SQLiteSessionStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool


@tool
def order_status(order_id: str) -> str:
    """The status of an order.

    Args:
        order_id: the order's id, e.g. "A-17".
    """
    return f"order {order_id}: shipped yesterday, arriving Friday"


def answer(messages: list[Message]) -> Message:
    """A scripted support agent: looks an order up when asked, and remembers the customer's name."""
    last = messages[-1]
    name = next((m.content.split()[-1].rstrip(".") for m in messages if m.content.startswith("Hi, I am")), "there")
    if last.role == "user" and "order" in last.content:
        lookup = FunctionCall(name="order_status", arguments='{"order_id": "A-17"}')
        call = ToolCall(id=f"call-{len(messages)}", function=lookup)
        return Message(role="assistant", tool_calls=[call])
    if last.role == "tool":
        return Message(role="assistant", content=f"{name}, your {last.content}.")
    return Message(role="assistant", content=f"Hello {name}! How can I help? (history: {len(messages) - 2} messages)")


async def main(db: str) -> None:
    model = ScriptedChatModel([answer] * 10)
    agent = ChatModelAgent("support", "answers customers", "You are a support agent.", model, tools=[order_status])
    turns = ["Hi, I am Dana.", "Where is my order?", "Thanks!"]
    async with SQLiteSessionStore(db) as store:
        runner = Runner(agent, session_store=store)
        for text in turns:
            async with runner.query(text, session_id="customer-7") as run:
                async for event in run:
                    if event.error is not None:
                        raise event.error
                    await event.aclose()
            assert run.final_message is not None
            print(f"> {text}\n  {run.final_message.content}")
        session = await store.load("customer-7")
        print(f"\nstored: {session.turns} turns, {len(session.messages)} messages in {db}")
        for m in session.messages:
            print(f"  {m.role:9} {m.content or [c.function.name for c in m.tool_calls]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", help="the SQLite file (default: a temporary one)")
    args = parser.parse_args()
    if args.db:
        anyio.run(main, args.db)
    else:
        with tempfile.TemporaryDirectory() as d:
            anyio.run(main, os.path.join(d, "sessions.db"))
