"""Shared helpers of the compose tests."""

from __future__ import annotations

from typing import Any

from compose.graph import END, START, Graph


def recording(log: list[str], tag: str) -> Any:
    """A lambda node's function that appends ``tag`` to its input and to ``log`` (which nodes ran, in order)."""

    async def f(x: str) -> str:
        log.append(tag)
        return x + tag

    return f


def line(*nodes: tuple[str, Any], state: Any = None) -> Graph[str, str]:
    """START -> each lambda node ``(key, fn)`` in turn -> END."""
    g = Graph[str, str](state=state)
    prev = START
    for key, fn in nodes:
        g.add_lambda_node(key, fn)
        g.add_edge(prev, key)
        prev = key
    g.add_edge(prev, END)
    return g


async def drive(r: Any, x: Any, *, streaming: bool = False, **opts: Any) -> Any:
    """Run ``r`` as the agent runner does, from this frame, by GraphRun's driver API with split supersteps: each
    step's node is awaited here (``adk.chat_model._react_run``). END's value, or what the run raised."""
    from compose._engine.scheduler import GraphRun
    from compose._engine.tables import CALLING, NOTHING

    run = await r.start_run(x, streaming=streaming, **opts)
    assert type(run) is GraphRun and run.pregel
    entered = run.enter()
    try:
        while True:
            out = await run.superstep(split=True)
            if out is CALLING:
                try:
                    run.called = await run.calling
                except BaseException as exc:
                    await run.call_failed(exc)
            elif out is not NOTHING:
                await run.finish(out)
                return run.result
    except BaseException as exc:
        await run.fail(exc)
        raise
    finally:
        run.leave(entered)
