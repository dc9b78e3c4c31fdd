"""Overhead of a ToolsNode call: 10 trivial parallel tool calls, against calling the functions directly.

Run: ``.venv/bin/python benchmarks/bench_tools.py [--rounds N]``. Prints, per backend, the time per tool call
of

- ``direct``: the 10 async functions called in an anyio task group (the floor),
- ``direct + run()``: the same through the tools' ``run(json)`` (argument validation and result to text),
- ``ToolsNode.invoke``: one assistant message with 10 tool calls through the node,
- ``ToolsNode.stream``: the same in stream mode, reading the merged stream to its end,

and the ratio of ``ToolsNode.invoke`` to ``direct`` (goal: within 3x).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable

import anyio

from compose.schema import FunctionCall, ToolCall, assistant_message
from compose.tools import FunctionTool, tool
from compose.tools.node import ToolsNode

CALLS = 10


async def _add_one(x: int) -> int:
    return x + 1


TOOLS: list[FunctionTool] = [tool(_add_one, name=f"add_{i}") for i in range(CALLS)]
NODE = ToolsNode(TOOLS)
MESSAGE = assistant_message(
    "",
    tool_calls=[
        ToolCall(id=f"call_{i}", function=FunctionCall(name=f"add_{i}", arguments=json.dumps({"x": i})))
        for i in range(CALLS)
    ],
)


async def direct() -> None:
    results: list[int] = [0] * CALLS

    async def one(i: int) -> None:
        results[i] = await _add_one(i)

    async with anyio.create_task_group() as tg:
        for i in range(CALLS):
            tg.start_soon(one, i)


async def direct_run() -> None:
    results: list[str] = [""] * CALLS

    async def one(i: int) -> None:
        results[i] = await TOOLS[i].run(f'{{"x": {i}}}')

    async with anyio.create_task_group() as tg:
        for i in range(CALLS):
            tg.start_soon(one, i)


async def node_invoke() -> None:
    await NODE.invoke(MESSAGE)


async def node_stream() -> None:
    reader = await NODE.stream(MESSAGE)
    async with reader:
        async for _ in reader:
            pass


async def _measure(fn: Callable[[], Awaitable[None]], rounds: int, repeats: int = 5) -> float:
    """Best time per tool call (seconds) over ``repeats`` runs of ``rounds`` rounds."""
    for _ in range(min(rounds, 200)):
        await fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(rounds):
            await fn()
        best = min(best, (time.perf_counter() - start) / (rounds * CALLS))
    return best


async def _bench(rounds: int) -> dict[str, float]:
    return {
        "direct (task group)": await _measure(direct, rounds),
        "direct + run() (validation)": await _measure(direct_run, rounds),
        "ToolsNode.invoke": await _measure(node_invoke, rounds),
        "ToolsNode.stream (read to end)": await _measure(node_stream, rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    for backend in ("asyncio", "trio"):
        figures = anyio.run(_bench, args.rounds, backend=backend)
        floor = figures["direct (task group)"]
        print(f"\n{backend}: {CALLS} parallel trivial tool calls per round, {args.rounds} rounds, best of 5")
        print(f"  {'':32} {'us/call':>9} {'x direct':>9}")
        for name, seconds in figures.items():
            print(f"  {name:32} {seconds * 1e6:9.2f} {seconds / floor:9.2f}")


if __name__ == "__main__":
    main()
