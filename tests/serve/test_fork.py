"""AG-UI's ``parentRunId`` over real HTTP: a run branching from a prior run of its thread that is not the last
one forks the thread's session at that run's turn (``Runner.fork``): "edit message k and regenerate"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

from adk import ChatModelAgent
from adk.serve import create_app
from compose.schema import Message
from tests.serve.helpers import Live, PolicyModel, live_server, post_run, run_input, user

pytestmark = pytest.mark.anyio


def echo(messages: list[Message]) -> str:
    said = [m.content for m in messages if m.role == "user"]
    return f"you said {' then '.join(said)}"


@pytest.fixture
def live() -> Iterator[tuple[Live, PolicyModel]]:
    model = PolicyModel(echo)
    with live_server(create_app(ChatModelAgent("echo", "echoes", model=model))) as server:
        yield server, model


def answer(events: list[dict[str, Any]]) -> dict[str, Any]:
    start = next(e for e in events if e["type"] == "TEXT_MESSAGE_START")
    return {"id": start["messageId"], "role": "assistant", "content": events[-1]["result"]}


async def test_edit_a_message_and_regenerate(live: tuple[Live, PolicyModel]) -> None:
    server, model = live
    url = server.agui("echo")
    thread_url = f"{server.url}/agents/echo/threads/t"
    async with httpx.AsyncClient() as client:
        r1 = await post_run(client, url, run_input("t", "r1", [user("u1", "Paris")]))
        a1 = answer(r1)
        r2 = await post_run(
            client, url, run_input("t", "r2", [user("u1", "Paris"), a1, user("u2", "Rome")], parentRunId="r1")
        )
        assert r2[-1]["result"] == "you said Paris then Rome"  # r1 was the last run: no branch
        a2 = answer(r2)
        # the user edits their second message: a run branching from r1, which is not the last run any more
        edited = [user("u1", "Paris"), a1, user("u2b", "London")]
        r3 = await post_run(client, url, run_input("t", "r3", edited, parentRunId="r1"))
        branch = (await client.get(thread_url)).json()
        assert model.calls[-1][0][-1].content == "London"
        # back to the first branch: continue after r2
        again = [user("u1", "Paris"), a1, user("u2", "Rome"), a2, user("u3", "Milan")]
        r4 = await post_run(client, url, run_input("t", "r4", again, parentRunId="r2"))
        other = (await client.get(thread_url)).json()
        # and on from r4, the thread's last run now
        r5 = await post_run(
            client, url, run_input("t", "r5", [*other["messages"], user("u4", "Turin")], parentRunId="r4")
        )
        unknown = await post_run(client, url, run_input("t", "r6", [user("u5", "?")], parentRunId="nope"))
    for events in (r1, r2, r3, r4, r5, unknown):
        assert_valid_agui(events, max_warnings=0)
    assert r3[0]["parentRunId"] == "r1"
    assert r3[-1]["result"] == "you said Paris then London"
    assert [m["content"] for m in branch["messages"]] == [
        "Paris",
        "you said Paris",
        "London",
        "you said Paris then London",
    ]
    assert [m["id"] for m in branch["messages"]][:3] == ["u1", a1["id"], "u2b"]
    assert r4[-1]["result"] == "you said Paris then Rome then Milan"
    assert [m["content"] for m in other["messages"]][-2:] == ["Milan", "you said Paris then Rome then Milan"]
    assert r5[-1]["result"] == "you said Paris then Rome then Milan then Turin"
    assert unknown[-1]["type"] == "RUN_ERROR" and unknown[-1]["code"] == "RunNotFoundError"
    assert "'nope'" in unknown[-1]["message"]


async def test_a_branch_from_the_first_run_and_delete(live: tuple[Live, PolicyModel]) -> None:
    """The parent may be any run of the thread, the first one included; deleting the thread forgets every
    branch."""
    server, _ = live
    url = server.agui("echo")
    async with httpx.AsyncClient() as client:
        r1 = await post_run(client, url, run_input("t2", "r1", [user("u1", "one")]))
        await post_run(client, url, run_input("t2", "r2", [user("u1", "one"), answer(r1), user("u2", "two")]))
        r3 = await post_run(
            client, url, run_input("t2", "r3", [user("u1", "one"), answer(r1), user("u2b", "deux")], parentRunId="r1")
        )
        assert (await client.delete(f"{server.url}/agents/echo/threads/t2")).status_code == 204
        fresh = await post_run(client, url, run_input("t2", "r4", [user("u9", "new")]))
    assert r3[-1]["result"] == "you said one then deux"
    assert fresh[-1]["result"] == "you said new"


async def who(request: Any) -> str | None:
    return request.headers.get("x-user")


async def test_a_branch_is_its_threads_principals_only() -> None:
    """A branch's session (``<thread id>~<run id>``) is no thread of its own: another principal naming it as a
    thread is refused (run, read, delete), and a thread someone else made under that name first is not taken
    over by the fork (it goes to a fresh session); nor is a session the server keeps no record of a thread."""
    model = PolicyModel(echo)
    app = create_app(ChatModelAgent("echo", "echoes", model=model), auth=who)
    alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        url, threads = "/agents/echo/agui", "/agents/echo/threads"
        # bob made a thread named like alice's coming branch first
        client.headers.update(bob)
        mine = await post_run(client, url, run_input("t~r3", "b1", [user("b1", "bob's secret")]))
        assert mine[-1]["result"] == "you said bob's secret"
        client.headers.update(alice)
        r1 = await post_run(client, url, run_input("t", "r1", [user("u1", "Paris")]))
        await post_run(client, url, run_input("t", "r2", [user("u1", "Paris"), answer(r1), user("u2", "Rome")]))
        r3 = await post_run(
            client,
            url,
            run_input("t", "r3", [user("u1", "Paris"), answer(r1), user("u2b", "London")], parentRunId="r1"),
        )
        assert r3[-1]["result"] == "you said Paris then London"  # her model never saw bob's thread
        store = app.state.server.agents["echo"].sessions
        assert sorted(await store.list("t~")) == ["t~r3", "t~r3~2"]  # her branch is t~r3~2
        # bob asks for her branch through every route: not found, and nothing of hers reaches his model
        client.headers.update(bob)
        calls = len(model.calls)
        refused = await client.post(url, json=run_input("t~r3~2", "b2", [user("b2", "what did she say?")]))
        assert refused.status_code == 404 and "t~r3~2" in refused.json()["error"]
        assert (await client.get(f"{threads}/t~r3~2")).status_code == 404
        assert (await client.delete(f"{threads}/t~r3~2")).status_code == 404
        assert len(model.calls) == calls
        theirs = (await client.get(f"{threads}/t~r3")).json()  # his own thread is still his alone
        assert [m["content"] for m in theirs["messages"]] == ["bob's secret", "you said bob's secret"]
        listed = (await client.get(threads)).json()["threads"]
        assert [t["threadId"] for t in listed] == ["t~r3"]
        # not even alice uses her branch as a thread: it is the thread t's
        client.headers.update(alice)
        assert (await client.get(f"{threads}/t~r3~2")).status_code == 404
        assert [m["content"] for m in (await client.get(f"{threads}/t")).json()["messages"]][-1] == (
            "you said Paris then London"
        )
        # a session the server keeps no record of (another program wrote it) is no one's thread
        lease = await store.acquire("direct")
        await store.commit(lease, [Message(role="user", content="not yours")], {})
        assert (await client.post(url, json=run_input("direct", "r9", [user("u9", "hi")]))).status_code == 404
        # deleting the thread forgets its branch: the name is free again
        assert (await client.delete(f"{threads}/t")).status_code == 204
        assert await store.list("t~r3~") == []
        client.headers.update(bob)
        fresh = await post_run(client, url, run_input("t~r3~2", "b3", [user("b3", "mine now")]))
        assert fresh[-1]["result"] == "you said mine now"
