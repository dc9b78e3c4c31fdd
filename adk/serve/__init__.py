"""Serve agents over HTTP with AG-UI 1.0 (extra ``pip install "pyeino[serve]"``: Starlette, uvicorn,
ag-ui-protocol).

``create_app(agents, ...)`` returns a Starlette app (run it on any ASGI server; ``python -m adk.serve
module:build`` runs it on uvicorn). Routes:

* ``POST /agents/{name}/agui``: body ``RunAgentInput``; answers ``text/event-stream`` AG-UI events
  (``adk.serve._run`` says which, in which order);
* ``GET /agents/{name}/threads/{thread_id}``: the thread's messages (AG-UI), its session values as ``state`` and
  its pending interrupts; ``DELETE`` forgets it;
* ``GET /agents``: name, description and Mermaid drawing of each agent's graph; ``GET /health``;
* ``/a2a/{name}/``: the agent over A2A 1.0 and 0.3 (extra ``pyeino[a2a]``; ``adk.serve._a2a_app`` says what it
  serves; :func:`a2a_app` is the same as an app of its own).

The server is a client of the Runner: a thread is a session of the session store (one run at a time), a pause is
the Runner's checkpoint and its resume ``runner.resume``, a ``parentRunId`` branch ``runner.fork``; the server
adds transport, identity and limits. With ``durable=DurableClient(dsn)`` the runs go to ``adk.durable`` workers
and stream back from their durable event streams (``adk.serve._durable``: reconnect by runId). The
routes are assembled in one place (``adk.serve._app.routes``); the AG-UI mapping of a run's events is
:class:`EventMapper` (over the run's projection, ``adk.projection``, which the A2A executor reads too).

Example::

    from adk.serve import create_app

    async def who(request):                      # a principal, or None for 401
        return request.headers.get("x-user")

    app = create_app({"travel": agent}, auth=who, cors_origins=["https://app.example"])
    # uvicorn.run(app), or: python -m adk.serve myapp.agents:build --db postgresql://...
"""

try:
    import ag_ui.core  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(f'adk.serve needs the serve extra: pip install "pyeino[serve]" ({exc})') from exc

from typing import TYPE_CHECKING

from adk.serve._app import Auth, RunTracker, create_app
from adk.serve._client_tools import ClientToolCall, RequestExtras
from adk.serve._mapping import EventMapper
from compose.lowlevel import lazy_names

if TYPE_CHECKING:
    from adk.serve._a2a_app import a2a_app
else:  # the a2a extra is imported on first use
    __getattr__, __dir__ = lazy_names(__name__, {"a2a_app": "adk.serve._a2a_app"})

__all__ = ["Auth", "ClientToolCall", "EventMapper", "RequestExtras", "RunTracker", "a2a_app", "create_app"]
