"""``create_app(..., durable=DurableClient(dsn))`` (``python -m adk.serve ... --durable``): runs go to the queue of
``adk.durable`` worker processes and stream back over AG-UI, on a real PostgreSQL, through real HTTP.

The workers serve ``tests/adk/durable_workers/durable_app.py``'s agents (their tool logs every execution in the
``tool_log`` table); the server is a real ``python -m adk.serve`` process. A worker SIGKILLed mid-run, a server
SIGKILLed mid-stream and a client that hangs up all lose nothing: the stream completes (or a reconnect with the
same runId gets the rest of it), every tool ran once and the thread holds the turn once.

The server runs in its own process (on asyncio, as uvicorn does), so the test bodies drive their HTTP client on
one backend (``anyio.run``), as ``tests/adk/test_durable_workers.py`` does; ``test_durable_mapping.py`` runs the
in-process parts on asyncio and trio.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

pytest.importorskip("dbos", reason="dbos is not installed (pip install 'pyeino[dbos]')")

sys.path.insert(0, str(Path(__file__).parents[1] / "adk" / "durable_workers"))
from harness import Gate, Worker, env, fresh_pg_database, tool_log

from adk.durable import DurableClient
from tests.serve.helpers import parse_sse, run_input, user

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def server(target: str, db: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``python -m adk.serve durable_app:<target> --db <db> --durable``; (process, base URL)."""
    cmd = [sys.executable, "-m", "adk.serve", f"durable_app:{target}", "--port", "0", "--db", db, "--durable"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving "), (line, proc.stderr.read() if proc.poll() is not None else "")
        yield proc, line.split(" on ")[1].strip()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def frames(text: str) -> list[tuple[int, dict[str, Any]]]:
    """The (``id:``, event) of each SSE frame."""
    out = []
    for frame in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "data" in fields:
            out.append((int(fields["id"]), json.loads(fields["data"])))
    return out


def valid(events: list[dict[str, Any]]) -> None:
    assert_valid_agui(events, max_warnings=0)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text_of(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each text message's content, by message id."""
    out: dict[str, str] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            out[e["messageId"]] = out.get(e["messageId"], "") + e["delta"]
    return out


class Reader:
    """Reads an SSE response frame by frame (one text iterator: the rest can be read after a first part)."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.aiter_text()
        self._buffer = ""

    async def until(self, kind: str, delta: str | None = None) -> list[tuple[int, str]]:
        """Read frames until an event of ``kind`` (with ``delta``) arrives; the (id, raw frame) read."""
        seen: list[tuple[int, str]] = []
        async for chunk in self._chunks:
            self._buffer += chunk
            while "\n\n" in self._buffer:
                frame, self._buffer = self._buffer.split("\n\n", 1)
                ((index, event),) = frames(frame + "\n\n")
                seen.append((index, frame + "\n\n"))
                if event["type"] == kind and (delta is None or event.get("delta") == delta):
                    return seen
        raise AssertionError(f"the stream ended before {kind}")

    async def rest(self) -> str:
        return self._buffer + "".join([chunk async for chunk in self._chunks])


def executions(db: str) -> Counter[tuple[str, str]]:
    return Counter((run, call) for run, call, _pid in tool_log(db))


def test_worker_killed_mid_run_the_stream_completes(pg_server: Any, tmp_path: Path) -> None:
    anyio.run(_test_worker_killed_mid_run_the_stream_completes, pg_server, tmp_path, backend="asyncio")


async def _test_worker_killed_mid_run_the_stream_completes(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    gate = Gate(tmp_path / "gate")
    # the final answer's model call stops after its first word until the gate opens; the tools are not held
    first = Worker(db, db, factory="build_stream", PYEINO_TEST_ROUNDS="2", **gate.env())
    second: Worker | None = None
    body = run_input("t-kill", "r1", [user("u1", "hello there")])
    try:
        with server("build_stream", db) as (_, url):
            async with (
                httpx.AsyncClient(timeout=60) as client,
                client.stream("POST", f"{url}/agents/streamer/agui", json=body) as response,
            ):
                assert response.status_code == 200
                reader = Reader(response)
                before = await reader.until("TEXT_MESSAGE_CONTENT", "answer")
                first.kill()  # mid-answer: both tool rounds finished, the model call in flight
                second = Worker(db, db, factory="build_stream", PYEINO_TEST_ROUNDS="2")
                gate.release()
                rest = await reader.rest()
                thread = (await client.get(f"{url}/agents/streamer/threads/t-kill")).json()
    finally:
        gate.release()
        first.stop()
        if second is not None:
            second.stop()
    events = [e for _, e in frames("".join(f for _, f in before) + rest)]
    valid(events)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == "answer hello there 1"
    # the answer in flight at the kill was streamed again by the worker that took over, as a new message
    texts = list(text_of(events).values())
    assert texts[-1] == "answer hello there 1" and texts[0].startswith("answer")
    assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["r0c0", "r1c0"]
    workflow = "pyeino.serve/streamer/t-kill/r1"
    assert executions(db) == {(workflow, "r0c0"): 1, (workflow, "r1c0"): 1}  # every tool ran once
    roles = [m["role"] for m in thread["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert thread["messages"][-1]["content"] == "answer hello there 1"
    assert thread["messages"][-1]["id"] == [e for e in events if e["type"] == "TEXT_MESSAGE_START"][-1]["messageId"]


def test_server_killed_mid_stream_the_client_reconnects_by_run_id(pg_server: Any, tmp_path: Path) -> None:
    anyio.run(_test_server_killed_mid_stream_the_client_reconnects_by_run_id, pg_server, tmp_path, backend="asyncio")


async def _test_server_killed_mid_stream_the_client_reconnects_by_run_id(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    gate = Gate(tmp_path / "gate")
    worker = Worker(db, db, factory="build_stream", PYEINO_TEST_ROUNDS="1", **gate.env())
    body = run_input("t-re", "r1", [user("u1", "hello there")])
    try:
        with server("build_stream", db) as (proc, url):
            async with (
                httpx.AsyncClient(timeout=60) as client,
                client.stream("POST", f"{url}/agents/streamer/agui", json=body) as response,
            ):
                reader = Reader(response)
                before = await reader.until("TEXT_MESSAGE_CONTENT", "answer")
                proc.send_signal(signal.SIGKILL)  # the server dies mid-stream: the client's stream breaks
                proc.wait(10)
                with pytest.raises(httpx.HTTPError):
                    await reader.rest()
        gate.release()
        with server("build_stream", db) as (_, url):  # another server process on the same database
            async with httpx.AsyncClient(timeout=60) as client:
                last_id = before[-1][0]
                again = await client.post(
                    f"{url}/agents/streamer/agui", json=body, headers={"Last-Event-ID": str(last_id)}
                )
                rest = frames(again.text)
                whole = frames((await client.post(f"{url}/agents/streamer/agui", json=body)).text)
                thread = (await client.get(f"{url}/agents/streamer/threads/t-re")).json()
                # a new run on the thread goes on from the turn
                next_run = run_input("t-re", "r2", [*thread["messages"], user("u2", "and again")])
                second = frames((await client.post(f"{url}/agents/streamer/agui", json=next_run)).text)
                thread2 = (await client.get(f"{url}/agents/streamer/threads/t-re")).json()
                # edit the second message and regenerate: a branch from r1 (not the last run any more)
                edited = run_input("t-re", "r3", [*thread["messages"], user("u2b", "edited")], parentRunId="r1")
                third = frames((await client.post(f"{url}/agents/streamer/agui", json=edited)).text)
                thread3 = (await client.get(f"{url}/agents/streamer/threads/t-re")).json()
    finally:
        gate.release()
        worker.stop()
    assert rest[0][0] == last_id + 1  # only what the client had not seen
    seen = [e for _, e in frames("".join(f for _, f in before))]
    joined = seen + [e for _, e in rest]
    valid(joined)
    assert joined[-1]["result"] == "answer hello there 0"
    # the same run mapped by another process is the same events (ids included)
    strip = [{k: v for k, v in e.items() if k != "timestamp"} for e in joined]
    assert [{k: v for k, v in e.items() if k != "timestamp"} for _, e in whole] == strip
    assert [i for i, _ in whole] == list(range(len(whole)))
    valid([e for _, e in whole])
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    start = next(e for e in joined if e["type"] == "TOOL_CALL_START")
    result = next(e for e in joined if e["type"] == "TOOL_CALL_RESULT")
    answer = [e for e in joined if e["type"] == "TEXT_MESSAGE_START"][-1]
    ids = ["u1", start["parentMessageId"], result["messageId"], answer["messageId"]]
    assert [m["id"] for m in thread["messages"]] == ids  # the ids the client saw
    valid([e for _, e in second])
    assert second[-1][1]["result"] == "answer hello there 0"  # the model answers the conversation's first text
    assert len(thread2["messages"]) == 6
    valid([e for _, e in third])
    assert third[0][1]["parentRunId"] == "r1" and third[-1][1]["result"] == "answer hello there 0"
    assert [m.get("content") for m in thread3["messages"]][4:] == ["edited", "answer hello there 0"]
    assert len(thread3["messages"]) == 6
    workflow = "pyeino.serve/streamer/t-re/r1"
    assert executions(db)[(workflow, "r0c0")] == 1


def test_client_hangs_up_then_reconnects(pg_server: Any, tmp_path: Path) -> None:
    anyio.run(_test_client_hangs_up_then_reconnects, pg_server, tmp_path, backend="asyncio")


async def _test_client_hangs_up_then_reconnects(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    gate = Gate(tmp_path / "gate")
    worker = Worker(db, db, factory="build_stream", PYEINO_TEST_ROUNDS="1", **gate.env())
    body = run_input("t-drop", "r1", [user("u1", "hi")])
    try:
        with server("build_stream", db) as (_, url):
            async with httpx.AsyncClient(timeout=60) as client:
                async with client.stream("POST", f"{url}/agents/streamer/agui", json=body) as response:
                    before = await Reader(response).until("TEXT_MESSAGE_CONTENT", "answer")
                # hung up; the run goes on in the worker
                busy = frames((await client.post(f"{url}/agents/streamer/agui", json={**body, "runId": "r9"})).text)
                gate.release()
                async with DurableClient(db) as durable:  # the run ends while no server reads it
                    await durable.handle("pyeino.serve/streamer/t-drop/r1").result()
                # the thread shows the turn all the same, and the reconnect gets the rest of the ended run
                thread = (await client.get(f"{url}/agents/streamer/threads/t-drop")).json()
                again = await client.post(
                    f"{url}/agents/streamer/agui", json=body, headers={"Last-Event-ID": str(before[-1][0])}
                )
                after = (await client.get(f"{url}/agents/streamer/threads/t-drop")).json()
    finally:
        gate.release()
        worker.stop()
    assert busy[-1][1]["type"] == "RUN_ERROR" and busy[-1][1]["code"] == "SessionBusyError"
    joined = [e for _, e in frames("".join(f for _, f in before))] + [e for _, e in frames(again.text)]
    valid(joined)
    assert joined[-1]["result"] == "answer hi 0"
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert after["messages"] == thread["messages"]  # appended once
    answer = [e for e in joined if e["type"] == "TEXT_MESSAGE_START"][-1]
    assert thread["messages"][-1]["id"] == answer["messageId"]


def test_approval_pause_and_resume_through_the_workers(pg_server: Any, tmp_path: Path) -> None:
    anyio.run(_test_approval_pause_and_resume_through_the_workers, pg_server, tmp_path, backend="asyncio")


async def _test_approval_pause_and_resume_through_the_workers(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    worker = Worker(db, db, factory="build_approval", PYEINO_TEST_ROUNDS="1")
    try:
        with server("build_approval", db) as (_, url):
            agui = f"{url}/agents/payer/agui"
            async with httpx.AsyncClient(timeout=60) as client:
                paused = parse_sse((await client.post(agui, json=run_input("t-pay", "r1", [user("u1", "pay")]))).text)
                assert tool_log(db) == []
                thread = (await client.get(f"{url}/agents/payer/threads/t-pay")).json()
                blocked = parse_sse((await client.post(agui, json=run_input("t-pay", "r2", [user("u2", "x")]))).text)
                (pending,) = paused[-1]["outcome"]["interrupts"]
                resume = [{"interruptId": pending["id"], "status": "resolved", "payload": {"approved": True}}]
                resumed = parse_sse((await client.post(agui, json=run_input("t-pay", "r3", [], resume=resume))).text)
                after = (await client.get(f"{url}/agents/payer/threads/t-pay")).json()
    finally:
        worker.stop()
    valid(paused)
    assert paused[-1]["outcome"]["type"] == "interrupt"
    assert pending["reason"] == "tool_call" and pending["toolCallId"] == "r0c0"
    assert [i["id"] for i in thread["interrupts"]] == [pending["id"]]
    assert blocked[-1]["code"] == "InterruptPendingError"
    valid(resumed)
    assert kinds(resumed)[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert [e for e in resumed if e["type"] == "TOOL_CALL_START"] == []
    assert [(e["toolCallId"], e["content"]) for e in resumed if e["type"] == "TOOL_CALL_RESULT"] == [("r0c0", "paid 0")]
    assert resumed[-1]["result"] == "answer pay 0"
    assert [(c, n) for (_, c), n in executions(db).items()] == [("r0c0", 1)]
    assert [m["role"] for m in after["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert after["interrupts"] == []


def test_one_client_for_several_agents_is_refused() -> None:
    from adk import ChatModelAgent
    from adk.serve import create_app
    from tests.serve.helpers import PolicyModel

    a = ChatModelAgent("a", "a", model=PolicyModel(lambda m: "hi"))
    b = ChatModelAgent("b", "b", model=PolicyModel(lambda m: "hi"))
    with pytest.raises(ValueError, match="one DurableClient serves one agent"):
        create_app({"a": a, "b": b}, durable=object())
