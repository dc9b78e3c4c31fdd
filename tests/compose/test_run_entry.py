"""What a run's entry and its supersteps must keep while they do as little as they can: the state and callback
context set while nodes run and never seen by the code that drives the run between steps, the state factory
called once per run, callbacks fired where a shortcut skips work, a value pre handler's output handed to a node
that takes a stream (eino-semantics 1.6, 1.8)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from compose.callbacks import CallbackHandler, RunInfo
from compose.errors import GraphRunError, StateError
from compose.graph import END, START, Graph
from compose.lambdas import Lambda
from compose.runnable import CheckpointedRun
from compose.state import process_state
from compose.stream import StreamReader, concat

pytestmark = pytest.mark.anyio


@dataclass
class St:
    log: list[str] = field(default_factory=list)


def _two_steps(made: list[St]) -> Any:
    def factory() -> St:
        st = St()
        made.append(st)
        return st

    async def node(x: str) -> str:
        async with process_state(St) as st:
            st.log.append(x)
        return x + "!"

    g = Graph[str, str](state=factory)
    g.add_lambda_node("a", node)
    g.add_lambda_node("b", node)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile()


async def test_a_stepped_run_sets_its_state_only_while_it_runs(anyio_backend: Any) -> None:
    """Nodes find the run's state; the caller between two supersteps does not (the context is set per step and
    reset before ``step()`` returns, never left set for the whole run); the factory runs once per run."""
    made: list[St] = []
    run = await _two_steps(made).start_run("x", streaming=False)
    assert len(made) == 1  # made when the run begins
    for _ in range(2):
        assert not await run.step()
        with pytest.raises(StateError):
            async with process_state(St):
                pass
    assert await run.step()
    assert run.result == "x!!"
    assert made[0].log == ["x", "x!"] and len(made) == 1


async def test_a_run_begun_inside_a_node_keeps_its_own_state(anyio_backend: Any) -> None:
    """A run started and stepped inside another run's node: its nodes see its state (the inner one shadows the
    outer), and the outer node sees its own again between the inner steps."""
    inner_made: list[St] = []
    inner = _two_steps(inner_made)

    @dataclass
    class Outer:
        n: int = 0

    async def outer_node(x: str) -> str:
        run = await inner.start_run(x, streaming=False)
        while not await run.step():
            async with process_state(Outer) as o:
                o.n += 1
            with pytest.raises(StateError):
                async with process_state(St):
                    pass
        async with process_state(Outer) as o:
            return f"{run.result}{o.n}"

    g = Graph[str, str](state=Outer)
    g.add_lambda_node("o", outer_node)
    g.add_edge(START, "o")
    g.add_edge("o", END)
    assert await g.compile().invoke("y") == "y!!2"
    assert inner_made[0].log == ["y", "y!"]


async def test_a_failing_state_factory_fails_the_begin_with_callbacks(anyio_backend: Any) -> None:
    seen: list[str] = []

    class Rec(CallbackHandler):
        async def on_start(self, run_info: RunInfo, input: Any) -> None:
            seen.append(f"start {run_info.name}")

        async def on_error(self, run_info: RunInfo, error: BaseException) -> None:
            seen.append(f"error {type(error).__name__}")

    def factory() -> St:
        raise ValueError("no state")

    g = Graph[str, str](state=factory)
    g.add_lambda_node("a", lambda x: x)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    r = g.compile(name="g")
    with pytest.raises(GraphRunError, match="state factory of graph 'g' failed: ValueError: no state"):
        await r.start_run("x", streaming=False, callbacks=[Rec()])
    assert seen == ["start g", "error GraphRunError"]
    with pytest.raises(GraphRunError, match="state factory"):
        await r.start_run("x", streaming=False)  # no handler: the same error, nothing fired


async def test_a_value_pre_handler_feeds_a_stream_node_its_value(anyio_backend: Any) -> None:
    """In a streaming run, a node that implements ``stream`` only gets its value pre handler's output as the
    value (the same chunks as the derived transform); a callback on the node sees what the component
    implements (``stream``): the value, as it did when a one-chunk stream was made and concatenated back."""
    calls: list[Any] = []

    async def words(x: str) -> AsyncIterator[str]:
        calls.append(x)
        for w in x.split():
            yield w

    async def pre(x: str, st: St) -> str:
        st.log.append(x)
        return x.upper()

    g = Graph[str, str](state=St)
    g.add_lambda_node("w", Lambda(stream=words, input_type=str, output_type=str), pre_handler=pre)
    g.add_edge(START, "w")
    g.add_edge("w", END)
    r = g.compile()
    reader = await r.stream("a b")
    assert [c async for c in reader] == ["A", "B"]
    assert calls == ["A B"]

    inputs: list[str] = []

    class Rec(CallbackHandler):
        async def on_start(self, run_info: RunInfo, input: Any) -> None:
            inputs.append(f"{run_info.name} value {input!r}")

        async def on_start_with_stream_input(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
            inputs.append(f"{run_info.name} stream {await concat(reader)!r}")

    reader = await r.stream("c d", callbacks=[Rec()], designate=["w"])
    assert await concat(reader) == "CD"
    assert inputs == ["w value 'C D'"]


async def test_a_run_with_a_checkpoint_id_is_driven_through_its_checkpoint(anyio_backend: Any) -> None:
    """``start_run`` gives the graph run itself when there is nothing to checkpoint, a ``CheckpointedRun``
    (which saves the pause) when there is a checkpoint id; both are driven the same way."""
    from compose.checkpoint import InMemoryCheckPointStore

    g = Graph[str, str]()
    g.add_lambda_node("a", lambda x: x + "a")
    g.add_edge(START, "a")
    g.add_edge("a", END)
    plain = await g.compile().start_run("x", streaming=False)
    assert not isinstance(plain, CheckpointedRun)
    assert await plain.step(to_end=True) and plain.result == "xa"
    store = InMemoryCheckPointStore()
    r = g.compile(checkpoint_store=store, interrupt_before=["a"])
    run = await r.start_run("x", streaming=False, checkpoint_id="c1")
    assert isinstance(run, CheckpointedRun)
    with pytest.raises(Exception) as caught:
        await run.step(to_end=True)
    assert type(caught.value).__name__ == "GraphInterrupt" and await store.get("c1") is not None
    await run.aclose()
