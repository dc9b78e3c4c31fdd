"""AgentTool (issue 14; Eino's agent_tool.go and agent_tool_test.go): info, input forms, shared session values,
internal events and their run paths, actions that do not leak, and interrupts resumed through the outer agent,
two agent tools deep, across stores and fresh runner objects."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from adk.agent import AgentContext
from adk.agents.agent_tool import AgentTool
from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.events import AgentAction, AgentEvent, AgentInput, AgentOutput, MessageVariant
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from adk.session_values import add_session_value, get_session_value
from compose.checkpoint import CheckPointStore, InMemoryCheckPointStore, SQLiteCheckPointStore
from compose.errors import ToolArgumentsError, ToolExecutionError
from compose.models import ScriptedChatModel
from compose.schema import assistant_message
from compose.stream import StreamReader
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, drain, events_of, kinds

pytestmark = pytest.mark.anyio


def inner_agent(model: ScriptedChatModel, tools: list[Any] | None = None, **kw: Any) -> ChatModelAgent:
    return ChatModelAgent("inner", "answers sub-questions", model=model, tools=tools, **kw)


def outer_agent(model: ScriptedChatModel, *tools: Any, emit: bool = False, **kw: Any) -> ChatModelAgent:
    return ChatModelAgent("outer", "top", model=model, tools=ToolsConfig(list(tools), emit_internal_events=emit), **kw)


def test_info_is_named_and_described_after_the_agent() -> None:
    t = AgentTool(inner_agent(ScriptedChatModel(["x"])))
    info = t.info()
    assert info.name == "inner" and info.description == "answers sub-questions"
    assert info.parameters["required"] == ["request"]
    assert info.parameters["properties"]["request"]["type"] == "string"


def test_empty_name_or_description_is_an_error() -> None:
    class Nameless:
        name, description = "", "d"

        def run(self, input: AgentInput, ctx: AgentContext) -> Any: ...

    class Undescribed:
        name, description = "a", ""

        def run(self, input: AgentInput, ctx: AgentContext) -> Any: ...

    with pytest.raises(TypeError, match="not an agent"):
        AgentTool(Nameless())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty Description"):
        AgentTool(Undescribed())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not an agent"):
        AgentTool(object())  # type: ignore[arg-type]


async def test_the_tool_returns_the_inner_runs_last_message() -> None:
    inner_model = ScriptedChatModel(["sub answer"])
    outer_model = ScriptedChatModel([calling(call("inner", '{"request": "what is 2+2"}', "c1")), "final"])
    agent = outer_agent(outer_model, AgentTool(inner_agent(inner_model)))
    seen = await collect(Runner(agent).query("go"))
    assert kinds(seen) == ["assistant", "tool:inner", "assistant"]
    assert seen[1].content == "sub answer"
    assert [m.content for m in inner_model.calls[0].messages] == ["what is 2+2"]
    assert outer_model.calls[1].messages[-1].content == "sub answer"


async def test_the_invokable_run_alone_gives_the_final_answer() -> None:
    assert await AgentTool(inner_agent(ScriptedChatModel(["inner2"]))).run('{"request": "q"}') == "inner2"


async def test_a_streaming_custom_agent_answers_with_its_last_events_text() -> None:
    class Streamer:
        name, description = "stream", "test"

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
            for parts in (["1", "2"], ["a", "b"]):
                stream = StreamReader.from_iterable([assistant_message(p) for p in parts])
                yield AgentEvent(output=AgentOutput(MessageVariant(True, message_stream=stream)))

    assert await AgentTool(Streamer()).run('{"request": "q"}') == "ab"


async def test_bad_arguments_fail_the_call_naming_the_tool() -> None:
    with pytest.raises(ToolArgumentsError, match="'inner'"):
        await AgentTool(inner_agent(ScriptedChatModel(["x"]))).run('{"question": "q"}')
    with pytest.raises(ToolArgumentsError, match="field 'request'"):
        await AgentTool(inner_agent(ScriptedChatModel(["x"]))).run('{"request": 3}')
    outer = outer_agent(
        ScriptedChatModel([calling(call("inner", "{}", "c1"))]), AgentTool(inner_agent(ScriptedChatModel(["x"])))
    )
    seen = await collect(Runner(outer).query("go"))
    assert kinds(seen) == ["assistant", "error"]
    assert isinstance(seen[-1].error.__cause__, ToolExecutionError) and "name:inner id:c1" in str(seen[-1].error)


async def test_a_custom_input_schema_passes_the_raw_arguments() -> None:
    class Query(BaseModel):
        city: str
        days: int

    inner_model = ScriptedChatModel(["planned"])
    t = AgentTool(inner_agent(inner_model), input_schema=Query)
    assert t.info().parameters["required"] == ["city", "days"]
    assert await t.run('{"city": "Hangzhou", "days": 2}') == "planned"
    assert inner_model.calls[0].messages[0].content == '{"city": "Hangzhou", "days": 2}'


async def test_full_chat_history_is_retold_as_eino_does() -> None:
    inner_model = ScriptedChatModel(["done"])
    outer_model = ScriptedChatModel([calling(call("inner", '{"request": "ignored"}', "c1"), content="asking"), "ok"])
    agent = outer_agent(
        outer_model, AgentTool(inner_agent(inner_model), full_chat_history_as_input=True), instruction="sys"
    )
    await collect(Runner(agent).query("hello"))
    texts = [(m.role, m.content) for m in inner_model.calls[0].messages]
    assert texts[0] == ("user", "hello")
    assert texts[1][0] == "user" and texts[1][1].startswith("For context: [outer] called tool: `transfer_to_agent`")
    assert texts[2] == (
        "user",
        "For context: [outer] `transfer_to_agent` tool returned result: successfully transferred to agent [inner].",
    )
    assert all(role != "system" for role, _ in texts)


async def test_session_values_are_shared_with_the_inner_agent() -> None:
    @tool
    async def remember(city: str) -> str:
        """Remember a city.

        Args:
            city: the city.
        """
        seen_user.append(get_session_value("user"))
        add_session_value("city", city)
        return "noted"

    seen_user: list[Any] = []
    inner = inner_agent(ScriptedChatModel([calling(call("remember", '{"city": "Hangzhou"}', "r1")), "ok"]), [remember])
    outer = outer_agent(ScriptedChatModel([calling(call("inner", '{"request": "q"}', "c1")), "fin"]), AgentTool(inner))
    run = Runner(outer).query("go", session_values={"user": "alice"})
    await collect(run)
    assert seen_user == ["alice"]
    assert run.session_values == {"user": "alice", "city": "Hangzhou"}


def nested(emit: bool) -> tuple[ChatModelAgent, ScriptedChatModel]:
    inner2 = ChatModelAgent(
        "inner2", "leaf", model=ScriptedChatModel(["inner2"]), tools=ToolsConfig(emit_internal_events=emit)
    )
    mid_model = ScriptedChatModel([calling(call("inner2", '{"request": "q2"}', "m1")), "mid"])
    inner = ChatModelAgent(
        "inner", "mid", model=mid_model, tools=ToolsConfig([AgentTool(inner2)], emit_internal_events=emit)
    )
    outer_model = ScriptedChatModel([calling(call("inner", '{"request": "q"}', "o1")), "top"])
    return outer_agent(outer_model, AgentTool(inner), emit=emit), mid_model


async def test_internal_events_carry_the_run_path_from_the_root() -> None:
    outer, _ = nested(emit=True)
    events = await events_of(Runner(outer).query("q"))
    paths = [(e.run_path, e.message.message.content if e.message and e.message.message else None) for e in events]
    assert paths == [
        (("outer",), ""),
        (("outer", "inner"), ""),
        (("outer", "inner", "inner2"), "inner2"),
        (("outer", "inner"), "inner2"),  # the inner agent's tool event for inner2
        (("outer", "inner"), "mid"),
        (("outer",), "mid"),
        (("outer",), "top"),
    ]
    assert [e.agent_name for e in events] == ["outer", "inner", "inner2", "inner", "inner", "outer", "outer"]


async def test_no_internal_events_when_disabled() -> None:
    outer, _ = nested(emit=False)
    events = await events_of(Runner(outer).query("q"))
    assert {e.agent_name for e in events} == {"outer"}
    assert [e.run_path for e in events] == [("outer",)] * 3


async def test_internal_events_are_not_the_callers_history() -> None:
    outer, mid_model = nested(emit=True)
    await events_of(Runner(outer).query("q"))
    # the outer model's second call sees its own conversation only: the tool result, not inner events
    outer_model = outer.model
    assert isinstance(outer_model, ScriptedChatModel)
    assert [m.role for m in outer_model.calls[1].messages] == ["user", "assistant", "tool"]
    assert [m.role for m in mid_model.calls[1].messages] == ["user", "assistant", "tool"]


async def test_streaming_internal_events_stream_and_the_tool_still_answers() -> None:
    outer, _ = nested(emit=True)
    run = Runner(outer, enable_streaming=True).query("q")
    got = []
    async with run:
        async for event in run:
            assert event.message is not None
            got.append((event.run_path, event.message.is_streaming, (await event.message.get_message()).content))
    assert (("outer", "inner", "inner2"), True, "inner2") in got
    assert got[-1] == (("outer",), True, "top")
    assert run.final_message is not None and run.final_message.content == "top"


async def test_inner_exit_and_transfer_do_not_leak() -> None:
    @tool
    async def hop() -> str:
        """Hop."""
        await send_tool_gen_action(AgentAction.new_transfer_to_agent("elsewhere"))
        return "hopped"

    inner = inner_agent(
        ScriptedChatModel([calling(call("hop", "{}", "h1")), calling(call("exit", '{"final_result": "bye"}', "x1"))]),
        [hop],
        exit_tool=True,
    )
    outer = outer_agent(
        ScriptedChatModel([calling(call("inner", '{"request": "q"}', "c1")), "after"]), AgentTool(inner), emit=True
    )
    run = Runner(outer).query("go")
    events = await events_of(run)
    assert run.termination_reason == "completed"
    assert run.final_message is not None and run.final_message.content == "after"
    inner_events = [e for e in events if e.run_path == ("outer", "inner")]
    assert inner_events and all(
        e.action is None or (not e.action.exit and e.action.transfer_to_agent is None) for e in inner_events
    )
    tool_event = next(e for e in events if e.run_path == ("outer",) and e.message and e.message.role == "tool")
    assert tool_event.message is not None and tool_event.message.message is not None
    assert tool_event.message.message.content == "bye" and tool_event.action is None


# ---------------------------------------------------------------------------------------------------------------
# interrupts


class Payments:
    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        async def pay(amount: int) -> str:
            """Pay.

            Args:
                amount: how much.
            """
            self.ran.append(f"pay {amount}")
            return f"paid {amount}"

        @tool
        def lookup(q: str) -> str:
            """Look up.

            Args:
                q: query.
            """
            self.ran.append(f"lookup {q}")
            return f"found {q}"

        self.pay, self.lookup = pay, lookup


def approval(name: str, arguments: str) -> bool:
    return name == "pay"


def payment_tree(p: Payments, depth: int, *, resumed: bool = False) -> ChatModelAgent:
    """``depth`` agent tools above an agent that looks up, then pays (approval needed) in one round; with
    ``resumed``, the scripted models start where a paused run's stopped (a new process's fresh models)."""
    skip = 1 if resumed else 0
    leaf = ChatModelAgent(
        "payer",
        "pays invoices",
        model=ScriptedChatModel(
            [calling(call("lookup", '{"q": "invoice"}', "l1"), call("pay", '{"amount": 7}', "p1")), "payer done"][skip:]
        ),
        tools=[p.lookup, p.pay],
        middlewares=[ApprovalMiddleware(approval)],
    )
    agent = leaf
    for level in range(depth):
        name = "outer" if level == depth - 1 else f"mid{level}"
        agent = ChatModelAgent(
            name,
            f"level {level}",
            model=ScriptedChatModel(
                [calling(call(agent.name, '{"request": "pay it"}', f"t{level}")), f"{name} done"][skip:]
            ),
            tools=[AgentTool(agent)],
        )
    return agent


@pytest.mark.parametrize("depth", [1, 2])
async def test_an_inner_interrupt_pauses_the_outer_run_under_the_tool(depth: int) -> None:
    p = Payments()
    runner = Runner(payment_tree(p, depth), checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("go", checkpoint_id="job"))
    assert paused is not None and paused.checkpoint_id == "job"
    [ctx] = paused.interrupt_contexts
    if depth == 1:
        assert ctx.address == "agent:outer;tool:payer:t0;agent:payer;tool:pay:p1"
    else:
        assert ctx.address == "agent:outer;tool:mid0:t1;agent:mid0;tool:payer:t0;agent:payer;tool:pay:p1"
    assert ctx.info.tool_name == "pay" and ctx.info.call_id == "p1"
    chain = []
    c = ctx.parent
    while c is not None:
        chain.append(c.address)
        assert not c.is_root_cause
        c = c.parent
    assert chain[-1] == "agent:outer" and chain[0] == ctx.address.rsplit(";", 1)[0]
    assert p.ran == ["lookup invoice"]

    seen, again = await drain(runner.resume("job", targets={ctx.id: ApprovalDecision(approved=True)}))
    assert again is None
    assert p.ran == ["lookup invoice", "pay 7"]  # the lookup that finished is not run again
    assert seen[-1].content == "outer done"
    assert await runner.checkpoint_store.get("job") is None  # type: ignore[union-attr]


async def test_a_rejection_reaches_the_inner_model() -> None:
    p = Payments()
    runner = Runner(payment_tree(p, 1), checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("go", checkpoint_id="job"))
    assert paused is not None
    decision = ApprovalDecision(approved=False, reason="too much")
    seen, _ = await drain(runner.resume("job", targets={paused.ids[0]: decision}))
    assert p.ran == ["lookup invoice"] and seen[-1].content == "outer done"


async def test_an_inner_interrupt_without_a_checkpoint_still_ends_the_run_paused() -> None:
    p = Payments()
    run = Runner(payment_tree(p, 1)).query("go")
    _, paused = await drain(run)
    assert paused is not None and paused.checkpoint_id is None
    assert paused.interrupt_contexts[0].address == "agent:outer;tool:payer:t0;agent:payer;tool:pay:p1"
    assert run.termination_reason == "interrupted"


async def _resume_in_fresh_objects(store: CheckPointStore) -> None:
    key = f"job-{uuid.uuid4().hex[:8]}"
    first = Payments()
    _, paused = await drain(Runner(payment_tree(first, 2), checkpoint_store=store).query("go", checkpoint_id=key))
    assert paused is not None
    # a new process: new tools, agents and runner, the same store
    second = Payments()
    runner = Runner(payment_tree(second, 2, resumed=True), checkpoint_store=store, enable_streaming=True)
    seen, again = await drain(runner.resume(key, targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    assert again is None and second.ran == ["pay 7"] and seen[-1].content == "outer done"
    assert seen[-1].streaming is False  # the checkpoint's mode, not the new runner's


async def test_resume_two_levels_deep_from_sqlite_with_fresh_objects(tmp_path: Path) -> None:
    async with SQLiteCheckPointStore(tmp_path / "cp.db") as store:
        await _resume_in_fresh_objects(store)


async def test_resume_two_levels_deep_from_postgres_with_fresh_objects(pg_server: Any) -> None:
    from compose.checkpoint import PostgresCheckPointStore

    table = f"agent_tool_{uuid.uuid4().hex[:8]}"
    async with PostgresCheckPointStore(pg_server.dsn, table=table, max_size=2) as store:
        await _resume_in_fresh_objects(store)


async def test_two_agent_tools_paused_in_one_round_resume_one_at_a_time(no_task_leaks: None) -> None:
    p = Payments()

    def payer(name: str, amount: int) -> ChatModelAgent:
        return ChatModelAgent(
            name,
            "pays",
            model=ScriptedChatModel([calling(call("pay", f'{{"amount": {amount}}}', f"p{amount}")), f"{name} paid"]),
            tools=[p.pay],
            middlewares=[ApprovalMiddleware(approval)],
        )

    outer = ChatModelAgent(
        "outer",
        "top",
        model=ScriptedChatModel(
            [calling(call("a", '{"request": "x"}', "ta"), call("b", '{"request": "y"}', "tb")), "all paid"]
        ),
        tools=[AgentTool(payer("a", 1)), AgentTool(payer("b", 2))],
    )
    runner = Runner(outer, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("go", checkpoint_id="j"))
    assert paused is not None
    by_tool = {c.address.split(";")[1]: c.id for c in paused.interrupt_contexts}
    assert set(by_tool) == {"tool:a:ta", "tool:b:tb"}
    _, again = await drain(runner.resume("j", targets={by_tool["tool:a:ta"]: ApprovalDecision(approved=True)}))
    assert again is not None and [c.id for c in again.interrupt_contexts] == [by_tool["tool:b:tb"]]
    assert p.ran == ["pay 1"]
    seen, done = await drain(runner.resume("j", targets={by_tool["tool:b:tb"]: ApprovalDecision(approved=True)}))
    assert done is None and p.ran == ["pay 1", "pay 2"] and seen[-1].content == "all paid"


async def test_closing_the_outer_run_mid_way_closes_the_inner_run(no_task_leaks: None) -> None:
    gate = anyio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        await gate.wait()
        return "late"

    inner = inner_agent(ScriptedChatModel([calling(call("slow", "{}", "s1")), "x"]), [slow])
    outer = outer_agent(ScriptedChatModel([calling(call("inner", '{"request": "q"}', "c1")), "y"]), AgentTool(inner))
    run = Runner(outer, enable_streaming=True).query("go")
    async with run:
        first = await run.__anext__()
        await first.aclose()
        with anyio.move_on_after(0.2):
            await run.__anext__()
    assert run.termination_reason == "closed"


AGENT_TOOL_WORKER = Path(__file__).parent / "workers" / "agent_tool_worker.py"


def _worker(*args: str) -> Any:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, str(AGENT_TOOL_WORKER), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_agent_tools_deep_resumed_by_a_fresh_process(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import json

    where = str(tmp_path / "cp.db") if kind == "sqlite" else request.getfixturevalue("pg_server").dsn
    log = tmp_path / "tools.log"
    first = _worker("run", kind, where, str(log))
    assert first.returncode == -9, first.stderr  # killed right after the interrupt event
    paused = json.loads(first.stdout.strip().splitlines()[-1])
    assert paused["address"] == "agent:outer;tool:mid:t1;agent:mid;tool:payer:t0;agent:payer;tool:pay:p1"
    assert log.read_text().splitlines() == ["lookup invoice"]
    second = _worker("resume", kind, where, str(log), paused["id"])
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary == {"final": "outer done", "left": False}
    assert log.read_text().splitlines() == ["lookup invoice", "pay 7"]  # the lookup did not run again
