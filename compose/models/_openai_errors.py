"""The one place where the ``openai`` SDK's errors become pyeino's (STYLE.md 8)."""

from __future__ import annotations

import math
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import anyio
import httpx2
import openai

from compose.errors import (
    ChatModelError,
    ModelAuthError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
)

__all__ = ["retry_after_seconds", "translate_openai_error", "translated_errors"]


def translate_openai_error(exc: openai.OpenAIError, *, base_url: object = None) -> ChatModelError:
    """The :class:`~compose.errors.ChatModelError` for an ``openai`` SDK error (its ``__cause__`` is set).

    429 → ``ModelRateLimitError``; timeouts and 408 → ``ModelTimeoutError``; 5xx, connection errors and errors
    sent inside a stream → ``ModelServerError`` (all retryable); 401/403 → ``ModelAuthError``; other 4xx →
    ``ModelBadRequestError``; a body the SDK cannot read → ``ModelResponseError`` (not retryable). A
    ``Retry-After`` header (``retry-after-ms``, or ``retry-after`` in seconds or as an HTTP date) becomes the
    error's ``retry_after`` in seconds. A connection error names the server (``base_url``, else the request's
    URL) and the innermost cause (``cannot connect to http://127.0.0.1:8080/v1/ (ConnectionRefusedError: ...)``).
    """
    status: int | None = getattr(exc, "status_code", None)
    detail = getattr(exc, "message", None) or str(exc)
    err: ChatModelError
    if isinstance(exc, openai.APITimeoutError):
        err = ModelTimeoutError(f"request timed out: {detail}")
    elif isinstance(exc, openai.APIConnectionError):
        err = ModelServerError(_connection_problem(exc, base_url))
    elif isinstance(exc, openai.APIResponseValidationError):
        err = ModelResponseError(f"unexpected response (HTTP {status}): {detail}", status_code=status)
    elif isinstance(exc, openai.APIStatusError):
        err = _status_error(exc.status_code, detail)
        err.retry_after = retry_after_seconds(exc.response.headers)
    elif isinstance(exc, openai.APIError):
        err = ModelServerError(f"error in the response: {detail}")
    else:
        err = ChatModelError(f"{type(exc).__name__}: {detail}")
    err.__cause__ = exc
    return err


def _connection_problem(exc: openai.APIConnectionError, base_url: object) -> str:
    server = str(base_url) if base_url is not None else str(exc.request.url)
    causes: list[BaseException] = []
    cause = exc.__cause__ or exc.__context__
    while cause is not None and cause not in causes:
        causes.append(cause)
        # trio reports a failed connect as a group of the attempts' errors: the first one says why
        grouped = cause.exceptions[0] if isinstance(cause, BaseExceptionGroup) and cause.exceptions else None
        cause = grouped or cause.__cause__ or cause.__context__
    if not causes:
        return f"connection error with {server}: {exc.message}"
    innermost = causes[-1]
    why = f"{type(innermost).__name__}: {innermost}" if str(innermost) else type(innermost).__name__
    if any(isinstance(c, httpx2.ConnectError) for c in causes):
        return f"cannot connect to {server} ({why})"
    return f"connection error with {server} ({why})"


def _status_error(status: int, detail: str) -> ChatModelError:
    text = f"HTTP {status}: {detail}"
    if status == 429:
        return ModelRateLimitError(f"rate limited ({text})", status_code=status)
    if status == 408:
        return ModelTimeoutError(f"request timed out ({text})", status_code=status)
    if status >= 500:
        return ModelServerError(f"server error ({text})", status_code=status)
    if status in (401, 403):
        return ModelAuthError(f"authentication failed ({text})", status_code=status)
    return ModelBadRequestError(f"bad request ({text})", status_code=status)


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """The wait a response asks for, in seconds: ``retry-after-ms`` (OpenAI's), else ``retry-after`` as seconds
    or as an HTTP date (a date in the past is 0); None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        value = _number(millis)
        if value is not None:
            return value / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    value = _number(raw)
    if value is not None:
        return value
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@contextmanager
def translated_errors(request: httpx2.Request | None = None, *, base_url: object = None) -> Iterator[None]:
    """Translate SDK errors raised inside the block; with ``request``, also the HTTP client's own errors (as
    the SDK would: timeouts and broken connections while a body is read). ``base_url`` names the server in
    connection errors."""
    try:
        yield
    except openai.OpenAIError as exc:
        raise translate_openai_error(exc, base_url=base_url) from exc
    except httpx2.TimeoutException as exc:
        if request is None:
            raise
        timeout = openai.APITimeoutError(request=request)
        timeout.__cause__ = exc
        read = (request.extensions.get("timeout") or {}).get("read")
        if isinstance(exc, httpx2.ReadTimeout) and isinstance(read, int | float):
            raise ModelTimeoutError(f"the stream stalled: no data from the server for {read:g} s") from timeout
        raise translate_openai_error(timeout) from timeout
    except (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream) as exc:
        if request is None:
            raise
        err = openai.APIConnectionError(message=f"{type(exc).__name__}: {exc}", request=request)
        err.__cause__ = exc
        raise translate_openai_error(err) from err
