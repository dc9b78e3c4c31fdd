"""Cancel a running agent at a safe point, then resume it (offline: a scripted model).

Run: ``python examples/cancel_run.py``. The agent books three legs of a trip, one tool call per round. While the
second booking runs, another task asks for ``cancel(mode="after_tool_calls")``: the booking finishes, the run
stops before the next model call and is saved under ``trip-1``; ``runner.resume("trip-1")`` books the last leg
without booking the first two again.
"""

from __future__ import annotations

import anyio

from adk import AgentCancelledError, ChatModelAgent, Runner
from compose import FunctionCall, InMemoryCheckPointStore, Message, ScriptedChatModel, ToolCall, tool

booked: list[str] = []
second_started: anyio.Event
cancel_asked: anyio.Event


def book_call(leg: str, n: int) -> Message:
    call = ToolCall(id=f"c{n}", function=FunctionCall(name="book", arguments=f'{{"leg": "{leg}"}}'))
    return Message(role="assistant", content="", tool_calls=[call])


@tool
async def book(leg: str) -> str:
    """Book one leg of the trip.

    Args:
        leg: where to.
    """
    if len(booked) == 1:
        second_started.set()
        await cancel_asked.wait()  # a slow booking system: still busy when the cancel comes
    booked.append(leg)
    return f"booked {leg}"


async def main() -> list[str]:
    global second_started, cancel_asked
    second_started, cancel_asked = anyio.Event(), anyio.Event()
    booked.clear()
    model = ScriptedChatModel(
        [book_call("Paris", 1), book_call("Rome", 2), book_call("Vienna", 3), "Your trip is booked."]
    )
    agent = ChatModelAgent("planner", "books trips", model=model, tools=[book])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    run = runner.query("book Paris, Rome, Vienna", checkpoint_id="trip-1", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await second_started.wait()
            handle = run.cancel(mode="after_tool_calls")
            cancel_asked.set()
            print("cancel:", await handle.wait())

        tg.start_soon(cancel)
        async with run:
            async for event in run:
                if isinstance(event.error, AgentCancelledError):
                    print("stopped, saved under", event.error.checkpoint_id, "after booking", booked)
    async with runner.resume("trip-1") as resumed:
        async for _ in resumed:
            pass
    assert resumed.final_message is not None
    print(resumed.final_message.content, booked)
    return booked


if __name__ == "__main__":
    anyio.run(main)
