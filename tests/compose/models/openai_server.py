"""A small OpenAI-compatible chat-completions server on 127.0.0.1 that plays scripted HTTP responses.

Reusable by any test (models, agents, demos)::

    from tests.compose.models.openai_server import OpenAIServer, sse, text_chunks

    with OpenAIServer([sse(text_chunks("Hello", size=2))]) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0].json["model"] == "m"

Each request to ``POST /v1/chat/completions`` takes the next :class:`Reply` from the queue (or ``repeat`` once
the queue is empty) and records a :class:`RecordedRequest`. With ``check=``, a request the check refuses gets
an error reply instead (the scripted reply stays queued): :func:`llama_cpp_check` refuses what llama.cpp's
server refuses. It runs the standard library's
``ThreadingHTTPServer`` in a thread, binds an ephemeral port, speaks HTTP/1.1 (keep-alive, chunked SSE bodies)
and shuts down when the ``with`` block ends.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "CLOSES_STREAM_EARLY",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "completion",
    "delta_chunk",
    "error_reply",
    "json_reply",
    "llama_cpp_check",
    "raw_reply",
    "sse",
    "text_chunks",
    "tool_call_chunks",
    "usage_chunk",
]


CLOSES_STREAM_EARLY = pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.*:ResourceWarning")
"""Mark for tests that close a response before its body ends: httpx2/httpcore2 then leave an inner async
generator unfinished, which trio (not asyncio) reports with a ResourceWarning when it is collected. The
response itself is closed; the warning is about the third-party generator only."""


@dataclass
class Reply:
    """One scripted HTTP response.

    Attributes:
        status: the HTTP status.
        body: a JSON body (for non-streaming answers and errors).
        raw: a body sent as these bytes instead (``application/json``, whatever they are).
        events: SSE ``data:`` payloads (dicts are JSON-encoded), sent as a chunked ``text/event-stream`` body.
        done: send ``data: [DONE]`` after the events.
        abort_after: drop the connection after this many events, mid-body (the chunked body never ends).
        hold_after: after this many events, wait until ``release`` is set (at most 10 s) before going on.
        headers: extra response headers.
    """

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    events: list[dict[str, Any] | str] | None = None
    done: bool = True
    abort_after: int | None = None
    hold_after: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


class OpenAIServer:
    """The server; use it as a context manager (see the module docstring)."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        repeat: Reply | None = None,
        check: Callable[[Any], Reply | None] | None = None,
    ) -> None:
        self._replies: deque[Reply] = deque(replies)
        self.repeat = repeat
        self.check = check
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client (ends in ``/v1``)."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def push(self, *replies: Reply) -> None:
        """Queue more replies."""
        with self._lock:
            self._replies.extend(replies)

    def __enter__(self) -> OpenAIServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="openai-test-server", daemon=True
        )  # a short poll interval: shutdown() waits for one
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        refused = self.check(request.json) if self.check is not None else None
        with self._lock:
            self.requests.append(request)
            if refused is not None:
                return refused
            if self._replies:
                return self._replies.popleft()
        if self.repeat is not None:
            return self.repeat
        return error_reply(500, "test server: no scripted reply left")


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that closes its connection mid-stream or between requests is normal in these tests
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection ends after this many seconds

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        payload = json.loads(raw) if raw else None
        request = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, payload)
        reply = self.owner._next_reply(request)
        if reply.events is None:
            self._send_json(reply)
        else:
            self._send_events(reply)

    def _send_json(self, reply: Reply) -> None:
        data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, reply: Reply) -> None:
        assert reply.events is not None
        self.send_response(reply.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for n, event in enumerate(reply.events):
                if reply.abort_after is not None and n >= reply.abort_after:
                    self._abort()
                    return
                if n == reply.hold_after:
                    reply.release.wait(10)
                data = event if isinstance(event, str) else json.dumps(event)
                self._chunk(f"data: {data}\n\n".encode())
            if reply.done:
                self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-stream

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _abort(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(2)  # SHUT_RDWR: the client sees the body end early


# ------------------------------------------------------------------------------------------------------------
# Builders of OpenAI payloads

_ID = "chatcmpl-test"


def delta_chunk(
    delta: dict[str, Any] | None = None, *, finish_reason: str | None = None, model: str = "test-model"
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with one choice carrying ``delta``."""
    return {
        "id": _ID,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason, "logprobs": None}],
    }


def usage_chunk(prompt: int, completion: int, *, model: str = "test-model") -> dict[str, Any]:
    """The final chunk a server sends when asked for usage: no choices, only usage."""
    return {
        "id": _ID,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def text_chunks(text: str, *, size: int = 3, field: str = "content") -> list[dict[str, Any]]:
    """``text`` split into deltas of ``size`` characters (``field`` may be ``reasoning_content``)."""
    return [delta_chunk({field: text[i : i + size]}) for i in range(0, len(text), size)]


def tool_call_chunks(
    index: int, call_id: str, name: str, arguments: str, *, size: int = 4
) -> list[dict[str, Any]]:
    """One tool call as a server streams it: id and name in the first fragment, then argument pieces."""
    first = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    out = [delta_chunk({"tool_calls": [first]})]
    for i in range(0, len(arguments), size):
        frag = {"index": index, "function": {"arguments": arguments[i : i + size]}}
        out.append(delta_chunk({"tool_calls": [frag]}))
    return out


def sse(
    chunks: Sequence[dict[str, Any] | str],
    *,
    finish_reason: str | None = "stop",
    usage: tuple[int, int] | None = None,
    done: bool = True,
    abort_after: int | None = None,
) -> Reply:
    """A streaming reply: an assistant-role chunk, ``chunks``, a finish chunk, an optional usage chunk."""
    events: list[dict[str, Any] | str] = [delta_chunk({"role": "assistant", "content": ""}), *chunks]
    if finish_reason is not None:
        events.append(delta_chunk({}, finish_reason=finish_reason))
    if usage is not None:
        events.append(usage_chunk(*usage))
    return Reply(events=events, done=done, abort_after=abort_after)


def completion(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: tuple[int, int] | None = (5, 7),
    reasoning_content: str | None = None,
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    body: dict[str, Any] = {
        "id": _ID,
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


def json_reply(body: Any, status: int = 200) -> Reply:
    """A JSON reply."""
    return Reply(status=status, body=body)


def error_reply(
    status: int, message: str, *, type: str = "error", headers: dict[str, str] | None = None
) -> Reply:
    """An error reply in OpenAI's format: ``{"error": {"message", "type", "code"}}``."""
    return Reply(
        status=status,
        body={"error": {"message": message, "type": type, "code": None, "param": None}},
        headers=dict(headers or {}),
    )


def raw_reply(data: bytes, status: int = 200) -> Reply:
    """A reply whose body is ``data`` as it is (labelled ``application/json``)."""
    return Reply(status=status, raw=data)


def llama_cpp_check(payload: Any) -> Reply | None:
    """Refuse what llama.cpp's server refuses (where OpenAI accepts it); None lets the request through.

    * an assistant message with ``"content": null`` (llama.cpp wants a string or an array of parts): HTTP 500;
    * ``tool_choice: "required"``: HTTP 400 (a named function is accepted);
    * a ``response_format`` of type ``json_schema``: HTTP 500 (it takes ``text`` and ``json_object`` only).
    """
    for i, msg in enumerate(payload.get("messages") or ()):
        if "content" in msg and msg["content"] is None:
            return error_reply(500, f"messages[{i}]: 'content' must be a string or an array", type="server_error")
    if payload.get("tool_choice") == "required":
        return error_reply(400, "Invalid tool_choice: required", type="invalid_request_error")
    if (payload.get("response_format") or {}).get("type") == "json_schema":
        return error_reply(500, "Input should be 'text' or 'json_object'", type="internal_server_error")
    return None
