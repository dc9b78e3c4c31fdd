"""``RemoteA2AAgent`` against agents served by the a2a-sdk's own server classes (an ``AgentExecutor`` written
here, not pyeino's server), over real HTTP on loopback: directly, under a Runner (streaming or not, paused and
resumed) and as an ``AgentTool`` of a scripted supervisor; a hang-up of its run cancels the remote task and leaves
a checkpoint whose resume sends the conversation again."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import anyio
import httpx
import pytest
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette
from starlette.routing import Mount

from adk import AgentTool, ApprovalDecision, ChatModelAgent, Runner
from adk.agents import RemoteA2AAgent
from adk.errors import AgentCancelledError, RemoteAgentError
from compose.checkpoint import InMemoryCheckPointStore
from compose.schema import Message
from tests.adk.test_cancel import drain
from tests.serve.helpers import Live, PolicyModel, calling, live_server, tool_results

pytestmark = pytest.mark.anyio

cancelled = threading.Event()
waiting = threading.Event()
asked: list[str] = []  # what SlowOnce was asked, in order


class Echo(AgentExecutor):
    """Streams "echo: <input>" in three artifact chunks."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = context.get_user_input()
        for i, piece in enumerate(["echo", ": ", text]):
            await updater.add_artifact([new_text_part(piece)], artifact_id="answer", append=i > 0)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class Booker(AgentExecutor):
    """Asks for the city (input-required), then books it."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.requires_input(updater.new_agent_message([new_text_part("Which city?")]))
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await updater.add_artifact([new_text_part(f"Booked {context.get_user_input()}.")], artifact_id="a")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


class Broken(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.failed(updater.new_agent_message([new_text_part("the booking system is down")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class Slow(AgentExecutor):
    """Sends one chunk, then works until cancelled."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part("working on it")], artifact_id="a")
        waiting.set()
        await anyio.sleep_forever()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        cancelled.set()
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


class SlowOnce(Slow):
    """Works until cancelled the first time it is asked; answers "done: <input>" after that."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        asked.append(context.get_user_input())
        if len(asked) == 1:
            await super().execute(context, event_queue)
            return
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part(f"done: {context.get_user_input()}")], artifact_id="a")
        await updater.complete()


def sdk_agent(name: str, description: str, executor: AgentExecutor, url: str) -> Starlette:
    card = AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        skills=[AgentSkill(id=name, name=name, description=description, tags=["test"])],
    )
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    cancelled.clear()
    waiting.clear()
    asked.clear()
    yield


@pytest.fixture(scope="module")
def remote() -> Iterator[Live]:
    app = Starlette()
    with live_server(app) as live:
        for name, description, executor in [
            ("echo", "Echoes what it is told.", Echo()),
            ("booker", "Books a trip to a city.", Booker()),
            ("broken", "Always fails.", Broken()),
            ("slow", "Never finishes.", Slow()),
            ("slowonce", "Finishes when asked again.", SlowOnce()),
        ]:
            app.router.routes.append(
                Mount(f"/{name}", app=sdk_agent(name, description, executor, f"{live.url}/{name}/"))
            )
        yield live


async def test_streamed_under_a_runner(remote: Live) -> None:
    agent = RemoteA2AAgent(f"{remote.url}/echo/")
    assert agent.name == "echo" and agent.card is None
    async with Runner(agent, enable_streaming=True).query("hello") as run:
        events = [e async for e in run]
        [event] = events
        assert event.message is not None and event.message.is_streaming
        assert event.message.message_stream is not None
        chunks = [c.content async for c in event.message.message_stream]
    assert chunks == ["echo", ": ", "hello"]
    assert run.final_message is not None and run.final_message.content == "echo: hello"
    assert run.termination_reason == "completed"
    assert agent.description == "Echoes what it is told."  # the card, fetched on the first run


async def test_whole_messages_without_streaming(remote: Live) -> None:
    async with httpx.AsyncClient() as http:
        agent = RemoteA2AAgent(f"{remote.url}/echo", httpx_client=http, name="echoer")
        async with Runner(agent).query("hi") as run:
            [event] = [e async for e in run]
        assert not http.is_closed  # a caller's client stays open
    assert event.message is not None and not event.message.is_streaming
    assert event.message.message is not None and event.message.message.content == "echo: hi"
    assert event.agent_name == "echoer"


async def test_connect_takes_the_cards_name(remote: Live) -> None:
    agent = await RemoteA2AAgent.connect(f"{remote.url}/booker/")
    assert agent.name == "booker" and agent.description == "Books a trip to a city."
    assert "fetched" in repr(agent)


@pytest.mark.parametrize("streaming", [True, False])
async def test_input_required_pauses_and_resumes(remote: Live, streaming: bool) -> None:
    runner = Runner(
        RemoteA2AAgent(f"{remote.url}/booker/"), enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore()
    )
    async with runner.query("book me a trip", checkpoint_id="trip") as run:
        [event] = [e async for e in run]
    assert run.termination_reason == "interrupted"
    assert event.action is not None and event.action.interrupted is not None
    [cause] = event.action.interrupted.interrupt_contexts
    assert cause.info["message"] == "Which city?" and cause.info["url"] == f"{remote.url}/booker/"
    assert cause.address == "agent:booker"
    async with runner.resume("trip", {cause.id: "Paris"}) as resumed:
        async for event in resumed:
            await event.aclose()  # unread: the agent reads the rest of the remote stream itself
    assert resumed.final_message is not None and resumed.final_message.content == "Booked Paris."
    assert resumed.termination_reason == "completed"


async def test_a_failed_task_is_a_typed_error(remote: Live) -> None:
    async with Runner(RemoteA2AAgent(f"{remote.url}/broken/"), enable_streaming=True).query("book") as run:
        [event] = [e async for e in run]
    assert isinstance(event.error, RemoteAgentError)
    assert event.error.url == f"{remote.url}/broken/" and event.error.state == "failed"
    assert "the booking system is down" in str(event.error) and f"{remote.url}/broken/" in str(event.error)


async def test_an_unreachable_server_is_a_typed_error() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/nobody/"
    async with Runner(RemoteA2AAgent(url, description="gone")).query("hi") as run:
        [event] = [e async for e in run]
    assert isinstance(event.error, RemoteAgentError) and event.error.url == url
    assert "agent card" in str(event.error)
    with pytest.raises(RemoteAgentError, match="nobody"):
        await RemoteA2AAgent.connect(url)
    with pytest.raises(ValueError, match="http"):
        RemoteA2AAgent("ftp://example")


async def test_closing_the_run_cancels_the_remote_task(remote: Live) -> None:
    async with Runner(RemoteA2AAgent(f"{remote.url}/slow/"), enable_streaming=True).query("go") as run:
        async for event in run:
            assert event.message is not None and event.message.message_stream is not None
            first = await event.message.message_stream.recv()
            assert first.content == "working on it"
            await event.message.aclose()
            break
    assert waiting.is_set()
    assert await anyio.to_thread.run_sync(cancelled.wait, 10)  # the run's close cancelled the remote task


def supervisor(remote_agent: RemoteA2AAgent) -> ChatModelAgent:
    def policy(messages: list[Message]) -> Message | str:
        results = tool_results(messages)
        if not results:
            return calling(("c1", remote_agent.name, '{"request": "book Paris"}'))
        return f"The booker says: {results[-1].content}"

    return ChatModelAgent("boss", "delegates", "You delegate.", PolicyModel(policy), tools=[AgentTool(remote_agent)])


@pytest.mark.parametrize("streaming", [True, False])
async def test_as_an_agent_tool(remote: Live, streaming: bool) -> None:
    echo = RemoteA2AAgent(f"{remote.url}/echo/", description="echoes")
    async with Runner(supervisor(echo), enable_streaming=streaming).query("go") as run:
        async for event in run:
            await event.aclose()
    assert run.final_message is not None and run.final_message.content == "The booker says: echo: book Paris"


async def test_a_remote_at_the_root_of_its_host_is_named_as_a_tool_may_be() -> None:
    """Named from a URL with no path (its host and port), or from a card name with a space, a remote agent gets a
    name model APIs take for a tool, and a supervisor calls it by that name."""
    app = Starlette()
    with live_server(app) as live:
        app.router.routes.append(Mount("", app=sdk_agent("Echo Agent", "Echoes.", Echo(), f"{live.url}/")))
        port = live.url.rsplit(":", 1)[1]
        plain = RemoteA2AAgent(f"{live.url}/")
        carded = await RemoteA2AAgent.connect(live.url)
        assert (plain.name, carded.name) == (f"127_0_0_1_{port}", "Echo_Agent")
        for agent in (plain, carded):
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", AgentTool(agent).info().name)
            async with Runner(supervisor(agent)).query("go") as run:
                async for event in run:
                    await event.aclose()
            assert run.final_message is not None
            assert run.final_message.content == "The booker says: echo: book Paris"


async def test_remote_input_required_pauses_the_supervisor(remote: Live) -> None:
    booker = await RemoteA2AAgent.connect(f"{remote.url}/booker/")
    runner = Runner(supervisor(booker), enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())
    async with runner.query("go", checkpoint_id="boss") as run:
        async for event in run:
            await event.aclose()
            if event.action is not None and event.action.interrupted is not None:
                [cause] = [c for c in event.action.interrupted.interrupt_contexts if c.is_root_cause]
    assert run.termination_reason == "interrupted" and cause.info["message"] == "Which city?"
    async with runner.resume("boss", {cause.id: "Rome"}) as resumed:
        async for event in resumed:
            await event.aclose()
    assert resumed.final_message is not None and resumed.final_message.content == "The booker says: Booked Rome."


async def test_approval_decision_is_sent_as_data(remote: Live) -> None:
    from adk.agents.remote_a2a import _resume_part

    part = _resume_part("http://x/", ApprovalDecision(approved=False, reason="no", arguments='{"invoice": 8}'))
    assert part.WhichOneof("content") == "data"
    with pytest.raises(RemoteAgentError, match="resume data"):
        _resume_part("http://x/", None)


async def test_resuming_a_task_that_ended_is_a_typed_error(remote: Live) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.types import CancelTaskRequest

    runner = Runner(RemoteA2AAgent(f"{remote.url}/booker/"), checkpoint_store=InMemoryCheckPointStore())
    async with runner.query("book", checkpoint_id="trip") as run:
        [event] = [e async for e in run]
    assert event.action is not None and event.action.interrupted is not None
    [cause] = event.action.interrupted.interrupt_contexts
    async with httpx.AsyncClient() as http:  # someone cancels the remote task meanwhile
        client = await create_client(f"{remote.url}/booker/", ClientConfig(httpx_client=http))
        await client.cancel_task(CancelTaskRequest(id=cause.info["taskId"]))
    async with runner.resume("trip", {cause.id: "Paris"}) as resumed:
        [event] = [e async for e in resumed]
    assert isinstance(event.error, RemoteAgentError)
    assert event.error.state == "canceled" and event.error.task_id == cause.info["taskId"]
    assert "no longer waits for input" in str(event.error)


async def test_run_directly(remote: Live) -> None:
    from adk import AgentContext, AgentInput
    from compose.schema import user_message

    agent = RemoteA2AAgent(f"{remote.url}/echo/")
    ctx = AgentContext.root(agent.name)
    events = agent.run(
        AgentInput([user_message("first"), Message(role="assistant", content="ok"), user_message("x")]), ctx
    )
    async with aclosing(events):
        [event] = [e async for e in events]
    assert event.message is not None and event.message.message is not None
    assert event.message.message.content == "echo: Conversation so far:\nuser: first\nassistant: ok\n\nx"
    assert ctx.session.final_message == event.message.message


# ---------------------------------------------------------------------------------------------------------------
# a hang-up (``run.cancel("immediate", recursive=True)``, as the AG-UI and A2A servers do)


class Watched(httpx.AsyncBaseTransport):
    """Loopback HTTP whose streamed answers set ``named`` once their first event (the task, naming its id) was
    read through: a hang-up after it is one the client can cancel the remote task for."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.named = anyio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            return response
        return httpx.Response(
            response.status_code, headers=response.headers, stream=_Watch(response.stream, self.named)
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Watch(httpx.AsyncByteStream):
    def __init__(self, stream: Any, named: anyio.Event) -> None:
        self.stream = stream
        self.named = named

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = b""
        async for chunk in self.stream:
            yield chunk
            read += chunk  # the client asks for more only once it handled what it was given
            if b"\n\n" in read.replace(b"\r\n", b"\n"):
                self.named.set()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def hang_up_when(run: Any, named: anyio.Event, recursive: bool = True) -> AgentCancelledError | None:
    async with anyio.create_task_group() as tg:

        async def hang_up() -> None:
            await named.wait()
            assert await run.cancel("immediate", recursive=recursive).wait() == "cancelled"

        tg.start_soon(hang_up)
        return await drain(run)


def slow_once(remote: Live, streaming: bool, http: httpx.AsyncClient | None = None) -> Runner:
    agent = RemoteA2AAgent(f"{remote.url}/slowonce/", httpx_client=http)
    return Runner(agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())


async def test_a_hang_up_while_the_remote_works_cancels_its_task_and_resume_sends_it_again(remote: Live) -> None:
    transport = Watched()
    async with httpx.AsyncClient(transport=transport) as http:
        runner = slow_once(remote, False, http)
        run = runner.query("book", checkpoint_id="trip", cancellable=True)
        error = await hang_up_when(run, transport.named)  # the run waits inside the agent for the artifact's end
        assert error is not None and error.checkpoint_id == "trip" and run.termination_reason == "cancelled"
        assert [c.address for c in error.interrupt_contexts] == ["agent:slowonce"]
        assert await anyio.to_thread.run_sync(cancelled.wait, 10)  # the remote task was canceled
        resumed = runner.resume("trip")
        assert await drain(resumed) is None
    assert asked == ["book", "book"]  # a canceled task does not continue: the conversation is sent again
    assert resumed.final_message is not None and resumed.final_message.content == "done: book"


async def test_a_hang_up_between_streamed_events_cancels_the_remote_task(remote: Live) -> None:
    runner = slow_once(remote, streaming=True)
    run = runner.query("book", checkpoint_id="trip", cancellable=True)
    errors: list[BaseException] = []
    async with run:
        async for event in run:
            if event.error is not None:
                errors.append(event.error)
                continue
            assert event.message is not None and event.message.message_stream is not None
            assert (await event.message.message_stream.recv()).content == "working on it"
            await event.aclose()
            handle = run.cancel("immediate", recursive=True)  # the client is gone: the run stops at its next event
    assert await handle.wait() == "cancelled"
    [error] = errors
    assert isinstance(error, AgentCancelledError) and error.checkpoint_id == "trip"
    assert await anyio.to_thread.run_sync(cancelled.wait, 10)
    async with runner.resume("trip") as resumed:
        async for event in resumed:
            await event.aclose()
    assert resumed.final_message is not None and resumed.final_message.content == "done: book"


@pytest.mark.parametrize("recursive", [True, False])
async def test_a_hang_up_inside_an_agent_tool_cancels_the_remote_task_and_resumes_it(
    remote: Live, recursive: bool
) -> None:
    transport = Watched()
    async with httpx.AsyncClient(transport=transport) as http:
        agent = supervisor(RemoteA2AAgent(f"{remote.url}/slowonce/", httpx_client=http))
        runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
        error = await hang_up_when(runner.query("go", checkpoint_id="c", cancellable=True), transport.named, recursive)
        assert error is not None and error.checkpoint_id == "c"
        # recursive: the remote agent's run paused where it was cut; else the agent tool's call was cut off
        assert any("agent:slowonce" in c.address for c in error.interrupt_contexts) == recursive
        assert await anyio.to_thread.run_sync(cancelled.wait, 10)
        resumed = runner.resume("c")
        assert await drain(resumed) is None
    assert asked == ["book Paris", "book Paris"]
    assert resumed.final_message is not None
    assert resumed.final_message.content == "The booker says: done: book Paris"
