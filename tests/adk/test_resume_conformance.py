"""Agent resume conformance (issue 12, points 2 and 3): the return-directly event after a resume, and the parent
chain of interrupt contexts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.events import AgentAction
from adk.runner import Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.interrupt import get_resume_context, interrupt
from compose.models import ScriptedChatModel
from compose.tools import tool
from tests.adk.helpers import call, calling, drain

pytestmark = pytest.mark.anyio


def rd_agent(ran: list[str], *, streaming_tool: bool) -> ChatModelAgent:
    @tool
    async def finish(answer: str) -> str:
        """Give the final answer.

        Args:
            answer: the answer.
        """
        ran.append("finish")
        await send_tool_gen_action(AgentAction(customized="final"))
        return f"answer: {answer}"

    @tool(name="finish")
    async def finish_streaming(answer: str) -> AsyncIterator[str]:
        """Give the final answer, streaming.

        Args:
            answer: the answer.
        """
        ran.append("finish")
        await send_tool_gen_action(AgentAction(customized="final"))
        yield "answer: "
        yield answer

    @tool
    async def confirm(what: str) -> str:
        """Ask the user to confirm.

        Args:
            what: what to confirm.
        """
        ctx = get_resume_context()
        ran.append(f"confirm:{ctx.is_target}")
        if not ctx.is_target:
            raise interrupt({"confirm": what})
        return f"confirmed {what}: {ctx.data}"

    model = ScriptedChatModel(
        [calling(call("finish", '{"answer": "42"}', id="c1"), call("confirm", '{"what": "x"}', id="c2")), "never"]
    )
    tools = ToolsConfig([finish_streaming if streaming_tool else finish, confirm], return_directly={"finish"})
    return ChatModelAgent("ops", "runs operations", model=model, tools=tools)


@pytest.mark.parametrize("streaming_tool", [False, True])
@pytest.mark.parametrize("streaming", [False, True])
async def test_return_directly_event_after_resume_is_emitted_once_and_last(
    streaming: bool, streaming_tool: bool
) -> None:
    ran: list[str] = []
    runner = Runner(rd_agent(ran, streaming_tool=streaming_tool), enable_streaming=streaming,
                    checkpoint_store=InMemoryCheckPointStore())
    first, paused = await drain(runner.query("go", checkpoint_id="k"))
    assert paused is not None
    assert [s.kind for s in first] == ["assistant"]  # the held return-directly event is not sent before the pause
    assert sorted(ran) == ["confirm:False", "finish"]
    (ctx,) = paused.interrupt_contexts
    second, again = await drain(runner.resume("k", targets={ctx.id: "yes"}))
    assert again is None
    assert [s.kind for s in second] == ["tool:confirm", "tool:finish"]  # the return-directly event is last
    assert second[-1].content == "answer: 42"
    assert second[-1].action == AgentAction(customized="final")
    assert ran.count("finish") == 1 and ran[-1] == "confirm:True"  # the finished return-directly tool never reruns
    tool_events = [s for s in first + second if s.kind == "tool:finish"]
    assert len(tool_events) == 1


async def test_return_directly_without_an_interrupt_is_unchanged(anyio_backend: Any) -> None:
    ran: list[str] = []

    @tool
    async def finish(answer: str) -> str:
        """Final answer.

        Args:
            answer: the answer.
        """
        ran.append("finish")
        return answer

    @tool
    async def note(text: str) -> str:
        """Note something.

        Args:
            text: text.
        """
        return "noted"

    model = ScriptedChatModel([calling(call("finish", '{"answer": "a"}', id="c1"), call("note", '{"text": "t"}'))])
    agent = ChatModelAgent("ops", "d", model=model, tools=ToolsConfig([finish, note], return_directly={"finish"}))
    seen, paused = await drain(Runner(agent).query("go"))
    assert paused is None
    assert [s.kind for s in seen] == ["assistant", "tool:note", "tool:finish"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_interrupt_contexts_have_the_agent_context_as_parent(streaming: bool) -> None:
    @tool
    async def confirm(what: str) -> str:
        """Ask the user to confirm.

        Args:
            what: what to confirm.
        """
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt({"confirm": what})
        return f"confirmed {what}"

    model = ScriptedChatModel(
        [calling(call("confirm", '{"what": "a"}', id="c1"), call("confirm", '{"what": "b"}', id="c2")), "done"]
    )
    agent = ChatModelAgent("ops", "d", model=model, tools=[confirm])
    runner = Runner(agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("go", checkpoint_id="k"))
    assert paused is not None
    contexts = sorted(paused.interrupt_contexts, key=lambda c: c.address)
    assert [c.address for c in contexts] == ["agent:ops;tool:confirm:c1", "agent:ops;tool:confirm:c2"]
    parents = {id(c.parent) for c in contexts}
    assert len(parents) == 1  # one agent context shared by both
    parent = contexts[0].parent
    assert parent is not None and parent.address == "agent:ops" and not parent.is_root_cause
    assert parent.parent is None
    assert all(c.is_root_cause for c in contexts)
    # resuming by the tool contexts' ids still works, one at a time
    _, again = await drain(runner.resume("k", targets={contexts[0].id: None}))
    assert again is not None
    (left,) = again.interrupt_contexts
    assert left.address == "agent:ops;tool:confirm:c2"
    assert left.parent is not None and left.parent.address == "agent:ops"
    seen, done = await drain(runner.resume("k", targets={left.id: None}))
    assert done is None and seen[-1].content == "done"
