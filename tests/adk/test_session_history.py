"""Conversation history and forks on the Runner: ``runner.history(session_id)`` lists the turns of a session
(messages, session values after each, its pauses, its time); ``runner.fork(..., at_turn=k, new_session_id=...)``
copies the first k turns, so "edit message k and regenerate" is a fork and a query. On every session store."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.errors import SessionError
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from adk.session_values import add_session_value
from adk.sessions import InMemorySessionStore, PostgresSessionStore, SessionHistory, SessionStore, SQLiteSessionStore
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import Message
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, drain
from tests.stores import STORE_KINDS, session_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with session_store(request, tmp_path, max_size=2) as s:
        yield s


@tool
def remember(city: str) -> str:
    """Remember a city.

    Args:
        city: the city.
    """
    add_session_value("city", city)
    return "noted"


def notes(messages: list[Message]) -> Message:
    """Remembers the city a user message names; then answers with the number of messages it saw."""
    last = messages[-1]
    if last.role == "user":
        return calling(call("remember", f'{{"city": "{last.content}"}}', id=f"c-{last.content}"))
    return Message(role="assistant", content=f"seen {len(messages)}")


def runner_on(store: SessionStore, model: ScriptedChatModel) -> Runner:
    helper = ChatModelAgent("helper", "helps", "", model=model, tools=[remember])
    return Runner(helper, session_store=store)


async def test_history_lists_each_turn_with_its_values(store: SessionStore) -> None:
    runner = runner_on(store, ScriptedChatModel([notes] * 6))
    for city in ("Hangzhou", "Suzhou", "Xian"):
        await collect(runner.query(city, session_id="s"))
    turns = await runner.history("s")
    assert [t.index for t in turns] == [0, 1, 2]
    assert [t.values for t in turns] == [{"city": "Hangzhou"}, {"city": "Suzhou"}, {"city": "Xian"}]
    assert [[m.role for m in t.messages] for t in turns] == [["user", "assistant", "tool", "assistant"]] * 3
    assert [t.messages[0].content for t in turns] == ["Hangzhou", "Suzhou", "Xian"]
    assert all(t.checkpoint_ids == [] for t in turns)
    stamps = [t.created_at for t in turns]
    assert all(s is not None for s in stamps) and stamps == sorted(stamps)  # type: ignore[type-var]
    assert await runner.history("nobody") == []


async def test_fork_then_query_regenerates_from_turn_k(store: SessionStore) -> None:
    model = ScriptedChatModel([notes] * 8)
    runner = runner_on(store, model)
    for city in ("Hangzhou", "Suzhou", "Xian"):
        await collect(runner.query(city, session_id="s"))
    await runner.fork("s", at_turn=1, new_session_id="s-edit")
    forked = await runner.history("s-edit")
    assert [(t.index, t.values) for t in forked] == [(0, {"city": "Hangzhou"})]
    assert (await store.load("s-edit")).values == {"city": "Hangzhou"}
    # "edit message 1 and regenerate": the new turn sees the first turn only
    await collect(runner.query("Chengdu", session_id="s-edit"))
    assert [m.content for m in model.calls[-1].messages if m.role == "user"] == ["Hangzhou", "Chengdu"]
    assert [t.values for t in await runner.history("s-edit")] == [{"city": "Hangzhou"}, {"city": "Chengdu"}]
    assert len(await runner.history("s")) == 3  # the original is untouched
    await runner.fork("s", at_turn=0, new_session_id="empty")
    assert await runner.history("empty") == []


async def test_fork_errors(store: SessionStore) -> None:
    runner = runner_on(store, ScriptedChatModel([notes] * 2))
    await collect(runner.query("Hangzhou", session_id="s"))
    with pytest.raises(SessionError, match=r"at turn 2: it has 1 turn\(s\)"):
        await runner.fork("s", at_turn=2, new_session_id="t")
    with pytest.raises(SessionError, match="exists already"):
        await runner.fork("s", at_turn=1, new_session_id="s")
    with pytest.raises(ValueError, match="no session store"):
        await Runner(ChatModelAgent("a", "d", model=ScriptedChatModel([]))).history("s")


async def test_a_turn_lists_the_checkpoint_ids_it_paused_under(store: SessionStore) -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        return f"paid {amount}"

    def answer(messages: list[Message]) -> Message:
        if messages[-1].role == "user":
            return calling(call("pay", '{"amount": 42}', id="c1"))
        return Message(role="assistant", content="settled")

    model = ScriptedChatModel([answer] * 2)
    helper = ChatModelAgent(
        "helper", "helps", "", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda n, _: True)]
    )
    runner = Runner(helper, session_store=store, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("settle", session_id="s", checkpoint_id="job-7"))
    assert paused is not None and await runner.history("s") == []  # a paused turn is not a turn yet
    await collect(runner.resume("job-7", resume_all=ApprovalDecision(approved=True)))
    (turn,) = await runner.history("s")
    assert turn.checkpoint_ids == ["job-7"]
    assert [m.content for m in turn.messages][-2:] == ["paid 42", "settled"]


async def test_a_database_from_before_turn_records_still_lists_its_turns(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SQLiteSessionStore(path) as store:
        runner = runner_on(store, ScriptedChatModel([notes] * 4))
        for city in ("Hangzhou", "Suzhou"):
            await collect(runner.query(city, session_id="s"))
    with sqlite3.connect(path) as db:  # as an older pyeino left it: no per-turn rows
        db.execute("DELETE FROM pyeino_sessions_turns")
    async with SQLiteSessionStore(path) as store:
        turns = await runner_on(store, ScriptedChatModel([])).history("s")
    assert [(t.index, t.values, t.created_at) for t in turns] == [(0, {}, None), (1, {"city": "Suzhou"}, None)]


def test_the_stores_keep_history() -> None:
    for cls in (InMemorySessionStore, SQLiteSessionStore, PostgresSessionStore):
        assert issubclass(cls, SessionHistory)
