"""The exact input every agent of a multi-agent run is given (eino-semantics 4.7, flow.go ``genAgentInput``): a
Sequential, a Loop (an agent's own earlier messages kept as they are), transfers there and back, skipped transfer
messages, a custom rewriter, streaming, a Parallel inside a Sequential, and a Sequential resumed mid-way. Pinned
message by message so that a change in how the history is retold (kept incrementally per run) shows here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from adk.agent import History
from adk.agents.flow import agent_with_options, set_sub_agents
from adk.agents.history import HistoryEntry, Retelling, rewrite_message
from adk.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
from adk.chat_model.agent import ChatModelAgent
from adk.events import AgentEvent, AgentOutput, MessageVariant
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import Message, assistant_message, user_message
from compose.tools import tool
from tests.adk.helpers import call, calling, events_of

pytestmark = pytest.mark.anyio


def show(m: Message) -> str:
    calls = "".join(f" <{c.function.name} {c.function.arguments}>" for c in m.tool_calls)
    return f"{m.role}: {m.content}{calls}"


def inputs(model: ScriptedChatModel) -> list[list[str]]:
    """What the model was given at each call, system messages left out."""
    return [[show(m) for m in c.messages if m.role != "system"] for c in model.calls]


@tool
async def add(x: int) -> int:
    """Add one.

    Args:
        x: the number.
    """
    return x + 1


def agent(name: str, model: ScriptedChatModel, **kw: Any) -> ChatModelAgent:
    return ChatModelAgent(name, f"agent {name}", model=model, **kw)


def transfer(dest: str, id: str) -> Message:
    return calling(call("transfer_to_agent", f'{{"agent_name": "{dest}"}}', id))


@pytest.mark.parametrize("streaming", [False, True])
async def test_each_agent_of_a_sequential_sees_the_history_before_it_retold(streaming: bool) -> None:
    models = [
        ScriptedChatModel([calling(call("add", '{"x": 1}', "c1")), "A done"]),
        ScriptedChatModel(["B done"]),
        ScriptedChatModel([calling(call("add", '{"x": 2}', "c2"), content="C adds"), "C done"]),
        ScriptedChatModel(["D done"]),
    ]
    agents = [
        agent("A", models[0], tools=[add]),
        agent("B", models[1]),
        agent("C", models[2], tools=[add]),
        agent("D", models[3]),
    ]
    await events_of(Runner(SequentialAgent("seq", "d", agents), enable_streaming=streaming).query("go"))
    a_call = 'For context: [A] called tool: `add` with arguments: {"x": 1}.'
    a_result = "For context: [A] `add` tool returned result: 2."
    a_said = "For context: [A] said: A done."
    b_said = "For context: [B] said: B done."
    assert inputs(models[0]) == [["user: go"], ["user: go", 'assistant:  <add {"x": 1}>', "tool: 2"]]
    assert inputs(models[1]) == [["user: go", f"user: {a_call}", f"user: {a_result}", f"user: {a_said}"]]
    before_c = ["user: go", f"user: {a_call}", f"user: {a_result}", f"user: {a_said}", f"user: {b_said}"]
    assert inputs(models[2]) == [before_c, [*before_c, 'assistant: C adds <add {"x": 2}>', "tool: 3"]]
    c_retold = [
        'user: For context: [C] said: C adds. [C] called tool: `add` with arguments: {"x": 2}.',
        "user: For context: [C] `add` tool returned result: 3.",
        "user: For context: [C] said: C done.",
    ]
    assert inputs(models[3]) == [[*before_c, *c_retold]]


async def test_a_loop_agent_sees_its_own_earlier_messages_as_they_are() -> None:
    a_model = ScriptedChatModel(["a1", "a2", "a3"])
    b_model = ScriptedChatModel(["b1", "b2", "b3"])
    loop = LoopAgent("loop", "d", [agent("A", a_model), agent("B", b_model)], max_iterations=3)
    await events_of(Runner(loop).query("go"))
    assert inputs(a_model) == [
        ["user: go"],
        ["user: go", "assistant: a1", "user: For context: [B] said: b1."],
        [
            "user: go",
            "assistant: a1",
            "user: For context: [B] said: b1.",
            "assistant: a2",
            "user: For context: [B] said: b2.",
        ],
    ]
    assert inputs(b_model)[2] == [
        "user: go",
        "user: For context: [A] said: a1.",
        "assistant: b1",
        "user: For context: [A] said: a2.",
        "assistant: b2",
        "user: For context: [A] said: a3.",
    ]


@pytest.mark.parametrize("skip", [False, True])
async def test_transfers_there_and_back_retell_each_agents_messages(skip: bool) -> None:
    parent_model = ScriptedChatModel([transfer("child", "t1"), "parent done"])
    child_model = ScriptedChatModel(
        [calling(call("add", '{"x": 5}', "c1"), content="child adds"), transfer("parent", "t2")]
    )
    child = agent("child", child_model, tools=[add])
    flow = set_sub_agents(agent("parent", parent_model), [child])
    await events_of(Runner(flow).query("go", skip_transfer_messages=skip))
    t1_call = 'user: For context: [parent] called tool: `transfer_to_agent` with arguments: {"agent_name": "child"}.'
    t1_result = (
        "user: For context: [parent] `transfer_to_agent` tool returned result: successfully transferred to agent "
        "[child]."
    )
    child_first = ["user: go"] if skip else ["user: go", t1_call, t1_result]
    assert inputs(child_model) == [
        child_first,
        [*child_first, 'assistant: child adds <add {"x": 5}>', "tool: 6"],
    ]
    own_t1 = (
        []
        if skip
        else [
            'assistant:  <transfer_to_agent {"agent_name": "child"}>',
            "tool: successfully transferred to agent [child]",
        ]
    )
    child_retold = [
        'user: For context: [child] said: child adds. [child] called tool: `add` with arguments: {"x": 5}.',
        "user: For context: [child] `add` tool returned result: 6.",
    ]
    t2_retold = (
        []
        if skip
        else [
            'user: For context: [child] called tool: `transfer_to_agent` with arguments: {"agent_name": "parent"}.',
            "user: For context: [child] `transfer_to_agent` tool returned result: successfully transferred to agent "
            "[parent].",
        ]
    )
    assert inputs(parent_model) == [["user: go"], ["user: go", *own_t1, *child_retold, *t2_retold]]


async def test_a_custom_rewriter_gets_every_entry_each_time() -> None:
    seen: list[list[tuple[str, str, bool]]] = []

    def rewriter(entries: Sequence[HistoryEntry]) -> list[Message]:
        seen.append([(e.agent_name, e.message.content, e.is_user_input) for e in entries])
        return [user_message(f"{e.agent_name or 'root'}> {e.message.content}") for e in entries]

    models = [ScriptedChatModel([f"{n} done"]) for n in "ABC"]
    a = agent("A", models[0])
    b = agent_with_options(agent("B", models[1]), history_rewriter=rewriter)
    c = agent_with_options(agent("C", models[2]), history_rewriter=rewriter)
    await events_of(Runner(SequentialAgent("seq", "d", [a, b, c])).query("go"))
    assert seen == [
        [("", "go", True), ("A", "A done", False)],
        [("", "go", True), ("A", "A done", False), ("B", "B done", False)],
    ]
    assert inputs(models[1]) == [["user: root> go", "user: A> A done"]]
    assert inputs(models[2]) == [["user: root> go", "user: A> A done", "user: B> B done"]]


async def test_after_a_parallel_the_next_agent_sees_the_lanes_joined() -> None:
    models = {n: ScriptedChatModel([f"{n} done"]) for n in ("A", "P1", "P2", "Z")}
    par = ParallelAgent("par", "d", [agent("P1", models["P1"]), agent("P2", models["P2"])])
    seq = SequentialAgent("seq", "d", [agent("A", models["A"]), par, agent("Z", models["Z"])])
    await events_of(Runner(seq).query("go"))
    a_said = "user: For context: [A] said: A done."
    assert inputs(models["P1"]) == [["user: go", a_said]]
    assert inputs(models["P2"]) == [["user: go", a_said]]
    (z_input,) = inputs(models["Z"])
    assert z_input[:2] == ["user: go", a_said]
    assert sorted(z_input[2:]) == ["user: For context: [P1] said: P1 done.", "user: For context: [P2] said: P2 done."]


async def test_a_resumed_sequential_gives_the_later_agents_the_whole_history() -> None:
    @tool
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        return f"paid {amount}"

    a_model = ScriptedChatModel(["A done"])
    b_model = ScriptedChatModel([calling(call("pay", '{"amount": 3}', "p1")), "B done"])
    c_model = ScriptedChatModel(["C done"])
    b = agent("B", b_model, tools=[pay], middlewares=[ApprovalMiddleware(lambda tool_name, args: True)])
    seq = SequentialAgent("seq", "d", [agent("A", a_model), b, agent("C", c_model)])
    store = InMemoryCheckPointStore()
    runner = Runner(seq, checkpoint_store=store)
    last = (await events_of(runner.query("go", checkpoint_id="cp")))[-1]
    assert last.action is not None and last.action.interrupted is not None
    ids = last.action.interrupted.ids
    await events_of(runner.resume("cp", targets={i: ApprovalDecision(approved=True) for i in ids}))
    assert inputs(c_model) == [
        [
            "user: go",
            "user: For context: [A] said: A done.",
            'user: For context: [B] called tool: `pay` with arguments: {"amount": 3}.',
            "user: For context: [B] `pay` tool returned result: paid 3.",
            "user: For context: [B] said: B done.",
        ]
    ]


async def test_each_recorded_message_is_retold_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import adk.agents.history as history

    retold: list[str] = []

    def counting(message: Message, agent_name: str) -> Message:
        retold.append(agent_name)
        return rewrite_message(message, agent_name)

    monkeypatch.setattr(history, "rewrite_message", counting)
    models = [ScriptedChatModel([f"{i} done"]) for i in range(6)]
    seq = SequentialAgent("seq", "d", [agent(f"a{i}", m) for i, m in enumerate(models)])
    await events_of(Runner(seq).query("go"))
    assert retold == ["a0", "a1", "a2", "a3", "a4"]  # not 15: once each, whichever agents read it
    assert [len(m.calls[0].messages) for m in models] == [1, 2, 3, 4, 5, 6]


def said_by(name: str, text: str) -> AgentEvent:
    return AgentEvent(name, (name,), AgentOutput(MessageVariant(False, assistant_message(text), role="assistant")))


async def test_a_retelling_follows_one_history_and_starts_afresh_on_another() -> None:
    h = History()
    root = [user_message("q")]
    r = Retelling()
    h.record(said_by("A", "a1"))
    assert [m.content for m in await r.input(h, root, False, "B")] == ["q", "For context: [A] said: a1."]
    h.record(said_by("A", "a2"))
    assert [m.content for m in await r.input(h, root, False, "A")] == ["q", "a1", "a2"]  # its own, as they are
    lane = h.fork()
    lane.record(said_by("B", "b1"))
    on_lane = [m.content for m in await r.input(lane, root, False, "C")]
    assert on_lane == ["q", "For context: [A] said: a1.", "For context: [A] said: a2.", "For context: [B] said: b1."]
    assert [m.content for m in await r.input(h, root, False, "C")][-1] == "For context: [A] said: a2."
    h.join([lane])
    assert [m.content for m in await r.input(h, root, False, "C")] == on_lane
    assert [m.content for m in await r.input(History(), root, False, "C")] == ["q"]
    other_root = [m.content for m in await r.input(h, [user_message("other")], False, "A")]
    assert other_root == ["other", "a1", "a2", "For context: [B] said: b1."]
    root.append(user_message("more"))  # the same root list, grown
    assert [m.content for m in await r.input(h, root, False, "A")][:2] == ["q", "more"]
