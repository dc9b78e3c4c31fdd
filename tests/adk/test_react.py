"""The ReAct graph and ChatModelAgent: event order, state handlers, branches, return-directly, actions, hooks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from adk.agent import AgentContext, RunSession
from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.config import ToolsConfig
from adk.chat_model.react import ChatModelAgentState, State
from adk.errors import ExceedMaxIterationsError
from adk.events import AgentAction, AgentInput
from adk.runner import Runner
from compose.errors import GraphBuildError, NodeRunError, StateError, ToolExecutionError
from compose.models import JSONActionChatModel, ScriptedChatModel
from compose.schema import Message, ToolInfo, user_message
from compose.stream import StreamReader, StreamWriter, pipe
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, kinds

pytestmark = pytest.mark.anyio


@tool
def get_weather(city: str) -> str:
    """Weather of a city.

    Args:
        city: the city.
    """
    return f"rain in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: a
        b: b
    """
    return a + b


def agent_with(model: Any, tools: Any = (get_weather, add), **kw: Any) -> ChatModelAgent:
    return ChatModelAgent("assistant", "helps", "You help.", model=model, tools=tools, **kw)


@pytest.mark.parametrize("streaming", [False, True])
async def test_model_tool_model_events_in_order(streaming: bool) -> None:
    model = ScriptedChatModel(
        [calling(call("get_weather", '{"city": "Hangzhou"}'), content="let me check"), "Take an umbrella."]
    )
    run = Runner(agent_with(model), enable_streaming=streaming).query("weather?")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:get_weather", "assistant"]
    assert [s.streaming for s in seen] == [streaming, False, streaming]
    assert [s.content for s in seen] == ["let me check", "rain in Hangzhou", "Take an umbrella."]
    assert seen[0].tool_calls == ("get_weather",)
    assert run.final_message is not None and run.final_message.content == "Take an umbrella."
    assert run.termination_reason == "completed"
    # the model sees every state message: system, user, its tool call, the tool result
    second = model.calls[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "tool"]
    assert second[0].content == "You help."
    assert second[3].tool_call_id == "call_0_0" and second[3].content == "rain in Hangzhou"
    assert [c.streaming for c in model.calls] == [streaming, streaming]
    assert [t.name for t in model.calls[0].tools] == ["get_weather", "add"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_events_carry_agent_name_and_run_path(streaming: bool) -> None:
    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 2}')), "3"])
    events = []
    async with Runner(agent_with(model), enable_streaming=streaming).query("1+2") as run:
        async for event in run:
            events.append(event)
            await event.aclose()
    assert [(e.agent_name, e.run_path) for e in events] == [("assistant", ("assistant",))] * 3


@pytest.mark.parametrize("streaming", [False, True])
async def test_agent_without_tools_is_one_model_call(streaming: bool) -> None:
    model = ScriptedChatModel(["Hello!"])
    agent = ChatModelAgent("a", "d", model=model, max_iterations=1)
    run = Runner(agent, enable_streaming=streaming).query("hi")
    seen = await collect(run)
    assert kinds(seen) == ["assistant"]
    assert seen[0].streaming is streaming
    assert seen[0].content == "Hello!"
    assert [m.role for m in model.calls[0].messages] == ["user"]  # no instruction, no system message
    assert model.calls[0].tools == ()


async def test_streamed_text_before_the_tool_call_still_goes_to_the_tools() -> None:
    thinking = "I will look this up carefully before answering. " * 3
    model = ScriptedChatModel([calling(call("add", '{"a": 2, "b": 3}'), content=thinking), "5"], chunk_size=1)
    seen = await collect(Runner(agent_with(model), enable_streaming=True).query("2+3"))
    assert kinds(seen) == ["assistant", "tool:add", "assistant"]
    assert seen[0].content == thinking
    assert seen[1].content == "5"
    assert len(model.calls) == 2


def rounds_script(k: int) -> list[Any]:
    return [calling(call("add", json.dumps({"a": i, "b": 1}))) for i in range(k)] + ["done"]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("k", [1, 3])
async def test_max_iterations_counts_model_calls(streaming: bool, k: int) -> None:
    # k tool rounds need k + 1 model calls
    model = ScriptedChatModel(rounds_script(k))
    run = Runner(agent_with(model, max_iterations=k + 1), enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:add"] * k + ["assistant"]
    assert len(model.calls) == k + 1

    model = ScriptedChatModel(rounds_script(k))
    run = Runner(agent_with(model, max_iterations=k), enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:add"] * k + ["error"]
    assert isinstance(seen[-1].error, ExceedMaxIterationsError)
    assert str(seen[-1].error) == f"exceeds max iterations ({k} model calls)"
    assert len(model.calls) == k
    assert run.termination_reason == "max_iterations"


async def test_default_max_iterations_is_20() -> None:
    model = ScriptedChatModel(rounds_script(25))
    seen = await collect(Runner(agent_with(model, max_iterations=0)).query("go"))
    assert isinstance(seen[-1].error, ExceedMaxIterationsError)
    assert len(model.calls) == 20


@pytest.mark.parametrize("streaming", [False, True])
async def test_return_directly_event_is_last_with_parallel_tools(streaming: bool) -> None:
    finished = anyio.Event()

    @tool
    async def quick(x: str) -> str:
        """Returns at once.

        Args:
            x: x
        """
        finished.set()
        return f"quick {x}"

    @tool
    async def slow(x: str) -> str:
        """Returns after quick.

        Args:
            x: x
        """
        await finished.wait()
        return f"slow {x}"

    model = ScriptedChatModel([calling(call("quick", '{"x": "1"}'), call("slow", '{"x": "2"}'))])
    agent = agent_with(model, tools=ToolsConfig([quick, slow], return_directly={"quick"}))
    run = Runner(agent, enable_streaming=streaming).query("go")
    seen = await collect(run)
    # quick finished first, but its event is held until the ToolsNode finished
    assert kinds(seen) == ["assistant", "tool:slow", "tool:quick"]
    assert run.final_message is not None
    assert run.final_message.role == "tool"
    assert run.final_message.content == "quick 1"
    assert run.final_message.tool_call_id == "call_0_0"
    assert len(model.calls) == 1


async def test_last_return_directly_call_wins() -> None:
    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}'), call("add", '{"a": 2, "b": 2}'))])
    agent = agent_with(model, tools=ToolsConfig([add], return_directly={"add"}))
    run = Runner(agent).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:add", "tool:add"]
    assert seen[-1].content == "4"
    assert run.final_message is not None and run.final_message.content == "4"


@pytest.mark.parametrize("streaming", [False, True])
async def test_concurrent_calls_of_one_tool_carry_their_own_actions(streaming: bool) -> None:
    both_started = anyio.Event()
    started = 0

    @tool
    async def act(tag: str) -> str:
        """Acts.

        Args:
            tag: tag
        """
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await both_started.wait()  # both calls are in flight at the same time
        await send_tool_gen_action(AgentAction(customized=tag))
        return tag

    model = ScriptedChatModel([calling(call("act", '{"tag": "A"}'), call("act", '{"tag": "B"}')), "ok"])
    seen = await collect(Runner(agent_with(model, tools=[act]), enable_streaming=streaming).query("go"))
    tool_events = [s for s in seen if s.role == "tool"]
    assert sorted((s.content, s.action.customized) for s in tool_events) == [("A", "A"), ("B", "B")]  # type: ignore[attr-defined]
    assert seen[-1].content == "ok"


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_streaming_tool_sends_its_action_before_its_first_chunk(streaming: bool) -> None:
    both_started = anyio.Event()
    started = 0

    @tool
    async def act(tag: str) -> AsyncIterator[str]:
        """Acts, streaming.

        Args:
            tag: tag
        """
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await both_started.wait()  # both calls are in flight at the same time
        await send_tool_gen_action(AgentAction(customized=tag))
        yield tag
        yield "."

    model = ScriptedChatModel([calling(call("act", '{"tag": "A"}'), call("act", '{"tag": "B"}')), "ok"])
    seen = await collect(Runner(agent_with(model, tools=[act]), enable_streaming=streaming).query("go"))
    tool_events = [s for s in seen if s.role == "tool"]
    assert sorted((s.content, s.action.customized) for s in tool_events) == [("A.", "A"), ("B.", "B")]  # type: ignore[attr-defined]
    assert seen[-1].content == "ok"


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_streaming_tool_action_keyed_by_tool_name_without_a_call_id(streaming: bool) -> None:
    @tool
    async def act() -> AsyncIterator[str]:
        """Acts."""
        await send_tool_gen_action(AgentAction(customized="by-name"), tool_name="act")
        yield "acted"

    def strip_ids(state: ChatModelAgentState) -> None:
        last = state.messages[-1]
        if last.tool_calls:
            calls = [c.model_copy(update={"id": ""}) for c in last.tool_calls]
            state.messages[-1] = last.model_copy(update={"tool_calls": calls})

    model = ScriptedChatModel([calling(call("act")), "ok"])
    agent = agent_with(model, tools=[act], after_chat_model=[strip_ids])
    seen = await collect(Runner(agent, enable_streaming=streaming).query("go"))
    assert kinds(seen) == ["assistant", "tool:act", "assistant"]
    assert seen[1].action == AgentAction(customized="by-name")


async def test_action_keyed_by_tool_name_without_a_call_id() -> None:
    @tool
    async def act() -> str:
        """Acts."""
        await send_tool_gen_action(AgentAction(customized="by-name"), tool_name="act")
        return "acted"

    # a message whose tool call has no id: the ScriptedChatModel fills ids, so script it with an explicit ""
    # through an after hook that strips the id
    def strip_ids(state: ChatModelAgentState) -> None:
        last = state.messages[-1]
        if last.tool_calls:
            calls = [c.model_copy(update={"id": ""}) for c in last.tool_calls]
            state.messages[-1] = last.model_copy(update={"tool_calls": calls})

    model = ScriptedChatModel([calling(call("act")), "ok"])
    seen = await collect(Runner(agent_with(model, tools=[act], after_chat_model=[strip_ids])).query("go"))
    assert kinds(seen) == ["assistant", "tool:act", "assistant"]
    assert seen[1].action == AgentAction(customized="by-name")


@pytest.mark.parametrize("streaming", [False, True])
async def test_exit_tool_ends_the_run_with_its_result(streaming: bool) -> None:
    model = ScriptedChatModel([calling(call("exit", '{"final_result": "all done"}')), "never"])
    run = Runner(agent_with(model, exit_tool=True), enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:exit"]
    assert seen[1].action == AgentAction(exit=True)
    assert seen[1].content == "all done"
    assert run.final_message is not None and run.final_message.content == "all done"
    assert run.termination_reason == "exit"
    assert [t.name for t in model.calls[0].tools] == ["get_weather", "add", "exit"]
    assert len(model.calls) == 1


async def test_before_hook_changes_what_the_model_sees_and_keeps() -> None:
    def note(state: ChatModelAgentState) -> None:
        state.messages.append(user_message(f"(note {len(state.messages)})"))

    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}')), "2"])
    seen = await collect(Runner(agent_with(model, before_chat_model=[note])).query("go"))
    assert kinds(seen) == ["assistant", "tool:add", "assistant"]
    assert [m.content for m in model.calls[0].messages] == ["You help.", "go", "(note 2)"]
    assert [m.content for m in model.calls[1].messages][-2:] == ["2", "(note 5)"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_after_hook_changes_the_flow(streaming: bool) -> None:
    async def drop_tool_calls(state: ChatModelAgentState) -> None:
        last = state.messages[-1]
        state.messages[-1] = Message(role="assistant", content=f"rewritten: {len(last.tool_calls)} calls dropped")

    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}'), content="calling"), "never"])
    run = Runner(agent_with(model, after_chat_model=[drop_tool_calls]), enable_streaming=streaming).query("go")
    seen = await collect(run)
    # the model event was already sent with the tool call; the flow follows the rewritten message
    assert kinds(seen) == ["assistant"]
    assert seen[0].tool_calls == ("add",)
    assert run.final_message is not None and run.final_message.content == "rewritten: 1 calls dropped"
    assert len(model.calls) == 1


async def test_output_key_writes_the_session_value() -> None:
    model = ScriptedChatModel(["the answer"])
    runner = Runner(ChatModelAgent("a", "d", model=model, output_key="answer"), enable_streaming=True)
    run = runner.query("q")
    await collect(run)
    assert run.session_values == {"answer": "the answer"}
    assert runner.session_values == {}  # every run has its own session (Eino's run session)


async def test_a_streaming_tool_gives_a_streaming_event_even_without_streaming() -> None:
    @tool
    async def spell(word: str) -> AsyncIterator[str]:
        """Spell.

        Args:
            word: word
        """
        for ch in word:
            yield ch + "."

    model = ScriptedChatModel([calling(call("spell", '{"word": "abc"}')), "spelled"])
    seen = await collect(Runner(agent_with(model, tools=[spell])).query("go"))
    assert kinds(seen) == ["assistant", "tool:spell", "assistant"]
    assert seen[1].streaming is True
    assert seen[1].content == "a.b.c."
    assert model.calls[1].messages[-1].content == "a.b.c."


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_failing_tool_ends_the_run_with_one_error_event(streaming: bool) -> None:
    @tool
    def broken() -> str:
        """Breaks."""
        raise RuntimeError("boom")

    model = ScriptedChatModel([calling(call("broken")), "never"])
    run = Runner(agent_with(model, tools=[broken]), enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "error"]
    error = seen[-1].error
    assert isinstance(error, NodeRunError)
    assert error.node_path == ["ToolNode"]
    assert isinstance(error.__cause__, ToolExecutionError)
    assert run.termination_reason == "error"


async def test_a_tool_error_whose_cause_chain_loops_ends_the_run_with_one_error_event() -> None:
    @tool
    def tangled() -> str:
        """Raises an error that is its own cause's cause."""
        first, second = RuntimeError("first"), ValueError("second")
        first.__cause__, second.__cause__ = second, first
        raise first

    model = ScriptedChatModel([calling(call("tangled")), "never"])
    run = Runner(agent_with(model, tools=[tangled])).query("go")
    with anyio.fail_after(5):
        seen = await collect(run)
    assert kinds(seen) == ["assistant", "error"]
    assert isinstance(seen[-1].error, NodeRunError)
    assert run.termination_reason == "error"


@pytest.mark.parametrize("streaming", [False, True])
async def test_json_action_model_drives_the_agent(streaming: bool) -> None:
    inner = ScriptedChatModel(
        ['{"type": "tool", "tool": "add", "args": {"a": 20, "b": 22}}', '{"type": "final", "answer": "42"}']
    )
    run = Runner(agent_with(JSONActionChatModel(inner)), enable_streaming=streaming).query("20+22?")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:add", "assistant"]
    assert seen[1].content == "42"
    assert run.final_message is not None and run.final_message.content == "42"


class PipeModel:
    """A model whose stream the test writes by hand, to see when the consumer gets what."""

    def __init__(self) -> None:
        self.writer: StreamWriter[Message] | None = None

    def with_tools(self, tools: Sequence[ToolInfo]) -> PipeModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        raise NotImplementedError

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        reader: StreamReader[Message]
        reader, self.writer = pipe(16)
        return reader


async def test_consumer_reads_tokens_while_the_model_generates() -> None:
    model = PipeModel()
    agent = ChatModelAgent("a", "d", model=model)
    async with Runner(agent, enable_streaming=True).query("hi") as run:
        event = await run.__anext__()
        assert event.message is not None and event.message.message_stream is not None
        writer = model.writer
        assert writer is not None
        async with event.message.message_stream as stream:
            await writer.send(Message(role="assistant", content="Hel"))
            assert (await stream.recv()).content == "Hel"  # the model has not finished
            await writer.send(Message(role="assistant", content="lo"))
            await writer.aclose()
            assert [c.content async for c in stream] == ["lo"]
        assert [e async for e in run] == []
        assert run.final_message is not None and run.final_message.content == "Hello"


async def test_leaving_a_run_early_closes_everything() -> None:
    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}')), "2"])
    run = Runner(agent_with(model), enable_streaming=True).query("go")
    async with run:
        async for event in run:
            await event.aclose()
            break
    assert run.termination_reason == "closed"
    assert "finished" in repr(run)


async def test_agent_run_directly_with_agent_input() -> None:
    model = ScriptedChatModel(["hey"])
    agent = ChatModelAgent("a", "d", model=model)
    ctx = AgentContext(RunSession(), ("root", "a"))
    seen = await collect(agent.run(AgentInput([user_message("hi")], enable_streaming=False), ctx))
    assert len(seen) == 1
    assert kinds(seen) == ["assistant"]


async def test_send_tool_gen_action_outside_a_run() -> None:
    with pytest.raises(StateError):
        await send_tool_gen_action(AgentAction(exit=True), tool_name="t")
    with pytest.raises(ValueError, match="needs a tool call"):
        await send_tool_gen_action(AgentAction(exit=True))


def test_state_defaults() -> None:
    st = State()
    assert (st.messages, st.has_return_directly, st.return_directly_tool_call_id) == ([], False, "")
    assert (st.tool_gen_actions, st.agent_name, st.remaining_iterations) == ({}, "", 20)


def test_configuration_errors() -> None:
    model = ScriptedChatModel([])
    with pytest.raises(ValueError, match="'Name' is required"):
        ChatModelAgent("", "d", model=model)
    with pytest.raises(ValueError, match="'Description' is required"):
        ChatModelAgent("a", "", model=model)
    with pytest.raises(ValueError, match="execution_mode"):
        ChatModelAgent("a", "d", model=model, tools=ToolsConfig(execution_mode="fast"))  # type: ignore[arg-type]
    agent = ChatModelAgent("a", "d", model=model, tools=ToolsConfig([add], return_directly={"nope"}))
    with pytest.raises(ValueError, match=r"return-directly tools \['nope'\]"):
        agent.runnable  # noqa: B018
    with pytest.raises(GraphBuildError, match=r"object is not a checkpoint store: it lacks get\(\), set\(\)"):
        Runner(agent, checkpoint_store=object())
    with pytest.raises(TypeError, match=r"agent 'a': model must be a chat model .*got str"):
        ChatModelAgent("a", "d", model="gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"agent 'a': tools\[1\] is not a tool: function .*@tool"):
        ChatModelAgent("a", "d", model=model, tools=[add, lambda x: x])  # type: ignore[list-item]


def test_run_input_errors_name_the_bad_message() -> None:
    runner = Runner(ChatModelAgent("a", "d", model=ScriptedChatModel([])))
    with pytest.raises(TypeError, match=r"Runner.run: messages must be a list of Message, got str .*query\(text\)"):
        runner.run("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Runner.run: messages\[1\] is dict, not a Message"):
        runner.run([user_message("hi"), {"role": "user", "content": "x"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"agent 'a': messages\[0\] is int"):
        runner.agent.run(AgentInput([1]))  # type: ignore[list-item]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_streaming_return_directly_tool_becomes_the_output(streaming: bool) -> None:
    @tool
    async def report(topic: str) -> AsyncIterator[str]:
        """Streams a report.

        Args:
            topic: topic
        """
        for part in ("about ", topic, "."):
            yield part

    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 1}'), call("report", '{"topic": "tea"}'))])
    agent = agent_with(model, tools=ToolsConfig([add, report], return_directly={"report"}))
    run = Runner(agent, enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:add", "tool:report"]
    assert seen[2].streaming is True and seen[2].content == "about tea."
    assert run.final_message is not None
    assert (run.final_message.role, run.final_message.content) == ("tool", "about tea.")


@pytest.mark.parametrize("streaming", [False, True])
async def test_cancelling_the_consumer_closes_the_run(streaming: bool) -> None:
    entered = anyio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        entered.set()
        await anyio.Event().wait()
        return "never"

    model = ScriptedChatModel([calling(call("hang"), content="waiting"), "never"])
    run = Runner(agent_with(model, tools=[hang]), enable_streaming=streaming).query("go")
    events = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                async for event in run:
                    events.append(event)

            tg.start_soon(consume)
            await entered.wait()
            scope.cancel()
    assert run.termination_reason == "closed"
    assert len(events) == 1
    await events[0].aclose()
    assert [e async for e in run] == []


def test_model_is_required_and_may_be_positional() -> None:
    with pytest.raises(ValueError, match="'Model' is required"):
        ChatModelAgent("a", "d")
    agent = ChatModelAgent("a", "d", "be brief", ScriptedChatModel([]), [add])
    assert repr(agent) == "ChatModelAgent('a', tools=['add'], max_iterations=20)"
