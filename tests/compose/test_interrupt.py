"""Interrupts, checkpoints and resume of graphs (eino-semantics 1.9)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from compose.checkpoint import CheckpointError, InMemoryCheckPointStore
from compose.errors import GraphInterrupt, GraphRunError
from compose.graph import END, START, Graph
from compose.interrupt import (
    InterruptInfo,
    get_interrupt_state,
    get_resume_context,
    interrupt,
    stateful_interrupt,
)
from compose.state import process_state
from compose.stream import concat
from tests.compose.helpers import line

pytestmark = pytest.mark.anyio


@dataclass
class St:
    log: list[str] = field(default_factory=list)


def appender(tag: str) -> Any:
    async def f(x: str) -> str:
        async with process_state(St) as st:
            st.log.append(tag)
        return x + tag

    return f


def abc_graph() -> Graph[str, str]:
    return line(*((k, appender(k)) for k in "abc"), state=St)



@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_interrupt_before_and_resume(anyio_backend: Any, mode: str) -> None:
    store = InMemoryCheckPointStore()
    r = abc_graph().compile(name="G", interrupt_before=["b"], checkpoint_store=store, trigger_mode=mode)  # type: ignore[arg-type]
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke(">", checkpoint_id="c1")
    assert info.value.checkpoint_id == "c1"
    ii = info.value.info
    assert isinstance(ii, InterruptInfo)
    assert ii.before_nodes == ["b"] and ii.after_nodes == [] and ii.rerun_nodes == []
    assert ii.state == St(log=["a"])
    assert [c.address for c in ii.interrupt_contexts] == ["runnable:G"]
    assert await store.list() == ["c1"]
    # the input is ignored on resume; b is not interrupted again
    assert await r.invoke("ignored", checkpoint_id="c1") == ">abc"
    assert await store.list() == []  # deleted once the run finished


async def test_interrupt_after_in_streaming_mode(anyio_backend: Any) -> None:
    store = InMemoryCheckPointStore()
    r = abc_graph().compile(interrupt_after=["a"], checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await r.stream(">", checkpoint_id="s1")
    assert info.value.info.after_nodes == ["a"]
    assert await concat(await r.stream("", checkpoint_id="s1")) == ">abc"
    with pytest.raises(GraphInterrupt):
        await r.stream(">", checkpoint_id="s2")
    with pytest.raises(GraphRunError, match="resume it with the same paradigm"):
        await r.invoke("", checkpoint_id="s2")


async def test_node_interrupt_rerun_gets_zero_input_and_resume_data(anyio_backend: Any) -> None:
    seen: list[tuple[str, bool, Any]] = []

    async def review(x: str) -> str:
        ctx = get_resume_context()
        seen.append((x, ctx.is_target, ctx.data))
        if not ctx.is_target:
            raise interrupt({"question": "ok?"})
        return f"{x}[{ctx.data}]"

    g = line(("a", lambda x: x + "a"), ("review", review))
    store = InMemoryCheckPointStore()
    r = g.compile(name="G", checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke(">", checkpoint_id="k")
    ii = info.value.info
    assert ii.rerun_nodes == ["review"] and ii.rerun_nodes_extra == {"review": {"question": "ok?"}}
    (ctx,) = ii.interrupt_contexts
    assert ctx.address == "runnable:G;node:review" and ctx.info == {"question": "ok?"} and ctx.is_root_cause
    # resuming without targeting it: the node runs again (with the zero value of its input) and re-interrupts
    with pytest.raises(GraphInterrupt) as again:
        await r.invoke("", checkpoint_id="k")
    new_id = again.value.info.interrupt_contexts[0].id
    assert await r.invoke("", checkpoint_id="k", resume={new_id: "yes"}) == "[yes]"
    assert seen == [(">a", False, None), ("", False, None), ("", True, "yes")]


async def test_stateful_interrupt_and_state_modifier(anyio_backend: Any) -> None:
    async def counter(x: str) -> str:
        was, has, saved = get_interrupt_state()
        if not was:
            raise stateful_interrupt("pause", {"count": 1})
        assert has
        async with process_state(St) as st:
            st.log.append(f"resumed with {saved}")
        return x + str(saved["count"])

    g = line(("counter", counter), state=St)
    store = InMemoryCheckPointStore()
    r = g.compile(checkpoint_store=store)
    with pytest.raises(GraphInterrupt):
        await r.invoke("x", checkpoint_id="k")
    modified: list[Any] = []

    def modifier(path: list[str], state: St) -> None:
        modified.append(path)
        state.log.append("modified")

    assert await r.invoke("", checkpoint_id="k", state_modifier=modifier) == "1"
    assert modified == [[]]


async def test_resuming_the_graph_interrupt_with_data_replaces_state(anyio_backend: Any) -> None:
    async def show(x: str) -> str:
        async with process_state(St) as st:
            return x + "|".join(st.log)

    g = line(("a", appender("a")), ("show", show), state=St)
    store = InMemoryCheckPointStore()
    r = g.compile(interrupt_before=["show"], checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke(">", checkpoint_id="k")
    own = info.value.info.interrupt_contexts[0].id
    assert await r.invoke("", checkpoint_id="k", resume={own: St(log=["replaced"])}) == ">areplaced"


async def test_sub_graph_interrupt_and_parallel_interrupts(anyio_backend: Any) -> None:
    async def ask(x: str) -> str:
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt(f"ask {x}")
        return f"{x}:{ctx.data}"

    inner = line(("ask", ask))
    outer = Graph[str, dict[str, Any]]()
    outer.add_graph_node("sub", inner, output_key="sub")
    outer.add_lambda_node("other", ask, output_key="other")
    outer.add_edge(START, "sub")
    outer.add_edge(START, "other")
    outer.add_edge("sub", END)
    outer.add_edge("other", END)
    store = InMemoryCheckPointStore()
    r = outer.compile(name="root", checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke("q", checkpoint_id="k")
    ii = info.value.info
    assert sorted(ii.rerun_nodes) == ["other", "sub"]
    assert ii.sub_graphs["sub"].rerun_nodes == ["ask"]
    addresses = sorted(c.address for c in ii.interrupt_contexts)
    assert addresses == ["runnable:root;node:other", "runnable:root;node:sub;node:ask"]
    ids = {c.address: c.id for c in ii.interrupt_contexts}
    # resume only the sub-graph's interrupt: the other one stays pending (it interrupts again)
    with pytest.raises(GraphInterrupt) as again:
        await r.invoke("", checkpoint_id="k", resume={ids["runnable:root;node:sub;node:ask"]: "A"})
    left = again.value.info.interrupt_contexts
    assert [c.address for c in left] == ["runnable:root;node:other"]
    assert await r.invoke("", checkpoint_id="k", resume={left[0].id: "B"}) == {"sub": ":A", "other": ":B"}


async def test_checkpoint_errors(anyio_backend: Any) -> None:
    r = abc_graph().compile(interrupt_before=["b"])
    with pytest.raises(GraphRunError, match="receive checkpoint id but have not set checkpoint store"):
        await r.invoke("", checkpoint_id="x")
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke(">")  # no checkpoint id: interrupts, nothing saved
    assert info.value.checkpoint_id is None
    store = InMemoryCheckPointStore()
    r1 = abc_graph().compile(interrupt_before=["b"], checkpoint_store=store)
    with pytest.raises(GraphInterrupt):
        await r1.invoke(">", checkpoint_id="k")
    data = await store.get("k")
    assert data is not None
    await store.set("k", data.replace(b"a", b"A", 1) if b"a" in data else data + b"x")
    with pytest.raises(CheckpointError):
        await r1.invoke("", checkpoint_id="k")
    # a checkpoint written by another graph is rejected
    await store.set("k", data)
    other = line(("z", appender("z")))
    r2 = other.compile(checkpoint_store=store)
    with pytest.raises(CheckpointError):
        await r2.invoke("", checkpoint_id="k")
    # force_new_run ignores the stored checkpoint and writes a fresh one
    with pytest.raises(GraphInterrupt):
        await r1.invoke("<", checkpoint_id="k", force_new_run=True)
    assert await r1.invoke("", checkpoint_id="k") == "<abc"


async def test_stream_lambda_interrupt_in_streaming_run(anyio_backend: Any) -> None:
    async def gen(x: str) -> AsyncIterator[str]:
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt("wait")
        yield x
        yield str(ctx.data)

    g = line(("gen", gen), ("after", lambda x: x + "!"))
    store = InMemoryCheckPointStore()
    r = g.compile(checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke("in", checkpoint_id="k")
    cid = info.value.info.interrupt_contexts[0].id
    assert await r.invoke("", checkpoint_id="k", resume={cid: 7}) == "7!"


async def test_tools_node_interrupts_resume_one_by_one_and_never_rerun_finished_tools(anyio_backend: Any) -> None:
    from compose.schema import FunctionCall, Message, ToolCall, assistant_message
    from compose.tools import tool
    from compose.tools.node import ToolsNode

    runs: list[str] = []

    @tool
    async def lookup(q: str) -> str:
        runs.append(f"lookup:{q}")
        return f"found {q}"

    @tool
    async def approve(action: str) -> str:
        ctx = get_resume_context()
        runs.append(f"approve:{action}:{ctx.is_target}")
        if not ctx.is_target:
            raise interrupt({"approve": action})
        return f"{action}: {ctx.data}"

    def call(name: str, args: str, cid: str) -> ToolCall:
        return ToolCall(id=cid, function=FunctionCall(name=name, arguments=args))

    msg = assistant_message(
        "",
        [
            call("lookup", '{"q": "x"}', "c1"),
            call("approve", '{"action": "pay"}', "c2"),
            call("approve", '{"action": "ship"}', "c3"),
        ],
    )
    g = Graph[Message, list[Message]]()
    g.add_tools_node("tools", ToolsNode([lookup, approve]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    store = InMemoryCheckPointStore()
    r = g.compile(name="G", checkpoint_store=store)
    for paradigm in ("invoke", "stream"):
        runs.clear()
        run = r.invoke if paradigm == "invoke" else r.stream
        with pytest.raises(GraphInterrupt) as info:
            await run(msg, checkpoint_id=paradigm)
        ctxs = {c.address: c for c in info.value.info.interrupt_contexts}
        assert sorted(ctxs) == ["runnable:G;node:tools;tool:approve:c2", "runnable:G;node:tools;tool:approve:c3"]
        parent = ctxs["runnable:G;node:tools;tool:approve:c2"].parent
        assert parent is not None and parent.address == "runnable:G;node:tools" and not parent.is_root_cause
        # approve the first only: the second interrupts again; lookup never runs twice
        with pytest.raises(GraphInterrupt) as again:
            await run(None, checkpoint_id=paradigm, resume={ctxs["runnable:G;node:tools;tool:approve:c2"].id: "ok"})
        (left,) = again.value.info.interrupt_contexts
        assert left.address == "runnable:G;node:tools;tool:approve:c3"
        out = await run(None, checkpoint_id=paradigm, resume={left.id: "no"})
        messages = out if paradigm == "invoke" else await concat(out)
        assert [m.content for m in messages] == ["found x", "pay: ok", "ship: no"]
        assert [m.tool_call_id for m in messages] == ["c1", "c2", "c3"]
        assert runs.count("lookup:x") == 1
        assert runs[-1] == "approve:ship:True" and "approve:pay:True" in runs


async def test_external_interrupt_without_and_with_grace_period(anyio_backend: Any) -> None:
    import anyio

    from compose.interrupt import ExternalInterrupt

    release = anyio.Event()
    started = anyio.Event()
    hang_first = [True]

    async def slow(x: str) -> str:
        started.set()
        if hang_first[0]:
            await release.wait()
        return x + "s"

    g = line(("slow", slow), ("next", lambda x: x + "n"))
    store = InMemoryCheckPointStore()
    r = g.compile(name="G", checkpoint_store=store)

    # no grace period: the running node finishes, then the run pauses after it
    stop = ExternalInterrupt()
    caught: list[GraphInterrupt] = []

    async def run(handle: ExternalInterrupt, cid: str) -> None:
        try:
            await r.invoke(">", checkpoint_id=cid, external_interrupt=handle)
        except GraphInterrupt as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, stop, "e1")
        await started.wait()
        stop.interrupt()
        release.set()
    assert caught[0].info.after_nodes == ["slow"] and caught[0].info.rerun_nodes == []
    assert await r.invoke("", checkpoint_id="e1") == ">sn"

    # grace period 0: the running node is cancelled and re-runs with its original input on resume
    caught.clear()
    started = anyio.Event()
    release = anyio.Event()
    stop = ExternalInterrupt()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, stop, "e2")
        await started.wait()
        stop.interrupt(grace_period=0)
    assert caught[0].info.rerun_nodes == ["slow"]
    hang_first[0] = False
    assert await r.invoke("", checkpoint_id="e2") == ">sn"


async def test_concurrent_resumes_of_one_checkpoint_exactly_one_wins(anyio_backend: Any) -> None:
    import anyio

    gate = anyio.Event()
    entered = anyio.Event()

    async def slow(x: str) -> str:
        entered.set()
        await gate.wait()
        return x + "!"

    g = line(("a", lambda x: x + "a"), ("slow", slow))
    store = InMemoryCheckPointStore()
    r = g.compile(interrupt_before=["slow"], checkpoint_store=store)
    with pytest.raises(GraphInterrupt):
        await r.invoke(">", checkpoint_id="k")
    outcomes: list[str] = []

    async def resume() -> None:
        try:
            outcomes.append(await r.invoke("", checkpoint_id="k"))
        except CheckpointError as exc:
            outcomes.append(f"refused:{exc.reason}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(resume)
        await entered.wait()
        await resume()  # the first one holds the claim
        gate.set()
    assert sorted(outcomes) == [">a!", "refused:claimed"]
    assert await store.get("k") is None


async def test_a_pause_that_cannot_be_saved_names_what_cannot(anyio_backend: Any) -> None:
    @dataclass
    class Holds:
        handle: Any = None

    def grab(x: str, st: Holds) -> str:
        st.handle = object()  # a live handle: no JSON form
        return x

    g = Graph[str, str](state=Holds)
    g.add_lambda_node("a", lambda x: x, pre_handler=grab)
    g.add_lambda_node("b", lambda x: x)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    store = InMemoryCheckPointStore()
    r = g.compile(name="G", interrupt_before=["b"], checkpoint_store=store)
    with pytest.raises(CheckpointError, match="cannot save the state of graph 'G' in a checkpoint") as info:
        await r.invoke("x", checkpoint_id="k")
    assert info.value.reason == "encode"
    assert await store.list() == []

    async def opaque(x: str) -> Any:
        return object()

    g2 = Graph[str, Any]()
    g2.add_lambda_node("a", opaque)
    g2.add_lambda_node("b", lambda x: x)
    g2.add_edge(START, "a")
    g2.add_edge("a", "b")
    g2.add_edge("b", END)
    r2 = g2.compile(interrupt_after=["a"], checkpoint_store=store)
    with pytest.raises(CheckpointError, match="cannot save the output of node 'a' in a checkpoint"):
        await r2.invoke("x", checkpoint_id="k2")


async def test_a_stale_claim_is_taken_over_only_when_asked(anyio_backend: Any) -> None:
    g = line(("a", lambda x: x + "a"), ("b", lambda x: x + "b"))
    store = InMemoryCheckPointStore()
    r = g.compile(interrupt_before=["b"], checkpoint_store=store)
    with pytest.raises(GraphInterrupt):
        await r.invoke(">", checkpoint_id="k")
    assert await store.claim("k", "a-worker-that-died")
    with pytest.raises(CheckpointError) as info:
        await r.invoke("", checkpoint_id="k")
    assert info.value.reason == "claimed"
    with pytest.raises(CheckpointError):
        await r.invoke("", checkpoint_id="k", claim_stale_after=3600)  # the claim is younger than that
    assert await r.invoke("", checkpoint_id="k", claim_stale_after=0) == ">ab"
    assert await store.get("k") is None


async def test_failed_resume_leaves_the_checkpoint_resumable(anyio_backend: Any) -> None:
    fail = [True]

    async def flaky(x: str) -> str:
        if fail[0]:
            raise RuntimeError("down")
        return x + "ok"

    g = line(("a", lambda x: x + "a"), ("flaky", flaky))
    store = InMemoryCheckPointStore()
    r = g.compile(interrupt_before=["flaky"], checkpoint_store=store)
    with pytest.raises(GraphInterrupt):
        await r.invoke(">", checkpoint_id="k")
    from compose.errors import NodeRunError

    with pytest.raises(NodeRunError):
        await r.invoke("", checkpoint_id="k")
    fail[0] = False
    assert await r.invoke("", checkpoint_id="k") == ">aok"


async def test_external_interrupt_in_dag_mode_with_and_without_grace_period(anyio_backend: Any) -> None:
    import anyio

    from compose.interrupt import ExternalInterrupt

    started = anyio.Event()
    release = anyio.Event()

    async def slow(x: str) -> str:
        started.set()
        await release.wait()
        return x + "s"

    g = line(("slow", slow), ("next", lambda x: x + "n"))
    store = InMemoryCheckPointStore()
    r = g.compile(trigger_mode="all_predecessor", checkpoint_store=store)
    stop = ExternalInterrupt()
    caught: list[GraphInterrupt] = []

    async def run(cid: str) -> None:
        try:
            await r.invoke(">", checkpoint_id=cid, external_interrupt=stop)
        except GraphInterrupt as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "d1")
        await started.wait()
        stop.interrupt(grace_period=10)  # finishes within the grace period
        release.set()
    assert caught[0].info.after_nodes == ["slow"] and caught[0].info.rerun_nodes == []
    assert await r.invoke("", checkpoint_id="d1") == ">sn"

    # grace period over: the running node is cancelled and re-runs with its original input on resume
    caught.clear()
    started, release, stop = anyio.Event(), anyio.Event(), ExternalInterrupt()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "d2")
        await started.wait()
        stop.interrupt(grace_period=0.01)
    assert caught[0].info.rerun_nodes == ["slow"] and caught[0].info.after_nodes == []
    release.set()
    assert await r.invoke("", checkpoint_id="d2") == ">sn"

    # streaming: the kept input is a copy of the node's input stream
    caught.clear()
    started, release, stop = anyio.Event(), anyio.Event(), ExternalInterrupt()

    async def run_stream() -> None:
        try:
            await concat(await r.stream(">", checkpoint_id="d3", external_interrupt=stop))
        except GraphInterrupt as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_stream)
        await started.wait()
        stop.interrupt(grace_period=0)
    assert caught[0].info.rerun_nodes == ["slow"]
    release.set()
    assert await concat(await r.stream("", checkpoint_id="d3")) == ">sn"


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_cancelling_a_run_with_an_external_interrupt_closes_the_kept_inputs(
    anyio_backend: Any, mode: str
) -> None:
    """A run given an external interrupt keeps a copy of each running node's input stream; cancelled from outside
    (no interrupt), the run closes them all (the autouse leak check fails otherwise)."""
    import anyio

    from compose.interrupt import ExternalInterrupt

    started = anyio.Event()

    async def slow(x: str) -> str:
        started.set()
        await anyio.sleep_forever()
        return x

    async def fast(x: str) -> str:
        return x + "f"

    g = Graph[str, dict[str, Any]]()
    g.add_lambda_node("slow", slow, output_key="s")
    g.add_lambda_node("fast", fast, output_key="f")
    for s_, e in [(START, "slow"), (START, "fast"), ("slow", END), ("fast", END)]:
        g.add_edge(s_, e)
    r = g.compile(trigger_mode=mode)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await concat(await r.stream(">", external_interrupt=ExternalInterrupt()))

            tg.start_soon(run)
            await started.wait()
            scope.cancel()
    assert scope.cancelled_caught


async def test_pre_handler_interrupt_reruns_the_node_with_zero_input(anyio_backend: Any) -> None:
    # Eino's TestPreHandlerInterrupt: the re-run node gets the zero value of its input, not the original
    async def pre(x: str, st: St) -> str:
        if not get_resume_context().is_target:
            raise interrupt("check input")
        return x + "1"

    g = Graph[str, str](state=St)
    g.add_lambda_node("a", lambda x: x, pre_handler=pre)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    store = InMemoryCheckPointStore()
    r = g.compile(checkpoint_store=store)
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke("input", checkpoint_id="p")
    assert info.value.info.rerun_nodes == ["a"]
    cid = info.value.info.interrupt_contexts[0].id
    assert await r.invoke("", checkpoint_id="p", resume={cid: None}) == "1"


@pytest.mark.parametrize("streaming", [False, True])
async def test_dag_interrupt_after_a_node_and_before_its_successor_pauses_once(
    anyio_backend: Any, streaming: bool
) -> None:
    """Eino's ``TestSimpleCheckPoint`` (DAG mode): ``interrupt_after=["1"]`` and ``interrupt_before=["2"]``
    with 1 -> 2 pause once, reporting both; resuming with the graph's own interrupt id replaces the state,
    and 2 runs without pausing again."""

    @dataclass
    class Text:
        a: str = ""

    async def one(x: str) -> str:
        return x + "1"

    async def two(x: str) -> str:
        return x + "2"

    async def pre(x: str, st: Text) -> str:
        return x + st.a

    g = Graph[str, str](state=Text)
    g.add_lambda_node("1", one)
    g.add_lambda_node("2", two, pre_handler=pre)
    g.add_edge(START, "1")
    g.add_edge("1", "2")
    g.add_edge("2", END)
    store = InMemoryCheckPointStore()
    r = g.compile(
        name="root", trigger_mode="all_predecessor", checkpoint_store=store, interrupt_after=["1"],
        interrupt_before=["2"],
    )

    async def run(**opts: Any) -> str:
        if streaming:
            return await concat(await r.stream("start", checkpoint_id="1", **opts))
        return await r.invoke("start", checkpoint_id="1", **opts)

    with pytest.raises(GraphInterrupt) as info:
        await run()
    ii = info.value.info
    assert ii.before_nodes == ["2"] and ii.after_nodes == ["1"]
    assert ii.rerun_nodes == [] and ii.sub_graphs == {}
    assert ii.state == Text()
    (ctx,) = ii.interrupt_contexts
    assert ctx.address == "runnable:root" and ctx.info == Text() and ctx.is_root_cause
    assert await run(resume={ctx.id: Text(a="state")}) == "start1state2"


class _Connection:
    """A live handle: no JSON form."""


@dataclass
class _Session:
    user: str = "ada"
    extras: dict[str, Any] = field(default_factory=dict)
    conn: _Connection | None = None


class _PlainState:
    def __init__(self) -> None:
        self.count = 0


def _paused_graph(state: Any) -> Graph[str, str]:
    g = Graph[str, str](state=state)
    g.add_lambda_node("a", lambda x: x)
    g.add_lambda_node("b", lambda x: x)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


async def test_an_unsaveable_state_names_its_type_and_field(anyio_backend: Any) -> None:
    store = InMemoryCheckPointStore()
    cases = [
        (lambda: _Session(conn=_Connection()), "field 'conn' of _Session (_Connection) cannot be serialised"),
        (lambda: _Session(extras={"ok": [1], "db": _Connection()}), "field 'extras.db' of _Session (_Connection)"),
        (_PlainState, "its type _PlainState is not one pydantic can serialise (a plain class)"),
    ]
    for factory, message in cases:
        r = _paused_graph(factory).compile(name="G", interrupt_before=["b"], checkpoint_store=store)
        with pytest.raises(CheckpointError, match="cannot save the state of graph 'G' in a checkpoint: ") as info:
            await r.invoke("x", checkpoint_id="k")
        assert message in str(info.value) and "RunSnapshot" not in str(info.value)
        assert info.value.reason == "encode"
        assert await store.list() == []
