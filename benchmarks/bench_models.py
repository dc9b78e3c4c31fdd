"""Chat model overhead: OpenAIChatModel.stream against the bare openai client, and ScriptedChatModel per call.

Run: ``python benchmarks/bench_models.py`` (from the repository root). The OpenAI-compatible test server
runs in a child process on 127.0.0.1 (so it does not share the GIL with the client being measured) and
answers every request with the same stream of ``--chunks`` content chunks plus a usage chunk. Both clients
read that stream completely; the figure is wall time per chunk, the median of ``--rounds`` requests each,
run interleaved. Goal: OpenAIChatModel within 1.5x of the bare client.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path

import anyio
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compose.models.openai_model import OpenAIChatModel
from compose.models.scripted import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, concat_messages, user_message
from tests.compose.models.openai_server import OpenAIServer, sse, text_chunks

MESSAGES = [user_message("Tell me a long story.")]


def serve(chunks: int, conn: Connection) -> None:
    reply = sse(text_chunks("word " * chunks, size=5), usage=(10, chunks))
    with OpenAIServer(repeat=reply) as server:
        conn.send(server.base_url)
        conn.recv()  # until the parent says stop


async def bare_client(client: openai.AsyncOpenAI) -> int:
    stream = await client.chat.completions.create(
        model="bench",
        messages=[{"role": "user", "content": MESSAGES[0].content}],
        stream=True,
        stream_options={"include_usage": True},
    )
    n = 0
    async for _ in stream:
        n += 1
    return n


async def pyeino_model(model: OpenAIChatModel) -> int:
    n = 0
    async with await model.stream(MESSAGES) as reader:
        async for _ in reader:
            n += 1
    return n


async def time_per_chunk(fn: Callable[[], Awaitable[int]]) -> float:
    start = time.perf_counter()
    n = await fn()
    return (time.perf_counter() - start) / n


async def bench_openai(base_url: str, rounds: int) -> None:
    async with (
        openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0) as client,
        OpenAIChatModel("bench", base_url=base_url, api_key="bench") as model,
    ):
        for _ in range(3):  # warm up connections and code paths
            await bare_client(client)
            await pyeino_model(model)
        bare: list[float] = []
        ours: list[float] = []
        for _ in range(rounds):
            bare.append(await time_per_chunk(lambda: bare_client(client)))
            ours.append(await time_per_chunk(lambda: pyeino_model(model)))
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"  bare openai client       {b * 1e6:8.2f} us/chunk")
    print(f"  OpenAIChatModel.stream   {o * 1e6:8.2f} us/chunk   ratio {o / b:.2f}x (goal <= 1.5x)")


async def bench_scripted(calls: int) -> None:
    answer = Message(
        role="assistant",
        content="lorem ipsum dolor sit amet " * 8,
        tool_calls=[
            ToolCall(id="c1", function=FunctionCall(name="search", arguments='{"query": "' + "x" * 60 + '"}'))
        ],
    )
    model = ScriptedChatModel([answer] * (2 * calls), chunk_size=8)
    start = time.perf_counter()
    for _ in range(calls):
        await model.generate(MESSAGES)
    gen = (time.perf_counter() - start) / calls
    start = time.perf_counter()
    n = 0
    for _ in range(calls):
        async with await model.stream(MESSAGES) as reader:
            chunks = [c async for c in reader]
        n = len(chunks)
        concat_messages(chunks)
    stream = (time.perf_counter() - start) / calls
    print(f"  ScriptedChatModel.generate          {gen * 1e6:8.1f} us/call")
    print(f"  ScriptedChatModel.stream + concat   {stream * 1e6:8.1f} us/call ({n} chunks)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()

    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(
        target=serve, args=(args.chunks, child), daemon=True
    )
    server.start()
    try:
        base_url = parent.recv()
        setup = f"{args.backend}, {args.chunks} chunks per stream, median of {args.rounds}"
        print(f"OpenAIChatModel vs bare client ({setup})")
        anyio.run(bench_openai, base_url, args.rounds, backend=args.backend)
    finally:
        parent.send("stop")
        server.join(timeout=10)
    print(f"ScriptedChatModel ({args.backend}, {args.calls} calls)")
    anyio.run(bench_scripted, args.calls, backend=args.backend)


if __name__ == "__main__":
    main()
