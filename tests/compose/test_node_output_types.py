"""A node's output is checked against its declared output type (one ``isinstance``): a wrong one raises a
``NodeOutputTypeError`` naming that node, in invoke and stream runs, Pregel and DAG, fused or not; a wrong chunk
of an output stream becomes that error where the stream is read. ``Any``, TypeVars and Protocols are not
checked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, TypedDict, TypeVar

import pytest

from compose.callbacks import CallbackHandler
from compose.errors import NodeOutputTypeError, NodeRunError, RuntimeTypeError
from compose.graph import END, START, Graph
from compose.graph.branch import GraphBranch, StreamGraphBranch
from compose.lambdas import Lambda
from compose.schema import Message
from compose.stream import StreamReader, concat
from tests.compose.helpers import drive

pytestmark = pytest.mark.anyio

T = TypeVar("T")

WRONG_B = r"runtime type check fail on the output of node\[b\]: expected type: int, actual type: str"


async def inc(x: int) -> int:
    return x + 1


async def liar(x: int) -> int:
    return "not an int"  # type: ignore[return-value]


def chain(*fns: Any, dag: bool = False, out: Any = int, **options: Any) -> Any:
    """START -> a -> b -> ... -> END over ``Graph[int, out]``."""
    g = Graph[int, out]()  # type: ignore[valid-type]
    prev = START
    for key, fn in zip("abcdef", fns, strict=False):
        g.add_lambda_node(key, fn, **(options if key == "b" else {}))
        g.add_edge(prev, key)
        prev = key
    g.add_edge(prev, END)
    return g.compile(trigger_mode="all_predecessor" if dag else "any_predecessor")


async def stepped(r: Any, x: Any) -> Any:
    handle = await r.start_run(x, streaming=False)
    while not await handle.step():
        pass
    return handle.result


RUNS = {
    "fused": lambda r: r.invoke(1),
    "stepped": lambda r: stepped(r, 1),
    "callbacks": lambda r: r.invoke(1, callbacks=[CallbackHandler()]),
    "stream": lambda r: _read(r.stream(1)),
    "stream, callbacks": lambda r: _read(r.stream(1, callbacks=[CallbackHandler()])),
    "driven": lambda r: drive(r, 1),
    "driven, stream": lambda r: _read_driven(r),
}


async def _read_driven(r: Any) -> Any:
    return await concat(await drive(r, StreamReader.from_iterable([1]), streaming=True))


async def _read(opening: Any) -> Any:
    return await concat(await opening)


@pytest.mark.parametrize("dag", [False, True], ids=["pregel", "dag"])
@pytest.mark.parametrize("how", list(RUNS))
async def test_a_wrong_output_names_its_node_and_stops_the_run(anyio_backend: Any, how: str, dag: bool) -> None:
    seen: list[Any] = []

    async def spy(x: int) -> int:
        seen.append(x)
        return x

    r = chain(inc, liar, spy, dag=dag)
    with pytest.raises(NodeOutputTypeError, match=WRONG_B) as info:
        await RUNS[how](r)
    err = info.value
    assert isinstance(err, NodeRunError) and isinstance(err, RuntimeTypeError) and isinstance(err, TypeError)
    assert err.node_path == ["b"] and err.expected is int and err.actual is str and not err.chunk
    assert err.__cause__ is None and str(err).endswith("node path: [b]")
    assert seen == []  # the next node never sees the value


@pytest.mark.parametrize("how", list(RUNS))
async def test_a_graph_never_returns_a_value_of_the_wrong_type(anyio_backend: Any, how: str) -> None:
    """``Graph[int, int]`` whose last node says ``-> int`` and returns a str raises instead of returning it."""
    with pytest.raises(NodeOutputTypeError, match=WRONG_B):
        await RUNS[how](chain(inc, liar))


@pytest.mark.parametrize("how", list(RUNS))
async def test_right_outputs_pass_and_unchecked_types_are_not_checked(anyio_backend: Any, how: str) -> None:
    class Sized(Protocol):
        def __len__(self) -> int: ...

    def anything(x: int) -> Any:
        return x

    def generic(x: T) -> T:
        return x

    def sized(x: int) -> Sized:
        return x  # type: ignore[return-value]

    def unannotated(x):  # type: ignore[no-untyped-def]
        return x

    def float_out(x: int) -> float:
        return x  # an int is a fine float

    def maybe(x: int) -> int | None:
        return x

    r = chain(inc, anything, generic, sized, unannotated)
    assert await RUNS[how](r) == 2
    assert [n.out_check for n in r._tables.nodes] == [int, None, None, None, None]
    assert await RUNS[how](chain(inc, maybe, out=int | None)) == 2
    r = chain(inc, float_out, out=float)
    assert await RUNS[how](r) == 2
    assert r._tables.nodes[1].out_check == (float, int)


async def test_a_wrong_output_of_an_untyped_node_is_caught_by_the_edge_check(anyio_backend: Any) -> None:
    def untyped(x: int) -> Any:
        return "x"

    with pytest.raises(RuntimeTypeError, match=r"runtime type check fail on edge\[b\]-\[end\]"):
        await chain(inc, untyped).invoke(1)


@pytest.mark.parametrize("dag", [False, True], ids=["pregel", "dag"])
async def test_a_wrong_chunk_names_the_node_whose_stream_it_is(anyio_backend: Any, dag: bool) -> None:
    async def chunks(x: int) -> AsyncIterator[int]:
        yield x
        yield "two"  # type: ignore[misc]

    def invoke_only(x: int) -> int:  # concatenates its input stream in the scheduler
        return x

    async def transform(r: StreamReader[int]) -> AsyncIterator[int]:  # reads its input lazily
        async for v in r:
            yield v

    wrong = r"runtime type check fail on a chunk of the output stream of node\[b\]: expected type: int"
    for tail in ([], [invoke_only], [Lambda(transform=transform)], [Lambda(transform=transform), invoke_only]):
        r = chain(inc, chunks, *tail, dag=dag)
        with pytest.raises(NodeOutputTypeError, match=wrong) as info:
            await _read(r.stream(1))
        assert info.value.node_path == ["b"] and info.value.chunk
        if invoke_only in tail:
            continue
        reader = await r.stream(1)
        assert await reader.recv() == 2  # the chunks before the wrong one arrive
        with pytest.raises(NodeOutputTypeError):
            await reader.recv()
        await reader.aclose()

    async def strs(x: int) -> AsyncIterator[int]:
        yield "a"  # type: ignore[misc]
        yield "b"  # type: ignore[misc]

    # invoke mode concatenates the stream first: the concatenated value is checked
    with pytest.raises(NodeOutputTypeError, match=r"the output of node\[b\]: expected type: int, actual type: str"):
        await chain(inc, strs, dag=dag).invoke(1)


async def test_a_wrong_chunk_met_by_a_stream_branch_names_its_node(anyio_backend: Any) -> None:
    async def chunks(x: int) -> AsyncIterator[int]:
        yield "one"  # type: ignore[misc]

    async def cond(r: StreamReader[int]) -> str:
        async with r:
            await r.recv()
        return END

    g = Graph[int, int]()
    g.add_lambda_node("b", chunks)
    g.add_edge(START, "b")
    g.add_branch("b", StreamGraphBranch(cond, {END}))
    with pytest.raises(NodeOutputTypeError, match=r"stream of node\[b\]"):
        await _read(g.compile().stream(1))


@pytest.mark.parametrize("how", list(RUNS))
async def test_an_output_key_node_is_checked_on_its_value(anyio_backend: Any, how: str) -> None:
    def total(d: dict[str, Any]) -> int:
        return int(d["v"])

    for fn, ok in ((inc, True), (liar, False)):
        g = Graph[int, int]()
        g.add_lambda_node("b", fn, output_key="v")
        g.add_lambda_node("c", total)
        g.add_edge(START, "b")
        g.add_edge("b", "c")
        g.add_edge("c", END)
        r = g.compile()
        assert r._tables.nodes[0].out_check is int and r._tables.fused_check[0] is None  # checked inside
        if ok:
            assert await RUNS[how](r) == 2
        else:
            with pytest.raises(NodeOutputTypeError, match=WRONG_B):
                await RUNS[how](r)


@pytest.mark.parametrize("how", list(RUNS))
async def test_a_wrong_output_in_a_sub_graph_names_the_path(anyio_backend: Any, how: str) -> None:
    inner = Graph[int, int]()
    inner.add_lambda_node("b", liar)
    inner.add_edge(START, "b")
    inner.add_edge("b", END)
    g = Graph[int, int]()
    g.add_lambda_node("a", inc)
    g.add_graph_node("sub", inner)
    g.add_edge(START, "a")
    g.add_edge("a", "sub")
    g.add_edge("sub", END)
    r = g.compile()
    assert r._tables.nodes[1].out_check is None  # the sub-graph checks what it returns
    with pytest.raises(NodeOutputTypeError, match=WRONG_B) as info:
        await RUNS[how](r)
    assert info.value.node_path == ["sub", "b"]
    assert info.value.with_parent("top").node_path == ["top", "sub", "b"]


async def test_passthroughs_are_not_checked_their_input_is(anyio_backend: Any) -> None:
    def anything(x: int) -> Any:
        return "x"

    g = Graph[int, int]()
    g.add_lambda_node("a", anything)
    g.add_passthrough_node("p")
    g.add_lambda_node("b", inc)
    g.add_edge(START, "a")
    g.add_edge("a", "p")
    g.add_edge("p", "b")
    g.add_edge("b", END)
    r = g.compile()
    assert r._tables.nodes[1].out_check is None
    # the passthrough took the Any of its predecessor: the edge into b checks the value
    with pytest.raises(RuntimeTypeError, match=r"edge\[p\]-\[b\]"):
        await r.invoke(1)


async def test_generic_and_structured_types_are_checked_on_their_class(anyio_backend: Any) -> None:
    class Point(TypedDict):
        x: int

    def point(x: int) -> Point:
        return {"x": x}  # a TypedDict value is a dict

    def messages(p: Point) -> list[Message]:
        return ["shallow"]  # type: ignore[list-item]  # only the list is checked

    def wrong(ms: list[Message]) -> list[Message]:
        return (Message(role="user", content="x"),)  # type: ignore[return-value]

    g = Graph[int, Any]()
    g.add_lambda_node("a", point)
    g.add_lambda_node("b", messages)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    assert await g.compile().invoke(1) == ["shallow"]
    g = Graph[int, Any]()
    g.add_lambda_node("a", point)
    g.add_lambda_node("b", messages)
    g.add_lambda_node("c", wrong)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    with pytest.raises(NodeOutputTypeError, match=r"node\[c\]: expected type: list\[Message\], actual type: tuple"):
        await g.compile().invoke(1)


async def test_a_tools_node_is_checked(anyio_backend: Any) -> None:
    class Tools:
        async def invoke(self, message: Message) -> list[Message]:
            return message  # type: ignore[return-value]

        async def stream(self, message: Message) -> StreamReader[list[Message]]:
            return StreamReader.from_iterable([message])  # type: ignore[list-item]

    g = Graph[Message, Any]()
    g.add_tools_node("tools", Tools())
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    r = g.compile()
    m = Message(role="assistant", content="hi")
    with pytest.raises(NodeOutputTypeError, match=r"node\[tools\]: expected type: list\[Message\]"):
        await r.invoke(m)
    with pytest.raises(NodeOutputTypeError, match=r"stream of node\[tools\]"):
        await _read(r.stream(m))


async def test_a_wrong_output_before_a_branch_fails_before_the_branch(anyio_backend: Any) -> None:
    conds: list[Any] = []

    def cond(x: Any) -> str:
        conds.append(x)
        return END

    g = Graph[int, int]()
    g.add_lambda_node("b", liar)
    g.add_edge(START, "b")
    g.add_branch("b", GraphBranch(cond, {END}))
    r = g.compile()
    for how in RUNS.values():
        with pytest.raises(NodeOutputTypeError, match=WRONG_B):
            await how(r)
    assert conds == []
