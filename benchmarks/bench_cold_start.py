"""Cold start: the time and memory a fresh process needs to import the framework and build an agent.

Run from the repository root (the children import pyeino from the current directory):
``.venv/bin/python benchmarks/bench_cold_start.py [--runs N] [--no-langgraph]``. Every contender runs in a fresh
interpreter, several times, the contenders interleaved; the table shows medians of

- ``in-process``: from the first line of the script to its end (imports, building the agent, the optional round);
- ``process``: the whole process, interpreter start-up and shut-down included, as the parent sees it;
- ``peak RSS``: the child's maximum resident set size (``wait4``'s ``ru_maxrss``).

Every contender imports compiled bytecode (cached in a temporary directory by a warm-up run), as an installed
package does; compiling pyeino's sources would add about 0.09 s.

Contenders: pyeino (``import compose, adk``, a ``ChatModelAgent`` on ``ScriptedChatModel`` with one tool; then
also one round: a tool call and a final answer, which compiles the graph), a bare asyncio + pydantic script (the
floor for an async pydantic application), and LangGraph (``import langgraph`` and its prebuilt ReAct agent on a
fake chat model; then also one round). The interpreter alone (``python -c pass``) is shown for reference.
Goal for pyeino's import and build: at most 0.35 s and 40 MiB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass

CLOCK = "import time\n_t0 = time.perf_counter()\n"
REPORT = "\nprint(time.perf_counter() - _t0)\n"

PYEINO_BUILD = """
import compose, adk
from compose import ScriptedChatModel, tool, assistant_message, ToolCall, FunctionCall
from adk import ChatModelAgent, Runner

async def add_one(x: int) -> int:
    \"\"\"Add one.

    Args:
        x: the number.
    \"\"\"
    return x + 1

call = ToolCall(id="call_0", function=FunctionCall(name="add_one", arguments='{"x": 1}'))
model = ScriptedChatModel([assistant_message("", tool_calls=[call]), "two"])
agent = ChatModelAgent("cold", "a cold start", model=model, tools=[tool(add_one)])
runner = Runner(agent)
"""

PYEINO_ROUND = """
import anyio

async def one_round() -> None:
    async for event in runner.query("add one to one"):
        if event.error is not None:
            raise event.error

anyio.run(one_round)
"""

BASELINE = """
import asyncio
import pydantic

class Message(pydantic.BaseModel):
    role: str
    content: str = ""

async def main() -> Message:
    await asyncio.sleep(0)
    return Message.model_validate({"role": "assistant", "content": "two"})

asyncio.run(main())
"""

LANGGRAPH_BUILD = """
import warnings
import langgraph
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

class FakeModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "cold-fake"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if any(m.type == "ai" for m in messages):
            msg = AIMessage(content="two")
        else:
            msg = AIMessage(content="", tool_calls=[{"name": "add_one", "args": {"x": 1}, "id": "call_0"}])
        return ChatResult(generations=[ChatGeneration(message=msg)])

@tool
async def add_one(x: int) -> int:
    \"\"\"Add one.\"\"\"
    return x + 1

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    agent = create_react_agent(FakeModel(), [add_one])
"""

LANGGRAPH_ROUND = """
import asyncio

asyncio.run(agent.ainvoke({"messages": [("user", "add one to one")]}))
"""


@dataclass(frozen=True, slots=True)
class Sample:
    in_process: float
    process: float
    rss_mib: float


def measure(code: str, env: dict[str, str]) -> Sample:
    """Run ``code`` in a fresh interpreter: its own time, the process's time, and its peak RSS."""
    read, write = os.pipe()
    start = time.perf_counter()
    # spawned by hand rather than by subprocess, so that wait4 reaps it and reports its own peak RSS
    argv = [sys.executable, "-c", CLOCK + code + REPORT]
    pid = os.posix_spawn(sys.executable, argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, write, 1)])
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    process = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"contender failed (exit status {os.waitstatus_to_exitcode(status)}):\n{code}")
    in_process = float(out.strip().splitlines()[-1])
    return Sample(in_process, process, usage.ru_maxrss / 1024)  # ru_maxrss is in KiB on Linux


def median(samples: list[Sample]) -> Sample:
    return Sample(
        statistics.median(s.in_process for s in samples),
        statistics.median(s.process for s in samples),
        statistics.median(s.rss_mib for s in samples),
    )


def main(runs: int, with_langgraph: bool) -> None:
    contenders = [
        ("python -c pass", ""),
        ("asyncio + pydantic", BASELINE),
        ("pyeino: import + build agent", PYEINO_BUILD),
        ("pyeino: ... + one round", PYEINO_BUILD + PYEINO_ROUND),
    ]
    if with_langgraph:
        contenders += [
            ("LangGraph: import + build agent", LANGGRAPH_BUILD),
            ("LangGraph: ... + one round", LANGGRAPH_BUILD + LANGGRAPH_ROUND),
        ]
    samples: dict[str, list[Sample]] = {name: [] for name, _ in contenders}
    with tempfile.TemporaryDirectory(prefix="bench-cold-pycache-") as pycache:
        # every contender starts from compiled bytecode, as an installed package does, even where
        # PYTHONDONTWRITEBYTECODE is set or the sources' __pycache__ is not writable; the warm-up run writes it
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = pycache
        for _, code in contenders:
            measure(textwrap.dedent(code), env)
        # interleave the contenders, so that a slow spell of the machine weighs on all of them alike
        for _ in range(runs):
            for name, code in contenders:
                samples[name].append(measure(textwrap.dedent(code), env))
    print(f"cold start, median of {runs} fresh processes (bytecode cached)")
    print(f"{'contender':<34} {'in-process':>11} {'process':>9} {'peak RSS':>10}")
    for name, _ in contenders:
        m = median(samples[name])
        print(f"{name:<34} {m.in_process:>10.3f}s {m.process:>8.3f}s {m.rss_mib:>6.1f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per contender (default 7)")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph")
    args = parser.parse_args()
    main(args.runs, not args.no_langgraph)
