"""Graph-local state, handlers and callbacks (eino-semantics 1.6, 1.8)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from compose.callbacks import CallbackHandler, RunInfo, append_global_callbacks, clear_global_callbacks
from compose.errors import GraphRunError, MaxStepsExceededError, NodeRunError, StateError
from compose.graph import END, START, Graph
from compose.lambdas import Lambda
from compose.state import process_state
from compose.stream import StreamReader, concat
from tests.compose.helpers import line

pytestmark = pytest.mark.anyio


@dataclass
class St:
    log: list[str] = field(default_factory=list)


@dataclass
class Inner:
    log: list[str] = field(default_factory=list)


async def test_state_factory_runs_once_per_run_and_handlers_see_it(anyio_backend: Any) -> None:
    made: list[St] = []

    def factory() -> St:
        st = St()
        made.append(st)
        return st

    async def pre(x: str, st: St) -> str:
        st.log.append(f"pre:{x}")
        return x + "<"

    def post(x: str, st: St) -> str:  # sync handlers are allowed
        st.log.append(f"post:{x}")
        return x + ">"

    async def node(x: str) -> str:
        async with process_state(St) as st:
            st.log.append(f"node:{x}")
        return x + "n"

    g = Graph[str, str](state=factory)
    g.add_lambda_node("a", node, pre_handler=pre, post_handler=post)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    r = g.compile()
    assert await r.invoke("x") == "x<n>"
    assert await concat(await r.stream("x")) == "x<n>"
    assert len(made) == 2
    assert made[0].log == ["pre:x", "node:x<", "post:x<n"]
    assert made[1].log == made[0].log


async def test_a_failing_state_factory_is_a_run_error_naming_the_graph(anyio_backend: Any) -> None:
    def broken() -> dict[str, int]:
        raise KeyError("config")

    g = Graph[str, str](state=broken)
    g.add_lambda_node("a", Lambda(invoke=lambda x: x, input_type=str, output_type=str))
    g.add_edge(START, "a")
    g.add_edge("a", END)
    r = g.compile(name="stateful")
    with pytest.raises(GraphRunError, match="state factory of graph 'stateful' failed: KeyError: 'config'") as info:
        await r.invoke("x")
    assert isinstance(info.value.__cause__, KeyError)
    source = StreamReader.from_iterable(["x"])
    with pytest.raises(GraphRunError, match="state factory"):
        await r.transform(source)
    assert source.closed  # the input stream is not leaked


async def test_non_stream_handlers_on_streaming_node_see_concatenated_value(anyio_backend: Any) -> None:
    seen: list[str] = []

    async def chars(x: str) -> AsyncIterator[str]:
        for c in x:
            yield c

    def post(x: str, st: St) -> str:
        seen.append(x)
        return x.upper()

    g = Graph[str, str](state=St)
    g.add_lambda_node("a", chars, post_handler=post)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    assert await concat(await g.compile().stream("abc")) == "ABC"
    assert seen == ["abc"]


async def test_stream_handlers(anyio_backend: Any) -> None:
    async def chars(x: str) -> AsyncIterator[str]:
        for c in x:
            yield c

    async def stream_post(r: StreamReader[str], st: St) -> StreamReader[str]:
        st.log.append("stream_post")
        return r.map(str.upper)

    async def stream_pre(r: StreamReader[str], st: St) -> StreamReader[str]:
        return r.map(lambda c: c + c)

    g = Graph[str, str](state=St)
    g.add_lambda_node("a", chars, stream_pre_handler=stream_pre, stream_post_handler=stream_post)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    r = g.compile()
    assert await concat(await r.stream("ab")) == "ABAB"
    assert await r.invoke("ab") == "ABAB"  # invoke: wrapped into one chunk, concatenated after


async def test_process_state_nearest_and_missing(anyio_backend: Any) -> None:
    async def inner_node(x: str) -> str:
        async with process_state(Inner) as inner:
            inner.log.append("inner")
        async with process_state(St) as outer:
            outer.log.append("outer-from-inner")
        return x

    inner = line(("i", inner_node), state=Inner)

    outer_states: list[St] = []

    def factory() -> St:
        outer_states.append(St())
        return outer_states[-1]

    outer = Graph[str, str](state=factory)
    outer.add_graph_node("sub", inner)
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    await outer.compile().invoke("")
    assert outer_states[0].log == ["outer-from-inner"]

    async def wants_missing(x: str) -> str:
        async with process_state(Inner):
            pass
        return x

    g = line(("n", wants_missing), state=St)
    with pytest.raises(NodeRunError) as info:
        await g.compile().invoke("")
    assert isinstance(info.value.__cause__, StateError)
    assert "cannot find state with type: Inner" in str(info.value.__cause__)

    g2 = line(("n", wants_missing))
    with pytest.raises(NodeRunError, match="have not set state"):
        await g2.compile().invoke("")


async def test_inner_state_shadows_outer_of_same_type(anyio_backend: Any) -> None:
    inner_states: list[St] = []

    def inner_factory() -> St:
        inner_states.append(St())
        return inner_states[-1]

    async def node(x: str) -> str:
        async with process_state(St) as st:
            st.log.append("hit")
        return x

    inner = line(("i", node), state=inner_factory)
    outer_states: list[St] = []

    def outer_factory() -> St:
        outer_states.append(St())
        return outer_states[-1]

    outer = Graph[str, str](state=outer_factory)
    outer.add_graph_node("sub", inner)
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    await outer.compile().invoke("")
    assert inner_states[0].log == ["hit"] and outer_states[0].log == []


async def test_handler_errors_name_the_node_and_phase(anyio_backend: Any) -> None:
    def bad_pre(x: str, st: St) -> str:
        raise ValueError("no")

    g = Graph[str, str](state=St)
    g.add_lambda_node("a", lambda x: x, pre_handler=bad_pre)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(NodeRunError, match="node pre handler failed: ValueError: no") as info:
        await g.compile().invoke("")
    assert info.value.node_path == ["a"]


class Recorder(CallbackHandler):
    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag = tag
        self.log = log

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        self.log.append(f"{self.tag}:start:{run_info.name}:{run_info.component}:{input!r}")

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        self.log.append(f"{self.tag}:end:{run_info.name}:{output!r}")

    async def on_error(self, run_info: RunInfo, error: BaseException) -> None:
        self.log.append(f"{self.tag}:error:{run_info.name}:{type(error).__name__}")

    async def on_start_with_stream_input(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
        self.log.append(f"{self.tag}:stream_start:{run_info.name}:{await concat(reader)!r}")

    async def on_end_with_stream_output(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
        self.log.append(f"{self.tag}:stream_end:{run_info.name}:{await concat(reader)!r}")


def two_node_graph() -> Graph[str, str]:
    async def a(x: str) -> str:
        return x + "a"

    async def b(x: str) -> AsyncIterator[str]:
        yield x
        yield "b"

    g = Graph[str, str]()
    g.add_lambda_node("a", a, name="NodeA")
    g.add_lambda_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


async def test_callbacks_order_and_scope(anyio_backend: Any) -> None:
    r = two_node_graph().compile(name="G")
    log: list[str] = []
    h1, h2 = Recorder("h1", log), Recorder("h2", log)
    assert await r.invoke("", callbacks=[h1, h2]) == "ab"
    assert log == [
        "h2:start:G:Graph:''",  # on_start in reverse registration order
        "h1:start:G:Graph:''",
        "h2:start:NodeA:Lambda:''",
        "h1:start:NodeA:Lambda:''",
        "h1:end:NodeA:'a'",
        "h2:end:NodeA:'a'",
        "h2:start:b:Lambda:'a'",  # b implements stream: value in, stream out
        "h1:start:b:Lambda:'a'",
        "h1:stream_end:b:'ab'",
        "h2:stream_end:b:'ab'",
        "h1:end:G:'ab'",
        "h2:end:G:'ab'",
    ]


async def test_callbacks_designated_and_streaming(anyio_backend: Any) -> None:
    r = two_node_graph().compile(name="G")
    log: list[str] = []
    out = await r.stream("", callbacks=[Recorder("h", log)], designate=["a"])
    assert await concat(out) == "ab"
    # only node a; a implements invoke, so its callbacks see values even in a streaming run
    assert log == ["h:start:NodeA:Lambda:''", "h:end:NodeA:'a'"]
    log.clear()
    out = await r.stream("", callbacks=[Recorder("h", log)])
    assert await concat(out) == "ab"
    assert log[0] == "h:stream_start:G:''"
    assert log[-1] == "h:stream_end:G:'ab'"


async def test_callbacks_into_sub_graph_path_and_global(anyio_backend: Any) -> None:
    inner = two_node_graph()
    outer = Graph[str, str]()
    outer.add_graph_node("sub", inner)
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    r = outer.compile(name="outer")
    log: list[str] = []
    assert await r.invoke("", callbacks=[Recorder("h", log)], designate=[("sub", "a")]) == "ab"
    assert log == ["h:start:NodeA:Lambda:''", "h:end:NodeA:'a'"]
    glog: list[str] = []
    append_global_callbacks(Recorder("g", glog))
    try:
        await r.invoke("")
    finally:
        clear_global_callbacks()
    assert glog[0] == "g:start:outer:Graph:''" and glog[1] == "g:start:sub:Graph:''"
    assert glog[-2:] == ["g:end:sub:'ab'", "g:end:outer:'ab'"] and len(glog) == 8


async def test_early_failure_fires_one_start_and_one_error(anyio_backend: Any) -> None:
    g = Graph[int, int]()

    async def inc(x: int) -> int:
        return x + 1

    from compose.graph.branch import GraphBranch

    g.add_lambda_node("inc", inc)
    g.add_edge(START, "inc")
    g.add_branch("inc", GraphBranch(lambda x: "inc", {"inc", END}))
    r = g.compile(name="loop")
    log: list[str] = []

    class GraphOnly(Recorder):
        async def on_start(self, run_info: RunInfo, input: Any) -> None:
            if run_info.component == "Graph":
                await super().on_start(run_info, input)

        async def on_end(self, run_info: RunInfo, output: Any) -> None:
            if run_info.component == "Graph":
                await super().on_end(run_info, output)

    with pytest.raises(MaxStepsExceededError):
        await r.invoke(0, callbacks=[GraphOnly("h", log)])
    assert log == ["h:start:loop:Graph:0", "h:error:loop:MaxStepsExceededError"]


async def test_a_run_failing_before_any_node_fires_one_start_and_one_error(anyio_backend: Any) -> None:
    """Eino's ``TestEarlyFailCallback``: a DAG run given a runtime step limit fails before any node runs, and
    still fires the graph's on_start and on_error once each (no on_end); so do the other failures found
    before a run starts (no checkpoint store, a wrong input, a failing state factory), in every paradigm."""
    from compose.errors import RuntimeTypeError

    async def ident(x: str) -> str:
        return x

    def broken() -> St:
        raise KeyError("config")

    dag = line(("1", ident)).compile(name="dag", trigger_mode="all_predecessor")
    pregel = line(("1", ident)).compile(name="pregel")
    stateful = line(("1", ident), state=broken).compile(name="stateful")
    cases: list[tuple[Any, dict[str, Any], Any, type[Exception]]] = [
        (dag, {"max_run_steps": 1}, "", GraphRunError),
        (pregel, {"max_run_steps": 0}, "", GraphRunError),
        (pregel, {"checkpoint_id": "c"}, "", GraphRunError),
        (pregel, {}, 3, RuntimeTypeError),
        (stateful, {}, "", GraphRunError),
    ]
    for r, opts, x, error in cases:
        log: list[str] = []
        with pytest.raises(error):
            await r.invoke(x, callbacks=[Recorder("h", log)], **opts)
        assert log == [f"h:start:{r.name}:Graph:{x!r}", f"h:error:{r.name}:{error.__name__}"]
        log.clear()
        with pytest.raises(error):
            await r.stream(x, callbacks=[Recorder("h", log)], **opts)
        assert log == [f"h:stream_start:{r.name}:{x!r}", f"h:error:{r.name}:{error.__name__}"]
    log = []
    source = StreamReader.from_iterable(["a", "b"])
    with pytest.raises(GraphRunError):
        await dag.transform(source, callbacks=[Recorder("h", log)], max_run_steps=1)
    assert log == ["h:stream_start:dag:'ab'", "h:error:dag:GraphRunError"]
    assert source.closed


async def test_lambda_callbacks_see_collect_and_transform(anyio_backend: Any) -> None:
    async def col(r: StreamReader[str]) -> str:
        return await concat(r)

    g = Graph[str, str]()
    g.add_lambda_node("c", Lambda(collect=col))
    g.add_edge(START, "c")
    g.add_edge("c", END)
    log: list[str] = []
    out = await g.compile(name="G").stream("xy", callbacks=[Recorder("h", log)], designate=["c"])
    assert await concat(out) == "xy"
    assert log == ["h:stream_start:c:'xy'", "h:end:c:'xy'"]


async def test_state_lock_serialises_parallel_nodes_and_survives_cancellation(anyio_backend: Any) -> None:
    import anyio

    from compose.state import _StateLock

    lock = _StateLock()
    order: list[str] = []
    inside = anyio.Event()
    release = anyio.Event()

    async def holder() -> None:
        async with lock:
            order.append("holder in")
            inside.set()
            await release.wait()
            order.append("holder out")

    async def waiter(tag: str) -> None:
        async with lock:
            order.append(tag)

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await inside.wait()
        with anyio.CancelScope() as cancelled:
            cancelled.cancel()
            await waiter("never")  # cancelled while waiting: leaves the queue
        tg.start_soon(waiter, "w1")
        await anyio.wait_all_tasks_blocked()  # w1 queues first (trio schedules new tasks in any order)
        tg.start_soon(waiter, "w2")
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert order == ["holder in", "holder out", "w1", "w2"]
    async with lock:  # free again
        pass

    # nodes of one superstep that use process_state are serialised by it
    async def bump(x: str) -> str:
        async with process_state(St) as st:
            st.log.append(f"{x}<")
            await anyio.lowlevel.checkpoint()
            st.log.append(f">{x}")
        return x

    states: list[St] = []

    def factory() -> St:
        states.append(St())
        return states[-1]

    g = Graph[str, dict[str, Any]](state=factory)
    for k in "abc":
        g.add_lambda_node(k, bump, output_key=k)
        g.add_edge(START, k)
        g.add_edge(k, END)
    assert await g.compile().invoke("x") == {"a": "x", "b": "x", "c": "x"}
    log = states[0].log
    assert all(log[i] == "x<" and log[i + 1] == ">x" for i in range(0, len(log), 2)) and len(log) == 6


async def test_a_failing_node_fires_its_own_and_the_graphs_on_error(anyio_backend: Any) -> None:
    async def boom(x: str) -> str:
        raise ValueError("no")

    g = Graph[str, str]()
    g.add_lambda_node("ok", Lambda(invoke=lambda x: x + "!", input_type=str, output_type=str))
    g.add_lambda_node("boom", boom)
    g.add_edge(START, "ok")
    g.add_edge("ok", "boom")
    g.add_edge("boom", END)
    r = g.compile(name="G")
    for paradigm in ("invoke", "stream"):
        log: list[str] = []
        with pytest.raises(NodeRunError, match="ValueError: no"):
            if paradigm == "invoke":
                await r.invoke("x", callbacks=[Recorder("h", log)])
            else:
                await concat(await r.stream("x", callbacks=[Recorder("h", log)]))
        starts = [e for e in log if ":start:" in e or ":stream_start:" in e]
        assert [e.split(":")[2] for e in starts] == ["G", "ok", "boom"], log
        assert log[-2:] == ["h:error:boom:ValueError", "h:error:G:NodeRunError"], log

