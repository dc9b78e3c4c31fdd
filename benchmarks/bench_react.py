"""ReAct agent overhead: pyeino's ChatModelAgent against LangGraph's prebuilt ReAct agent and a hand-written loop.

Run: ``.venv/bin/python benchmarks/bench_react.py [--quick] [--profile]``. Every contender plays the same
script with a model that answers instantly (K rounds of one tool call, then a final answer) and a trivial tool,
so what is measured is the framework. Prints:

1. pyeino against a hand-written loop making the same calls, as ratios (issue 29's goals in the last column):
   per-iteration time (one model call + one tool call) of a K-round run, K = 1, 10, 50; the time from calling
   the runner to the first streamed token at the consumer (the hand loop calls ``model.stream``); each also
   driven the way typical user code does ("typical": ``UserModel``, ``typical_run``, ``typical_first_token``;
   issue 35), with its cost relative to the bench's own usage, and with ``enable_streaming=True`` against
   ``hand_stream_loop`` (its ratio over the non-streaming one's); and the multi-agent rows of
   ``bench_multi_agent.py`` (an ``AgentTool`` call, a transfer to a sub-agent, a ``SequentialAgent`` of ten).
   Every contender of every row is measured in one interleaved loop of short batches; "best" is best batch over
   best batch, "median" and [p10-p90] the spread of the ratios within one repetition (both batches of a
   repetition see the same load of the shared machine);
2. 1,000 concurrent 5-round runs: wall time, runs per second (goal: >= 1,000/s) and peak traced memory;
3. the live memory of a run parked in its model call after its third round (1,000 parked at once);
4. Python calls and opcodes per run (``opcount.py``; the figures load on the machine does not move);
5. with LangGraph installed (unless ``--no-langgraph``): the per-iteration table against its prebuilt agent.

``--profile [bench|typical|streaming]`` prints a cProfile of pyeino's 10-round run, driven by ``pyeino_run`` or
``typical_run`` (``streaming``: ``typical_run`` with ``enable_streaming=True``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
import tracemalloc
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel

from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.runner import Runner
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, concat_messages, tool_message, user_message
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


class UserModel:
    """The model of typical user code: a class of its own (no pyeino base), ``with_tools`` returning a new model,
    ``stream`` returning a reader made with ``StreamReader.from_iterable``; it answers as ``BenchModel`` does."""

    def __init__(self, rounds: int, tools: Sequence[ToolInfo] = ()) -> None:
        self.rounds = rounds
        self.tools = list(tools)
        script = BenchModel(rounds)
        self.answers, self.final, self.chunks = script.answers, script.final, list(script.final_chunks)

    def with_tools(self, tools: Sequence[ToolInfo]) -> UserModel:
        return UserModel(self.rounds, tools)

    async def generate(self, messages: Sequence[Message], **kwargs: Any) -> Message:
        n = sum(1 for m in messages if m.role == "assistant")
        return self.answers[n] if n < self.rounds else self.final

    async def stream(self, messages: Sequence[Message], **kwargs: Any) -> StreamReader[Message]:
        n = sum(1 for m in messages if m.role == "assistant")
        return StreamReader.from_iterable([self.answers[n]] if n < self.rounds else self.chunks)


# ------------------------------------------------------------------ contenders


async def hand_loop(model: BenchModel | UserModel, text: str) -> Message:
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


async def hand_stream_loop(model: BenchModel | UserModel, text: str) -> Message:
    """The streaming floor: a plain ReAct loop calling ``model.stream``, concatenating each answer's chunks."""
    messages = [user_message(text)]
    for _ in range(100):
        async with await model.stream(messages) as reader:
            answer = concat_messages([chunk async for chunk in reader])
        messages.append(answer)
        if not answer.tool_calls:
            return answer
        for c in answer.tool_calls:
            messages.append(tool_message(await TOOL.run(c.function.arguments), c.id, tool_name=c.function.name))
    raise RuntimeError("too many rounds")


def pyeino_runner(rounds: int, streaming: bool = False, yields: bool = False, typical: bool = False) -> Runner:
    """The bench's agent; ``typical``: built as typical user code does (``UserModel``, a ``ToolsConfig``)."""
    model = UserModel(rounds) if typical else BenchModel(rounds, yields=yields)
    tools = ToolsConfig(tools=[TOOL]) if typical else [TOOL]
    agent = ChatModelAgent("bench", "benchmark", model=model, tools=tools, max_iterations=rounds + 1)
    return Runner(agent, enable_streaming=streaming)


async def pyeino_run(runner: Runner, text: str) -> Message | None:
    run = runner.query(text)
    async for event in run:
        if event.error is not None:
            raise event.error
    return run.final_message


async def typical_run(runner: Runner, text: str) -> Message | None:
    """A run as typical user code drives it: ``async for`` over ``query()`` without ``async with``, each event's
    message read with ``get_message()``."""
    answer = None
    async for event in runner.query(text):
        if event.error is not None:
            raise event.error
        if event.output is not None and event.output.message_output is not None:
            answer = await event.output.message_output.get_message()
    return answer


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


def _ratios(hand: list[float], ours: list[float]) -> tuple[float, float, float, float]:
    """(best/best, median, low, high) of the per-repetition ratios ours/hand (low/high: 10th and 90th
    percentiles)."""
    per = sorted(o / h for h, o in zip(hand, ours, strict=True))
    n = len(per)
    return min(ours) / min(hand), statistics.median(per), per[n // 10], per[min(n - 1, (9 * n) // 10)]


async def interleaved(
    fns: Sequence[Callable[[], Awaitable[Any]]], budget: float, repeats: int
) -> list[list[float]]:
    """Seconds per call of each of ``fns`` in each of ``repeats`` repetitions (a short batch of each function
    per repetition, the functions alternating), after a warm-up: a slow spell of the machine weighs on the
    batches of one repetition alike, so the ratios within a repetition are the trustworthy figures."""
    for fn in fns:
        for _ in range(3):
            await fn()
    times: list[list[float]] = [[] for _ in fns]
    slot = budget / repeats / len(fns)
    for r in range(repeats):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            fn = fns[i]
            n, start = 0, time.perf_counter()
            while True:
                await fn()
                n += 1
                elapsed = time.perf_counter() - start
                if elapsed >= slot and n >= 3:
                    break
            times[i].append(elapsed / n)
    return times


def _ratio_cells(hand: list[float], ours: list[float]) -> str:
    best, median, low, high = _ratios(hand, ours)
    return f"{best:>6.1f}x {median:>6.1f}x  [{low:.1f}-{high:.1f}]"


RATIO_HEADER = f"{'best':>7} {'median':>7}  [p10-p90]"


async def ratio_table(budget: float, repeats: int) -> None:
    """The issue-29 figures, as ratios to a hand loop making the same calls, every contender of every row
    interleaved in one measurement."""
    from bench_multi_agent import ROWS as MULTI_ROWS
    from bench_multi_agent import pyeino_run as multi_run

    rows: list[tuple[str, float, Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = []
    for k in (1, 10, 50):
        goal = 6.0 if k == 10 else 8.0 if k == 1 else 0.0
        rows.append((f"K={k} per iteration", goal,
                     partial(hand_loop, BenchModel(k), "go"), partial(pyeino_run, pyeino_runner(k), "go")))
        user = partial(typical_run, pyeino_runner(k, typical=True), "go")
        rows.append((f"K={k}  typical usage", goal, partial(hand_loop, UserModel(k), "go"), user))
        streamed = partial(typical_run, pyeino_runner(k, streaming=True, typical=True), "go")
        rows.append((f"K={k}  typical streaming", goal, partial(hand_stream_loop, UserModel(k), "go"), streamed))
    hand_ttft, ours_ttft = first_token_pair()
    rows.append(("time to first token", 8.0, hand_ttft, ours_ttft))
    rows.append(("  typical usage", 8.0, hand_ttft, typical_first_token()))
    goals = {"2": ("AgentTool", 10.0), "3": ("transfer to a sub-agent", 12.0), "4": ("Sequential of 10", 12.0)}
    for key, _, ours, _, hand in MULTI_ROWS:
        if key in goals:
            label, goal = goals[key]
            rows.append((label, goal, hand(), partial(multi_run, ours(), "go")))
    fns = [f for _, _, h, o in rows for f in (h, o)]
    times = await interleaved(fns, len(fns) * budget, repeats)
    print(f"1. pyeino against a hand-written loop making the same calls ({repeats} interleaved repetitions)")
    print(f"{'':<26} {'hand µs':>9} {'pyeino µs':>10} {RATIO_HEADER}   goal")
    for i, (label, goal, _, _) in enumerate(rows):
        hand, ours = times[2 * i], times[2 * i + 1]
        scale = int(label.split("=")[1].split()[0]) + 1 if label.startswith("K=") else 1
        cells = _ratio_cells(hand, ours)
        target = f"<= {goal:.0f}x" if goal else ""
        print(f"{label:<26} {min(hand) / scale * 1e6:>9.1f} {min(ours) / scale * 1e6:>10.1f} {cells}   {target}")
    # issue 35: typical user code costs what the bench's own usage does (goal: within 10%)
    versus = [
        f"{label.split()[0] if label.startswith('K=') else 'first token'} "
        f"{min(times[2 * i + 3]) / min(times[2 * i + 1]):.2f}x"
        for i, (label, *_) in enumerate(rows[:-1])
        if rows[i + 1][0].endswith("typical usage")
    ]
    print(f"typical usage / the bench's (pyeino best over best): {', '.join(versus)}   goal <= 1.10x")
    best = [min(ours) / min(hand) for hand, ours in zip(times[::2], times[1::2], strict=True)]
    streaming = [f"{r[0].split()[0]} {best[i] / best[i - 1]:.2f}x" for i, r in enumerate(rows) if "streaming" in r[0]]
    print(f"typical streaming ratio / typical ratio (best over best): {', '.join(streaming)}")


async def iteration_table(budget: float, with_langgraph: bool) -> None:
    print("\n5. per-iteration time of a K-round run against LangGraph's prebuilt ReAct agent (µs)")
    print(f"{'K':>4} {'hand loop':>11} {'pyeino':>11} {'ratio':>7} {'LangGraph':>11} {'ratio':>7}")
    for k in (1, 10, 50):
        lg = langgraph_agent(k)
        call = partial(lg.ainvoke, {"messages": [("user", "go")]}, {"recursion_limit": 2 * k + 10})
        pair = [partial(hand_loop, BenchModel(k), "go"), partial(pyeino_run, pyeino_runner(k), "go"), call]
        hand, ours, lg_t = (min(t) / (k + 1) for t in await interleaved(pair, 3 * budget, 10))
        print(
            f"{k:>4} {hand * 1e6:>11.1f} {ours * 1e6:>11.1f} {ours / hand:>6.1f}x {lg_t * 1e6:>11.1f} "
            f"{lg_t / hand:>6.1f}x"
        )


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


def first_token_pair() -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]:
    """Time to the first streamed token: the hand loop calling ``model.stream``, pyeino's streaming runner."""
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

    return hand, ours


def typical_first_token() -> Callable[[], Awaitable[Any]]:
    """Time to the first streamed token as typical user code reads it: ``async for`` over ``query()`` without
    ``async with``, the first chunk of the first event's stream, then ``break`` (nothing closed explicitly)."""
    runner = pyeino_runner(0, streaming=True, typical=True)

    async def first() -> None:
        async for event in runner.query("hi"):
            variant = event.output.message_output if event.output is not None else None
            if variant is not None and variant.message_stream is not None:
                async for _ in variant.message_stream:
                    break
                break

    return first


class ParkingModel(BenchModel):
    """``BenchModel`` whose call after round ``park_at`` waits at a gate: the run is parked mid-way."""

    def __init__(self, rounds: int, park_at: int) -> None:
        super().__init__(rounds)
        self.park_at = park_at
        self.gate = anyio.Event()
        self.parked = 0
        self.all_parked = anyio.Event()
        self.expected = 0

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        if self._round(messages) == self.park_at:
            self.parked += 1
            if self.parked == self.expected:
                self.all_parked.set()
            await self.gate.wait()
        return await super().generate(messages, **opts)


async def parked_bytes(n: int, rounds: int, park_at: int, pyeino: bool) -> float:
    """Live bytes per run (tracemalloc, after a collection) of ``n`` runs parked in their model call after
    ``park_at`` rounds, less what was live before they started."""
    model = ParkingModel(rounds, park_at)
    model.expected = n
    if pyeino:
        agent = ChatModelAgent("bench", "benchmark", model=model, tools=[TOOL], max_iterations=rounds + 1)
        runner = Runner(agent)
        model.park_at = -1
        await pyeino_run(runner, "warm")  # built and warm: the graph is compiled once, not per run
        model.park_at = park_at
        one: Callable[[], Awaitable[Any]] = partial(pyeino_run, runner, "go")
    else:
        one = partial(hand_loop, model, "go")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
            await model.all_parked.wait()
            gc.collect()
            live = tracemalloc.get_traced_memory()[0]
            model.gate.set()
    finally:
        tracemalloc.stop()
    return (live - before) / n


async def parked_table(n: int) -> None:
    print(f"\n3. {n} runs parked in their model call after their third round: live memory per run (tracemalloc)")
    hand = await parked_bytes(n, 5, 3, pyeino=False)
    ours = await parked_bytes(n, 5, 3, pyeino=True)
    print(f"hand loop {hand / 1024:.1f} KiB   pyeino {ours / 1024:.1f} KiB   (goal: pyeino <= 10 KiB)")


def counts_table() -> None:
    """Python calls and opcodes per run: ``opcount.py``'s ReAct rows, figures the machine's load does not move."""
    import opcount

    print("\n4. Python calls and opcodes per run (sys.settrace; C code not counted)")
    anyio.run(opcount.main, "react:")


def profile(usage: str, rounds: int = 10, runs: int = 300) -> None:
    runner = pyeino_runner(rounds, streaming=usage == "streaming", typical=usage != "bench")
    drive = pyeino_run if usage == "bench" else typical_run

    async def many() -> None:
        for _ in range(runs):
            await drive(runner, "go")

    prof = cProfile.Profile()
    prof.enable()
    anyio.run(many)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


async def main(quick: bool, with_langgraph: bool) -> None:
    budget, repeats = (0.1, 10) if quick else (0.5, 30)
    await ratio_table(budget, repeats)
    await concurrency_table(1000, with_langgraph)
    await parked_table(1000)
    if with_langgraph:
        await iteration_table(budget, with_langgraph)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph")
    parser.add_argument(
        "--profile", nargs="?", const="bench", choices=("bench", "typical", "streaming"), help="cProfile instead"
    )
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
    else:
        anyio.run(main, args.quick, not args.no_langgraph)
        counts_table()
