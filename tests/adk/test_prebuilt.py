"""Prebuilt agents (issue 14; Eino's prebuilt/supervisor and prebuilt/planexecute): the offline examples, the
executor's and replanner's inputs, streaming, bad planner output, a nested supervisor's exit, and a plan-execute
run paused for approval inside the executor and resumed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.prebuilt import (
    EXECUTED_STEPS_SESSION_KEY,
    PLAN_SESSION_KEY,
    Planner,
    Replanner,
    new_executor,
    plan_execute,
    supervisor,
)
from adk.prebuilt.plan_execute import PlanExecuteError
from adk.runner import Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool
from tests.adk.helpers import events_of

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def calls(name: str, arguments: object, call_id: str) -> Message:
    function = FunctionCall(name=name, arguments=json.dumps(arguments))
    return Message(role="assistant", tool_calls=[ToolCall(id=call_id, function=function)])


async def test_the_supervisor_example(capsys: pytest.CaptureFixture[str]) -> None:
    answer = await load("supervisor").main()
    assert answer == "Done: the note is written (bring an umbrella)."
    out = capsys.readouterr().out
    assert "supervisor/researcher/supervisor/writer  assistant Note: rainy day" in out


async def test_the_plan_execute_example(capsys: pytest.CaptureFixture[str]) -> None:
    result = await load("plan_execute").main()
    assert result["executed_steps"] == [
        {"step": "check the weather", "result": "It will rain lightly (18°C)."},
        {"step": "pick places for a rainy day", "result": "Indoors: the tea museum; evening: Hefang Street."},
    ]
    assert "break loop (done=True)" in capsys.readouterr().out


def pe_agents(executor_model: ScriptedChatModel, replanner_model: ScriptedChatModel, **executor: Any) -> Any:
    planner = Planner(ScriptedChatModel([calls("plan", {"steps": ["one", "two"]}, "p")]))
    return plan_execute(planner, new_executor(executor_model, **executor), Replanner(replanner_model))


@pytest.mark.parametrize("streaming", [False, True])
async def test_executor_and_replanner_inputs(streaming: bool) -> None:
    executor_model = ScriptedChatModel(["did one", "did two"])
    replanner_model = ScriptedChatModel(
        [calls("plan", {"steps": ["two"]}, "r1"), calls("respond", {"response": "all done"}, "r2")]
    )
    run = Runner(pe_agents(executor_model, replanner_model), enable_streaming=streaming).query("objective X")
    events = await events_of(run)
    first = executor_model.calls[0].messages
    assert first[0].role == "system"
    assert "## OBJECTIVE\nobjective X\n" in first[1].content
    assert '{"steps":["one","two"]}' in first[1].content
    assert first[1].content.endswith("execute the first step, which is:\none")
    second = executor_model.calls[1].messages[1].content
    assert "Step: one\nResult: did one\n" in second and second.endswith("which is:\ntwo")
    review = replanner_model.calls[1].messages
    assert "'respond'" in review[0].content and "'plan'" in review[0].content
    assert "Step: two\nResult: did two" in review[1].content
    assert run.session_values[PLAN_SESSION_KEY] == {"steps": ["two"]}
    assert run.session_values[EXECUTED_STEPS_SESSION_KEY][-1] == {"step": "two", "result": "did two"}
    contents = [e.message.message.content for e in events if e.message is not None and e.message.message is not None]
    assert contents[0] == '{"steps": ["one", "two"]}' and contents[-1] == '{"response": "all done"}'
    assert events[-1].action is not None and events[-1].action.break_loop is not None
    assert events[-1].action.break_loop.from_agent == "replanner" and events[-1].action.break_loop.done


async def test_a_planner_answer_without_the_tool_call_is_a_typed_error() -> None:
    planner = Planner(ScriptedChatModel(["I will just answer"]))
    agent = plan_execute(planner, new_executor(ScriptedChatModel(["x"])), Replanner(ScriptedChatModel(["x"])))
    run = Runner(agent).query("go")
    events = await events_of(run)
    assert isinstance(events[-1].error, PlanExecuteError) and "'plan' tool" in str(events[-1].error)
    bad = Planner(ScriptedChatModel([calls("plan", {"steps": "not a list"}, "p")]))
    events = await events_of(
        Runner(plan_execute(bad, new_executor(ScriptedChatModel(["x"])), Replanner(ScriptedChatModel(["x"])))).query(
            "go"
        )
    )
    assert isinstance(events[-1].error, PlanExecuteError) and "planner" in str(events[-1].error)


async def test_plan_execute_paused_in_the_executor_resumes() -> None:
    ran: list[str] = []

    @tool
    def book(what: str) -> str:
        """Book something.

        Args:
            what: what to book.
        """
        ran.append(what)
        return f"booked {what}"

    executor_model = ScriptedChatModel([calls("book", {"what": "hotel"}, "b1"), "hotel booked", "two done"])
    replanner_model = ScriptedChatModel(
        [calls("plan", {"steps": ["two"]}, "r1"), calls("respond", {"response": "trip ready"}, "r2")]
    )
    guard = ApprovalMiddleware(lambda name, args: name == "book")
    agent = pe_agents(executor_model, replanner_model, tools=[book], middlewares=[guard])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    events = await events_of(runner.query("plan my trip", checkpoint_id="pe"))
    info = events[-1].action.interrupted if events[-1].action else None
    assert info is not None and ran == []
    [ctx] = info.interrupt_contexts
    assert ctx.address == "agent:plan_execute_replan;agent:execute_replan;agent:executor;tool:book:b1"
    run = runner.resume("pe", targets={ctx.id: ApprovalDecision(approved=True)})
    events = await events_of(run)
    assert ran == ["hotel"]
    assert run.session_values[EXECUTED_STEPS_SESSION_KEY] == [
        {"step": "one", "result": "hotel booked"},
        {"step": "two", "result": "two done"},
    ]
    assert events[-1].action is not None and events[-1].action.break_loop is not None


async def test_a_sub_agent_that_exits_ends_the_supervised_run() -> None:
    boss = ChatModelAgent(
        "boss", "d", model=ScriptedChatModel([calls("transfer_to_agent", {"agent_name": "quitter"}, "t"), "never"])
    )
    quitter = ChatModelAgent(
        "quitter", "d", model=ScriptedChatModel([calls("exit", {"final_result": "bye"}, "x")]), exit_tool=True
    )
    run = Runner(supervisor(boss, [quitter])).query("go")
    events = await events_of(run)
    assert run.termination_reason == "exit"
    assert events[-1].agent_name == "quitter"  # no transfer back after an exit
