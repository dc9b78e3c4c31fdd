"""adk.serve's A2A front door over real HTTP (uvicorn on loopback), driven by the a2a-sdk's own client: the
card, send and stream (A2A 1.0 and 0.3), input-required and resume, get, cancel, auth and per-principal tasks."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory, create_client
from a2a.helpers import get_artifact_text, get_data_parts, new_data_part, new_text_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from adk import ChatModelAgent
from adk.middlewares.approval import ApprovalMiddleware
from adk.serve import create_app
from compose import get_resume_context, interrupt, tool
from compose.schema import Message as PyMessage
from tests.serve.helpers import Live, PolicyModel, calling, live_server, post_run, run_input, tool_results, user

pytestmark = pytest.mark.anyio


# Calls the server answers with an error go through a non-streaming client: a2a-sdk 1.3's streaming JSON-RPC
# client raises an error answer from inside its loop over its SSE generators, leaving them suspended (trio's
# finalizer then warns when they are collected; asyncio's loop hook closes them). The SDK's leak, not ours.


def unstreamed(client: Client, http: httpx.AsyncClient) -> Client:
    return ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(client._card)  # type: ignore[attr-defined]


paid: list[int] = []
started = threading.Event()
stopped = threading.Event()


@tool
async def pay(invoice: int) -> str:
    """Pay an invoice.

    Args:
        invoice: the invoice number
    """
    paid.append(invoice)
    return f"paid invoice {invoice}"


@tool
async def ask_date(city: str) -> str:
    """Ask the user for the travel date.

    Args:
        city: the city
    """
    resume = get_resume_context()
    if not resume.is_target:
        raise interrupt({"message": f"When do you travel to {city}?"})
    return f"travelling on {resume.data}"


@tool
async def wait_forever(job: str) -> str:
    """Run a long job.

    Args:
        job: the job
    """
    started.set()
    try:
        await anyio.sleep_forever()
    finally:
        stopped.set()
    return "never"


def policy(messages: list[PyMessage]) -> PyMessage | str:
    results = tool_results(messages)
    if results:
        return f"Done: {results[-1].content}."
    last = messages[-1].content
    if "pay both" in last:
        return calling(("p1", "pay", '{"invoice": 7}'), ("p2", "pay", '{"invoice": 8}'))
    if "pay" in last:
        return calling(("p1", "pay", '{"invoice": 7}'))
    if "travel" in last:
        return calling(("a1", "ask_date", '{"city": "Hangzhou"}'))
    if "long" in last:
        return calling(("w1", "wait_forever", '{"job": "x"}'))
    said = [m.content for m in messages if m.role == "user"]
    return f"You said: {' / '.join(said)}"


class MethodLog:
    """An ASGI wrapper noting each JSON-RPC method the server is called with."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.methods: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await Request(scope, receive).body()
        try:
            self.methods.append(json.loads(body)["method"])
        except (ValueError, KeyError, TypeError):
            pass
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def who(request: Request) -> str | None:
    return request.headers.get("x-user")


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    paid.clear()
    started.clear()
    stopped.clear()
    yield


@pytest.fixture
def server() -> Iterator[tuple[Live, MethodLog]]:
    agent = ChatModelAgent(
        "travel",
        "Books trips and pays invoices.",
        "You help.",
        PolicyModel(policy),
        tools=[pay, ask_date, wait_forever],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "pay")],
    )
    app = create_app({"travel": agent}, auth=who)
    log = MethodLog(app)
    with live_server(log) as live:  # type: ignore[arg-type]
        live.app = app
        yield live, log
        assert app.state.tracker.wait_idle(10), "a run is still in flight"


def url(live: Live) -> str:
    return f"{live.url}/a2a/travel/"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers={"x-user": "alice"}, timeout=30) as client:
        yield client


async def client_for(live: Live, http: httpx.AsyncClient, version: str = "1.0") -> Client:
    """An a2a-sdk client speaking ``version`` (the card with only that interface)."""
    full = await create_client(url(live), ClientConfig(httpx_client=http))
    card = AgentCard()
    card.CopyFrom(full._card)  # type: ignore[attr-defined]
    keep = [i for i in card.supported_interfaces if i.protocol_version == version]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    return ClientFactory(ClientConfig(httpx_client=http)).create(card)


def user_message(*parts: Part, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=f"m-{id(parts)}", parts=list(parts))
    if task_id:
        message.task_id = task_id
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def collect(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [r async for r in client.send_message(request)]


def states(responses: list[StreamResponse]) -> list[int]:
    out = []
    for r in responses:
        if r.HasField("task"):
            out.append(r.task.status.state)
        elif r.HasField("status_update"):
            out.append(r.status_update.status.state)
    return out


def last_status(responses: list[StreamResponse]) -> Any:
    return [r.status_update for r in responses if r.HasField("status_update")][-1]


async def test_agent_card(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, _ = server
    async with httpx.AsyncClient() as anonymous:  # the card is public
        card = (await anonymous.get(url(live) + ".well-known/agent-card.json")).json()
    assert card["name"] == "travel" and card["description"] == "Books trips and pays invoices."
    assert card["capabilities"]["streaming"] is True
    assert [s["id"] for s in card["skills"]] == ["pay", "ask_date", "wait_forever"]
    assert {(i["protocolVersion"], i["url"]) for i in card["supportedInterfaces"]} == {
        ("1.0", url(live)),
        ("0.3", url(live)),
    }
    assert card["url"] == url(live) and card["protocolVersion"] == "0.3"  # 0.3 clients read these


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_stream_a_message(server: tuple[Live, MethodLog], http: httpx.AsyncClient, version: str) -> None:
    live, log = server
    client = await client_for(live, http, version)
    responses = await collect(client, user_message(new_text_part("Hello")))
    assert log.methods == ["SendStreamingMessage" if version == "1.0" else "message/stream"]
    assert states(responses)[:2] == [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]
    assert states(responses)[-1] == TaskState.TASK_STATE_COMPLETED
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    streamed = [c for c in chunks if not c.last_chunk]
    assert len(streamed) > 1 and streamed[0].append is False and all(c.append for c in streamed[1:])
    assert "".join(get_artifact_text(c.artifact) for c in streamed) == "You said: Hello"
    assert chunks[-1].last_chunk and get_artifact_text(chunks[-1].artifact) == "You said: Hello"
    task_id = responses[0].task.id
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert log.methods[-1] == ("GetTask" if version == "1.0" else "tasks/get")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [get_artifact_text(a) for a in task.artifacts] == ["You said: Hello"]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_send_without_streaming(server: tuple[Live, MethodLog], http: httpx.AsyncClient, version: str) -> None:
    live, log = server
    card_client = await client_for(live, http, version)
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card_client._card)  # type: ignore[attr-defined]
    [response] = await collect(client, user_message(new_text_part("Hi")))
    assert log.methods == ["SendMessage" if version == "1.0" else "message/send"]
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [get_artifact_text(a) for a in response.task.artifacts] == ["You said: Hi"]


async def test_context_is_the_conversation(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, _ = server
    client = await client_for(live, http)
    first = await collect(client, user_message(new_text_part("one")))
    context_id = first[0].task.context_id
    second = await collect(client, user_message(new_text_part("two"), context_id=context_id))
    assert second[0].task.context_id == context_id and second[0].task.id != first[0].task.id
    final = [r.artifact_update for r in second if r.HasField("artifact_update")][-1]
    assert get_artifact_text(final.artifact) == "You said: one / two"
    # the context is the AG-UI thread of the same name: its messages are the session's
    thread = (await http.get(f"{live.url}/agents/travel/threads/{context_id}")).json()
    assert [m["content"] for m in thread["messages"] if m["role"] == "user"] == ["one", "two"]


@pytest.mark.parametrize("answer", ["text", "data"])
@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_approval_is_input_required_and_resumes(
    server: tuple[Live, MethodLog], http: httpx.AsyncClient, version: str, answer: str
) -> None:
    live, log = server
    client = await client_for(live, http, version)
    paused = await collect(client, user_message(new_text_part("please pay")))
    status = last_status(paused)
    assert status.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert paid == []
    text = "".join(p.text for p in status.status.message.parts if p.HasField("text"))
    assert text == "Approve the call of tool 'pay' with arguments {\"invoice\": 7}?"
    [data] = get_data_parts(status.status.message.parts)
    [asked] = data["interrupts"]
    assert asked["reason"] == "tool_call" and asked["toolCallId"] == "p1"
    assert asked["responseSchema"]["required"] == ["approved"]
    task_id, context_id = status.task_id, status.context_id
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    # the task id is the paused run's checkpoint id
    served = live.app.state.server.agents["travel"]
    assert await served.checkpoints.get(task_id)

    reply = new_text_part("yes") if answer == "text" else new_data_part({"approved": True})
    resumed = await collect(client, user_message(reply, task_id=task_id, context_id=context_id))
    assert states(resumed)[-1] == TaskState.TASK_STATE_COMPLETED
    assert paid == [7]
    final = [r.artifact_update for r in resumed if r.HasField("artifact_update")][-1]
    assert get_artifact_text(final.artifact) == "Done: paid invoice 7."
    assert not await served.checkpoints.get(task_id)  # a completed resume retires the checkpoint
    assert log.methods.count("SendStreamingMessage" if version == "1.0" else "message/stream") == 2


async def test_reject_with_text_and_a_bad_answer_asks_again(
    server: tuple[Live, MethodLog], http: httpx.AsyncClient
) -> None:
    live, _ = server
    client = await client_for(live, http)
    status = last_status(await collect(client, user_message(new_text_part("please pay"))))
    ids = {"task_id": status.task_id, "context_id": status.context_id}
    again = last_status(await collect(client, user_message(new_text_part("maybe later?"), **ids)))
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    said = "".join(p.text for p in again.status.message.parts if p.HasField("text"))
    assert "answer yes or no" in said
    done = await collect(client, user_message(new_text_part("no, too expensive"), **ids))
    assert states(done)[-1] == TaskState.TASK_STATE_COMPLETED and paid == []
    final = [r.artifact_update for r in done if r.HasField("artifact_update")][-1]
    assert "rejected by the user" in get_artifact_text(final.artifact)
    assert "too expensive" in get_artifact_text(final.artifact)


async def test_interrupt_gets_the_text_as_resume_data(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, _ = server
    client = await client_for(live, http)
    status = last_status(await collect(client, user_message(new_text_part("travel plans"))))
    assert status.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert status.status.message.parts[0].text == "When do you travel to Hangzhou?"
    done = await collect(client, user_message(new_text_part("May 3"), task_id=status.task_id))
    final = [r.artifact_update for r in done if r.HasField("artifact_update")][-1]
    assert get_artifact_text(final.artifact) == "Done: travelling on May 3."


async def test_cancel_a_running_task(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, log = server
    client = await client_for(live, http)
    seen: list[StreamResponse] = []
    working = anyio.Event()

    async def stream() -> None:
        async for response in client.send_message(user_message(new_text_part("a long job"))):
            seen.append(response)
            if response.HasField("status_update") and get_data_parts(response.status_update.status.message.parts):
                working.set()  # the tool call is announced: the tool runs next

    async with anyio.create_task_group() as tg:
        tg.start_soon(stream)
        await working.wait()
        assert await anyio.to_thread.run_sync(started.wait, 10)
        task_id = seen[0].task.id
        task = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        assert stopped.is_set()  # the tool was cancelled before cancel answered
    assert log.methods[-1] == "CancelTask"
    assert (await client.get_task(GetTaskRequest(id=task_id))).status.state == TaskState.TASK_STATE_CANCELED
    assert live.app.state.tracker.wait_idle(10)
    # the cancel is the run's (``run.cancel``, as a hang-up): it paused, leaving its checkpoint under the task id
    assert await live.app.state.server.agents["travel"].checkpoints.get(task_id)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_cancel_a_paused_task_keeps_its_checkpoint(
    server: tuple[Live, MethodLog], http: httpx.AsyncClient, version: str
) -> None:
    live, log = server
    client = await client_for(live, http, version)
    status = last_status(await collect(client, user_message(new_text_part("please pay"))))
    task = await client.cancel_task(CancelTaskRequest(id=status.task_id))
    assert log.methods[-1] == ("CancelTask" if version == "1.0" else "tasks/cancel")
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    served = live.app.state.server.agents["travel"]
    assert await served.checkpoints.get(status.task_id)  # still resumable by the Runner
    with pytest.raises(UnsupportedOperationError, match="terminal state"):  # but the A2A task ended
        await collect(unstreamed(client, http), user_message(new_text_part("yes"), task_id=status.task_id))


async def test_auth_and_principals(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, _ = server
    card = (await create_client(url(live), ClientConfig(httpx_client=http)))._card  # type: ignore[attr-defined]
    async with httpx.AsyncClient() as anonymous:
        nobody = ClientFactory(ClientConfig(httpx_client=anonymous, streaming=False)).create(card)
        with pytest.raises(A2AClientError, match="401"):
            await collect(nobody, user_message(new_text_part("Hi")))
    alice = await client_for(live, http)
    mine = await collect(alice, user_message(new_text_part("Hi")))
    task_id, context_id = mine[0].task.id, mine[0].task.context_id
    async with httpx.AsyncClient(headers={"x-user": "bob"}) as bob_http:
        bob = ClientFactory(ClientConfig(httpx_client=bob_http)).create(card)
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task_id))
        # alice's context is not bob's to join: his task there is rejected and sees nothing of hers
        joined = await collect(bob, user_message(new_text_part("what did she say?"), context_id=context_id))
        assert states(joined)[-1] == TaskState.TASK_STATE_REJECTED
        assert not [r for r in joined if r.HasField("artifact_update")]
        assert task_id not in {t.id for t in (await bob.list_tasks(ListTasksRequest())).tasks}
    assert (await alice.get_task(GetTaskRequest(id=task_id))).status.state == TaskState.TASK_STATE_COMPLETED
    assert task_id in {t.id for t in (await alice.list_tasks(ListTasksRequest())).tasks}


async def test_raw_json_rpc_both_versions(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, _ = server
    v1 = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "r1", "parts": [{"text": "Hi"}]}},
    }
    body = (await http.post(url(live), json=v1, headers={"A2A-Version": "1.0"})).json()
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    v03 = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "message/send",
        "params": {
            "message": {"role": "user", "messageId": "r2", "kind": "message", "parts": [{"kind": "text", "text": "Hi"}]}
        },
    }
    body = (await http.post(url(live), json=v03)).json()
    assert body["result"]["kind"] == "task" and body["result"]["status"]["state"] == "completed"
    got = await http.post(
        url(live), json={"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": body["result"]["id"]}}
    )
    assert got.json()["result"]["artifacts"][0]["parts"][0]["text"] == "You said: Hi"


async def test_a2a_off() -> None:
    agent = ChatModelAgent("plain", "answers", "You answer.", PolicyModel(lambda m: "hi"))
    with live_server(create_app(agent, a2a=False)) as live:
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{live.url}/a2a/plain/.well-known/agent-card.json")).status_code == 404
            assert (await http.get(f"{live.url}/health")).status_code == 200


async def test_a2a_app_of_its_own() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from adk.serve import a2a_app

    agent = ChatModelAgent("solo", "answers alone", "You answer.", PolicyModel(policy))
    outer = Starlette()
    with live_server(outer) as live:
        public = f"{live.url}/solo/"
        outer.router.routes.append(Mount("/solo", app=a2a_app(agent, url=public, name="soloist")))
        async with httpx.AsyncClient() as http:
            client = await create_client(public, ClientConfig(httpx_client=http))
            assert client._card.name == "soloist"  # type: ignore[attr-defined]
            assert {i.url for i in client._card.supported_interfaces} == {public}  # type: ignore[attr-defined]
            responses = await collect(client, user_message(new_text_part("Hi")))
    assert states(responses)[-1] == TaskState.TASK_STATE_COMPLETED


def test_skills_of_sub_agents_and_tools() -> None:
    from adk import set_sub_agents
    from adk.serve._a2a_card import skills

    child = ChatModelAgent("payer", "pays invoices", "You pay.", PolicyModel(policy), tools=[pay])
    parent = set_sub_agents(ChatModelAgent("boss", "routes", "You route.", PolicyModel(policy)), [child])
    assert [(s.id, list(s.tags)) for s in skills(parent)] == [("payer", ["agent"])]
    lone = ChatModelAgent("lone", "does it all", "You help.", PolicyModel(policy))
    assert [(s.id, s.description) for s in skills(lone)] == [("lone", "does it all")]


class FlakyModel(PolicyModel):
    """Streams half an answer and fails on its first call; answers on the next."""

    def __init__(self) -> None:
        super().__init__(lambda m: "All good.", chunk_size=3)
        self.failed = False

    def with_tools(self, tools: Any) -> FlakyModel:
        return self

    async def stream(self, messages: Any, **opts: Any) -> Any:
        from compose.stream import StreamReader

        if self.failed:
            return await super().stream(messages, **opts)
        self.failed = True

        async def broken() -> AsyncIterator[PyMessage]:
            yield PyMessage(role="assistant", content="Half an ")
            raise ConnectionError("the model went away")

        return StreamReader.from_async_iterator(broken())


async def test_a_retried_model_attempt_is_taken_back() -> None:
    from adk import ModelRetryConfig

    agent = ChatModelAgent(
        "flaky",
        "retries",
        "You answer.",
        FlakyModel(),
        model_retry=ModelRetryConfig(max_retries=1, backoff=lambda attempt: 0.0),
    )
    with live_server(create_app(agent)) as live:
        async with httpx.AsyncClient() as http:
            client = await create_client(f"{live.url}/a2a/flaky/", ClientConfig(httpx_client=http))
            responses = await collect(client, user_message(new_text_part("Hi")))
            task = await client.get_task(GetTaskRequest(id=responses[0].task.id))
    assert states(responses)[-1] == TaskState.TASK_STATE_COMPLETED
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert get_artifact_text(chunks[0].artifact) == "Half an "
    taken_back = [c for c in chunks if c.artifact.artifact_id == chunks[0].artifact.artifact_id][-1]
    assert taken_back.last_chunk and get_artifact_text(taken_back.artifact) == ""
    assert [get_artifact_text(a) for a in task.artifacts if get_artifact_text(a)] == ["All good."]


async def test_answers_by_interrupt_id(server: tuple[Live, MethodLog], http: httpx.AsyncClient) -> None:
    live, _ = server
    client = await client_for(live, http)
    status = last_status(await collect(client, user_message(new_text_part("pay both"))))
    [data] = get_data_parts(status.status.message.parts)
    first, second = (i["id"] for i in data["interrupts"])
    ids = {"task_id": status.task_id, "context_id": status.context_id}
    one = new_data_part({"interrupts": {first: {"approved": True}}})
    again = last_status(await collect(client, user_message(one, **ids)))
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and paid == []
    assert second in again.status.message.parts[0].text  # the unanswered one is named
    both = new_data_part({"interrupts": {first: {"approved": True}, second: {"approved": False}}})
    done = await collect(client, user_message(both, **ids))
    assert states(done)[-1] == TaskState.TASK_STATE_COMPLETED and paid == [7]


async def test_a_branch_is_not_another_principals_context(
    server: tuple[Live, MethodLog], http: httpx.AsyncClient
) -> None:
    """Alice's AG-UI thread forks into the session ``t~r3``; bob naming it (an A2A context, an AG-UI thread) is
    refused and sees nothing of hers, and nothing of his joins her branch."""
    live, _ = server
    agui = f"{live.url}/agents/travel/agui"

    def said(events: list[dict[str, Any]]) -> dict[str, Any]:
        start = next(e for e in events if e["type"] == "TEXT_MESSAGE_START")
        return {"id": start["messageId"], "role": "assistant", "content": events[-1]["result"]}

    r1 = await post_run(http, agui, run_input("t", "r1", [user("u1", "my PIN is 1234")]))
    await post_run(http, agui, run_input("t", "r2", [user("u1", "my PIN is 1234"), said(r1), user("u2", "Rome")]))
    edited = [user("u1", "my PIN is 1234"), said(r1), user("u2b", "London")]
    r3 = await post_run(http, agui, run_input("t", "r3", edited, parentRunId="r1"))
    assert r3[-1]["result"] == "You said: my PIN is 1234 / London"
    card = (await create_client(url(live), ClientConfig(httpx_client=http)))._card  # type: ignore[attr-defined]
    async with httpx.AsyncClient(headers={"x-user": "bob"}, timeout=30) as bob_http:
        bob = ClientFactory(ClientConfig(httpx_client=bob_http)).create(card)
        joined = await collect(bob, user_message(new_text_part("what did she say?"), context_id="t~r3"))
        assert states(joined)[-1] == TaskState.TASK_STATE_REJECTED
        assert not [r for r in joined if r.HasField("artifact_update")]
        refused = await bob_http.post(agui, json=run_input("t~r3", "b1", [user("b1", "and now?")]))
        assert refused.status_code == 404
        assert (await bob_http.get(f"{live.url}/agents/travel/threads/t~r3")).status_code == 404
    thread = (await http.get(f"{live.url}/agents/travel/threads/t")).json()
    assert [m["content"] for m in thread["messages"]][-2:] == ["London", "You said: my PIN is 1234 / London"]


def leaky(messages: list[PyMessage]) -> PyMessage | str:
    raise RuntimeError("cannot read /etc/pyeino/secret.toml line 3: api_key = 'sk-123'")


async def test_a_model_exception_reaches_no_client(caplog: pytest.LogCaptureFixture) -> None:
    """A failed task says where it failed and the error's class, never a model exception's text (the server log
    has it, with the task and context ids)."""
    agent = ChatModelAgent("leaky", "fails", "You answer.", PolicyModel(leaky))
    with live_server(create_app(agent)) as live:
        async with httpx.AsyncClient() as http:
            client = await create_client(f"{live.url}/a2a/leaky/", ClientConfig(httpx_client=http))
            responses = await collect(client, user_message(new_text_part("Hi")))
    assert states(responses)[-1] == TaskState.TASK_STATE_FAILED
    (error,) = get_data_parts(last_status(responses).status.message.parts)
    assert error == {
        "error": {
            "code": "NodeRunError",
            "message": "node [ChatModel] failed (RuntimeError); the server log has the details",
        }
    }
    assert "secret" not in str(responses)
    (logged,) = [r for r in caplog.records if r.levelname == "ERROR" and "A2A task" in r.getMessage()]
    assert responses[0].task.id in logged.getMessage() and "secret.toml" in logged.getMessage()


async def test_request_bodies_over_max_body_bytes_are_413_before_they_are_read() -> None:
    """A2A routes take ``create_app``'s ``max_body_bytes`` as the AG-UI routes do: a declared length over it is
    refused at once, a chunked body once its bytes pass it (the rest is never read); the model never runs."""
    model = PolicyModel(lambda m: "hi")
    app = create_app(ChatModelAgent("small", "answers", "You answer.", model), auth=who, max_body_bytes=2000)
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": {"role": "user", "messageId": "b1", "kind": "message", "parts": []}},
    }

    def with_text(text: str) -> dict[str, Any]:
        body = json.loads(json.dumps(send))
        body["params"]["message"]["parts"] = [{"kind": "text", "text": text}]
        return body

    with live_server(app) as live:
        endpoint = f"{live.url}/a2a/small/"
        async with httpx.AsyncClient(timeout=30) as http:
            alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
            big = await http.post(endpoint, json=with_text("x" * 20_000), headers=alice)
            assert big.status_code == 413 and big.json() == {"error": "request body over 2000 bytes"}
            assert (await http.post(endpoint, json=with_text("x" * 20_000))).status_code == 401  # no principal
            ok = await http.post(endpoint, json=with_text("Hi"), headers=bob)
            assert ok.status_code == 200 and ok.json()["result"]["status"]["state"] == "completed"
        # chunked, never finished: the answer comes once the bytes passed the bound
        host, port = live.url.removeprefix("http://").split(":")
        head = (
            f"POST /a2a/small/ HTTP/1.1\r\nHost: {host}\r\nx-user: alice\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        async with await anyio.connect_tcp(host, int(port)) as sock:
            await sock.send(head)
            for _ in range(3):
                await sock.send(b"400\r\n" + b"x" * 1024 + b"\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += await sock.receive()
        assert answer.startswith(b"HTTP/1.1 413")
    assert len(model.calls) == 1  # bob's small message only


async def test_a_long_answer_is_appended_in_chunks_that_grow_with_it() -> None:
    """An answer of 4-character deltas is not appended delta by delta: the first deltas go out one by one, then
    each chunk is at least an eighth of the text sent (a few dozen appends; their cost linear in the text)."""
    text = "".join(f"{i:05d} " for i in range(8_000))  # 48 000 characters, 12 000 deltas
    agent = ChatModelAgent("echo", "echoes", "You echo.", PolicyModel(lambda m: m[-1].content, chunk_size=4))
    with live_server(create_app(agent)) as live:
        async with httpx.AsyncClient(timeout=60) as http:
            client = await create_client(f"{live.url}/a2a/echo/", ClientConfig(httpx_client=http))
            responses = await collect(client, user_message(new_text_part(text)))
    assert states(responses)[-1] == TaskState.TASK_STATE_COMPLETED
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    streamed = [get_artifact_text(c.artifact) for c in chunks if not c.last_chunk]
    assert text.startswith("".join(streamed))  # the held rest comes with the whole text, last
    assert streamed[:3] == ["0000", "0 00", "001 "]  # the first deltas one by one
    assert len(streamed) < 100
    for k in range(1, len(streamed)):
        assert len(streamed[k]) * 8 >= sum(map(len, streamed[:k]))
    assert chunks[-1].last_chunk and get_artifact_text(chunks[-1].artifact) == text
