"""Running graphs: Pregel and DAG, branches, fan-in, keys, paradigms, errors (eino-semantics 1.2-1.4, 1.7)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from compose.errors import (
    BranchError,
    FanInMergeError,
    GraphRunError,
    MaxStepsExceededError,
    NodeRunError,
    RuntimeTypeError,
)
from compose.graph import END, START, FanInMergeConfig, Graph
from compose.graph.branch import GraphBranch, GraphMultiBranch, StreamGraphBranch, StreamGraphMultiBranch
from compose.lambdas import Lambda
from compose.stream import SourceEOF, StreamReader, concat
from tests.compose.helpers import line, recording

pytestmark = pytest.mark.anyio


def appender(tag: str) -> Any:
    async def f(x: str) -> str:
        return x + tag

    return f


def chain(*keys: str, mode: str = "any_predecessor") -> Any:
    g = Graph[str, str]()
    prev = START
    for k in keys:
        g.add_lambda_node(k, appender(k))
        g.add_edge(prev, k)
        prev = k
    g.add_edge(prev, END)
    return g.compile(trigger_mode=mode)  # type: ignore[arg-type]


async def test_linear_chain_in_four_paradigms(anyio_backend: Any) -> None:
    r = chain("a", "b", "c")
    assert await r.invoke(">") == ">abc"
    assert await concat(await r.stream(">")) == ">abc"
    assert await r.collect(StreamReader.from_iterable([">", "<"])) == "><abc"
    assert await concat(await r.transform(StreamReader.from_iterable([">"]))) == ">abc"


async def test_dag_chain(anyio_backend: Any) -> None:
    r = chain("a", "b", mode="all_predecessor")
    assert await r.invoke("") == "ab"
    assert await concat(await r.stream("")) == "ab"


async def test_step_limit_is_exact(anyio_backend: Any) -> None:
    r = chain("n1", "n2")
    assert await r.invoke("", max_run_steps=2) == "n1n2"
    with pytest.raises(MaxStepsExceededError, match="exceeds max steps"):
        await r.invoke("", max_run_steps=1)
    with pytest.raises(GraphRunError, match="max run steps limit must be at least 1"):
        await r.invoke("", max_run_steps=0)
    with pytest.raises(GraphRunError, match="cannot set max run steps in dag"):
        await chain("a", mode="all_predecessor").invoke("", max_run_steps=3)


def loop_graph(limit: int) -> Any:
    g = Graph[int, int]()

    async def inc(x: int) -> int:
        return x + 1

    g.add_lambda_node("inc", inc)
    g.add_edge(START, "inc")
    g.add_branch("inc", GraphBranch(lambda x: END if x >= limit else "inc", {"inc", END}))
    return g


async def test_loop_default_step_limit_is_nodes_plus_ten(anyio_backend: Any) -> None:
    assert await loop_graph(11).compile().invoke(0) == 11  # 11 steps <= 1 + 10
    with pytest.raises(MaxStepsExceededError):
        await loop_graph(12).compile().invoke(0)
    assert await loop_graph(100).compile(max_run_steps=100).invoke(0) == 100
    assert await loop_graph(100).compile().invoke(0, max_run_steps=100) == 100


async def test_pregel_end_first_wins(anyio_backend: Any) -> None:
    # node1 -> END and node1 -> node2 -> END: END receives node1's output first
    g = Graph[str, str]()
    g.add_lambda_node("node1", appender("1"))
    g.add_lambda_node("node2", appender("2"))
    g.add_edge(START, "node1")
    g.add_edge("node1", END)
    g.add_edge("node1", "node2")
    g.add_edge("node2", END)
    r = g.compile()
    assert await r.invoke("") == "1"
    assert await concat(await r.stream("")) == "1"


async def test_pregel_node_runs_once_per_delivering_step(anyio_backend: Any) -> None:
    calls: list[str] = []

    async def sink(x: str) -> str:
        calls.append(x)
        return x

    g = Graph[str, str]()
    g.add_lambda_node("fast", appender("f"))
    g.add_lambda_node("slow1", appender("s"))
    g.add_lambda_node("slow2", appender("t"))
    g.add_lambda_node("sink", sink)
    g.add_lambda_node("stop", appender("!"))
    g.add_edge(START, "fast")
    g.add_edge(START, "slow1")
    g.add_edge("slow1", "slow2")
    g.add_edge("fast", "sink")
    g.add_edge("slow2", "sink")
    g.add_branch("sink", GraphBranch(lambda x: END if x.endswith("t") else "stop", {END, "stop"}))
    g.add_edge("stop", "sink")
    r = g.compile()
    assert await r.invoke("") == "st"
    # "f" reached the sink in step 1, "st" in step 2: the sink ran once per step; "stop" ran beside it in
    # step 2 but END, reached first, wins
    assert calls == ["f", "st"]


async def test_dag_waits_for_all_predecessors_and_fans_in(anyio_backend: Any) -> None:
    g = Graph[str, dict[str, Any]]()
    g.add_lambda_node("a", appender("a"), output_key="a")
    g.add_lambda_node("b", appender("b"), output_key="b")
    g.add_lambda_node("b2", lambda d: {"b2": d["b"] + "2"})
    g.add_passthrough_node("join")
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("b", "b2")
    g.add_edge("a", "join")
    g.add_edge("b2", "join")
    g.add_edge("join", END)
    r = g.compile(trigger_mode="all_predecessor")
    assert await r.invoke("") == {"a": "a", "b2": "b2"}
    assert await concat(await r.stream("")) == {"a": "a", "b2": "b2"}


async def test_fan_in_rules(anyio_backend: Any) -> None:
    def fan_in(out_keys: bool, dup: bool = False) -> Any:
        g = Graph[str, Any]()
        g.add_lambda_node("x", appender("x"), output_key="k" if out_keys else None)
        g.add_lambda_node("y", appender("y"), output_key=("k" if dup else "j") if out_keys else None)
        g.add_edge(START, "x")
        g.add_edge(START, "y")
        g.add_edge("x", END)
        g.add_edge("y", END)
        return g.compile()

    assert await fan_in(True).invoke("") == {"k": "x", "j": "y"}
    with pytest.raises(FanInMergeError, match=r"duplicated key \('k'\)"):
        await fan_in(True, dup=True).invoke("")
    with pytest.raises(FanInMergeError, match=r"unsupported type: str.*node 'end'"):
        await fan_in(False).invoke("")
    with pytest.raises(FanInMergeError, match="unsupported chunk type"):
        await fan_in(False).stream("")
    merged = await concat(await fan_in(True).stream(""))
    assert merged == {"k": "x", "j": "y"}


async def test_fan_in_stream_with_source_eof(anyio_backend: Any) -> None:
    g = Graph[str, Any]()
    g.add_lambda_node("x", appender("x"), output_key="x")
    g.add_lambda_node("y", appender("y"), output_key="y")
    g.add_edge(START, "x")
    g.add_edge(START, "y")
    g.add_edge("x", END)
    g.add_edge("y", END)
    r = g.compile(fan_in_merge_config={END: FanInMergeConfig(stream_merge_with_source_eof=True)})
    reader = await r.stream("")
    chunks: list[Any] = []
    ended: list[str] = []
    async with reader:
        while True:
            try:
                chunks.append(await reader.recv())
            except SourceEOF as eof:
                ended.append(eof.name)
            except EOFError:
                break
    assert sorted(ended) == ["x", "y"]
    assert sorted(map(str, chunks)) == ["{'x': 'x'}", "{'y': 'y'}"]


async def test_branches_choose_and_check(anyio_backend: Any) -> None:
    def graph(cond: Any, multi: bool = False) -> Any:
        g = Graph[str, str]()
        g.add_lambda_node("a", appender("a"))
        g.add_lambda_node("b", appender("b"))
        g.add_lambda_node("c", appender("c"))
        g.add_edge(START, "a")
        g.add_branch("a", (GraphMultiBranch if multi else GraphBranch)(cond, {"b", "c"}))
        g.add_edge("b", END)
        g.add_edge("c", END)
        return g.compile()

    assert await graph(lambda x: "c").invoke("") == "ac"
    assert await concat(await graph(lambda x: "b").stream("")) == "ab"

    async def async_cond(x: str) -> str:
        return "b"

    assert await graph(async_cond).invoke("") == "ab"
    with pytest.raises(BranchError, match="branch invocation returns unintended end node: zz"):
        await graph(lambda x: "zz").invoke("")
    with pytest.raises(GraphRunError, match="no tasks to execute"):
        await graph(lambda x: set(), multi=True).invoke("")

    def boom(x: str) -> str:
        raise ValueError("bad condition")

    with pytest.raises(BranchError, match="branch condition of node 'a' failed: ValueError: bad condition"):
        await graph(boom).invoke("")


async def test_a_stream_branch_with_a_value_condition(anyio_backend: Any) -> None:
    """``value_condition=``: an invoke run decides with it on the whole value; a streaming run still reads the
    stream with ``condition``."""
    used: list[str] = []

    async def on_stream(reader: StreamReader[str]) -> str:
        used.append("stream")
        first = await reader.recv()
        await reader.aclose()
        return "b" if first.startswith("x") else "c"

    def on_value(value: str) -> str:
        used.append("value")
        return "b" if value.startswith("x") else "c"

    g = Graph[str, str]()
    for k in "abc":
        g.add_lambda_node(k, appender(k))
    g.add_edge(START, "a")
    g.add_branch("a", StreamGraphBranch(on_stream, {"b", "c"}, value_condition=on_value))
    g.add_edge("b", END)
    g.add_edge("c", END)
    r = g.compile()
    assert await r.invoke("x") == "xab"
    assert await r.invoke("y") == "yac"
    assert await concat(await r.stream("x")) == "xab"
    assert used == ["value", "value", "stream"]
    with pytest.raises(TypeError, match="value_condition= is for stream branches"):
        GraphBranch(on_value, {"b"}, value_condition=on_value)


async def test_branches_on_a_stream_of_one_known_value(anyio_backend: Any) -> None:
    """A streaming run whose node emits one known value (it implements invoke only): a value branch decides on
    that value, a stream branch still reads a stream, a direct edge beside them gets its own."""
    seen: list[Any] = []

    async def on_stream(reader: StreamReader[str]) -> set[str]:
        seen.append(isinstance(reader, StreamReader))
        return {"c"} if (await concat(reader)).endswith("a") else set()

    g = Graph[str, dict[str, str]]()
    for k in "abcd":
        g.add_lambda_node(k, appender(k), output_key=k if k != "a" else None)
        g.add_edge(*((START, "a") if k == "a" else (k, END)))
    g.add_edge("a", "d")
    g.add_branch("a", GraphBranch(lambda v: seen.append(v) or "b", {"b", "c"}))
    g.add_branch("a", StreamGraphMultiBranch(on_stream, {"c"}))
    assert await concat(await g.compile().stream("x")) == {"b": "xab", "c": "xac", "d": "xad"}
    assert seen == ["xa", True]


async def test_sync_condition_results_that_need_more_than_a_lookup(anyio_backend: Any) -> None:
    """A sync condition may return an awaitable (awaited) or a non-key (a BranchError naming the node), in a
    stretch of the run the scheduler fuses into one loop as well as when driven step by step."""
    g = Graph[str, str]()
    g.add_lambda_node("a", appender("a"))
    g.add_lambda_node("b", appender("b"))
    g.add_edge(START, "a")
    choice: list[Any] = []

    async def later() -> str:
        return "b"

    g.add_branch("a", GraphBranch(lambda x: choice[0](), {"b", END}))
    g.add_edge("b", END)
    r = g.compile()
    choice[:] = [later]
    assert await r.invoke("") == "ab"
    choice[:] = [lambda: 3]
    with pytest.raises(BranchError, match="branch condition of node 'a' must return a node key, got 3"):
        await r.invoke("")

    async def broken() -> str:
        raise ValueError("no luck")

    choice[:] = [broken]
    with pytest.raises(BranchError, match="branch condition of node 'a' failed: ValueError: no luck") as info:
        await r.invoke("")
    assert isinstance(info.value.__cause__, ValueError)


async def test_runs_mixing_plain_and_handled_nodes(anyio_backend: Any) -> None:
    """Plain nodes run back to back; a node with a handler, an input key or a sub-graph takes the general path in
    between, state is shared by both, and the step limit counts every node either way."""
    from dataclasses import dataclass, field

    from compose.state import process_state

    @dataclass
    class Seen:
        items: list[str] = field(default_factory=list)

    async def note(x: str) -> str:
        async with process_state(Seen) as s:
            s.items.append(x)
        return x

    def pre(x: dict[str, str], s: Seen) -> dict[str, str]:
        s.items.append("pre")
        return x

    async def report(x: str) -> str:
        async with process_state(Seen) as s:
            return x + "|" + ",".join(s.items)

    inner = Graph[str, str]()
    inner.add_lambda_node("i", appender("i"))
    inner.add_edge(START, "i")
    inner.add_edge("i", END)
    g = Graph[str, dict[str, str]](state=Seen)
    g.add_lambda_node("a", appender("a"))
    g.add_lambda_node("n", note, output_key="text")
    g.add_lambda_node("k", appender("k"), pre_handler=pre, input_key="text")
    g.add_graph_node("sub", inner)
    g.add_lambda_node("r", report)
    g.add_lambda_node("z", appender("z"), output_key="out")
    for s_, e in [(START, "a"), ("a", "n"), ("n", "k"), ("k", "sub"), ("sub", "r"), ("r", "z"), ("z", END)]:
        g.add_edge(s_, e)
    r = g.compile()
    assert await r.invoke("") == {"out": "aki|a,prez"}
    assert await r.invoke("x", max_run_steps=6) == {"out": "xaki|xa,prez"}
    with pytest.raises(MaxStepsExceededError):
        await r.invoke("", max_run_steps=5)


async def test_failing_stream_branches_close_every_copy(anyio_backend: Any) -> None:
    """In a streaming run a node's output is copied for its branches; a condition that raises (or returns a
    non-key) is a BranchError naming the node, and every copy is closed (the autouse leak check)."""

    async def reads_then_fails(reader: StreamReader[str]) -> str:
        await reader.recv()
        raise ValueError("bad stream")

    async def never_called(reader: StreamReader[str]) -> str:
        raise AssertionError("the first branch failed: this one must not run")

    def graph(first: Any, multi: bool = False) -> Any:
        g = Graph[str, str]()
        for k in "abc":
            g.add_lambda_node(k, appender(k))
        g.add_edge(START, "a")
        cls = StreamGraphMultiBranch if multi else StreamGraphBranch
        g.add_branch("a", cls(first, {"b", "c"}))
        g.add_branch("a", StreamGraphBranch(never_called, {"b", "c"}))
        g.add_edge("b", END)
        g.add_edge("c", END)
        return g.compile()

    with pytest.raises(BranchError, match="branch condition of node 'a' failed: ValueError: bad stream") as info:
        await concat(await graph(reads_then_fails).stream("x"))
    assert isinstance(info.value.__cause__, ValueError)

    async def not_a_set(reader: StreamReader[str]) -> Any:
        return 3

    with pytest.raises(BranchError, match="multi-branch condition of node 'a' must return a set of node keys"):
        await concat(await graph(not_a_set, multi=True).stream("x"))


def test_branch_construction_errors_and_repr() -> None:
    with pytest.raises(TypeError, match="a branch condition must be callable, got str"):
        GraphBranch("b", {"b"})  # type: ignore[arg-type]
    with pytest.raises(BranchError, match="a branch needs at least one end node"):
        GraphBranch(lambda x: "b", set())
    assert repr(GraphMultiBranch(lambda x: {"b"}, {"c", "b"})) == "GraphMultiBranch(end_nodes=['b', 'c'])"


async def test_a_node_without_successors_ends_the_run_with_no_tasks(anyio_backend: Any) -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", appender("a"))
    g.add_lambda_node("dead", appender("d"))
    g.add_edge(START, "a")
    g.add_branch("a", GraphBranch(lambda x: "dead", {"dead", END}))
    with pytest.raises(GraphRunError, match=r"no tasks to execute, last completed nodes: \[dead\]"):
        await g.compile().invoke("")


async def test_multi_branch_selects_several(anyio_backend: Any) -> None:
    g = Graph[str, dict[str, Any]]()
    g.add_lambda_node("a", appender("a"))
    g.add_lambda_node("b", appender("b"), output_key="b")
    g.add_lambda_node("c", appender("c"), output_key="c")
    g.add_edge(START, "a")
    g.add_branch("a", GraphMultiBranch(lambda x: {"b", "c"}, {"b", "c"}))
    g.add_edge("b", END)
    g.add_edge("c", END)
    for mode in ("any_predecessor", "all_predecessor"):
        r = g.compile(trigger_mode=mode) if mode == "any_predecessor" else _recompile(g, mode)
        assert await r.invoke("") == {"b": "ab", "c": "ac"}


def _recompile(g: Graph[Any, Any], mode: str) -> Any:
    g._compiled = False  # test helper: compile the same builder in the other mode
    return g.compile(trigger_mode=mode)  # type: ignore[arg-type]


async def test_stream_branch_decides_on_a_prefix(anyio_backend: Any) -> None:
    produced: list[int] = []

    async def numbers(x: str) -> AsyncIterator[str]:
        for i in range(5):
            produced.append(i)
            yield f"{i}"

    seen_by_condition: list[str] = []

    async def first_chunk(reader: StreamReader[str]) -> str:
        seen_by_condition.append(await reader.recv())
        return "b"  # decided on the first chunk; never closes its copy: the engine must

    async def then_b(reader: StreamReader[str]) -> AsyncIterator[str]:
        async for chunk in reader:
            yield chunk
        yield "b"

    g = Graph[str, str]()
    g.add_lambda_node("a", numbers)
    g.add_lambda_node("b", Lambda(transform=then_b))
    g.add_edge(START, "a")
    g.add_branch("a", StreamGraphBranch(first_chunk, {"b", END}))
    g.add_edge("b", END)
    r = g.compile()
    out = await r.stream("")
    assert seen_by_condition == ["0"]
    assert produced == [0]  # lazy: the rest is pulled by the consumer
    assert await concat(out) == "01234b"
    # in invoke mode a stream branch sees a one-chunk stream of the value
    seen_by_condition.clear()
    assert await r.invoke("") == "01234b"
    assert seen_by_condition == ["01234"]


async def test_value_branch_on_stream_sees_concatenated_value(anyio_backend: Any) -> None:
    async def chars(x: str) -> AsyncIterator[str]:
        for c in "hey":
            yield c

    seen: list[str] = []

    def cond(x: str) -> str:
        seen.append(x)
        return END

    g = Graph[str, str]()
    g.add_lambda_node("a", chars)
    g.add_edge(START, "a")
    g.add_branch("a", GraphBranch(cond, {END}))
    assert await concat(await g.compile().stream("")) == "hey"
    assert seen == ["hey"]


async def test_stream_multi_branch_may_choose_none_in_dag_and_skip_propagates(anyio_backend: Any) -> None:
    ran: list[str] = []

    def node(tag: str) -> Any:
        async def f(x: dict[str, Any]) -> dict[str, Any]:
            ran.append(tag)
            return {tag: True}

        return f

    async def choose(reader: StreamReader[dict[str, Any]]) -> set[str]:
        await reader.aclose()
        return {"left"}

    g = Graph[dict[str, Any], dict[str, Any]]()
    g.add_lambda_node("root", node("root"))
    g.add_lambda_node("left", node("left"))
    g.add_lambda_node("right", node("right"))
    g.add_lambda_node("right2", node("right2"))
    g.add_passthrough_node("join")
    g.add_edge(START, "root")
    g.add_branch("root", StreamGraphMultiBranch(choose, {"left", "right"}))
    g.add_edge("right", "right2")
    g.add_edge("left", "join")
    g.add_edge("right2", "join")
    g.add_edge("join", END)
    r = g.compile(trigger_mode="all_predecessor")
    assert await r.invoke({}) == {"left": True}
    assert ran == ["root", "left"]  # right and right2 were skipped: never ran
    ran.clear()
    assert await concat(await r.stream({})) == {"left": True}
    assert ran == ["root", "left"]


async def test_input_and_output_keys(anyio_backend: Any) -> None:
    g = Graph[dict[str, Any], dict[str, Any]]()
    g.add_lambda_node("a", appender("!"), input_key="q", output_key="answer")
    g.add_edge(START, "a")
    g.add_edge("a", END)
    r = g.compile()
    assert await r.invoke({"q": "hi"}) == {"answer": "hi!"}
    # stream chunks without the key are dropped
    out = await r.transform(StreamReader.from_iterable([{"other": 1}, {"q": "a"}, {"q": "b"}]))
    assert await concat(out) == {"answer": "ab!"}
    with pytest.raises(NodeRunError, match="cannot find input key: q") as info:
        await r.invoke({"x": "1"})
    assert info.value.node_path == ["a"]
    from compose.errors import EmptyStreamError

    with pytest.raises(NodeRunError) as info2:
        await r.collect(StreamReader.from_iterable([{"x": 1}]))
    assert isinstance(info2.value.__cause__, EmptyStreamError)


async def test_paradigm_derivation_for_each_subset(anyio_backend: Any) -> None:
    async def inv(x: str) -> str:
        return x.upper()

    async def stm(x: str) -> AsyncIterator[str]:
        for c in x:
            yield c.upper()

    async def col(r: StreamReader[str]) -> str:
        return (await concat(r)).upper()

    async def trf(r: StreamReader[str]) -> AsyncIterator[str]:
        async for c in r:
            yield c.upper()

    variants = [Lambda(invoke=inv), Lambda(stream=stm), Lambda(collect=col), Lambda(transform=trf)]
    for lam in variants:
        assert await lam.invoke("ab") == "AB"
        assert await concat(await lam.stream("ab")) == "AB"
        assert await lam.collect(StreamReader.from_iterable(["a", "b"])) == "AB"
        assert await concat(await lam.transform(StreamReader.from_iterable(["a", "b"]))) == "AB"
        g = line(("n", lam))
        r = g.compile()
        assert await r.invoke("ab") == "AB"
        assert await concat(await r.stream("ab")) == "AB"


async def test_node_options_reach_lambdas(anyio_backend: Any) -> None:
    async def f(x: str, **opts: Any) -> str:
        return x + str(sorted(opts.items()))

    g = line(("f", f))
    r = g.compile()
    assert await r.invoke("", node_options={"f": {"k": 1}}) == "[('k', 1)]"
    with pytest.raises(TypeError, match="unknown run option"):
        await r.invoke("", bogus=1)


async def test_a_run_driven_superstep_by_superstep(anyio_backend: Any) -> None:
    """``start_run`` + ``step()``: one superstep per call (END's value arrives at the step after the last node);
    ``step(until=...)`` runs supersteps until the predicate holds after one; ``to_end`` runs them all."""
    seen: list[str] = []

    g = Graph[str, str]()
    for k in "abcd":
        g.add_lambda_node(k, recording(seen, k))
    for s_, e in [(START, "a"), ("a", "b"), ("b", "c"), ("c", "d"), ("d", END)]:
        g.add_edge(s_, e)
    r = g.compile()
    handle = await r.start_run(">", streaming=False)
    assert not await handle.step()
    assert seen == ["a"]
    assert not await handle.step(until=lambda: "c" in seen)
    assert seen == ["a", "b", "c"]
    assert not await handle.step()  # d runs
    assert await handle.step()  # END
    assert handle.result == ">abcd"
    seen.clear()
    handle = await r.start_run(">", streaming=False)
    assert await handle.step(until=lambda: False)  # never satisfied: runs to the end
    assert (handle.result, seen) == (">abcd", ["a", "b", "c", "d"])


async def test_stream_methods_reject_values_at_the_call(anyio_backend: Any) -> None:
    r = chain("a")
    with pytest.raises(TypeError, match=r"Runnable.transform\(\) takes a StreamReader, got list"):
        await r.transform(["x"])
    with pytest.raises(TypeError, match=r"Runnable.collect\(\) takes a StreamReader, got str"):
        await r.collect("x")
    with pytest.raises(TypeError, match=r"Runnable.start_run\(\) takes a StreamReader, got str"):
        await r.start_run("x", streaming=True)


async def test_bad_call_options_fail_at_the_call_naming_the_node(anyio_backend: Any) -> None:
    """As Eino: options designated to an unknown node, or a sub path into a component, are errors; so are node
    options a node cannot take. Checked before anything runs; a transform's input stream is closed."""
    from compose.callbacks import CallbackHandler, RunInfo

    async def inner_fn(x: str, **opts: Any) -> str:
        return x + str(sorted(opts.items()))

    r = a_then_sub(inner_fn).compile(name="outer")
    ran: list[str] = []

    class Seen(CallbackHandler):
        async def on_start(self, run_info: RunInfo, input: Any) -> None:
            ran.append(run_info.name)

    # what works: options for a node inside a sub-graph, callbacks designated by a path into it
    assert await r.invoke("", node_options={"sub": {"node_options": {"i": {"k": 1}}}}) == "a[('k', 1)]"
    assert await r.invoke("", callbacks=[Seen()], designate=[["sub", "i"]]) == "a[]"
    assert ran == ["i"]

    bad: list[tuple[dict[str, Any], str]] = [
        ({"node_options": {"nope": {}}}, r"option has designated an unknown node: 'nope' .*nodes: \['a', 'sub'\]"),
        ({"node_options": {"a": {"k": 1}}}, r"node 'a' takes no options: its function has no \*\*kwargs"),
        ({"node_options": {"a": 3}}, r"node_options\['a'\] must be a mapping of keyword options, got int"),
        ({"node_options": {"sub": {"bogus": 1}}}, r"node_options\['sub'\] \(sub-graph\): unknown run option"),
        ({"node_options": {"sub": {"node_options": {"x": {}}}}}, r"unknown node: 'x' .*nodes: \['i'\]"),
        ({"callbacks": [Seen()], "designate": ["nope"]}, r"unknown node: 'nope' in designate=\['nope'\]"),
        ({"callbacks": [Seen()], "designate": [["a", "b"]]}, r"cannot designate sub path of a component: \['a', 'b'\]"),
        ({"callbacks": [Seen()], "designate": [["sub", "z"]]}, r"unknown node: 'z' in designate=\['sub', 'z'\]"),
        ({"designate": ["a"]}, "no callbacks were given"),
        ({"callbacks": [Seen()], "designate": [[]]}, "designate= has an empty path"),
    ]
    ran.clear()
    for opts, message in bad:
        with pytest.raises(GraphRunError, match=message):
            await r.invoke("", **opts)
        source = StreamReader.from_iterable(["x"])
        with pytest.raises(GraphRunError, match=message):
            await r.transform(source, **opts)
        assert source.closed
    assert set(ran) <= {"outer"}  # no node ran (the graph's own early-failure callbacks may fire)


async def test_runtime_type_check_on_any_edge(anyio_backend: Any) -> None:
    def anything(x: str) -> Any:
        return 42 if x == "bad" else x

    g = Graph[str, str]()
    g.add_lambda_node("any", anything)
    g.add_lambda_node("s", appender("."))
    g.add_edge(START, "any")
    g.add_edge("any", "s")
    g.add_edge("s", END)
    r = g.compile()
    assert await r.invoke("ok") == "ok."
    with pytest.raises(RuntimeTypeError, match=r"edge\[any\]-\[s\]: expected type: str, actual type: int"):
        await r.invoke("bad")
    with pytest.raises(NodeRunError) as info:
        await concat(await r.stream("bad"))
    assert isinstance(info.value.__cause__, RuntimeTypeError)


async def test_sub_graph_error_path_and_cause(anyio_backend: Any) -> None:
    async def fail(x: str) -> str:
        raise ValueError("inner boom")

    inner = line(("inner", fail))
    outer = Graph[str, str]()
    outer.add_graph_node("sub", inner)
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    r = outer.compile()
    with pytest.raises(NodeRunError) as info:
        await r.invoke("")
    assert info.value.node_path == ["sub", "inner"]
    assert isinstance(info.value.__cause__, ValueError)
    assert "node path: [sub, inner]" in str(info.value)


def a_then_sub(inner_fn: Any) -> Graph[str, str]:
    """START -> a -> sub -> END, where ``sub`` is a one-node graph (node ``i``) running ``inner_fn``."""
    inner = line(("i", inner_fn))
    outer = Graph[str, str]()
    outer.add_lambda_node("a", appender("a"))
    outer.add_graph_node("sub", inner)
    outer.add_edge(START, "a")
    outer.add_edge("a", "sub")
    outer.add_edge("sub", END)
    return outer


async def test_sub_graph_runs_in_all_paradigms(anyio_backend: Any) -> None:
    r = a_then_sub(appender("i")).compile()
    assert await r.invoke("") == "ai"
    assert await concat(await r.stream("")) == "ai"


async def test_failing_node_cancels_siblings(anyio_backend: Any) -> None:
    cancelled = anyio.Event()
    started = anyio.Event()

    async def slow(x: str) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return x

    async def fail(x: str) -> str:
        await started.wait()
        raise RuntimeError("boom")

    g = Graph[str, dict[str, Any]]()
    g.add_lambda_node("slow", slow, output_key="s")
    g.add_lambda_node("fail", fail, output_key="f")
    g.add_edge(START, "slow")
    g.add_edge(START, "fail")
    g.add_edge("slow", END)
    g.add_edge("fail", END)
    for mode in ("any_predecessor", "all_predecessor"):
        cancelled = anyio.Event()
        started = anyio.Event()
        r = _recompile(g, mode)
        with pytest.raises(NodeRunError) as info:
            await r.invoke("")
        assert info.value.node_path == ["fail"]
        assert cancelled.is_set()


async def test_cancelling_a_run_closes_streams_and_ends_tasks(anyio_backend: Any, no_task_leaks: None) -> None:
    entered = anyio.Event()

    async def forever(x: str) -> AsyncIterator[str]:
        yield "first"
        entered.set()
        await anyio.sleep_forever()
        yield "never"

    async def consume(r: StreamReader[str]) -> str:
        return await concat(r)

    g = Graph[str, str]()
    g.add_lambda_node("gen", forever)
    g.add_lambda_node("sink", Lambda(collect=consume))
    g.add_edge(START, "gen")
    g.add_edge("gen", "sink")
    g.add_edge("sink", END)
    r = g.compile()
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await r.invoke("")

            tg.start_soon(run)
            await entered.wait()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    # streaming: the consumer's read is cancelled while the generator sleeps; closing releases everything
    g2 = line(("gen", forever))
    out = await g2.compile().stream("")
    assert await out.recv() == "first"
    with anyio.CancelScope() as cs:
        async with anyio.create_task_group() as tg2:
            tg2.start_soon(out.recv)
            await anyio.wait_all_tasks_blocked()
            cs.cancel()
    await out.aclose()


@pytest.mark.parametrize("general", [False, True])
async def test_a_loop_of_nodes_that_never_await_still_times_out(anyio_backend: Any, general: bool) -> None:
    """A run passes through the event loop every so many steps: another task runs and a cancellation lands even
    when no node ever awaits anything (the fused invoke loop, and the general path a callback handler forces)."""
    from compose.callbacks import CallbackHandler

    async def inc(x: int) -> int:
        return x + 1

    g = Graph[int, int]()
    g.add_lambda_node("a", inc)
    g.add_lambda_node("b", inc)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_branch("b", GraphBranch(lambda x: "a", {"a", END}))
    r = g.compile(max_run_steps=10**9)
    ticks = 0

    # the other task cancels the run once it has run a few times: no deadline to miss on a loaded machine
    with anyio.fail_after(60), anyio.CancelScope() as scope:

        async def other() -> None:
            nonlocal ticks
            while ticks < 3:
                ticks += 1
                await anyio.lowlevel.checkpoint()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            await r.invoke(0, callbacks=[CallbackHandler()] if general else None)
    assert scope.cancelled_caught
    assert ticks == 3


async def test_cancellation_note_names_the_graph(anyio_backend: Any) -> None:
    async def forever(x: str) -> str:
        await anyio.sleep_forever()
        return x

    g = line(("f", forever))
    r = g.compile(name="sleepy")
    notes: list[str] = []
    with anyio.CancelScope() as scope:

        async def run() -> None:
            try:
                await r.invoke("")
            except anyio.get_cancelled_exc_class() as exc:
                notes.extend(getattr(exc, "__notes__", []))
                raise

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert any("graph 'sleepy' was cancelled at step 0" in n for n in notes)


def test_blocking_twins() -> None:
    r = chain("a", "b")
    assert r.invoke_sync("") == "ab"
    assert "".join(r.stream_sync("")) == "ab"


async def test_graph_input_is_checked_and_start_can_reach_end(anyio_backend: Any) -> None:
    r = chain("a")
    with pytest.raises(RuntimeTypeError, match="graph 'graph' input: expected type: str, actual type: int"):
        await r.invoke(5)
    with pytest.raises(RuntimeTypeError):
        await r.stream(5)
    g = Graph[str, str]()
    g.add_edge(START, END)
    direct = g.compile()
    assert await direct.invoke("x") == "x"
    assert await concat(await direct.stream("x")) == "x"


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_runtime_type_check_before_a_branch_condition(anyio_backend: Any, mode: str) -> None:
    """As Eino's "may" branch (interface -> concrete): a condition declared on a narrower type than its node's
    output checks the value at run time, in invoke and stream runs, for value and stream conditions."""
    seen: list[Any] = []

    def parity(v: int) -> str:
        seen.append(v)
        return "even" if v % 2 == 0 else END

    async def first_parity(r: StreamReader[int]) -> str:
        async for v in r:
            seen.append(v)
            return "even" if v % 2 == 0 else END
        return END

    def graph(branch: Any) -> Any:
        def anything(x: Any) -> Any:
            return x

        g = Graph[Any, Any]()
        g.add_lambda_node("any", anything)
        g.add_lambda_node("even", appender("!"))
        g.add_edge(START, "any")
        g.add_branch("any", branch)
        g.add_edge("even", END)
        return g.compile(trigger_mode=mode)  # type: ignore[arg-type]

    for branch in (GraphBranch(parity, {"even", END}), StreamGraphBranch(first_parity, {"even", END})):
        r = graph(branch)
        assert await r.invoke(3) == 3
        assert await concat(await r.stream(3)) == 3
        message = r"runtime type check fail on the input of branch\[any\]-\[0\]'s condition: expected type: int, "
        message += "actual type: str"
        with pytest.raises(RuntimeTypeError, match=message):
            await r.invoke("x")
        with pytest.raises(RuntimeTypeError, match=message):
            await concat(await r.stream("x"))
    assert seen == [3, 3, 3, 3]  # never called with the str


async def test_a_branch_condition_that_fits_needs_no_runtime_check(anyio_backend: Any) -> None:
    """Only graphs with a "may" condition pay for a check: a fitting one keeps the fused invoke loop's route."""

    def cond(v: str) -> str:
        return END

    g = Graph[str, str]()
    g.add_lambda_node("a", appender("a"))
    g.add_edge(START, "a")
    g.add_branch("a", GraphBranch(cond, {END}))
    r = g.compile()
    assert r._tables.value_route[0] is not None and r._tables.branches[0][0].check is None
    assert await r.invoke("") == "a"


async def test_calls_in_a_cancelled_scope_run_nothing(anyio_backend: Any) -> None:
    """Every entry point is a cancellation point (trio's rule for async APIs), even for a graph whose nodes
    never await: in an already-cancelled scope no node runs, the cancellation is raised, input streams are
    closed."""
    ran: list[str] = []

    def node(x: str) -> str:
        ran.append(x)
        return x

    g = line(("a", node))
    r = g.compile()
    sources: list[StreamReader[str]] = []

    def source() -> StreamReader[str]:
        sources.append(StreamReader.from_iterable(["x"]))
        return sources[-1]

    calls = [
        lambda: r.invoke("x"),
        lambda: r.stream("x"),
        lambda: r.collect(source()),
        lambda: r.transform(source()),
        lambda: r.start_run(source(), streaming=True),
        lambda: r.start_run("x", streaming=False),
    ]
    for make_call in calls:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await make_call()
            pytest.fail("the call did not raise the cancellation")
        assert scope.cancelled_caught
    assert ran == []
    assert all(s.closed for s in sources)
    assert await r.invoke("y") == "y"  # outside the scope, as usual


async def test_no_tasks_error_names_the_last_completed_nodes_in_dag_mode(anyio_backend: Any) -> None:
    """Eino's ``TestSkipBranch``: ``no tasks to execute, last completed nodes: [1]``; with nothing completed,
    ``no tasks to execute after graph start``."""
    g = Graph[str, str]()
    g.add_lambda_node("1", appender("1"))
    g.add_lambda_node("2", appender("2"))
    g.add_edge(START, "1")
    g.add_branch("1", GraphMultiBranch(lambda x: set(), {"2"}))
    g.add_edge("2", END)
    r = g.compile(trigger_mode="all_predecessor")
    with pytest.raises(GraphRunError, match=r"^no tasks to execute, last completed nodes: \[1\]$"):
        await r.invoke("input")
    with pytest.raises(GraphRunError, match=r"^no tasks to execute, last completed nodes: \[1\]$"):
        await concat(await r.stream("input"))

    for mode in ("any_predecessor", "all_predecessor"):
        g = Graph[str, str]()
        g.add_lambda_node("1", appender("1"))
        g.add_branch(START, GraphMultiBranch(lambda x: set(), {"1"}))
        g.add_edge("1", END)
        with pytest.raises(GraphRunError, match=r"^no tasks to execute after graph start$"):
            await g.compile(trigger_mode=mode).invoke("input")  # type: ignore[arg-type]


async def test_a_may_fit_through_a_passthrough_is_checked_at_run_time(anyio_backend: Any) -> None:
    """Eino's ``TestValidate`` ("may matched passthrough"): any -> passthrough -> int runs with an int and
    fails the runtime type check with a str."""

    def anything(x: Any) -> Any:
        return x

    def to_str(n: int) -> str:
        return str(n)

    g = Graph[Any, str]()
    g.add_lambda_node("1", anything)
    g.add_passthrough_node("2")
    g.add_lambda_node("3", to_str)
    g.add_edge(START, "1")
    g.add_edge("2", "3")
    g.add_edge("1", "2")
    g.add_edge("3", END)
    r = g.compile()
    assert await r.invoke(1) == "1"
    with pytest.raises(RuntimeTypeError, match="runtime type check"):
        await r.invoke("1")


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_passthrough_keys(anyio_backend: Any, mode: str) -> None:
    """A passthrough with ``input_key`` passes on ``input[key]``; with ``output_key`` it emits ``{key: input}``
    (in a streaming run, chunk by chunk)."""
    g = Graph[dict[str, Any], dict[str, Any]]()
    g.add_passthrough_node("take", input_key="q")
    g.add_lambda_node("up", str.upper)
    g.add_passthrough_node("wrap", output_key="r")
    g.add_edge(START, "take")
    g.add_edge("take", "up")
    g.add_edge("up", "wrap")
    g.add_edge("wrap", END)
    r = g.compile(trigger_mode=mode)  # type: ignore[arg-type]
    assert await r.invoke({"q": "hi"}) == {"r": "HI"}
    assert await concat(await r.stream({"q": "hi"})) == {"r": "HI"}
    with pytest.raises(GraphRunError, match="cannot find input key: q"):
        await r.invoke({"other": "hi"})


async def test_a_run_closed_in_a_cancelled_scope_runs_its_streams_cleanup_and_cancel_callbacks_to_their_end(
    anyio_backend: Any,
) -> None:
    """A run's close takes no cancel scope of its own: closing the streams it holds suspends only in a reader
    over a node's async generator, and the graph's ``on_cancel`` runs; each is shielded where it runs, so a run
    closed from a cancelled scope finishes both (each awaits a checkpoint, then records its end)."""
    from compose.callbacks import CallbackHandler, RunInfo

    done: list[str] = []

    async def words(x: str) -> AsyncIterator[str]:
        try:
            yield x
            yield "!"
        finally:
            await anyio.lowlevel.checkpoint()
            done.append("stream cleaned up")

    class OnCancel(CallbackHandler):
        async def on_cancel(self, run_info: RunInfo) -> None:
            if run_info.component == "Graph":
                await anyio.lowlevel.checkpoint()
                done.append("on_cancel")

    async def upper(x: str) -> str:  # pragma: no cover - never reached: the run is closed before
        return x.upper()

    r = line(("words", words), ("upper", upper)).compile()
    handle = await r.start_run(StreamReader.from_iterable(["hi"]), streaming=True, callbacks=[OnCancel()])
    assert not await handle.step()  # "words" ran: the run holds its stream, for "upper"
    with anyio.CancelScope() as scope:
        scope.cancel()
        await handle.aclose()
        done.append("closed")
    assert not scope.cancelled_caught
    assert done == ["stream cleaned up", "on_cancel", "closed"]
