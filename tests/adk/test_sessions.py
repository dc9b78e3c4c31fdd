"""Runs on sessions (issue 17): history in, the run's new messages out, once, only when the run completes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.retry import ModelRetryConfig
from adk.errors import (
    ExceedMaxIterationsError,
    SessionBusyError,
    SessionError,
    SessionLeaseLostError,
)
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from adk.session_values import add_session_value
from adk.sessions import HistoryLimit, InMemorySessionStore, SessionStore
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import ModelServerError
from compose.models import ScriptedChatModel
from compose.schema import Message, user_message
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, drain, kinds
from tests.stores import STORE_KINDS, session_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with session_store(request, tmp_path) as s:
        yield s


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: the query.
    """
    return f"found {q}"


def echo(messages: list[Message]) -> Message:
    """Calls lookup once per question, then answers with what the conversation holds."""
    last = messages[-1]
    if last.role == "user":
        return calling(call("lookup", f'{{"q": "{last.content}"}}', id=f"c-{last.content}"))
    return Message(role="assistant", content=f"answer {len(messages)}")


def agent(model: ScriptedChatModel, **options: Any) -> ChatModelAgent:
    return ChatModelAgent("helper", "helps", "You help.", model=model, tools=[lookup], **options)


def shape(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content or ",".join(c.function.name for c in m.tool_calls)) for m in messages]


# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
async def test_the_agent_sees_the_history_then_the_input(store: SessionStore, streaming: bool) -> None:
    model = ScriptedChatModel([echo] * 6)
    runner = Runner(agent(model), session_store=store, enable_streaming=streaming)
    for q in ("one", "two", "three"):
        seen = await collect(runner.query(q, session_id="user-42"))
        assert kinds(seen) == ["assistant", "tool:lookup", "assistant"]  # the consumer's events are whole
    # the first model call of the third run: system, the first two turns, then the new question
    assert shape(model.calls[4].messages) == [
        ("system", "You help."),
        *[("user", "one"), ("assistant", "lookup"), ("tool", "found one"), ("assistant", "answer 4")],
        *[("user", "two"), ("assistant", "lookup"), ("tool", "found two"), ("assistant", "answer 8")],
        ("user", "three"),
    ]
    session = await store.load("user-42")
    assert session.turns == 3
    assert shape(session.messages)[-4:] == [
        ("user", "three"),
        ("assistant", "lookup"),
        ("tool", "found three"),
        ("assistant", "answer 12"),
    ]
    tool_result = session.messages[2]
    assert (tool_result.tool_call_id, tool_result.tool_name) == ("c-one", "lookup")
    assert await store.list() == ["user-42"]


async def test_session_values_are_stored_and_restored(store: SessionStore) -> None:
    @tool
    def remember(city: str) -> str:
        """Remember a city.

        Args:
            city: the city.
        """
        add_session_value("city", city)
        return "noted"

    model = ScriptedChatModel([calling(call("remember", '{"city": "Hangzhou"}')), "ok", "Hangzhou it is"])
    helper = ChatModelAgent("helper", "helps", "You help {user}.", model=model, tools=[remember])
    runner = Runner(helper, session_store=store)
    run = runner.query("remember Hangzhou", session_id="s", session_values={"user": "alice"})
    await collect(run)
    assert run.session_values == {"user": "alice", "city": "Hangzhou"}
    assert (await store.load("s")).values == {"user": "alice", "city": "Hangzhou"}
    run = runner.query("where?", session_id="s", session_values={"user": "bob"})  # the call's values win
    await collect(run)
    assert run.session_values == {"user": "bob", "city": "Hangzhou"}
    assert model.calls[-1].messages[0].content == "You help bob."


async def test_a_failed_run_appends_nothing(store: SessionStore) -> None:
    model = ScriptedChatModel([echo] * 2)
    runner = Runner(agent(model), session_store=store)
    await collect(runner.query("one", session_id="s"))
    failing = agent(ScriptedChatModel([echo] * 5), max_iterations=1)
    run = Runner(failing, session_store=store).query("two", session_id="s")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "tool:lookup", "error"]
    assert isinstance(seen[-1].error, ExceedMaxIterationsError)
    assert run.termination_reason == "max_iterations"
    session = await store.load("s")
    assert session.turns == 1 and len(session.messages) == 4
    await collect(runner.query("three", session_id="s"))  # the lease was given back


async def test_a_failed_first_run_leaves_no_session(store: SessionStore) -> None:
    model = ScriptedChatModel([echo], fail_at_call={1: ModelServerError("down")})
    seen = await collect(Runner(agent(model), session_store=store).query("one", session_id="s"))
    assert kinds(seen)[-1] == "error"
    assert await store.list() == []


async def test_a_run_closed_early_appends_nothing(store: SessionStore) -> None:
    runner = Runner(agent(ScriptedChatModel([echo] * 2)), session_store=store, enable_streaming=True)
    async with runner.query("one", session_id="s") as run:
        async for event in run:
            await event.aclose()  # the recorded copy of the stream is closed with the run
            break
    assert run.termination_reason == "closed"
    assert await store.list() == []
    await store.release(await store.acquire("s"))


async def test_a_retried_stream_attempt_is_not_recorded(store: SessionStore) -> None:
    boom = ModelServerError("connection reset")
    model = ScriptedChatModel(["a long enough answer"], chunk_size=4, fail_at_chunk={(0, 2): boom})
    retry = ModelRetryConfig(max_retries=2, backoff=lambda attempt: 0.0)
    runner = Runner(agent(model, model_retry=retry), session_store=store, enable_streaming=True)
    run = runner.query("hi", session_id="s")
    async with run:
        events = [e async for e in run]
        for event in events:
            await event.aclose()  # the consumer reads nothing: the recording does not depend on it
    assert len(events) == 2
    assert shape((await store.load("s")).messages) == [("user", "hi"), ("assistant", "a long enough answer")]


async def test_a_second_run_on_a_session_in_flight_fails_fast(store: SessionStore, no_task_leaks: None) -> None:
    gate = anyio.Event()
    entered = anyio.Event()

    @tool
    async def slow(q: str) -> str:
        """A slow tool.

        Args:
            q: the query.
        """
        entered.set()
        await gate.wait()
        return "slow result"

    def answer(messages: list[Message]) -> Message:
        if messages[-1].role == "user":
            return calling(call("slow", '{"q": "x"}'))
        return Message(role="assistant", content="done")

    first = ChatModelAgent("helper", "helps", "", model=ScriptedChatModel([answer] * 4), tools=[slow])
    runner = Runner(first, session_store=store)
    busy: list[BaseException] = []

    async def second() -> None:
        await entered.wait()
        with pytest.raises(SessionBusyError) as info:
            async with runner.query("me too", session_id="user-42") as run:
                await run.__anext__()
        busy.append(info.value)
        waiting = Runner(first, session_store=store, session_wait=None).query("after", session_id="user-42")
        gate.set()
        await collect(waiting)  # waited for the first run's append, then ran on its history

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await collect(runner.query("first", session_id="user-42"))
    assert "session 'user-42' has a run in flight" in str(busy[0])
    session = await store.load("user-42")
    assert shape(session.messages) == [
        ("user", "first"),
        ("assistant", "slow"),
        ("tool", "slow result"),
        ("assistant", "done"),
        ("user", "after"),
        ("assistant", "slow"),
        ("tool", "slow result"),
        ("assistant", "done"),
    ]


async def test_interrupt_and_resume_append_the_turn_once(store: SessionStore) -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        return f"paid {amount}"

    def answer(messages: list[Message]) -> Message:
        if messages[-1].role == "user":
            return calling(call("lookup", '{"q": "invoice"}', id="c1"), call("pay", '{"amount": 42}', id="c2"))
        return Message(role="assistant", content="settled")

    model = ScriptedChatModel([answer] * 4)
    helper = ChatModelAgent(
        "helper",
        "helps",
        "",
        model=model,
        tools=[lookup, pay],
        middlewares=[ApprovalMiddleware(lambda name, _: name == "pay")],
    )
    runner = Runner(helper, session_store=store, checkpoint_store=InMemoryCheckPointStore())
    seen, paused = await drain(runner.query("settle", session_id="s", checkpoint_id="job-7"))
    assert paused is not None and kinds(seen) == ["assistant", "tool:lookup"]
    assert await store.list() == []  # nothing appended while paused
    pending = await store.pending("job-7")
    assert pending is not None and shape(pending.messages) == [
        ("user", "settle"),
        ("assistant", "lookup,pay"),
        ("tool", "found invoice"),
    ]
    # the paused run holds no lease: another run on the session may go first, and its turn comes first
    other = Runner(ChatModelAgent("helper", "helps", "", model=ScriptedChatModel(["sure"])), session_store=store)
    await collect(other.query("meanwhile", session_id="s"))
    run = runner.resume("job-7", targets={paused.ids[0]: ApprovalDecision(approved=True)})
    seen = await collect(run)
    assert kinds(seen) == ["tool:pay", "assistant"]
    session = await store.load("s")
    assert session.turns == 2
    assert shape(session.messages) == [
        ("user", "meanwhile"),
        ("assistant", "sure"),
        ("user", "settle"),
        ("assistant", "lookup,pay"),
        ("tool", "found invoice"),
        ("tool", "paid 42"),
        ("assistant", "settled"),
    ]
    assert await store.pending("job-7") is None


async def test_a_resume_that_fails_appends_nothing_and_can_be_retried(store: SessionStore) -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        return f"paid {amount}"

    script: list[Any] = [calling(call("pay", '{"amount": 1}', id="c1")), "done"]
    model = ScriptedChatModel(script, fail_at_call={1: ModelServerError("down")})
    helper = ChatModelAgent(
        "helper", "helps", "", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, _: True)]
    )
    runner = Runner(helper, session_store=store, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("pay", session_id="s", checkpoint_id="cp"))
    assert paused is not None
    targets = {paused.ids[0]: ApprovalDecision(approved=True)}
    seen = await collect(runner.resume("cp", targets=targets))
    assert kinds(seen)[-1] == "error"
    assert await store.list() == [] and await store.pending("cp") is not None
    seen = await collect(runner.resume("cp", targets=targets))  # the checkpoint and the pending turn stay
    assert kinds(seen) == ["tool:pay", "assistant"]
    assert shape((await store.load("s")).messages) == [
        ("user", "pay"),
        ("assistant", "pay"),
        ("tool", "paid 1"),
        ("assistant", "done"),
    ]


async def test_a_plain_resume_with_a_session_store_records_nothing() -> None:
    store = InMemorySessionStore()

    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        return "paid"

    model = ScriptedChatModel([calling(call("pay", '{"amount": 1}')), "done"])
    helper = ChatModelAgent(
        "helper", "helps", "", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, _: True)]
    )
    runner = Runner(helper, session_store=store, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.run([user_message("pay")], checkpoint_id="cp"))  # no session
    assert paused is not None
    seen = await collect(runner.resume("cp", targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    assert kinds(seen) == ["tool:pay", "assistant"]
    assert await store.list() == []


async def test_a_lost_lease_is_one_error_event_and_appends_nothing(store: SessionStore) -> None:
    async def answer(messages: list[Message]) -> str:
        await store.delete("s")  # an operator deletes the session while its run is in flight
        return "hello"

    run = Runner(agent(ScriptedChatModel([answer])), session_store=store).query("hi", session_id="s")
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "error"]
    assert isinstance(seen[-1].error, SessionLeaseLostError)
    assert run.termination_reason == "error"
    assert await store.list() == []


async def test_a_session_value_that_is_not_json_is_an_error_event(store: SessionStore) -> None:
    run = Runner(agent(ScriptedChatModel(["hello"])), session_store=store).query(
        "hi", session_id="s", session_values={"conn": object()}
    )
    seen = await collect(run)
    assert kinds(seen) == ["assistant", "error"]
    assert isinstance(seen[-1].error, SessionError)
    assert "session value 'conn' (object) cannot be stored as JSON" in str(seen[-1].error)
    assert await store.list() == []


async def test_the_stored_history_is_kept_within_its_limit() -> None:
    store = InMemorySessionStore(keep=HistoryLimit(max_messages=4))
    model = ScriptedChatModel([echo] * 6)
    runner = Runner(agent(model), session_store=store)
    for q in ("one", "two", "three"):
        await collect(runner.query(q, session_id="s"))
    assert shape(model.calls[4].messages)[1:5] == [
        ("user", "two"),
        ("assistant", "lookup"),
        ("tool", "found two"),
        ("assistant", "answer 8"),
    ]


async def test_session_calls_are_checked_at_the_call() -> None:
    runner = Runner(agent(ScriptedChatModel([])))
    with pytest.raises(ValueError, match=r"the runner has no session store \(Runner\(session_store=...\)\)"):
        runner.query("hi", session_id="s")
    runner = Runner(agent(ScriptedChatModel([])), session_store=InMemorySessionStore())
    with pytest.raises(ValueError, match="session_id must not be empty"):
        runner.query("hi", session_id="")
    with pytest.raises(TypeError, match="session_values must be a mapping"):
        runner.query("hi", session_id="s", session_values=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no checkpoint store"):
        runner.query("hi", session_id="s", checkpoint_id="cp")


async def test_repr_shows_the_session() -> None:
    store = InMemorySessionStore()
    run = Runner(agent(ScriptedChatModel(["hi"])), session_store=store).query("hi", session_id="s")
    assert repr(run).startswith("SessionRun('s', not started, leased=False, recorded=0")
    await collect(run)
    assert repr(run).startswith("SessionRun('s', finished, leased=False, recorded=0")


async def test_a_cancelled_run_appends_nothing_and_gives_the_lease_back(
    store: SessionStore, no_task_leaks: None
) -> None:
    scope = anyio.CancelScope()

    @tool
    async def hang(q: str) -> str:
        """Never returns: cancels the consumer's scope while the run is in flight.

        Args:
            q: the query.
        """
        scope.cancel()
        await anyio.sleep_forever()
        return q

    model = ScriptedChatModel([calling(call("hang", '{"q": "x"}'))])
    runner = Runner(ChatModelAgent("helper", "helps", "", model=model, tools=[hang]), session_store=store)
    with scope:
        async with runner.query("hi", session_id="s") as run:
            async for event in run:
                await event.aclose()
    assert scope.cancelled_caught
    assert run.termination_reason == "closed"
    assert await store.list() == []
    await store.release(await store.acquire("s"))  # free


async def test_an_agent_tools_internal_events_are_not_stored() -> None:
    from adk.agents import AgentTool
    from adk.chat_model.agent import ToolsConfig

    inner = ChatModelAgent("inner", "helps", model=ScriptedChatModel(["inner says hi"]))
    outer = ChatModelAgent(
        "outer",
        "top",
        model=ScriptedChatModel([calling(call("inner", '{"request": "q"}', "c1")), "done"]),
        tools=ToolsConfig([AgentTool(inner)], emit_internal_events=True),
    )
    store = InMemorySessionStore()
    seen = await collect(Runner(outer, session_store=store).query("go", session_id="s"))
    assert [s.content for s in seen] == ["", "inner says hi", "inner says hi", "done"]  # the consumer sees them
    session = await store.load("s")
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "inner says hi"),
        ("assistant", "done"),
    ]
