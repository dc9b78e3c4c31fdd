"""The one driver of a run, ``RunHandle.step()``: a Pregel run driven ``until`` a condition awaits each step's
node in ``step``'s own frame (``pregel_step``'s split hot path), as the agent runner drives its graph.

The same results and errors as ``invoke``, steps counted and limited the same, an interrupt after a node raised
by its step, a node's output closed when the run is abandoned before it is routed, and no frame of the
superstep's under a node while it runs.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from compose._engine.scheduler import GraphRun
from compose._engine.tables import NOTHING
from compose.errors import GraphInterrupt, MaxStepsExceededError, NodeRunError
from compose.graph import END, START, Graph
from compose.interrupt import interrupt
from compose.stream import StreamReader, concat
from tests.compose.helpers import drive, line, recording
from tests.compose.test_graph_run import loop_graph
from tests.compose.test_graph_state_callbacks import St

pytestmark = pytest.mark.anyio


def appender(tag: str) -> Any:
    async def f(x: str) -> str:
        return x + tag

    return f


async def test_results_as_invoke(anyio_backend: Any) -> None:
    r = line(*((k, appender(k)) for k in "abc")).compile()
    assert await drive(r, ">") == await r.invoke(">") == ">abc"
    loop = loop_graph(5).compile()
    assert await drive(loop, 0) == await loop.invoke(0) == 5
    stream = await drive(r, StreamReader.from_iterable([">", "<"]), streaming=True)
    assert await concat(stream) == "><abc"


async def test_the_step_limit_counts_split_steps(anyio_backend: Any) -> None:
    loop = loop_graph(100).compile()
    with pytest.raises(MaxStepsExceededError) as driven:
        await drive(loop, 0, max_run_steps=4)
    with pytest.raises(MaxStepsExceededError) as invoked:
        await loop.invoke(0, max_run_steps=4)
    assert str(driven.value) == str(invoked.value)
    assert await drive(loop, 96, max_run_steps=4) == 100  # four steps fit


async def test_a_failing_node_is_named(anyio_backend: Any) -> None:
    async def boom(x: str) -> str:
        raise ValueError(f"bad {x}")

    r = line(("a", appender("a")), ("b", boom)).compile()
    with pytest.raises(NodeRunError) as driven:
        await drive(r, ">")
    with pytest.raises(NodeRunError) as invoked:
        await r.invoke(">")
    assert str(driven.value) == str(invoked.value)
    assert driven.value.node_path == ["b"] and isinstance(driven.value.__cause__, ValueError)


async def test_a_node_that_interrupts_in_its_split_call_pauses_the_run(anyio_backend: Any) -> None:
    async def review(x: str) -> str:
        raise interrupt({"question": "ok?"})

    r = line(("a", appender("a")), ("review", review)).compile(name="G")
    with pytest.raises(GraphInterrupt) as driven:
        await drive(r, ">")
    with pytest.raises(GraphInterrupt) as invoked:
        await r.invoke(">")
    for info in (driven.value.info, invoked.value.info):
        assert info.rerun_nodes == ["review"] and info.rerun_nodes_extra == {"review": {"question": "ok?"}}
        (ctx,) = info.interrupt_contexts
        assert ctx.address == "runnable:G;node:review" and ctx.is_root_cause


async def test_a_failing_pre_handler_is_named_with_its_phase(anyio_backend: Any) -> None:
    def bad_pre(x: str, st: St) -> str:
        raise ValueError("no")

    g = Graph[str, str](state=St)
    g.add_lambda_node("a", appender("a"), pre_handler=bad_pre)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(NodeRunError, match="node pre handler failed: ValueError: no") as driven:
        await drive(g.compile(), ">")
    assert driven.value.node_path == ["a"] and driven.value.phase == "pre handler"


async def test_an_interrupt_after_a_node_is_raised_by_its_step(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(*((k, recording(ran, k)) for k in "abc")).compile(interrupt_after=["a"])
    run = await r.start_run(">", streaming=False)
    with pytest.raises(GraphInterrupt) as info:
        await run.step()
    assert info.value.info.after_nodes == ["a"] and ran == ["a"]
    with pytest.raises(GraphInterrupt) as invoked:
        await r.invoke(">")
    assert invoked.value.info.after_nodes == ["a"]


async def test_an_output_not_yet_routed_is_closed_when_the_run_is_abandoned(anyio_backend: Any) -> None:
    async def words(x: str) -> Any:
        for w in (x, "b", "c"):
            yield w

    r = line(("a", words), ("z", appender("z"))).compile()
    run = await r.start_run(StreamReader.from_iterable([">"]), streaming=True)
    assert isinstance(run, GraphRun)
    # node a ran; with its ``until`` met at once, the step ends (the output pending) at the next ``step``
    assert not await run.step(until=lambda: True)
    out = run.called
    assert isinstance(out, StreamReader) and "open" in repr(out)
    await run.aclose()
    assert run.calling is None and run.called is None and not run.pending
    assert "closed" in repr(out)


async def test_a_node_runs_under_the_drivers_frame_alone(anyio_backend: Any) -> None:
    stacks: list[list[str]] = []

    async def look(x: str) -> str:
        frame = sys._getframe()
        names = []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back  # type: ignore[assignment]
        stacks.append(names)
        return x

    r = line(("a", look), ("b", appender("b"))).compile()
    assert await drive(r, ">") == ">b"
    (stack,) = stacks
    assert "step" in stack and "pregel_step" not in stack
    handle = await r.start_run(">", streaming=False)
    while not await handle.step():  # one superstep per call: the node runs inside the superstep
        pass
    assert "pregel_step" in stacks[1]


async def test_a_cancelled_node_call_ends_the_run(anyio_backend: Any) -> None:
    started = anyio.Event()

    async def hang(x: str) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    r = line(("a", hang), ("b", appender("b"))).compile()
    run = await r.start_run(">", streaming=False)
    assert isinstance(run, GraphRun)
    reached: list[str] = []

    async def driver() -> None:
        await run.step(until=lambda: True)
        reached.append("after the call")

    async with anyio.create_task_group() as tg:
        tg.start_soon(driver)
        await started.wait()
        tg.cancel_scope.cancel()
    assert reached == [] and run.calling is None and run.calling_x is None
    assert not run.pending and not run.inbox and run.result is NOTHING
