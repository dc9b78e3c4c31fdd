"""Memory of many agent runs in flight at once: N concurrent ChatModelAgent runs of K tool rounds each.

Run: ``python benchmarks/bench_memory.py [--runs 10000] [--rounds 3] [--batches 3] [--trace-runs 2000]
[--streaming]``. One agent and one runner serve every run (as a service would); the model answers instantly
and statelessly (round n calls the tool until K, then answers), and the tool waits at a barrier until all N runs
have reached the same round, so every run is in flight, at its deepest, when memory is measured. Prints:

1. RSS of the process: the baseline (agent built, warmed up), at each round's barrier (all N runs held), the
   peak (``ru_maxrss``) and the growth per run; then, after each of ``--batches`` batches, RSS and the count of
   Python objects the garbage collector tracks against the baseline (flat = nothing kept across runs);
2. what a held run is made of: live objects by type at the last barrier, per run, with their shallow sizes
   (``sys.getsizeof``; strings and other untracked objects are not counted here);
3. tracemalloc's top allocation sites at the last barrier of a separate batch of ``--trace-runs`` runs, per run
   (tracemalloc slows the run and costs memory of its own, hence the smaller batch).

``ScriptedChatModel`` is not used: it records every call (a copy of the messages), which would be what this
measures.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from compose.schema import FunctionCall, Message, ResponseMeta, ToolCall, ToolInfo, Usage
from compose.stream import StreamReader
from compose.tools import tool

MiB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class Model:
    """Round n (n assistant messages so far) calls the tool with ``x = n``, until K; then a final answer."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        meta = ResponseMeta(
            finish_reason="tool_calls", usage=Usage(prompt_tokens=20, completion_tokens=5, total_tokens=25)
        )
        self.answers = [
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id=f"call_{i}", index=0, function=FunctionCall(name="hold", arguments=f'{{"x": {i}}}'))
                ],
                response_meta=meta,
            )
            for i in range(rounds)
        ]
        self.final = Message(role="assistant", content="All done.", response_meta=ResponseMeta(finish_reason="stop"))

    def with_tools(self, tools: Sequence[ToolInfo]) -> Model:
        return self

    def _round(self, messages: Sequence[Message]) -> int:
        return sum(1 for m in messages if m.role == "assistant")

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        n = self._round(messages)
        return self.answers[n] if n < self.rounds else self.final

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return StreamReader.from_iterable((await self.generate(messages),))


class Barrier:
    """Holds every run at its round's tool call until all ``n`` have arrived; ``on_full(round)`` runs first."""

    def __init__(self, n: int, on_full: Callable[[int], None]) -> None:
        self.n = n
        self.on_full = on_full
        self.arrived: Counter[int] = Counter()
        self.events: dict[int, anyio.Event] = {}

    async def wait(self, round_: int) -> None:
        event = self.events.setdefault(round_, anyio.Event())
        self.arrived[round_] += 1
        if self.arrived[round_] == self.n:
            self.on_full(round_)
            event.set()
        else:
            await event.wait()


BARRIER: Barrier | None = None


@tool
async def hold(x: int) -> int:
    """Wait until every run has reached this round, then add one.

    Args:
        x: the round.
    """
    if BARRIER is not None:
        await BARRIER.wait(x)
    return x + 1


async def run_one(runner: Runner) -> None:
    async with runner.query("go") as run:
        async for event in run:
            if event.error is not None:
                raise event.error
            if event.message is not None:
                await event.message.get_message()
        assert run.final_message is not None and run.final_message.content == "All done."


async def batch(runner: Runner, n: int, rounds: int, on_full: Callable[[int], None]) -> float:
    global BARRIER
    BARRIER = Barrier(n, on_full)
    start = time.perf_counter()
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(run_one, runner)
    finally:
        BARRIER = None
    return time.perf_counter() - start


def site(filename: str) -> str:
    """A short name for a source file: relative to the checkout, site-packages or the standard library."""
    if filename.startswith(ROOT):
        return os.path.relpath(filename, ROOT)
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1]
    if "/lib/python" in filename:
        return "stdlib/" + filename.split("/lib/python")[1].split("/", 1)[1]
    return filename


def live_types() -> Counter[str]:
    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        t = type(obj)
        counts[f"{t.__module__}.{t.__qualname__}"] += 1
    return counts


def type_sizes() -> dict[str, int]:
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        t = type(obj)
        sizes[f"{t.__module__}.{t.__qualname__}"] += sys.getsizeof(obj)
    return sizes


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="tool rounds per run (then a final answer)")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--trace-runs", type=int, default=2_000, help="runs in the tracemalloc batch (0: skip)")
    parser.add_argument("--streaming", action="store_true", help="Runner(enable_streaming=True)")
    parser.add_argument("--top", type=int, default=18)
    args = parser.parse_args(argv)
    n, rounds = args.runs, args.rounds

    agent = ChatModelAgent("bench", "memory benchmark", model=Model(rounds), tools=[hold], max_iterations=rounds + 1)
    runner = Runner(agent, enable_streaming=args.streaming)
    await batch(runner, 50, rounds, lambda r: None)  # warm-up: graph compiled, lazy imports done
    gc.collect()
    base_rss = rss()
    base_objects = len(gc.get_objects())
    base_types = live_types()
    mode = "streaming" if args.streaming else "invoke"
    print(f"{n} concurrent {rounds}-round runs ({mode}), Python {sys.version.split()[0]}, anyio backend asyncio")
    print(f"\n1. RSS: baseline {base_rss / MiB:.1f} MiB, {base_objects} GC-tracked objects")

    at_barrier: dict[int, int] = {}
    held_types: Counter[str] = Counter()
    held_sizes: dict[str, int] = {}

    def measure(round_: int) -> None:
        at_barrier[round_] = rss()
        if round_ == rounds - 1 and not held_types:
            held_types.update(live_types())
            held_sizes.update(type_sizes())

    wall = await batch(runner, n, rounds, measure)
    for r, value in sorted(at_barrier.items()):
        print(f"   round {r} barrier: {value / MiB:7.1f} MiB  (+{(value - base_rss) / n / 1024:5.1f} KiB a run)")
    print(f"   peak RSS {peak_rss() / MiB:.1f} MiB; batch wall {wall:.2f} s")

    for b in range(args.batches):
        wall = await batch(runner, n, rounds, lambda r: None)
        gc.collect()
        objects = len(gc.get_objects())
        print(
            f"   after batch {b + 2}: RSS {rss() / MiB:7.1f} MiB, peak {peak_rss() / MiB:.1f} MiB, "
            f"objects {objects - base_objects:+d} vs baseline, wall {wall:.2f} s"
        )

    print(f"\n2. live GC-tracked objects per held run at the round-{rounds - 1} barrier (count, shallow bytes)")
    diff = {k: held_types[k] - base_types.get(k, 0) for k in held_types}
    total_count = sum(v for v in diff.values() if v > 0)
    total_bytes = 0
    rows = []
    for name, count in diff.items():
        if count <= 0:
            continue
        per_obj = held_sizes.get(name, 0) / max(held_types[name], 1)
        total_bytes += int(per_obj * count)
        rows.append((per_obj * count / n, count / n, name))
    rows.sort(reverse=True)
    print(f"   {total_count / n:.1f} objects, {total_bytes / n / 1024:.1f} KiB shallow a run; the largest:")
    for size, count, name in rows[: args.top]:
        print(f"   {size:8.0f} B {count:6.2f}  {name}")

    if args.trace_runs:
        m = args.trace_runs
        gc.collect()
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        snapshots: list[tracemalloc.Snapshot] = []

        def snap(round_: int) -> None:
            if round_ == rounds - 1:
                snapshots.append(tracemalloc.take_snapshot())

        await batch(runner, m, rounds, snap)
        tracemalloc.stop()
        stats = snapshots[0].compare_to(before, "lineno")
        total = sum(s.size_diff for s in stats)
        print(
            f"\n3. tracemalloc at the round-{rounds - 1} barrier of {m} runs: {total / m / 1024:.1f} KiB"
            " a run; top sites"
        )
        for s in stats[: args.top]:
            frame = s.traceback[0]
            print(f"   {s.size_diff / m:8.0f} B {s.count_diff / m:6.2f}  {site(frame.filename)}:{frame.lineno}")
        # a coroutine's frame is allocated where it is called: by file, this is roughly who holds what
        print("   by file:")
        for s in snapshots[0].compare_to(before, "filename")[: args.top]:
            print(f"   {s.size_diff / m:8.0f} B {s.count_diff / m:6.2f}  {site(s.traceback[0].filename)}")


if __name__ == "__main__":
    anyio.run(main)
