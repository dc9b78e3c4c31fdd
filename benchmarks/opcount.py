"""Python calls and bytecode instructions per run of each benchmark's workload: a cost that does not depend on the
load of the machine, to compare two versions of the code where timings are too noisy to read.

Run: ``python benchmarks/opcount.py [--only SUBSTRING] [--json FILE]``. Each workload runs a few times as a
warm-up, then once under ``sys.settrace`` counting ``call`` events (Python frames entered, coroutine resumptions
included) and ``opcode`` events (instructions executed in Python code). C functions and other threads (SQLite's
worker thread) are not counted. Rows: the ReAct runs of ``bench_react`` (also driven as typical user code does,
with and without ``enable_streaming=True``) and the hand loops they are measured against, the multi-agent rows of
``bench_multi_agent``, the graphs of ``bench_graph``, the streams of ``bench_stream``, the ToolsNode of
``bench_tools``, the envelope of ``bench_checkpoint`` and an agent's pause and resume with a checkpoint store, and
the in-memory session store of ``bench_sessions``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

from adk.middlewares.approval import ApprovalMiddleware

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_checkpoint
import bench_graph
import bench_multi_agent
import bench_react
import bench_sessions
import bench_stream
import bench_tools

from adk.chat_model.agent import ChatModelAgent
from adk.middlewares.approval import ApprovalDecision
from adk.runner import Runner
from adk.sessions import InMemorySessionStore
from compose.checkpoint import InMemoryCheckPointStore, decode_checkpoint, encode_checkpoint
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool

Work = Callable[[], Awaitable[Any]]


class _Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.opcodes = 0

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            self.calls += 1
            frame.f_trace_opcodes = True
            return self.local
        return None

    def local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.opcodes += 1
        return self.local


async def count(work: Work, warmup: int = 3) -> tuple[int, int]:
    """(Python calls, opcodes) of one ``work()``, after ``warmup`` runs."""
    for _ in range(warmup):
        await work()
    counter = _Counter()
    sys.settrace(counter.trace)
    try:
        await work()
    finally:
        sys.settrace(None)
    return counter.calls, counter.opcodes


# ------------------------------------------------------------------ workloads


def _react(k: int) -> Work:
    return partial(bench_react.pyeino_run, bench_react.pyeino_runner(k), "go")


def _hand(k: int) -> Work:
    return partial(bench_react.hand_loop, bench_react.BenchModel(k), "go")


def _typical(k: int, streaming: bool = False) -> Work:
    return partial(bench_react.typical_run, bench_react.pyeino_runner(k, streaming, typical=True), "go")


def _multi(row: str) -> Work:
    ((make,),) = [(ours,) for key, _, ours, _, _ in bench_multi_agent.ROWS if key == row]
    return partial(bench_multi_agent.pyeino_run, make(), "go")


def _graph(make: Callable[[], Any], x: Any, stepped: bool = False, stream: bool = False) -> Work:
    r = make()
    if stepped:
        return partial(bench_graph.stepped, r, x)
    if stream:

        async def read() -> None:
            reader = await r.stream(x)
            async with reader:
                async for _ in reader:
                    pass

        return read
    return partial(r.invoke, x)


def _envelope() -> Work:
    snapshot = bench_checkpoint.agent_run_snapshot()

    async def roundtrip() -> None:
        data = encode_checkpoint(snapshot, kind="agent-run", fingerprint="bench")
        decode_checkpoint(data, bench_checkpoint.AgentRunSnapshot, kind="agent-run", fingerprint="bench")

    return roundtrip


def _pause_resume() -> Work:
    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        return f"paid {amount}"

    def answer(messages: list[Message]) -> Message | str:
        if messages[-1].role == "tool":
            return "All done."
        call = ToolCall(id="c0", function=FunctionCall(name="pay", arguments='{"amount": 42}'))
        return Message(role="assistant", content="", tool_calls=[call])

    store = InMemoryCheckPointStore()
    agent = ChatModelAgent(
        "ops",
        "pays",
        model=ScriptedChatModel([answer] * 10**6),
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda n, a: True)],
    )
    runner = Runner(agent, checkpoint_store=store)

    async def once() -> None:
        ids: list[str] = []
        async with runner.query("pay", checkpoint_id="cp") as run:
            async for event in run:
                if event.action is not None and event.action.interrupted is not None:
                    ids = event.action.interrupted.ids
        async with runner.resume("cp", targets={ids[0]: ApprovalDecision(approved=True)}) as run:
            async for _ in run:
                pass

    return once


def _sessions() -> Work:
    store = InMemorySessionStore()
    i = [0]

    async def turn() -> None:
        i[0] += 1
        lease = await store.acquire("bench")
        await store.commit(lease, bench_sessions.turn(i[0] % 50), {"turn": i[0]})
        await store.load("bench", limit=None)

    return turn


def workloads() -> list[tuple[str, Callable[[], Work]]]:
    return [
        ("react: hand loop K=1", lambda: _hand(1)),
        ("react: hand loop K=10", lambda: _hand(10)),
        ("react: pyeino K=1", lambda: _react(1)),
        ("react: pyeino K=10", lambda: _react(10)),
        ("react: pyeino K=50", lambda: _react(50)),
        ("react: pyeino first token", lambda: bench_react.first_token_pair()[1]),
        ("react: typical K=1", lambda: _typical(1)),
        ("react: typical K=10", lambda: _typical(10)),
        ("react: typical K=50", lambda: _typical(50)),
        ("react: typical first token", bench_react.typical_first_token),
        ("react: hand stream loop K=1", lambda: partial(bench_react.hand_stream_loop, bench_react.UserModel(1), "")),
        ("react: hand stream loop K=10", lambda: partial(bench_react.hand_stream_loop, bench_react.UserModel(10), "")),
        ("react: streaming K=1", lambda: _typical(1, True)),
        ("react: streaming K=10", lambda: _typical(10, True)),
        ("react: streaming K=50", lambda: _typical(50, True)),
        ("multi: one agent", lambda: _multi("0")),
        ("multi: AgentTool", lambda: _multi("2")),
        ("multi: transfer", lambda: _multi("3")),
        ("multi: Sequential of 10", lambda: _multi("4")),
        ("graph: chain invoke", lambda: _graph(bench_graph.pyeino_chain, 0)),
        ("graph: chain stepped", lambda: _graph(bench_graph.pyeino_chain, 0, stepped=True)),
        ("graph: chain stream", lambda: _graph(bench_graph.pyeino_chain, 0, stream=True)),
        ("graph: loop invoke", lambda: _graph(bench_graph.pyeino_loop, 0)),
        ("graph: fan invoke", lambda: _graph(bench_graph.pyeino_fan, 0)),
        ("graph: dag chain invoke", lambda: _graph(bench_graph.pyeino_dag_chain, {"x": 0})),
        ("graph: workflow invoke", lambda: _graph(bench_graph.pyeino_workflow, {"x": 0})),
        ("stream: pipe 1000", lambda: partial(bench_stream.bench_pipe, 1000, 16)),
        ("stream: copy(2) alternating 1000", lambda: partial(bench_stream.bench_copy_alternating, 1000, 16)),
        ("stream: copy(2) concurrent 1000", lambda: partial(bench_stream.bench_copy_concurrent, 1000, 16)),
        ("tools: run() x10", lambda: bench_tools.direct_run),
        ("tools: ToolsNode.invoke x10", lambda: bench_tools.node_invoke),
        ("tools: ToolsNode.stream x10", lambda: bench_tools.node_stream),
        ("checkpoint: envelope encode+decode", _envelope),
        ("checkpoint: agent pause + resume", _pause_resume),
        ("sessions: in-memory append + load", _sessions),
    ]


async def main(only: str | None) -> dict[str, tuple[int, int]]:
    results: dict[str, tuple[int, int]] = {}
    print(f"{'workload':<40} {'calls':>9} {'opcodes':>10}")
    for name, make in workloads():
        if only and only not in name:
            continue
        calls, ops = await count(make())
        results[name] = (calls, ops)
        print(f"{name:<40} {calls:>9} {ops:>10}", flush=True)
    return results


def compare(before: str, after: str) -> None:
    a = json.loads(Path(before).read_text())
    b = json.loads(Path(after).read_text())
    print(f"{'workload':<40} {'calls':>17} {'opcodes':>21}")
    for name in a:
        if name not in b:
            continue
        (c0, o0), (c1, o1) = a[name], b[name]
        print(f"{name:<40} {c0:>7} -> {c1:<7} {o0:>9} -> {o1:<9} {(o1 - o0) / o0 * 100:+6.1f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="only the workloads whose name contains this")
    parser.add_argument("--json", help="write the counts to this file")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --json files")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        counted = anyio.run(main, args.only)
        if args.json:
            Path(args.json).write_text(json.dumps(counted, indent=1))
