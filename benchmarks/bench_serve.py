"""AG-UI serving under load: 200 concurrent SSE runs of a 3-round scripted agent over loopback HTTP.

Run: ``python benchmarks/bench_serve.py [--runs 200] [--repeat 3] [--pydantic-ai-python PATH]``.

The agent: round 1 and round 2 each call the ``lookup`` tool, round 3 streams a ~60-character answer naming
the run (4-character chunks), so every run streams tool calls, tool results and text. Measured:

- **in process**: the same agent through ``Runner.run`` (streaming), ``--runs`` at once in one task group;
- **HTTP, pyeino**: ``python -m adk.serve benchmarks.bench_serve:build --db memory`` (a server process on
  uvicorn), ``--runs`` concurrent ``POST /agents/bench/agui`` SSE streams, each on its own connection from a
  plain-socket client (httpx parsing 200 streams at once would cost more than the server); every stream must
  end with ``RUN_FINISHED`` whose result is the run's own answer, with 2 tool results;
- **HTTP, pyeino on SQLite**: the same with threads kept in a SQLite file (the CLI's default);
- **HTTP, pydantic-ai**: pydantic-ai's AG-UI adapter (``AGUIAdapter.dispatch_request``, what ``AGUIApp`` ran) on
  uvicorn serving an equivalent agent on its ``FunctionModel`` (the same rounds and chunks), when
  ``--pydantic-ai-python`` names a Python that has ``pydantic-ai-slim[ag-ui]`` and uvicorn (install it in a venv
  of its own: it is not a pyeino dependency).

Reported per setup: runs/s (runs divided by the wall time from the first request to the last stream's end;
best of ``--repeat``), and the time to the first text event of a run (from its request to its first
``TEXT_MESSAGE_CONTENT``; median and p95 over the runs of the best repetition; and the median of 20 runs made
one at a time, which is the latency a lone client sees), and the CPU time the server
process spent per run (the client shares the machine). The overhead ratio compares HTTP runs/s with in-process runs/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from adk import ChatModelAgent, Runner
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, user_message
from compose.stream import StreamReader
from compose.tools import tool

ROOT = Path(__file__).resolve().parents[1]


def answer_for(question: str) -> str:
    return f"The answer to {question!r} is 42, as both lookups agreed."


@tool
async def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: what to look up
    """
    return f"found {query}"


class ThreeRounds:
    """Two tool rounds, then the answer (per call, from the conversation: one model serves every run)."""

    def __init__(self, tools: Sequence[ToolInfo] = ()) -> None:
        self.tools = tuple(tools)

    def with_tools(self, tools: Sequence[ToolInfo]) -> ThreeRounds:
        return ThreeRounds(tools)

    def _round(self, messages: Sequence[Message]) -> ScriptedChatModel:
        question = next(m.content for m in messages if m.role == "user")
        done = sum(1 for m in messages if m.role == "tool")
        if done < 2:
            call = ToolCall(
                id=f"call_{done}", function=FunctionCall(name="lookup", arguments=json.dumps({"query": question}))
            )
            reply = Message(role="assistant", content="", tool_calls=[call])
        else:
            reply = Message(role="assistant", content=answer_for(question))
        return ScriptedChatModel([reply], chunk_size=4, usage=False)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._round(messages).generate(messages, **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self._round(messages).stream(messages, **opts)


def build() -> ChatModelAgent:
    """The benchmark's agent (``python -m adk.serve benchmarks.bench_serve:build``)."""
    return ChatModelAgent("bench", "three rounds", "You answer.", ThreeRounds(), tools=[lookup])


PYDANTIC_AI_SERVER = textwrap.dedent(
    '''
    import json, sys
    import uvicorn
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    def answer_for(question):
        return f"The answer to {question!r} is 42, as both lookups agreed."

    async def stream(messages, info: AgentInfo):
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        question = next(p.content for p in parts if isinstance(p, UserPromptPart))
        done = sum(1 for p in parts if isinstance(p, ToolReturnPart))
        if done < 2:
            args = json.dumps({"query": question})
            for i in range(0, len(args), 4):
                first = i == 0
                yield {0: DeltaToolCall(name="lookup" if first else None, json_args=args[i:i + 4],
                                        tool_call_id=f"call_{done}" if first else None)}
        else:
            text = answer_for(question)
            for i in range(0, len(text), 4):
                yield text[i:i + 4]

    agent = Agent(FunctionModel(stream_function=stream), instructions="You answer.")

    @agent.tool_plain
    async def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    from starlette.applications import Starlette
    from starlette.routing import Route
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    async def endpoint(request):
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    app = Starlette(routes=[Route("/", endpoint, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    '''
)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(url: str, runs: int, repeat: int, pid: int) -> tuple[float, list[float], float]:
    """The best of ``repeat`` batches: runs/s, first-text times, and the server's CPU ms per run."""
    results = []
    for _ in range(repeat):
        cpu = cpu_seconds(pid)
        rate, firsts = anyio.run(http_batch, url, runs)
        results.append((rate, firsts, (cpu_seconds(pid) - cpu) / runs * 1000))
    return max(results, key=lambda r: r[0])


@contextmanager
def process(cmd: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """A server process; its base URL once it answers, and its pid."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server {cmd} did not start") from None
                time.sleep(0.1)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dechunk(raw: bytes) -> bytes:
    """The body of an HTTP/1.1 response (headers dropped, chunked transfer coding undone)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return body
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


async def one_http_run(host: str, port: int, path: str, i: int, tag: str) -> float:
    """The time to the first text event of run ``i``, after checking the run exact.

    The client is a plain socket writing one HTTP/1.1 request and reading the response to its end, so the
    measurement is the server's (an httpx client parsing 200 streams at once costs more than the server).
    """
    question = f"question {i}"
    body = json.dumps(
        {
            "threadId": f"bench-{tag}-{i}",
            "runId": f"run-{i}",
            "messages": [{"id": f"u{i}", "role": "user", "content": question}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    ).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    start = time.perf_counter()
    first: float | None = None
    raw = bytearray()
    async with await anyio.connect_tcp(host, port) as sock:
        await sock.send(request)
        while True:
            try:
                data = await sock.receive()
            except anyio.EndOfStream:
                break
            raw += data
            if first is None and b'"TEXT_MESSAGE_CONTENT"' in raw:
                first = time.perf_counter() - start
    events = [json.loads(line[6:]) for line in dechunk(bytes(raw)).decode().splitlines() if line.startswith("data: ")]
    last = events[-1]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert last["type"] == "RUN_FINISHED", last
    assert text == answer_for(question), text
    assert len(results) == 2, results
    assert first is not None
    return first


async def http_batch(url: str, runs: int) -> tuple[float, list[float]]:
    parsed = httpx.URL(url)
    host, port, path = parsed.host, parsed.port or 80, parsed.raw_path.decode()
    firsts: list[float] = []
    tag = f"{time.time_ns()}"
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        firsts.append(await one_http_run(host, port, path, i, tag))

    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(one, i)
    return runs / (time.perf_counter() - t0), firsts


async def in_process_batch(runs: int) -> tuple[float, list[float]]:
    runner = Runner(build(), enable_streaming=True)
    firsts: list[float] = []

    async def one(i: int) -> None:
        question = f"question {i}"
        start = time.perf_counter()
        first: float | None = None
        async with runner.run([user_message(question)]) as run:
            async for event in run:
                if event.error is not None:
                    raise event.error
                variant = event.message
                if variant is None:
                    continue
                if variant.message_stream is not None:
                    async for chunk in variant.message_stream:
                        if first is None and chunk.content:
                            first = time.perf_counter() - start
                else:
                    await variant.get_message()
        assert run.final_message is not None and run.final_message.content == answer_for(question)
        assert first is not None
        firsts.append(first)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(one, i)
    return runs / (time.perf_counter() - t0), firsts


def alone(batch: Any, *args: Any) -> float:
    """The median time to the first text event of a run alone (20 runs, one after the other)."""
    return statistics.median(anyio.run(batch, *args)[1][0] for _ in range(20))


def row(name: str, rate: float, firsts: list[float], base: float | None, cpu: float, single: float) -> str:
    firsts = sorted(firsts)
    p50 = statistics.median(firsts) * 1000
    p95 = firsts[int(len(firsts) * 0.95) - 1] * 1000
    ratio = f"{base / rate:.1f}x" if base else ""
    return f"| {name} | {rate:,.0f} | {single * 1000:.1f} ms | {p50:.0f} ms | {p95:.0f} ms | {cpu:.2f} ms | {ratio} |"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pydantic-ai-python", default=None, help="a Python with pydantic-ai-slim[ag-ui] and uvicorn")
    args = parser.parse_args(argv)
    env = {"PYTHONPATH": str(ROOT)}
    print(f"{args.runs} concurrent runs, 3 rounds each (2 tool calls, then a streamed answer); best of {args.repeat}")
    print(
        "| setup | runs/s | first text, one run alone | first text p50 | first text p95 | server CPU per run "
        "| runs/s below in-process |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    batches = []
    for _ in range(args.repeat):
        cpu = time.process_time()
        rate, firsts = anyio.run(in_process_batch, args.runs)
        batches.append((rate, firsts, (time.process_time() - cpu) / args.runs * 1000))
    rate, firsts, cpu = max(batches, key=lambda r: r[0])
    print(row("pyeino in process (Runner)", rate, firsts, None, cpu, alone(in_process_batch, 1)), flush=True)
    base = rate
    with tempfile.TemporaryDirectory() as tmp:
        for name, db in (
            ("pyeino over HTTP (memory)", "memory"),
            ("pyeino over HTTP (SQLite)", str(Path(tmp) / "runs.db")),
        ):
            port = free_port()
            cmd = [sys.executable, "-m", "adk.serve", "benchmarks.bench_serve:build", "--port", str(port), "--db", db]
            with process(cmd, port, env) as (url, pid):
                agui = f"{url}/agents/bench/agui"
                anyio.run(http_batch, agui, 10)  # warm up
                single = alone(http_batch, agui, 1)
                rate, firsts, cpu = measured(agui, args.runs, args.repeat, pid)
            print(row(name, rate, firsts, base, cpu, single), flush=True)
        if args.pydantic_ai_python:
            script = Path(tmp) / "pai_server.py"
            script.write_text(PYDANTIC_AI_SERVER)
            port = free_port()
            proc = subprocess.Popen([args.pydantic_ai_python, str(script), str(port)], stdout=subprocess.DEVNULL)
            try:
                url = f"http://127.0.0.1:{port}"
                deadline = time.monotonic() + 60
                while True:
                    try:
                        httpx.get(url, timeout=1)
                        break
                    except httpx.TransportError:
                        if proc.poll() is not None or time.monotonic() > deadline:
                            raise RuntimeError("the pydantic-ai server did not start") from None
                        time.sleep(0.1)
                anyio.run(http_batch, url + "/", 10)
                single = alone(http_batch, url + "/", 1)
                rate, firsts, cpu = measured(url + "/", args.runs, args.repeat, proc.pid)
                name = "pydantic-ai AGUIAdapter over HTTP (FunctionModel)"
                print(row(name, rate, firsts, base, cpu, single), flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
