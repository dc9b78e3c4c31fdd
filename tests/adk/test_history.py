"""The history a flow gives the next agent (eino-semantics 4.7; Eino's flow.go ``genAgentInput``,
``rewriteMessage``, ``buildDefaultHistoryRewriter`` and agent_tool.go ``getReactChatHistory``).

Expected texts are Eino's own: flow_test.go ``TestRewriteMessage``, agent_tool_test.go ``TestGetReactHistory``
and ``TestAgentToolWithOptions``; the rest follow flow.go's rules line by line.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from adk.agents import (
    HistoryEntry,
    RecordedEvent,
    build_agent_input,
    chat_history_for_agent_tool,
    default_history_rewriter,
    is_own_event,
    is_recorded,
    rewrite_message,
)
from adk.events import AgentAction, AgentEvent, AgentInterruptInfo, AgentOutput, MessageVariant
from compose.schema import (
    FunctionCall,
    Message,
    ToolCall,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)


def call(name: str, arguments: str, id: str = "call_1") -> ToolCall:
    return ToolCall(id=id, function=FunctionCall(name=name, arguments=arguments))


def contents(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


# ---------------------------------------------------------------------------------------------------------------
# rewrite_message


def test_rewrite_assistant_message_is_a_user_message_without_reasoning() -> None:
    # flow_test.go TestRewriteMessage (the multi-content parts have no pyeino counterpart)
    msg = Message(role="assistant", content="hello", reasoning_content="secret thoughts", name="bot", extra={"k": 1})
    rewritten = rewrite_message(msg, "OtherAgent")
    assert rewritten == user_message("For context: [OtherAgent] said: hello.")


def test_rewrite_tool_calls_one_sentence_each_after_the_content() -> None:
    msg = assistant_message("let me look", [call("tool1", "arguments1"), call("tool2", '{"x": 1}', "call_2")])
    assert rewrite_message(msg, "A").content == (
        "For context: [A] said: let me look."
        " [A] called tool: `tool1` with arguments: arguments1."
        ' [A] called tool: `tool2` with arguments: {"x": 1}.'
    )


def test_rewrite_tool_result() -> None:
    msg = tool_message("tool result 1", "tool call id 1", "tool1")
    assert rewrite_message(msg, "MyAgent") == user_message(
        "For context: [MyAgent] `tool1` tool returned result: tool result 1."
    )


@pytest.mark.parametrize(
    "msg",
    [
        assistant_message(""),
        tool_message("", "call_1", "tool1"),
        user_message("a user message"),
        system_message("a system message"),
    ],
    ids=["empty-assistant", "empty-tool", "user", "system"],
)
def test_rewrite_of_anything_else_is_a_bare_for_context(msg: Message) -> None:
    assert rewrite_message(msg, "A") == user_message("For context:")


# ---------------------------------------------------------------------------------------------------------------
# default_history_rewriter


def test_default_rewriter_keeps_user_input_and_own_messages() -> None:
    own = assistant_message("mine")
    other = assistant_message("theirs")
    entries = [
        HistoryEntry(assistant_message("an assistant message in the root input"), is_user_input=True),
        HistoryEntry(own, agent_name="B"),
        HistoryEntry(other, agent_name="A"),
    ]
    out = default_history_rewriter("B")(entries)
    assert out[0] is entries[0].message
    assert out[1] is own
    assert out[2] == user_message("For context: [A] said: theirs.")


# ---------------------------------------------------------------------------------------------------------------
# build_agent_input


def transfer_events(agent: str, dest: str) -> list[RecordedEvent]:
    """What a ChatModelAgent records when it transfers: its tool-calling answer, then the transfer tool's
    result, which carries the transfer action."""
    return [
        RecordedEvent(
            agent,
            assistant_message(
                "I'll transfer this to the child agent",
                [call("transfer_to_agent", f'{{"agent_name": "{dest}"}}', "tool-call-1")],
            ),
            role="assistant",
        ),
        RecordedEvent(
            agent,
            tool_message(f"successfully transferred to agent [{dest}]", "tool-call-1", "transfer_to_agent"),
            role="tool",
            transfer=True,
        ),
    ]


def test_child_after_transfer_sees_root_input_then_the_parents_messages_retold() -> None:
    # the child's input in flow_test.go TestTransferToAgent
    root = [user_message("Please transfer this to the child agent")]
    out = build_agent_input(root, transfer_events("ParentAgent", "ChildAgent"), agent_name="ChildAgent")
    assert out[0] is root[0]
    assert contents(out) == [
        "Please transfer this to the child agent",
        "For context: [ParentAgent] said: I'll transfer this to the child agent."
        ' [ParentAgent] called tool: `transfer_to_agent` with arguments: {"agent_name": "ChildAgent"}.',
        "For context: [ParentAgent] `transfer_to_agent` tool returned result: successfully transferred to agent "
        "[ChildAgent].",
    ]
    assert {m.role for m in out} == {"user"}


def test_own_earlier_messages_are_kept_as_they_are() -> None:
    # a parent transferred back to: its own messages unchanged, the child's retold
    events = [
        *transfer_events("Parent", "Child"),
        RecordedEvent("Child", assistant_message("child answer"), role="assistant"),
    ]
    out = build_agent_input([user_message("q")], events, agent_name="Parent")
    assert out[1] is events[0].message
    assert out[2] is events[1].message
    assert out[3] == user_message("For context: [Child] said: child answer.")


def test_events_without_a_message_are_skipped() -> None:
    events = [
        RecordedEvent("A", None),
        RecordedEvent("A", assistant_message("kept"), role="assistant"),
        RecordedEvent("A", None, transfer=True),  # e.g. a custom agent's bare action event
    ]
    out = build_agent_input([user_message("q")], events, agent_name="B")
    assert contents(out) == ["q", "For context: [A] said: kept."]


def test_an_empty_message_is_not_skipped() -> None:
    out = build_agent_input([], [RecordedEvent("A", assistant_message(""), role="assistant")], agent_name="B")
    assert out == [user_message("For context:")]


def test_skip_transfer_messages_drops_the_transfer_call_and_its_result() -> None:
    events = [
        RecordedEvent("Parent", assistant_message("thinking"), role="assistant"),
        *transfer_events("Parent", "Child"),
    ]
    out = build_agent_input([user_message("q")], events, agent_name="Child", skip_transfer_messages=True)
    assert contents(out) == ["q", "For context: [Parent] said: thinking."]


def test_skip_transfer_messages_drops_only_the_event_when_it_is_not_a_tool_result() -> None:
    events = [
        RecordedEvent("Parent", assistant_message("before"), role="assistant"),
        RecordedEvent("Parent", assistant_message("handing over"), role="assistant", transfer=True),
    ]
    out = build_agent_input([user_message("q")], events, agent_name="Child", skip_transfer_messages=True)
    assert contents(out) == ["q", "For context: [Parent] said: before."]


def test_skip_transfer_messages_pops_whatever_precedes_even_root_input() -> None:
    # flow.go pops the last history entry whatever it is (here the root input's last message)
    events = [
        RecordedEvent(
            "Parent",
            tool_message("successfully transferred to agent [Child]", "c", "transfer_to_agent"),
            role="tool",
            transfer=True,
        )
    ]
    root = [user_message("first"), user_message("second")]
    out = build_agent_input(root, events, agent_name="Child", skip_transfer_messages=True)
    assert contents(out) == ["first"]
    assert build_agent_input([], events, agent_name="Child", skip_transfer_messages=True) == []


def test_transfer_messages_are_kept_by_default() -> None:
    out = build_agent_input([], transfer_events("Parent", "Child"), agent_name="Child")
    assert len(out) == 2


def test_a_custom_rewriter_receives_the_entries() -> None:
    seen: list[HistoryEntry] = []

    def rewriter(entries: Sequence[HistoryEntry]) -> list[Message]:
        seen.extend(entries)
        return [user_message(f"{len(entries)} entries")]

    root = [user_message("q")]
    events = transfer_events("Parent", "Child")
    out = build_agent_input(root, events, agent_name="Child", rewriter=rewriter)
    assert out == [user_message("3 entries")]
    assert seen == [
        HistoryEntry(root[0], is_user_input=True),
        HistoryEntry(events[0].message, agent_name="Parent"),  # type: ignore[arg-type]
        HistoryEntry(events[1].message, agent_name="Parent"),  # type: ignore[arg-type]
    ]


def test_a_rewriter_error_propagates() -> None:
    def rewriter(entries: Sequence[HistoryEntry]) -> list[Message]:
        raise ValueError("no history for you")

    with pytest.raises(ValueError, match="no history for you"):
        build_agent_input([user_message("q")], [], agent_name="A", rewriter=rewriter)


def test_root_input_is_not_mutated() -> None:
    root = [user_message("q")]
    build_agent_input(root, transfer_events("P", "C"), agent_name="C")
    assert root == [user_message("q")]


# ---------------------------------------------------------------------------------------------------------------
# RecordedEvent.from_event, is_recorded, is_own_event


def event(
    *, run_path: tuple[str, ...] = ("root",), action: AgentAction | None = None, role: str | None = "tool"
) -> AgentEvent:
    output = None
    if role is not None:
        msg = tool_message("r", "c", "t") if role == "tool" else assistant_message("a")
        output = AgentOutput(MessageVariant(False, msg, role="tool" if role == "tool" else "assistant", tool_name="t"))
    return AgentEvent(agent_name=run_path[-1], run_path=run_path, output=output, action=action)


def test_recorded_event_from_an_agent_event() -> None:
    msg = tool_message("ok", "c", "transfer_to_agent")
    ev = event(action=AgentAction.new_transfer_to_agent("child"))
    assert RecordedEvent.from_event(ev, msg) == RecordedEvent("root", msg, role="tool", transfer=True)
    plain = event(role="assistant")
    assert RecordedEvent.from_event(plain, None) == RecordedEvent("root", None, role="assistant")
    bare = event(role=None, action=AgentAction.new_exit())
    assert RecordedEvent.from_event(bare, None) == RecordedEvent("root", None)


def test_only_own_non_interrupt_events_are_recorded() -> None:
    own = ("seq", "a")
    assert is_recorded(event(run_path=own), own)
    assert is_recorded(event(run_path=own, action=AgentAction.new_exit()), own)
    interrupted = AgentAction(interrupted=AgentInterruptInfo())
    assert not is_recorded(event(run_path=own, action=interrupted), own)
    assert is_own_event(event(run_path=own, action=interrupted), own)
    # an agent tool's inner agent (a longer path) and a sibling
    assert not is_recorded(event(run_path=("seq", "a", "inner")), own)
    assert not is_own_event(event(run_path=("seq", "a", "inner")), own)
    assert not is_recorded(event(run_path=("seq",)), own)
    assert not is_recorded(event(run_path=("seq", "b")), own)


# ---------------------------------------------------------------------------------------------------------------
# chat_history_for_agent_tool


def test_agent_tool_history() -> None:
    # agent_tool_test.go TestGetReactHistory
    state = [
        user_message("user query"),
        assistant_message("", [call("tool1", "arguments1", "tool call id 1")]),
        tool_message("tool result 1", "tool call id 1", "tool1"),
        assistant_message("", [call("tool2", "arguments2", "tool call id 2")]),
    ]
    out = chat_history_for_agent_tool(state, agent_name="MyAgent", dest_agent_name="DestAgentName")
    assert out == [
        user_message("user query"),
        user_message("For context: [MyAgent] called tool: `tool1` with arguments: arguments1."),
        user_message("For context: [MyAgent] `tool1` tool returned result: tool result 1."),
        user_message("For context: [MyAgent] called tool: `transfer_to_agent` with arguments: DestAgentName."),
        user_message(
            "For context: [MyAgent] `transfer_to_agent` tool returned result: successfully transferred to agent "
            "[DestAgentName]."
        ),
    ]


def test_agent_tool_history_drops_system_messages() -> None:
    # agent_tool_test.go TestAgentToolWithOptions/WithFullChatHistoryAsInput, plus a system message
    state = [
        system_message("you are react-agent"),
        user_message("first user message"),
        assistant_message("first assistant response"),
        assistant_message("tool call msg"),
    ]
    out = chat_history_for_agent_tool(state, agent_name="react-agent", dest_agent_name="test-agent")
    assert contents(out) == [
        "first user message",
        "For context: [react-agent] said: first assistant response.",
        "For context: [react-agent] called tool: `transfer_to_agent` with arguments: test-agent.",
        "For context: [react-agent] `transfer_to_agent` tool returned result: successfully transferred to agent "
        "[test-agent].",
    ]


def test_agent_tool_history_of_an_empty_conversation_is_the_transfer_pair() -> None:
    out = chat_history_for_agent_tool([], agent_name="A", dest_agent_name="B", tool_call_id="x")
    assert contents(out) == [
        "For context: [A] called tool: `transfer_to_agent` with arguments: B.",
        "For context: [A] `transfer_to_agent` tool returned result: successfully transferred to agent [B].",
    ]
