"""Cassette overhead: a scripted ReAct run plain, recorded on a cassette, and replayed from it.

Run: ``python benchmarks/bench_cassette.py [--rounds K] [--repeats N]``. The agent plays K rounds of one tool
call, then a final answer, on a ScriptedChatModel (no network), invoke and streaming. Prints the time per run of
each and the cassette's size; replaying a call means building its request as JSON data, a canonical key and the
recorded message from JSON, which is what is measured against the plain run.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.testing import cassette
from compose.tools import tool


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return json.dumps({"key": key, "value": key * 3})


def script(rounds: int) -> list[Any]:
    def call(r: int) -> ToolCall:
        return ToolCall(id=f"c{r}", function=FunctionCall(name="lookup", arguments=json.dumps({"key": f"k{r}"})))

    calls = [Message(role="assistant", content=f"round {r}", tool_calls=[call(r)]) for r in range(rounds)]
    return [*calls, "The answer, after all those lookups."]


async def one_run(model: Any, tools: list[Any], streaming: bool) -> None:
    agent = ChatModelAgent("bench", "benchmarks", "Be quick.", model, tools, max_iterations=1000)
    async with Runner(agent, enable_streaming=streaming).query("go") as run:
        async for event in run:
            if event.message is not None:
                await event.message.get_message()


async def timed(repeats: int, fn: Any) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def plain(path: Path, rounds: int, streaming: bool) -> None:
    await one_run(ScriptedChatModel(script(rounds)), [lookup], streaming)


async def record(path: Path, rounds: int, streaming: bool) -> None:
    async with cassette(path, "all") as tape:
        await one_run(tape.wrap(ScriptedChatModel(script(rounds))), [tape.wrap_tool(lookup)], streaming)


async def replay(path: Path, rounds: int, streaming: bool) -> None:
    async with cassette(path, "none") as tape:
        await one_run(tape.wrap(ScriptedChatModel([])), [tape.wrap_tool(lookup)], streaming)


async def main(rounds: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        for streaming in (False, True):
            base, rec, rep = [
                await timed(repeats, functools.partial(fn, path, rounds, streaming)) for fn in (plain, record, replay)
            ]
            mode = "streaming" if streaming else "invoke"
            print(
                f"{mode:9} {rounds} rounds: plain {base * 1e3:7.2f} ms  record {rec * 1e3:7.2f} ms ({rec / base:.2f}x)"
                f"  replay {rep * 1e3:7.2f} ms ({rep / base:.2f}x)  cassette {path.stat().st_size / 1024:.0f} KiB"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.repeats)
