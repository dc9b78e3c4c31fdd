"""AGENTS.md (Eino's ``agentsmd`` tests, ported): the files and their @imports in Eino's reminder text, given to the
model before the first user message at call time only: never in the state (so no middleware sees it, whatever the
order), the history or a checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from adk import ChatModelAgent, Runner
from adk.middlewares import AgentsMDMiddleware, InMemoryBackend
from adk.middlewares.agentsmd import AGENTS_MD_EXTRA_KEY, format_agents_md
from adk.middlewares.approval import ApprovalMiddleware
from adk.middlewares.base import AgentMiddleware, ChatModelAgentState
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, drain

pytestmark = pytest.mark.anyio

FILES = {
    "/repo/AGENTS.md": "Use tabs.\nSee @docs/style.md and @notes (no extension: not an import).",
    "/repo/docs/style.md": "Max 100 columns. Back to @../AGENTS.md",
    "/home/AGENTS.md": "Be brief.",
}


async def load(mw: AgentsMDMiddleware) -> str:
    return await mw.content()


async def test_files_and_imports_in_eino_s_text() -> None:
    warnings: list[tuple[str, str]] = []
    mw = AgentsMDMiddleware(
        ["/home/AGENTS.md", "/repo/AGENTS.md", "/missing.md"],
        backend=InMemoryBackend(FILES),
        on_warning=lambda p, w: warnings.append((p, w)),
    )
    text = await load(mw)
    assert text == format_agents_md(
        [
            ("/home/AGENTS.md", "Be brief."),
            ("/repo/AGENTS.md", FILES["/repo/AGENTS.md"]),
            ("/repo/docs/style.md", FILES["/repo/docs/style.md"]),
        ]
    )
    assert text.startswith("<system-reminder>\nAs you answer the user's questions, you can use the following context:")
    assert "\nContents of /repo/docs/style.md (instructions):\n\nMax 100 columns." in text
    assert text.endswith("unless it is highly relevant to your task.\n</system-reminder>")
    # style.md's import of ../AGENTS.md is a cycle (Eino's check, after the path is cleaned)
    assert warnings == [("/repo/AGENTS.md", "circular @import detected"), ("/missing.md", "file not found, skipping")]


async def test_a_cycle_and_the_byte_budget() -> None:
    files = {"/a.md": "A @b.md", "/b.md": "B @a.md", "/c.md": "C"}
    warnings: list[str] = []
    mw = AgentsMDMiddleware(
        ["/a.md", "/c.md"], backend=InMemoryBackend(files), on_warning=lambda p, w: warnings.append(w)
    )
    assert "Contents of /b.md" in await load(mw) and "Contents of /c.md" in await load(mw)
    small = AgentsMDMiddleware(
        ["/a.md", "/c.md"], backend=InMemoryBackend(files), max_bytes=3, on_warning=lambda p, w: warnings.append(w)
    )
    text = await load(small)
    assert "Contents of /a.md" in text and "/c.md" not in text
    assert any("exceeds max bytes 3" in w for w in warnings)
    with pytest.raises(ValueError, match="at least one"):
        AgentsMDMiddleware([])


class Spy(AgentMiddleware):
    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        self.seen.append(list(state.messages))
        return state

    async def after_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        self.seen.append(list(state.messages))
        return state


@tool
def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


@pytest.mark.parametrize("spy_first", [True, False])
async def test_the_reminder_is_given_at_call_time_only(spy_first: bool) -> None:
    spy = Spy()
    mw = AgentsMDMiddleware(["/home/AGENTS.md"], backend=InMemoryBackend(FILES))
    model = ScriptedChatModel([calling(call("pay", '{"amount": 3}', "p1")), "paid"])
    agent = ChatModelAgent(
        "a", "d", "You help.", model=model, tools=[pay], middlewares=[spy, mw] if spy_first else [mw, spy]
    )
    run = Runner(agent).query("pay 3")
    seen = await collect(run)
    assert seen[-1].content == "paid"
    for c in model.calls:  # every call gets it once, before the first user message
        assert [m.role for m in c.messages][:3] == ["system", "user", "user"]
        assert c.messages[1].extra == {AGENTS_MD_EXTRA_KEY: True} and "Be brief." in c.messages[1].content
    assert spy.seen and all(AGENTS_MD_EXTRA_KEY not in m.extra for msgs in spy.seen for m in msgs)
    assert all("Be brief." not in s.content for s in seen)


async def test_the_reminder_is_not_in_a_checkpoint() -> None:
    mw = AgentsMDMiddleware(["/home/AGENTS.md"], backend=InMemoryBackend(FILES))
    model = ScriptedChatModel([calling(call("pay", '{"amount": 3}', "p1")), "paid"])
    agent = ChatModelAgent(
        "a", "d", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, args: True), mw]
    )
    store = InMemoryCheckPointStore()
    _, paused = await drain(Runner(agent, checkpoint_store=store).query("pay 3", checkpoint_id="c"))
    assert paused is not None
    data = await store.get("c")
    assert data is not None and b"Be brief." not in data and AGENTS_MD_EXTRA_KEY.encode() not in data
    assert "Be brief." in model.calls[0].messages[0].content


async def test_the_reminder_is_not_in_a_session() -> None:
    from adk import InMemorySessionStore

    mw = AgentsMDMiddleware(["/home/AGENTS.md"], backend=InMemoryBackend(FILES))
    model = ScriptedChatModel(["one", "two"])
    store = InMemorySessionStore()
    runner = Runner(ChatModelAgent("a", "d", model=model, middlewares=[mw]), session_store=store)
    for text in ("first", "second"):
        await collect(runner.query(text, session_id="s"))
    stored = (await store.load("s")).messages
    assert [m.content for m in stored] == ["first", "one", "second", "two"]
    second = model.calls[1].messages  # the history from the session, and the reminder once, before it
    assert [m.content for m in second][1:] == ["first", "one", "second"]
    assert second[0].extra == {AGENTS_MD_EXTRA_KEY: True}
