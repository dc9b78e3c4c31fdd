"""The dev page's server side over real HTTP: the page and its files (only with ``dev_ui``), the thread list (per
principal, per agent), the graph and tree of agents, ``--no-dev-ui``. The page itself: test_devui_browser.py."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adk import AgentTool, ChatModelAgent
from adk.middlewares.approval import ApprovalMiddleware
from adk.serve import _threads as threads_module
from adk.serve import create_app
from adk.serve.__main__ import _parser
from compose import tool
from compose.checkpoint import InMemoryCheckPointStore
from tests.serve.helpers import PolicyModel, calling, live_server, post_run, run_input, tool_results, user

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

pytestmark = pytest.mark.anyio


@tool
async def pay(invoice: int) -> str:
    """Pay an invoice.

    Args:
        invoice: the invoice number
    """
    return f"paid invoice {invoice}"


def payer() -> ChatModelAgent:
    def policy(messages: list[Any]) -> Any:
        return "Paid." if tool_results(messages) else calling(("p1", "pay", '{"invoice": 7}'))

    return ChatModelAgent(
        "payer",
        "pays",
        model=PolicyModel(policy),
        tools=[pay],
        middlewares=[ApprovalMiddleware(lambda name, _args: True)],
    )


class TickingClock:
    """A stand-in for ``datetime`` in ``adk.serve._threads``: each ``now()`` a second after the last, so that the
    order of thread times is the order of the saves (no two in the same millisecond)."""

    def __init__(self) -> None:
        self.at = datetime(2025, 4, 27, 8, 0, tzinfo=UTC)

    def now(self, tz: Any = None) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> TickingClock:
    ticking = TickingClock()
    monkeypatch.setattr(threads_module, "datetime", ticking)
    return ticking


def untimed(thread: dict[str, Any]) -> dict[str, Any]:
    """A listed thread without its times (checked to be ISO 8601 UTC, ``updated`` not before ``created``)."""
    created, updated = (datetime.fromisoformat(thread[k]) for k in ("created", "updated"))
    assert created.utcoffset() == updated.utcoffset() == timedelta(0) and created <= updated
    return {k: v for k, v in thread.items() if k not in ("created", "updated")}


async def test_the_page_is_served_only_with_dev_ui() -> None:
    agent = ChatModelAgent("a", "answers", model=PolicyModel(lambda m: "hi"))
    with live_server(create_app(agent, dev_ui=True)) as live:
        async with httpx.AsyncClient() as client:
            page = await client.get(f"{live.url}/")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            assert 'href="devui/app.css"' in page.text
            for name in ("agui.js", "graph.js", "app.js"):
                assert f'src="devui/{name}"' in page.text
                script = await client.get(f"{live.url}/devui/{name}")
                assert script.headers["content-type"].startswith("text/javascript") and "pyeinoDev" in script.text
            style = await client.get(f"{live.url}/devui/app.css")
            assert style.headers["content-type"].startswith("text/css")
            missing = await client.get(f"{live.url}/devui/../_app.py")
            assert missing.status_code == 404
            assert (await client.get(f"{live.url}/devui/secret.py")).json() == {"error": "no dev page file 'secret.py'"}
    with live_server(create_app(agent)) as live:
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{live.url}/")).status_code == 404
            assert (await client.get(f"{live.url}/devui/app.js")).status_code == 404
            assert (await client.get(f"{live.url}/agents/a/graph")).status_code == 200  # the reads are API routes


async def test_threads_are_listed_per_principal_and_agent(clock: TickingClock) -> None:
    async def auth(request: Any) -> str | None:
        return request.headers.get("x-user")

    other = ChatModelAgent("o", "o", model=PolicyModel(lambda m: "ok"))
    app = create_app({"payer": payer(), "other": other}, auth=auth)
    alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
    with live_server(app) as live:
        base = f"{live.url}/agents"
        async with httpx.AsyncClient() as client:

            async def run(agent: str, thread: str, who: dict[str, str], text: str) -> list[dict[str, Any]]:
                body = run_input(thread, f"r-{thread}", [user(f"u-{thread}", text)])
                url = f"{base}/{agent}/agui"
                async with client.stream("POST", url, json=body, headers={**who, "Accept": "text/event-stream"}) as r:
                    assert r.status_code == 200
                    await r.aread()
                return []

            await run("payer", "t-a1", alice, "Pay invoice 7 please")
            await run("payer", "t-a2", alice, "x" * 100)
            await run("payer", "t-b1", bob, "Bob's")
            await run("other", "t-a3", alice, "Elsewhere")
            listed = (await client.get(f"{base}/payer/threads", headers=alice)).json()["threads"]
            assert [untimed(t) for t in listed] == [  # most recent first
                {"threadId": "t-a2", "title": "x" * 80, "messages": 2, "paused": True},
                {"threadId": "t-a1", "title": "Pay invoice 7 please", "messages": 2, "paused": True},
            ]

            async def ids(agent: str, who: dict[str, str]) -> list[str]:
                listed = (await client.get(f"{base}/{agent}/threads", headers=who)).json()["threads"]
                return [t["threadId"] for t in listed]

            assert await ids("payer", bob) == ["t-b1"]
            assert await ids("other", alice) == ["t-a3"]
            assert (await client.get(f"{base}/payer/threads")).status_code == 401
            missing = await client.get(f"{base}/nobody/threads", headers=alice)
            assert missing.status_code == 404 and missing.json() == {"error": "no agent named 'nobody'"}
            assert (await client.delete(f"{base}/payer/threads/t-a1", headers=alice)).status_code == 204
            after = (await client.get(f"{base}/payer/threads", headers=alice)).json()["threads"]
            assert [t["threadId"] for t in after] == ["t-a2"]
            assert await ids("payer", bob) == ["t-b1"]


async def test_a_finished_thread_is_listed_with_its_messages() -> None:
    with live_server(create_app(payer())) as live:
        async with httpx.AsyncClient() as client:
            paused = await post_run(client, live.agui("payer"), run_input("t1", "r1", [user("u1", "Pay")]))
            (pending,) = paused[-1]["outcome"]["interrupts"]
            resume = [{"interruptId": pending["id"], "status": "resolved", "payload": {"approved": True}}]
            await post_run(client, live.agui("payer"), run_input("t1", "r2", [], resume=resume))
            (thread,) = (await client.get(f"{live.url}/agents/payer/threads")).json()["threads"]
    assert untimed(thread) == {"threadId": "t1", "title": "Pay", "messages": 4, "paused": False}


async def test_threads_are_listed_most_recent_first_with_their_times(clock: TickingClock) -> None:
    """Created and last-updated times (ISO 8601 UTC) on each listed thread, the most recently updated first; a
    record stored before records had times is listed last."""
    checkpoints = InMemoryCheckPointStore()
    legacy = {"agent": "payer", "owner": None, "checkpoint_id": None, "interrupts": []}
    await checkpoints.set("pyeino.serve/thread/t-0-legacy", json.dumps(legacy).encode())
    with live_server(create_app(payer(), checkpoint_store=checkpoints)) as live:
        async with httpx.AsyncClient() as client:
            first = await post_run(client, live.agui("payer"), run_input("t-c", "r1", [user("u1", "Pay")]))
            await post_run(client, live.agui("payer"), run_input("t-a", "r2", [user("u2", "Pay again")]))
            await post_run(client, live.agui("payer"), run_input("t-b", "r3", [user("u3", "And again")]))
            listed = (await client.get(f"{live.url}/agents/payer/threads")).json()["threads"]
            assert [t["threadId"] for t in listed] == ["t-b", "t-a", "t-c", "t-0-legacy"]
            assert listed[-1]["created"] is None and listed[-1]["updated"] is None
            created_c = listed[2]["created"]
            # the first thread's approval resumed: it is the most recent now, created when it was
            (pending,) = first[-1]["outcome"]["interrupts"]
            resume = [{"interruptId": pending["id"], "status": "resolved", "payload": {"approved": True}}]
            await post_run(client, live.agui("payer"), run_input("t-c", "r4", [], resume=resume))
            listed = (await client.get(f"{live.url}/agents/payer/threads")).json()["threads"]
    assert [t["threadId"] for t in listed] == ["t-c", "t-b", "t-a", "t-0-legacy"]
    now = listed[0]
    assert now["created"] == created_c and now["updated"] > listed[1]["updated"] > listed[1]["created"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now["updated"])
    for thread in listed[:-1]:
        untimed(thread)


async def test_the_routes_run_on_the_test_loop_too() -> None:
    """In process (httpx's ASGI transport) the thread list, the graph and the page run on asyncio and trio."""
    transport = httpx.ASGITransport(app=create_app(payer(), dev_ui=True))
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        await post_run(client, "/agents/payer/agui", run_input("t", "r1", [user("u1", "Pay")]))
        listed = (await client.get("/agents/payer/threads")).json()["threads"]
        graph = (await client.get("/agents/payer/graph")).json()["agents"]["graph"]
        assert (await client.get("/")).status_code == 200
    assert [untimed(t) for t in listed] == [{"threadId": "t", "title": "Pay", "messages": 2, "paused": True}]
    assert {n["kind"] for n in graph["nodes"]} >= {"start", "ChatModel", "ToolsNode", "end"}


async def test_a_client_gone_mid_answer_leaves_no_stream_open() -> None:
    """The dev page's Stop while an answer streams: the server cancels the run and closes the answer's stream
    (the autouse leak check fails the test otherwise)."""
    import anyio

    from tests.serve.devui_app import Gate, travel_agent

    gate = Gate()
    gate.close()
    app = create_app(travel_agent(gate))
    try:
        with live_server(app) as live:
            host, port = live.url.removeprefix("http://").split(":")
            body = json.dumps(run_input("t-stop", "r1", [user("u1", "Plan my day")])).encode()
            head = (
                f"POST /agents/travel_agent/agui HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            async with await anyio.connect_tcp(host, int(port)) as sock:  # hanging up is exactly what it sees
                await sock.send(head + body)
                seen = b""
                while b"TEXT_MESSAGE_CONTENT" not in seen:  # held at the gate mid-answer
                    seen += await sock.receive()
            assert await anyio.to_thread.run_sync(app.state.tracker.wait_idle, 10)
    finally:
        gate.open()


class GetSetOnly:
    """A checkpoint store with only Eino's two methods."""

    def __init__(self) -> None:
        self.inner = InMemoryCheckPointStore()

    async def get(self, checkpoint_id: str) -> bytes | None:
        return await self.inner.get(checkpoint_id)

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        await self.inner.set(checkpoint_id, data)


async def test_a_store_that_cannot_list_is_answered_501() -> None:
    with live_server(create_app(payer(), checkpoint_store=GetSetOnly())) as live:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{live.url}/agents/payer/threads")
    assert response.status_code == 501
    assert response.json() == {
        "error": "agent 'payer': its checkpoint store (GetSetOnly) cannot list its keys (no list(prefix))"
    }


async def test_the_graph_of_an_agent() -> None:
    from serve_agent import build

    with live_server(create_app(build())) as live:
        async with httpx.AsyncClient() as client:
            data = (await client.get(f"{live.url}/agents/travel_agent/graph")).json()
            assert (await client.get(f"{live.url}/agents/nobody/graph")).status_code == 404
    tree = data["agents"]
    assert (tree["name"], tree["kind"], tree["via"], tree["children"]) == ("travel_agent", "ChatModelAgent", "root", [])
    assert tree["tools"] == ["get_weather", "search_places", "estimate_route", "book_tea_tasting"]
    graph = tree["graph"]
    # the served agent's graph: its RequestExtras middleware adds the BeforeAgent node
    assert [(n["id"], n["kind"]) for n in graph["nodes"]] == [
        ("start", "start"),
        ("ChatModel", "ChatModel"),
        ("BeforeAgent", "Lambda"),
        ("ToolNode", "ToolsNode"),
        ("ToolNodeToEndConverter", "Lambda"),
        ("end", "end"),
    ]
    assert sorted((e["from"], e["to"], e["kind"]) for e in graph["edges"]) == [
        ("BeforeAgent", "ChatModel", "edge"),
        ("ChatModel", "ToolNode", "branch"),
        ("ChatModel", "end", "branch"),
        ("ToolNode", "ChatModel", "branch"),
        ("ToolNode", "ToolNodeToEndConverter", "branch"),
        ("ToolNodeToEndConverter", "end", "edge"),
        ("start", "BeforeAgent", "edge"),
    ]


async def test_the_tree_of_agents() -> None:
    from supervisor import build

    researcher = ChatModelAgent("helper", "helps", model=PolicyModel(lambda m: "ok"))
    lead = ChatModelAgent("lead", "leads", model=PolicyModel(lambda m: "ok"), tools=[AgentTool(researcher)])
    with live_server(create_app({"team": build(), "lead": lead})) as live:
        async with httpx.AsyncClient() as client:
            team = (await client.get(f"{live.url}/agents/team/graph")).json()["agents"]
            led = (await client.get(f"{live.url}/agents/lead/graph")).json()["agents"]

    def shape(t: dict[str, Any]) -> Any:
        return (t["name"], t["via"], [shape(c) for c in t["children"]])

    assert shape(team) == ("supervisor", "root", [("researcher", "sub_agent", []), ("writer", "sub_agent", [])])
    assert team["graph"] is not None and team["children"][0]["tools"] == ["get_weather"]
    assert team["kind"] == "ChatModelAgent" and team["children"][0]["kind"] == "ChatModelAgent"
    assert shape(led) == ("lead", "root", [("helper", "tool", [])])


def test_the_cli_serves_the_page_unless_told_not_to() -> None:
    assert _parser().parse_args(["m:build"]).dev_ui is True
    assert _parser().parse_args(["m:build", "--no-dev-ui"]).dev_ui is False


@pytest.mark.slow
def test_the_readme_command_opens_the_page() -> None:
    from tests.serve.test_cli import server

    with server("examples.serve_agent:build", "memory") as (_, url):
        page = httpx.get(f"{url}/", timeout=30)
        assert page.status_code == 200 and "pyeino dev page" in page.text
