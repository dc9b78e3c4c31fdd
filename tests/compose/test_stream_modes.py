"""Stream modes on compiled graphs: ``stream(x, stream_mode=..., subgraphs=...)`` yielding ``StreamPart`` s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from compose import (
    END,
    START,
    Graph,
    GraphInterrupt,
    InMemoryCheckPointStore,
    ScriptedChatModel,
    StreamPart,
    assistant_message,
    concat_messages,
    get_stream_writer,
    user_message,
)
from compose.interrupt import interrupt
from compose.schema import Message
from compose.state import process_state
from compose.stream import concat

pytestmark = pytest.mark.anyio


@dataclass
class Log:
    seen: list[str] = field(default_factory=list)


def two_levels(answer: str = "hello world") -> Graph[str, Message]:
    """Top (state Log): pre -> sub -> END; sub: deep -> model -> END (model streams ``answer`` in 3-char chunks)."""
    inner: Graph[list[Message], Message] = Graph()

    async def deep(x: list[Message]) -> list[Message]:
        get_stream_writer()({"at": "deep"})
        return x

    inner.add_lambda_node("deep", deep)
    inner.add_chat_model_node("model", ScriptedChatModel([assistant_message(answer)] * 8, chunk_size=3))
    inner.add_edge(START, "deep")
    inner.add_edge("deep", "model")
    inner.add_edge("model", END)
    middle: Graph[list[Message], Message] = Graph()
    middle.add_graph_node("inner", inner)
    middle.add_edge(START, "inner")
    middle.add_edge("inner", END)

    g: Graph[str, Message] = Graph(state=Log)

    async def pre(x: str) -> list[Message]:
        async with process_state(Log) as st:
            st.seen.append("pre")
        get_stream_writer()("pre wrote")
        return [user_message(x)]

    g.add_lambda_node("pre", pre)
    g.add_graph_node("sub", middle)
    g.add_edge(START, "pre")
    g.add_edge("pre", "sub")
    g.add_edge("sub", END)
    return g


async def parts(r: Any, x: Any, mode: Any, **opts: Any) -> list[StreamPart]:
    return [p async for p in await r.stream(x, stream_mode=mode, **opts)]


async def test_updates_of_the_top_graph_and_with_subgraphs(anyio_backend: Any) -> None:
    r = two_levels().compile()
    top = await parts(r, "q", "updates")
    assert [(p.namespace, list(p.data)) for p in top] == [((), ["pre"]), ((), ["sub"])]
    assert top[1].data["sub"].content == "hello world"
    every = await parts(r, "q", "updates", subgraphs=True)
    assert [(p.namespace, next(iter(p.data))) for p in every] == [
        ((), "pre"),
        (("sub", "inner"), "deep"),
        (("sub", "inner"), "model"),
        (("sub",), "inner"),
        ((), "sub"),
    ]


async def test_messages_tokens_concatenate_to_the_model_output_with_their_namespace(anyio_backend: Any) -> None:
    r = two_levels("tokens from deep inside").compile()
    got = await parts(r, "q", "messages")  # subgraphs=False: messages come from anywhere
    assert len(got) > 1
    assert {p.namespace for p in got} == {("sub", "inner")}
    assert all(meta == {"node": "model", "namespace": ("sub", "inner")} for _, meta in (p.data for p in got))
    assert concat_messages([chunk for chunk, _ in (p.data for p in got)]).content == "tokens from deep inside"


async def test_custom_parts_from_get_stream_writer(anyio_backend: Any) -> None:
    r = two_levels().compile()
    assert [(p.namespace, p.data) for p in await parts(r, "q", "custom")] == [((), "pre wrote")]
    assert [(p.namespace, p.data) for p in await parts(r, "q", "custom", subgraphs=True)] == [
        ((), "pre wrote"),
        (("sub", "inner"), {"at": "deep"}),
    ]
    get_stream_writer()("outside a run: nothing happens")
    assert (await r.invoke("q")).content == "hello world"  # a plain run: the writer is a no-op


def logging_chain(*, with_post_handlers: bool = False) -> Graph[str, str]:
    """START -> a -> b -> c -> END, each node logging its key in the ``Log`` state (and, with post handlers,
    ``post <key>`` after it)."""
    g = Graph[str, str](state=Log)
    for key in ("a", "b", "c"):

        async def node(x: str, key: str = key) -> str:
            async with process_state(Log) as st:
                st.seen.append(key)
            return x + key

        def post(out: str, st: Log, key: str = key) -> str:
            st.seen.append(f"post {key}")
            return out

        g.add_lambda_node(key, node, post_handler=post if with_post_handlers else None)
    for s, e in [(START, "a"), ("a", "b"), ("b", "c"), ("c", END)]:
        g.add_edge(s, e)
    return g


async def test_values_after_each_step(anyio_backend: Any) -> None:
    g = logging_chain()
    values = await parts(g.compile(), ">", "values")
    assert [p.data.seen for p in values] == [["a"], ["a", "b"], ["a", "b", "c"]]  # once per step


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_values_come_after_each_steps_post_handlers_as_the_history_holds_them(
    anyio_backend: Any, mode: str
) -> None:
    g = logging_chain(with_post_handlers=True)
    r = g.compile(trigger_mode=mode, checkpoint_store=InMemoryCheckPointStore(), keep_history=True)
    got = await parts(r, ">", ["values", "debug"], checkpoint_id="k")
    values = [p.data.seen for p in got if p.mode == "values"]
    assert values == [["a", "post a"], ["a", "post a", "b", "post b"], ["a", "post a", "b", "post b", "c", "post c"]]
    snapshots = [p.data["step"] for p in got if p.mode == "debug" and p.data["type"] == "snapshot"]
    assert snapshots == [1, 2, 3]
    history = {s.step: s.state["seen"] for s in await r.get_state_history("k")}
    assert [history[step] for step in snapshots] == values  # each part is the state of its step's snapshot


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_values_and_snapshots_number_on_across_a_pause_and_its_resume(anyio_backend: Any, mode: str) -> None:
    g = logging_chain()
    r = g.compile(trigger_mode=mode, checkpoint_store=InMemoryCheckPointStore(), interrupt_before=["b"])
    got: list[StreamPart] = []
    with pytest.raises(GraphInterrupt):
        async for p in await r.stream(">", stream_mode=["values", "debug"], checkpoint_id="k"):
            got.append(p)
    got += await parts(r, None, ["values", "debug"], checkpoint_id="k")
    assert [p.data.seen for p in got if p.mode == "values"] == [["a"], ["a", "b"], ["a", "b", "c"]]
    assert [p.data["step"] for p in got if p.mode == "debug" and p.data["type"] == "snapshot"] == [1, 2, 3]


async def test_debug_parts(anyio_backend: Any) -> None:
    r = two_levels().compile()
    debug = [p.data for p in await parts(r, "q", "debug")]
    assert debug == [
        {"type": "task_start", "step": 1, "node": "pre"},
        {"type": "task_end", "step": 1, "node": "pre"},
        {"type": "snapshot", "step": 1, "node": None},
        {"type": "task_start", "step": 2, "node": "sub"},
        {"type": "task_end", "step": 2, "node": "sub"},
        {"type": "snapshot", "step": 2, "node": None},
    ]


async def test_output_is_what_stream_yields(anyio_backend: Any) -> None:
    r = two_levels().compile()
    plain = [c async for c in await r.stream("q")]
    assert [p.data for p in await parts(r, "q", "output")] == plain
    assert (await parts(r, "q", "updates"))[-1].mode == "updates"  # output is left out unless asked


async def test_several_modes_keep_each_modes_order(anyio_backend: Any) -> None:
    r = two_levels().compile()
    modes = ["updates", "messages", "custom", "values", "debug", "output"]
    together = await parts(r, "q", modes, subgraphs=True)
    for mode in modes:
        alone = await parts(r, "q", mode, subgraphs=True)
        assert [(p.namespace, repr(p.data)) for p in together if p.mode == mode] == [
            (p.namespace, repr(p.data)) for p in alone
        ], mode
    kinds = [p.mode for p in together]
    assert kinds.index("messages") < kinds.index("output")  # tokens stream as the output does


async def test_dag_updates(anyio_backend: Any) -> None:
    g = Graph[str, dict[str, str]]()
    for key in ("a", "b", "c"):

        async def node(x: Any, key: str = key) -> str:
            return key

        g.add_lambda_node(key, node, output_key=key)
    for s, e in [(START, "a"), ("a", "b"), ("a", "c"), ("b", END), ("c", END)]:
        g.add_edge(s, e)
    r = g.compile(trigger_mode="all_predecessor")
    got = [next(iter(p.data)) for p in await parts(r, "x", "updates")]
    assert got[0] == "a" and sorted(got[1:]) == ["b", "c"]


async def test_closing_the_parts_reader_early_ends_the_run(anyio_backend: Any) -> None:
    r = two_levels().compile()
    reader = await r.stream("q", stream_mode=["messages", "output"])
    first = await reader.recv()
    assert first.mode in ("messages", "output")
    await reader.aclose()  # the autouse leak check: no stream left open


async def test_an_interrupt_ends_the_parts_with_graph_interrupt(anyio_backend: Any) -> None:
    g = Graph[str, str]()

    async def a(x: str) -> str:
        return x + "a"

    async def ask(x: str) -> str:
        raise interrupt("ok?")

    g.add_lambda_node("a", a)
    g.add_lambda_node("ask", ask)
    for s, e in [(START, "a"), ("a", "ask"), ("ask", END)]:
        g.add_edge(s, e)
    r = g.compile(checkpoint_store=InMemoryCheckPointStore())
    seen: list[StreamPart] = []
    reader = await r.stream(">", stream_mode="updates", checkpoint_id="k")
    async with reader:
        with pytest.raises(GraphInterrupt):
            async for p in reader:
                seen.append(p)
    assert [p.data for p in seen] == [{"a": ">a"}]


async def test_bad_stream_mode_is_a_clear_error(anyio_backend: Any) -> None:
    r = two_levels().compile()
    with pytest.raises(ValueError, match=r"unknown stream_mode \['token'\]"):
        await r.stream("q", stream_mode=["updates", "token"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="unknown run option"):
        await r.stream("q", stream_mode="updates", bogus=1)


async def test_stream_modes_with_history(anyio_backend: Any) -> None:
    g = two_levels()
    r = g.compile(checkpoint_store=InMemoryCheckPointStore(), keep_history=True)
    got = await parts(r, "q", ["updates"], checkpoint_id="k")
    assert [next(iter(p.data)) for p in got] == ["pre", "sub"]
    assert [s.step for s in await r.get_state_history("k")] == [2, 1, 0]
    answer = await concat(await r.stream(None, checkpoint_id="k", from_step=1))
    assert answer.content == "hello world"
    _ = anyio
