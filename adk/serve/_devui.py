"""The dev page's routes: the page itself (``GET /``, its files under ``/devui/``) and the two reads it needs
beyond the AG-UI routes, which any client may use.

* ``GET /agents/{name}/threads``: the principal's threads of that agent (``threadId``, ``title``: the first user
  message, ``messages``: how many, a paused run's turn included, ``paused``, ``created`` and ``updated``: ISO 8601
  UTC, null for a thread stored before they were kept), most recently updated first (those without a time last,
  by id). The records are listed from the checkpoint store (``list(prefix)``; a store without it is answered 501)
  and filtered by agent and owner, as every thread route is: another principal's thread is never listed.
* ``GET /agents/{name}/graph``: the agent as data the page draws: the tree of agents (sub-agents of a flow or
  workflow, agent tools), each with its tools and, for an agent running a compiled graph, the graph's nodes and
  edges (``start``/``end`` included; branch ends as ``branch`` edges).

The page (``adk/serve/devui/``: plain HTML, CSS and JS, no build step, no CDN) is a client of these routes and of
``POST /agents/{name}/agui`` like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adk.serve._run import ServedAgent, _thread_messages
from adk.serve._threads import _PREFIX as THREAD_PREFIX
from adk.serve._threads import load_record
from compose.graph.info import GraphInfo

__all__ = ["agent_tree", "graph_data", "routes"]

_JS, _CSS = "text/javascript; charset=utf-8", "text/css; charset=utf-8"
_FILES = {"agui.js": _JS, "graph.js": _JS, "app.js": _JS, "app.css": _CSS}
_MAX_DEPTH = 16
# the page runs its own files only and is never framed by another site (a framed page's Approve button could be
# clicked through a decoy: clickjacking)
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _page_file(name: str) -> bytes:
    return (resources.files("adk.serve") / "devui" / name).read_bytes()


def graph_data(info: GraphInfo) -> dict[str, Any]:
    """``info``'s nodes and edges as JSON data (``kind`` of an edge: ``edge``, ``data``, ``control``,
    ``branch``); a sub-graph node carries its own as ``graph``."""
    nodes: list[dict[str, Any]] = [{"id": "start", "label": "start", "kind": "start"}]
    for n in info.nodes:
        node: dict[str, Any] = {"id": n.key, "label": n.name, "kind": n.kind}
        if n.graph is not None:
            node["graph"] = graph_data(n.graph)
        nodes.append(node)
    nodes.append({"id": "end", "label": "end", "kind": "end"})
    edges = [{"from": s, "to": e, "kind": "edge"} for s, e in info.edges]
    edges += [{"from": s, "to": e, "kind": "data"} for s, e in info.data_edges]
    edges += [{"from": s, "to": e, "kind": "control"} for s, e in info.control_edges]
    edges += [{"from": b.start, "to": e, "kind": "branch"} for b in info.branches for e in b.end_nodes]
    return {"nodes": nodes, "edges": edges}


def _graph_of(agent: Any) -> dict[str, Any] | None:
    runnable = getattr(agent, "runnable", None)
    graph_info = getattr(runnable, "graph_info", None)
    return graph_data(graph_info()) if graph_info is not None else None


def agent_tree(agent: Any, *, via: str = "root", depth: int = 0) -> dict[str, Any]:
    """The tree of agents under ``agent``: its name, description, class, tools and graph, and its children
    (``via``: ``sub_agent`` for a flow's or workflow's, ``tool`` for an agent tool)."""
    from adk.agents.agent_tool import AgentTool

    inner = agent
    for _ in range(_MAX_DEPTH):  # through the wrappers (FlowAgent, a deterministic transfer) to the agent itself
        wrapped = getattr(inner, "agent", None)
        if wrapped is None or hasattr(inner, "tools_config") or not hasattr(wrapped, "run"):
            break
        inner = wrapped
    tools: list[str] = []
    children: list[dict[str, Any]] = []
    config = getattr(inner, "tools_config", None)
    for tool in getattr(config, "tools", ()) or ():
        tools.append(tool.info().name)
        if isinstance(tool, AgentTool) and depth < _MAX_DEPTH:
            children.append(agent_tree(tool.agent, via="tool", depth=depth + 1))
    subs = getattr(agent, "sub_agents", None) or getattr(inner, "sub_agents", None) or []
    if depth < _MAX_DEPTH:
        children.extend(agent_tree(sub, via="sub_agent", depth=depth + 1) for sub in subs)
    return {
        "name": agent.name,
        "description": getattr(agent, "description", ""),
        "kind": type(inner).__name__,
        "via": via,
        "tools": tools,
        "graph": _graph_of(inner),
        "children": children,
    }


def _by_recency(threads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``threads`` (listed in id order) most recently updated first; those without a time (stored before records
    had one) last, in id order."""
    timed = sorted((t for t in threads if t["updated"]), key=lambda t: (t["updated"], t["created"] or ""), reverse=True)
    return timed + [t for t in threads if not t["updated"]]


class _Server(Protocol):
    """What the routes need of the app's server (``adk.serve._app``): its agents and its auth."""

    @property
    def agents(self) -> Mapping[str, ServedAgent]: ...

    async def principal(self, request: Request) -> tuple[bool, str | None]: ...


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def routes(server: _Server, *, page: bool) -> list[Route]:
    """The thread list and graph routes, and with ``page`` the dev page at ``/`` and its files."""

    async def threads(request: Request) -> Response:
        ok, owner = await server.principal(request)
        if not ok:
            return _error(401, "not authenticated")
        name = request.path_params["name"]
        served = server.agents.get(name)
        if served is None:
            return _error(404, f"no agent named {name!r}")
        lister = getattr(served.checkpoints, "list", None)
        if lister is None:
            kind = type(served.checkpoints).__name__
            return _error(501, f"agent {name!r}: its checkpoint store ({kind}) cannot list its keys (no list(prefix))")
        found: list[dict[str, Any]] = []
        for key in sorted(await lister(THREAD_PREFIX)):
            thread_id = key[len(THREAD_PREFIX) :]
            record = await load_record(served.checkpoints, thread_id)
            if record is None or record.owner != owner or record.agent != served.name:
                continue
            messages = await _thread_messages(served, thread_id, record.checkpoint_id)
            first = next((m.content for m in messages if m.role == "user" and m.content), "")
            found.append(
                {
                    "threadId": thread_id,
                    "title": first[:80],
                    "messages": len(messages),
                    "paused": record.checkpoint_id is not None,
                    "created": record.created,
                    "updated": record.updated,
                }
            )
        return JSONResponse({"threads": _by_recency(found)})

    async def graph(request: Request) -> Response:
        ok, _ = await server.principal(request)
        if not ok:
            return _error(401, "not authenticated")
        name = request.path_params["name"]
        served = server.agents.get(name)
        if served is None:
            return _error(404, f"no agent named {name!r}")
        return JSONResponse({"name": name, "agents": agent_tree(served.agent)})

    async def index(request: Request) -> Response:
        return Response(_page_file("index.html"), media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)

    async def asset(request: Request) -> Response:
        file = request.path_params["file"]
        if file not in _FILES:
            return _error(404, f"no dev page file {file!r}")
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        return Response(_page_file(file), media_type=_FILES[file], headers=headers)

    found = [
        Route("/agents/{name}/threads", threads, methods=["GET"]),
        Route("/agents/{name}/graph", graph, methods=["GET"]),
    ]
    if page:
        found += [Route("/", index, methods=["GET"]), Route("/devui/{file}", asset, methods=["GET"])]
    return found
