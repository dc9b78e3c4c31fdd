"""Who is asking, and whether a browser page may ask: the principal of an ``auth`` hook's answer, and the
cross-site request guard in front of every route (AG-UI, A2A, the dev page's).

A principal is a non-empty string. ``None``, ``False`` and ``""`` mean nobody (401); any other answer is the
hook's bug: it is logged, naming the hook and what it returned, and answered 401 too (never a principal
``"False"`` or ``"42"``).

The guard (CSRF). A browser sends a "simple" cross-site ``POST`` (``text/plain``, a form) without asking first,
with the user's cookies: any page the user visits could run an agent as them. So every request that changes
something (any method but ``GET``, ``HEAD`` and ``OPTIONS``):

* that carries an ``Origin`` (browsers always send one on such requests) is refused (403) unless the origin is
  the server's own (its ``Host``) or one of ``cors_origins``;
* with a body must be JSON (``Content-Type: application/json``), else 415: a JSON request from another origin
  needs a CORS preflight, which only ``cors_origins`` pass.

The ``Origin`` check trusts ``Host``, which a DNS-rebinding page sets itself (its own name, resolved to the
server's address: its requests are same-origin to the browser). So a server listening on a loopback address
(ASGI ``scope["server"]``: a dev server on ``127.0.0.1``) answers every request, reads too, only when ``Host``
names loopback (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``[::1]``) or the host of one of
``cors_origins`` (a proxy's public name); else 403.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Auth", "RequestGuard", "principal", "principal_of"]

logger = logging.getLogger("adk.serve")

Auth = Callable[[Request], Awaitable[Any]]
"""``async (request) -> principal | None``: who is asking (a non-empty str; None, False or "": nobody, 401)."""

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def principal_of(who: Any, auth: Any) -> str | None:
    """The principal ``auth`` answered with: ``who`` if it is a non-empty str, else None (nobody; an answer that
    is neither a principal nor None/False/"" is logged as the hook's bug)."""
    if isinstance(who, str) and who:
        return who
    if who is not None and who is not False and who != "":
        logger.error(
            "auth hook %r returned %r (%s): a principal is a non-empty str (None, False or '' for nobody); "
            "answered 401",
            auth,
            who,
            type(who).__name__,
        )
    return None


async def principal(auth: Auth, request: Request) -> str | None:
    """Who is asking, by ``auth`` (None: nobody)."""
    return principal_of(await auth(request), auth)


def _loopback(name: str | None) -> bool:
    name = (name or "").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _netloc(origin: str) -> str | None:
    parts = urlsplit(origin)
    return parts.netloc.lower() if parts.scheme in ("http", "https") and parts.netloc else None


class RequestGuard:
    """The cross-site request guard (see the module docstring), an ASGI middleware."""

    def __init__(self, app: ASGIApp, cors_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(o.rstrip("/").lower() for o in cors_origins)
        self.hosts = frozenset(urlsplit(o).hostname for o in self.allowed) - {None}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> JSONResponse | None:
        headers = request.headers
        server = request.scope.get("server")
        host = headers.get("host")
        if server and _loopback(str(server[0])) and host:
            try:
                name = urlsplit("//" + host).hostname
            except ValueError:  # "[::1" and the like
                name = None
            if not _loopback(name) and name not in self.hosts:
                message = (
                    f"host {host!r} refused: this server listens on loopback and answers loopback names only (DNS "
                    "rebinding); behind a proxy, list its public origin in cors_origins"
                )
                return JSONResponse({"error": message}, status_code=403)
        if request.method in _SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not self._allowed(origin, headers.get("host", "")):
            return JSONResponse(
                {"error": f"cross-site request from origin {origin!r} refused (not this server, not in cors_origins)"},
                status_code=403,
            )
        length = headers.get("content-length", "")
        if request.method == "POST" or (length.isdigit() and int(length) > 0) or "transfer-encoding" in headers:
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
                return JSONResponse(
                    {"error": f"request body must be application/json, got {kind or 'no Content-Type'!r}"},
                    status_code=415,
                )
        return None

    def _allowed(self, origin: str, host: str) -> bool:
        if origin.rstrip("/").lower() in self.allowed:
            return True
        netloc = _netloc(origin)
        return netloc is not None and netloc == host.lower()
