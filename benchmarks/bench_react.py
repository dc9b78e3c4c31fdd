"""ReAct agent overhead: pyeino's ChatModelAgent against LangGraph's prebuilt ReAct agent and a hand-written loop.

Run: ``.venv/bin/python benchmarks/bench_react.py [--quick] [--profile]``. Every contender plays the same
script with a model that answers instantly (K rounds of one tool call, then a final answer) and a trivial tool,
so what is measured is the framework. Prints:

1. per-iteration time (one model call + one tool call) of a K-round run, K = 1, 10, 50, and the ratio to the
   hand-written loop (goal: within 10x);
2. 1,000 concurrent 5-round runs: wall time, runs per second (goal: >= 1,000/s) and peak traced memory;
3. time from calling the runner to the first streamed token at the consumer, against the hand-written loop
   calling ``model.stream`` (goal: within 20x).

``--profile`` prints a cProfile of pyeino's 10-round run.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
import tracemalloc
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel

from adk.chat_model_agent import ChatModelAgent
from adk.runner import Runner
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, tool_message, user_message
from compose.stream import StreamReader
from compose.tools import FunctionTool, tool

FINAL = "All done: the numbers were added."


async def add_one(x: int) -> int:
    """Add one.

    Args:
        x: the number.
    """
    return x + 1


TOOL: FunctionTool = tool(add_one)


class BenchModel:
    """Answers instantly and statelessly: round n (n assistant messages so far) calls the tool, until K."""

    def __init__(self, rounds: int, *, yields: bool = False) -> None:
        self.rounds = rounds
        self.yields = yields  # pass through the scheduler once per call, as a network model would
        self.answers = [
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id=f"call_{i}", index=0, function=FunctionCall(name="add_one", arguments=f'{{"x": {i}}}'))
                ],
            )
            for i in range(rounds)
        ]
        self.final = Message(role="assistant", content=FINAL)
        words = FINAL.split(" ")
        self.final_chunks = tuple(Message(role="assistant", content=w + " ") for w in words)

    def with_tools(self, tools: Sequence[ToolInfo]) -> BenchModel:
        return self

    def _round(self, messages: Sequence[Message]) -> int:
        return sum(1 for m in messages if m.role == "assistant")

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        if self.yields:
            await anyio.lowlevel.checkpoint()
        n = self._round(messages)
        return self.answers[n] if n < self.rounds else self.final

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        n = self._round(messages)
        if n < self.rounds:
            return StreamReader.from_iterable((self.answers[n],))
        return StreamReader.from_iterable(self.final_chunks)


# ------------------------------------------------------------------ contenders


async def hand_loop(model: BenchModel, text: str) -> Message:
    """The floor: a plain ReAct loop over the same model and tool."""
    messages = [user_message(text)]
    for _ in range(100):
        answer = await model.generate(messages)
        messages.append(answer)
        if not answer.tool_calls:
            return answer
        for c in answer.tool_calls:
            messages.append(tool_message(await TOOL.run(c.function.arguments), c.id, tool_name=c.function.name))
    raise RuntimeError("too many rounds")


def pyeino_runner(rounds: int, streaming: bool = False, yields: bool = False) -> Runner:
    model = BenchModel(rounds, yields=yields)
    agent = ChatModelAgent("bench", "benchmark", model=model, tools=[TOOL], max_iterations=rounds + 1)
    return Runner(agent, enable_streaming=streaming)


async def pyeino_run(runner: Runner, text: str) -> Message | None:
    run = runner.query(text)
    async for event in run:
        if event.error is not None:
            raise event.error
    return run.final_message


def langgraph_agent(rounds: int, yields: bool = False) -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool as lc_tool
    from langgraph.prebuilt import create_react_agent

    class FakeModel(BaseChatModel):
        k: int = 0
        yields: bool = False

        @property
        def _llm_type(self) -> str:
            return "bench-fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            n = sum(1 for m in messages if m.type == "ai")
            if n < self.k:
                msg = AIMessage(content="", tool_calls=[{"name": "add_one", "args": {"x": n}, "id": f"call_{n}"}])
            else:
                msg = AIMessage(content=FINAL)
            return ChatResult(generations=[ChatGeneration(message=msg)])

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            if self.yields:
                await anyio.lowlevel.checkpoint()
            return self._generate(messages, stop)

    @lc_tool
    async def lc_add_one(x: int) -> int:
        """Add one."""
        return x + 1

    lc_add_one.name = "add_one"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(FakeModel(k=rounds, yields=yields), [lc_add_one])


# ------------------------------------------------------------------ measurement


async def per_call(fn: Callable[[], Awaitable[Any]], budget: float, repeats: int = 5) -> float:
    """Seconds per call of ``fn``: the best of ``repeats`` batches of about ``budget / repeats`` seconds each,
    after a warm-up (the best batch is the least disturbed by other load on the machine)."""
    for _ in range(3):
        await fn()
    best = float("inf")
    for _ in range(repeats):
        n, start = 0, time.perf_counter()
        while True:
            await fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= budget / repeats and n >= 3:
                break
        best = min(best, elapsed / n)
    return best


async def per_call_pair(
    fns: Sequence[Callable[[], Awaitable[Any]]], budget: float, repeats: int = 10
) -> list[float]:
    """``per_call`` for several functions at once, their batches interleaved, so that a slow spell of the
    machine (other load, frequency changes) weighs on all of them alike."""
    for fn in fns:
        for _ in range(3):
            await fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            n, start = 0, time.perf_counter()
            while True:
                await fn()
                n += 1
                elapsed = time.perf_counter() - start
                if elapsed >= budget / repeats / len(fns) and n >= 3:
                    break
            best[i] = min(best[i], elapsed / n)
    return best


async def iteration_table(budget: float, with_langgraph: bool) -> None:
    print("1. per-iteration time of a K-round run (one model call + one tool call per round; µs)")
    header = f"{'K':>4} {'hand loop':>11} {'pyeino':>11} {'ratio':>7}"
    if with_langgraph:
        header += f" {'LangGraph':>11} {'ratio':>7}"
    print(header)
    for k in (1, 10, 50):
        model = BenchModel(k)
        runner = pyeino_runner(k)
        pair = [partial(hand_loop, model, "go"), partial(pyeino_run, runner, "go")]
        hand, ours = (t / (k + 1) for t in await per_call_pair(pair, 2 * budget))
        row = f"{k:>4} {hand * 1e6:>11.1f} {ours * 1e6:>11.1f} {ours / hand:>6.1f}x"
        if with_langgraph:
            lg = langgraph_agent(k)
            call = partial(lg.ainvoke, {"messages": [("user", "go")]}, {"recursion_limit": 2 * k + 10})
            lg_t = await per_call(call, budget) / (k + 1)
            row += f" {lg_t * 1e6:>11.1f} {lg_t / hand:>6.1f}x"
        print(row)


async def concurrent_runs(n: int, rounds: int, run_one: Callable[[], Awaitable[Any]]) -> float:
    async def worker() -> None:
        await run_one()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(worker)
    return time.perf_counter() - start


async def concurrency_table(n: int, with_langgraph: bool) -> None:
    rounds = 5
    print(f"\n2. {n} concurrent {rounds}-round runs (the model passes through the scheduler once per call)")
    print(f"{'':>10} {'wall s':>8} {'runs/s':>9} {'peak MiB':>9}")
    model = BenchModel(rounds, yields=True)
    runner = pyeino_runner(rounds, yields=True)
    contenders: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("hand loop", lambda: hand_loop(model, "go")),
        ("pyeino", lambda: pyeino_run(runner, "go")),
    ]
    if with_langgraph:
        lg = langgraph_agent(rounds, yields=True)
        contenders.append(("LangGraph", lambda: lg.ainvoke({"messages": [("user", "go")]})))
    for name, fn in contenders:
        await concurrent_runs(min(n, 50), rounds, fn)  # warm-up
        gc.collect()
        wall = await concurrent_runs(n, rounds, fn)
        gc.collect()
        tracemalloc.start()
        await concurrent_runs(n, rounds, fn)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{name:>10} {wall:>8.3f} {n / wall:>9.0f} {peak / 2**20:>9.1f}")


async def first_token(budget: float) -> None:
    print("\n3. time to the first streamed token at the consumer (no tool round; µs)")
    model = BenchModel(0)

    async def hand() -> None:
        reader = await model.stream([user_message("hi")])
        await reader.recv()
        await reader.aclose()

    runner = pyeino_runner(0, streaming=True)

    async def ours() -> None:
        async with runner.query("hi") as run:
            event = await run.__anext__()
            assert event.message is not None and event.message.message_stream is not None
            await event.message.message_stream.recv()
            await event.aclose()

    h = await per_call(hand, budget)
    o = await per_call(ours, budget)
    print(f"hand loop {h * 1e6:.1f}   pyeino {o * 1e6:.1f}   ratio {o / h:.1f}x")


def profile(rounds: int = 10, runs: int = 300) -> None:
    runner = pyeino_runner(rounds)

    async def many() -> None:
        for _ in range(runs):
            await pyeino_run(runner, "go")

    prof = cProfile.Profile()
    prof.enable()
    anyio.run(many)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


async def main(quick: bool, with_langgraph: bool) -> None:
    budget = 0.2 if quick else 1.0
    await iteration_table(budget, with_langgraph)
    await concurrency_table(1000, with_langgraph)
    await first_token(budget)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph")
    parser.add_argument("--profile", action="store_true", help="cProfile pyeino's 10-round run instead")
    args = parser.parse_args()
    if args.profile:
        profile()
    else:
        anyio.run(main, args.quick, not args.no_langgraph)
