"""adk.serve attacked as an independent tester would (issue #34 follow-up): two principals through real HTTP (the
ASGI app in process, or uvicorn on loopback), racing for one thread id, reaching another's A2A context after it
was deleted, a client without a principal probing the agents, a store's error text, cross-site and DNS-rebinding
requests, the dev page framed by another site."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from adk import ChatModelAgent
from adk.runner import Runner
from adk.serve import create_app
from adk.sessions import InMemorySessionStore
from compose.schema import Message
from tests.serve.helpers import PolicyModel, live_server, parse_sse, payer, ran, run_input, user

pytestmark = pytest.mark.anyio


async def by_header(request: Any) -> str | None:
    who: str | None = request.headers.get("x-user")
    return who


def echo(messages: list[Message]) -> str:
    return "you said: " + " / ".join(m.content for m in messages if m.role == "user")


def a2a_send(text: str, *, context_id: str = "", task_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "messageId": f"m-{text}", "kind": "message"}
    message["parts"] = [{"kind": "text", "text": text}]
    if context_id:
        message["contextId"] = context_id
    if task_id:
        message["taskId"] = task_id
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


@asynccontextmanager
async def served(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` served by uvicorn on loopback (the server's own loop, in a thread)."""
    with live_server(app) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
            yield client


class Gate(InMemorySessionStore):
    """Holds the first two reads of session ``shared`` until both are made: two requests check the new id at once."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.both: anyio.Event | None = None  # made on the server's loop

    async def load(self, session_id: str, **kwargs: Any) -> Any:
        if session_id == "shared" and self.reads < 2:
            self.reads += 1
            self.both = self.both or anyio.Event()
            if self.reads == 2:
                self.both.set()
            await self.both.wait()
        return await super().load(session_id, **kwargs)


@pytest.mark.parametrize("bob_door", ["agui", "a2a"])
async def test_two_principals_creating_one_thread_id_at_once(bob_door: str) -> None:
    """Alice and bob name the same new id at the same moment (bob as an AG-UI thread or an A2A context): exactly
    one gets the thread, the other is refused before anything runs and never sees the winner's conversation (was:
    both passed the check, the last to save the record owned the thread, and a waiting run read the other's)."""
    agent = ChatModelAgent("a", "answers", model=PolicyModel(echo))
    runner = Runner(agent, enable_streaming=True, session_wait=5)  # a run waits for the one in flight
    app = create_app({"a": runner}, auth=by_header, session_store=Gate(), a2a=True)
    said = {"alice": "my PIN is 1234", "bob": "hello"}
    won: dict[str, bool] = {}
    async with served(app) as client:

        async def alice() -> None:
            body = run_input("shared", "r-alice", [user("u-alice", said["alice"])])
            answer = await client.post("/agents/a/agui", json=body, headers={"x-user": "alice"})
            assert answer.status_code in (200, 404), answer.text
            won["alice"] = answer.status_code == 200
            if won["alice"]:
                assert parse_sse(answer.text)[-1]["result"] == "you said: my PIN is 1234"

        async def bob() -> None:
            if bob_door == "agui":
                body = run_input("shared", "r-bob", [user("u-bob", said["bob"])])
                answer = await client.post("/agents/a/agui", json=body, headers={"x-user": "bob"})
                assert answer.status_code in (200, 404), answer.text
                won["bob"] = answer.status_code == 200
                text = answer.text
            else:
                answer = await client.post(
                    "/a2a/a/", json=a2a_send(said["bob"], context_id="shared"), headers={"x-user": "bob"}
                )
                state = answer.json()["result"]["status"]["state"]
                assert state in ("completed", "rejected"), answer.text
                won["bob"] = state == "completed"
                text = answer.text
            assert "1234" not in text

        async with anyio.create_task_group() as tg:
            tg.start_soon(alice)
            tg.start_soon(bob)
        assert sorted(won.values()) == [False, True], won
        winner, loser = ("alice", "bob") if won["alice"] else ("bob", "alice")
        mine = await client.get("/agents/a/threads/shared", headers={"x-user": winner})
        assert [m["content"] for m in mine.json()["messages"] if m["role"] == "user"] == [said[winner]]
        assert (await client.get("/agents/a/threads/shared", headers={"x-user": loser})).status_code == 404


async def test_a_paused_a2a_task_does_not_resume_into_a_context_no_longer_its_principals() -> None:
    """Alice's task waits for approval in context ``c``; she deletes the thread ``c``, and bob starts his own ``c``.
    Her answer to the task is rejected: nothing is paid and nothing of hers joins bob's thread (was: the resume
    ran and appended her turn to his conversation)."""
    ran.clear()
    app = create_app({"payer": payer()}, auth=by_header, a2a=True)
    alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
    async with served(app) as client:
        paused = (
            await client.post("/a2a/payer/", json=a2a_send("Pay invoice 7", context_id="c"), headers=alice)
        ).json()
        assert paused["result"]["status"]["state"] == "input-required"
        task_id = paused["result"]["id"]
        assert (await client.delete("/agents/payer/threads/c", headers=alice)).status_code == 204
        mine = await client.post("/agents/payer/agui", json=run_input("c", "b1", [user("b1", "Hi")]), headers=bob)
        assert mine.status_code == 200
        answer = await client.post("/a2a/payer/", json=a2a_send("yes", task_id=task_id), headers=alice)
        assert answer.json()["result"]["status"]["state"] == "rejected", answer.text
        thread = (await client.get("/agents/payer/threads/c", headers=bob)).json()
    assert ran == []
    assert [m["content"] for m in thread["messages"] if m["role"] == "user"] == ["Hi"]


async def test_a_client_without_a_principal_learns_no_agent_names() -> None:
    """Every route asks ``auth`` before it looks the agent up: an unknown agent's 404 (which lists the agents) is
    for principals only (was: anyone got the list)."""
    app = create_app({"secret-ops": ChatModelAgent("secret-ops", "x", model=PolicyModel(echo))}, auth=by_header)
    async with served(app) as client:
        for method, path in [
            ("POST", "/agents/nobody/agui"),
            ("GET", "/agents/nobody/threads"),
            ("GET", "/agents/nobody/threads/t"),
            ("DELETE", "/agents/nobody/threads/t"),
            ("GET", "/agents/nobody/graph"),
        ]:
            answer = await client.request(method, path, json=run_input("t", "r", []) if method == "POST" else None)
            assert answer.status_code == 401 and "secret-ops" not in answer.text, (method, path, answer.text)
        known = await client.post("/agents/nobody/agui", json=run_input("t", "r", []), headers={"x-user": "alice"})
        assert known.status_code == 404 and known.json()["agents"] == ["secret-ops"]


class BrokenStore(InMemorySessionStore):
    async def load(self, session_id: str, **kwargs: Any) -> Any:
        if session_id.startswith("boom"):
            raise RuntimeError("postgres://admin:hunter2@db.internal/prod: connection refused")
        return await super().load(session_id, **kwargs)


async def test_a_store_error_before_an_a2a_run_reaches_no_client(caplog: pytest.LogCaptureFixture) -> None:
    """A store failing before the run starts (here, reading the context) fails the task with its class only, as a
    run's error does; the server log has the text with the task and context ids (was: the SDK sent the
    exception's text, a database URL with its password, as the JSON-RPC error message)."""
    agent = ChatModelAgent("a", "answers", model=PolicyModel(echo))
    app = create_app({"a": agent}, session_store=BrokenStore(), a2a=True)
    async with served(app) as client:
        answer = await client.post("/a2a/a/", json=a2a_send("Hi", context_id="boom1"))
    assert "hunter2" not in answer.text and "postgres" not in answer.text
    task = answer.json()["result"]
    assert task["status"]["state"] == "failed"
    [data] = [p["data"] for p in task["status"]["message"]["parts"] if p["kind"] == "data"]
    assert data == {
        "error": {"code": "InternalError", "message": "the run failed (RuntimeError); the server log has the details"}
    }
    [logged] = [r for r in caplog.records if r.levelno == logging.ERROR and "A2A task" in r.getMessage()]
    assert task["id"] in logged.getMessage() and "boom1" in logged.getMessage() and "hunter2" in logged.getMessage()


async def test_a_dns_rebinding_page_is_refused_by_a_loopback_server() -> None:
    """A page of ``evil.example`` whose name was rebound to 127.0.0.1 sends ``Host`` and ``Origin`` of its own,
    which agree (same-origin to the browser): a server listening on loopback answers loopback names only, reads
    too, and the hosts of ``cors_origins`` (a proxy's public name) (was: the page ran the agent and read threads)."""
    agent = ChatModelAgent("a", "answers", model=PolicyModel(echo))
    app = create_app({"a": agent}, cors_origins=["https://agents.example"], dev_ui=True, a2a=True)
    with live_server(app) as live:
        port = live.url.rsplit(":", 1)[1]
        body = run_input("t", "r1", [user("u1", "Hi")])
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
            rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
            for method, path in [
                ("POST", "/agents/a/agui"),
                ("GET", "/agents/a/threads"),
                ("GET", "/agents"),
                ("GET", "/"),
                ("POST", "/a2a/a/"),
            ]:
                answer = await client.request(method, path, json=body if method == "POST" else None, headers=rebound)
                assert answer.status_code == 403 and "DNS rebinding" in answer.json()["error"], (path, answer.text)
            assert app.state.tracker.started == 0  # nothing ran
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"app.localhost:{port}", "agents.example"):
                answer = await client.post("/agents/a/agui", json=body, headers={"Host": host})
                assert answer.status_code == 200 and parse_sse(answer.text)[-1]["type"] == "RUN_FINISHED", host
    # a server on another address (here in process, "app") leaves names to its deployment
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        assert (await client.get("/agents", headers={"Host": "evil.example"})).status_code == 200


async def test_the_dev_page_is_never_framed_and_runs_its_own_files_only() -> None:
    """Framed by another site, the page's Approve button could be clicked through a decoy (clickjacking): the page
    forbids framing (CSP ``frame-ancestors``, ``X-Frame-Options``) and loads its own files only."""
    app = create_app({"a": ChatModelAgent("a", "answers", model=PolicyModel(echo))}, dev_ui=True)
    async with served(app) as client:
        page = await client.get("/")
        script = await client.get("/devui/app.js")
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
    assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
    assert script.headers["x-content-type-options"] == "nosniff"
