"""Graph engine overhead, side by side with LangGraph's StateGraph and a plain hand-written baseline.

Shapes: a 100-node linear chain, a 2-node loop run 1,000 times, a 1-to-100 fan-out and fan-in, and compile time
of a 100-node graph. The workflow rows run a 100-node ``Workflow`` chain whose every edge maps one field
(``map_fields("x", "x")`` of a dict) beside the same chain as a DAG ``Graph`` passing the dicts whole: the
difference is the field-mapping cost per edge. Every node does trivial work (append/increment), so the numbers
are scheduler overhead.
"loop, stepped" drives the same loop one superstep at a time (``start_run``/``step``, as the agent runner does):
the general path, without the fused loop ``invoke`` uses for stretches of one-node steps over plain nodes.

History (``compile(keep_history=True)``) is off by default: ``--opcodes`` counts the Python bytecodes one run
executes (a deterministic measure of the hot path, unlike time on a shared machine), to compare two checkouts
(``PYTHONPATH=/work/main python benchmarks/bench_graph.py --opcodes``); the last rows time the chain with history
kept on SQLite (one snapshot written per step) against the same chain without.

    python benchmarks/bench_graph.py            # pyeino, LangGraph (if installed) and the baseline
    python benchmarks/bench_graph.py --quick    # fewer repetitions
    python benchmarks/bench_graph.py --opcodes  # bytecodes per run of each shape, no timing
"""

from __future__ import annotations

import argparse
import operator
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypedDict

import anyio

from compose import END, START, Graph, GraphBranch, Workflow, concat, map_fields

N_CHAIN = 100
N_LOOP = 1000
N_FAN = 100


async def timeit(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """Median seconds per call."""
    await fn()  # warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


# ---------------------------------------------------------------------------------------------------------------
# pyeino


def pyeino_chain() -> Any:
    async def inc(x: int) -> int:
        return x + 1

    g = Graph[int, int]()
    prev = START
    for i in range(N_CHAIN):
        g.add_lambda_node(f"n{i}", inc)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    return g.compile()


def pyeino_loop() -> Any:
    async def inc(x: int) -> int:
        return x + 1

    g = Graph[int, int]()
    g.add_lambda_node("a", inc)
    g.add_lambda_node("b", inc)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_branch("b", GraphBranch(lambda x: END if x >= 2 * N_LOOP else "a", {"a", END}))
    return g.compile(max_run_steps=10 * N_LOOP)


def pyeino_fan() -> Any:
    def leaf(i: int) -> Callable[[int], Awaitable[int]]:
        async def f(x: int) -> int:
            return x + i

        return f

    async def total(d: dict[str, Any]) -> int:
        return sum(d.values())

    g = Graph[int, int]()
    g.add_passthrough_node("fan")
    g.add_edge(START, "fan")
    g.add_lambda_node("join", total)
    for i in range(N_FAN):
        g.add_lambda_node(f"l{i}", leaf(i), output_key=f"l{i}")
        g.add_edge("fan", f"l{i}")
        g.add_edge(f"l{i}", "join")
    g.add_edge("join", END)
    return g.compile()


async def inc_x(d: dict[str, int]) -> dict[str, int]:
    return {"x": d["x"] + 1}


def pyeino_dag_chain() -> Any:
    """The workflow's chain as a DAG graph: the same dict nodes, no field mapping."""
    g = Graph[dict[str, int], dict[str, int]]()
    prev = START
    for i in range(N_CHAIN):
        g.add_lambda_node(f"n{i}", inc_x)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    return g.compile(trigger_mode="all_predecessor")


def pyeino_workflow() -> Any:
    wf = Workflow[dict[str, int], dict[str, int]]()
    prev = START
    for i in range(N_CHAIN):
        wf.add_lambda_node(f"n{i}", inc_x).add_input(prev, map_fields("x", "x"))
        prev = f"n{i}"
    wf.end().add_input(prev, map_fields("x", "x"))
    return wf.compile()


async def plain_dict_chain(d: dict[str, int]) -> dict[str, int]:
    for _ in range(N_CHAIN):
        d = await inc_x(d)
    return d


def pyeino_compile() -> Any:
    return pyeino_chain()


# ---------------------------------------------------------------------------------------------------------------
# LangGraph


class ChainState(TypedDict):
    x: int


class FanState(TypedDict):
    x: int
    parts: Annotated[list[int], operator.add]


def langgraph_available() -> bool:
    try:
        import langgraph.graph  # noqa: F401
    except ImportError:
        return False
    return True


def lg_chain() -> Any:
    from langgraph.graph import END as LG_END
    from langgraph.graph import START as LG_START
    from langgraph.graph import StateGraph

    async def inc(s: ChainState) -> dict[str, int]:
        return {"x": s["x"] + 1}

    g = StateGraph(ChainState)
    prev = LG_START
    for i in range(N_CHAIN):
        g.add_node(f"n{i}", inc)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, LG_END)
    return g.compile()


def lg_loop() -> Any:
    from langgraph.graph import END as LG_END
    from langgraph.graph import START as LG_START
    from langgraph.graph import StateGraph

    async def inc(s: ChainState) -> dict[str, int]:
        return {"x": s["x"] + 1}

    g = StateGraph(ChainState)
    g.add_node("a", inc)
    g.add_node("b", inc)
    g.add_edge(LG_START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: LG_END if s["x"] >= 2 * N_LOOP else "a")
    return g.compile()


def lg_fan() -> Any:
    from langgraph.graph import END as LG_END
    from langgraph.graph import START as LG_START
    from langgraph.graph import StateGraph

    def leaf(i: int) -> Callable[[FanState], Awaitable[dict[str, list[int]]]]:
        async def f(s: FanState) -> dict[str, list[int]]:
            return {"parts": [s["x"] + i]}

        return f

    async def fan(s: FanState) -> dict[str, Any]:
        return {}

    async def join(s: FanState) -> dict[str, int]:
        return {"x": sum(s["parts"])}

    g = StateGraph(FanState)
    g.add_node("fan", fan)
    g.add_node("join", join)
    g.add_edge(LG_START, "fan")
    for i in range(N_FAN):
        g.add_node(f"l{i}", leaf(i))
        g.add_edge("fan", f"l{i}")
        g.add_edge(f"l{i}", "join")
    g.add_edge("join", LG_END)
    return g.compile()


# ---------------------------------------------------------------------------------------------------------------
# plain baseline: the same work as direct awaits


async def plain_chain(x: int) -> int:
    async def inc(v: int) -> int:
        return v + 1

    fns = [inc] * N_CHAIN
    for f in fns:
        x = await f(x)
    return x


async def plain_loop(x: int) -> int:
    async def inc(v: int) -> int:
        return v + 1

    while True:
        x = await inc(x)
        x = await inc(x)
        if x >= 2 * N_LOOP:
            return x


async def plain_fan(x: int) -> int:
    results: dict[str, int] = {}

    async def leaf(i: int) -> None:
        results[f"l{i}"] = x + i

    async with anyio.create_task_group() as tg:
        for i in range(N_FAN):
            tg.start_soon(leaf, i)
    return sum(results.values())


async def _read(opening: Awaitable[Any]) -> Any:
    return await concat(await opening)


async def _parts(opening: Awaitable[Any]) -> int:
    """Read a ``stream_mode`` run's parts: the watched run (a task of its own, a part per node)."""
    n = 0
    async with await opening as reader:
        async for _ in reader:
            n += 1
    return n


async def _lg_stream(graph: Any) -> None:
    async for _ in graph.astream({"x": 0}, stream_mode="updates"):
        pass


async def stepped(runnable: Any, x: Any) -> Any:
    """Drive a run one superstep at a time (as the agent runner does): the general, unfused path."""
    handle = await runnable.start_run(x, streaming=False)
    while not await handle.step():
        pass
    return handle.result


async def opcodes(fn: Callable[[], Awaitable[Any]]) -> int:
    """The number of Python bytecodes one call of ``fn`` executes (after a warm-up call)."""
    await fn()
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        await fn()
    finally:
        sys.settrace(None)
    return count


async def opcode_rows() -> None:
    chain, loop, dag = pyeino_chain(), pyeino_loop(), pyeino_dag_chain()
    shapes: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("chain-100", lambda: chain.invoke(0)),
        ("loop-2x1000", lambda: loop.invoke(0)),
        ("chain, stream", lambda: _read(chain.stream(0))),
        ("loop, stepped", lambda: stepped(loop, 0)),
        ("dag dict-100", lambda: dag.invoke({"x": 0})),
        ("dag, stream", lambda: _read(dag.stream({"x": 0}))),
    ]
    for name, fn in shapes:
        print(f"{name:<14}{await opcodes(fn):>12} bytecodes per run")


async def history_rows(repeat: int) -> None:
    """The chain with its history kept on SQLite (a snapshot per step) against the same chain without."""
    import tempfile
    from pathlib import Path

    from compose.checkpoint import SQLiteCheckPointStore

    async def inc(x: int) -> int:
        return x + 1

    def chain(store: Any, keep: bool) -> Any:
        g = Graph[int, int]()
        prev = START
        for i in range(N_CHAIN):
            g.add_lambda_node(f"n{i}", inc)
            g.add_edge(prev, f"n{i}")
            prev = f"n{i}"
        g.add_edge(prev, END)
        return g.compile(checkpoint_store=store, keep_history=keep)

    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteCheckPointStore(Path(tmp) / "history.db") as store:
            plain, kept = chain(store, False), chain(store, True)
            runs = iter(range(1_000_000))
            t_plain = await timeit(lambda: plain.invoke(0, checkpoint_id="plain"), repeat)
            t_kept = await timeit(lambda: kept.invoke(0, checkpoint_id=f"run-{next(runs)}"), max(3, repeat // 4))
    steps = N_CHAIN + 1  # step 0 and one per node (the last is the final snapshot)
    print(
        f"history on SQLite, chain-100: {t_plain * 1e3:.2f} ms without, {t_kept * 1e3:.2f} ms with "
        f"({(t_kept - t_plain) / steps * 1e6:.0f} us per step recorded)"
    )


async def main(quick: bool, backend: str, count_opcodes: bool = False) -> None:
    if count_opcodes:
        await opcode_rows()
        return
    repeat = 5 if quick else 20
    rows: list[tuple[str, int, float, float | None, float]] = []

    chain, loop, fan = pyeino_chain(), pyeino_loop(), pyeino_fan()
    assert await chain.invoke(0) == N_CHAIN
    assert await loop.invoke(0) == 2 * N_LOOP
    assert await fan.invoke(0) == sum(range(N_FAN))
    dag, wf = pyeino_dag_chain(), pyeino_workflow()
    assert await dag.invoke({"x": 0}) == await wf.invoke({"x": 0}) == {"x": N_CHAIN}
    assert await _read(wf.stream({"x": 0})) == {"x": N_CHAIN}

    lg = langgraph_available() and backend == "asyncio"  # LangGraph runs on asyncio only
    if lg:
        lchain, lloop, lfan = lg_chain(), lg_loop(), lg_fan()
        assert (await lchain.ainvoke({"x": 0}))["x"] == N_CHAIN
        assert (await lloop.ainvoke({"x": 0}, {"recursion_limit": 10 * N_LOOP}))["x"] == 2 * N_LOOP
        assert (await lfan.ainvoke({"x": 0, "parts": []}))["x"] == sum(range(N_FAN))

    shapes: list[tuple[str, int, Any, Any, Any]] = [
        ("chain-100", N_CHAIN, lambda: chain.invoke(0), (lambda: lchain.ainvoke({"x": 0})) if lg else None,
         lambda: plain_chain(0)),
        ("loop-2x1000", 2 * N_LOOP, lambda: loop.invoke(0),
         (lambda: lloop.ainvoke({"x": 0}, {"recursion_limit": 10 * N_LOOP})) if lg else None, lambda: plain_loop(0)),
        ("chain, stream", N_CHAIN, lambda: _read(chain.stream(0)), (lambda: _lg_stream(lchain)) if lg else None,
         lambda: plain_chain(0)),
        ("chain, updates", N_CHAIN, lambda: _parts(chain.stream(0, stream_mode="updates")),
         (lambda: _lg_stream(lchain)) if lg else None, lambda: plain_chain(0)),
        ("loop, stepped", 2 * N_LOOP, lambda: stepped(loop, 0), None, lambda: plain_loop(0)),
        ("fan-1-100-1", N_FAN + 2, lambda: fan.invoke(0),
         (lambda: lfan.ainvoke({"x": 0, "parts": []})) if lg else None, lambda: plain_fan(0)),
        ("dag dict-100", N_CHAIN, lambda: dag.invoke({"x": 0}), None, lambda: plain_dict_chain({"x": 0})),
        ("workflow-100", N_CHAIN, lambda: wf.invoke({"x": 0}), None, lambda: plain_dict_chain({"x": 0})),
        ("dag, stream", N_CHAIN, lambda: _read(dag.stream({"x": 0})), None, lambda: plain_dict_chain({"x": 0})),
        ("wf, stream", N_CHAIN, lambda: _read(wf.stream({"x": 0})), None, lambda: plain_dict_chain({"x": 0})),
        ("dag, updates", N_CHAIN, lambda: _parts(dag.stream({"x": 0}, stream_mode="updates")), None,
         lambda: plain_dict_chain({"x": 0})),
    ]
    for name, nodes, ours, theirs, plain in shapes:
        t_ours = await timeit(ours, repeat)
        t_lg = await timeit(theirs, max(3, repeat // 4)) if theirs else None
        t_plain = await timeit(plain, repeat)
        rows.append((name, nodes, t_ours, t_lg, t_plain))

    print(f"{'shape':<14}{'node runs':>10}{'pyeino us/node':>16}{'LangGraph us/node':>19}{'plain us/node':>15}"
          f"{'LG/pyeino':>11}{'pyeino/plain':>14}")
    for name, nodes, t_ours, t_lg, t_plain in rows:
        per = t_ours / nodes * 1e6
        per_lg = t_lg / nodes * 1e6 if t_lg else float("nan")
        per_plain = t_plain / nodes * 1e6
        print(f"{name:<14}{nodes:>10}{per:>16.2f}{per_lg:>19.2f}{per_plain:>15.2f}"
              f"{per_lg / per:>11.1f}{per / per_plain:>14.1f}")

    per_node = {name: t / nodes * 1e6 for name, nodes, t, _, _ in rows}
    print(
        f"field mapping per edge (workflow - dag graph): invoke "
        f"{per_node['workflow-100'] - per_node['dag dict-100']:.2f} us, stream "
        f"{per_node['wf, stream'] - per_node['dag, stream']:.2f} us"
    )

    t0 = time.perf_counter()
    for _ in range(repeat):
        pyeino_compile()
    t_compile = (time.perf_counter() - t0) / repeat
    line = f"compile of a {N_CHAIN}-node graph: pyeino {t_compile * 1e3:.2f} ms"
    if lg:
        t0 = time.perf_counter()
        for _ in range(repeat):
            lg_chain()
        line += f", LangGraph {(time.perf_counter() - t0) / repeat * 1e3:.2f} ms"
    print(line)
    await history_rows(repeat)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--opcodes", action="store_true", help="count bytecodes per run instead of timing")
    args = parser.parse_args()
    sys.setrecursionlimit(10_000)
    anyio.run(main, args.quick, args.backend, args.opcodes, backend=args.backend)
