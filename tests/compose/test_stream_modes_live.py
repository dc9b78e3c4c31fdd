"""Stream modes are live: each part reaches the reader as it happens, not when the step (or the run) is over.

Each test has a node that waits for an ``anyio.Event`` the test sets only once it has *received* some part; a
reader given its parts at the end of a step (a DAG run is one step; a sub-graph runs inside its parent's step;
a model's stream read by the next node is read inside that node's step) never gets that part and the run hangs
(``fail_after`` turns the hang into a failure). DAG and Pregel, sub-graphs two levels deep, ``stream`` and
``transform`` with ``stream_mode``, asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import pytest

from compose import (
    END,
    START,
    Graph,
    StreamPart,
    assistant_message,
    concat_messages,
    get_stream_writer,
    user_message,
)
from compose.errors import NodeRunError, StreamError
from compose.schema import Message, ToolInfo
from compose.state import process_state
from compose.stream import StreamReader

pytestmark = pytest.mark.anyio

Mode = Literal["any_predecessor", "all_predecessor"]
MODES: list[Mode] = ["any_predecessor", "all_predecessor"]
HOW = ["stream", "transform"]


async def open_parts(r: Any, x: Any, how: str, mode: Any, **opts: Any) -> StreamReader[StreamPart]:
    if how == "stream":
        return await r.stream(x, stream_mode=mode, **opts)  # type: ignore[no-any-return]
    return await r.transform(StreamReader.from_iterable([x]), stream_mode=mode, **opts)  # type: ignore[no-any-return]


async def watch(
    r: Any, x: Any, how: str, mode: Any, react: Callable[[StreamPart], None], **opts: Any
) -> list[StreamPart]:
    """Read every part, calling ``react`` on each as it arrives; a hang fails after a few seconds."""
    seen: list[StreamPart] = []
    with anyio.fail_after(10):
        async with await open_parts(r, x, how, mode, **opts) as reader:
            async for part in reader:
                seen.append(part)
                react(part)
    return seen


def when(event: anyio.Event, test: Callable[[StreamPart], bool]) -> Callable[[StreamPart], None]:
    def react(part: StreamPart) -> None:
        if test(part):
            event.set()

    return react


def fork_join(mode: Mode, gate: anyio.Event, *, prefix: str = "") -> Graph[dict[str, str], dict[str, str]]:
    """START -> a, START -> b -> END, a -> END; ``b`` waits for ``gate`` (outputs under their keys)."""
    g = Graph[dict[str, str], dict[str, str]]()

    async def a(x: dict[str, str]) -> str:
        get_stream_writer()(f"{prefix}a wrote")
        return prefix + "A"

    async def b(x: dict[str, str]) -> str:
        await gate.wait()
        return prefix + "B"

    g.add_lambda_node("a", a, output_key="a")
    g.add_lambda_node("b", b, output_key="b")
    for s, e in [(START, "a"), (START, "b"), ("a", END), ("b", END)]:
        g.add_edge(s, e)
    return g


def nested(mode: Mode, inner: Graph[Any, Any]) -> Graph[dict[str, str], dict[str, str]]:
    """top: START -> sub -> END; sub: START -> inner -> END (``inner`` two levels down)."""
    middle = Graph[dict[str, str], dict[str, str]]()
    middle.add_graph_node("inner", inner, compile_options={"trigger_mode": mode})
    middle.add_edge(START, "inner")
    middle.add_edge("inner", END)
    top = Graph[dict[str, str], dict[str, str]]()
    top.add_graph_node("sub", middle, compile_options={"trigger_mode": mode})
    top.add_edge(START, "sub")
    top.add_edge("sub", END)
    return top


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
async def test_updates_come_as_each_node_finishes(anyio_backend: Any, mode: Mode, how: str) -> None:
    gate = anyio.Event()
    r = fork_join(mode, gate).compile(trigger_mode=mode)
    seen = await watch(r, {}, how, "updates", when(gate, lambda p: p.data == {"a": "A"}))
    assert [p.data for p in seen] == [{"a": "A"}, {"b": "B"}]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
async def test_updates_of_a_sub_graph_two_levels_down_come_as_its_nodes_finish(
    anyio_backend: Any, mode: Mode, how: str
) -> None:
    gate = anyio.Event()
    r = nested(mode, fork_join(mode, gate)).compile(trigger_mode=mode)
    got = await watch(
        r, {}, how, "updates", when(gate, lambda p: p.namespace == ("sub", "inner") and "a" in p.data), subgraphs=True
    )
    assert [(p.namespace, next(iter(p.data))) for p in got] == [
        (("sub", "inner"), "a"),
        (("sub", "inner"), "b"),
        (("sub",), "inner"),
        ((), "sub"),
    ]
    # without subgraphs: only the top graph's update, though the inner parts were live all the same
    gate2 = anyio.Event()
    gate2.set()
    r2 = nested(mode, fork_join(mode, gate2)).compile(trigger_mode=mode)
    with anyio.fail_after(10):
        async with await open_parts(r2, {}, how, ["updates", "custom"]) as reader:
            top = []
            async for p in reader:
                top.append(p)
                if p.mode == "custom":
                    pytest.fail("a sub-graph's custom part without subgraphs=True")
    assert [(p.namespace, list(p.data)) for p in top] == [((), ["sub"])]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
async def test_custom_parts_come_as_the_node_writes(anyio_backend: Any, mode: Mode, how: str) -> None:
    gate = anyio.Event()
    r = nested(mode, fork_join(mode, gate)).compile(trigger_mode=mode)
    got = await watch(r, {}, how, "custom", when(gate, lambda p: p.data == "a wrote"), subgraphs=True)
    assert [(p.namespace, p.data) for p in got] == [(("sub", "inner"), "a wrote")]


class PausingModel:
    """Streams ``text`` in 2-character chunks, waiting for ``gate`` after the first one."""

    def __init__(self, text: str, gate: anyio.Event) -> None:
        self.text, self.gate = text, gate

    def with_tools(self, tools: Sequence[ToolInfo]) -> PausingModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return assistant_message(self.text)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        async def chunks() -> AsyncIterator[Message]:
            for i in range(0, len(self.text), 2):
                yield assistant_message(self.text[i : i + 2])
                if i == 0:
                    await self.gate.wait()

        return StreamReader.from_async_iterator(chunks())


def model_then_lambda(mode: Mode, model: Any) -> Graph[list[Message], str]:
    """START -> model -> upper -> END: the model's stream is read (concatenated) inside ``upper``'s step."""
    g = Graph[list[Message], str]()

    async def upper(m: Message) -> str:
        return m.content.upper()

    g.add_chat_model_node("model", model)
    g.add_lambda_node("upper", upper)
    for s, e in [(START, "model"), ("model", "upper"), ("upper", END)]:
        g.add_edge(s, e)
    return g


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("depth", [0, 2])
async def test_messages_come_as_the_model_streams(anyio_backend: Any, mode: Mode, how: str, depth: int) -> None:
    gate = anyio.Event()
    inner = model_then_lambda(mode, PausingModel("tokens as they come", gate))
    if depth:
        middle = Graph[list[Message], str]()
        middle.add_graph_node("inner", inner, compile_options={"trigger_mode": mode})
        middle.add_edge(START, "inner")
        middle.add_edge("inner", END)
        g = Graph[list[Message], str]()
        g.add_graph_node("sub", middle, compile_options={"trigger_mode": mode})
        g.add_edge(START, "sub")
        g.add_edge("sub", END)
    else:
        g = inner
    r = g.compile(trigger_mode=mode)
    got = await watch(r, [user_message("q")], how, ["messages", "output"], when(gate, lambda p: p.mode == "messages"))
    tokens = [p for p in got if p.mode == "messages"]
    ns = ("sub", "inner") if depth else ()
    assert all(p.namespace == ns and p.data[1] == {"node": "model", "namespace": ns} for p in tokens)
    assert len(tokens) == 10
    assert concat_messages([p.data[0] for p in tokens]).content == "tokens as they come"
    assert [p.data for p in got if p.mode == "output"] == ["TOKENS AS THEY COME"]


@dataclass
class Log:
    seen: list[str] = field(default_factory=list)


def logging_fork(mode: Mode, gate: anyio.Event) -> Graph[str, dict[str, str]]:
    """Graph with state: START -> a, START -> b, both -> END; each appends its key to the state; ``b`` first
    waits for ``gate``."""
    g = Graph[str, dict[str, str]](state=Log)
    for key in ("a", "b"):

        async def node(x: str, key: str = key) -> str:
            if key == "b":
                await gate.wait()
            async with process_state(Log) as st:
                st.seen.append(key)
            return key

        g.add_lambda_node(key, node, output_key=key)
        g.add_edge(START, key)
        g.add_edge(key, END)
    return g


@pytest.mark.parametrize("how", HOW)
async def test_dag_values_and_snapshots_after_each_node_completion(anyio_backend: Any, how: str) -> None:
    gate = anyio.Event()
    r = logging_fork("all_predecessor", gate).compile(trigger_mode="all_predecessor")
    got = await watch(r, "x", how, ["values", "debug"], when(gate, lambda p: p.mode == "values"))
    starts = [p.data for p in got if p.mode == "debug" and p.data["type"] == "task_start"]
    assert sorted(d["node"] for d in starts) == ["a", "b"] and starts[0]["step"] == 1
    got = [p for p in got if p.mode == "values" or p.data["type"] != "task_start"]  # a may end before b starts
    assert [(p.mode, p.data.seen if p.mode == "values" else p.data) for p in got] == [
        ("debug", {"type": "task_end", "step": 1, "node": "a"}),
        ("values", ["a"]),
        ("debug", {"type": "snapshot", "step": 1, "node": None}),
        ("debug", {"type": "task_end", "step": 2, "node": "b"}),
        ("values", ["a", "b"]),
        ("debug", {"type": "snapshot", "step": 2, "node": None}),
    ]  # once per step: no repeat at the end


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
async def test_debug_task_events_come_as_they_happen(anyio_backend: Any, mode: Mode, how: str) -> None:
    gate = anyio.Event()
    r = nested(mode, fork_join(mode, gate)).compile(trigger_mode=mode)
    a_ended = when(gate, lambda p: p.data["type"] == "task_end" and p.data["node"] == "a")
    got = await watch(r, {}, how, "debug", a_ended, subgraphs=True)
    inner = [(p.data["type"], p.data["node"]) for p in got if p.namespace == ("sub", "inner")]
    assert sorted(inner) == [("task_end", "a"), ("task_end", "b"), ("task_start", "a"), ("task_start", "b")]
    at = inner.index
    assert at(("task_start", "a")) < at(("task_end", "a")) < at(("task_end", "b"))
    assert at(("task_start", "b")) < at(("task_end", "b"))
    assert [p.data["type"] for p in got if not p.namespace] == ["task_start", "task_end", "snapshot"]


async def test_a_pregel_run_goes_at_the_readers_pace(anyio_backend: Any) -> None:
    """Between supersteps the run waits for the reader to take what is queued: parts come on the reader's pull."""
    ran: list[str] = []
    g = Graph[str, str]()
    for key in ("a", "b", "c"):

        async def node(x: str, key: str = key) -> str:
            ran.append(key)
            return x + key

        g.add_lambda_node(key, node)
    for s, e in [(START, "a"), ("a", "b"), ("b", "c"), ("c", END)]:
        g.add_edge(s, e)
    async with await g.compile().stream("", stream_mode="updates") as reader:
        assert (await reader.recv()).data == {"a": "a"}
        await anyio.wait_all_tasks_blocked()
        assert ran == ["a"]  # b waits for the next pull
        assert (await reader.recv()).data == {"b": "ab"}
        await anyio.wait_all_tasks_blocked()
        assert ran == ["a", "b"]


@pytest.mark.parametrize("mode", MODES)
async def test_closing_the_reader_mid_run_ends_the_run(anyio_backend: Any, mode: Mode) -> None:
    gate = anyio.Event()  # never set: b is still waiting when the reader closes
    r = nested(mode, fork_join(mode, gate)).compile(trigger_mode=mode)
    with anyio.fail_after(10):
        reader = await r.stream({}, stream_mode="updates", subgraphs=True)
        assert next(iter((await reader.recv()).data)) == "a"
        await reader.aclose()  # cancels b; the autouse leak check: nothing left open
    assert not gate.is_set()


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_read_ends_the_run(anyio_backend: Any, mode: Mode) -> None:
    gate = anyio.Event()
    r = fork_join(mode, gate).compile(trigger_mode=mode)
    reader = await r.stream({}, stream_mode="updates")
    async with reader:
        assert (await reader.recv()).data == {"a": "A"}
        with anyio.move_on_after(0.05):
            await reader.recv()  # b waits: cancelled, and the run with it
        with pytest.raises(StreamError):
            await reader.recv()


async def test_a_failing_node_ends_the_parts_after_those_before_it(anyio_backend: Any) -> None:
    g = Graph[str, str]()

    async def a(x: str) -> str:
        return x + "a"

    async def boom(x: str) -> str:
        raise ValueError("boom")

    g.add_lambda_node("a", a)
    g.add_lambda_node("boom", boom)
    for s, e in [(START, "a"), ("a", "boom"), ("boom", END)]:
        g.add_edge(s, e)
    for mode in MODES:
        seen: list[Any] = []
        async with await g.compile(trigger_mode=mode).stream(">", stream_mode="updates") as reader:
            with pytest.raises(NodeRunError, match="boom"):
                async for p in reader:
                    seen.append(p.data)
        assert seen == [{"a": ">a"}]


async def test_read_from_another_task_is_a_clear_error(anyio_backend: Any) -> None:
    gate = anyio.Event()
    r = fork_join("all_predecessor", gate).compile(trigger_mode="all_predecessor")
    async with await r.stream({}, stream_mode="updates") as reader:
        assert (await reader.recv()).data == {"a": "A"}
        failed: list[BaseException] = []

        async def other() -> None:
            try:
                await reader.recv()
            except StreamError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
        assert "read it in one task" in str(failed[0])
        gate.set()
        assert (await reader.recv()).data == {"b": "B"}


async def test_a_wrong_input_or_a_reader_never_read(anyio_backend: Any) -> None:
    r = fork_join("all_predecessor", anyio.Event()).compile(trigger_mode="all_predecessor")
    async with await r.stream("not a dict", stream_mode="updates") as reader:  # type: ignore[call-overload]
        with pytest.raises(Exception, match="dict"):
            await reader.recv()
    source: StreamReader[dict[str, str]] = StreamReader.from_iterable([{}])
    await (await r.transform(source, stream_mode="updates")).aclose()
    assert source.closed  # the transform's input is closed with the parts reader, even if the run never started
    source = StreamReader.from_iterable([{}])
    with pytest.raises(ValueError, match="unknown stream_mode"):
        await r.transform(source, stream_mode="tokens")  # type: ignore[arg-type]
    assert source.closed


@pytest.mark.parametrize("mode", MODES)
async def test_a_runnable_a_node_calls_is_not_one_of_the_watched_graphs_nodes(anyio_backend: Any, mode: Mode) -> None:
    other = Graph[str, str]()

    async def helper(x: str) -> str:
        get_stream_writer()("from the helper")
        return x + "!"

    other.add_lambda_node("helper", helper)
    other.add_edge(START, "helper")
    other.add_edge("helper", END)
    called = other.compile()
    g = Graph[str, str]()

    async def calls(x: str) -> str:
        return await called.invoke(x)

    g.add_lambda_node("calls", calls)
    g.add_edge(START, "calls")
    g.add_edge("calls", END)
    modes: list[Any] = ["updates", "custom", "debug"]
    got = [p async for p in await g.compile(trigger_mode=mode).stream("x", stream_mode=modes, subgraphs=True)]
    # the helper's custom part is the calling node's; the helper is no node of the watched graph (the two graphs
    # have the same name, so the same addresses)
    assert [(p.mode, p.data) for p in got if p.mode != "debug"] == [
        ("custom", "from the helper"),
        ("updates", {"calls": "x!"}),
    ]
    assert {p.data["node"] for p in got if p.mode == "debug"} == {"calls", None}
