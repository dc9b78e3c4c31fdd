"""Cancel of agents that keep no state of their own (a custom agent's plain event iterator): the layer that runs
it (the Runner's run, an agent tool's, a flow agent) cuts it off at its next event, or while it waits for one on
an immediate cancel, closes it, and the run pauses with a checkpoint whose resume runs the agent afresh; as the
root, inside an agent tool and as a Sequential's child. ``RemoteA2AAgent``'s are in
``tests/serve/test_a2a_remote.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from adk.agent import AgentContext
from adk.agents.agent_tool import AgentTool
from adk.agents.workflow import SequentialAgent
from adk.cancel import CANCEL_INFO
from adk.chat_model.agent import ChatModelAgent
from adk.events import AgentEvent, AgentInput, AgentOutput, MessageVariant
from compose.schema import Message
from tests.adk.helpers import call, calling
from tests.adk.test_cancel import Gated, drain, runner
from tests.adk.test_cancel_recursive import hang_up_when

pytestmark = pytest.mark.anyio


def said(text: str) -> AgentEvent:
    return AgentEvent(output=AgentOutput(MessageVariant(False, Message(role="assistant", content=text))))


class Waiter:
    """A custom agent: says "one", then waits for ``gate`` and says "two: <its input's last text>"."""

    name, description = "waiter", "waits for the test"

    def __init__(self) -> None:
        self.runs = 0
        self.waiting = anyio.Event()
        self.gate = anyio.Event()
        self.cut_off = 0
        self.closed = 0

    async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        try:
            yield said("one")
            self.waiting.set()
            try:
                await self.gate.wait()
            except anyio.get_cancelled_exc_class():
                self.cut_off += 1
                raise
            yield said(f"two: {input.messages[-1].content}")
        finally:
            self.closed += 1


async def texts(events: list[AgentEvent]) -> list[str]:
    return [(await e.message.get_message()).content for e in events if e.message is not None]


async def test_a_hang_up_cuts_off_a_custom_agent_and_its_resume_runs_it_afresh() -> None:
    waiter = Waiter()
    r = runner(waiter)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    error = await hang_up_when(run, waiter.waiting)
    assert error is not None and error.checkpoint_id == "c" and run.termination_reason == "cancelled"
    [cause] = error.interrupt_contexts
    assert cause.address == "agent:waiter" and cause.info == CANCEL_INFO
    assert waiter.cut_off == 1 and waiter.closed == 1
    waiter.gate.set()
    events: list[AgentEvent] = []
    resumed = r.resume("c")
    assert await drain(resumed, events) is None
    assert waiter.runs == 2 and await texts(events) == ["one", "two: go"]
    assert resumed.termination_reason == "completed"


async def test_a_safe_point_cancel_stops_a_custom_agent_before_its_next_event() -> None:
    waiter = Waiter()
    waiter.gate.set()
    run = runner(waiter, store=False).query("go", cancellable=True)
    events: list[AgentEvent] = []
    async with run:
        async for event in run:
            events.append(event)
            if event.error is None:
                handle = run.cancel("after_tool_calls")  # a custom agent has no tool round: its next event
    assert await handle.wait() == "cancelled"
    assert await texts(events) == ["one"] and not waiter.waiting.is_set() and waiter.closed == 1
    error = events[-1].error
    assert error is not None and error.checkpoint_id is None  # no store: nothing to resume
    assert [c.info for c in error.interrupt_contexts] == ["CancelAtTransition"]


@pytest.mark.parametrize("recursive", [False, True])
async def test_a_hang_up_of_a_custom_agent_in_an_agent_tool_leaves_a_resumable_checkpoint(recursive: bool) -> None:
    waiter = Waiter()
    outer_model = Gated([calling(call("waiter", '{"request": "sub"}', id="o1")), "outer done"])
    r = runner(ChatModelAgent("outer", "top", model=outer_model, tools=[AgentTool(waiter)]))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await waiter.waiting.wait()
            assert await run.cancel("immediate", recursive=recursive).wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.checkpoint_id == "c"
    assert waiter.cut_off == 1 and waiter.closed == 1
    # recursive: the inner run paused where it was cut; else the agent tool's call was cut off
    assert any("agent:waiter" in c.address for c in error.interrupt_contexts) == recursive
    waiter.gate.set()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert waiter.runs == 2 and outer_model.calls == 2
    assert resumed.final_message is not None and resumed.final_message.content == "outer done"


async def test_a_recursive_hang_up_cuts_off_a_custom_sequential_child_and_resume_runs_it_again() -> None:
    waiter = Waiter()
    second = Gated(["b done"])
    r = runner(SequentialAgent("seq", "waiter then b", [waiter, ChatModelAgent("b", "second", model=second)]))
    error = await hang_up_when(r.query("go", checkpoint_id="c", cancellable=True), waiter.waiting)
    assert error is not None and error.checkpoint_id == "c"
    assert waiter.cut_off == 1 and second.calls == 0
    assert [c.address for c in error.interrupt_contexts] == ["agent:seq;agent:waiter"]
    waiter.gate.set()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert waiter.runs == 2 and second.calls == 1
    assert resumed.final_message is not None and resumed.final_message.content == "b done"
