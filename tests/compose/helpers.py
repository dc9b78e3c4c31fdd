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
    """Run ``r`` as the agent runner does: ``start_run``, then ``step(until=...)`` (the one driver, each step's
    node awaited in its frame) until the run is over. END's value, or what the run raised."""
    run = await r.start_run(x, streaming=streaming, **opts)
    while not await run.step(until=lambda: True):
        pass
    return run.result
