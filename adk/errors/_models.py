"""Errors of an agent's model calls: retries, failover and structured output."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = ["FailoverError", "RetryExhaustedError", "StructuredOutputError", "WillRetryError"]


class RetryExhaustedError(AgentError):
    """Every attempt of a model call failed with a retryable error ("exceeds max retries")."""

    reason = "retry_exhausted"

    def __init__(self, last_error: BaseException, total_retries: int) -> None:
        super().__init__(f"exceeds max retries ({total_retries} retries), last error: {last_error}")
        self.last_error = last_error
        self.total_retries = total_retries


class WillRetryError(AgentError):
    """The last item of a failed model attempt's event stream when the call will be retried.

    ``err_str`` is the failure's text, ``retry_attempt`` the attempt that failed (0-based); the original
    exception is ``__cause__``.
    """

    reason = "will_retry"

    def __init__(self, err_str: str, retry_attempt: int) -> None:
        super().__init__(f"model attempt {retry_attempt} failed and will be retried: {err_str}")
        self.err_str = err_str
        self.retry_attempt = retry_attempt


class FailoverError(AgentError):
    """Model failover (``ModelFailoverConfig``) could not pick the next model: ``get_failover_model`` returned
    no model at ``attempt`` (Eino: "failover GetFailoverModel returned nil model at attempt N")."""

    reason = "failover"

    def __init__(self, attempt: int) -> None:
        super().__init__(f"failover GetFailoverModel returned nil model at attempt {attempt}")
        self.attempt = attempt


class StructuredOutputError(AgentError):
    """No answer matched the agent's ``output_type``: the first answer and ``output_retries`` more were invalid.

    ``raw`` is the last answer as the model gave it (the text, or the ``final_answer`` tool's arguments),
    ``error`` why it was rejected, ``attempts`` how many answers were checked.
    """

    reason = "structured_output"

    def __init__(self, output_type: str, raw: str, error: str, attempts: int) -> None:
        super().__init__(
            f"no valid {output_type} after {attempts} answers; last error: {error}; last answer: {raw[:200]!r}"
        )
        self.output_type = output_type
        self.raw = raw
        self.error = error
        self.attempts = attempts
