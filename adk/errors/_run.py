"""Errors that end a run at one of its limits, or because it was cancelled (``adk.cancel``)."""

from __future__ import annotations

from typing import Any

from adk.errors._base import AgentError

__all__ = [
    "AgentCancelledError",
    "AgentTimeoutError",
    "ExceedMaxIterationsError",
    "StallDetectedError",
    "StreamCancelledError",
    "TokenBudgetExceededError",
]


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


class AgentCancelledError(AgentError):
    """The run was cancelled by ``run.cancel()`` (Eino's ``CancelError``; ``adk.cancel``): its last event's error.

    Attributes:
        mode: the cancel modes in force when it took effect (``{"immediate"}`` after an escalation).
        escalated: a safe-point cancel was escalated to immediate (by a later call, or its ``timeout``).
        timed_out: the escalation was the timeout's (the safe point was not reached in time).
        interrupt_contexts: where the run stopped (an interrupt's contexts: ids and addresses).
        checkpoint_id: the id the run was saved under (``runner.resume(checkpoint_id)`` continues it), or None
            when the run has no checkpoint store or id.
    """

    reason = "cancelled"

    def __init__(
        self,
        mode: frozenset[str],
        *,
        escalated: bool = False,
        timed_out: bool = False,
        interrupt_contexts: list[Any] | None = None,
        checkpoint_id: str | None = None,
    ) -> None:
        modes = ", ".join(sorted(mode))
        super().__init__(f"agent cancelled: mode={modes}, escalated={escalated}")
        self.mode = mode
        self.escalated = escalated
        self.timed_out = timed_out
        self.interrupt_contexts = list(interrupt_contexts or [])
        self.checkpoint_id = checkpoint_id


class StreamCancelledError(AgentError):
    """Ends an event's message stream that an immediate cancel cut off (Eino's ``ErrStreamCanceled``); the model
    call runs again when the run is resumed."""

    reason = "cancelled"

    def __init__(self) -> None:
        super().__init__("stream cancelled")
