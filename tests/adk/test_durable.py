"""adk.durable in one process: the JSON serializer and the pickle refusal, the wrappers outside a workflow, step
ids of parallel tool calls in call order, and the trio error (the multi-process tests are in
test_durable_workers.py)."""

from __future__ import annotations

import base64
import pickle
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("dbos", reason="dbos is not installed (pip install 'pyeino[dbos]')")

from dbos import _serialization as dbos_serialization

from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.durable import (
    DurableApp,
    DurableChatModel,
    DurableClient,
    DurableTool,
    JsonSerializer,
    durable_step,
    refuse_pickled_rows,
)
from adk.errors import DurableBackendError, DurableRunError, DurableSerializationError, DurableStepError
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo
from compose.stream import StreamReader
from compose.tools import tool
from compose.tools.middleware import InvokableToolEndpoint, ToolInput, ToolMiddleware, ToolOutput

pytestmark = pytest.mark.anyio


def test_json_serializer_round_trips_json_messages_and_errors() -> None:
    s = JsonSerializer()
    msg = Message(role="assistant", content="hi", tool_calls=[ToolCall(id="c1", function=FunctionCall(name="f"))])
    value = {"a": [1, 2.5, None, True, "x"], "m": msg, "t": (1, 2)}
    text = s.serialize(value)
    assert s.deserialize(text) == {"a": [1, 2.5, None, True, "x"], "m": msg, "t": [1, 2]}
    err = s.deserialize(s.serialize(ValueError("bad input")))
    assert isinstance(err, DurableStepError) and (err.error_type, err.message) == ("ValueError", "bad input")
    again = s.deserialize(s.serialize(err))  # a replayed error keeps its original type
    assert isinstance(again, DurableStepError) and again.error_type == "ValueError"
    run_error = s.deserialize(s.serialize(DurableRunError("r1", "ToolExecutionError", "boom")))
    assert (run_error.error_type, run_error.message) == ("ToolExecutionError", "boom")


def test_json_serializer_refuses_values_that_are_not_json() -> None:
    with pytest.raises(DurableSerializationError, match="set is not JSON"):
        JsonSerializer().serialize({"a": {1, 2}})
    with pytest.raises(DurableSerializationError, match="a mapping key is int"):
        JsonSerializer().serialize({1: "a"})


def test_pickled_rows_are_refused_not_unpickled() -> None:
    refuse_pickled_rows()
    pickled = base64.b64encode(pickle.dumps({"x": 1})).decode()
    # a row marked py_pickle: DBOS would unpickle it whatever serializer is configured
    with pytest.raises(DurableSerializationError, match="pickled"):
        dbos_serialization.deserialize_value(pickled, "py_pickle", JsonSerializer())
    with pytest.raises(DurableSerializationError, match="pickled"):
        dbos_serialization.deserialize_args(pickled, "py_pickle", JsonSerializer())
    # a row in our format that is not JSON (e.g. pickled bytes under another name)
    with pytest.raises(DurableSerializationError, match="not JSON"):
        dbos_serialization.deserialize_value(pickled, "pyeino_json", JsonSerializer())
    with pytest.raises(DurableSerializationError, match="pyeino stores JSON only"):
        native = dbos_serialization.WorkflowSerializationFormat.NATIVE
        dbos_serialization.serialize_value({"x": 1}, native, JsonSerializer())


class _Model:
    """Round 0: three parallel calls of ``slow``; then an answer with the results."""

    def with_tools(self, tools: Sequence[ToolInfo]) -> _Model:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        results = [m.content for m in messages if m.role == "tool"]
        if results:
            return Message(role="assistant", content="got " + ",".join(results))
        calls = [ToolCall(id=f"c{i}", function=FunctionCall(name="slow", arguments=f'{{"n": {i}}}')) for i in range(3)]
        return Message(role="assistant", content="", tool_calls=calls)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return StreamReader.from_iterable([await self.generate(messages)])


async def test_wrappers_outside_a_workflow_are_the_plain_model_and_tool() -> None:
    @tool
    async def double(n: int) -> int:
        """Double n.

        Args:
            n: a number.
        """
        return 2 * n

    model = DurableChatModel(_Model(), prefix="a.")
    answer = await model.generate([Message(role="user", content="go")])
    assert [c.id for c in answer.tool_calls] == ["c0", "c1", "c2"]
    assert await DurableTool(double, prefix="a.").run('{"n": 4}') == "8"
    step = durable_step(lambda x: x + 1, name="inc")
    assert await step(1) == 2
    assert repr(DurableTool(double)) == "DurableTool('double', prefix='')"


async def _assert_trio_is_refused(db: str) -> None:
    """Under trio the durable APIs raise the clear error (DBOS is asyncio-only)."""
    client = DurableClient(db)
    try:
        with pytest.raises(DurableBackendError, match="asyncio-only: it cannot run under trio"):
            await client.submit("go")
        with pytest.raises(DurableBackendError):
            await client.handle("r").result()
        with pytest.raises(DurableBackendError):
            [e async for e in client.handle("r").events()]
    finally:
        client._dbos.destroy()


async def _durable_db(tmp_path: Path, backend: str) -> str | None:
    """A new SQLite system database; under trio, None once the durable APIs refused to run on it."""
    db = f"sqlite:///{tmp_path / 'system.db'}"
    if backend == "trio":
        await _assert_trio_is_refused(db)
        return None
    return db


def _reverse_order_middleware() -> ToolMiddleware:
    """Runs the calls' tools in reverse call order: c1 starts once c2 has finished, c0 once c1 has."""
    finished: dict[str, anyio.Event] = {f"c{i}": anyio.Event() for i in range(3)}

    def wrap(next_: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            i = int(inp.call_id[1:])
            if i < 2:
                await finished[f"c{i + 1}"].wait()
            try:
                return await next_(inp)
            finally:
                finished[inp.call_id].set()

        return endpoint

    return ToolMiddleware(invokable=wrap)


@asynccontextmanager
async def _served(target: Any, db: str, executor_id: str) -> AsyncIterator[DurableClient]:
    """A launched ``DurableApp`` serving ``target`` in this process and a client of it; shut down after."""
    app = DurableApp(target, db=db, executor_id=executor_id)
    try:
        await anyio.to_thread.run_sync(app.launch)  # blocking: DBOS refuses it on a running loop
        async with DurableClient(db) as client:
            yield client
    finally:
        await anyio.to_thread.run_sync(app.shutdown)


async def _replay_from_end(client: DurableClient, run_id: str) -> Any:
    """A replay of the whole finished run ``run_id``: a fork that takes every step from the database."""
    steps = await anyio.to_thread.run_sync(lambda: client._dbos.list_workflow_steps(run_id))
    fork = await client._dbos.fork_workflow_async(run_id, max(s["function_id"] for s in steps) + 1, queue_name="pyeino")
    return await client.handle(fork.get_workflow_id()).result()


def _step_names(client: DurableClient, run_id: str) -> list[str]:
    steps = client._dbos.list_workflow_steps(run_id)
    return [s["function_name"] for s in sorted(steps, key=lambda s: s["function_id"])]


async def test_parallel_tool_calls_finishing_out_of_order_replay_by_step_name(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    order: list[str] = []

    @tool
    async def slow(n: int) -> int:
        """Return n.

        Args:
            n: a number.
        """
        order.append(f"c{n}")
        return n

    agent = ChatModelAgent(
        "par", "parallel", model=_Model(), tools=ToolsConfig([slow], middlewares=[_reverse_order_middleware()])
    )
    async with _served(agent, db, "inproc") as client:
        handle = await client.submit("go", run_id="par-1")
        result = await handle.result()
        names = await anyio.to_thread.run_sync(lambda: _step_names(client, "par-1"))
        # a replay takes each call's result at the id its name was recorded at, though the middleware now
        # lets no call wait for another (its events are set): no tool runs again, the answer is the same
        replays = [await _replay_from_end(client, "par-1") for _ in range(3)]
    assert result.output.content == "got 0,1,2"
    assert order == ["c2", "c1", "c0"]  # the tools ran in reverse order, once, at ids reserved in call order
    assert [n for n in names if ".model." in n or ".tool." in n] == [
        "par.model.generate",
        "par.tool.slow[c0]",
        "par.tool.slow[c1]",
        "par.tool.slow[c2]",
        "par.model.generate",
    ]
    assert [r.output.content for r in replays] == ["got 0,1,2"] * 3


class _CountingModel:
    """Answers ``<name>:<last message>``; the first call of ``slow_first`` waits a while first."""

    def __init__(self, name: str, calls: list[str], slow_first: float = 0.0) -> None:
        self.name = name
        self.calls = calls
        self.slow_first = slow_first

    def with_tools(self, tools: Sequence[ToolInfo]) -> _CountingModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        if self.slow_first and self.name not in self.calls:
            await anyio.sleep(self.slow_first)
        self.calls.append(self.name)
        return Message(role="assistant", content=f"{self.name}:{messages[-1].content}")

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        whole = await self.generate(messages)
        head, tail = whole.content[:3], whole.content[3:]
        return StreamReader.from_iterable([Message(role="assistant", content=part) for part in (head, tail)])


async def test_parallel_graph_branches_replay_by_step_name(tmp_path: Path, anyio_backend_name: str) -> None:
    """Two branches of two model nodes each, one DurableChatModel for all four; the first branch's first call is
    slow, so the other branch's steps start between its two. A replay gets the first answers from the database
    in whatever order: each node still gets its own recorded answer, found by the node's address in the step
    name (with ids in start order DBOS would hand a2 the answer of b2)."""
    from compose import END, START, Graph
    from compose.interrupt import current_address

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    calls: list[str] = []

    class ByNode(_CountingModel):
        """Answers as the node it runs in (one model instance, one step prefix, for the four nodes)."""

        async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
            node = (current_address() or "").rsplit(":", 1)[-1]
            if node == "a1" and "a1" not in calls:
                await anyio.sleep(0.3)
            calls.append(node)
            return Message(role="assistant", content=f"{node}:{messages[-1].content}")

    model = DurableChatModel(ByNode("m", calls), prefix="g.")
    g = Graph[list[Message], str]()
    g.add_lambda_node("join", lambda d: d["a"] + "|" + d["b"])
    for branch in "ab":
        first, second = f"{branch}1", f"{branch}2"
        g.add_chat_model_node(first, model)
        g.add_lambda_node(f"{branch}w", lambda m: [m])
        g.add_chat_model_node(second, model)
        g.add_lambda_node(f"{branch}k", lambda m, b=branch: {b: m.content})
        g.add_edge(START, first)
        g.add_edge(first, f"{branch}w")
        g.add_edge(f"{branch}w", second)
        g.add_edge(second, f"{branch}k")
        g.add_edge(f"{branch}k", "join")
    g.add_edge("join", END)
    async with _served(g.compile(name="br", trigger_mode="all_predecessor"), db, "branches") as client:
        result = await (await client.submit([Message(role="user", content="hi")], run_id="br-1")).result()
        names = await anyio.to_thread.run_sync(lambda: _step_names(client, "br-1"))
        replays = [await _replay_from_end(client, "br-1") for _ in range(4)]
    assert result.output == "a2:a1:hi|b2:b1:hi"
    at = "g.model.generate@runnable:br;node:"
    assert names[:4] == [at + "a1", at + "b1", at + "b2", at + "a2"]
    assert [r.output for r in replays] == ["a2:a1:hi|b2:b1:hi"] * 4
    assert sorted(calls) == ["a1", "a2", "b1", "b2"]  # no model was called again by the replays


class _EchoModel:
    def with_tools(self, tools: Sequence[ToolInfo]) -> _EchoModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return Message(role="assistant", content="echo " + messages[-1].content)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return StreamReader.from_iterable([await self.generate(messages)])


async def test_a_compiled_graph_runs_as_a_workflow_with_marked_lambdas_as_steps(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    from compose import END, START, Graph

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    runs: list[str] = []

    @durable_step(name="profile")
    async def profile(user: str) -> list[Message]:
        runs.append(user)
        return [Message(role="user", content=f"profile of {user}")]

    async def unmarked(msg: Message) -> Message:
        return Message(role="assistant", content=msg.content.upper())

    g = Graph[str, Message]()
    g.add_lambda_node("profile", profile)
    g.add_chat_model_node("model", DurableChatModel(_EchoModel(), prefix="g."))
    g.add_lambda_node("upper", unmarked)
    g.add_edge(START, "profile")
    g.add_edge("profile", "model")
    g.add_edge("model", "upper")
    g.add_edge("upper", END)
    async with _served(g.compile(), db, "graph") as client:
        result = await (await client.submit("ada", run_id="g-1")).result()
        steps = await anyio.to_thread.run_sync(lambda: client._dbos.list_workflow_steps("g-1"))
    assert result.status == "completed"
    assert result.output == Message(role="assistant", content="ECHO PROFILE OF ADA")
    assert runs == ["ada"]
    names = [s["function_name"] for s in sorted(steps, key=lambda s: s["function_id"])]
    # the unmarked lambda is not a step; then the output event and the stream's end
    assert names[:2] == ["profile@runnable:graph;node:profile", "g.model.generate@runnable:graph;node:model"]
    assert names[2].startswith("pyeino.event:output:") and names[3:] == ["DBOS.closeStream"]


async def test_a_tool_interrupt_pauses_the_durable_run_and_resumes(tmp_path: Path, anyio_backend_name: str) -> None:
    from compose.interrupt import get_resume_context, interrupt

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return

    @tool
    async def confirm(n: int) -> str:
        """Ask a human to confirm n.

        Args:
            n: a number.
        """
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt({"confirm": n})
        return f"confirmed {n}: {ctx.data}"

    class OneCall(_Model):
        async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
            results = [m.content for m in messages if m.role == "tool"]
            if results:
                return Message(role="assistant", content="got " + ",".join(results))
            call = ToolCall(id="k1", function=FunctionCall(name="confirm", arguments='{"n": 7}'))
            return Message(role="assistant", content="", tool_calls=[call])

    async with _served(ChatModelAgent("conf", "confirms", model=OneCall(), tools=[confirm]), db, "ti") as client:
        handle = await client.submit("go", run_id="ti-1")
        kinds: list[str] = []
        async for event in handle.events():
            kinds.append(event.kind)
            if event.kind == "interrupted":
                (pending,) = event.interrupts
                assert pending.info == {"confirm": 7}
                await handle.resume({pending.id: "yes"})
        result = await handle.result()
        steps = await anyio.to_thread.run_sync(lambda: client._dbos.list_workflow_steps("ti-1"))
        # a replay of the paused run: a fork that takes every step up to the wait for the resume from the
        # database (the paused tool call included), then waits for a resume of its own
        (wait_step,) = [s["function_id"] + 1 for s in steps if s["function_name"] == "pyeino.interrupts"]
        fork = await client._dbos.fork_workflow_async("ti-1", wait_step, queue_name="pyeino")
        forked = client.handle(fork.get_workflow_id())
        await forked.resume({pending.id: "again"})  # the id published by the original execution
        replayed = await forked.result()
    assert replayed.output.content == "got confirmed 7: again"
    assert kinds == ["message", "interrupted", "message", "message"]
    assert result.output.content == "got confirmed 7: yes"
    recorded = {s["function_name"]: s for s in steps}
    # the pause was recorded as the step's result, not as an error
    assert [s["error"] for s in steps if s["function_name"] == "conf.tool.confirm[k1]"] == [None, None]
    assert "pyeino.interrupts" in recorded


def test_all_is_exact_and_importable() -> None:
    import types

    import adk.durable

    public = {
        n
        for n in dir(adk.durable)
        if not n.startswith("_") and not isinstance(getattr(adk.durable, n), types.ModuleType)
    }
    assert set(adk.durable.__all__) == public
    assert list(adk.durable.__all__) == sorted(adk.durable.__all__)


def test_durable_agent_wraps_every_chat_model_agent_of_a_tree() -> None:
    from adk.agents import AgentTool, SequentialAgent, agent_with_deterministic_transfer_to, set_sub_agents
    from adk.durable import DurableChatModel, DurableTool, durable_agent
    from compose.models import ScriptedChatModel

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    def cma(name: str, tools: Sequence[Any] = ()) -> ChatModelAgent:
        return ChatModelAgent(name, "d", model=ScriptedChatModel(["x"]), tools=list(tools))

    leaf = cma("leaf", [ping])
    inner = cma("inner", [AgentTool(leaf)])
    worker = cma("worker", [ping])
    boss = set_sub_agents(cma("boss"), [agent_with_deterministic_transfer_to(worker, ["boss"])])
    tree = SequentialAgent("seq", "d", [boss, inner])
    assert durable_agent(tree) is tree
    for agent in (leaf, inner, worker, boss.agent):
        assert isinstance(agent, ChatModelAgent) and isinstance(agent.model, DurableChatModel), agent.name
    # no step around a whole run: a scope for the steps of its agent
    assert [type(t).__name__ for t in inner.tools_config.tools] == ["ScopedAgentTool"]
    assert isinstance(leaf.tools_config.tools[0], DurableTool) and leaf.tools_config.tools[0].prefix == "leaf."
    durable_agent(tree)  # idempotent
    assert not isinstance(leaf.model.model, DurableChatModel)  # type: ignore[attr-defined]


async def test_an_agent_tool_tree_runs_durably_with_the_inner_calls_as_steps(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    from adk.agents import AgentTool
    from compose.models import ScriptedChatModel

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    call = ToolCall(id="i1", function=FunctionCall(name="ping", arguments="{}"))
    inner = ChatModelAgent(
        "inner",
        "pings",
        model=ScriptedChatModel([Message(role="assistant", tool_calls=[call]), "ponged"]),
        tools=[ping],
    )
    ask = ToolCall(id="o1", function=FunctionCall(name="inner", arguments='{"request": "ping it"}'))
    outer = ChatModelAgent(
        "outer",
        "top",
        model=ScriptedChatModel([Message(role="assistant", tool_calls=[ask]), "all good"]),
        tools=[AgentTool(inner)],
    )
    async with _served(outer, db, "inproc-tree") as client:
        handle = await client.submit("go", run_id="tree-1")
        result = await handle.result()
        steps = await anyio.to_thread.run_sync(lambda: client._dbos.list_workflow_steps("tree-1"))
    assert result.output.content == "all good"
    names = [s["function_name"] for s in sorted(steps, key=lambda s: s["function_id"])]
    calls = [n for n in names if ".model." in n or ".tool." in n]
    assert calls == [
        "outer.model.generate",
        "outer.tool.inner[o1]/inner.model.generate",
        "outer.tool.inner[o1]/inner.tool.ping[i1]",
        "outer.tool.inner[o1]/inner.model.generate",
        "outer.model.generate",
    ]


async def test_concurrent_calls_of_one_agent_tool_have_steps_of_their_own(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    from adk.agents import AgentTool

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    calls: list[str] = []

    class Boss(_Model):
        async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
            results = [m.content for m in messages if m.role == "tool"]  # in call order
            if results:
                return Message(role="assistant", content=" & ".join(results))
            asks = [
                ToolCall(id=f"o{i}", function=FunctionCall(name="helper", arguments=f'{{"request": "job {i}"}}'))
                for i in (1, 2)
            ]
            return Message(role="assistant", content="", tool_calls=asks)

    helper = ChatModelAgent("helper", "does a job", model=_CountingModel("helper", calls, slow_first=0.2))
    boss = ChatModelAgent("boss", "top", model=Boss(), tools=[AgentTool(helper)])
    async with _served(boss, db, "inproc-twice") as client:
        result = await (await client.submit("go", run_id="twice-1")).result()
        names = await anyio.to_thread.run_sync(lambda: _step_names(client, "twice-1"))
        replays = [await _replay_from_end(client, "twice-1") for _ in range(3)]
    assert result.output.content == "helper:job 1 & helper:job 2"
    assert sorted(n for n in names if "/" in n) == [
        "boss.tool.helper[o1]/helper.model.generate",
        "boss.tool.helper[o2]/helper.model.generate",
    ]
    assert [r.output.content for r in replays] == [result.output.content] * 3
    assert calls == ["helper", "helper"]


async def test_a_durable_graph_streams_its_output_pauses_and_resumes(tmp_path: Path, anyio_backend_name: str) -> None:
    from compose import END, START, Graph
    from compose.interrupt import get_resume_context, interrupt

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    calls: list[str] = []

    async def ask(msgs: list[Message]) -> list[Message]:
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt({"question": "which city?"})
        return [*msgs, Message(role="user", content=str(ctx.data))]

    g = Graph[list[Message], Message]()
    g.add_lambda_node("ask", ask)
    g.add_chat_model_node("model", DurableChatModel(_CountingModel("m", calls), prefix="g."))
    g.add_edge(START, "ask")
    g.add_edge("ask", "model")
    g.add_edge("model", END)
    async with _served(g.compile(name="trip"), db, "graph-pause") as client:
        handle = await client.submit([Message(role="user", content="plan")], run_id="gp-1", streaming=True)
        events = []
        async for event in handle.events():
            events.append(event)
            if event.kind == "interrupted":
                (pending,) = event.interrupts
                await handle.resume({pending.id: "Hangzhou"})
        result = await handle.result()
        # a replay of the paused run from its wait: every step before it from the database, then resumed
        # by the id the first execution published
        steps = await anyio.to_thread.run_sync(lambda: client._dbos.list_workflow_steps("gp-1"))
        (wait_step,) = [s["function_id"] + 1 for s in steps if s["function_name"] == "pyeino.interrupts"]
        fork = await client._dbos.fork_workflow_async("gp-1", wait_step, queue_name="pyeino")
        forked = client.handle(fork.get_workflow_id())
        await forked.resume({pending.id: "Suzhou"})
        replayed = await forked.result()
    assert pending.info == {"question": "which city?"}
    assert pending.address == "runnable:trip;node:ask"
    kinds = [e.kind for e in events]
    assert kinds == ["interrupted", "token", "token", "output"]
    assert "".join(e.message.content for e in events if e.kind == "token") == "m:Hangzhou"  # type: ignore[union-attr]
    # the model step ran the whole stream; the graph's output stream is the recorded answer as one chunk
    assert [e.output["content"] for e in events if e.kind == "output"] == ["m:Hangzhou"]
    assert result.status == "completed"
    assert result.output == Message(role="assistant", content="m:Hangzhou")
    assert replayed.output == Message(role="assistant", content="m:Suzhou")
    assert calls == ["m", "m"]


async def test_a_failing_graph_node_ends_the_durable_run_with_its_error(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    from compose import END, START, Graph

    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return

    async def explode(x: str) -> str:
        raise ValueError(f"cannot handle {x!r}")

    g = Graph[str, str]()
    g.add_lambda_node("explode", explode)
    g.add_edge(START, "explode")
    g.add_edge("explode", END)
    async with _served(g.compile(name="bad"), db, "graph-fail") as client:
        handle = await client.submit("ada", run_id="bad-1")
        events = [e async for e in handle.events()]  # ends: the stream is closed after the error
        with pytest.raises(DurableRunError) as caught:
            await handle.result()
    assert [(e.kind, e.error_type) for e in events] == [("error", "NodeRunError")]
    assert "explode" in (events[0].error or "") and "cannot handle 'ada'" in (events[0].error or "")
    assert caught.value.run_id == "bad-1" and caught.value.error_type == "NodeRunError"
    assert "cannot handle 'ada'" in caught.value.message


async def test_a_failing_model_ends_the_durable_agent_run_with_its_error(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return

    class Broken(_Model):
        async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
            raise RuntimeError("the provider is down")

    agent = ChatModelAgent("broken", "fails", model=Broken())
    async with _served(agent, db, "agent-fail") as client:
        handle = await client.submit("go", run_id="broken-1")
        events = [e async for e in handle.events()]
        with pytest.raises(DurableRunError) as caught:
            await handle.result()
        steps = await anyio.to_thread.run_sync(lambda: _step_names(client, "broken-1"))
    assert [(e.kind, e.agent_name) for e in events] == [("error", "broken")]
    assert caught.value.run_id == "broken-1" and "the provider is down" in caught.value.message
    # the failed model call is recorded as the step's error: a replay would not call the model again
    assert steps[0] == "broken.model.generate"


async def test_a_client_before_any_worker_creates_the_tables_and_waits_with_a_timeout(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    from adk.errors import DurableTimeoutError

    async with DurableClient(db) as client:
        handle = await client.submit("hello", run_id="first")  # a new database: DBOS's tables are created here
        assert await handle.status() == "ENQUEUED"
        assert await client.workers() == []  # nobody serves the queue yet
        with pytest.raises(DurableTimeoutError, match="no worker has dequeued it") as info:
            await handle.result(timeout=0.05)
        assert (info.value.run_id, info.value.status, info.value.timeout) == ("first", "ENQUEUED", 0.05)
        assert isinstance(info.value, TimeoutError)
        with pytest.raises(ValueError, match="timeout must be >= 0 seconds or None"):
            await handle.result(timeout=-1)


async def test_a_run_submitted_for_another_queue_is_refused_not_answered(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    """A worker serves its own queue's agent only (issue: two agents' workers on one database): a run whose
    submission names another queue (here enqueued past the client, as a leak between queues would deliver it)
    ends with one error naming both queues, never with this agent's answer."""
    db = await _durable_db(tmp_path, anyio_backend_name)
    if db is None:  # trio: refused with the clear error
        return
    from adk.durable._app import WORKFLOW_NAME

    agent = ChatModelAgent("fast", "answers", model=_CountingModel("fast", []))
    async with _served(agent, db, "fast-worker") as client:
        await client._dbos.enqueue_async(
            {"queue_name": "pyeino", "workflow_name": WORKFLOW_NAME, "workflow_id": "slow-1"},
            {"input": "go", "queue": "slowq"},
        )
        handle = client.handle("slow-1")
        events = [e async for e in handle.events()]
        with pytest.raises(DurableRunError) as caught:
            await handle.result()
    assert [(e.kind, e.error_type) for e in events] == [("error", "DurableQueueError")]
    assert caught.value.error_type == "DurableQueueError"
    message = caught.value.message
    assert "submitted to queue 'slowq'" in message and "serves queue 'pyeino' (agent 'fast')" in message
