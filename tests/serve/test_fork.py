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
