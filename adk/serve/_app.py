"""``create_app``: the Starlette application serving agents over AG-UI (routes assembled in :func:`routes`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from adk.agent import Agent
from adk.errors import SessionBusyError
from adk.projection import state_of
from adk.runner import Runner
from adk.serve import _devui as devui
from adk.serve._access import Auth, RequestGuard, principal
from adk.serve._durable import catch_up, durable_agui_run, durable_client, numbered
from adk.serve._limits import read_body
from adk.serve._messages import conversation
from adk.serve._run import HangUp, ServedAgent, _thread_messages, agui_run, served_agent
from adk.serve._threads import (
    ResumePayloadError,
    ThreadNotFoundError,
    ThreadRecord,
    check_resume,
    claim_thread,
    delete_record,
    drop_branch,
    forget,
    open_thread,
)
from adk.sessions import InMemorySessionStore, SessionStore
from compose.checkpoint import CheckPointStore, InMemoryCheckPointStore

__all__ = ["Auth", "RunTracker", "create_app", "routes"]

logger = logging.getLogger("adk.serve")


class RunTracker:
    """Counts the runs in flight (``GET /health`` shows it; tests wait for it to reach 0 from another thread)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.in_flight = 0
        self.started = 0

    def enter(self) -> None:
        with self._cond:
            self.in_flight += 1
            self.started += 1

    def leave(self) -> None:
        with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is in flight (True), or ``timeout`` seconds pass (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.in_flight == 0, timeout)


class RunResponse(StreamingResponse):
    """A run's event stream: a client's hang-up (or the server cancelling the request) first cancels the run
    (``stop``), which pauses at once and leaves its checkpoint, then cancels the stream as Starlette does."""

    def __init__(self, stop: HangUp, content: Any, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.stop = stop

    async def listen_for_disconnect(self, receive: Any) -> None:
        try:
            await super().listen_for_disconnect(receive)
        finally:
            self.stop.hang_up()  # a no-op for a run that has ended


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


class _Server:
    """The handlers, over the served agents and the app's settings."""

    def __init__(self, agents: dict[str, ServedAgent], auth: Auth | None, max_body_bytes: int) -> None:
        self.agents = agents
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.tracker = RunTracker()

    async def principal(self, request: Request) -> tuple[bool, str | None]:
        if self.auth is None:
            return True, None
        who = await principal(self.auth, request)
        return who is not None, who

    async def _body(self, request: Request) -> bytes | Response:
        return await read_body(request, self.max_body_bytes)

    async def agui(self, request: Request) -> Response:
        ok, owner = await self.principal(request)
        if not ok:  # before anything else: a client without a principal learns nothing, not even the agents
            return _error(401, "not authenticated")
        name = request.path_params["name"]
        served = self.agents.get(name)
        if served is None:
            return _error(404, f"no agent named {name!r}", agents=sorted(self.agents))
        accept = request.headers.get("accept", "")
        if accept and not any(a in accept for a in ("text/event-stream", "*/*", "text/*")):
            return _error(406, "this endpoint answers text/event-stream")
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        try:
            input = RunAgentInput.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(body)"
            return _error(422, f"invalid RunAgentInput: {field}: {first['msg']}", field=field)
        try:
            record = await claim_thread(
                served.sessions, served.checkpoints, name, input.thread_id, owner, wait=served.runner.session_wait
            )
        except ThreadNotFoundError as exc:
            return _error(404, str(exc))
        except SessionBusyError as exc:
            return _error(409, str(exc))
        if input.resume:
            try:
                check_resume(record.pending(), input.resume)
            except ResumePayloadError as exc:  # the client's mistake: one line, no traceback
                logger.info("agent %r: run %r on thread %r refused: %s", name, input.run_id, input.thread_id, exc)
                return _error(422, str(exc), field=exc.field, interruptId=exc.interrupt_id)
        encoder = EventEncoder(accept=accept)
        stop = HangUp()
        frames = self._stream(served, input, record, owner, encoder, stop)
        if served.durable is not None:
            frames = numbered(frames, encoder, request.headers.get("last-event-id"))
        return RunResponse(
            stop,
            frames,
            media_type=encoder.get_content_type(),
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _stream(
        self,
        served: ServedAgent,
        input: RunAgentInput,
        record: ThreadRecord,
        owner: str | None,
        encoder: Any,
        stop: HangUp,
    ) -> AsyncIterator[str]:
        self.tracker.enter()
        try:
            event: BaseEvent
            if served.durable is not None:  # the run is the workers': a hang-up leaves it going
                events = durable_agui_run(served, input, record, owner)
            else:
                events = agui_run(served, input, record, owner, stop)
            async for event in events:
                if event.timestamp is None:
                    event.timestamp = int(time.time() * 1000)
                yield encoder.encode(event)
        finally:
            self.tracker.leave()

    async def thread(self, request: Request) -> Response:
        ok, owner = await self.principal(request)
        if not ok:
            return _error(401, "not authenticated")
        name, thread_id = request.path_params["name"], request.path_params["thread_id"]
        served = self.agents.get(name)
        if served is None:
            return _error(404, f"no agent named {name!r}")
        try:
            record = await open_thread(served.sessions, served.checkpoints, name, thread_id, owner)
        except ThreadNotFoundError:
            record = None
        if record is None:
            return _error(404, f"no thread {thread_id!r}")
        if served.durable is not None and request.method == "GET":
            record = await catch_up(served, thread_id, record)
        session_id = record.session_of(thread_id)
        if request.method == "DELETE":
            for branch in {thread_id, session_id, *(s for s, _ in record.runs.values())}:
                await served.sessions.delete(branch)
                if branch != thread_id:
                    await drop_branch(served.checkpoints, branch)
            if record.checkpoint_id is not None:
                await forget(served.checkpoints, record.checkpoint_id)
            await delete_record(served.checkpoints, thread_id)
            return Response(status_code=204)
        messages = await _thread_messages(served, session_id, record.checkpoint_id)
        session = await served.sessions.load(session_id)
        interrupts = [
            {k: v for k, v in i.model_dump(mode="json", by_alias=True).items() if k in _INTERRUPT_FIELDS}
            for i in record.pending()
        ]
        return JSONResponse(
            {
                "threadId": thread_id,
                "messages": [m.model_dump(mode="json", by_alias=True) for m in conversation(thread_id, messages)],
                "state": state_of(session.values),
                "interrupts": interrupts,
            }
        )

    async def list_agents(self, request: Request) -> Response:
        ok, _ = await self.principal(request)
        if not ok:
            return _error(401, "not authenticated")
        return JSONResponse(
            {
                "agents": [
                    {"name": s.name, "description": s.description, "graph": _mermaid(s)} for s in self.agents.values()
                ]
            }
        )

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "runs": self.tracker.in_flight})


_INTERRUPT_FIELDS = ("id", "reason", "message", "toolCallId")


def _mermaid(served: ServedAgent) -> str | None:
    runnable = getattr(served.agent, "runnable", None)
    graph_info = getattr(runnable, "graph_info", None)
    if graph_info is None:
        return None
    text: str = graph_info().to_mermaid()
    return text


def routes(server: _Server, *, dev_ui: bool = False) -> list[Route]:
    """Every route of the app, in one place (later front doors add theirs here)."""
    return [
        Route("/agents/{name}/agui", server.agui, methods=["POST"]),
        Route("/agents/{name}/threads/{thread_id}", server.thread, methods=["GET", "DELETE"]),
        Route("/agents", server.list_agents, methods=["GET"]),
        Route("/health", server.health, methods=["GET"]),
        *devui.routes(server, page=dev_ui),
    ]


def _a2a(server: _Server, enabled: bool | None) -> list[BaseRoute]:
    """The A2A mounts, when A2A is on (see ``create_app``)."""
    if enabled is False:
        return []
    try:
        from adk.serve._a2a_app import a2a_mounts
    except ImportError as exc:
        if enabled:
            raise ImportError(f'create_app(a2a=True) needs the a2a extra: pip install "pyeino[a2a]" ({exc})') from exc
        return []
    return list(
        a2a_mounts(server.agents, auth=server.auth, tracker=server.tracker, max_body_bytes=server.max_body_bytes)
    )


def create_app(
    agents: Agent | Runner | Mapping[str, Agent | Runner],
    *,
    session_store: SessionStore | None = None,
    checkpoint_store: CheckPointStore | None = None,
    auth: Auth | None = None,
    cors_origins: tuple[str, ...] | list[str] = (),
    max_body_bytes: int = 1_048_576,
    durable: Any = None,
    a2a: bool | None = None,
    dev_ui: bool = False,
) -> Starlette:
    """The Starlette app serving ``agents`` over AG-UI 1.0 (see the ``adk.serve`` docstring for the routes).

    Args:
        agents: one agent or Runner (served under its agent's name), or a mapping of names to them. An agent
            gets a streaming Runner on the given stores; a Runner keeps its own stores (missing ones are the
            given ones).
        session_store: where threads are kept (default: in memory).
        checkpoint_store: where paused runs and thread records are kept (default: in memory).
        auth: ``async (request) -> principal | None``: a principal is a non-empty str; None, False or ""
            answers 401. Threads (their branches, A2A contexts) belong to the principal that created them.
        cors_origins: origins allowed by CORS (none: CORS is off); a browser request that changes something from
            any other origin than the server's own is 403, and every request body must be JSON (415); a server
            listening on loopback answers only a ``Host`` naming loopback or one of these origins' hosts (403;
            ``adk.serve._access``).
        max_body_bytes: a larger request body is answered 413 (on the A2A routes too).
        durable: an ``adk.durable.DurableClient`` (or a mapping of agent names to one each: one queue serves
            one agent): runs are submitted to its queue's workers and streamed back from their durable event
            streams; a client reconnects by POSTing the same runId (``adk.serve._durable``). The stores hold
            the threads; the workers run the agent (the one given here names and describes it).
        a2a: serve each agent over A2A too, under ``/a2a/{name}/`` (``adk.serve._a2a_app``); None (default):
            when the a2a extra is installed; True without it raises ImportError.
        dev_ui: serve the dev page at ``/`` (``adk.serve._devui``; on by default under ``python -m adk.serve``).

    Raises:
        TypeError: an entry is neither an agent nor a Runner.
        ValueError: no agents, or an empty name; one ``durable`` client for several agents.
    """
    sessions = session_store if session_store is not None else InMemorySessionStore()
    checkpoints = checkpoint_store if checkpoint_store is not None else InMemoryCheckPointStore()
    if isinstance(agents, Mapping):
        named = dict(agents)
    else:
        root = agents.agent if isinstance(agents, Runner) else agents
        named = {root.name: agents}
    if not named:
        raise ValueError("create_app: no agents to serve")
    served: dict[str, ServedAgent] = {}
    for name, agent in named.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"create_app: agent names must be non-empty strings, got {name!r}")
        served[name] = served_agent(name, agent, sessions, checkpoints)
        served[name].durable = durable_client(durable, name, len(named))
    server = _Server(served, auth, max_body_bytes)
    middleware = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                allow_headers=["*"],
            )
        )
    middleware.append(Middleware(RequestGuard, cors_origins=tuple(cors_origins)))  # inside CORS: after a preflight
    app = Starlette(routes=[*routes(server, dev_ui=dev_ui), *_a2a(server, a2a)], middleware=middleware)
    app.state.server = server
    app.state.tracker = server.tracker
    return app
