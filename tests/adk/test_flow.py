"""Sub-agents and transfer (issue 14; Eino's flow.go, flow_test.go, deterministic_transfer.go): the transfer tool
and instruction, Eino's exact history texts, run paths, transfer through two levels and back to the parent,
errors, skipped transfer messages, custom rewriters, deterministic transfer, and a paused transfer target
resumed through the Runner."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from adk.agents.flow import (
    FlowAgent,
    TransferError,
    agent_with_deterministic_transfer_to,
    agent_with_options,
    set_sub_agents,
)
from adk.agents.history import HistoryEntry
from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.instruction import transfer_instruction
from adk.events import AgentEvent
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import Message, user_message
from compose.tools import tool
from tests.adk.helpers import call, calling, drain, events_of

pytestmark = pytest.mark.anyio


def transfer(dest: str, id: str = "tc-1", content: str = "") -> Message:
    return calling(call("transfer_to_agent", f'{{"agent_name": "{dest}"}}', id), content=content)


def text(e: AgentEvent) -> tuple[str, str, str]:
    assert e.message is not None and e.message.message is not None
    return (e.agent_name, e.message.role, e.message.message.content)


async def test_transfer_to_a_child_runs_it_on_the_rewritten_history() -> None:
    parent_model = ScriptedChatModel([transfer("ChildAgent", content="I'll transfer this to the child agent")])
    child_model = ScriptedChatModel(["Hello from child agent"])
    parent = ChatModelAgent(
        "ParentAgent", "Parent agent that will transfer to child", "You are a parent agent.", model=parent_model
    )
    child = ChatModelAgent(
        "ChildAgent", "Child agent that handles specific tasks", "You are a child agent.", model=child_model
    )
    flow = set_sub_agents(parent, [child])
    assert isinstance(flow, FlowAgent) and flow.name == "ParentAgent"
    events = await events_of(Runner(flow).query("Please transfer this to the child agent"))
    assert [(e.agent_name, e.message.role if e.message else None) for e in events] == [
        ("ParentAgent", "assistant"),
        ("ParentAgent", "tool"),
        ("ChildAgent", "assistant"),
    ]
    assert events[1].action is not None and events[1].action.transfer_to_agent is not None
    assert events[1].action.transfer_to_agent.dest_agent_name == "ChildAgent"
    assert text(events[1])[2] == "successfully transferred to agent [ChildAgent]"
    assert text(events[2])[2] == "Hello from child agent"
    assert [e.run_path for e in events] == [("ParentAgent",), ("ParentAgent",), ("ParentAgent", "ChildAgent")]

    # the parent was told about the child, and got the transfer tool
    system = parent_model.calls[0].messages[0]
    assert system.content == "You are a parent agent.\n\n" + transfer_instruction(
        [("ChildAgent", "Child agent that handles specific tasks")]
    )
    assert [t.name for t in parent_model.calls[0].tools] == ["transfer_to_agent"]
    # the child may transfer back to its parent
    assert child_model.calls[0].messages[0].content == "You are a child agent.\n\n" + transfer_instruction(
        [("ParentAgent", "Parent agent that will transfer to child")]
    )
    # Eino's history texts
    assert [(m.role, m.content) for m in child_model.calls[0].messages[1:]] == [
        ("user", "Please transfer this to the child agent"),
        (
            "user",
            "For context: [ParentAgent] said: I'll transfer this to the child agent. [ParentAgent] called tool: "
            '`transfer_to_agent` with arguments: {"agent_name": "ChildAgent"}.',
        ),
        (
            "user",
            "For context: [ParentAgent] `transfer_to_agent` tool returned result: successfully transferred to agent "
            "[ChildAgent].",
        ),
    ]


async def test_transfer_through_two_levels_and_back_to_the_parent() -> None:
    root = ChatModelAgent("root", "routes", model=ScriptedChatModel([transfer("mid"), "root again"]))
    # mid transfers to leaf; run again after leaf transferred back to it, it transfers up to root
    mid = ChatModelAgent("mid", "middle", model=ScriptedChatModel([transfer("leaf"), transfer("root", "tc-3")]))
    leaf_model = ScriptedChatModel([transfer("mid", "tc-2")])
    leaf = ChatModelAgent("leaf", "leaf", model=leaf_model)
    mid_flow = set_sub_agents(mid, [leaf])
    flow = set_sub_agents(root, [mid_flow])
    events = await events_of(Runner(flow).query("go"))
    paths = [e.run_path for e in events if e.message is not None and e.message.role == "assistant"]
    assert paths == [
        ("root",),
        ("root", "mid"),
        ("root", "mid", "leaf"),
        ("root", "mid", "leaf", "mid"),
        ("root", "mid", "leaf", "mid", "root"),
    ]
    assert text(events[-1]) == ("root", "assistant", "root again")
    # leaf saw root's and mid's messages retold, in order
    contents = [m.content for m in leaf_model.calls[0].messages[1:]]
    assert contents[0] == "go"
    assert contents[1].startswith("For context: [root] called tool: `transfer_to_agent`")
    assert contents[3].startswith("For context: [mid] called tool: `transfer_to_agent`")


async def test_transfer_to_an_unknown_agent_is_an_error_naming_both() -> None:
    parent = ChatModelAgent("p", "d", model=ScriptedChatModel([transfer("ghost")]))
    flow = set_sub_agents(parent, [ChatModelAgent("c", "d", model=ScriptedChatModel(["x"]))])
    run = Runner(flow).query("go")
    events = await events_of(run)
    error = events[-1].error
    assert isinstance(error, TransferError) and error.dest == "ghost" and error.source == "p"
    assert str(error) == "transfer failed: agent 'ghost' not found when transferring from 'p'"
    assert run.termination_reason == "error"


def test_a_second_parent_a_second_set_and_a_frozen_agent_are_errors() -> None:
    child = ChatModelAgent("c", "d", model=ScriptedChatModel(["x"]))
    set_sub_agents(ChatModelAgent("p1", "d", model=ScriptedChatModel(["x"])), [child])
    with pytest.raises(ValueError, match=r"already been set as a sub-agent of agent 'p1'.*'p2'"):
        set_sub_agents(ChatModelAgent("p2", "d", model=ScriptedChatModel(["x"])), [child])
    parent = ChatModelAgent("p3", "d", model=ScriptedChatModel(["x"]))
    set_sub_agents(parent, [ChatModelAgent("c2", "d", model=ScriptedChatModel(["x"]))])
    with pytest.raises(ValueError, match="sub-agents have already been set"):
        set_sub_agents(parent, [ChatModelAgent("c3", "d", model=ScriptedChatModel(["x"]))])
    ran = ChatModelAgent("p4", "d", model=ScriptedChatModel(["x"]))
    ran.runnable  # noqa: B018
    with pytest.raises(ValueError, match="frozen after run"):
        set_sub_agents(ran, [ChatModelAgent("c4", "d", model=ScriptedChatModel(["x"]))])
    with pytest.raises(ValueError, match="share a name"):
        set_sub_agents(
            ChatModelAgent("p5", "d", model=ScriptedChatModel(["x"])),
            [
                ChatModelAgent("same", "d", model=ScriptedChatModel(["x"])),
                ChatModelAgent("same", "e", model=ScriptedChatModel(["x"])),
            ],
        )
    with pytest.raises(TypeError, match="not an agent"):
        set_sub_agents(ChatModelAgent("p6", "d", model=ScriptedChatModel(["x"])), [object()])  # type: ignore[list-item]


async def test_disallow_transfer_to_parent() -> None:
    child_model = ScriptedChatModel(["only answer"])
    child = agent_with_options(
        ChatModelAgent("c", "d", "be brief", model=child_model), disallow_transfer_to_parent=True
    )
    flow = set_sub_agents(ChatModelAgent("p", "d", model=ScriptedChatModel([transfer("c")])), [child])
    await events_of(Runner(flow).query("go"))
    assert child_model.calls[0].messages[0].content == "be brief"
    assert child_model.calls[0].tools == ()


async def test_an_exit_in_the_child_ends_the_run() -> None:
    child = ChatModelAgent(
        "c", "d", model=ScriptedChatModel([calling(call("exit", '{"final_result": "bye"}', "x"))]), exit_tool=True
    )
    flow = set_sub_agents(ChatModelAgent("p", "d", model=ScriptedChatModel([transfer("c")])), [child])
    run = Runner(flow).query("go")
    events = await events_of(run)
    assert text(events[-1]) == ("c", "tool", "bye") and run.termination_reason == "exit"


async def test_skip_transfer_messages_and_a_custom_rewriter() -> None:
    child_model = ScriptedChatModel(["a", "b"])
    seen: list[Sequence[HistoryEntry]] = []

    def rewriter(entries: Sequence[HistoryEntry]) -> list[Message]:
        seen.append(entries)
        return [user_message(f"{e.agent_name or 'user'}: {e.message.content}") for e in entries]

    child = agent_with_options(ChatModelAgent("c", "d", model=child_model), history_rewriter=rewriter)
    flow = set_sub_agents(
        ChatModelAgent("p", "d", model=ScriptedChatModel([transfer("c", content="over to c")] * 2)), [child]
    )
    await events_of(Runner(flow).query("go", skip_transfer_messages=True))
    # the transfer call and its result are both left out (the call's message is dropped with its tool result)
    assert [m.content for m in child_model.calls[0].messages[1:]] == ["user: go"]
    await events_of(Runner(flow).query("go"))
    assert [m.content for m in child_model.calls[1].messages[1:]] == [
        "user: go",
        "p: over to c",
        "p: successfully transferred to agent [c]",
    ]
    assert seen[-1][0].is_user_input and not seen[-1][1].is_user_input


async def test_deterministic_transfer_back_to_the_supervisor() -> None:
    sup_model = ScriptedChatModel([transfer("worker"), "final from supervisor"])
    worker_model = ScriptedChatModel(["work done"])
    worker = agent_with_deterministic_transfer_to(ChatModelAgent("worker", "works", model=worker_model), ["sup"])
    flow = set_sub_agents(ChatModelAgent("sup", "supervises", model=sup_model), [worker])
    events = await events_of(Runner(flow).query("do it"))
    assert [(e.agent_name, e.message.role if e.message else None) for e in events] == [
        ("sup", "assistant"),
        ("sup", "tool"),
        ("worker", "assistant"),
        ("worker", "assistant"),  # the synthetic transfer call
        ("worker", "tool"),
        ("sup", "assistant"),
    ]
    assert events[4].action is not None and events[4].action.transfer_to_agent is not None
    assert events[4].action.transfer_to_agent.dest_agent_name == "sup"
    assert events[-1].run_path == ("sup", "worker", "sup")
    assert text(events[-1])[2] == "final from supervisor"
    second = [m.content for m in sup_model.calls[1].messages[1:]]
    assert second[-3] == "For context: [worker] said: work done."
    assert second[-2] == "For context: [worker] called tool: `transfer_to_agent` with arguments: sup."
    assert (
        second[-1]
        == "For context: [worker] `transfer_to_agent` tool returned result: successfully transferred to agent [sup]."
    )


async def test_a_paused_transfer_target_resumes_through_the_runner() -> None:
    ran: list[str] = []

    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    @tool
    def note(text: str) -> str:
        """Note.

        Args:
            text: what.
        """
        ran.append(f"note {text}")
        return "noted"

    def build() -> FlowAgent:
        child = ChatModelAgent(
            "payer",
            "pays",
            model=ScriptedChatModel(
                [calling(call("note", '{"text": "x"}', "n1"), call("pay", '{"amount": 3}', "p1")), "paid it"]
            ),
            tools=[note, pay],
            middlewares=[ApprovalMiddleware(lambda name, args: name == "pay")],
        )
        return set_sub_agents(
            ChatModelAgent("desk", "front desk", model=ScriptedChatModel([transfer("payer")])), [child]
        )

    runner = Runner(build(), checkpoint_store=InMemoryCheckPointStore())
    events = []
    async with runner.query("pay 3", checkpoint_id="j") as run:
        async for e in run:
            events.append(e)
            if e.message is not None:
                await e.message.get_message()
    paused = events[-1].action.interrupted if events[-1].action else None
    assert paused is not None and paused.checkpoint_id == "j"
    assert [c.address for c in paused.interrupt_contexts] == ["agent:desk;agent:payer;tool:pay:p1"]
    assert ran == ["note x"]
    seen, again = await drain(runner.resume("j", targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    assert again is None and ran == ["note x", "pay 3"]
    assert seen[-1].content == "paid it"
