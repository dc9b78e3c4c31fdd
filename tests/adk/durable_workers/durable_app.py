"""The agents the durable-run tests serve: ``python -m adk.durable worker durable_app:build --db URL``.

The model's answers are functions of the conversation (so any worker continues any run): ``ROUNDS`` rounds of
tool calls (``PYEINO_TEST_PARALLEL`` calls each, ids ``r<round>c<i>``), then ``answer <user text> <sum of tool
results>``. The ``record`` tool appends ``(run id, call id, pid)`` to the ``tool_log`` table of
``PYEINO_TEST_LOG_DB`` (a SQLAlchemy URL) for every execution. A call whose id starts with one of the prefixes
in ``PYEINO_TEST_HOLD_CALLS`` is held: it prints ``held <run id> <call id>`` and waits for a shared lock of the
file ``PYEINO_TEST_HOLD``, which the test holds exclusively until it releases the calls (``harness.Gate``).

``build_slow``: another agent, ``slow``, answering ``slow <user text> <sum>``. ``build_approval``: the ``pay``
tool needs approval. ``build_stream``: the model streams its final answer word
by word and, after the first word, waits for the gate (``PYEINO_TEST_HOLD``). ``build_graph``: a compiled
graph of three parallel branches of two ``durable_step`` lambdas each (logged and held like ``record``, call
ids ``b<branch>s<stage>``).
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import sqlalchemy as sa

from adk.chat_model.agent import ChatModelAgent
from adk.durable import durable_step
from adk.middlewares.approval import ApprovalMiddleware
from compose import END, START, Graph
from compose.runnable import Runnable
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo
from compose.stream import StreamReader
from compose.tools import tool
from compose.tools.middleware import get_tool_call_id

ROUNDS = int(os.environ.get("PYEINO_TEST_ROUNDS", "5"))
PARALLEL = int(os.environ.get("PYEINO_TEST_PARALLEL", "1"))

_engine: sa.Engine | None = None
_meta = sa.MetaData()
tool_log = sa.Table(
    "tool_log",
    _meta,
    sa.Column("run_id", sa.Text),
    sa.Column("call_id", sa.Text),
    sa.Column("pid", sa.Integer),
)


def log_engine() -> sa.Engine:
    global _engine
    if _engine is None:
        url = sa.make_url(os.environ["PYEINO_TEST_LOG_DB"])
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        _engine = sa.create_engine(url)
        _meta.create_all(_engine, checkfirst=True)
    return _engine


HOLD = os.environ.get("PYEINO_TEST_HOLD", "")
HOLD_CALLS = tuple(p for p in os.environ.get("PYEINO_TEST_HOLD_CALLS", "").split(",") if p)


def _record_sync(call_id: str) -> None:
    from dbos import DBOS

    with log_engine().begin() as c:
        c.execute(sa.insert(tool_log).values(run_id=DBOS.workflow_id, call_id=call_id, pid=os.getpid()))
    if HOLD and call_id.startswith(HOLD_CALLS):
        # held: say so, then wait for the test to release the gate (a blocking shared lock: no polling)
        say(f"held {DBOS.workflow_id} {call_id}")
        _wait_for_gate()


_say_lock = threading.Lock()


def say(line: str) -> None:
    """Write ``line`` to stdout as one line: a single ``write`` of the line and its newline (atomic on a pipe:
    lines from the tool threads never interleave), after whatever Python's buffer held."""
    with _say_lock:
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), (line + "\n").encode())


def _wait_for_gate() -> None:
    with open(HOLD) as gate:
        fcntl.flock(gate, fcntl.LOCK_SH)


@tool
async def record(n: int) -> int:
    """Record this execution and return n.

    Args:
        n: a number.
    """
    await anyio.to_thread.run_sync(_record_sync, get_tool_call_id() or "")
    return n


@tool
async def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: how much.
    """
    await anyio.to_thread.run_sync(_record_sync, get_tool_call_id() or "")
    return f"paid {amount}"


def _answer(messages: Sequence[Message], tool_name: str, label: str = "answer") -> Message:
    tool_results = [m for m in messages if m.role == "tool"]
    done = len(tool_results) // PARALLEL
    user = next(m.content for m in messages if m.role == "user")
    if done < ROUNDS:
        calls = [
            ToolCall(
                id=f"r{done}c{i}",
                function=FunctionCall(name=tool_name, arguments=_arguments(tool_name, done + i)),
            )
            for i in range(PARALLEL)
        ]
        return Message(role="assistant", content="", tool_calls=calls)
    total = sum(int(m.content) for m in tool_results if m.content.isdigit())
    return Message(role="assistant", content=f"{label} {user} {total}")


def _arguments(tool_name: str, value: int) -> str:
    return f'{{"{"amount" if tool_name == "pay" else "n"}": {value}}}'


class FunctionModel:
    """A chat model whose answer is a function of the conversation (stateless, so shared by concurrent runs)."""

    def __init__(self, tool_name: str = "record", gate: bool = False, label: str = "answer") -> None:
        self.tool_name = tool_name
        self.gate = gate
        self.label = label

    def with_tools(self, tools: Sequence[ToolInfo]) -> FunctionModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return _answer(messages, self.tool_name, self.label)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        whole = _answer(messages, self.tool_name, self.label)
        if whole.tool_calls:
            return StreamReader.from_iterable([whole])
        words = whole.content.split(" ")
        gate = self.gate

        async def chunks() -> Any:
            for i, word in enumerate(words):
                yield Message(role="assistant", content=word if i == 0 else " " + word)
                if i == 0 and gate:
                    await anyio.to_thread.run_sync(_wait_for_gate)

        return StreamReader.from_async_iterator(chunks())


def build() -> ChatModelAgent:
    return ChatModelAgent("worker", "records numbers", model=FunctionModel(), tools=[record])


def build_slow() -> ChatModelAgent:
    """Another agent (``slow``, answering ``slow <user text> <sum>``), for workers of two agents on one database."""
    return ChatModelAgent("slow", "records numbers slowly", model=FunctionModel(label="slow"), tools=[record])


def build_approval() -> ChatModelAgent:
    return ChatModelAgent(
        "payer",
        "pays",
        model=FunctionModel("pay"),
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "pay")],
    )


def build_stream() -> ChatModelAgent:
    return ChatModelAgent("streamer", "streams", model=FunctionModel(gate=bool(HOLD)), tools=[record])


def _stage(branch: int, stage: int) -> Any:
    @durable_step(name=f"graph.b{branch}.s{stage}")
    async def run(n: int) -> int:
        await anyio.to_thread.run_sync(_record_sync, f"b{branch}s{stage}")
        return n + 10 * branch + stage

    return run


def build_graph() -> Runnable[int, int]:
    """n -> the sum over the branches i of n + 20 i + 3 (= 3 n + 69)."""
    g = Graph[int, int]()
    g.add_lambda_node("join", lambda d: sum(d.values()))
    for i in range(3):
        g.add_lambda_node(f"b{i}s1", _stage(i, 1))
        g.add_lambda_node(f"b{i}s2", _stage(i, 2), output_key=f"b{i}")
        g.add_edge(START, f"b{i}s1")
        g.add_edge(f"b{i}s1", f"b{i}s2")
        g.add_edge(f"b{i}s2", "join")
    g.add_edge("join", END)
    return g.compile(name="branches", trigger_mode="all_predecessor")
