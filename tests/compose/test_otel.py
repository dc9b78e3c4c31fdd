"""OpenTelemetry tracing (issue 16): OTelHandler's spans, checked with the SDK's in-memory exporter, and the
callback timings it is built on (tool calls, interrupts, cancels, stream wrapping)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adk.chat_model.agent import ChatModelAgent
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from compose.callbacks import CallbackHandler, RunInfo
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import GraphInterrupt, NodeRunError
from compose.graph import END, START, Graph
from compose.models import ScriptedChatModel
from compose.otel import OTelHandler
from compose.schema import Message, ResponseMeta, Usage, user_message
from compose.stream import StreamReader
from compose.tools import tool
from compose.tools.middleware import ToolInput
from compose.tools.node import ToolsNode
from tests.adk.helpers import call, calling, collect, drain

pytestmark = pytest.mark.anyio

ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class OpenSpans(SpanProcessor):
    """Counts spans started and not ended: every test ends with none."""

    def __init__(self) -> None:
        self.open: set[int] = set()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open.add(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.open.discard(span.context.span_id)


class Tracing:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.opened = OpenSpans()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.provider.add_span_processor(self.opened)

    def handler(self, **kw: Any) -> OTelHandler:
        return OTelHandler(tracer_provider=self.provider, **kw)

    @property
    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def tree(self) -> list[str]:
        """``"  " * depth + name`` per span, children in start order under their parent."""
        spans = self.spans
        by_id = {s.context.span_id: s for s in spans if s.context is not None}

        def depth(s: ReadableSpan) -> int:
            d = 0
            while s.parent is not None and s.parent.span_id in by_id:
                s = by_id[s.parent.span_id]
                d += 1
            return d

        out: list[str] = []

        def walk(parent: int | None, d: int) -> None:
            for s in spans:
                pid = s.parent.span_id if s.parent is not None and s.parent.span_id in by_id else None
                if pid == parent:
                    out.append("  " * d + s.name)
                    assert s.context is not None
                    walk(s.context.span_id, d + 1)

        walk(None, 0)
        return out

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span


@pytest.fixture
def tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tracing]:
    monkeypatch.delenv(ENV, raising=False)
    t = Tracing()
    yield t
    assert not t.opened.open, "a span was left open"


def parent_of(span: ReadableSpan, tracing: Tracing) -> ReadableSpan:
    assert span.parent is not None
    (p,) = [s for s in tracing.spans if s.context is not None and s.context.span_id == span.parent.span_id]
    return p


@tool
async def weather(city: str) -> str:
    """The weather.

    Args:
        city: the city.
    """
    with trace.get_tracer("test").start_as_current_span(f"http GET {city}"):
        pass
    return f"sunny in {city}"


@tool
async def broken(city: str) -> str:
    """Always fails.

    Args:
        city: the city.
    """
    raise RuntimeError(f"no weather for {city}")


PARALLEL = [calling(call("weather", '{"city": "Rome"}', id="c1"), call("weather", '{"city": "Oslo"}', id="c2")), "done"]


@pytest.fixture
def global_provider(tracing: Tracing, monkeypatch: pytest.MonkeyPatch) -> Tracing:
    """The tools' own spans (the 'http' ones) come from the global tracer provider: point it at ours."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", tracing.provider)
    return tracing


@pytest.mark.parametrize("streaming", [False, True])
async def test_react_run_with_parallel_tools(global_provider: Tracing, streaming: bool) -> None:
    tracing = global_provider
    agent = ChatModelAgent("helper", "answers", model=ScriptedChatModel(PARALLEL), tools=[weather])
    runner = Runner(agent, enable_streaming=streaming, callbacks=[tracing.handler()])
    await collect(runner.query("weather?"))
    tree = tracing.tree()
    assert tree[:3] == ["invoke_agent helper", "  Graph helper", "    chat scripted"]
    assert tree[3] == "    ToolsNode ToolNode"
    # the two calls ran in parallel, each with the tool's own client span inside it
    rome = ["      execute_tool weather", "        http GET Rome"]
    oslo = ["      execute_tool weather", "        http GET Oslo"]
    assert tree[4:8] in (rome + oslo, oslo + rome)
    assert tree[-1] == "    chat scripted"
    assert len(tree) == 9
    agent_span = tracing.one("invoke_agent helper")
    assert agent_span.attributes == {
        "pyeino.component": "Agent",
        "pyeino.name": "helper",
        "pyeino.type": "ChatModelAgent",
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "helper",
    }
    calls = tracing.named("execute_tool weather")
    assert sorted(str(s.attributes["gen_ai.tool.call.id"]) for s in calls) == ["c1", "c2"]
    for s in calls:
        assert s.attributes["gen_ai.tool.name"] == "weather"
        assert s.attributes["gen_ai.operation.name"] == "execute_tool"
        assert "gen_ai.tool.call.arguments" not in s.attributes  # no content without opting in
        assert parent_of(s, tracing).name == "ToolsNode ToolNode"
    for city, call_id in (("Rome", "c1"), ("Oslo", "c2")):
        inner = tracing.one(f"http GET {city}")
        assert parent_of(inner, tracing).attributes["gen_ai.tool.call.id"] == call_id
    first, second = tracing.named("chat scripted")
    assert first.kind is trace.SpanKind.CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "pyeino.scripted"
    assert first.attributes["gen_ai.request.model"] == "scripted"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert isinstance(first.attributes["gen_ai.usage.input_tokens"], int)
    assert isinstance(first.attributes["gen_ai.usage.output_tokens"], int)
    assert ("gen_ai.response.time_to_first_chunk" in first.attributes) is streaming
    assert all(s.status.status_code is trace.StatusCode.UNSET for s in tracing.spans)


def chat_graph(model: ScriptedChatModel) -> Any:
    g: Graph[list[Message], Message] = Graph(input_type=list[Message], output_type=Message)
    g.add_chat_model_node("model", model)
    g.add_edge(START, "model")
    g.add_edge("model", END)
    return g.compile(name="chat")


async def test_stream_read_halfway_and_closed(tracing: Tracing) -> None:
    meta = ResponseMeta(finish_reason="stop", usage=Usage(prompt_tokens=3, completion_tokens=5), model="m-2024")
    model = ScriptedChatModel([Message(role="assistant", content="a long answer, in many chunks", response_meta=meta)])
    r = chat_graph(model)
    reader = await r.stream([user_message("hi")], callbacks=[tracing.handler()])
    assert tracing.spans == []  # returned is not ended: both spans wait for the stream
    assert (await reader.recv()).content == "a lo"
    await reader.aclose()
    assert tracing.tree() == ["Graph chat", "  chat scripted"]
    for span in tracing.spans:
        assert span.attributes["pyeino.stream.closed_early"] is True
        assert isinstance(span.attributes["gen_ai.response.time_to_first_chunk"], float)
        assert span.status.status_code is trace.StatusCode.UNSET


async def test_stream_read_to_its_end_reports_the_answer(tracing: Tracing) -> None:
    meta = ResponseMeta(finish_reason="stop", usage=Usage(prompt_tokens=3, completion_tokens=5), model="m-2024")
    model = ScriptedChatModel([Message(role="assistant", content="answer", response_meta=meta)])
    reader = await chat_graph(model).stream([user_message("hi")], callbacks=[tracing.handler()])
    assert "".join([m.content async for m in reader]) == "answer"
    span = tracing.one("chat scripted")
    assert "pyeino.stream.closed_early" not in span.attributes
    assert span.attributes["gen_ai.response.model"] == "m-2024"
    assert span.attributes["gen_ai.usage.input_tokens"] == 3
    assert span.attributes["gen_ai.usage.output_tokens"] == 5
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)


async def test_a_failing_stream_marks_its_span(tracing: Tracing) -> None:
    model = ScriptedChatModel(["a long answer"], fail_at_chunk={(0, 1): RuntimeError("connection reset")})
    reader = await chat_graph(model).stream([user_message("hi")], callbacks=[tracing.handler()])
    with pytest.raises(NodeRunError, match="connection reset") as info:  # named after the model node
        async with reader:
            async for _ in reader:
                pass
    assert info.value.node_path == ["model"] and isinstance(info.value.__cause__, RuntimeError)
    span = tracing.one("chat scripted")
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.attributes["error.type"] == "RuntimeError"
    assert [e.name for e in span.events] == ["exception"]


def tools_graph(*tools: Any) -> Any:
    g: Graph[Message, list[Message]] = Graph(input_type=Message, output_type=list[Message])
    g.add_tools_node("tools", ToolsNode(list(tools)))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile(name="g")


async def test_a_failing_tool(tracing: Tracing) -> None:
    r = tools_graph(weather, broken)
    msg = calling(call("weather", '{"city": "Rome"}', id="c1"), call("broken", '{"city": "Oslo"}', id="c2"))
    with pytest.raises(NodeRunError):
        await r.invoke(msg, callbacks=[tracing.handler()])
    failed = tracing.one("execute_tool broken")
    assert failed.status.status_code is trace.StatusCode.ERROR
    assert failed.status.description == "RuntimeError: no weather for Oslo"
    assert failed.attributes["error.type"] == "RuntimeError"
    assert failed.attributes["gen_ai.tool.call.id"] == "c2"
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes is not None and event.attributes["exception.type"] == "RuntimeError"
    assert tracing.one("execute_tool weather").status.status_code is trace.StatusCode.UNSET
    assert tracing.one("ToolsNode tools").attributes["error.type"] == "ToolExecutionError"
    assert tracing.one("Graph g").status.status_code is trace.StatusCode.ERROR


@tool
async def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_interrupt_and_its_resume(tracing: Tracing, streaming: bool) -> None:
    model = ScriptedChatModel([calling(call("pay", '{"amount": 5}', id="c1")), "All paid."])
    agent = ChatModelAgent(
        "ops", "pays", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, args: True)]
    )
    runner = Runner(
        agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore(), callbacks=[tracing.handler()]
    )
    _, paused = await drain(runner.query("pay 5", checkpoint_id="job"))
    assert paused is not None
    assert tracing.one("invoke_agent ops").attributes["pyeino.interrupted"] is True
    for span in tracing.spans:  # a pause is not a failure
        assert span.status.status_code is trace.StatusCode.UNSET
    assert tracing.one("Graph ops").attributes["pyeino.interrupted"] is True
    assert tracing.one("ToolsNode ToolNode").attributes["pyeino.interrupted"] is True
    tracing.exporter.clear()
    await drain(runner.resume("job", targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    tree = tracing.tree()
    assert tree[0:2] == ["invoke_agent ops", "  Graph ops"]
    assert "      execute_tool pay" in tree
    assert tree[-1] == "    chat scripted"
    assert all("pyeino.interrupted" not in s.attributes for s in tracing.spans)


async def test_an_agent_run_closed_early_ends_its_spans(tracing: Tracing) -> None:
    agent = ChatModelAgent("helper", "answers", model=ScriptedChatModel(PARALLEL), tools=[weather])
    runner = Runner(agent, enable_streaming=True, callbacks=[tracing.handler()])
    async with runner.query("weather?") as run:
        event = await run.__anext__()
        assert event.message is not None
        await event.aclose()
    assert tracing.one("invoke_agent helper").attributes["pyeino.cancelled"] is True
    assert tracing.one("Graph helper").attributes["pyeino.cancelled"] is True


async def test_a_cancelled_run_ends_its_spans(tracing: Tracing) -> None:
    started = anyio.Event()

    @tool
    async def slow(city: str) -> str:
        """Slow.

        Args:
            city: the city.
        """
        started.set()
        await anyio.sleep_forever()
        return city

    r = tools_graph(slow)
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            await r.invoke(calling(call("slow", '{"city": "x"}', id="c1")), callbacks=[tracing.handler()])

        tg.start_soon(go)
        await started.wait()
        tg.cancel_scope.cancel()
    assert tracing.tree() == ["Graph g", "  ToolsNode tools", "    execute_tool slow"]
    assert all(s.attributes["pyeino.cancelled"] is True for s in tracing.spans)


async def test_the_span_is_current_inside_a_lambda(global_provider: Tracing) -> None:
    tracing = global_provider

    async def fmt(x: str) -> str:
        with trace.get_tracer("test").start_as_current_span("inside"):
            return x.upper()

    g: Graph[str, str] = Graph(input_type=str, output_type=str)
    g.add_lambda_node("fmt", fmt)
    g.add_edge(START, "fmt")
    g.add_edge("fmt", END)
    assert await g.compile(name="g").invoke("a", callbacks=[tracing.handler()]) == "A"
    assert tracing.tree() == ["Graph g", "  Lambda fmt", "    inside"]
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached


def content_run(tracing: Tracing, **kw: Any) -> Any:
    agent = ChatModelAgent(
        "helper", "answers", instruction="Be brief.", model=ScriptedChatModel(PARALLEL), tools=[weather]
    )
    return Runner(agent, callbacks=[tracing.handler(**kw)]).query("weather?")


@pytest.mark.parametrize(
    ("value", "on_span", "as_event"),
    [
        ("true", True, False),
        ("SPAN_ONLY", True, False),
        ("EVENT_ONLY", False, True),
        ("span_and_event", True, True),
        ("NO_CONTENT", False, False),
        ("false", False, False),
        (None, False, False),
    ],
)
async def test_content_capture_follows_the_environment(
    tracing: Tracing, monkeypatch: pytest.MonkeyPatch, value: str | None, on_span: bool, as_event: bool
) -> None:
    if value is not None:
        monkeypatch.setenv(ENV, value)
    await collect(content_run(tracing))
    chat = tracing.named("chat scripted")[0]
    tool_span = tracing.named("execute_tool weather")[0]
    assert ("gen_ai.input.messages" in chat.attributes) is on_span
    assert ("gen_ai.tool.call.result" in tool_span.attributes) is on_span
    details = [e for e in chat.events if e.name == "gen_ai.client.inference.operation.details"]
    assert len(details) == (1 if as_event else 0)
    if as_event:
        assert details[0].attributes is not None
        assert json.loads(str(details[0].attributes["gen_ai.system_instructions"])) == [
            {"type": "text", "content": "Be brief."}
        ]


async def test_content_capture_by_flag(tracing: Tracing, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "SPAN_AND_EVENT")
    await collect(content_run(tracing, capture_content=False))
    assert all("gen_ai.input.messages" not in s.attributes and not s.events for s in tracing.spans)
    tracing.exporter.clear()
    monkeypatch.delenv(ENV)
    await collect(content_run(tracing, capture_content=True))
    first, second = tracing.named("chat scripted")
    assert json.loads(str(first.attributes["gen_ai.system_instructions"])) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(str(first.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "weather?"}]}
    ]
    assert json.loads(str(first.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Rome"}},
                {"type": "tool_call", "id": "c2", "name": "weather", "arguments": {"city": "Oslo"}},
            ],
            "finish_reason": "tool_calls",
        }
    ]
    answered = json.loads(str(second.attributes["gen_ai.input.messages"]))
    assert answered[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c2", "response": "sunny in Oslo"}],
    }
    (rome,) = [s for s in tracing.named("execute_tool weather") if s.attributes["gen_ai.tool.call.id"] == "c1"]
    assert rome.attributes["gen_ai.tool.call.arguments"] == '{"city": "Rome"}'
    assert rome.attributes["gen_ai.tool.call.result"] == "sunny in Rome"
    agent_out = json.loads(str(tracing.one("invoke_agent helper").attributes["gen_ai.output.messages"]))
    assert agent_out[0]["parts"] == [{"type": "text", "content": "done"}]


async def test_a_bad_capture_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="SPAN_ONLY"):
        OTelHandler(capture_content="sometimes")


async def test_without_an_sdk_the_handler_does_nothing_visible() -> None:
    agent = ChatModelAgent("helper", "answers", model=ScriptedChatModel(PARALLEL), tools=[weather])
    seen = await collect(Runner(agent, enable_streaming=True, callbacks=[OTelHandler()]).query("weather?"))
    assert seen[-1].content == "done"
    assert trace.get_current_span() is trace.INVALID_SPAN


# ---------------------------------------------------------------------------------------------------------
# The callback timings tracing is built on


class Recorder(CallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, Any]] = []

    def note(self, what: str, info: RunInfo, value: Any = None) -> None:
        self.seen.append((what, info.component, info.name, value))

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        self.note("start", run_info, input.call_id if isinstance(input, ToolInput) else None)

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        self.note("end", run_info, output if run_info.component == "Tool" else None)

    async def on_error(self, run_info: RunInfo, error: BaseException) -> None:
        self.note("error", run_info, type(error).__name__)

    async def on_interrupt(self, run_info: RunInfo, interrupt: GraphInterrupt) -> None:
        self.note("interrupt", run_info)

    async def on_cancel(self, run_info: RunInfo) -> None:
        self.note("cancel", run_info)


async def test_tool_calls_report_name_and_call_id() -> None:
    rec = Recorder()
    await tools_graph(weather).invoke(calling(call("weather", '{"city": "Rome"}', id="c9")), callbacks=[rec])
    assert rec.seen == [
        ("start", "Graph", "g", None),
        ("start", "ToolsNode", "tools", None),
        ("start", "Tool", "weather", "c9"),
        ("end", "Tool", "weather", "sunny in Rome"),
        ("end", "ToolsNode", "tools", None),
        ("end", "Graph", "g", None),
    ]


async def test_a_chat_model_node_names_model_and_provider() -> None:
    infos: list[RunInfo] = []

    class Infos(CallbackHandler):
        async def on_start(self, run_info: RunInfo, input: Any) -> None:
            infos.append(run_info)

    await chat_graph(ScriptedChatModel(["hi"])).invoke([user_message("hi")], callbacks=[Infos()])
    assert infos[1] == RunInfo("model", "ScriptedChatModel", "ChatModel", model="scripted", provider="pyeino.scripted")


async def test_an_interrupt_is_reported_as_such() -> None:
    rec = Recorder()
    agent = ChatModelAgent(
        "ops",
        "pays",
        model=ScriptedChatModel([calling(call("pay", '{"amount": 5}', id="c1"))]),
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda name, args: True)],
    )
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore(), callbacks=[rec])
    await drain(runner.query("x", checkpoint_id="j"))
    # the approval guard (a middleware, outside the tool's callbacks) paused before the tool started
    assert [s for s in rec.seen if s[0] == "interrupt"] == [
        ("interrupt", "ToolsNode", "ToolNode", None),
        ("interrupt", "Graph", "ops", None),
        ("interrupt", "Agent", "ops", None),
    ]
    assert not [s for s in rec.seen if s[0] == "error"]


async def test_a_wrapping_handler_sees_the_stream_without_a_copy() -> None:
    seen: list[str] = []

    class Wrapper(CallbackHandler):
        async def wrap_stream_output(self, run_info: RunInfo, reader: StreamReader[Any]) -> StreamReader[Any]:
            seen.append(run_info.component)
            return reader.map(lambda m: m)

    reader = await chat_graph(ScriptedChatModel(["hello"])).stream([user_message("hi")], callbacks=[Wrapper()])
    assert "".join([m.content async for m in reader]) == "hello"
    assert seen == ["ChatModel", "Graph"]


async def test_an_agent_tools_inner_agent_nests_under_execute_tool(tracing: Tracing) -> None:
    from adk.agents import AgentTool

    inner = ChatModelAgent("inner", "answers", model=ScriptedChatModel(["inner answer"]))
    outer = ChatModelAgent(
        "outer",
        "top",
        model=ScriptedChatModel([calling(call("inner", '{"request": "q"}', "c1")), "done"]),
        tools=[AgentTool(inner)],
    )
    await collect(Runner(outer, callbacks=[tracing.handler()]).query("go"))
    inner_span = tracing.one("invoke_agent inner")
    tool_span = parent_of(inner_span, tracing)
    assert tool_span.name == "execute_tool inner"
    assert tracing.tree() == [
        "invoke_agent outer",
        "  Graph outer",
        "    chat scripted",
        "    ToolsNode ToolNode",
        "      execute_tool inner",
        "        invoke_agent inner",
        "          Graph inner",
        "            chat scripted",
        "    chat scripted",
    ]


_GLOBAL: Tracing | None = None


def global_tracing() -> Tracing:
    """A Tracing whose provider is the process's global one (libraries such as ``mcp`` trace through it); set
    once per process, its exporter cleared for each use."""
    global _GLOBAL
    if _GLOBAL is None:
        _GLOBAL = Tracing()
        trace.set_tracer_provider(_GLOBAL.provider)
    _GLOBAL.exporter.clear()
    return _GLOBAL


async def test_the_mcp_sdks_own_spans_nest_under_execute_tool() -> None:
    import sys
    from pathlib import Path

    pytest.importorskip("mcp")
    from compose.mcp import mcp_tools

    tracing = global_tracing()
    server = [sys.executable, str(Path(__file__).parent / "mcp_servers" / "demo_server.py")]
    model = ScriptedChatModel([calling(call("add", '{"a": 1, "b": 2}', "c1")), "3"])
    async with mcp_tools(stdio=server) as tools:
        agent = ChatModelAgent("calc", "adds", model=model, tools=[t for t in tools if t.name == "add"])
        await collect(Runner(agent, callbacks=[tracing.handler()]).query("1+2?"))
    tool_span = tracing.one("execute_tool add")
    by_id = {s.context.span_id: s for s in tracing.spans if s.context is not None}

    def under_tool(s: ReadableSpan) -> bool:
        while s.parent is not None and s.parent.span_id in by_id:
            s = by_id[s.parent.span_id]
            if s is tool_span:
                return True
        return False

    mcp_spans = [
        s
        for s in tracing.spans
        if s.instrumentation_scope is not None and s.instrumentation_scope.name == "mcp-python-sdk"
    ]
    call_spans = [s for s in mcp_spans if "tools/call" in s.name]
    assert call_spans, [s.name for s in mcp_spans]
    assert all(under_tool(s) for s in call_spans)
