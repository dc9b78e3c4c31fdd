"""Errors of chat model calls; ``retryable`` says whether trying again may help."""

from __future__ import annotations

from compose.errors._base import ComposeError

__all__ = [
    "ChatModelError",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelServerError",
    "ModelTimeoutError",
    "ResponseFormatUnsupportedError",
    "ScriptExhaustedError",
]


class ChatModelError(ComposeError):
    """A chat model call failed. ``retryable`` says whether trying again may help.

    ``status_code`` is the HTTP status when there was one; ``retry_after`` the wait in seconds the provider
    asked for (its ``Retry-After`` header, in seconds or as an HTTP date), which the agent's model retry honours.
    """

    retryable: bool = False

    def __init__(self, message: str, *, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class ModelRateLimitError(ChatModelError):
    """The provider rate-limited the request (HTTP 429). Retryable."""

    retryable = True


class ModelTimeoutError(ChatModelError):
    """The request timed out, or a streamed answer stalled (no data for the model's idle timeout). Retryable."""

    retryable = True


class ModelServerError(ChatModelError):
    """The provider failed (HTTP 5xx, connection error, or a stream that broke off). Retryable."""

    retryable = True


class ModelBadRequestError(ChatModelError):
    """The provider rejected the request (HTTP 400, 404, 422), or it cannot be sent (a request message with a
    lone surrogate, which UTF-8 cannot encode). Not retryable."""


class ResponseFormatUnsupportedError(ModelBadRequestError):
    """The server refused the request's ``response_format`` (structured output by JSON schema): an HTTP 4xx, or a
    5xx, whose error names ``response_format``, ``json_schema`` or ``json_object``, such as llama.cpp's server's
    HTTP 500 "Input should be 'text' or 'json_object'". Not retryable: the same request is refused again. An agent
    with ``output_mode="auto"`` falls back to its ``final_answer`` tool on it."""


class ModelAuthError(ChatModelError):
    """Authentication or permission failed (HTTP 401, 403). Not retryable."""


class ModelResponseError(ChatModelError):
    """The model answered with something that cannot be understood: a body or stream chunk of the wrong shape
    (quoted in the message), an answer that is not a JSON action, or a chat model returning something other
    than a ``Message``."""


class ScriptExhaustedError(ChatModelError):
    """A ScriptedChatModel was called more times than it has scripted responses."""
