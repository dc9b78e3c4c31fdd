"""Model retry (eino-semantics 4.8): ``ModelRetryConfig`` and the chat model wrapper that applies it.

``generate``: attempts 0..max_retries; a non-retryable error is raised as it is; when every attempt failed,
:class:`~adk.errors.RetryExhaustedError` (``last_error``, ``total_retries``). ``stream``: each attempt's stream is
copied in two; copy 0 is read to its end to detect a failure in the middle of the stream, and only a clean
attempt's copy 1 is returned (so the decision waits for the whole stream). Between attempts the wrapper waits
``backoff(attempt)`` seconds with ``anyio.sleep``, or longer when the error asks for it (``retry_after``, from a
``Retry-After`` header), up to ``max_retry_after``.

Without ``is_retryable``, :func:`default_is_retryable` decides: every error is retried (as Eino) except those
retrying cannot fix: authentication and permission errors (``ModelAuthError``, HTTP 401/403), rejected requests
(``ModelBadRequestError``, HTTP 400/404/422) and the run's own deadline (``AgentTimeoutError``).

In an agent, each attempt produces its own model event; a failed attempt's event stream ends with
:class:`~adk.errors.WillRetryError` when the call will be retried, or with the raw error otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from adk.errors import AgentTimeoutError, RetryExhaustedError
from compose.errors import CassetteError, GraphInterrupt, ModelAuthError, ModelBadRequestError
from compose.models.base import ChatModel
from compose.schema import Message, ToolInfo
from compose.stream import StreamReader

__all__ = ["ModelRetryConfig", "RetryChatModel", "default_backoff", "default_is_retryable"]

T = TypeVar("T")

# The attempt (0-based) of the model call in progress; read by the agent's event-emitting model.
current_attempt: ContextVar[int] = ContextVar("pyeino_model_attempt", default=0)


def default_backoff(attempt: int) -> float:
    """Eino's default backoff in seconds for retry ``attempt`` (1-based): 0.1 s doubling per attempt, capped at
    10 s, plus a jitter in [0, delay/2); attempt <= 0 waits 0.1 s, attempt > 7 waits 10 s + [0, 5 s)."""
    base, cap = 0.1, 10.0
    if attempt <= 0:
        return base
    if attempt > 7:
        return cap + random.uniform(0, cap / 2)
    delay = min(base * (1 << (attempt - 1)), cap)
    return delay + random.uniform(0, delay / 2)


def default_is_retryable(error: BaseException) -> bool:
    """The retry policy when ``is_retryable`` is None: everything but what a retry cannot fix.

    False for ``ModelAuthError`` (HTTP 401/403), ``ModelBadRequestError`` (HTTP 400/404/422, a request that
    cannot be encoded), ``AgentTimeoutError`` (the run's deadline has passed) and ``CassetteError`` (a replayed
    call that matches no recording: asking again gives the same answer); True for every other error, as Eino
    retries all errors.

    Example:
        >>> from compose.errors import ModelAuthError, ModelServerError
        >>> default_is_retryable(ModelServerError("503")), default_is_retryable(ModelAuthError("401"))
        (True, False)
    """
    return not isinstance(error, ModelAuthError | ModelBadRequestError | AgentTimeoutError | CassetteError)


@dataclass(frozen=True, slots=True)
class ModelRetryConfig:
    """How a ChatModelAgent retries failed model calls.

    Args:
        max_retries: retries after the first attempt (0: no retry; 3: up to 4 calls).
        is_retryable: ``(error) -> bool``; None is :func:`default_is_retryable` (every error but auth, bad
            request and the run's timeout).
        backoff: ``(attempt) -> seconds`` before retry ``attempt`` (1-based); None is :func:`default_backoff`.
        max_retry_after: the longest wait a provider's ``Retry-After`` can impose, in seconds (default 10, the
            default backoff's cap); the wait before a retry is the longer of the backoff and the error's
            ``retry_after`` bounded by this.

    Example::

        ModelRetryConfig(max_retries=3, is_retryable=lambda e: getattr(e, "retryable", False))
    """

    max_retries: int = 0
    is_retryable: Callable[[BaseException], bool] | None = None
    backoff: Callable[[int], float] | None = None
    max_retry_after: float = 10.0

    def retryable(self, error: BaseException) -> bool:
        """Whether ``error`` may be retried (never an interrupt: a pause, such as a cancel's, is not a failure)."""
        if isinstance(error, GraphInterrupt):
            return False
        if self.is_retryable is None:
            return default_is_retryable(error)
        return bool(self.is_retryable(error))

    def will_retry(self, error: BaseException, attempt: int) -> bool:
        """Whether a failure of ``attempt`` (0-based) with ``error`` leads to another attempt."""
        return attempt < self.max_retries and self.retryable(error)

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (1-based) after ``error``: the backoff, or the error's
        ``retry_after`` (bounded by ``max_retry_after``) when that is longer."""
        wait = (self.backoff or default_backoff)(attempt)
        hint = getattr(error, "retry_after", None)
        if isinstance(hint, int | float) and hint > wait:
            wait = max(wait, min(float(hint), self.max_retry_after))
        return wait


class RetryChatModel:
    """A chat model retrying ``inner`` as ``config`` says (see the module docstring)."""

    def __init__(self, inner: ChatModel, config: ModelRetryConfig) -> None:
        if config.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {config.max_retries}")
        self.inner = inner
        # it returns what a call of inner returned
        self.checks_messages = getattr(inner, "checks_messages", False) is True
        self.config = config

    def with_tools(self, tools: Sequence[ToolInfo]) -> RetryChatModel:
        return RetryChatModel(self.inner.with_tools(tools), self.config)

    def __repr__(self) -> str:
        return f"RetryChatModel({self.inner!r}, max_retries={self.config.max_retries})"

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._retrying(lambda: self.inner.generate(messages, **opts))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        async def attempt() -> StreamReader[Message]:
            reader = await self.inner.stream(messages, **opts)
            check, keep = reader.copy(2)
            error = await _read_to_end(check)
            if error is None:
                return keep
            await keep.aclose()
            raise error

        return await self._retrying(attempt)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, tried again after each retryable error, waiting ``config.delay`` between tries."""
        config = self.config
        last: BaseException | None = None
        for n in range(config.max_retries + 1):
            token = current_attempt.set(n)
            try:
                return await attempt()
            except Exception as exc:
                if not config.retryable(exc):
                    raise
                last = exc
            finally:
                current_attempt.reset(token)
            if n < config.max_retries:
                await anyio.sleep(config.delay(n + 1, last))
        assert last is not None
        raise RetryExhaustedError(last, config.max_retries) from last


async def _read_to_end(reader: StreamReader[Message]) -> Exception | None:
    """Read ``reader`` to its end and close it; the first error item, or None for a clean stream."""
    try:
        async for _ in reader:
            pass
    except Exception as exc:
        return exc
    finally:
        await reader.aclose()
    return None
