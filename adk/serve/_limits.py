"""The request body bound shared by every route of the server (AG-UI's and A2A's): a body over
``max_body_bytes`` is answered 413 as soon as it is known to be, before it is read whole (a declared
``Content-Length`` at once; a chunked body when its bytes pass the bound)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit", "read_body"]


def too_large(limit: int) -> Response:
    return JSONResponse({"error": f"request body over {limit} bytes"}, status_code=413)


async def read_body(request: Request, limit: int) -> bytes | Response:
    """The request's body, or the 413 response when it is over ``limit`` bytes (read no further than that)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            return too_large(limit)
    return bytes(body)


class BodyLimit:
    """ASGI middleware bounding an app's request bodies by ``max_body_bytes`` (:func:`read_body`); the app gets
    the body read here."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await read_body(Request(scope, receive), self.max_body_bytes)
        if isinstance(body, Response):
            await body(scope, receive, send)
            return
        given = False

        async def replay() -> Message:
            nonlocal given
            if given:
                return await receive()  # the body was read: what follows is the disconnect
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
