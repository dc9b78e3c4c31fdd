"""The deep agent (Eino's ``adk/prebuilt/deep/deep_test.go`` and ``task_tool_test.go``, ported): its instruction,
write_todos and the session value, the task tool over sub-agents and the general-purpose clone (session values,
streaming mode, internal events, a paused sub-agent resumed), output_key, and a whole run on a LocalBackend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adk import ChatModelAgent, Runner, ToolsConfig
from adk.middlewares import LocalBackend
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.prebuilt import SESSION_KEY_TODOS, deep_agent
from adk.prebuilt._deep_prompts import (
    BASE_AGENT_INSTRUCTION,
    GENERAL_AGENT_DESCRIPTION,
    TASK_PROMPT,
    WRITE_TODOS_TOOL_DESCRIPTION,
)
from adk.prebuilt.deep import default_task_tool_description
from adk.session_values import get_session_value
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import NodeRunError, ToolArgumentsError
from compose.models import ScriptedChatModel
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, drain, events_of, kinds

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deep_agent.py"

TODOS = [
    {"content": "Find the capital", "activeForm": "Finding the capital", "status": "in_progress"},
    {"content": "Write notes", "activeForm": "Writing notes", "status": "pending"},
    {"content": "Check the notes", "activeForm": "Checking the notes", "status": "pending"},
]


def task(agent: str, description: str, id: str) -> object:
    return call("task", json.dumps({"subagent_type": agent, "description": description}), id)


async def test_the_built_in_instruction_and_tools() -> None:
    model = ScriptedChatModel(["hi"])
    agent = deep_agent("deep", "a deep agent", model)
    assert [s.content for s in await collect(Runner(agent).query("hello"))] == ["hi"]
    (first,) = model.calls
    assert first.messages[0].role == "system"
    assert first.messages[0].content == BASE_AGENT_INSTRUCTION + TASK_PROMPT
    assert [m.content for m in first.messages[1:]] == ["hello"]
    assert [t.name for t in first.tools] == ["write_todos", "task"]
    todos, task_tool = first.tools
    assert todos.description == WRITE_TODOS_TOOL_DESCRIPTION
    assert task_tool.parameters["properties"] == {
        "subagent_type": {"type": "string"},
        "description": {"type": "string"},
    }
    assert f"- general-purpose: {GENERAL_AGENT_DESCRIPTION}\n" in task_tool.description


async def test_a_given_instruction_is_used_as_it_is_literal_braces_and_all() -> None:
    model = ScriptedChatModel(["ok"])
    agent = deep_agent(
        "deep", "d", model, instruction='Reply as JSON: {"a": {x}}', write_todos=False, general_sub_agent=False
    )
    await collect(Runner(agent).query("hi", session_values={"x": 1}))
    assert model.calls[0].messages[0].content == 'Reply as JSON: {"a": {x}}'
    assert model.calls[0].tools == ()
    bare = ScriptedChatModel(["ok"])
    await collect(
        Runner(deep_agent("deep", "d", bare, instruction="Plain.", write_todos=False, general_sub_agent=False)).query(
            "hi"
        )
    )
    assert [m.role for m in bare.calls[0].messages] == ["system", "user"]


async def test_write_todos_keeps_the_list_in_the_session() -> None:
    model = ScriptedChatModel([calling(call("write_todos", json.dumps({"todos": TODOS}), "w1")), "planned"])
    runner = Runner(deep_agent("deep", "d", model, general_sub_agent=False))
    run = runner.query("plan")
    seen = await collect(run)
    assert seen[1].content == "Updated todo list to " + json.dumps(TODOS, separators=(",", ":"))
    assert run.session_values[SESSION_KEY_TODOS] == TODOS
    bad = ScriptedChatModel([calling(call("write_todos", '{"todos": [{"content": "x", "status": "later"}]}', "w"))])
    errors = [s.error for s in await collect(Runner(deep_agent("deep", "d", bad)).query("plan")) if s.error]
    assert errors and isinstance(errors[0], NodeRunError)
    assert isinstance(errors[0].__cause__.__cause__, ToolArgumentsError)  # type: ignore[union-attr]


async def test_the_task_tool_runs_the_named_sub_agent_with_the_description_as_request() -> None:
    sub_model = ScriptedChatModel(["42 apples"])
    counter = ChatModelAgent("counter", "counts things", "You count.", model=sub_model)
    model = ScriptedChatModel([calling(task("counter", "count the apples", "t1")), "there are 42"])
    agent = deep_agent("deep", "d", model, sub_agents=[counter], general_sub_agent=False)
    seen = await collect(Runner(agent).query("how many apples?"))
    assert kinds(seen) == ["assistant", "tool:task", "assistant"]
    assert seen[1].content == "42 apples"
    assert [m.content for m in sub_model.calls[0].messages] == ["You count.", "count the apples"]
    description = {t.name: t for t in model.calls[0].tools}["task"].description
    assert description == default_task_tool_description([counter])
    assert "- counter: counts things\n" in description and "general-purpose" not in description


async def test_an_unknown_sub_agent_fails_the_call_naming_it() -> None:
    model = ScriptedChatModel([calling(task("nobody", "x", "t1"))])
    seen = await collect(Runner(deep_agent("deep", "d", model)).query("go"))
    error = seen[-1].error
    assert error is not None and "subagent type nobody not found" in str(error.__cause__)


async def test_the_general_purpose_clone_has_the_tools_but_no_task_tool(tmp_path: Path) -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: what.
        """
        return f"found {q}"

    model = ScriptedChatModel(
        [
            calling(task("general-purpose", "look up x", "t1")),
            calling(call("lookup", '{"q": "x"}', "l1")),  # the clone's calls
            "x is found",
            "done",
        ]
    )
    agent = deep_agent(
        "deep", "d", model, tools=[lookup], backend=LocalBackend(tmp_path), task_tool_description="Run a sub-agent."
    )
    seen = await collect(Runner(agent).query("find x"))
    assert seen[-1].content == "done" and seen[1].content == "x is found"
    outer, clone, _, _ = model.calls
    tools = ["lookup", "write_todos", "ls", "read_file", "write_file", "edit_file", "glob", "grep"]
    assert [t.name for t in outer.tools] == [*tools, "task"]  # the sub-agent's clone has no task tool
    assert outer.tools[-1].description == "Run a sub-agent."
    assert [t.name for t in clone.tools] == tools
    assert clone.messages[0].content == BASE_AGENT_INSTRUCTION and clone.messages[1].content == "look up x"


async def test_sub_agents_share_session_values_and_streaming_mode() -> None:
    seen_values: list[object] = []

    @tool
    def peek() -> str:
        """Peek at the session."""
        seen_values.append(get_session_value("k"))
        return "peeked"

    sub_model = ScriptedChatModel([calling(call("peek", "{}", "p1")), "sub done"])
    sub = ChatModelAgent("sub", "peeks", model=sub_model, tools=[peek])
    model = ScriptedChatModel([calling(task("sub", "peek", "t1")), "done"])
    agent = deep_agent("deep", "d", model, sub_agents=[sub], general_sub_agent=False)
    await collect(Runner(agent, enable_streaming=True).query("go", session_values={"k": "v"}))
    assert seen_values == ["v"]
    assert [c.streaming for c in sub_model.calls] == [True, True]


async def test_sub_agent_events_are_forwarded_with_emit_internal_events() -> None:
    sub = ChatModelAgent("sub", "answers", model=ScriptedChatModel(["inner answer"]))
    model = ScriptedChatModel([calling(task("sub", "answer", "t1")), "done"])
    agent = deep_agent(
        "deep", "d", model, sub_agents=[sub], general_sub_agent=False, tools=ToolsConfig(emit_internal_events=True)
    )
    events = await events_of(Runner(agent).query("go"))
    paths = [(e.run_path, e.message.message.content if e.message and e.message.message else None) for e in events]
    assert (("deep", "sub"), "inner answer") in paths
    assert paths[-1] == (("deep",), "done")


async def test_output_key_stores_the_answer() -> None:
    for streaming in (False, True):
        run = Runner(
            deep_agent("deep", "d", ScriptedChatModel(["final"]), output_key="answer"), enable_streaming=streaming
        ).query("go")
        await collect(run)
        assert run.session_values["answer"] == "final"


async def test_a_paused_sub_agent_resumes_where_it_stopped() -> None:
    paid: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        paid.append(amount)
        return f"paid {amount}"

    payer = ChatModelAgent(
        "payer",
        "pays",
        model=ScriptedChatModel([calling(call("pay", '{"amount": 7}', "p1")), "payer done"]),
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda name, args: name == "pay")],
    )
    model = ScriptedChatModel([calling(task("payer", "pay 7", "t1")), "all paid"])
    runner = Runner(deep_agent("deep", "d", model, sub_agents=[payer]), checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("pay", checkpoint_id="job"))
    assert paused is not None and paid == []
    [ctx] = paused.interrupt_contexts
    assert ctx.address == "agent:deep;tool:task:t1;agent:payer;tool:pay:p1"
    seen, again = await drain(runner.resume("job", targets={ctx.id: ApprovalDecision(approved=True)}))
    assert again is None and paid == [7]
    assert [s.content for s in seen][-2:] == ["payer done", "all paid"]


async def test_a_deep_agent_plans_delegates_writes_edits_greps_and_answers(tmp_path: Path) -> None:
    """The issue's check: three todos, one delegated, a file written and edited in a LocalBackend, grepped."""
    researcher_model = ScriptedChatModel(["The capital of France is Paris."])
    researcher = ChatModelAgent("researcher", "finds facts", "You find facts.", model=researcher_model)
    model = ScriptedChatModel(
        [
            calling(call("write_todos", json.dumps({"todos": TODOS}), "c1")),
            calling(task("researcher", "What is the capital of France?", "c2")),
            calling(call("write_file", json.dumps({"file_path": "/notes.md", "content": "capital: TBD\n"}), "c3")),
            calling(
                call(
                    "edit_file",
                    json.dumps(
                        {"file_path": "/notes.md", "old_string": "TBD", "new_string": "Paris", "replace_all": False}
                    ),
                    "c4",
                )
            ),
            calling(call("grep", json.dumps({"pattern": "capital", "output_mode": "content"}), "c5")),
            "The capital is Paris; see /notes.md.",
        ]
    )
    agent = deep_agent("planner", "plans and writes", model, sub_agents=[researcher], backend=LocalBackend(tmp_path))
    run = Runner(agent).query("Find France's capital and note it.")
    seen = await collect(run)
    assert kinds(seen) == [
        "assistant",
        "tool:write_todos",
        "assistant",
        "tool:task",
        "assistant",
        "tool:write_file",
        "assistant",
        "tool:edit_file",
        "assistant",
        "tool:grep",
        "assistant",
    ]
    assert seen[3].content == "The capital of France is Paris."
    assert seen[9].content == "/notes.md:1:capital: Paris"
    assert seen[-1].content == "The capital is Paris; see /notes.md."
    assert (tmp_path / "notes.md").read_text() == "capital: Paris\n"
    assert len(run.session_values[SESSION_KEY_TODOS]) == 3
    assert researcher_model.calls[0].messages[-1].content == "What is the capital of France?"


async def test_the_deep_agent_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_deep_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = await module.main()
    assert result["model"] == "backup"  # the primary failed; failover answered
    assert result["note"] == "# Hangzhou\nRainy day: Tea Museum\n"
    assert [t.split(":")[0] for t in result["tools"]] == ["write_todos", "task", "write_file", "edit_file", "grep"]
    assert len(result["todos"]) == 3
    assert "answer (backup): Noted in /notes/hangzhou.md" in capsys.readouterr().out


async def test_a_shell_adds_the_execute_tool(tmp_path: Path) -> None:
    from adk.middlewares import LocalShell

    model = ScriptedChatModel([calling(call("execute", '{"command": "echo hi > out.txt; cat out.txt"}', "e1")), "ok"])
    agent = deep_agent("deep", "d", model, shell=LocalShell(tmp_path, timeout=10), general_sub_agent=False)
    seen = await collect(Runner(agent).query("run it"))
    assert [t.name for t in model.calls[0].tools] == ["write_todos", "execute"]
    assert seen[1].content == "hi\n"
