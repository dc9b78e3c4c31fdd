"""A2A front door: an agent as an A2A server (a2a-sdk's JSON-RPC endpoint, A2A 1.0 and 0.3 on one URL).

``a2a_app(agent_or_runner, url=...)`` is a Starlette app of its own; ``create_app`` mounts one per agent under
``/a2a/{name}/`` (``create_app(..., a2a=False)`` leaves them out). Routes of each:

* ``GET .well-known/agent-card.json``: the agent card (``adk.serve._a2a_card``), public like any card;
* ``POST /``: JSON-RPC, 1.0 methods (``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``,
  ``ListTasks``, ``SubscribeToTask``) and 0.3's (``message/send``, ``message/stream``, ``tasks/get``,
  ``tasks/cancel``, ``tasks/resubscribe``); what a task shows is ``adk.serve._a2a_executor``'s docstring.

With ``auth``, a request without a principal is answered 401; the principal becomes the request's user, so
the SDK's task store keeps each principal's tasks apart (another's task is "not found") and a context belongs
to the principal that started it. A request body over ``max_body_bytes`` is answered 413 (``adk.serve._limits``,
as the AG-UI routes do).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, SimpleUser
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from adk.agent import Agent
from adk.runner import Runner
from adk.serve._a2a_card import agent_card
from adk.serve._a2a_executor import RunnerExecutor
from adk.serve._access import RequestGuard, principal
from adk.serve._limits import BodyLimit
from adk.serve._run import ServedAgent, served_agent
from adk.sessions import SessionStore
from compose.checkpoint import CheckPointStore

__all__ = ["a2a_app", "a2a_mounts", "a2a_server"]


class _Authenticated:
    """Answers 401 to a JSON-RPC call without a principal; sets the request's user to the principal."""

    def __init__(self, app: ASGIApp, auth: Any) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.auth is not None and scope.get("method") != "GET":
            who = await principal(self.auth, Request(scope))
            if who is None:
                response = JSONResponse({"error": "not authenticated"}, status_code=401)
                await response(scope, receive, send)
                return
            scope["user"] = SimpleUser(who)
            scope["auth"] = AuthCredentials(["authenticated"])
        await self.app(scope, receive, send)


def a2a_server(
    served: ServedAgent,
    *,
    auth: Any = None,
    url: str | None = None,
    task_store: TaskStore | None = None,
    tracker: Any = None,
    max_body_bytes: int = 1_048_576,
) -> Starlette:
    """The A2A app of one served agent (``url``: its public URL; None: the URL the card was asked at); a request
    body over ``max_body_bytes`` is answered 413."""
    card = agent_card(served.agent, name=served.name, url=url or "http://localhost/", description=served.description)
    handler = DefaultRequestHandler(
        agent_executor=RunnerExecutor(served, tracker=tracker),
        task_store=task_store if task_store is not None else InMemoryTaskStore(),
        agent_card=card,
        # a task left input-required is dropped from memory after this long; a later message reloads it from the
        # task store (its run waits in the checkpoint store either way)
        interrupted_task_timeout=600.0,
    )

    async def get_card(request: Request) -> Response:
        here = url or str(request.url).removesuffix(AGENT_CARD_WELL_KNOWN_PATH.lstrip("/"))
        shown = agent_card(served.agent, name=served.name, url=here, description=served.description)
        return JSONResponse(agent_card_to_dict(shown))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()

    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, get_card, methods=["GET"]),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
    ]
    middleware = [Middleware(_Authenticated, auth=auth), Middleware(BodyLimit, max_body_bytes=max_body_bytes)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.handler = handler
    return app


def a2a_app(
    agent: Agent | Runner,
    *,
    url: str,
    name: str | None = None,
    auth: Any = None,
    session_store: SessionStore | None = None,
    checkpoint_store: CheckPointStore | None = None,
    task_store: TaskStore | None = None,
    max_body_bytes: int = 1_048_576,
) -> Starlette:
    """``agent`` as an A2A server (see the module docstring), a Starlette app to run on any ASGI server.

    Args:
        agent: an agent (run by a streaming Runner on the given stores) or a Runner.
        url: the public URL the app is reached at (the card's interfaces point there; its host is answered on a
            loopback server, ``adk.serve._access``), e.g.
            ``"https://agents.example/travel/"``.
        name: the agent's name on its card (default: the agent's own).
        auth: ``async (request) -> principal | None``, as ``create_app``'s (None: 401).
        session_store: where contexts' conversations are kept (default: in memory).
        checkpoint_store: where paused tasks are kept (default: in memory).
        task_store: the a2a-sdk task store (default: ``InMemoryTaskStore``; the SDK's ``DatabaseTaskStore``
            keeps tasks across restarts, as the SQL checkpoint stores keep their runs).
        max_body_bytes: a larger request body is answered 413.

    Example::

        app = a2a_app(agent, url="http://127.0.0.1:8000/")   # uvicorn.run(app, port=8000)
        # another process: RemoteA2AAgent("http://127.0.0.1:8000/")
    """
    from adk.sessions import InMemorySessionStore
    from compose.checkpoint import InMemoryCheckPointStore

    root = agent.agent if isinstance(agent, Runner) else agent
    served = served_agent(
        name or root.name,
        agent,
        session_store if session_store is not None else InMemorySessionStore(),
        checkpoint_store if checkpoint_store is not None else InMemoryCheckPointStore(),
    )
    app = a2a_server(served, auth=auth, url=url, task_store=task_store, max_body_bytes=max_body_bytes)
    app.add_middleware(RequestGuard, cors_origins=(url,))  # its public host; create_app guards its mounts itself
    return app


def a2a_mounts(agents: dict[str, ServedAgent], *, auth: Any, tracker: Any, max_body_bytes: int) -> list[Mount]:
    """``create_app``'s A2A front door: each agent's A2A app under ``/a2a/{name}``."""
    return [
        Mount(f"/a2a/{name}", app=a2a_server(s, auth=auth, tracker=tracker, max_body_bytes=max_body_bytes))
        for name, s in agents.items()
    ]
