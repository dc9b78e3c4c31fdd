"""The seeds' capabilities: token budget, first-round tool_choice, execution modes, stall, timeout, telemetry."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.config import Limits, ModelConfig, ToolsConfig
from adk.chat_model.retry import ModelRetryConfig
from adk.errors import AgentTimeoutError, StallDetectedError, TokenBudgetExceededError
from adk.runner import Runner
from adk.telemetry import TELEMETRY_EVENT_NAMES, JSONLTraceWriter, TelemetryEvent
from compose.errors import ModelServerError
from compose.models import OpenAIChatModel, ScriptedChatModel
from compose.schema import Message, Usage
from compose.stream import StreamReader
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, kinds
from tests.compose.models.openai_server import CLOSES_STREAM_EARLY, OpenAIServer, sse, text_chunks

pytestmark = pytest.mark.anyio


@tool
def ping(n: int = 0) -> str:
    """Ping.

    Args:
        n: n
    """
    return f"pong {n}"


@tool
def pong(n: int = 0) -> str:
    """Pong.

    Args:
        n: n
    """
    return f"ping {n}"


def ping_rounds(k: int, name: str = "ping") -> list[Any]:
    return [calling(call(name, json.dumps({"n": i}))) for i in range(k)] + ["done"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_token_budget_stops_before_the_next_model_call(streaming: bool) -> None:
    model = ScriptedChatModel(ping_rounds(5), usage=Usage(prompt_tokens=6, completion_tokens=4, total_tokens=10))
    agent = ChatModelAgent("a", "d", model=model, tools=[ping], limits=Limits(max_budget_tokens=25))
    run = Runner(agent, enable_streaming=streaming).query("go")
    seen = await collect(run)
    # 10 + 10 + 10 = 30 >= 25 after three calls: the fourth never happens
    assert kinds(seen) == ["assistant", "tool:ping"] * 3 + ["error"]
    error = seen[-1].error
    assert isinstance(error, TokenBudgetExceededError)
    assert (error.used_tokens, error.max_budget_tokens) == (30, 25)
    assert len(model.calls) == 3
    assert run.termination_reason == "token_budget"
    assert run.total_tokens == 30


async def test_within_budget_the_run_completes() -> None:
    model = ScriptedChatModel(ping_rounds(1), usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2))
    run = Runner(ChatModelAgent("a", "d", model=model, tools=[ping], limits=Limits(max_budget_tokens=5))).query("go")
    await collect(run)
    assert (run.termination_reason, run.total_tokens) == ("completed", 4)


@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_choice_is_sent_on_the_first_model_call_only(streaming: bool) -> None:
    model = ScriptedChatModel(ping_rounds(2))
    agent = ChatModelAgent("a", "d", model=model, tools=[ping], model_config=ModelConfig(tool_choice="required"))
    await collect(Runner(agent, enable_streaming=streaming).query("go"))
    assert [c.options.tool_choice for c in model.calls] == ["required", None, None]


async def test_tool_choice_is_kept_on_retries_of_the_first_call() -> None:
    model = ScriptedChatModel(ping_rounds(1), fail_at_call={0: ModelServerError("503")})
    agent = ChatModelAgent(
        "a",
        "d",
        model=model,
        tools=[ping],
        model_config=ModelConfig(tool_choice={"type": "function", "function": {"name": "ping"}}),
        model_retry=ModelRetryConfig(max_retries=2, backoff=lambda a: 0.0),
    )
    run = Runner(agent).query("go")
    await collect(run)
    forced = {"type": "function", "function": {"name": "ping"}}
    assert [c.options.tool_choice for c in model.calls] == [forced, forced, None]
    # and a second run starts over with the choice
    model2 = ScriptedChatModel(ping_rounds(1))
    agent2 = ChatModelAgent("a", "d", model=model2, tools=[ping], model_config=ModelConfig(tool_choice="required"))
    runner = Runner(agent2)
    await collect(runner.query("one"))
    model2._script.responses.extend(ping_rounds(1))
    await collect(runner.query("two"))
    assert [c.options.tool_choice for c in model2.calls] == ["required", None, "required", None]


def recording_tools(log: list[str]) -> tuple[Any, Any, Any]:
    async def body(name: str) -> str:
        log.append(f"start {name}")
        for _ in range(3):
            await anyio.lowlevel.checkpoint()  # let other tasks run
        log.append(f"end {name}")
        return name

    @tool(parallel_safe=True)
    async def a() -> str:
        """A."""
        return await body("a")

    @tool(parallel_safe=True)
    async def b() -> str:
        """B."""
        return await body("b")

    @tool(parallel_safe=False)
    async def c() -> str:
        """C (not parallel-safe)."""
        return await body("c")

    return a, b, c


SERIAL = ["start a", "end a", "start b", "end b"]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("mode", "second", "parallel"),
    [
        ("serial", "b", False),
        ("parallel", "b", True),
        ("parallel", "c", True),
        ("auto", "b", True),
        ("auto", "c", False),
    ],
)
async def test_tool_execution_modes(streaming: bool, mode: Any, second: str, parallel: bool) -> None:
    log: list[str] = []
    tools = recording_tools(log)
    model = ScriptedChatModel([calling(call("a"), call(second)), "done"])
    agent = ChatModelAgent("a", "d", model=model, tools=ToolsConfig(list(tools), execution_mode=mode))
    seen = await collect(Runner(agent, enable_streaming=streaming).query("go"))
    assert kinds(seen)[0] == "assistant" and kinds(seen)[-1] == "assistant"
    if parallel:
        assert sorted(log[:2]) == ["start a", f"start {second}"]
    else:
        assert log == ["start a", "end a", f"start {second}", f"end {second}"]
    # tool messages reach the model in call order whatever the mode
    assert [m.content for m in model.calls[1].messages[-2:]] == ["a", second]


@pytest.mark.parametrize("streaming", [False, True])
async def test_stall_detection(streaming: bool) -> None:
    model = ScriptedChatModel(ping_rounds(5))
    agent = ChatModelAgent("a", "d", model=model, tools=[ping], limits=Limits(stall_window=3))
    run = Runner(agent, enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:ping"] * 3 + ["error"]
    error = seen[-1].error
    assert isinstance(error, StallDetectedError)
    assert (error.tool_name, error.window) == ("ping", 3)
    assert "'ping' was called 3 times in a row" in str(error)
    assert run.termination_reason == "stall"
    assert len(model.calls) == 3


async def test_alternating_tools_do_not_stall() -> None:
    script = [calling(call("ping" if i % 2 == 0 else "pong")) for i in range(4)] + ["done"]
    model = ScriptedChatModel(script)
    run = Runner(ChatModelAgent("a", "d", model=model, tools=[ping, pong], limits=Limits(stall_window=2))).query("go")
    seen = await collect(run)
    assert kinds(seen)[-1] == "assistant"
    assert run.termination_reason == "completed"


@pytest.mark.parametrize("streaming", [False, True])
async def test_timeout_ends_the_run(streaming: bool) -> None:
    @tool
    async def hang() -> str:
        """Never returns."""
        await anyio.Event().wait()
        return "never"

    model = ScriptedChatModel([calling(call("hang")), "never"])
    agent = ChatModelAgent("a", "d", model=model, tools=[hang], limits=Limits(timeout=0.05))
    run = Runner(agent, enable_streaming=streaming).query("go")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "error"]
    assert isinstance(seen[-1].error, AgentTimeoutError)
    assert isinstance(seen[-1].error, TimeoutError)
    assert run.termination_reason == "timeout"


class StallingModel:
    """Streams ``first``, then never sends another chunk (a server that stalls mid-answer)."""

    def __init__(self) -> None:
        self.closed = False

    def with_tools(self, tools: Any) -> StallingModel:
        return self

    async def generate(self, messages: Any, **opts: Any) -> Message:
        raise AssertionError("streaming only")

    async def stream(self, messages: Any, **opts: Any) -> StreamReader[Message]:
        async def chunks() -> AsyncIterator[Message]:
            try:
                yield Message(role="assistant", content="Let me")
                await anyio.Event().wait()
                yield Message(role="assistant", content=" never")
            finally:
                self.closed = True

        return StreamReader.from_async_iterator(chunks())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("telemetry", [False, True])
async def test_timeout_fires_while_the_consumer_reads_a_stalled_model_stream(telemetry: bool) -> None:
    model = StallingModel()
    agent = ChatModelAgent("a", "d", model=model, limits=Limits(timeout=0.2))
    events: list[TelemetryEvent] = []
    runner = Runner(agent, enable_streaming=True, telemetry=[events.append] if telemetry else [])
    async with runner.query("go") as run:
        first = await run.__anext__()
        assert first.message is not None and first.message.message_stream is not None
        async with first.message.message_stream as stream:
            assert (await stream.recv()).content == "Let me"
            with pytest.raises(AgentTimeoutError) as info:
                await stream.recv()  # the consumer, not the runner, is waiting for the model here
            assert info.value.timeout == 0.2
        rest = [event async for event in run]
    assert [type(e.error) for e in rest] == [AgentTimeoutError]
    assert run.termination_reason == "timeout"
    assert model.closed
    if telemetry:
        assert [e.name for e in events if e.name == "model.call.completed"] == ["model.call.completed"]


@CLOSES_STREAM_EARLY
@pytest.mark.timeout(30)
async def test_timeout_fires_while_reading_a_stalled_openai_stream() -> None:
    stalled = sse(text_chunks("Hello there", size=5))
    stalled.hold_after = 2  # the role chunk and "Hello", then the server sends nothing
    try:
        with OpenAIServer([stalled]) as server:
            async with OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model:
                # the server holds the stream until released: only the timeout ends it (room for a loaded machine)
                agent = ChatModelAgent("a", "d", model=model, limits=Limits(timeout=2.0))
                async with Runner(agent, enable_streaming=True).query("hi") as run:
                    first = await run.__anext__()
                    assert first.message is not None and first.message.message_stream is not None
                    got: list[str] = []
                    with pytest.raises(AgentTimeoutError):
                        async with first.message.message_stream as stream:
                            async for chunk in stream:
                                got.append(chunk.content)
                    rest = [event async for event in run]
                stalled.release.set()
    finally:
        stalled.release.set()
    assert got == ["Hello"]
    assert [type(e.error) for e in rest] == [AgentTimeoutError]
    assert run.termination_reason == "timeout"


async def test_a_model_stream_read_in_time_is_not_cut() -> None:
    model = ScriptedChatModel(["a whole answer"], chunk_size=3)
    agent = ChatModelAgent("a", "d", model=model, limits=Limits(timeout=30.0))
    seen = await collect(Runner(agent, enable_streaming=True).query("go"))
    assert [(s.kind, s.content) for s in seen] == [("assistant", "a whole answer")]


def names_and_steps(events: list[TelemetryEvent]) -> list[tuple[str, int]]:
    return [(e.name, e.step) for e in events if e.name != "text.delta"]


ROUND0 = ["reply.started", "model.call.started", "model.call.completed", "reply.completed"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_telemetry_sequence(streaming: bool) -> None:
    events: list[TelemetryEvent] = []
    model = ScriptedChatModel([calling(call("ping", '{"n": 1}'), content="checking"), "done"], chunk_size=4)
    agent = ChatModelAgent("a", "d", model=model, tools=[ping])
    await collect(Runner(agent, enable_streaming=streaming, telemetry=[events.append]).query("go"))
    expected = (
        [(n, 0) for n in ROUND0] + [("tool.call.started", 0), ("tool.call.completed", 0)] + [(n, 1) for n in ROUND0]
    )
    assert names_and_steps(events) == expected
    deltas = [e.data["text"] for e in events if e.name == "text.delta"]
    assert deltas == (["chec", "king", "done"] if streaming else [])
    if streaming:  # text deltas arrive between the call's start and completion
        names = [e.name for e in events]
        assert names[:5] == ["reply.started", "model.call.started", "text.delta", "text.delta", "model.call.completed"]
    assert {e.name for e in events} <= set(TELEMETRY_EVENT_NAMES)
    tool_done = next(e for e in events if e.name == "tool.call.completed")
    assert dict(tool_done.data) == {"tool": "ping", "call_id": "call_0_0", "result": "pong 1"}
    replies = [e.data for e in events if e.name == "reply.completed"]
    assert [(r["content"], r["tool_calls"]) for r in replies] == [("checking", ["ping"]), ("done", [])]
    assert all(e.agent_name == "a" for e in events)


async def test_telemetry_reports_a_failing_tool() -> None:
    @tool
    def broken() -> str:
        """Breaks."""
        raise RuntimeError("boom")

    events: list[TelemetryEvent] = []
    model = ScriptedChatModel([calling(call("broken")), "never"])
    agent = ChatModelAgent("a", "d", model=model, tools=[broken])
    seen = await collect(Runner(agent, telemetry=[events.append]).query("go"))
    assert kinds(seen) == ["assistant", "error"]
    assert [e.name for e in events][-2:] == ["tool.call.started", "tool.call.failed"]
    assert "boom" in events[-1].data["error"]


async def test_telemetry_with_retries_reports_each_attempt() -> None:
    events: list[TelemetryEvent] = []
    model = ScriptedChatModel(["abcdef"], chunk_size=3, fail_at_chunk={(0, 1): ModelServerError("x")})
    agent = ChatModelAgent("a", "d", model=model, model_retry=ModelRetryConfig(max_retries=1, backoff=lambda a: 0))
    async with Runner(agent, enable_streaming=True, telemetry=[events.append]).query("go") as run:
        async for event in run:
            await event.aclose()  # the graph's copy drives the model
    summary = [(e.name, e.data.get("attempt")) for e in events]
    assert summary == [
        ("reply.started", None),
        ("model.call.started", 0),
        ("text.delta", 0),
        ("model.call.completed", 0),
        ("model.call.started", 1),
        ("text.delta", 1),
        ("text.delta", 1),
        ("model.call.completed", 1),
        ("reply.completed", None),
    ]
    assert "error" in events[3].data


async def test_telemetry_reports_a_failing_model_call_without_streaming() -> None:
    events: list[TelemetryEvent] = []
    model = ScriptedChatModel(["ok"], fail_at_call={0: ModelServerError("down")})
    agent = ChatModelAgent("a", "d", model=model, model_retry=ModelRetryConfig(max_retries=1, backoff=lambda a: 0))
    seen = await collect(Runner(agent, telemetry=[events.append]).query("go"))
    assert kinds(seen) == ["assistant"] and seen[0].content == "ok"
    calls = [(e.name, e.data.get("attempt"), "error" in e.data) for e in events if e.name.startswith("model.call")]
    assert calls == [
        ("model.call.started", 0, False),
        ("model.call.completed", 0, True),
        ("model.call.started", 1, False),
        ("model.call.completed", 1, False),
    ]


async def test_jsonl_trace_writer(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    model = ScriptedChatModel([calling(call("ping")), "done"])
    with JSONLTraceWriter(path) as trace:
        await collect(Runner(ChatModelAgent("a", "d", model=model, tools=[ping]), telemetry=[trace]).query("go"))
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["seq"] for r in lines] == list(range(10))
    assert [(r["event"], r["step"]) for r in lines][4:6] == [("tool.call.started", 0), ("tool.call.completed", 0)]
    assert lines[-1]["event"] == "reply.completed" and lines[-1]["step"] == 1
    assert lines[5]["result"] == "pong 0"

    buf = io.StringIO()
    writer = JSONLTraceWriter(buf)
    writer(TelemetryEvent("reply.started", 3, "agent", {"note": "杭州"}, time=1.5))
    writer.close()
    assert json.loads(buf.getvalue()) == {
        "seq": 0,
        "step": 3,
        "event": "reply.started",
        "agent": "agent",
        "time": 1.5,
        "note": "杭州",
    }
    assert "lines=1" in repr(writer)
