"""Multi-agent overhead: what an AgentTool call, a transfer and a SequentialAgent add over a plain ChatModelAgent
round, against LangGraph's equivalents and hand-written loops.

Run: ``.venv/bin/python benchmarks/bench_multi_agent.py [--quick] [--no-langgraph] [--profile]``. Every contender
plays the same script with models that answer instantly and a trivial tool, so what is measured is the framework.
Rows (µs per run; the contenders' batches interleaved):

0. one agent answering at once (no tool): the unit of row 4;
1. the baseline round: one tool call, then an answer (LangGraph: the prebuilt ReAct agent);
2. the same round where the tool is an ``AgentTool`` whose inner agent answers at once (LangGraph: a compiled
   ReAct subgraph called from a tool; hand loop: an inner loop called as the tool);
3. a transfer: the parent calls ``transfer_to_agent``, the child answers (LangGraph: two ReAct agents as nodes of
   a ``StateGraph``, the handoff tool returning ``Command(goto=child, graph=Command.PARENT)``; hand loop: the
   child's history retold as pyeino's default rewriter does);
4. a ``SequentialAgent`` of 10 ChatModelAgents each answering at once (LangGraph: a 10-node sequential
   ``StateGraph`` of LLM-calling nodes; hand loop: 10 model calls on the shared, retold history).

Then what each row adds over its baseline: rows 2 and 3 over row 1, row 4 over ten runs of row 0 (not for
LangGraph: its row 0 is a ReAct agent, its row 4 nodes are bare model calls), and the time per agent of
Sequentials of 10, 20 and 40 agents.

``--profile [ROW]`` prints a cProfile of pyeino's run of that row (default 2, the AgentTool row).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio

from adk.agents import AgentTool, SequentialAgent, set_sub_agents
from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, tool_message, user_message
from compose.stream import StreamReader
from compose.tools import BaseTool, FunctionTool, tool

FINAL = "All done: the numbers were added."
SEQUENCE = 10


async def add_one(x: int) -> int:
    """Add one.

    Args:
        x: the number.
    """
    return x + 1


TOOL: FunctionTool = tool(add_one)


class BenchModel:
    """Answers instantly and statelessly: round n (n assistant messages so far) makes ``calls[n]``, after them
    it answers ``FINAL``."""

    def __init__(self, calls: Sequence[tuple[str, str]] = ()) -> None:
        self.answers = [
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"call_{i}", index=0, function=FunctionCall(name=name, arguments=arguments))],
            )
            for i, (name, arguments) in enumerate(calls)
        ]
        self.final = Message(role="assistant", content=FINAL)

    def with_tools(self, tools: Sequence[ToolInfo]) -> BenchModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        n = sum(1 for m in messages if m.role == "assistant")
        return self.answers[n] if n < len(self.answers) else self.final

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return StreamReader.from_iterable((await self.generate(messages),))


ADD = ("add_one", '{"x": 1}')
ASK_INNER = ("inner", '{"request": "what is 1 + 1"}')
TRANSFER = ("transfer_to_agent", '{"agent_name": "child"}')


# ------------------------------------------------------------------ hand-written loops


RunTool = Callable[[str, str], Awaitable[str]]


async def run_add_one(name: str, arguments: str) -> str:
    return await TOOL.run(arguments)


async def hand_loop(model: BenchModel, text: str, run_tool: RunTool = run_add_one) -> Message:
    """The floor: a plain ReAct loop over the model and tool."""
    messages = [user_message(text)]
    for _ in range(100):
        answer = await model.generate(messages)
        messages.append(answer)
        if not answer.tool_calls:
            return answer
        for c in answer.tool_calls:
            result = await run_tool(c.function.name, c.function.arguments)
            messages.append(tool_message(result, c.id, tool_name=c.function.name))
    raise RuntimeError("too many rounds")


def hand_agent_tool(outer: BenchModel, inner: BenchModel) -> Callable[[], Awaitable[Message]]:
    async def run_inner(name: str, arguments: str) -> str:
        return (await hand_loop(inner, json.loads(arguments)["request"])).content

    return partial(hand_loop, outer, "go", run_inner)


async def hand_transfer(parent: BenchModel, child: BenchModel, text: str) -> Message:
    """The parent's round, then the child on the history retold as user messages."""
    messages = [user_message(text)]
    answer = await parent.generate(messages)
    (c,) = answer.tool_calls
    dest = json.loads(c.function.arguments)["agent_name"]
    result = f"successfully transferred to agent [{dest}]"
    messages += [answer, tool_message(result, c.id, tool_name=c.function.name)]
    retold = [
        messages[0],
        user_message(f"For context: [parent] called tool: `{c.function.name}` with arguments: {c.function.arguments}."),
        user_message(f"For context: [parent] `{c.function.name}` tool returned result: {result}."),
    ]
    return await child.generate(retold)


async def hand_sequence(models: Sequence[BenchModel], text: str) -> Message:
    history = [user_message(text)]
    answer = None
    for i, model in enumerate(models):
        answer = await model.generate(history)
        history.append(user_message(f"For context: [a{i}] said: {answer.content}."))
    assert answer is not None
    return answer


# ------------------------------------------------------------------ pyeino


def agent(name: str, model: BenchModel, tools: Sequence[BaseTool] = ()) -> ChatModelAgent:
    return ChatModelAgent(name, f"agent {name}", model=model, tools=list(tools), max_iterations=5)


def pyeino_single() -> Runner:
    return Runner(agent("bench", BenchModel()))


def pyeino_baseline() -> Runner:
    return Runner(agent("bench", BenchModel([ADD]), [TOOL]))


def pyeino_agent_tool() -> Runner:
    inner = ChatModelAgent("inner", "answers sub-questions", model=BenchModel())
    return Runner(agent("outer", BenchModel([ASK_INNER]), [AgentTool(inner)]))


def pyeino_transfer() -> Runner:
    return Runner(set_sub_agents(agent("parent", BenchModel([TRANSFER])), [agent("child", BenchModel())]))


def pyeino_sequence(n: int = SEQUENCE) -> Runner:
    agents = [agent(f"a{i}", BenchModel()) for i in range(n)]
    return Runner(SequentialAgent("seq", f"{n} in a row", agents))


async def pyeino_run(runner: Runner, text: str) -> Message | None:
    run = runner.query(text)
    async for event in run:
        if event.error is not None:
            raise event.error
    return run.final_message


# ------------------------------------------------------------------ LangGraph


def fake_model(calls: Sequence[tuple[str, dict[str, Any]]] = ()) -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class FakeModel(BaseChatModel):
        script: tuple[tuple[str, dict[str, Any]], ...] = ()

        @property
        def _llm_type(self) -> str:
            return "bench-fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            n = sum(1 for m in messages if m.type == "ai")
            if n < len(self.script):
                name, args = self.script[n]
                msg = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}])
            else:
                msg = AIMessage(content=FINAL)
            return ChatResult(generations=[ChatGeneration(message=msg)])

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            return self._generate(messages, stop)

    return FakeModel(script=tuple(calls))


def lc_add_one() -> Any:
    from langchain_core.tools import tool as lc_tool

    @lc_tool("add_one")
    async def add(x: int) -> int:
        """Add one."""
        return x + 1

    return add


def react_agent(model: Any, tools: list[Any], **kw: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, **kw)


def langgraph_single() -> Any:
    return react_agent(fake_model(), [])


def langgraph_baseline() -> Any:
    return react_agent(fake_model([("add_one", {"x": 1})]), [lc_add_one()])


def langgraph_agent_tool() -> Any:
    from langchain_core.tools import tool as lc_tool

    inner = react_agent(fake_model(), [])

    @lc_tool("inner")
    async def ask_inner(request: str) -> str:
        """Answers sub-questions."""
        out = await inner.ainvoke({"messages": [("user", request)]})
        return str(out["messages"][-1].content)

    return react_agent(fake_model([("inner", {"request": "what is 1 + 1"})]), [ask_inner])


def langgraph_transfer() -> Any:
    """LangGraph's documented handoff: agents as nodes, the tool sending the parent graph to the next one."""
    from typing import Annotated

    from langchain_core.messages import ToolMessage
    from langchain_core.tools import InjectedToolCallId
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import InjectedState
    from langgraph.types import Command

    def transfer(agent_name: str, state: Any, tool_call_id: str) -> Any:
        """Transfer the question to another agent."""
        result = ToolMessage(
            f"successfully transferred to agent [{agent_name}]", tool_call_id=tool_call_id, name="transfer_to_agent"
        )
        return Command(goto=agent_name, graph=Command.PARENT, update={"messages": [*state["messages"], result]})

    # the injected arguments are told by their annotations, which must be objects (this module's are strings)
    transfer.__annotations__ = {
        "agent_name": str,
        "state": Annotated[MessagesState, InjectedState],
        "tool_call_id": Annotated[str, InjectedToolCallId],
        "return": Command,
    }
    handoff = lc_tool("transfer_to_agent")(transfer)
    parent = react_agent(fake_model([("transfer_to_agent", {"agent_name": "child"})]), [handoff], name="parent")
    child = react_agent(fake_model(), [], name="child")
    graph = StateGraph(MessagesState)
    graph.add_node(parent, destinations=("child",))
    graph.add_node(child)
    graph.add_edge(START, "parent")
    return graph.compile()


def langgraph_sequence(n: int = SEQUENCE) -> Any:
    from langgraph.graph import END, START, MessagesState, StateGraph

    model = fake_model()

    async def call_model(state: Any) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    previous = START
    for i in range(n):
        graph.add_node(f"a{i}", call_model)
        graph.add_edge(previous, f"a{i}")
        previous = f"a{i}"
    graph.add_edge(previous, END)
    return graph.compile()


async def langgraph_run(graph: Any, text: str) -> Any:
    out = await graph.ainvoke({"messages": [("user", text)]})
    assert out["messages"][-1].content == FINAL, out["messages"][-1]
    return out


# ------------------------------------------------------------------ measurement


async def per_call_pair(
    fns: Sequence[Callable[[], Awaitable[Any]]], budget: float, repeats: int = 10
) -> list[float]:
    """Seconds per call of each of ``fns``: the best of ``repeats`` batches each, after a warm-up, their batches
    interleaved, so that a slow spell of the machine (other load, frequency changes) weighs on all of them alike
    (the best batch is the least disturbed)."""
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


ROWS: list[tuple[str, str, Callable[[], Runner], Callable[[], Any], Callable[[], Callable[[], Awaitable[Any]]]]] = [
    ("0", "one agent, answers at once", pyeino_single, langgraph_single,
     lambda: partial(hand_loop, BenchModel(), "go")),
    ("1", "baseline: tool call + answer", pyeino_baseline, langgraph_baseline,
     lambda: partial(hand_loop, BenchModel([ADD]), "go")),
    ("2", "AgentTool call + answer", pyeino_agent_tool, langgraph_agent_tool,
     lambda: hand_agent_tool(BenchModel([ASK_INNER]), BenchModel())),
    ("3", "transfer, child answers", pyeino_transfer, langgraph_transfer,
     lambda: partial(hand_transfer, BenchModel([TRANSFER]), BenchModel(), "go")),
    ("4", f"Sequential of {SEQUENCE} agents", pyeino_sequence, langgraph_sequence,
     lambda: partial(hand_sequence, [BenchModel() for _ in range(SEQUENCE)], "go")),
]  # fmt: skip


async def main(quick: bool, with_langgraph: bool) -> None:
    # every contender of every row in one interleaved measurement, in short batches: the differences between
    # rows are as trustworthy as the ratios within one (the machine is shared)
    budget, repeats = (0.2, 20) if quick else (1.0, 60)
    names = ["hand loop", "pyeino"] + (["LangGraph"] if with_langgraph else [])
    width = len(names)
    fns: list[Callable[[], Awaitable[Any]]] = []
    for _, _, ours, theirs, hand in ROWS:
        fns += [hand(), partial(pyeino_run, ours(), "go")]
        if with_langgraph:
            fns.append(partial(langgraph_run, theirs(), "go"))
    flat = await per_call_pair(fns, len(fns) * budget, repeats)
    times = {key: flat[i * width : (i + 1) * width] for i, (key, *_) in enumerate(ROWS)}

    print("1. time per run (µs; ratio = contender / hand loop)")
    header = f"{'':>2} {'':<30}" + "".join(f" {n:>10}" for n in names)
    header += f" {'pyeino/hand':>12}" + (f" {'LG/hand':>8} {'LG/pyeino':>10}" if with_langgraph else "")
    print(header)
    for key, label, *_ in ROWS:
        t = times[key]
        row = f"{key:>2} {label:<30}" + "".join(f" {x * 1e6:>10.1f}" for x in t) + f" {t[1] / t[0]:>11.1f}x"
        if with_langgraph:
            row += f" {t[2] / t[0]:>7.1f}x {t[2] / t[1]:>9.1f}x"
        print(row)

    print("\n2. what each row adds over its baseline (µs; rows 2-3 over row 1, row 4 over 10 x row 0)")
    print(f"{'':>2} {'':<30}" + "".join(f" {n:>10}" for n in names))
    for key, base, label in (
        ("2", "1", "AgentTool call (inner run incl.)"),
        ("3", "1", "transfer (child run incl.)"),
        ("4", "0", f"Sequential over {SEQUENCE} lone runs"),
    ):
        scale = SEQUENCE if key == "4" else 1
        added = [f"{(x - scale * b) * 1e6:.1f}" for x, b in zip(times[key], times[base], strict=True)]
        if key == "4" and with_langgraph:
            added[2] = "n/a"  # its row 0 is a ReAct agent, its row 4 nodes are bare model calls
        print(f"{key:>2} {label:<30}" + "".join(f" {x:>10}" for x in added))
    per_agent = [x / SEQUENCE for x in times["4"]]
    print(f"{'':>2} {'Sequential, per agent':<30}" + "".join(f" {x * 1e6:>10.1f}" for x in per_agent))

    print("\n3. Sequential of N agents: time per agent (µs; each agent's input retells the whole history so far)")
    print(f"{'N':>4}" + "".join(f" {n:>10}" for n in names))
    sizes = (10, 20, 40)
    fns = []
    for n in sizes:
        models = [BenchModel() for _ in range(n)]
        fns += [partial(hand_sequence, models, "go"), partial(pyeino_run, pyeino_sequence(n), "go")]
        if with_langgraph:
            fns.append(partial(langgraph_run, langgraph_sequence(n), "go"))
    flat = await per_call_pair(fns, len(fns) * budget, repeats)
    for i, n in enumerate(sizes):
        print(f"{n:>4}" + "".join(f" {x / n * 1e6:>10.1f}" for x in flat[i * width : (i + 1) * width]))


def profile(row: str, runs: int = 1000) -> None:
    (make,) = [ours for key, _, ours, _, _ in ROWS if key == row]
    runner = make()
    prof = cProfile.Profile()

    async def many() -> None:
        for _ in range(10):  # warm-up: imports and graph compiles out of the profile
            await pyeino_run(runner, "go")
        prof.enable()
        for _ in range(runs):
            await pyeino_run(runner, "go")
        prof.disable()

    anyio.run(many)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph")
    parser.add_argument(
        "--profile", nargs="?", const="2", choices=[r[0] for r in ROWS], help="cProfile pyeino's row (2) instead"
    )
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
    else:
        anyio.run(main, args.quick, not args.no_langgraph)
