"""Reading an OpenAI chat-completions SSE body as ``Message`` chunks.

The body is read from the HTTP response directly (``response.aiter_bytes()``, which closes its whole chain of
generators when closed) rather than through the SDK's ``AsyncStream``: that one leaves inner async generators
unfinished when it stops at ``[DONE]`` (trio warns about them) and builds a pydantic object per chunk that we
would convert again.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncGenerator

import anyio
import httpx2
import openai
from pydantic import ValidationError

from compose.errors import ModelResponseError, ModelServerError
from compose.models._openai_errors import translate_openai_error, translated_errors
from compose.models._openai_wire import chunk_message
from compose.schema import Message

__all__ = ["ChunkIterator"]


class ChunkIterator:
    """The ``Message`` chunks of one streamed response; ``aclose`` closes the response, even if never started.

    A chunk with no content, reasoning, tool call, finish reason or usage (a server's role-only first chunk)
    is skipped. An error event, a broken connection, or a body that ends before any finish reason is delivered
    once as a :class:`~compose.errors.ChatModelError` (a truncated body as ``ModelServerError``, "stream
    truncated"), then the iterator is exhausted.
    """

    __slots__ = ("_body", "_buffer", "_data", "_done", "_finished", "_pending", "_request", "_response")

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self._request = response.request
        self._body: AsyncGenerator[bytes, None] = response.aiter_bytes()
        self._buffer = b""
        self._data: list[bytes] = []  # data lines of the event being read
        # decoded chunks not yet returned; an exception in it ends the stream after the chunks before it
        self._pending: deque[Message | Exception] = deque()
        self._finished = False  # a chunk carried a finish reason
        self._done = False  # no more reading from the body

    def __aiter__(self) -> ChunkIterator:
        return self

    async def __anext__(self) -> Message:
        while not self._pending:
            if self._done:
                raise StopAsyncIteration
            try:
                with translated_errors(self._request):
                    raw = await self._body.__anext__()
            except StopAsyncIteration:
                await self.aclose()
                self._feed(b"\n\n")  # a last event may lack its blank line
                if not self._finished:
                    self._pending.append(
                        ModelServerError("stream truncated: the response ended without a finish reason")
                    )
                continue
            except BaseException:
                await self.aclose()
                raise
            self._feed(raw)
        item = self._pending.popleft()
        if isinstance(item, Exception):
            self._pending.clear()
            await self.aclose()
            raise item
        return item

    async def aclose(self) -> None:
        self._done = True
        with anyio.CancelScope(shield=True):
            await self._body.aclose()  # closes aiter_raw, which closes the response
            await self._response.aclose()

    def _feed(self, raw: bytes) -> None:
        lines = (self._buffer + raw).split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    data = b"\n".join(self._data)
                    self._data.clear()
                    try:
                        msg = self._event(data)
                    except ValidationError as exc:
                        self._pending.append(
                            ModelResponseError(f"the stream sent a chunk that does not fit: {exc}")
                        )
                        self._done = True
                        return
                    except Exception as exc:
                        self._pending.append(exc)
                        self._done = True
                        return
                    if msg is not None:
                        self._pending.append(msg)
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
            # other fields (event:, id:, retry:) and comments (": keep-alive") carry nothing we use

    def _event(self, data: bytes) -> Message | None:
        if data.startswith(b"[DONE]"):
            return None
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ModelServerError(f"the stream sent data that is not JSON: {data[:200]!r}") from None
        if not isinstance(chunk, dict):
            raise ModelServerError(f"the stream sent data that is not a JSON object: {data[:200]!r}")
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else None
            raise translate_openai_error(
                openai.APIError(
                    message if isinstance(message, str) and message else "An error occurred during streaming",
                    self._request,
                    body=error,
                )
            )
        msg = chunk_message(chunk)
        if msg is not None and msg.response_meta is not None and msg.response_meta.finish_reason:
            self._finished = True
        return msg
