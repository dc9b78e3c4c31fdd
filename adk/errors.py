"""The errors an agent run ends with (each arrives as the run's one error event, ``AgentEvent.error``).

::

    ComposeError (compose.errors)
    └── AgentError                      base of the agent kit's own failures
        ├── ExceedMaxIterationsError    the model was about to be called more than ``max_iterations`` times
        ├── TokenBudgetExceededError    the run's token usage reached ``max_budget_tokens``
        ├── StallDetectedError          the same tool was called ``stall_window`` times in a row
        ├── AgentTimeoutError           the run took longer than ``timeout`` (also a ``TimeoutError``)
        ├── RetryExhaustedError         every model retry failed; ``.last_error``, ``.total_retries``
        ├── WillRetryError              ends the event stream of a failed model attempt that will be retried
        └── SessionError                a conversation (``adk.sessions``) cannot be run, read or stored
            ├── SessionBusyError        another run on the session is in flight; ``.session_id``, ``.holder``
            ├── SessionLeaseLostError   the run's lease on its session was lost (taken after expiry, or the
            │                           session was deleted): nothing was appended
            └── SessionStoreError       a session store's database failed; cause in ``__cause__``
    └── CheckpointError (compose.errors, also a ValueError)
        └── CheckpointNotFoundError     ``runner.resume`` was given an id with no checkpoint (``reason="not_found"``;
                                        compose's class, re-exported here)
"""

from __future__ import annotations

from compose.errors import CheckpointNotFoundError, ComposeError

__all__ = [
    "AgentError",
    "AgentTimeoutError",
    "CheckpointNotFoundError",
    "ExceedMaxIterationsError",
    "RetryExhaustedError",
    "SessionBusyError",
    "SessionError",
    "SessionLeaseLostError",
    "SessionStoreError",
    "StallDetectedError",
    "TokenBudgetExceededError",
    "WillRetryError",
]


class AgentError(ComposeError):
    """Base of the agent kit's failures; ``reason`` is the run's termination reason it stands for."""

    reason = "error"


class ExceedMaxIterationsError(AgentError):
    """Raised before a model call when the run already made ``max_iterations`` model calls (Eino's
    ``ErrExceedMaxIterations``)."""

    reason = "max_iterations"

    def __init__(self, max_iterations: int) -> None:
        super().__init__(f"exceeds max iterations ({max_iterations} model calls)")
        self.max_iterations = max_iterations


class TokenBudgetExceededError(AgentError):
    """Raised before a model call when the run's total token usage has reached ``max_budget_tokens``."""

    reason = "token_budget"

    def __init__(self, used_tokens: int, max_budget_tokens: int) -> None:
        super().__init__(f"token budget exceeded: {used_tokens} tokens used, budget {max_budget_tokens}")
        self.used_tokens = used_tokens
        self.max_budget_tokens = max_budget_tokens


class StallDetectedError(AgentError):
    """Raised before the next model call when the last ``window`` tool calls all called ``tool_name``."""

    reason = "stall"

    def __init__(self, tool_name: str, window: int) -> None:
        super().__init__(f"stall detected: tool '{tool_name}' was called {window} times in a row")
        self.tool_name = tool_name
        self.window = window


class AgentTimeoutError(AgentError, TimeoutError):
    """Raised when the run took longer than the agent's ``timeout`` (seconds)."""

    reason = "timeout"

    def __init__(self, timeout: float) -> None:
        super().__init__(f"agent run timed out after {timeout:g}s")
        self.timeout = timeout


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


class SessionError(AgentError):
    """A conversation kept in a session store (``adk.sessions``) cannot be run, read or stored."""

    reason = "session"


class SessionBusyError(SessionError):
    """A run was started on a session that has a run in flight (its lease is held), and did not wait for it
    (``Runner(session_wait=...)``) or waited in vain; raised by the run's first ``__anext__``, nothing ran.

    ``holder`` describes the lease holder (which process, until when) when the store knows it.
    """

    def __init__(self, session_id: str, holder: str = "", waited: float = 0.0) -> None:
        held = f" (held by {holder})" if holder else ""
        wait = f" after waiting {waited:g}s" if waited else ""
        super().__init__(f"session {session_id!r} has a run in flight{held}: not started{wait}")
        self.session_id = session_id
        self.holder = holder


class SessionLeaseLostError(SessionError):
    """A run's lease on its session was lost before it could append (it expired and another run took it, or the
    session was deleted meanwhile): nothing of the run was appended."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r}: this run's lease was lost (expired and taken by another run, or the session "
            "was deleted): its messages were not appended"
        )
        self.session_id = session_id


class SessionStoreError(SessionError):
    """A session store's database failed (unreachable, locked past its timeout, ...); cause in ``__cause__``."""
