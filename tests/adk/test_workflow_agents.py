"""Workflow agents (issue 14; Eino's workflow.go and workflow_test.go): Sequential, Parallel, Loop: order, run
paths, shared history and parallel lanes, Exit, errors, BreakLoop scoping in nested loops, and interrupts
resumed at the paused child (parallel children one at a time)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from adk.agent import AgentContext
from adk.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent
from adk.events import AgentAction, AgentEvent, AgentInput, AgentOutput, MessageVariant
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import assistant_message
from compose.tools import tool
from tests.adk.helpers import call, calling, events_of

pytestmark = pytest.mark.anyio


def said(events: list[AgentEvent]) -> list[tuple[str, str]]:
    return [
        (e.agent_name, e.message.message.content)
        for e in events
        if e.message is not None and e.message.message is not None and e.message.role == "assistant"
    ]


def agent(name: str, *answers: Any, **kw: Any) -> ChatModelAgent:
    return ChatModelAgent(name, f"agent {name}", model=ScriptedChatModel(list(answers)), **kw)


async def test_sequential_runs_in_order_on_the_shared_history() -> None:
    a = agent("A", "from A")
    b_model = ScriptedChatModel(["from B"])
    b = ChatModelAgent("B", "agent B", model=b_model)
    seq = SequentialAgent("seq", "in order", [a, b])
    events = await events_of(Runner(seq).query("start"))
    assert said(events) == [("A", "from A"), ("B", "from B")]
    assert [e.run_path for e in events] == [("seq", "A"), ("seq", "A", "B")]
    assert [(m.role, m.content) for m in b_model.calls[0].messages] == [
        ("user", "start"),
        ("user", "For context: [A] said: from A."),
    ]
    assert b_model.calls[0].tools == ()  # workflow children may not transfer to the workflow


async def test_sequential_stops_at_an_exit() -> None:
    a = agent("A", calling(call("exit", '{"final_result": "done"}', "x")), exit_tool=True)
    b = agent("B", "never")
    run = Runner(SequentialAgent("seq", "d", [a, b])).query("go")
    events = await events_of(run)
    assert events[-1].action is not None and events[-1].action.exit
    assert {e.agent_name for e in events} == {"A"} and run.termination_reason == "exit"


async def test_an_error_stops_the_workflow() -> None:
    a = ChatModelAgent("A", "d", model=ScriptedChatModel(["x"], fail_at_call={0: RuntimeError("model down")}))
    b = agent("B", "never")
    run = Runner(SequentialAgent("seq", "d", [a, b])).query("go")
    events = await events_of(run)
    assert events[-1].error is not None and "model down" in str(events[-1].error)
    assert {e.agent_name for e in events} == {"A"} and run.termination_reason == "error"


async def test_parallel_children_run_on_their_own_lanes_then_join() -> None:
    a_model, b_model, c_model = ScriptedChatModel(["from A"]), ScriptedChatModel(["from B"]), ScriptedChatModel(["C"])
    par = ParallelAgent(
        "par", "both", [ChatModelAgent("A", "a", model=a_model), ChatModelAgent("B", "b", model=b_model)]
    )
    seq = SequentialAgent("seq", "then", [par, ChatModelAgent("C", "c", model=c_model)])
    events = await events_of(Runner(seq).query("go"))
    assert sorted(said(events)[:2]) == [("A", "from A"), ("B", "from B")]
    assert said(events)[2] == ("C", "C")
    # each lane sees the history before the workflow only
    assert [m.content for m in a_model.calls[0].messages] == ["go"]
    assert [m.content for m in b_model.calls[0].messages] == ["go"]
    # after the join, the next agent sees both, in the order they were recorded
    first, second = said(events)[:2]
    assert [m.content for m in c_model.calls[0].messages] == [
        "go",
        f"For context: [{first[0]}] said: {first[1]}.",
        f"For context: [{second[0]}] said: {second[1]}.",
    ]
    assert {e.run_path for e in events} == {("seq", "par", "A"), ("seq", "par", "B"), ("seq", "par", "C")}


async def test_parallel_events_interleave_as_they_come() -> None:
    class Ticker:
        def __init__(self, name: str, delay: float) -> None:
            self.name, self.description, self.delay = name, "ticks", delay

        async def run(self, input: AgentInput, ctx: AgentContext) -> Any:
            for i in range(2):
                await anyio.sleep(self.delay)
                yield AgentEvent(output=AgentOutput(MessageVariant(False, assistant_message(f"{self.name}{i}"))))

    events = await events_of(Runner(ParallelAgent("par", "d", [Ticker("slow", 0.05), Ticker("fast", 0.0)])).query("go"))
    assert [c for _, c in said(events)] == ["fast0", "slow0", "fast1", "slow1"]
    assert [e.run_path for e in events][:2] == [("par", "fast"), ("par", "slow")]


async def test_loop_runs_max_iterations_with_accumulating_run_paths() -> None:
    loop = LoopAgent("loop", "thrice", [agent("A", "a1", "a2", "a3"), agent("B", "b1", "b2", "b3")], max_iterations=3)
    events = await events_of(Runner(loop).query("go"))
    assert [c for _, c in said(events)] == ["a1", "b1", "a2", "b2", "a3", "b3"]
    assert events[3].run_path == ("loop", "A", "B", "A", "B")


def breaker(name: str) -> Any:
    @tool(name=f"stop_{name}")
    async def stop() -> str:
        """Stop the loop."""
        await send_tool_gen_action(AgentAction.new_break_loop(name))
        return "stopping"

    return stop


async def test_break_loop_stops_the_loop_after_the_current_child() -> None:
    a = agent("A", "a1", "a2", "a3")
    b = agent("B", "b1", calling(call("stop_B", "{}", "s")), "b3", tools=[breaker("B")])
    run = Runner(LoopAgent("loop", "until stopped", [a, b])).query("go")
    events = await events_of(run)
    assert [c for _, c in said(events)] == ["a1", "b1", "a2", "", "b3"]  # B ends its turn, then the loop stops
    [stop] = [e for e in events if e.action is not None and e.action.break_loop is not None]
    assert stop.action is not None and stop.action.break_loop is not None
    assert stop.action.break_loop.done and stop.action.break_loop.current_iterations == 1
    assert stop.action.break_loop.from_agent == "B"
    assert run.termination_reason == "completed"


async def test_break_loop_stops_only_the_nearest_loop() -> None:
    x = agent(
        "X", calling(call("stop_X", "{}", "s1")), "x1", calling(call("stop_X", "{}", "s2")), "x2", tools=[breaker("X")]
    )
    inner = LoopAgent("inner", "d", [x])
    outer = LoopAgent("outer", "d", [inner, agent("Y", "y1", "y2")], max_iterations=2)
    events = await events_of(Runner(outer).query("go"))
    breaks = [e.action.break_loop for e in events if e.action is not None and e.action.break_loop is not None]
    assert len(breaks) == 2 and all(b.done and b.current_iterations == 0 for b in breaks)
    assert [c for n, c in said(events) if n == "Y"] == ["y1", "y2"]  # the outer loop ran both iterations


def payer(name: str, ran: list[str], amount: int) -> ChatModelAgent:
    @tool(name=f"pay_{name}")
    def pay() -> str:
        """Pay."""
        ran.append(f"{name} pays {amount}")
        return f"{name} paid"

    return ChatModelAgent(
        name,
        f"pays {amount}",
        model=ScriptedChatModel([calling(call(f"pay_{name}", "{}", f"c{name}")), f"{name} done"]),
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda tool_name, args: True)],
    )


async def pause(runner: Runner, **kw: Any) -> tuple[list[AgentEvent], Any]:
    events = await events_of(runner.query("go", checkpoint_id="wf", **kw))
    last = events[-1]
    assert last.action is not None and last.action.interrupted is not None
    return events, last.action.interrupted


async def test_sequential_resumes_at_the_paused_child() -> None:
    ran: list[str] = []
    a_model = ScriptedChatModel(["a"])
    c_model = ScriptedChatModel(["c"])
    seq = SequentialAgent(
        "seq",
        "d",
        [ChatModelAgent("A", "a", model=a_model), payer("B", ran, 5), ChatModelAgent("C", "c", model=c_model)],
    )
    runner = Runner(seq, checkpoint_store=InMemoryCheckPointStore())
    _, info = await pause(runner)
    assert [c.address for c in info.interrupt_contexts] == ["agent:seq;agent:B;tool:pay_B:cB"]
    events = await events_of(runner.resume("wf", targets={info.ids[0]: ApprovalDecision(approved=True)}))
    assert ran == ["B pays 5"] and len(a_model.calls) == 1  # A is not run again
    assert said(events)[-1] == ("C", "c")
    assert events[-1].run_path == ("seq", "A", "B", "C")
    # C's history has A's answer (saved with the checkpoint) and B's whole turn
    assert [m.content for m in c_model.calls[0].messages][:2] == ["go", "For context: [A] said: a."]
    assert "For context: [B] `pay_B` tool returned result: B paid." in [m.content for m in c_model.calls[0].messages]


async def test_loop_resumes_at_its_iteration_and_index() -> None:
    ran: list[str] = []
    b = payer("B", ran, 1)
    b.model = ScriptedChatModel(["b1", calling(call("pay_B", "{}", "cB")), "b paid"])  # pays in iteration 1
    loop = LoopAgent("loop", "d", [agent("A", "a1", "a2"), b], max_iterations=2)
    runner = Runner(loop, checkpoint_store=InMemoryCheckPointStore())
    _, info = await pause(runner)
    events = await events_of(runner.resume("wf", targets={info.ids[0]: ApprovalDecision(approved=True)}))
    assert ran == ["B pays 1"]
    assert [c for _, c in said(events)] == ["b paid"]
    assert events[-1].run_path == ("loop", "A", "B", "A", "B")


async def test_parallel_pauses_resume_one_child_at_a_time() -> None:
    ran: list[str] = []
    c_model = ScriptedChatModel(["summary"])
    par = ParallelAgent("par", "d", [payer("A", ran, 1), payer("B", ran, 2), agent("N", "no tools")])
    seq = SequentialAgent("seq", "d", [par, ChatModelAgent("C", "c", model=c_model)])
    runner = Runner(seq, checkpoint_store=InMemoryCheckPointStore())
    _, info = await pause(runner)
    by = {c.address: c.id for c in info.interrupt_contexts}
    assert set(by) == {"agent:seq;agent:par;agent:A;tool:pay_A:cA", "agent:seq;agent:par;agent:B;tool:pay_B:cB"}
    _, again = await pause_resume(
        runner, {by["agent:seq;agent:par;agent:A;tool:pay_A:cA"]: ApprovalDecision(approved=True)}
    )
    assert again is not None and [c.address for c in again.interrupt_contexts] == [
        "agent:seq;agent:par;agent:B;tool:pay_B:cB"
    ]
    assert ran == ["A pays 1"]
    events = await events_of(runner.resume("wf", targets={again.ids[0]: ApprovalDecision(approved=True)}))
    assert ran == ["A pays 1", "B pays 2"]
    assert said(events)[-1] == ("C", "summary")
    history = [m.content for m in c_model.calls[0].messages]
    # every lane's events reached the join: N (finished before the first pause), A and B
    assert "For context: [N] said: no tools." in history
    assert "For context: [A] said: A done." in history and "For context: [B] said: B done." in history


async def pause_resume(runner: Runner, targets: dict[str, Any]) -> tuple[list[AgentEvent], Any]:
    events = await events_of(runner.resume("wf", targets=targets))
    last = events[-1]
    info = last.action.interrupted if last.action is not None else None
    return events, info


def test_workflow_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_iterations"):
        LoopAgent("l", "d", [agent("A", "x")], max_iterations=-1)
    with pytest.raises(TypeError, match=r"sub_agents\[0\]"):
        SequentialAgent("s", "d", [object()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="Name"):
        ParallelAgent("", "d", [])


async def test_a_custom_agent_writes_session_values_the_next_agent_reads() -> None:
    from adk.session_values import add_session_value, get_session_value

    class Setter:
        name, description = "setter", "sets the city"

        async def run(self, input: AgentInput, ctx: AgentContext) -> Any:
            add_session_value("city", "Hangzhou")
            assert get_session_value("user") == "alice"
            yield AgentEvent(output=AgentOutput(MessageVariant(False, assistant_message("set"))))

    reader_model = ScriptedChatModel(["ok"])
    reader = ChatModelAgent("reader", "d", "Plan for {user} in {city}.", model=reader_model, output_key="answer")
    run = Runner(SequentialAgent("seq", "d", [Setter(), reader])).query("go", session_values={"user": "alice"})
    events = await events_of(run)
    assert said(events) == [("setter", "set"), ("reader", "ok")]
    assert reader_model.calls[0].messages[0].content == "Plan for alice in Hangzhou."
    assert run.session_values == {"user": "alice", "city": "Hangzhou", "answer": "ok"}
