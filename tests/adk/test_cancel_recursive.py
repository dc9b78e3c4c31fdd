"""Recursive cancel (Eino's ``cancel_recursive_test.go`` and the workflow cases of ``cancel_test.go``): through an
agent tool and a Sequential workflow, the inner agent stops at its own safe point and the outer run's checkpoint
resumes it where it stopped; without ``recursive`` the inner agent does not see the cancel."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from adk.agents.agent_tool import AgentTool
from adk.agents.workflow import LoopAgent, SequentialAgent
from adk.chat_model.agent import ChatModelAgent
from adk.errors import AgentCancelledError
from tests.adk.helpers import call, calling
from tests.adk.test_cancel import Gated, Tools, drain, fast_call, runner

pytestmark = pytest.mark.anyio


def inner_agent(model: Gated, tools: Tools) -> ChatModelAgent:
    return ChatModelAgent("inner", "answers sub-questions", model=model, tools=tools.all())


def outer_with_agent_tool(outer: Gated, inner: ChatModelAgent) -> ChatModelAgent:
    return ChatModelAgent("outer", "top", model=outer, tools=[AgentTool(inner)])


def ask_inner() -> Any:
    return calling(call("inner", '{"request": "sub"}', id="o1"))


@pytest.mark.parametrize("streaming", [False, True])
async def test_recursive_after_chat_model_stops_the_agent_inside_an_agent_tool(streaming: bool) -> None:
    inner_tools = Tools()
    inner_model = Gated([fast_call(), "inner done"], gates=[0])
    outer_model = Gated([ask_inner(), "outer done"])
    r = runner(outer_with_agent_tool(outer_model, inner_agent(inner_model, inner_tools)), streaming=streaming)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await inner_model.started[0].wait()
            handle = run.cancel("after_chat_model", recursive=True)
            inner_model.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.checkpoint_id == "c"
    # the inner agent stopped after its model call, before its tool
    assert inner_model.calls == 1 and inner_tools.ran == [] and outer_model.calls == 1
    assert any("agent:inner" in c.address for c in error.interrupt_contexts)
    resumed = r.resume("c")
    assert await drain(resumed) is None
    # the inner run continued where it stopped: its model call is not repeated
    assert inner_model.calls == 2 and inner_tools.ran == ["fast:1"] and outer_model.calls == 2
    assert resumed.final_message is not None and resumed.final_message.content == "outer done"


async def test_recursive_immediate_cuts_off_the_inner_model_call_and_resumes_the_inner_run() -> None:
    inner_tools = Tools()
    inner_model = Gated([fast_call(), "inner done"], gates=[1])
    outer_model = Gated([ask_inner(), "outer done"])
    r = runner(outer_with_agent_tool(outer_model, inner_agent(inner_model, inner_tools)))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await inner_model.started[1].wait()
            assert await run.cancel(recursive=True).wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and inner_model.cut_off == 1 and inner_tools.ran == ["fast:1"]
    inner_model.gates.clear()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    # the inner tool that finished did not run again, nor the inner model call that finished
    assert inner_tools.ran == ["fast:1"] and inner_model.calls == 3 and outer_model.calls == 2


async def test_non_recursive_immediate_restarts_the_agent_tool_on_resume() -> None:
    inner_tools = Tools()
    inner_model = Gated([fast_call(), fast_call(), "inner done"], gates=[1])  # the cut-off call answers later
    outer_model = Gated([ask_inner(), "outer done"])
    r = runner(outer_with_agent_tool(outer_model, inner_agent(inner_model, inner_tools)))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await inner_model.started[1].wait()
            assert await run.cancel().wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and inner_model.cut_off == 1
    inner_model.gates.clear()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert inner_tools.ran == ["fast:1", "fast:1"]  # the agent tool's call ran again from its start


async def test_non_recursive_safe_point_is_not_seen_inside_an_agent_tool() -> None:
    inner_tools = Tools()
    inner_model = Gated([fast_call(), "inner done"], gates=[0])
    outer_model = Gated([ask_inner(), "outer done"])
    r = runner(outer_with_agent_tool(outer_model, inner_agent(inner_model, inner_tools)))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await inner_model.started[0].wait()
            handle = run.cancel("after_tool_calls")
            inner_model.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None
    # the inner agent ran to its end; the outer stopped after its tool call (the agent tool) finished
    assert inner_tools.ran == ["fast:1"] and inner_model.calls == 2 and outer_model.calls == 1
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert inner_model.calls == 2 and outer_model.calls == 2


def sequence(first: Gated, second: Gated, tools: Tools) -> SequentialAgent:
    a = ChatModelAgent("a", "first", model=first, tools=tools.all())
    b = ChatModelAgent("b", "second", model=second)
    return SequentialAgent("seq", "a then b", [a, b])


@pytest.mark.parametrize("streaming", [False, True])
async def test_recursive_after_chat_model_stops_a_sequential_child_and_resumes_it(streaming: bool) -> None:
    tools = Tools()
    first = Gated([fast_call(), "a done"], gates=[0])
    second = Gated(["b done"])
    r = runner(sequence(first, second, tools), streaming=streaming)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await first.started[0].wait()
            handle = run.cancel("after_chat_model", recursive=True)
            first.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and tools.ran == [] and second.calls == 0
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert tools.ran == ["fast:1"] and first.calls == 2 and second.calls == 1
    assert resumed.final_message is not None and resumed.final_message.content == "b done"


async def test_non_recursive_cancel_stops_a_sequential_agent_between_children() -> None:
    tools = Tools()
    first = Gated([fast_call(), "a done"], gates=[0])
    second = Gated(["b done"])
    r = runner(sequence(first, second, tools))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await first.started[0].wait()
            handle = run.cancel("after_chat_model")  # the child does not see it: the workflow stops after it
            first.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and tools.ran == ["fast:1"] and first.calls == 2 and second.calls == 0
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert first.calls == 2 and second.calls == 1


async def test_non_recursive_immediate_during_the_last_child_reports_already_ended() -> None:
    tools = Tools()
    first = Gated(["a done"])
    second = Gated(["b done"], gates=[0])
    run = runner(sequence(first, second, tools)).query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await second.started[0].wait()
            handle = run.cancel()
            second.gates[0].set()
            assert await handle.wait() == "already_ended"  # Eino: a direct workflow child is not cut off

        tg.start_soon(cancel)
        assert await drain(run) is None
    assert second.cut_off == 0


async def test_loop_agent_stops_between_iterations_and_resumes_there() -> None:
    model = Gated(["one", "two", "three"], gates=[0])
    loop = LoopAgent("loop", "repeats", [ChatModelAgent("a", "repeats", model=model)], max_iterations=3)
    r = runner(loop)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            handle = run.cancel("after_tool_calls")
            model.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        assert await drain(run) is not None
    assert model.calls == 1
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert model.calls == 3


async def test_recursive_immediate_stops_every_parallel_child_and_resume_finishes_them(no_task_leaks: None) -> None:
    from adk.agents.workflow import ParallelAgent

    tools = Tools()
    fast_model = Gated(["left done"])
    slow_model = Gated([fast_call(), "right done"], gates=[1])
    left = ChatModelAgent("left", "quick", model=fast_model)
    right = ChatModelAgent("right", "slow", model=slow_model, tools=tools.all())
    r = runner(ParallelAgent("par", "both", [left, right]))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await slow_model.started[1].wait()
            assert await run.cancel(recursive=True).wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and slow_model.cut_off == 1 and tools.ran == ["fast:1"]
    slow_model.gates.clear()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    # the finished child is not run again, the stopped one continues where it stopped
    assert fast_model.calls == 1 and slow_model.calls == 3 and tools.ran == ["fast:1"]


async def test_recursive_cancel_through_an_agent_tool_leaves_no_task(no_task_leaks: None) -> None:
    inner_tools = Tools()
    inner_model = Gated([calling(call("slow", '{"x": "s"}', id="i1")), "inner done"])
    outer_model = Gated([ask_inner(), "outer done"])
    r = runner(outer_with_agent_tool(outer_model, inner_agent(inner_model, inner_tools)), streaming=True)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await inner_tools.slow_started.wait()
            assert await run.cancel(recursive=True).wait() == "cancelled"

        tg.start_soon(cancel)
        assert await drain(run) is not None
    assert inner_tools.slow_cut_off == 1
    inner_tools.slow_gate.set()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert inner_tools.ran == ["slow:s"] and inner_model.calls == 2 and outer_model.calls == 2


# ---------------------------------------------------------------------------------------------------------------
# a hang-up (what the AG-UI server does when its client is gone: ``run.cancel("immediate", recursive=True)``)


def both_tools(id_fast: str = "c1", id_slow: str = "c2") -> Any:
    return calling(call("fast", '{"x": "a"}', id=id_fast), call("slow", '{"x": "b"}', id=id_slow))


async def hang_up_when(run: Any, started: anyio.Event) -> AgentCancelledError | None:
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await started.wait()
            assert await run.cancel("immediate", recursive=True).wait() == "cancelled"

        tg.start_soon(cancel)
        return await drain(run)


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_hang_up_of_a_sequential_agent_leaves_a_resumable_checkpoint(streaming: bool) -> None:
    tools = Tools()
    first = Gated([both_tools(), "a done"])
    second = Gated(["b done"])
    r = runner(sequence(first, second, tools), streaming=streaming)
    error = await hang_up_when(r.query("go", checkpoint_id="c", cancellable=True), tools.slow_started)
    assert error is not None and error.checkpoint_id == "c"
    assert tools.ran == ["fast:a"] and tools.slow_cut_off == 1 and second.calls == 0
    tools.slow_gate.set()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    # the child continued in its tool round: the finished tool did not run again, nor the model call before it
    assert tools.ran == ["fast:a", "slow:b"] and first.calls == 2 and second.calls == 1
    assert resumed.final_message is not None and resumed.final_message.content == "b done"


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_hang_up_of_an_agent_tool_tree_leaves_a_resumable_checkpoint(streaming: bool) -> None:
    inner_tools = Tools()
    inner_model = Gated([both_tools("i1", "i2"), "inner done"])
    outer_tools = Tools()
    outer_model = Gated(
        [calling(call("inner", '{"request": "sub"}', id="o1"), call("fast", '{"x": "o"}', id="o2")), "outer done"]
    )
    inner = inner_agent(inner_model, inner_tools)
    outer = ChatModelAgent("outer", "top", model=outer_model, tools=[AgentTool(inner), *outer_tools.all()[:1]])
    r = runner(outer, streaming=streaming)
    error = await hang_up_when(r.query("go", checkpoint_id="c", cancellable=True), inner_tools.slow_started)
    assert error is not None and error.checkpoint_id == "c"
    assert inner_tools.ran == ["fast:a"] and inner_tools.slow_cut_off == 1 and outer_tools.ran == ["fast:o"]
    inner_tools.slow_gate.set()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    # finished tools (the outer's and the inner's) did not run again, nor any model call that had answered
    assert inner_tools.ran == ["fast:a", "slow:b"] and outer_tools.ran == ["fast:o"]
    assert inner_model.calls == 2 and outer_model.calls == 2
    assert resumed.final_message is not None and resumed.final_message.content == "outer done"
