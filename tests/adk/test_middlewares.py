"""Agent middlewares (adk.middlewares): order, state rewriting, per-run tools, tool wrappers, after_agent, the
dangling tool-call patch and tool-result reduction (Eino's handler.go, patchtoolcalls and reduction tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from adk import ChatModelAgent, Runner, ToolsConfig
from adk.events import AgentEvent
from adk.middlewares import (
    AgentMiddleware,
    ChatModelAgentContext,
    ChatModelAgentState,
    ModelWrapper,
    PatchToolCallsMiddleware,
    ToolResultReductionMiddleware,
    patch_dangling_tool_calls,
)
from adk.middlewares.approval import ApprovalMiddleware
from adk.middlewares.reduction import CLEARED_RESULT
from compose.models.base import ChatModel
from compose.models.scripted import ScriptedChatModel
from compose.schema import Message, assistant_message, tool_message, user_message
from compose.tools import tool
from compose.tools.middleware import (
    InvokableToolEndpoint,
    StreamableToolEndpoint,
    StreamToolOutput,
    ToolInput,
    ToolOutput,
)
from tests.adk.helpers import call, calling, collect, kinds

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def mul(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


@tool
async def count_up(n: int) -> AsyncIterator[str]:
    """Stream the numbers 1..n."""
    for i in range(1, n + 1):
        yield f"{i},"


class Recorder(AgentMiddleware):
    """Logs every hook call into a shared list, tagged with its name."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        self.log.append(f"{self.name}.before_agent")
        return context

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        self.log.append(f"{self.name}.before_model")
        return state

    async def after_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        self.log.append(f"{self.name}.after_model")
        return state

    def wrap_model(self, model: ChatModel) -> ChatModel:
        log, name = self.log, self.name

        class Logged(ModelWrapper):
            async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
                log.append(f"{name}.model>")
                answer = await self.inner.generate(messages, **opts)
                log.append(f"{name}.model<")
                return answer

        return Logged(model)

    def wrap_invokable_tool_call(self, next: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            self.log.append(f"{self.name}.tool>{inp.name}")
            out = await next(inp)
            self.log.append(f"{self.name}.tool<{inp.name}")
            return ToolOutput(f"{out.result}{self.name}")

        return endpoint

    async def after_agent(self, state: ChatModelAgentState) -> None:
        self.log.append(f"{self.name}.after_agent:{state.messages[-1].content}")


async def test_first_middleware_wraps_the_others() -> None:
    log: list[str] = []
    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 2}')), "done"])
    agent = ChatModelAgent(
        "a", "d", model=model, tools=[add], middlewares=[Recorder("A", log), Recorder("B", log), Recorder("C", log)]
    )
    seen = await collect(Runner(agent).query("go"))
    assert kinds(seen) == ["assistant", "tool:add", "assistant"]
    # C is innermost: the tool result gets C's tag first, then B's, then A's
    assert seen[1].content == "3CBA"
    model_round = [
        "A.before_model", "B.before_model", "C.before_model",
        "A.model>", "B.model>", "C.model>", "C.model<", "B.model<", "A.model<",
        "A.after_model", "B.after_model", "C.after_model",
    ]  # fmt: skip
    assert log == [
        "A.before_agent", "B.before_agent", "C.before_agent",
        *model_round,
        "A.tool>add", "B.tool>add", "C.tool>add", "C.tool<add", "B.tool<add", "A.tool<add",
        *model_round,
        "A.after_agent:done", "B.after_agent:done", "C.after_agent:done",
    ]  # fmt: skip


async def test_hooks_are_middlewares_around_the_others() -> None:
    """before_chat_model runs before every middleware's rewrite, after_chat_model after them (Eino's order)."""
    log: list[str] = []
    agent = ChatModelAgent(
        "a",
        "d",
        model=ScriptedChatModel(["hi"]),
        middlewares=[Recorder("A", log)],
        before_chat_model=[lambda s: log.append("before_hook")],
        after_chat_model=[lambda s: log.append("after_hook")],
    )
    await collect(Runner(agent).query("go"))
    assert log == [
        "A.before_agent", "before_hook", "A.before_model", "A.model>", "A.model<",
        "A.after_model", "after_hook", "A.after_agent:hi",
    ]  # fmt: skip
    assert isinstance(agent.middlewares[0], AgentMiddleware)


class Redact(AgentMiddleware):
    """Replaces every user message's text before the model sees it; what it returns is kept."""

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        msgs = [m.model_copy(update={"content": "[redacted]"}) if m.role == "user" else m for m in state.messages]
        return ChatModelAgentState(msgs, state.tool_infos)


class Rename(AgentMiddleware):
    """Rewrites the model's answer: the last message is what flows on."""

    async def after_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        last = state.messages[-1]
        if not last.tool_calls:
            state.messages[-1] = assistant_message(last.content.upper())
        return state


async def test_state_rewrites_are_kept_for_later_calls_and_the_answer() -> None:
    model = ScriptedChatModel([calling(call("add", '{"a": 2, "b": 3}')), "five"])
    agent = ChatModelAgent("a", "d", instruction="sys", model=model, tools=[add], middlewares=[Redact(), Rename()])
    run = Runner(agent).query("secret")
    seen = await collect(run)
    first, second = model.calls
    assert [m.content for m in first.messages] == ["sys", "[redacted]"]
    # the second call starts from the kept (redacted) state, plus the call and its result
    assert [(m.role, m.content) for m in second.messages] == [
        ("system", "sys"),
        ("user", "[redacted]"),
        ("assistant", ""),
        ("tool", "5"),
    ]
    assert run.final_message is not None and run.final_message.content == "FIVE"
    # the event shows the model's own answer (the wrappers are inside the event emitter; rewrites outside)
    assert seen[-1].content == "five"


class DropToolInfos(AgentMiddleware):
    """Offers the model only the tools named, from the second model call on."""

    def __init__(self, keep: set[str]) -> None:
        self.keep = keep

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        if any(m.role == "tool" for m in state.messages):
            state.tool_infos = [t for t in state.tool_infos if t.name in self.keep]
        return state


async def test_rewriting_tool_infos_changes_what_later_calls_offer() -> None:
    rounds = [calling(call("add", '{"a": 1, "b": 1}')), calling(call("mul", '{"a": 2, "b": 2}'))]
    model = ScriptedChatModel([*rounds, "ok"])
    agent = ChatModelAgent("a", "d", model=model, tools=[add, mul], middlewares=[DropToolInfos({"mul"})])
    await collect(Runner(agent).query("go"))
    assert [[t.name for t in c.tools] for c in model.calls] == [["add", "mul"], ["mul"], ["mul"]]


class PerRunTools(AgentMiddleware):
    """before_agent: the run's tools are the ones named in the session value ``tools``; its instruction names
    them; ``mul`` returns directly."""

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        from adk.session_values import get_session_value

        wanted = get_session_value("tools") or ""
        names = set(wanted.split(","))
        tools = [t for t in (add, mul) if t.info().name in names]
        return ChatModelAgentContext(f"{context.instruction} Tools: {wanted}.", tools, {"mul"})


async def test_before_agent_changes_tools_instruction_and_return_directly_per_run() -> None:
    model = ScriptedChatModel(
        [
            calling(call("add", '{"a": 1, "b": 2}')),
            "three",
            calling(call("mul", '{"a": 3, "b": 4}')),
        ]
    )
    agent = ChatModelAgent("a", "d", instruction="Be brief.", model=model, middlewares=[PerRunTools()])
    runner = Runner(agent)
    first = await collect(runner.query("add", session_values={"tools": "add"}))
    assert kinds(first) == ["assistant", "tool:add", "assistant"]
    second_run = runner.query("mul", session_values={"tools": "mul"})
    second = await collect(second_run)
    # mul returns directly in this run: its result ends it
    assert kinds(second) == ["assistant", "tool:mul"]
    assert second_run.final_message is not None and second_run.final_message.content == "12"
    assert [[t.name for t in c.tools] for c in model.calls] == [["add"], ["add"], ["mul"]]
    assert [c.messages[0].content for c in model.calls] == [
        "Be brief. Tools: add.",
        "Be brief. Tools: add.",
        "Be brief. Tools: mul.",
    ]


async def test_a_tool_removed_by_before_agent_cannot_be_called() -> None:
    model = ScriptedChatModel([calling(call("mul", '{"a": 3, "b": 4}'))])
    agent = ChatModelAgent("a", "d", model=model, tools=[add, mul], middlewares=[PerRunTools()])
    seen = await collect(Runner(agent).query("mul", session_values={"tools": "add"}))
    assert kinds(seen) == ["assistant", "error"]
    assert "mul" in str(seen[-1].error)


class Shout(AgentMiddleware):
    def wrap_invokable_tool_call(self, next: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            return ToolOutput((await next(inp)).result.upper())

        return endpoint

    def wrap_streamable_tool_call(self, next: StreamableToolEndpoint) -> StreamableToolEndpoint:
        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            out = await next(inp)
            return StreamToolOutput(out.result.map(lambda chunk: f"<{chunk}>"))

        return endpoint


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


@pytest.mark.parametrize("streaming", [False, True])
async def test_wrap_tool_call_invokable_and_streamable(streaming: bool) -> None:
    model = ScriptedChatModel(
        [calling(call("echo", '{"text": "hi"}', id="c1"), call("count_up", '{"n": 3}', id="c2")), "done"]
    )
    agent = ChatModelAgent("a", "d", model=model, tools=[echo, count_up], middlewares=[Shout()])
    seen = await collect(Runner(agent, enable_streaming=streaming).query("go"))
    results = {s.tool_name: s.content for s in seen if s.role == "tool"}
    assert results == {"echo": "HI", "count_up": "<1,><2,><3,>"}
    # the model saw the wrapped results too
    tool_msgs = {m.tool_call_id: m.content for m in model.calls[1].messages if m.role == "tool"}
    assert tool_msgs == {"c1": "HI", "c2": "<1,><2,><3,>"}


class FailAfter(AgentMiddleware):
    def __init__(self) -> None:
        self.calls = 0

    async def after_agent(self, state: ChatModelAgentState) -> None:
        self.calls += 1


async def test_after_agent_runs_on_success_only() -> None:
    mw = FailAfter()
    ok = ChatModelAgent("a", "d", model=ScriptedChatModel(["hi"]), middlewares=[mw])
    await collect(Runner(ok).query("go"))
    assert mw.calls == 1
    failing = ChatModelAgent(
        "a", "d", model=ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}'))] * 3), tools=[add],
        max_iterations=2, middlewares=[mw],
    )  # fmt: skip
    seen = await collect(Runner(failing).query("go"))
    assert kinds(seen)[-1] == "error"
    assert mw.calls == 1


async def test_after_agent_sees_a_return_directly_result() -> None:
    seen_states: list[list[str]] = []

    class Keep(AgentMiddleware):
        async def after_agent(self, state: ChatModelAgentState) -> None:
            seen_states.append([m.role for m in state.messages])

    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}'))])
    agent = ChatModelAgent(
        "a", "d", model=model, tools=ToolsConfig([add], return_directly={"add"}), middlewares=[Keep()]
    )
    await collect(Runner(agent).query("go"))
    assert seen_states == [["user", "assistant", "tool"]]


def test_a_middleware_must_be_an_agent_middleware() -> None:
    with pytest.raises(TypeError, match=r"middlewares\[0\] is ToolOutput, not an AgentMiddleware"):
        ChatModelAgent("a", "d", model=ScriptedChatModel([]), middlewares=[ToolOutput("x")])  # type: ignore[list-item]


async def test_a_rewrite_returning_nothing_is_a_typed_error() -> None:
    class Broken(AgentMiddleware):
        async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
            return None  # type: ignore[return-value]

    agent = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), middlewares=[Broken()])
    seen = await collect(Runner(agent).query("go"))
    assert kinds(seen) == ["error"]
    assert isinstance(seen[0].error, Exception)
    assert "Broken.before_model_rewrite_state must return a ChatModelAgentState, got NoneType" in str(
        seen[0].error.__cause__ or seen[0].error
    )


async def test_approval_is_a_middleware() -> None:
    agent = ChatModelAgent(
        "a",
        "d",
        model=ScriptedChatModel(["x"]),
        tools=[add],
        middlewares=[ApprovalMiddleware(lambda name, args: name == "add")],
    )
    assert [type(m) for m in agent.middlewares] == [ApprovalMiddleware]


# ------------------------------------------------------------------------------------------------------------
# The dangling tool-call patch


def test_patch_answers_calls_without_results_only() -> None:
    history = [
        user_message("hi"),
        calling(call("add", id="c1"), call("mul", id="c2")),
        tool_message("2", "c1", tool_name="add"),
        user_message("again"),
        calling(call("add", id="c3")),
    ]
    patched = patch_dangling_tool_calls(history)
    assert [(m.role, m.tool_call_id) for m in patched] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
        ("assistant", None),
        ("tool", "c3"),
    ]
    assert patched[3].tool_name == "mul" and "c2" in patched[3].content and "no result" in patched[3].content
    complete = [user_message("hi"), calling(call("add", id="c1")), tool_message("2", "c1")]
    assert patch_dangling_tool_calls(complete) == complete


async def test_patch_middleware_fixes_a_history_from_a_crashed_turn() -> None:
    model = ScriptedChatModel(["fine"])
    agent = ChatModelAgent(
        "a", "d", model=model, middlewares=[PatchToolCallsMiddleware(lambda name, cid: f"{name} {cid} lost")]
    )
    history = [user_message("pay"), calling(call("pay", id="p1")), user_message("what happened?")]
    await collect(Runner(agent).run(history))
    assert [(m.role, m.content) for m in model.calls[0].messages] == [
        ("user", "pay"),
        ("assistant", ""),
        ("tool", "pay p1 lost"),
        ("user", "what happened?"),
    ]


# ------------------------------------------------------------------------------------------------------------
# Tool-result reduction


@tool
async def dump(n: int) -> str:
    """Return n characters."""
    return "x" * n


@tool
async def dump_stream(n: int) -> AsyncIterator[str]:
    """Stream n characters, ten at a time."""
    for _ in range(n // 10):
        yield "y" * 10


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_huge_result_is_cut_with_a_marker(streaming: bool) -> None:
    model = ScriptedChatModel(
        [calling(call("dump", '{"n": 500}', id="c1"), call("dump_stream", '{"n": 500}', id="c2")), "ok"]
    )
    agent = ChatModelAgent(
        "a", "d", model=model, tools=[dump, dump_stream],
        middlewares=[ToolResultReductionMiddleware(max_result_chars=25, clear_after_tokens=None)],
    )  # fmt: skip
    await collect(Runner(agent, enable_streaming=streaming).query("go"))
    results = {m.tool_call_id: m.content for m in model.calls[1].messages if m.role == "tool"}
    assert results["c1"] == "x" * 25 + "\n[tool result cut: 25 characters of 500 shown]"
    assert results["c2"] == "y" * 25 + "\n[tool result cut: 25 characters shown]"


async def test_old_results_are_cleared_past_the_budget() -> None:
    rounds = [calling(call("dump", '{"n": 400}', id=f"c{i}")) for i in range(5)]
    model = ScriptedChatModel([*rounds, "done"])
    # each result is ~104 tokens: the budget keeps the newest two
    agent = ChatModelAgent(
        "a", "d", model=model, tools=[dump],
        middlewares=[ToolResultReductionMiddleware(max_result_chars=None, clear_after_tokens=250)],
    )  # fmt: skip
    await collect(Runner(agent).query("go"))
    last = model.calls[-1].messages
    contents = [m.content for m in last if m.role == "tool"]
    assert contents == [CLEARED_RESULT, CLEARED_RESULT, CLEARED_RESULT, "x" * 400, "x" * 400]
    # every call still has its result (a cleared one is a result too)
    assert [m.tool_call_id for m in last if m.role == "tool"] == [f"c{i}" for i in range(5)]


async def test_the_latest_round_is_never_cleared() -> None:
    model = ScriptedChatModel([calling(call("dump", '{"n": 4000}', id="c1")), "done"])
    agent = ChatModelAgent(
        "a", "d", model=model, tools=[dump],
        middlewares=[ToolResultReductionMiddleware(max_result_chars=None, clear_after_tokens=10)],
    )  # fmt: skip
    await collect(Runner(agent).query("go"))
    assert [m.content for m in model.calls[-1].messages if m.role == "tool"] == ["x" * 4000]


async def test_send_event_from_a_middleware() -> None:
    from adk.middlewares import send_event

    class Notify(AgentMiddleware):
        async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
            send_event(AgentEvent(output=None))
            return state

    agent = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), middlewares=[Notify()])
    events = []
    async with Runner(agent).query("go") as run:
        async for event in run:
            events.append(event)
            await event.aclose()
    assert [e.output is None for e in events] == [True, False]
    assert events[0].agent_name == "a"
    with pytest.raises(RuntimeError, match="inside an agent run"):
        send_event(AgentEvent())



async def test_a_resumed_run_rebuilds_the_tools_its_before_agent_chose() -> None:
    from adk.middlewares.approval import ApprovalDecision
    from compose.checkpoint import InMemoryCheckPointStore

    class OnlyMul(AgentMiddleware):
        def __init__(self) -> None:
            self.calls = 0

        async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
            self.calls += 1
            return ChatModelAgentContext(context.instruction, [mul], set())

    mw = OnlyMul()
    model = ScriptedChatModel([calling(call("mul", '{"a": 6, "b": 7}', id="m1")), "42"])
    agent = ChatModelAgent(
        "a", "d", model=model, tools=[add], middlewares=[ApprovalMiddleware(lambda name, args: name == "mul"), mw]
    )
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    async with runner.query("go", checkpoint_id="job") as run:
        events = [e async for e in run]
    interrupted = events[-1].action.interrupted if events[-1].action else None
    assert interrupted is not None and run.termination_reason == "interrupted"
    resumed = runner.resume("job", targets={i: ApprovalDecision(approved=True) for i in interrupted.ids})
    seen = await collect(resumed)
    assert kinds(seen) == ["tool:mul", "assistant"]
    assert seen[0].content == "42" and resumed.final_message is not None
    assert mw.calls == 2  # once per run: the resumed run's ToolsNode has mul again
    assert [t.name for t in model.calls[1].tools] == ["mul"]  # the tool infos came back with the state
