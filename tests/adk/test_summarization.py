"""The summarization middleware: a 200-turn conversation stays under its token budget with every tool call
still paired with its result; the split keeps the system message and whole newest turns; an event says so."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from adk import ChatModelAgent, Runner
from adk.middlewares import (
    AgentMiddleware,
    ChatModelAgentState,
    SummarizationMiddleware,
    Summarized,
    approx_token_count,
)
from adk.middlewares.summarization import SUMMARY_PREFIX
from compose.models.scripted import ScriptedChatModel
from compose.schema import Message, assistant_message, system_message, tool_message, user_message
from compose.tools import tool
from tests.adk.helpers import call, calling

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "long_conversation.py"

pytestmark = pytest.mark.anyio


@tool
async def lookup(query: str) -> str:
    """Look something up."""
    return f"result for {query}: " + "data " * 60


def assert_paired(messages: list[Message]) -> None:
    """Every tool call is answered by the tool messages right after it, and every tool message answers one."""
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.role == "tool":
            raise AssertionError(f"tool message {m.tool_call_id} without its call at {i}")
        i += 1
        if m.role == "assistant" and m.tool_calls:
            answered = set()
            while i < len(messages) and messages[i].role == "tool":
                answered.add(messages[i].tool_call_id)
                i += 1
            assert answered == {c.id for c in m.tool_calls}, f"unpaired calls at {i}"


class KeepConversation(AgentMiddleware):
    """The caller carries the conversation as the agent kept it (after summaries)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def after_agent(self, state: ChatModelAgentState) -> None:
        self.messages = [m for m in state.messages if m.role != "system"]


def answer(messages: list[Message]) -> Message:
    """One turn: a lookup call, then an answer quoting the result's length."""
    last = messages[-1]
    turn = sum(1 for m in messages if m.role == "user" and not m.content.startswith(SUMMARY_PREFIX))
    if last.role == "user":
        return calling(call("lookup", f'{{"query": "topic {turn} ' + "detail " * 20 + '"}', id=f"t{turn}"))
    return assistant_message(f"Turn {turn}: found {len(last.content)} characters. " + "note " * 30)


async def test_200_turns_stay_under_the_budget_with_every_call_paired() -> None:
    budget = 2_000
    summaries: list[int] = []

    def summarize(messages: list[Message]) -> str:
        summaries.append(len(messages[-1].content))
        return "The user asked about many topics; each was looked up. " * 3

    summarizer = ScriptedChatModel([summarize] * 1_000, usage=False)
    model = ScriptedChatModel([answer] * 400, usage=False)
    keep = KeepConversation()
    agent = ChatModelAgent(
        "a", "d", instruction="You research topics.", model=model, tools=[lookup],
        middlewares=[SummarizationMiddleware(summarizer, max_tokens=budget, keep_tokens=600), keep],
    )  # fmt: skip
    runner = Runner(agent)
    events = []
    for turn in range(200):
        async with runner.run([*keep.messages, user_message(f"Tell me about topic {turn}")]) as run:
            async for event in run:
                events.append(event)
                await event.aclose()
        assert run.termination_reason == "completed"
    assert len(model.calls) == 400
    for c in model.calls:
        assert approx_token_count(c.messages) <= budget
        assert c.messages[0].role == "system" and c.messages[0].content == "You research topics."
        assert_paired(c.messages)
    # the newest turn is always whole: its user message, the call, its result
    last = model.calls[-1].messages
    assert [m.role for m in last[-3:]] == ["user", "assistant", "tool"]
    assert last[-3].content == "Tell me about topic 199"
    summarized = [e.action.customized for e in events if e.action is not None and e.action.customized is not None]
    assert len(summarized) == len(summaries) > 10
    assert all(isinstance(s, Summarized) and s.tokens_after < budget < s.tokens_before for s in summarized)
    # an earlier summary is folded into the next one
    assert SUMMARY_PREFIX in summarizer.calls[-1].messages[-1].content


def test_split_keeps_system_and_never_starts_with_a_tool_result() -> None:
    mw = SummarizationMiddleware(ScriptedChatModel([]), max_tokens=100, keep_tokens=40)
    big = "z" * 60  # ~19 tokens a message
    messages = [
        system_message("sys"),
        user_message(big),
        calling(call("lookup", id="a")),
        tool_message(big, "a"),
        assistant_message(big),
        calling(call("lookup", id="b"), call("lookup", id="c")),
        tool_message(big, "b"),
        tool_message(big, "c"),
    ]
    head, cut = mw.split(messages)
    assert head == 1
    # the two newest results do not fit with their call, which is kept with them anyway: the cut is at the call
    assert cut == 5 and messages[cut].tool_calls
    turns = [system_message("s"), user_message(big), assistant_message(big), user_message("q"), assistant_message("a")]
    assert mw.split(turns) == (1, 3)  # whole turns: the kept part starts at a user message


async def test_below_the_threshold_nothing_happens() -> None:
    summarizer = ScriptedChatModel([])
    model = ScriptedChatModel(["hi"])
    agent = ChatModelAgent("a", "d", model=model, middlewares=[SummarizationMiddleware(summarizer, max_tokens=1_000)])
    async with Runner(agent).query("hello") as run:
        events = [e async for e in run]
    assert len(events) == 1 and events[0].action is None
    assert summarizer.calls == []


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="keep_tokens"):
        SummarizationMiddleware(ScriptedChatModel([]), max_tokens=100, keep_tokens=100)
    with pytest.raises(ValueError, match="positive"):
        SummarizationMiddleware(ScriptedChatModel([]), max_tokens=0)


async def test_the_long_conversation_example() -> None:
    spec = importlib.util.spec_from_file_location("long_conversation_demo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    report = await demo.main(12)
    assert report == demo.Report(topics=40, summary="Forty topics looked up.")
