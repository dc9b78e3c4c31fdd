"""Cost of OpenTelemetry tracing on a ReAct run (issue 16): the agent of ``bench_react.py`` (10 rounds of one tool
call) without callbacks, with ``OTelHandler`` installed but no SDK configured (non-recording spans), and with the
SDK exporting to memory.

Run: ``.venv/bin/python benchmarks/bench_otel.py [--runs N]``. Prints, per mode, the median time per run over
interleaved rounds (the modes alternate, so a noisy machine disturbs them alike) and the number of Python function
calls per run counted by cProfile (deterministic: the more reliable number on a shared machine). Without the
``otel`` extra only the first mode runs (to compare a branch without ``compose.otel`` with one that has it).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
from bench_react import TOOL, BenchModel, pyeino_run  # beside this script

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner

ROUNDS = 10


def runner(callbacks: list[Any]) -> Runner:
    agent = ChatModelAgent("bench", "adds", model=BenchModel(ROUNDS), tools=[TOOL])
    return Runner(agent, callbacks=callbacks) if callbacks else Runner(agent)


def modes() -> dict[str, Callable[[], Runner]]:
    out: dict[str, Callable[[], Runner]] = {"no callbacks": lambda: runner([])}
    try:
        from compose.otel import OTelHandler
    except ImportError:
        return out
    out["OTelHandler, no SDK"] = lambda: runner([OTelHandler()])
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return out
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def sdk() -> Runner:
        exporter.clear()
        return runner([OTelHandler(tracer_provider=provider)])

    out["OTelHandler, SDK to memory"] = sdk
    return out


async def timed(make: Callable[[], Runner], runs: int) -> float:
    r = make()
    start = time.perf_counter()
    for _ in range(runs):
        await pyeino_run(r, "go")
    return (time.perf_counter() - start) / runs


def calls_per_run(make: Callable[[], Runner], runs: int = 20) -> float:
    r = make()

    async def many() -> None:
        for _ in range(runs):
            await pyeino_run(r, "go")

    anyio.run(pyeino_run, r, "warm up")
    prof = cProfile.Profile()
    prof.enable()
    anyio.run(many)
    prof.disable()
    return pstats.Stats(prof).total_calls / runs  # type: ignore[attr-defined,no-any-return]


async def main(runs: int, rounds: int) -> None:
    table = modes()
    samples: dict[str, list[float]] = {name: [] for name in table}
    for make in table.values():
        await timed(make, 5)  # warm up
    for _ in range(rounds):
        for name, make in table.items():
            samples[name].append(await timed(make, runs))
    base = statistics.median(samples["no callbacks"])
    print(f"{ROUNDS}-round ReAct run, median of {rounds} interleaved rounds of {runs} runs")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"  {name:28s} {med * 1e3:8.3f} ms/run  x{med / base:5.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    anyio.run(main, args.runs, args.rounds)
    for name, make in modes().items():
        print(f"  {name:28s} {calls_per_run(make):9.0f} Python calls/run (cProfile)")
