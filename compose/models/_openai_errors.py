"""The one place where the ``openai`` SDK's errors become pyeino's (STYLE.md 8)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager

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

__all__ = ["translate_openai_error", "translated_errors"]


def translate_openai_error(exc: openai.OpenAIError) -> ChatModelError:
    """The :class:`~compose.errors.ChatModelError` for an ``openai`` SDK error (its ``__cause__`` is set).

    429 → ``ModelRateLimitError``; timeouts and 408 → ``ModelTimeoutError``; 5xx, connection errors and errors
    sent inside a stream → ``ModelServerError`` (all retryable); 401/403 → ``ModelAuthError``; other 4xx →
    ``ModelBadRequestError``; a body the SDK cannot read → ``ModelResponseError`` (not retryable).
    """
    status: int | None = getattr(exc, "status_code", None)
    detail = getattr(exc, "message", None) or str(exc)
    err: ChatModelError
    if isinstance(exc, openai.APITimeoutError):
        err = ModelTimeoutError(f"request timed out: {detail}")
    elif isinstance(exc, openai.APIConnectionError):
        err = ModelServerError(f"connection error: {detail}")
    elif isinstance(exc, openai.APIResponseValidationError):
        err = ModelResponseError(f"unexpected response (HTTP {status}): {detail}", status_code=status)
    elif isinstance(exc, openai.APIStatusError):
        err = _status_error(exc.status_code, detail)
    elif isinstance(exc, openai.APIError):
        err = ModelServerError(f"error in the response: {detail}")
    else:
        err = ChatModelError(f"{type(exc).__name__}: {detail}")
    err.__cause__ = exc
    return err


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


@contextmanager
def translated_errors(request: httpx2.Request | None = None) -> Iterator[None]:
    """Translate SDK errors raised inside the block; with ``request``, also the HTTP client's own errors (as
    the SDK would: timeouts and broken connections while a body is read)."""
    try:
        yield
    except openai.OpenAIError as exc:
        raise translate_openai_error(exc) from exc
    except httpx2.TimeoutException as exc:
        if request is None:
            raise
        timeout = openai.APITimeoutError(request=request)
        timeout.__cause__ = exc
        raise translate_openai_error(timeout) from timeout
    except (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream) as exc:
        if request is None:
            raise
        err = openai.APIConnectionError(message=f"{type(exc).__name__}: {exc}", request=request)
        err.__cause__ = exc
        raise translate_openai_error(err) from err
